"""What the console reads from and does to the queue manager, through its public objects.

Reads and actions go through the same objects as ``openmsmq status`` and the command line:
:func:`~openmsmq.remote.status.collect_status` over the :class:`QueueManager` and the
transfer's live snapshot, and the client API (:class:`~openmsmq.client.Connection`) over
an in-process transport of the served QM for browsing, receiving, purging, queue
administration and the dead-letter requeue (:mod:`openmsmq.client.dead_letters`, so that the
console moves a dead letter exactly as ``openmsmq dlq requeue`` does: in one transaction
for a transactional one).

Every method here blocks on the store: the web handlers run them in a worker thread
(the QM is thread-safe), except :meth:`Backend.snapshot` and the outgoing-queue
suspension, which touch the transfer and run on serve's event loop.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from openmsmq.client import Access, Connection, Message, QueueInfo, Seek
from openmsmq.client.dead_letters import (
    DEAD_LETTER_QUEUES,
    DeadLetter,
    RequeueResult,
    find_dead_letter,
    requeue,
)
from openmsmq.client.inproc import InProcessTransport, message_from_record
from openmsmq.client.transport import SINGLE_MESSAGE
from openmsmq.errors import HResult, MQError, quoted
from openmsmq.qm.manager import QueueManager
from openmsmq.remote.auth import Principal
from openmsmq.remote.status import QMStatus, TransferSnapshot, collect_status
from openmsmq.transfer.state import SessionStatus

__all__ = ["PREVIEW_BYTES", "Backend", "Page", "TransferHooks", "body_preview", "not_found_text"]

#: Body bytes shown in a preview (the download has all of it).
PREVIEW_BYTES = 4096


@dataclass(frozen=True, slots=True)
class TransferHooks:
    """What the console may ask of the running transfer (on serve's loop); None when the
    QM runs no transfer."""

    snapshot: Callable[[], TransferSnapshot]
    sessions: Callable[[], list[SessionStatus]]
    suspend: Callable[[str], None]
    resume: Callable[[str], None]


@dataclass(frozen=True, slots=True)
class Page:
    """One page of a queue's messages in LookupIdentifier order."""

    info: QueueInfo
    messages: list[Message]
    #: LookupIdentifier to continue after (None: this was the last page).
    next_after: int | None
    after: int


@dataclass(slots=True)
class Backend:
    """The console's view of one queue manager."""

    qm: QueueManager
    hooks: TransferHooks | None
    started: float = field(default_factory=time.time)
    conn: Connection = field(init=False)

    def __post_init__(self) -> None:
        self.conn = Connection(InProcessTransport(qm=self.qm))

    def close(self) -> None:
        """Close the console's client connection (handles, transactions)."""
        self.conn.close()

    # ---- status (snapshot on the loop, the rest in a thread) ------------------------------

    def snapshot(self) -> TransferSnapshot | None:
        """The transfer's live state; call on serve's event loop."""
        return self.hooks.snapshot() if self.hooks is not None else None

    def status(self, snapshot: TransferSnapshot | None, principal: Principal) -> QMStatus:
        """What ``openmsmq status`` shows, limited to what ``principal`` may see."""
        return collect_status(
            self.qm, time.time(), snapshot,
            visible=lambda name: bool(principal.permissions(name)),
            show_incoming=principal.is_admin, running=True,
        )  # fmt: skip

    # ---- queues ----------------------------------------------------------------------------

    def queue_key(self, name: str) -> str:
        """The canonical name of an existing queue (the one permissions match);
        MQ_ERROR_QUEUE_NOT_FOUND when there is none."""
        return self.qm.get_queue(name).name

    def info(self, name: str) -> QueueInfo:
        """Properties and counts of a queue."""
        return self.conn.queue_info(name)

    def browse(self, name: str, after: int, limit: int) -> Page:
        """Up to ``limit`` messages after LookupIdentifier ``after``, neither removed nor locked."""
        info = self.conn.queue_info(name)
        records = self.qm.peek_range(name, after, limit + 1)
        more = len(records) > limit
        messages = [message_from_record(r) for r in records[:limit]]
        return Page(info, messages, messages[-1].lookup_id if more and messages else None, after)

    def message(self, name: str, lookup_id: int) -> Message:
        """The message ``lookup_id`` of a queue; MQ_ERROR_MESSAGE_NOT_FOUND when gone."""
        with self.conn.open_queue(name, Access.PEEK) as q:
            return q.peek_by_lookup_id(lookup_id, Seek.CURRENT)

    def receive(self, name: str, lookup_id: int | None) -> Message:
        """Receive (remove) message ``lookup_id``, or the first one when None. A
        transactional queue is read in a transaction of its own (MS-MQQB 1.3.3)."""
        tx = SINGLE_MESSAGE if self.conn.queue_info(name).transactional else None
        with self.conn.open_queue(name, Access.RECEIVE) as q:
            if lookup_id is None:
                return q.receive(timeout=0, tx=tx)
            return q.receive_by_lookup_id(lookup_id, Seek.CURRENT, tx=tx)

    def move(self, name: str, lookup_id: int, to: str) -> int:
        """Move message ``lookup_id`` of a queue to one of its subqueues, or from a subqueue
        back to its queue or to another of its subqueues, as ``openmsmq move`` does
        (MS-MQRR 3.1.4.10); its new LookupIdentifier."""
        with self.conn.open_queue(name, Access.RECEIVE) as q:
            return q.move(lookup_id, to)

    def purge(self, name: str) -> int:
        """Delete every available message of a queue (an outgoing one: QM stopped only)."""
        with self.conn.open_queue(name, Access.RECEIVE) as q:
            return q.purge()

    def create_queue(self, path: str, transactional: bool, label: str, quota_kb: int | None) -> QueueInfo:
        """Create a private queue."""
        return self.conn.create_queue(path, transactional=transactional, label=label, quota_kb=quota_kb)

    def delete_queue(self, name: str) -> None:
        """Delete a queue and its messages."""
        self.conn.delete_queue(name)

    def set_properties(self, name: str, label: str, quota_kb: int | None, journal: bool) -> None:
        """Change a queue's label, quota (None: no limit) and journaling."""
        from openmsmq.store.records import INFINITE

        self.qm.set_queue_properties(
            name, label=label, quota_kb=INFINITE if quota_kb is None else quota_kb, journal=journal
        )

    # ---- dead letters ----------------------------------------------------------------------

    def dead_letters(self, limit: int) -> tuple[list[DeadLetter], bool]:
        """Up to ``limit`` dead letters of both queues (in queue order), and whether more wait."""
        out: list[DeadLetter] = []
        for kind, queue in DEAD_LETTER_QUEUES.items():
            records = self.qm.peek_range(queue, 0, limit + 1 - len(out))
            out += [DeadLetter(kind, message_from_record(r)) for r in records]
            if len(out) > limit:
                return out[:limit], True
        return out, False

    def find_dead_letters(self, lookup_ids: list[int]) -> list[DeadLetter]:
        """The dead letters of these LookupIdentifiers; MQ_ERROR_MESSAGE_NOT_FOUND when one is gone."""
        return [find_dead_letter(self.conn, str(i), DEAD_LETTER_QUEUES) for i in lookup_ids]

    def requeue(self, letters: list[DeadLetter]) -> list[RequeueResult]:
        """Move dead letters back to the queues they were meant for (``dlq requeue``)."""
        return requeue(self.conn, letters, None)


def body_preview(body: bytes, form: str) -> tuple[str, str]:
    """(form used, text) of a body preview: ``text`` (UTF-8, or UTF-16-LE as MSMQ's string
    bodies are), ``json`` (pretty-printed), or ``hex`` (16 bytes a line). ``auto`` picks
    JSON, then text, then hex. At most :data:`PREVIEW_BYTES` are shown."""
    head = body[:PREVIEW_BYTES]
    text = _as_text(head)
    if form in ("auto", "json") and text is not None:
        try:
            return "json", json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            if form == "json":
                return "json", "(not JSON) " + text
    if form in ("auto", "text") and text is not None:
        return "text", text
    lines = []
    for at in range(0, len(head), 16):
        chunk = head[at : at + 16]
        printable = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{at:08x}  {chunk.hex(' '):<47}  {printable}")
    return "hex", "\n".join(lines)


def _as_text(data: bytes) -> str | None:
    if not data:
        return ""
    if len(data) >= 2 and len(data) % 2 == 0 and data[1::2].count(0) * 2 > len(data) // 2:
        try:
            return data.decode("utf-16-le")
        except UnicodeDecodeError:
            pass
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if all(c.isprintable() or c in "\r\n\t" for c in text) else None


def not_found_text(exc: MQError, what: str) -> str | None:
    """The 404 text of an error that says ``what`` does not exist, else None."""
    if exc.hresult in (HResult.MQ_ERROR_QUEUE_NOT_FOUND, HResult.MQ_ERROR_ILLEGAL_FORMATNAME):
        return f"no queue {quoted(what)}"
    if exc.hresult == HResult.MQ_ERROR_MESSAGE_NOT_FOUND:
        return f"no message {what}"
    return None
