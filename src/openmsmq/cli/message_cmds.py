"""``openmsmq send|receive|peek``."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import IO, Any

import click
from rich.console import Console
from rich.table import Table

from openmsmq.cli.context import CliContext, ctx_of, json_option, message_row
from openmsmq.client import SINGLE_MESSAGE, Access, Message
from openmsmq.errors import HResult, MQError

__all__ = ["peek", "receive", "register", "send"]

_PREVIEW = 60


def _preview(m: Message) -> str:
    try:
        text = m.body.decode("utf-8")
    except UnicodeDecodeError:
        text = "0x" + m.body[: _PREVIEW // 2].hex()
    return text if len(text) <= _PREVIEW else text[: _PREVIEW - 1] + "…"


def _table(msgs: list[Message]) -> None:
    if not msgs:
        click.echo("(no messages)")
        return
    table = Table("lookup id", "message id", "label", "class", "pri", "size", "sent (UTC)", "body")
    for m in msgs:
        sent = datetime.fromtimestamp(m.sent_time, UTC).strftime("%Y-%m-%d %H:%M:%S") if m.sent_time else "-"
        table.add_row(
            str(m.lookup_id),
            m.message_id,
            m.label,
            m.class_name,
            str(m.priority),
            str(len(m.body)),
            sent,
            _preview(m),
        )
    Console().print(table)


def _emit_messages(c: CliContext, queue: str, msgs: list[Message]) -> None:
    c.emit(
        {"queue": queue, "count": len(msgs), "messages": [message_row(m) for m in msgs]}, lambda: _table(msgs)
    )


@click.command()
@click.argument("queue")
@click.argument("body", required=False)
@click.option("--label", default="", help="Message label.")
@click.option(
    "--file", "path", type=click.File("rb"), default=None, help="Read the body from a file ('-' = stdin)."
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
@json_option
@click.pass_context
def send(
    ctx: click.Context,
    queue: str,
    body: str | None,
    label: str,
    path: IO[bytes] | None,
    count: int,
    priority: int,
    transactional: bool,
) -> None:
    """Send BODY (or --file, or stdin when neither is given) to QUEUE."""
    c = ctx_of(ctx)
    if body is not None and path is not None:
        raise click.UsageError("give BODY or --file, not both")
    if body is not None:
        data = body.encode("utf-8")
    elif path is not None:
        data = path.read()
    else:
        data = sys.stdin.buffer.read() if not sys.stdin.isatty() else b""
    with c.connection().open_queue(queue, Access.SEND) as q:
        receipts = q.send_many(
            [data] * count, label=label, priority=priority, tx=SINGLE_MESSAGE if transactional else None
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
@click.argument("queue")
@click.option(
    "--timeout", type=click.FloatRange(min=0), default=0.0, show_default=True, help="Seconds to wait."
)
@click.option(
    "--count", type=click.IntRange(min=1), default=1, show_default=True, help="Receive up to N messages."
)
@click.option("--transactional", is_flag=True, help="Receive in one transaction, committed before printing.")
@json_option
@click.pass_context
def receive(ctx: click.Context, queue: str, timeout: float, count: int, transactional: bool) -> None:
    """Receive (remove) up to --count messages from QUEUE; none within --timeout is an error."""
    c = ctx_of(ctx)
    conn = c.connection()
    with conn.open_queue(queue, Access.RECEIVE) as q:
        if transactional:
            with conn.transaction() as tx:
                msgs = _receive_up_to(q.receive_many, count, timeout, tx)
        else:
            msgs = _receive_up_to(q.receive_many, count, timeout, None)
    _emit_messages(c, queue, msgs)


def _receive_up_to(
    fn: Callable[[int, float, Any], list[Message]], count: int, timeout: float, tx: Any
) -> list[Message]:
    """Batches until ``count`` messages or a wait of ``timeout`` finds none (first wait: error)."""
    msgs: list[Message] = []
    while len(msgs) < count:
        try:
            msgs.extend(fn(count - len(msgs), timeout, tx))
        except MQError as exc:
            if exc.hresult != HResult.MQ_ERROR_IO_TIMEOUT or not msgs:
                raise
            break
    return msgs


@click.command()
@click.argument("queue")
@click.option(
    "--count", type=click.IntRange(min=1), default=1, show_default=True, help="Peek up to N messages."
)
@click.option(
    "--timeout", type=click.FloatRange(min=0), default=0.0, show_default=True, help="Seconds to wait."
)
@json_option
@click.pass_context
def peek(ctx: click.Context, queue: str, count: int, timeout: float) -> None:
    """Show up to --count messages of QUEUE without removing them."""
    c = ctx_of(ctx)
    with c.connection().open_queue(queue, Access.PEEK) as q:
        try:
            msgs = q.peek_many(count, timeout)
        except MQError as exc:
            if exc.hresult != HResult.MQ_ERROR_IO_TIMEOUT:
                raise
            msgs = []
    _emit_messages(c, queue, msgs)


def register(group: click.Group) -> None:
    """Add ``send``, ``receive`` and ``peek`` to the ``openmsmq`` group."""
    group.add_command(send)
    group.add_command(receive)
    group.add_command(peek)
