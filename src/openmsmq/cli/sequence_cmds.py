"""``openmsmq sequence``: the incoming transactional sequences of a queue manager.

``sequence list`` shows each sequence (sender QM, destination, IncomingTxSequenceID /
Number, RejectCount, LastAccessTime) and, on a running QM, the message it last rejected
since it last accepted one. ``sequence reset`` puts a sequence that keeps rejecting its
sender's messages where the sender's next message is accepted, after a confirmation
(``--yes`` skips it): see docs/operations.md, "Incoming sequences".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click
from rich.table import Table

from openmsmq.cli.context import console, ctx_of, json_option
from openmsmq.errors import HResult, MQError

if TYPE_CHECKING:
    from openmsmq.remote.status import IncomingSequenceStatus

__all__ = ["parse_position", "register", "sequence"]


def _seq_id(value: int) -> str:
    return f"{value:#018x}"


def parse_position(text: str) -> tuple[int, int]:
    """``SEQID:NUMBER``: TxSequenceID as ``0x``-hex (as listed) or decimal, and a
    TxSequenceNumber; raises :class:`click.BadParameter`."""
    sid, sep, number = text.rpartition(":")
    try:
        if not sep:
            raise ValueError
        value = int(sid, 0)
        n = int(number)
    except ValueError:
        raise click.BadParameter(
            f"expected SEQID:NUMBER (e.g. 0x6ab13f6800000001:42), got {text!r}"
        ) from None
    if not (0 < value <= 0xFFFFFFFFFFFFFFFF and 0 <= n <= 0xFFFFFFFF):
        raise click.BadParameter("TxSequenceID is 1..2^64-1, TxSequenceNumber 0..2^32-1")
    return value, n


def _describe(i: IncomingSequenceStatus) -> str:
    last = "none seen" if not i.last_reject_reason else (
        f"{i.last_reject_reason}: TxSequenceID {_seq_id(i.last_reject_tx_sequence_id)} number"
        f" {i.last_reject_number}, previous {i.last_reject_previous}"
    )  # fmt: skip
    return (
        f"incoming sequence of QM {i.source_qm} for {i.destination}\n"
        f"  now: TxSequenceID {_seq_id(i.tx_sequence_id)} number {i.tx_sequence_number},"
        f" {i.reject_count} rejection(s) since the last acceptance\n"
        f"  last rejected message: {last}"
    )


@click.group("sequence")
def sequence() -> None:
    """Incoming transactional sequences (list, reset)."""


@sequence.command("list")
@json_option
@click.pass_context
def list_sequences(ctx: click.Context) -> None:
    """List the incoming sequences, with the message each last rejected (running QM)."""
    c = ctx_of(ctx)
    st = c.connection().transport.status()
    rows = [
        {
            "source_qm": i.source_qm, "destination": i.destination, "tx_sequence_id": i.tx_sequence_id,
            "tx_sequence_number": i.tx_sequence_number, "reject_count": i.reject_count,
            "last_access_time": i.last_access_time, "last_reject_reason": i.last_reject_reason or None,
            "last_reject_tx_sequence_id": i.last_reject_tx_sequence_id or None,
            "last_reject_number": i.last_reject_number if i.last_reject_reason else None,
            "last_reject_previous": i.last_reject_previous if i.last_reject_reason else None,
        }
        for i in st.incoming
    ]  # fmt: skip

    def human() -> None:
        table = Table(
            "sender QM", "destination", "IncomingTxSequenceID", "number", "rejects", "last rejected",
            title="incoming sequences", title_justify="left",
        )  # fmt: skip
        for i in st.incoming:
            last = "-" if not i.last_reject_reason else (
                f"{i.last_reject_reason} {_seq_id(i.last_reject_tx_sequence_id)}"
                f" #{i.last_reject_number} (prev {i.last_reject_previous})"
            )  # fmt: skip
            table.add_row(
                i.source_qm, i.destination, _seq_id(i.tx_sequence_id), str(i.tx_sequence_number),
                str(i.reject_count), last,
            )  # fmt: skip
        console().print(table if st.incoming else "incoming sequences: none")
        if not st.transfer:
            click.echo("(the QM is not running: the rejections it saw are not known)")

    c.emit(rows, human)


@sequence.command("reset")
@click.argument("source_qm")
@click.argument("destination")
@click.option(
    "--to", "position", default=None, metavar="SEQID:NUMBER",
    help="Set IncomingTxSequenceID / Number to these (the last message taken as accepted).",
)  # fmt: skip
@click.option(
    "--forget", is_flag=True, help="Forget the state: the next message that starts a sequence is accepted."
)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@json_option
@click.pass_context
def reset_sequence(
    ctx: click.Context, source_qm: str, destination: str, position: str | None, forget: bool, yes: bool
) -> None:
    """Reset the incoming sequence of SOURCE_QM for DESTINATION (as `sequence list` shows them).

    Without --to or --forget, the sequence is put where the message it last rejected is
    accepted (a running QM knows it): its TxSequenceID with its PreviousTxSequenceNumber, or
    no state when that message starts a sequence. Check the sender first: messages of
    that sequence that were stored already and that the sender sends again are stored twice.
    """
    c = ctx_of(ctx)
    if position is not None and forget:
        raise click.UsageError("give --to or --forget, not both")
    transport = c.connection().transport
    want = destination.lower()
    found = [
        i
        for i in transport.status().incoming
        if i.source_qm == source_qm.lower() and i.destination.lower() == want
    ]
    if not found:
        raise MQError(
            HResult.MQ_ERROR_INVALID_PARAMETER,
            f"no incoming sequence of QM {source_qm} for {destination} (openmsmq sequence list)",
        )
    current = found[0]
    if forget:
        target = (0, 0)
    elif position is not None:
        target = parse_position(position)
    elif current.last_reject_reason:
        previous = current.last_reject_previous
        target = (current.last_reject_tx_sequence_id, previous) if previous else (0, 0)
    else:
        raise click.UsageError(
            "no rejected message is known for this sequence (the QM is not running, or it rejected"
            " nothing since it restarted): give --to SEQID:NUMBER or --forget"
        )
    if not yes and not c.json:
        click.echo(_describe(current))
        after = "no state (the next message that starts a sequence is accepted)" if target == (0, 0) else (
            f"TxSequenceID {_seq_id(target[0])} number {target[1]}: the sender's message numbered"
            f" {target[1] + 1} of that sequence (previous {target[1]}) is accepted next"
        )  # fmt: skip
        click.echo(f"  reset to: {after}")
        click.confirm(
            "Messages of that sequence that were stored already and are sent again will be stored"
            " twice. Reset it?",
            abort=True,
        )
    before, after_pos = transport.reset_incoming_sequence(current.source_qm, current.destination, *target)
    doc = {
        "source_qm": current.source_qm, "destination": current.destination,
        "before": {"tx_sequence_id": before[0], "tx_sequence_number": before[1]},
        "after": {"tx_sequence_id": after_pos[0], "tx_sequence_number": after_pos[1]},
    }  # fmt: skip
    c.emit(
        doc,
        lambda: click.echo(
            f"reset: TxSequenceID {_seq_id(before[0])} number {before[1]} ->"
            f" {_seq_id(after_pos[0])} number {after_pos[1]}"
        ),
    )


def register(group: click.Group) -> None:
    """Add ``sequence`` to the ``openmsmq`` group."""
    group.add_command(sequence)
