"""``openmsmq queue export QUEUE FILE`` and ``queue import QUEUE FILE``: a queue's
messages to a file and back, for backups of one queue, moving messages between queue
managers and test fixtures.

The file is JSON Lines: a header (``format``, ``version``, the queue and whether it is
transactional), one object per message in LookupIdentifier order (its properties as
:class:`~openmsmq.client.OutgoingMessage` names them, bytes as hex, and its
``lookup_id`` and ``message_id`` for reference), then a trailer with the count. Export
browses (removes nothing). Import reads the whole file first and refuses one without its
trailer or with a malformed line, so a truncated file imports nothing; into a
transactional queue every message goes in one transaction. Imported messages keep their
properties and order and get new identities (MessageId, LookupIdentifier) from the
importing queue manager, as any message sent there does.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import click

from openmsmq.cli.context import CommandError, ctx_of, json_option
from openmsmq.client.types import Access, AckRequest, Delivery, OutgoingMessage
from openmsmq.errors import HResult, MQError, quoted

if TYPE_CHECKING:
    from openmsmq.client import Message

__all__ = ["FORMAT", "VERSION", "export_queue", "import_queue", "register"]

FORMAT = "openmsmq-queue-export"
VERSION = 1
_PAGE = 256
_BYTES = {"body", "correlation_id", "extension"}
_FIELDS = [f.name for f in dataclasses.fields(OutgoingMessage)]


def _record(m: Message) -> dict[str, Any]:
    from openmsmq.client.dead_letters import outgoing_copy

    props = outgoing_copy(m)
    row: dict[str, Any] = {"lookup_id": m.lookup_id, "message_id": m.message_id}
    for name in _FIELDS:
        value = getattr(props, name)
        if name in _BYTES:
            value = value.hex()
        elif isinstance(value, int) and not isinstance(value, bool):
            value = int(value)  # enums (Delivery, AckRequest) as their numbers
        row[name] = value
    return row


def _message(row: dict[str, Any], line: int) -> OutgoingMessage:
    try:
        values = {k: row[k] for k in _FIELDS if k in row}
        for name in _BYTES & values.keys():
            values[name] = bytes.fromhex(values[name])
        if "delivery" in values:
            values["delivery"] = Delivery(values["delivery"])
        if "ack" in values:
            values["ack"] = AckRequest(values["ack"])
        return OutgoingMessage(**values)
    except (TypeError, ValueError, KeyError) as exc:
        raise CommandError(f"line {line}: not a message of this format ({exc})") from None


def export_queue(q: Any, info_transactional: bool, name: str, out: IO[str]) -> int:
    """Write the messages of the open queue ``q`` to ``out``; returns how many."""
    out.write(
        json.dumps({"format": FORMAT, "version": VERSION, "queue": name, "transactional": info_transactional})
    )
    out.write("\n")
    count = 0
    with q.cursor() as cursor:
        try:
            page = cursor.peek_many(_PAGE)
            while page:
                for m in page:
                    out.write(json.dumps(_record(m), ensure_ascii=False) + "\n")
                count += len(page)
                cursor.peek_next()  # step past the page, then read the next one
                page = cursor.peek_many(_PAGE)
        except MQError as exc:
            if exc.hresult != HResult.MQ_ERROR_IO_TIMEOUT:
                raise
    out.write(json.dumps({"end": True, "count": count}) + "\n")
    return count


def _read(path: Path) -> list[OutgoingMessage]:
    lines = path.read_text(encoding="utf-8").splitlines()
    try:
        header = json.loads(lines[0]) if lines else {}
    except json.JSONDecodeError:
        header = {}
    if header.get("format") != FORMAT or header.get("version") != VERSION:
        raise CommandError(f"{quoted(str(path))} is not a queue export of this version (no {FORMAT} header)")
    messages: list[OutgoingMessage] = []
    for number, text in enumerate(lines[1:], start=2):
        try:
            row = json.loads(text)
        except json.JSONDecodeError as exc:
            raise CommandError(f"{quoted(str(path))} line {number}: not JSON ({exc.msg})") from None
        if row.get("end") is True:
            if row.get("count") != len(messages) or number != len(lines):
                raise CommandError(f"{quoted(str(path))}: the trailer does not match the messages before it")
            return messages
        messages.append(_message(row, number))
    raise CommandError(f"{quoted(str(path))} ends without its trailer (cut short?): nothing was imported")


def import_queue(conn: Any, name: str, messages: list[OutgoingMessage]) -> int:
    """Send ``messages`` to queue ``name`` in their order (one transaction when it is
    transactional); returns how many."""
    transactional = conn.queue_info(name).transactional
    with conn.open_queue(name, Access.SEND) as q:
        if transactional:
            with conn.transaction() as tx:
                for first in range(0, len(messages), _PAGE):
                    q.send_many(messages[first : first + _PAGE], tx=tx)
        else:
            for first in range(0, len(messages), _PAGE):
                q.send_many(messages[first : first + _PAGE])
    return len(messages)


@click.command("export")
@click.argument("queue")
@click.argument("path", metavar="FILE", type=click.Path(dir_okay=False, path_type=Path))
@json_option
@click.pass_context
def export(ctx: click.Context, queue: str, path: Path) -> None:
    """Write every message of QUEUE (properties, bodies, in LookupIdentifier order) to
    FILE, a new file (JSON Lines); the messages stay in the queue."""
    c = ctx_of(ctx)
    conn = c.connection()
    info = conn.queue_info(queue)
    partial = path.with_name(path.name + ".partial")
    if path.exists():
        raise FileExistsError(17, "exists already: choose a new name", str(path))
    try:
        with conn.open_queue(queue, Access.PEEK) as q, open(partial, "w", encoding="utf-8") as out:
            count = export_queue(q, info.transactional, queue, out)
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)
    c.emit({"queue": queue, "exported": count, "file": str(path)},
           lambda: click.echo(f"exported {count} message(s) of {queue} to {path}"))  # fmt: skip


@click.command("import")
@click.argument("queue")
@click.argument("path", metavar="FILE", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@json_option
@click.pass_context
def import_(ctx: click.Context, queue: str, path: Path) -> None:
    """Send the messages of FILE (from `queue export`) to QUEUE, in their order and with
    their properties; a truncated or malformed FILE imports nothing."""
    c = ctx_of(ctx)
    messages = _read(path)
    count = import_queue(c.connection(), queue, messages)
    c.emit({"queue": queue, "imported": count, "file": str(path)},
           lambda: click.echo(f"imported {count} message(s) from {path} to {queue}"))  # fmt: skip


def register(group: click.Group) -> None:
    """Add ``queue export`` and ``queue import`` to the ``queue`` group."""
    queue = group.commands["queue"]
    assert isinstance(queue, click.Group)
    queue.add_command(export)
    queue.add_command(import_)
