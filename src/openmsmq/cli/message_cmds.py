"""``openmsmq send|receive|peek``."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import IO, TYPE_CHECKING, Any, TypeVar

import click

from openmsmq.cli.context import CliContext, CommandError, ctx_of, json_option, message_row
from openmsmq.cli.interrupt import InterruptGuard
from openmsmq.cli.receiving import (
    FORMATS,
    RECEIVE_BATCH,
    Output,
    output_form,
    peek_follow,
    receive_batches,
)
from openmsmq.cli.sending import LINES_BATCH, NotUtf8Line, line_batches
from openmsmq.client.types import Access, AckRequest
from openmsmq.errors import HResult, MQError, quoted

if TYPE_CHECKING:
    from openmsmq.client import Message, Queue, SendReceipt, Transaction

__all__ = ["peek", "receive", "register", "send"]

F = TypeVar("F", bound=Callable[..., Any])

#: ``send --ack`` names: AcknowledgementsRequested bits (MS-MQMQ 2.2.19.3).
_ACKS = {
    "reach": AckRequest.POS_ARRIVAL,
    "receive": AckRequest.POS_RECEIVE,
    "nack-reach": AckRequest.NEG_ARRIVAL,
    "nack-receive": AckRequest.NEG_RECEIVE,
    "full": AckRequest.POS_ARRIVAL | AckRequest.POS_RECEIVE | AckRequest.NEG_ARRIVAL | AckRequest.NEG_RECEIVE,
}


def _emit_messages(c: CliContext, queue: str, msgs: list[Message], form: str) -> None:
    if form == "document":
        c.emit({"queue": queue, "count": len(msgs), "messages": [message_row(m) for m in msgs]}, lambda: None)
    elif form == "table" or msgs:
        Output(form, queue).batch(msgs)


def _output_options(fn: F) -> F:
    fn = click.option(
        "--body-only", "body_only", is_flag=True, help="Print only the bodies, one per line (--format raw)."
    )(fn)
    fn = click.option(
        "--format",
        "fmt",
        type=click.Choice(FORMATS),
        default=None,
        help="table (default), json (one JSON object per message and line), raw (the bodies, one per line).",
    )(fn)
    return click.option(
        "--follow",
        is_flag=True,
        help="Keep waiting for messages and print each as it comes, until Ctrl-C (or --count).",
    )(fn)


def _send_lines(q: Queue, props: dict[str, Any]) -> list[SendReceipt]:
    """Each line of stdin as a message (:mod:`openmsmq.cli.sending`); a batch being sent
    is finished (and committed) before Ctrl-C or a bad line stops the command."""
    receipts: list[SendReceipt] = []
    try:
        with InterruptGuard() as guard:
            for batch in line_batches(sys.stdin.buffer):
                with guard.critical():
                    receipts += q.send_many(batch, **props)
    except KeyboardInterrupt:
        click.echo(f"sent {len(receipts)} message(s) to {q.name} before the interrupt", err=True)
        raise
    except NotUtf8Line as exc:
        raise CommandError(
            f"{exc}: the {len(receipts)} line(s) before it were sent, it and the lines after it were not"
        ) from None
    return receipts


def _by_id_options(fn: F) -> F:
    fn = click.option(
        "--correlation-id",
        "correlation_id",
        default=None,
        help="Only the first message with this CorrelationId ({GUID}\\number).",
    )(fn)
    return click.option(
        "--id", "message_id", default=None, help="Only the message with this MessageId ({GUID}\\number)."
    )(fn)


def _one_by_id(
    c: CliContext,
    queue: str,
    message_id: str | None,
    correlation_id: str | None,
    remove: bool,
    transactional: bool,
    form: str,
) -> None:
    """The message with a MessageId or CorrelationId, printed; received (``remove``) only
    once printed: in a transaction committed after the output with ``transactional``."""
    if message_id is not None and correlation_id is not None:
        raise click.UsageError("give --id or --correlation-id, not both")
    conn = c.connection()
    with conn.open_queue(queue, Access.RECEIVE if remove else Access.PEEK) as q:

        def peek_one() -> Message:
            if message_id is not None:
                return q.peek_by_id(message_id)
            return q.peek_by_correlation_id(correlation_id or "")

        def receive_one(tx: Transaction | None = None) -> Message:
            if message_id is not None:
                return q.receive_by_id(message_id, tx)
            return q.receive_by_correlation_id(correlation_id or "", tx)

        if not remove:
            _emit_messages(c, queue, [peek_one()], form)
            return
        with InterruptGuard() as guard, guard.critical():
            if transactional:
                with conn.transaction() as tx:  # aborted (the message stays) if printing fails
                    _emit_messages(c, queue, [receive_one(tx)], form)
            else:
                _emit_messages(c, queue, [receive_one()], form)


@click.command()
@click.argument("queue")
@click.argument("body", required=False)
@click.option("--label", default="", help="Message label.")
@click.option(
    "--file",
    "paths",
    type=click.File("rb"),
    multiple=True,
    help="A message whose body is this file ('-' = stdin); repeat for one message per file.",
)
@click.option(
    "--lines",
    is_flag=True,
    help=f"One message per line of stdin (UTF-8), sent as lines come in batches of up to {LINES_BATCH}"
    " (each one transaction with --transactional).",
)
@click.option(
    "--count", type=click.IntRange(min=1), default=1, show_default=True, help="Send N copies (one batch)."
)
@click.option(
    "--priority", type=click.IntRange(0, 7), default=3, show_default=True, help="0-7 (non-transactional)."
)
@click.option(
    "--transactional", is_flag=True, help="Send in one transaction (needed by transactional queues)."
)
@click.option("--admin-queue", "admin_queue", default="", help="Administration queue for acknowledgments.")
@click.option(
    "--ack",
    "acks",
    multiple=True,
    type=click.Choice(sorted(_ACKS)),
    help="Acknowledgments to request (repeatable; needs --admin-queue).",
)
@click.option(
    "--dead-letter/--no-dead-letter",
    "dead_letter",
    default=None,
    help="Negative source journaling: a copy in a dead-letter queue if it is not delivered (a"
    " transactional message: this QM's transactional dead-letter queue; another: the dead-letter"
    " queue of the QM that could not deliver it). Default: on with --transactional, else off.",
)
@click.option("--journal", is_flag=True, help="Positive source journaling: journal it once received.")
@json_option
@click.pass_context
def send(
    ctx: click.Context,
    queue: str,
    body: str | None,
    label: str,
    paths: tuple[IO[bytes], ...],
    lines: bool,
    count: int,
    priority: int,
    transactional: bool,
    admin_queue: str,
    acks: tuple[str, ...],
    dead_letter: bool | None,
    journal: bool,
) -> None:
    """Send BODY (or each --file, or each line of stdin with --lines, or stdin when none is
    given) to QUEUE.

    With --lines a line that is not UTF-8 stops the command (status 1) naming its number:
    the lines before it are sent, it and the lines after it are not."""
    c = ctx_of(ctx)
    if acks and not admin_queue:
        raise click.UsageError("--ack needs --admin-queue")
    ack = AckRequest.NONE
    for name in acks:
        ack |= _ACKS[name]
    extra: dict[str, Any] = {}
    if admin_queue:
        extra.update(admin_queue=admin_queue, ack=ack)
    if dead_letter is not None:
        extra["dead_letter"] = dead_letter  # else the send's default (on when transactional)
    if journal:
        extra["journal"] = True
    if sum((body is not None, bool(paths), lines)) > 1:
        raise click.UsageError("give one of BODY, --file, --lines")
    if lines and count != 1:
        raise click.UsageError("--count sends copies of one body: not with --lines")
    from openmsmq.client import SINGLE_MESSAGE

    extra.update(label=label, priority=priority, tx=SINGLE_MESSAGE if transactional else None)
    conn = c.connection()
    with conn.open_queue(queue, Access.SEND) as q:
        if lines:
            receipts = _send_lines(q, extra)
        else:
            if body is not None:
                bodies = [body.encode("utf-8")]
            elif paths:
                bodies = [f.read() for f in paths]
            else:
                bodies = [sys.stdin.buffer.read() if not sys.stdin.isatty() else b""]
            receipts = q.send_many(bodies * count, **extra)
    if conn.transport.in_process and conn.queue_info(queue).kind == "outgoing":
        click.echo(
            f"warning: the queue manager at {quoted(c.target)} is not running: the message(s) wait"
            f" in its outgoing queue to {quoted(queue)} until 'openmsmq serve' runs over it",
            err=True,
        )
    c.emit(
        {
            "queue": queue,
            "sent": len(receipts),
            "messages": [{"message_id": r.message_id, "lookup_id": r.lookup_id} for r in receipts],
        },
        lambda: click.echo(f"sent {len(receipts)} message(s) to {queue}"),
    )


@click.command()
@click.argument("queue", required=False)
@click.option(
    "--admin-queue",
    "admin_queue",
    default=None,
    help="Receive acknowledgments from this administration queue (instead of QUEUE).",
)
@click.option(
    "--timeout", type=click.FloatRange(min=0), default=0.0, show_default=True, help="Seconds to wait."
)
@click.option(
    "--count",
    type=click.IntRange(min=1),
    default=None,
    help="Receive up to N messages (default 1; with --follow: no limit).",
)
@click.option(
    "--transactional",
    is_flag=True,
    help=f"Receive in transactions of up to {RECEIVE_BATCH} messages, each committed once printed.",
)
@_by_id_options
@_output_options
@json_option
@click.pass_context
def receive(
    ctx: click.Context,
    queue: str | None,
    admin_queue: str | None,
    timeout: float,
    count: int | None,
    transactional: bool,
    message_id: str | None,
    correlation_id: str | None,
    follow: bool,
    fmt: str | None,
    body_only: bool,
) -> None:
    """Receive (remove) up to --count messages from QUEUE (or --admin-queue: acknowledgments,
    shown with their class and the message they acknowledge); none within --timeout is an error.

    Messages are printed (and flushed) before they leave the queue, in batches of up to
    256. Ctrl-C stops after the batch being printed (exit status 130): a message is either
    printed and removed, or still in its queue. Without --transactional a batch is
    removed as it is received; a process killed (kill -9) between that and the printing
    loses it, which --transactional prevents.

    --follow waits for more messages until Ctrl-C, printing each batch as it comes; the
    same rule holds for the messages of the batch being printed when Ctrl-C comes."""
    if (queue is None) == (admin_queue is None):
        raise click.UsageError("give QUEUE or --admin-queue (one of them)")
    c = ctx_of(ctx)
    form = output_form(c, fmt, body_only)
    name = queue or admin_queue or ""
    if message_id is not None or correlation_id is not None:
        if follow:
            raise click.UsageError("--follow receives every message: not with --id / --correlation-id")
        _one_by_id(c, name, message_id, correlation_id, True, transactional, form)
        return
    receive_batches(c, name, count, timeout, transactional, follow=follow, form=form)


@click.command()
@click.argument("queue")
@click.option(
    "--count",
    type=click.IntRange(min=1),
    default=None,
    help="Peek up to N messages (default 1; with --follow: no limit).",
)
@click.option(
    "--timeout", type=click.FloatRange(min=0), default=0.0, show_default=True, help="Seconds to wait."
)
@_by_id_options
@_output_options
@json_option
@click.pass_context
def peek(
    ctx: click.Context,
    queue: str,
    count: int | None,
    timeout: float,
    message_id: str | None,
    correlation_id: str | None,
    follow: bool,
    fmt: str | None,
    body_only: bool,
) -> None:
    """Show up to --count messages of QUEUE without removing them (--follow: then each
    message that arrives, until Ctrl-C)."""
    c = ctx_of(ctx)
    form = output_form(c, fmt, body_only)
    if message_id is not None or correlation_id is not None:
        if follow:
            raise click.UsageError("--follow shows every message: not with --id / --correlation-id")
        _one_by_id(c, queue, message_id, correlation_id, False, False, form)
        return
    if follow:
        peek_follow(c, queue, count, form)
        return
    with c.connection().open_queue(queue, Access.PEEK) as q:
        try:
            msgs = q.peek_many(count or 1, timeout)
        except MQError as exc:
            if exc.hresult != HResult.MQ_ERROR_IO_TIMEOUT:
                raise
            msgs = []
    _emit_messages(c, queue, msgs, form)


def register(group: click.Group) -> None:
    """Add ``send``, ``receive`` and ``peek`` to the ``openmsmq`` group."""
    group.add_command(send)
    group.add_command(receive)
    group.add_command(peek)
