"""``openmsmq send --lines``: one message per line of stdin, as kafka-console-producer sends.

Lines are sent as they come: each read takes what stdin holds (a line typed at a terminal
at once, a pipe up to :data:`READ_SIZE` bytes at a time) and the complete lines in it go
in calls of up to :data:`LINES_BATCH` messages, each one transaction with
``--transactional`` (one store commit otherwise). A line is the bytes before ``\\n`` (a
``\\r`` before it is dropped too); a last line without ``\\n`` is a message as well; an
empty line is an empty message.

A line must be UTF-8 (a message per line is a text format: binary bodies go with
``--file``). The first line that is not stops the command with an error naming its number
and the byte at fault: every line before it is sent — the batch it would have been in is
cut just before it — and neither it nor any line after it is. Ctrl-C waits for the batch
being sent to be committed, then stops (status 130); stderr says how many were sent.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO

from openmsmq.cli.context import CommandError

__all__ = ["LINES_BATCH", "READ_SIZE", "NotUtf8Line", "line_batches"]

#: Messages per send of ``--lines`` (one transaction with ``--transactional``).
LINES_BATCH = 256
#: Bytes one read of stdin takes at most.
READ_SIZE = 1 << 16


class NotUtf8Line(CommandError):
    """A line of ``send --lines`` that is not UTF-8 (exit status 1)."""

    def __init__(self, number: int, column: int, byte: int) -> None:
        super().__init__(f"line {number} of stdin is not UTF-8 (byte 0x{byte:02x} at column {column})")
        self.number = number


def _body(line: bytes) -> bytes:
    return line[:-1] if line.endswith(b"\r") else line


def _check(line: bytes, number: int) -> None:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotUtf8Line(number, exc.start + 1, line[exc.start]) from None


def line_batches(stream: IO[bytes]) -> Iterator[list[bytes]]:
    """The lines of ``stream`` as bodies, in batches of at most :data:`LINES_BATCH`, each
    batch as soon as its lines are read. A line that is not UTF-8 raises
    :class:`NotUtf8Line` after the batch of the lines before it was taken."""
    pending = b""
    number = 0
    while True:
        read1 = getattr(stream, "read1", None)
        chunk = read1(READ_SIZE) if read1 is not None else stream.read(READ_SIZE)
        lines = (pending + chunk).split(b"\n")
        pending = lines.pop() if chunk else b""
        if not chunk and lines == [b""]:
            lines = []
        batch: list[bytes] = []
        for line in lines:
            number += 1
            body = _body(line)
            try:
                _check(body, number)
            except NotUtf8Line:
                if batch:
                    yield batch
                raise
            batch.append(body)
            if len(batch) == LINES_BATCH:
                yield batch
                batch = []
        if batch:
            yield batch
        if not chunk:
            return
