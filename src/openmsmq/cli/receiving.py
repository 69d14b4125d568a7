"""``openmsmq receive``: messages are printed before they leave their queue.

A receive of ``--count N`` goes in batches of at most :data:`RECEIVE_BATCH`. Each batch is
received, written to stdout and flushed, and only then removed for good: with
``--transactional`` the batch is one transaction committed after the flush; without, it
is received (removed) and printed with Ctrl-C held off between the two (a
non-transactional receive removes at once, MS-MQDMPR 3.1.7.1.10). Waiting for messages
is a peek, which removes nothing, so Ctrl-C there stops at once. Ctrl-C inside a batch
takes effect when the batch is printed and committed (:mod:`openmsmq.cli.interrupt`), so
that messages printed + messages still in the queue = messages before, whenever it
comes; the command then ends its output (``--json``: a complete document with
``"interrupted": true``) and exits with status 130.

``--json`` is one document written as the batches come: ``queue``, then ``messages`` one
per line, then ``count`` and ``interrupted``. On a terminal's stderr, while stdout goes
to a file or a pipe, a receive of more than one batch shows its progress.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import click
from rich.table import Table

from openmsmq.cli.context import CliContext, console, error_document, message_row
from openmsmq.cli.interrupt import InterruptGuard
from openmsmq.client.types import Access
from openmsmq.errors import HResult, MQError, OpenMSMQError, quoted

if TYPE_CHECKING:
    from rich.progress import Progress

    from openmsmq.client import Connection, Message, Queue

__all__ = [
    "FOLLOW_SLICE",
    "FORMATS",
    "RECEIVE_BATCH",
    "Output",
    "output_form",
    "peek_follow",
    "print_messages",
    "receive_batches",
    "write_bytes",
    "write_out",
]

#: Messages received, printed and committed per step of a receive.
RECEIVE_BATCH = 256
#: Seconds one wait for messages of ``--follow`` lasts before it waits again (a wait is
#: a peek: Ctrl-C ends it at once; the slice bounds each call to the queue manager).
FOLLOW_SLICE = 1.0
_PREVIEW = 60


def _preview(m: Message) -> str:
    try:
        text = m.body.decode("utf-8")
    except UnicodeDecodeError:
        text = "0x" + m.body[: _PREVIEW // 2].hex()
    return text if len(text) <= _PREVIEW else text[: _PREVIEW - 1] + "…"


def write_out(text: str) -> None:
    """Write ``text`` to stdout in full and flushed, even when a signal comes meanwhile.

    Through ``sys.stdout`` (the text and buffer layers of :mod:`io`), a write blocked on a
    full pipe and cut short by a signal whose handler returns can lose the rest of its
    buffer without an error (CPython 3.11 does): the receive would then commit messages
    never shown. So the bytes go to the descriptor with ``os.write`` until all are out (a
    signal ends a write early with the count written, and the loop writes the rest).
    Without a descriptor (an embedding program's stdout) it writes through ``sys.stdout``.
    """
    out = sys.stdout
    try:
        fd = out.fileno()
    except (AttributeError, OSError, ValueError):
        out.write(text)
        out.flush()
        return
    out.flush()  # whatever was written before, first
    _write_fd(fd, text.encode(out.encoding or "utf-8", errors="replace"))


def _write_fd(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_bytes(data: bytes) -> None:
    """Write ``data`` to stdout as it is, in full and flushed (see :func:`write_out`)."""
    out = sys.stdout
    try:
        fd = out.fileno()
    except (AttributeError, OSError, ValueError):
        buffer = getattr(out, "buffer", None)
        if buffer is None:
            out.write(data.decode("utf-8", errors="replace"))
        else:
            buffer.write(data)
        out.flush()
        return
    out.flush()
    _write_fd(fd, data)


def print_messages(msgs: list[Message]) -> None:
    """Messages as a table on stdout (acknowledgments also show what they acknowledge)."""
    if not msgs:
        write_out("(no messages)\n")
        return
    acks = any(m.is_acknowledgment for m in msgs)
    columns = ["lookup id", "message id", "label", "class", "pri", "size", "sent (UTC)", "body"]
    if acks:
        columns.insert(4, "acknowledges")
    table = Table(*columns)
    for m in msgs:
        sent = datetime.fromtimestamp(m.sent_time, UTC).strftime("%Y-%m-%d %H:%M:%S") if m.sent_time else "-"
        row = [m.message_id, m.label, m.class_name, str(m.priority), str(len(m.body)), sent, _preview(m)]
        if acks:
            row.insert(3, m.acknowledged_message_id or "-")
        table.add_row(str(m.lookup_id), *row)
    out = console()
    with out.capture() as captured:  # rendered as for stdout, written in full by write_out
        out.print(table)
    write_out(captured.get())


#: ``--format`` of receive and peek: a table per batch, one JSON object per message and
#: line (JSON Lines), the bodies alone (each followed by a newline).
FORMATS = ("table", "json", "raw")


def output_form(c: CliContext, fmt: str | None, body_only: bool) -> str:
    """The output of a receive or peek: ``fmt`` (``--format``), ``raw`` for ``--body-only``,
    else ``document`` (one JSON document) with ``--json``, else ``table``."""
    if body_only:
        if fmt not in (None, "raw"):
            raise click.UsageError(f"--body-only is --format raw, not --format {fmt}")
        return "raw"
    if fmt is not None:
        return fmt
    return "document" if c.json else "table"


class Output:
    """The messages of a receive or peek on stdout, batch by batch, each written in full
    before :meth:`batch` returns (:func:`write_out`), in one of :data:`FORMATS` or as one
    JSON document (``document``, the ``--json`` form)."""

    def __init__(self, form: str, queue: str) -> None:
        self.form = form
        self.json = form == "document"
        self.queue = queue
        self.count = 0
        self._started = False

    def _head(self) -> str:
        return "" if self._started else '{\n  "queue": ' + json.dumps(self.queue) + ',\n  "messages": ['

    def batch(self, msgs: list[Message]) -> None:
        if self.json:
            lines = ",\n".join("    " + json.dumps(message_row(m), ensure_ascii=False) for m in msgs)
            write_out(self._head() + ("," if self._started else "") + "\n" + lines)
        elif self.form == "json":
            write_out("".join(json.dumps(message_row(m), ensure_ascii=False) + "\n" for m in msgs))
        elif self.form == "raw":
            write_bytes(b"".join(m.body + b"\n" for m in msgs))
        else:
            print_messages(msgs)
        self._started = True
        self.count += len(msgs)

    def end(self, interrupted: bool, error: OpenMSMQError | None = None) -> None:
        """Close the document (JSON). Before the first batch there is none: an interrupted
        receive then writes an empty one, an error is reported as every error is."""
        if not self.json or not (self._started or interrupted):
            return
        tail: dict[str, Any] = {"count": self.count, "interrupted": interrupted}
        if error is not None:
            tail.update(error_document(error))
        fields = ",\n".join(
            f"  {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in tail.items()
        )
        write_out(self._head() + "\n  ],\n" + fields + "\n}\n")


def _named(exc: OpenMSMQError, queue: str) -> OpenMSMQError:
    """A queue deleted while the command reads it, named as the user typed it."""
    if isinstance(exc, MQError) and exc.hresult == HResult.MQ_ERROR_QUEUE_DELETED:
        return MQError(exc.hresult, f"queue {quoted(queue)} was deleted while it was being read")
    return exc


@contextmanager
def _ending(out: Output, queue: str) -> Iterator[None]:
    """End ``out`` however the reading ends: Ctrl-C closes the document (``"interrupted":
    true``) and goes on as KeyboardInterrupt; an error after messages were written goes
    inside the document begun (status 1); else the document is closed."""
    try:
        yield
    except KeyboardInterrupt:
        out.end(interrupted=True)
        raise
    except OpenMSMQError as raised:
        exc = _named(raised, queue)
        if not (out.json and out.count):
            raise exc from None
        out.end(interrupted=False, error=exc)  # the error inside the document begun
        click.echo(f"error: {exc}", err=True)
        raise click.exceptions.Exit(1) from exc
    out.end(interrupted=False)


@contextmanager
def _progress(queue: str, count: int) -> Iterator[Progress | None]:
    """A progress bar on stderr for a receive of more than one batch, when stderr is a
    terminal and stdout is not (on one terminal the printed messages are the progress)."""
    if count <= RECEIVE_BATCH or not sys.stderr.isatty() or sys.stdout.isatty():
        yield None
        return
    # Imported here: only a long receive to a pipe shows a bar; every other command
    # starts faster without rich's progress machinery.
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn(f"receiving {queue}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console(stderr=True),
        transient=True,
        redirect_stdout=False,
        redirect_stderr=False,
    )
    with progress:
        yield progress


def _wait(q: Queue, timeout: float, first: bool) -> bool:
    """Wait up to ``timeout`` for a message without taking it; False when none came (the
    first wait of a receive raises MQ_ERROR_IO_TIMEOUT then: nothing to receive)."""
    try:
        q.peek_many(1, timeout)
    except MQError as exc:
        if exc.hresult != HResult.MQ_ERROR_IO_TIMEOUT or first:
            raise
        return False
    return True


def _take(q: Queue, conn: Connection, n: int, transactional: bool, out: Output) -> int:
    """Receive up to ``n`` available messages and print them; with ``transactional`` the
    receive commits after the print. Returns how many (0: taken by another reader)."""
    try:
        if transactional:
            with conn.transaction() as tx:  # aborted (messages back) if printing fails
                msgs = q.receive_many(n, 0, tx)
                out.batch(msgs)
        else:
            msgs = q.receive_many(n, 0)
            out.batch(msgs)
    except MQError as exc:
        if exc.hresult != HResult.MQ_ERROR_IO_TIMEOUT:
            raise
        return 0
    return len(msgs)


def receive_batches(
    c: CliContext,
    queue: str,
    count: int | None,
    timeout: float,
    transactional: bool,
    *,
    follow: bool = False,
    form: str | None = None,
) -> None:
    """Receive up to ``count`` messages of ``queue`` and print them, batch by batch (see the
    module text); stops when a wait of ``timeout`` finds none. None at all is
    MQ_ERROR_IO_TIMEOUT; Ctrl-C is :exc:`KeyboardInterrupt` once the output is complete.
    With ``follow`` it waits for more until Ctrl-C (or ``count`` messages, when given)."""
    out = Output(form or ("document" if c.json else "table"), queue)
    limit = count if count is not None else (sys.maxsize if follow else 1)
    with _ending(out, queue):
        conn = c.connection()  # inside: Ctrl-C while it opens still ends the output
        with (
            InterruptGuard() as guard,
            conn.open_queue(queue, Access.RECEIVE) as q,
            _progress(queue, 0 if follow else limit) as progress,
        ):
            task = progress.add_task("receive", total=limit) if progress is not None else None
            while out.count < limit:
                if follow:
                    if not _wait(q, FOLLOW_SLICE, first=False):
                        continue
                elif not _wait(q, timeout, first=out.count == 0):
                    break
                with guard.critical():
                    _take(q, conn, min(RECEIVE_BATCH, limit - out.count), transactional, out)
                if progress is not None and task is not None:
                    progress.update(task, completed=out.count)


def peek_follow(c: CliContext, queue: str, count: int | None, form: str) -> None:
    """Print the messages of ``queue`` without removing them, then each one that arrives,
    until Ctrl-C (or ``count`` messages): a cursor of its own walks the queue (MS-MQRR
    cursors see messages that arrive after them), waiting :data:`FOLLOW_SLICE` at a time."""
    out = Output(form, queue)
    limit = count if count is not None else sys.maxsize
    with _ending(out, queue):
        conn = c.connection()
        with conn.open_queue(queue, Access.PEEK) as q, q.cursor() as cursor:
            read = cursor.peek_current
            while out.count < limit:
                try:
                    m = read(FOLLOW_SLICE)
                except MQError as waited:
                    if waited.hresult != HResult.MQ_ERROR_IO_TIMEOUT:
                        raise
                    continue
                out.batch([m])
                read = cursor.peek_next
