"""``openmsmq dlq list|show|requeue|purge``: inspect and repair the dead-letter queues.

A queue manager keeps two system dead-letter queues (MS-MQDMPR 3.1.1.1):
``system$;deadxact`` (SystemTransactionalDeadletterQueue, ``--xact``) for transactional
messages and ``system$;deadletter`` (SystemDeadletterQueue, ``--non-xact``) for the
others. A message lands there with its Message.Class set to why (MS-MQMQ 2.2.18.1.6),
e.g. NACK_RECEIVE_TIMEOUT when its TimeToBeReceived ran out in its queue; its
destination queue is kept in the message (``Message.queue``).

Everything goes through the public client API (:mod:`openmsmq.client`), so the
commands work on a data directory and over remote read alike.

Requeue moves a message back to its destination queue (or ``--to``) as a new
message with the same body and properties; the queue manager gives it a new
Identifier and a new LookupIdentifier (identity is assigned at send, MS-MQMQ 2.2.8),
and its SentTime restarts, so a TimeToBeReceived counts again from the requeue
(``--no-expiry`` drops the time limits). The report maps old to new Identifiers.

* Transactional dead letters: the receive from ``system$;deadxact`` and the send to
  the destination are ONE transaction (per destination and batch): the message is
  either back in its queue exactly once or still in the dead-letter queue.
* Non-transactional dead letters cannot join a transaction (MS-MQQB 1.3.3: a
  non-transactional message goes only to a non-transactional queue, and a transaction
  only reads transactional queues). They are locked with a two-phase receive, sent
  (durable on return), then ACKed; a crash between the send and the ACK leaves the
  message in both places (at least once), never in neither.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click
from rich import box
from rich.table import Table

from openmsmq.cli.context import CliContext, confirm, console, ctx_of, json_option
from openmsmq.client.dead_letters import (
    DEAD_LETTER_QUEUES,
    DeadLetter,
    dead_letter_kinds,
    find_dead_letter,
    iter_dead_letters,
    purge_dead_letters,
    requeue,
)
from openmsmq.client.types import Access
from openmsmq.wire.constants import describe_message_class

if TYPE_CHECKING:
    pass

__all__ = ["dlq", "register"]


def _when(seconds: int) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S") if seconds else "-"


def _age(seconds: int | None) -> str:
    if seconds is None:
        return "-"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _list_table(rows: list[dict[str, Any]]) -> None:
    if not rows:
        click.echo("(no dead letters)")
        return
    # The lookup id is what show / requeue / purge take; the message Identifier is in
    # ``show`` and ``--json`` (it and the size make the table too wide for 80 columns).
    table = Table(box=box.SIMPLE_HEAD)
    table.add_column("dlq", no_wrap=True)
    table.add_column("lookup id", no_wrap=True, justify="right")
    table.add_column("reason", no_wrap=True)
    table.add_column("meant for", overflow="fold")
    table.add_column("label", max_width=16, overflow="ellipsis")
    table.add_column("age", no_wrap=True, justify="right")
    for r in rows:
        table.add_row(
            r["dlq"],
            str(r["lookup_id"]),
            r["reason"],
            r["destination"] or "-",
            r["label"],
            _age(r["age_seconds"]),
        )
    console().print(table)


def _details(r: dict[str, Any]) -> None:
    table = Table("property", "value", show_header=False)
    for key, value in (
        ("dead-letter queue", r["dlq_queue"]),
        ("reason", f"{describe_message_class(r['class'])}: {r['reason_text']}"),
        ("meant for", r["destination"] or "-"),
        ("lookup id", str(r["lookup_id"])),
        ("message id", r["message_id"]),
        ("label", r["label"]),
        ("size", str(r["body_size"])),
        ("sent (UTC)", _when(r["sent_time"])),
        ("arrived (UTC)", _when(r["arrived_time"])),
        ("age", _age(r["age_seconds"])),
        ("time to be received", str(r["time_to_be_received"])),
        ("time to reach queue", str(r["time_to_reach_queue"])),
        ("transactional", "yes" if r["transactional"] else "no"),
        ("admin queue", r["admin_queue"] or "-"),
        ("response queue", r["response_queue"] or "-"),
        ("body", r["body"] if r["body"] is not None else "0x" + r["body_hex"]),
    ):
        table.add_row(key, value)
    console().print(table)


def _kind_options(fn: Any) -> Any:
    fn = click.option("--non-xact", is_flag=True, help="Only the non-transactional queue (DEADLETTER).")(fn)
    return click.option("--xact", is_flag=True, help="Only the transactional queue (DEADXACT).")(fn)


@click.group()
def dlq() -> None:
    """Inspect, requeue and purge dead-lettered messages (DEADXACT and DEADLETTER)."""


@dlq.command("list")
@_kind_options
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=100,
    show_default=True,
    help="At most N messages (0 = all).",
)
@json_option
@click.pass_context
def list_(ctx: click.Context, xact: bool, non_xact: bool, limit: int) -> None:
    """List dead letters: why each is there, the queue it was meant for, ids, age."""
    c = ctx_of(ctx)
    now = time.time()
    rows: list[dict[str, Any]] = []
    truncated = False
    for letter in iter_dead_letters(c.connection(), dead_letter_kinds(xact, non_xact)):
        if limit and len(rows) >= limit:
            truncated = True
            break
        rows.append(letter.to_dict(now))
    c.emit({"count": len(rows), "truncated": truncated, "dead_letters": rows}, lambda: _list_table(rows))
    if truncated and not c.json:
        click.echo(f"(first {limit} shown; --limit 0 for all)")


@dlq.command("show")
@click.argument("ident", metavar="ID")
@_kind_options
@json_option
@click.pass_context
def show(ctx: click.Context, ident: str, xact: bool, non_xact: bool) -> None:
    """Show one dead letter by LookupIdentifier or message Identifier ({GUID}\\N)."""
    c = ctx_of(ctx)
    row = find_dead_letter(c.connection(), ident, dead_letter_kinds(xact, non_xact)).to_dict(time.time())
    c.emit({"dead_letter": row}, lambda: _details(row))


def _selected(c: CliContext, idents: tuple[str, ...], every: bool, kinds: list[str]) -> list[DeadLetter]:
    if bool(idents) == every:
        raise click.UsageError("give message IDs or --all (not both)")
    conn = c.connection()
    if every:
        return list(iter_dead_letters(conn, kinds))
    return [find_dead_letter(conn, i, kinds) for i in idents]


@dlq.command("requeue")
@click.argument("idents", nargs=-1, metavar="[ID]...")
@click.option("--all", "every", is_flag=True, help="Every message of the selected dead-letter queues.")
@click.option("--to", "to", default=None, help="Send to QUEUE instead of each message's destination.")
@click.option(
    "--no-expiry", is_flag=True, help="Drop TimeToBeReceived / TimeToReachQueue of the requeued copies."
)
@_kind_options
@json_option
@click.pass_context
def requeue_cmd(
    ctx: click.Context,
    idents: tuple[str, ...],
    every: bool,
    to: str | None,
    no_expiry: bool,
    xact: bool,
    non_xact: bool,
) -> None:
    """Move dead letters back to the queue they were meant for (or --to QUEUE).

    Each requeued message gets a new Identifier and LookupIdentifier. Exit status 1
    when any message could not be moved (it stays in its dead-letter queue).
    """
    c = ctx_of(ctx)
    letters = _selected(c, idents, every, dead_letter_kinds(xact, non_xact))
    results = requeue(c.connection(), letters, to, keep_expiry=not no_expiry)
    moved = [r for r in results if r.ok]
    failed = [r for r in results if not r.ok]

    def human() -> None:
        click.echo(f"requeued {len(moved)} message(s)")
        for r in failed:
            click.echo(f"not requeued {r.letter.message.lookup_id} -> {r.to or '?'}: {r.error}", err=True)

    c.emit(
        {"requeued": [r.to_dict() for r in moved], "failed": [r.to_dict() for r in failed]},
        human,
    )
    if failed:
        ctx.exit(1)


@dlq.command("purge")
@click.argument("idents", nargs=-1, metavar="[ID]...")
@click.option("--yes", is_flag=True, help="Do not ask (needed when stdin is not a terminal).")
@_kind_options
@json_option
@click.pass_context
def purge(ctx: click.Context, idents: tuple[str, ...], yes: bool, xact: bool, non_xact: bool) -> None:
    """Delete the given dead letters, or (no ID) every message of the dead-letter queues."""
    c = ctx_of(ctx)
    kinds = dead_letter_kinds(xact, non_xact)
    conn = c.connection()
    if idents:
        letters = [find_dead_letter(conn, i, kinds) for i in idents]
        counts = dict.fromkeys(kinds, 0)
        for letter in letters:
            with conn.open_queue(letter.queue, Access.RECEIVE) as q:
                q.receive_by_lookup_id(letter.message.lookup_id)
            counts[letter.kind] += 1
    else:
        confirm("delete every message of " + " and ".join(DEAD_LETTER_QUEUES[k] for k in kinds), yes)
        counts = purge_dead_letters(conn, kinds)
    total = sum(counts.values())
    c.emit({"purged": counts}, lambda: click.echo(f"purged {total} dead letter(s)"))


def register(group: click.Group) -> None:
    """Add ``dlq`` to the ``openmsmq`` group."""
    group.add_command(dlq)
