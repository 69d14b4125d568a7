"""The queue manager: queues, messages, local transactions, cursors, expiry.

Threading model (details in docs/store.md): every public method is thread-safe and
blocking. Each queue has one :class:`threading.Condition` that guards its in-memory
lock set and wakes waiting receivers on enqueue; the candidate SELECT and the lock
are taken under it, and a lock is released only after the deletion is durable, so a
message can never be handed out twice. Durable writes go through the store's writer
(group commit). asyncio code calls these methods through ``asyncio.to_thread``.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from openmsmq.errors import HResult, MQError
from openmsmq.qm import names
from openmsmq.qm.handles import CursorAction, LookupAction, QueueHandle, _Cursor, _QueueState
from openmsmq.qm.transaction import ACK_RECEIVE, PendingReceive, Transaction, _Receive
from openmsmq.store import ops
from openmsmq.store.db import Store
from openmsmq.store.ops import Remove, RemovedMessage, Send
from openmsmq.store.records import (
    COL,
    INFINITE,
    MAX_MESSAGE_BYTES,
    IncomingSequenceState,
    Message,
    OutgoingSequenceState,
    QueueRecord,
    QueueType,
    Stamp,
    message_to_row,
    message_uniquifier,
)

__all__ = ["CursorAction", "LookupAction", "QueueHandle", "QueueManager"]

#: Message.Class values used here (MS-MQDMPR 3.1.1.12, MS-MQMQ 2.2.18.1.6).
NACK_REACH_QUEUE_TIMEOUT = 0x8002
NACK_Q_DELETED = 0xC000
NACK_Q_PURGED = 0xC001
NACK_RECEIVE_TIMEOUT = 0xC002

_UNIQUIFIER_BLOCK = 4096
_C_ARRIVED = COL["arrived_time"]
_C_SIZE = COL["size"]
_WAKE_SLICE = 1.0  # s: waiters re-check deletion/close at least this often


QueueRef = str | QueueHandle


class QueueManager:
    """A queue manager over a data directory (``openmsmq.db`` inside it).

    ``threaded=False`` runs the store without its writer thread (deterministic
    simulation); ``clock`` gives seconds since 1970 for SentTime / ArrivedTime and
    expiry checks on receive; ``expire_interval`` starts a thread running
    :meth:`expire` periodically.
    """

    def __init__(
        self,
        data_dir: str | Path,
        *,
        threaded: bool = True,
        clock: Callable[[], float] = time.time,
        computer_name: str | None = None,
        integrity_check: bool = True,
        expire_interval: float | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.clock = clock
        self.computer_name = (computer_name or socket.gethostname()).lower()
        self._local_hosts = {self.computer_name, "localhost", "127.0.0.1", "::1", "."}
        self.store = Store(self.data_dir / "openmsmq.db", threaded=threaded, integrity_check=integrity_check)
        self._lock = threading.RLock()
        self._closed = False
        self._queues: dict[str, _QueueState] = {}
        self._by_id: dict[int, _QueueState] = {}
        self._cursors: dict[int, _Cursor] = {}
        self._next_handle = 1
        self._uniq_next = 0
        self._uniq_end = 0
        self._listeners: list[Callable[[list[RemovedMessage]], None]] = []
        try:
            self.guid: uuid.UUID = self.store.write(ops.init_qm_state(uuid.uuid4(), self._now()))
            for rec in self.store.read(ops.list_queues):
                self._add_state(rec)
            self._create_system_queues()
        except BaseException:
            self.store.close()
            raise
        self._stop = threading.Event()
        self._expiry_thread: threading.Thread | None = None
        if expire_interval is not None:
            self._expiry_thread = threading.Thread(
                target=self._expiry_loop, args=(expire_interval,), name="openmsmq-expiry", daemon=True
            )
            self._expiry_thread.start()

    # ---- lifecycle -----------------------------------------------------------------------

    def _now(self) -> int:
        return int(self.clock())

    def close(self) -> None:
        """Stop background work, wake waiters (they fail) and close the store."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            states = list(self._by_id.values())
        self._stop.set()
        if self._expiry_thread is not None:
            self._expiry_thread.join()
        for qs in states:
            with qs.cond:
                qs.cond.notify_all()
        self.store.close()

    def __enter__(self) -> QueueManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _expiry_loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                self.expire(self.clock())
            except MQError:
                continue  # store trouble: try again next round

    def add_removal_listener(self, fn: Callable[[list[RemovedMessage]], None]) -> None:
        """Call ``fn(events)`` after messages that asked for acknowledgments, journaling or a
        FinalAck leave a queue (received, purged, queue deleted, expired) — the seam for
        MS-MQQB 3.1.7.2 / 3.1.7.17 acknowledgment messages."""
        self._listeners.append(fn)

    def _emit(self, events: list[RemovedMessage]) -> None:
        if events:
            for fn in list(self._listeners):
                fn(events)

    # ---- queues --------------------------------------------------------------------------

    def _add_state(self, rec: QueueRecord) -> _QueueState:
        qs = _QueueState(rec)
        self._queues[rec.name] = qs
        self._by_id[rec.queue_id] = qs
        return qs

    def _create_system_queues(self) -> None:
        wanted = [
            (names.DEADLETTER, False, None),
            (names.DEADXACT, True, None),
            (names.SYSTEM_JOURNAL, False, None),
            (names.ORDER_QUEUE, False, names.ORDER_QUEUE_NUMBER),
        ]
        for key, transactional, number in wanted:
            if key not in self._queues:
                rec = self.store.write(
                    ops.create_queue(
                        name=key,
                        display_name=key,
                        queue_type=QueueType.SYSTEM,
                        transactional=transactional,
                        label=key,
                        quota_kb=INFINITE,
                        journal_quota_kb=INFINITE,
                        journal=False,
                        now=self._now(),
                        private_number=number or 0,
                        with_journal=False,
                    )
                )
                self._add_state(rec)

    def _check_open(self) -> None:
        if self._closed:
            raise MQError(HResult.MQ_ERROR_SERVICE_NOT_AVAILABLE, "queue manager is closed")

    def _is_local_host(self, host: str | None) -> bool:
        return host is None or host.lower() in self._local_hosts

    def _resolve(self, queue: QueueRef) -> _QueueState:
        self._check_open()
        if isinstance(queue, QueueHandle):
            if queue._state.deleted:
                raise MQError(HResult.MQ_ERROR_QUEUE_DELETED, f"queue {queue.format_name} was deleted")
            return queue._state
        parsed = names.parse_name(queue)
        with self._lock:
            qs: _QueueState | None = None
            if parsed.key is not None and self._is_local_host(parsed.computer):
                qs = self._queues.get(parsed.key)
            elif parsed.private_number is not None and parsed.qm_guid == self.guid:
                qs = next(
                    (
                        s
                        for s in self._by_id.values()
                        if s.record.private_number == parsed.private_number
                        and s.record.queue_type in (QueueType.PRIVATE, QueueType.SYSTEM)
                    ),
                    None,
                )
            elif parsed.is_format_name:
                key = queue.strip().lower()
                qs = next((s for s in self._by_id.values() if s.record.destination_format_name == key), None)
        if qs is None or qs.deleted:
            raise MQError(HResult.MQ_ERROR_QUEUE_NOT_FOUND, f"no queue {queue!r}")
        return qs

    def _is_remote(self, name: str) -> bool:
        parsed = names.parse_name(name)
        if parsed.private_number is not None:
            return parsed.qm_guid != self.guid
        return parsed.is_format_name and not self._is_local_host(parsed.computer)

    def open_queue(self, queue: str) -> QueueHandle:
        """Open a local queue, or the OutgoingQueue of a remote format name (created on
        first use, MS-MQDMPR 3.1.7.1.5 step 4). Unknown local queue: MQ_ERROR_QUEUE_NOT_FOUND."""
        self._check_open()
        if self._is_remote(queue):
            rec = self.store.write(ops.ensure_outgoing_queue(queue.strip(), self._now()))
            with self._lock:
                qs = self._by_id.get(rec.queue_id) or self._add_state(rec)
            return QueueHandle(qs, queue)
        return QueueHandle(self._resolve(queue), queue)

    def create_queue(
        self,
        name: str,
        *,
        transactional: bool = False,
        label: str = "",
        quota_kb: int = INFINITE,
        journal: bool = False,
        journal_quota_kb: int = INFINITE,
    ) -> QueueRecord:
        """Create a private queue ``private$\\name`` (and its journal queue).

        MQ_ERROR_QUEUE_EXISTS if it exists (names are case-insensitive);
        MQ_ERROR_ILLEGAL_QUEUE_PATHNAME for a bad or non-private name.
        """
        self._check_open()
        parsed = names.parse_name(name)
        if (
            parsed.is_format_name
            or parsed.key is None
            or not parsed.key.startswith("private$\\")
            or parsed.key.endswith(";journal")
            or not self._is_local_host(parsed.computer)
        ):
            raise MQError(
                HResult.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME, f"{name!r}: expected a local private$\\ path"
            )
        if len(label) > 124:
            raise MQError(HResult.MQ_ERROR_LABEL_TOO_LONG, "queue label has at most 124 characters")
        with self._lock:
            rec = self.store.write(
                ops.create_queue(
                    name=parsed.key,
                    display_name=parsed.display,
                    queue_type=QueueType.PRIVATE,
                    transactional=transactional,
                    label=label,
                    quota_kb=quota_kb,
                    journal_quota_kb=journal_quota_kb,
                    journal=journal,
                    now=self._now(),
                )
            )
            self._add_state(rec)
            if rec.journal_queue_id is not None:
                self._add_state(self.store.read(lambda c: ops.get_queue(c, rec.journal_queue_id or 0)))
        return rec

    def delete_queue(self, queue: QueueRef) -> None:
        """Delete a private queue with its journal and messages (NackQueueDeleted events).
        Waiting receivers and later calls through a handle get MQ_ERROR_QUEUE_DELETED."""
        qs = self._resolve(queue)
        if qs.record.queue_type not in (QueueType.PRIVATE, QueueType.OUTGOING):
            raise MQError(HResult.MQ_ERROR_ACCESS_DENIED, f"cannot delete system queue {qs.record.name}")
        with self._lock:
            events = self.store.write(ops.delete_queue(qs.record.queue_id, NACK_Q_DELETED))
            doomed = [qs]
            if qs.record.journal_queue_id in self._by_id:
                doomed.append(self._by_id[qs.record.journal_queue_id or 0])
            for s in doomed:
                self._queues.pop(s.record.name, None)
                self._by_id.pop(s.record.queue_id, None)
                with s.cond:
                    s.deleted = True
                    s.cond.notify_all()
        self._emit(events)

    def list_queues(self, *, include_system: bool = False) -> list[QueueRecord]:
        """Private queues (and, if asked, system, journal and outgoing queues) with counts."""
        self._check_open()
        recs = self.store.read(ops.list_queues)
        if include_system:
            return recs
        return [r for r in recs if r.queue_type == QueueType.PRIVATE]

    def get_queue(self, queue: QueueRef) -> QueueRecord:
        """Current properties of a queue, with its message count and TotalBytes."""
        qs = self._resolve(queue)
        return self.store.read(lambda c: ops.get_queue(c, qs.record.queue_id))

    def set_queue_properties(self, queue: QueueRef, **changes: Any) -> QueueRecord:
        """Set label, quota_kb, journal_quota_kb, journal, base_priority, authenticate,
        privacy_level (ModifyTime is updated); other keys: MQ_ERROR_PROPERTY_NOTALLOWED."""
        qs = self._resolve(queue)
        if len(changes.get("label", "")) > 124:
            raise MQError(HResult.MQ_ERROR_LABEL_TOO_LONG, "queue label has at most 124 characters")
        rec = self.store.write(ops.update_queue(qs.record.queue_id, changes, self._now()))
        qs.record = rec
        return rec

    def purge_queue(self, queue: QueueRef) -> int:
        """Delete every available message (MS-MQDMPR 3.1.7.1.7); locked ones become
        PurgePending and are deleted when their lock ends. Returns the count deleted now."""
        qs = self._resolve(queue)
        with qs.cond:
            exclude = set(qs.locked)
            count, events = self.store.write(ops.purge_queue(qs.record.queue_id, exclude, NACK_Q_PURGED))
            qs.purge_pending |= exclude
        self._emit(events)
        return count

    # ---- sending -------------------------------------------------------------------------

    def _uniquifiers(self, count: int) -> int:
        with self._lock:
            if self._uniq_next + count > self._uniq_end:
                block = max(_UNIQUIFIER_BLOCK, count)
                self._uniq_next = self.store.write(ops.reserve_uniquifiers(block))
                self._uniq_end = self._uniq_next + block
            first = self._uniq_next
            self._uniq_next += count
            return first

    def _prepare(
        self, qs: _QueueState, messages: Sequence[Message], transactional: bool, name: str
    ) -> list[Send]:
        """Validate and stamp the QM-assigned attributes (Identifier, SentTime, source,
        destination; priority 0 and Recoverable for transactional messages) straight into
        the store rows."""
        rec = qs.record
        if rec.queue_type in (QueueType.JOURNAL, QueueType.SYSTEM):
            raise MQError(
                HResult.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION, f"cannot send to system queue {rec.name}"
            )
        if rec.queue_type != QueueType.OUTGOING and rec.transactional != transactional:
            # MS-MQQB 1.3.3: a transactional queue takes only transactional messages and
            # a non-transactional queue only non-transactional ones.
            raise MQError(
                HResult.MQ_ERROR_TRANSACTION_USAGE,
                f"queue {rec.display_name} is {'' if rec.transactional else 'not '}transactional",
            )
        for m in messages:
            if m.size > MAX_MESSAGE_BYTES:
                raise MQError(
                    HResult.MQ_ERROR_INSUFFICIENT_RESOURCES,
                    f"message of {m.size} bytes exceeds the 4 MiB limit",
                )
            if len(m.label) > 249:
                raise MQError(HResult.MQ_ERROR_LABEL_TOO_LONG, "message label has at most 249 characters")
            if not 0 <= m.priority <= 7:
                raise MQError(HResult.MQ_ERROR_ILLEGAL_PROPERTY_VALUE, "priority must be 0..7")
        now = self._now()
        first = self._uniquifiers(len(messages))
        guid = self.guid
        out = []
        for i, m in enumerate(messages):
            stamp = Stamp(
                0 if transactional else m.priority,
                transactional,
                1 if transactional else m.delivery,
                guid,
                ((first + i - 1) & 0xFFFFFFFF) + 1,
                now,
                guid,
                m.destination_queue or name,
            )
            row = message_to_row(m, stamp)
            row[_C_ARRIVED] = now
            out.append(self._send_record(qs, row, m, now))
        return out

    def _send_record(self, qs: _QueueState, row: list[Any], m: Message, sent: int) -> Send:
        """Attach the absolute expiry: TimeToBeReceived in a destination queue
        (NackReceiveTimeout); in an outgoing queue also TimeToReachQueue (NackReachQueueTimeout).
        Times count from ``sent`` (SentTime)."""
        candidates = []
        if m.time_to_be_received != INFINITE:
            candidates.append((sent + m.time_to_be_received, NACK_RECEIVE_TIMEOUT))
        if qs.record.queue_type == QueueType.OUTGOING and m.time_to_reach_queue != INFINITE:
            candidates.append((sent + m.time_to_reach_queue, NACK_REACH_QUEUE_TIMEOUT))
        if not candidates:
            return Send(qs.record.queue_id, row, row[_C_SIZE])
        at, cls = min(candidates)
        return Send(qs.record.queue_id, row, row[_C_SIZE], at, cls)

    def send(self, queue: QueueRef, message: Message, tx: Transaction | None = None) -> Message:
        """Send one message; returns it with its Identifier, SentTime and (outside a
        transaction, where it is durable on return) its LookupIdentifier. See :meth:`send_many`."""
        sends, lookup_ids = self._send(queue, [message], tx)
        stored = sends[0].message
        return replace(stored, lookup_id=lookup_ids[0]) if lookup_ids else stored

    def send_many(
        self, queue: QueueRef, messages: Sequence[Message], tx: Transaction | None = None
    ) -> list[int]:
        """Send messages to a local queue or a remote format name (its outgoing queue).

        Without ``tx`` they are durable when this returns (one commit for all); with
        ``tx`` they are stored at commit. Returns the Identifier uniquifiers (the
        Identifier is ``(qm.guid, uniquifier)``). Errors: MQ_ERROR_QUEUE_NOT_FOUND,
        MQ_ERROR_TRANSACTION_USAGE (transactional mismatch), MQ_ERROR_INSUFFICIENT_RESOURCES
        (quota or > 4 MiB), MQ_ERROR_TRANSACTION_SEQUENCE (ended transaction).
        """
        sends, _ = self._send(queue, messages, tx)
        return [message_uniquifier(s.row) for s in sends]

    def _send(
        self, queue: QueueRef, messages: Sequence[Message], tx: Transaction | None
    ) -> tuple[list[Send], list[int]]:
        if isinstance(queue, str) and self._is_remote(queue):
            handle: QueueRef = self.open_queue(queue)
        else:
            handle = queue
        qs = self._resolve(handle)
        name = handle.format_name if isinstance(handle, QueueHandle) else handle
        if tx is not None:
            tx._check_active()
        sends = self._prepare(qs, messages, tx is not None, name)
        if tx is not None:
            tx._add_sends(qs, sends)
            return sends, []
        lookup_ids = self.store.write(ops.commit_work(sends, []))
        self._notify([qs])
        return sends, lookup_ids

    def _notify(self, states: Iterable[_QueueState]) -> None:
        for qs in set(states):
            with qs.cond:
                qs.cond.notify_all()

    # ---- transactions --------------------------------------------------------------------

    def begin(self) -> Transaction:
        """Start a local transaction."""
        self._check_open()
        return Transaction(self)

    def _removes_for(self, receives: Sequence[_Receive]) -> list[Remove]:
        out = []
        for r in receives:
            rec = r.queue.record
            target = rec.journal_queue_id if rec.journal else None
            out.append(Remove(rec.queue_id, r.message.lookup_id, r.message.size, target))
        return out

    def _commit(self, sends: list[tuple[_QueueState, Send]], receives: list[_Receive]) -> list[int]:
        """Transaction Commit (MS-MQDMPR 3.1.7.1.8) as one store operation."""
        self._check_open()
        live = [r for r in receives if not r.queue.deleted]
        stored = self.store.write(ops.commit_work([s for _, s in sends], self._removes_for(live)))
        self._unlock(receives)
        self._notify(qs for qs, _ in sends)
        self._emit(
            [RemovedMessage(r.queue.record.queue_id, r.message, r.reason) for r in live if _acks(r.message)]
        )
        return stored

    def _unlock(self, receives: Iterable[_Receive]) -> None:
        for r in receives:
            with r.queue.cond:
                r.queue.locked.discard(r.message.lookup_id)
                r.queue.purge_pending.discard(r.message.lookup_id)

    def _release(self, receives: Sequence[_Receive]) -> None:
        """Put locked messages back (Transaction Abort / NACK); PurgePending ones are deleted."""
        purged = [r for r in receives if r.message.lookup_id in r.queue.purge_pending and not r.queue.deleted]
        if purged and not self._closed:
            # On a store failure the message stays on disk; it is unlocked below.
            with contextlib.suppress(MQError):
                self.store.write(
                    ops.commit_work([], [replace(x, target_queue_id=None) for x in self._removes_for(purged)])
                )
            self._emit(
                [
                    RemovedMessage(r.queue.record.queue_id, r.message, NACK_Q_PURGED)
                    for r in purged
                    if _acks(r.message)
                ]
            )
        self._unlock(receives)
        self._notify(r.queue for r in receives)

    # ---- receiving -----------------------------------------------------------------------

    def _take(
        self,
        qs: _QueueState,
        select: Callable[[set[int], int], list[tuple[int, Message]]],
        *,
        timeout: float | None,
        lock: bool,
    ) -> list[tuple[int, Message]]:
        """Select under the queue's condition, lock if asked, wait for an enqueue up to ``timeout``."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with qs.cond:
            while True:
                if qs.deleted:
                    raise MQError(
                        HResult.MQ_ERROR_QUEUE_DELETED, f"queue {qs.record.display_name} was deleted"
                    )
                self._check_open()
                found = self.store.read(lambda _c: select(qs.locked, self._now()))
                if found:
                    if lock:
                        qs.locked.update(m.lookup_id for _, m in found)
                    return found
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise MQError(HResult.MQ_ERROR_IO_TIMEOUT, f"no message in {qs.record.display_name}")
                qs.cond.wait(_WAKE_SLICE if remaining is None else min(remaining, _WAKE_SLICE))

    def _finish(
        self, qs: _QueueState, found: list[tuple[int, Message]], tx: Transaction | None
    ) -> list[Message]:
        """Complete a destructive read of locked messages: hand them to ``tx``, or delete now."""
        msgs = [m for _, m in found]
        receives = [_Receive(qs, m) for m in msgs]
        if tx is not None:
            if not tx._add_receives(qs, msgs):
                self._release(receives)
                tx._check_active()
            return msgs
        try:
            self._commit([], receives)
        except BaseException:
            self._unlock(receives)
            self._notify([qs])
            raise
        return msgs

    def _check_receive(self, qs: _QueueState, tx: Transaction | None) -> None:
        if tx is not None:
            tx._check_active()
            if not qs.record.transactional:
                raise MQError(
                    HResult.MQ_ERROR_TRANSACTION_USAGE, f"queue {qs.record.display_name} is not transactional"
                )

    def _head_select(
        self, qs: _QueueState, limit: int
    ) -> Callable[[set[int], int], list[tuple[int, Message]]]:
        qid = qs.record.queue_id
        return lambda locked, now: self.store.read(
            lambda c: ops.fetch_available(c, qid, now=now, limit=limit, exclude=locked)
        )

    def receive(
        self,
        queue: QueueRef,
        *,
        tx: Transaction | None = None,
        timeout: float | None = 0.0,
        cursor: int | None = None,
    ) -> Message:
        """Receive the first message (priority, then LookupIdentifier), or the one at ``cursor``.

        ``timeout`` in seconds (None = wait forever) → MQ_ERROR_IO_TIMEOUT. With ``tx`` the
        message is locked until commit (deleted / journaled) or abort (back in place).
        """
        if cursor is not None:
            return self._cursor_read(cursor, CursorAction.CURRENT, peek=False, tx=tx, timeout=timeout)
        return self.receive_many(queue, 1, tx=tx, timeout=timeout)[0]

    def receive_many(
        self, queue: QueueRef, max_count: int, *, tx: Transaction | None = None, timeout: float | None = 0.0
    ) -> list[Message]:
        """Receive up to ``max_count`` messages at once (waits for the first only)."""
        qs = self._resolve(queue)
        self._check_receive(qs, tx)
        found = self._take(qs, self._head_select(qs, max_count), timeout=timeout, lock=True)
        return self._finish(qs, found, tx)

    def peek(
        self,
        queue: QueueRef,
        *,
        timeout: float | None = 0.0,
        cursor: int | None = None,
        action: CursorAction = CursorAction.CURRENT,
    ) -> Message:
        """Read without removing: the first message, or through a cursor."""
        if cursor is not None:
            return self._cursor_read(cursor, action, peek=True, tx=None, timeout=timeout)
        qs = self._resolve(queue)
        return self._take(qs, self._head_select(qs, 1), timeout=timeout, lock=False)[0][1]

    def peek_range(self, queue: QueueRef, after_lookup_id: int = 0, limit: int = 1000) -> list[Message]:
        """Messages with LookupIdentifier > ``after_lookup_id`` in LookupIdentifier order, locked
        ones included (Spark micro-batches, outgoing-queue transmission)."""
        qs = self._resolve(queue)
        return self.store.read(lambda c: ops.fetch_range(c, qs.record.queue_id, after_lookup_id, limit))

    # ---- cursors -------------------------------------------------------------------------

    def create_cursor(self, queue: QueueRef) -> int:
        """Open a cursor (positioned before the first message); returns its handle."""
        qs = self._resolve(queue)
        with self._lock:
            handle = self._next_handle
            self._next_handle += 1
            self._cursors[handle] = _Cursor(qs)
        return handle

    def close_cursor(self, handle: int) -> None:
        """Close a cursor; an unknown handle raises MQ_ERROR_INVALID_HANDLE."""
        with self._lock:
            if self._cursors.pop(handle, None) is None:
                raise MQError(HResult.MQ_ERROR_INVALID_HANDLE, f"no cursor {handle}")

    def _cursor_read(
        self, handle: int, action: CursorAction, *, peek: bool, tx: Transaction | None, timeout: float | None
    ) -> Message:
        with self._lock:
            cur = self._cursors.get(handle)
        if cur is None:
            raise MQError(HResult.MQ_ERROR_INVALID_HANDLE, f"no cursor {handle}")
        qs = cur.queue
        if not peek:
            self._check_receive(qs, tx)
        qid = qs.record.queue_id

        def select(locked: set[int], now: int) -> list[tuple[int, Message]]:
            key = cur.key
            after = key if (key is not None and action == CursorAction.NEXT) else None
            start = key if (key is not None and action == CursorAction.CURRENT) else None
            return self.store.read(
                lambda c: ops.fetch_available(
                    c, qid, now=now, exclude=locked, after_key=after, from_key=start
                )
            )

        found = self._take(qs, select, timeout=timeout, lock=not peek)
        cur.key = found[0][0]
        if peek:
            return found[0][1]
        return self._finish(qs, found, tx)[0]

    # ---- by LookupIdentifier -------------------------------------------------------------

    def _lookup_select(
        self, qs: _QueueState, lookup_id: int, action: LookupAction, peek: bool
    ) -> Callable[[set[int], int], list[tuple[int, Message]]]:
        qid = qs.record.queue_id

        def select(locked: set[int], now: int) -> list[tuple[int, Message]]:
            def q(c: Any) -> list[tuple[int, Message]]:
                if action == LookupAction.FIRST:
                    return ops.fetch_available(c, qid, now=now, exclude=locked)
                if action == LookupAction.LAST:
                    return ops.fetch_available(c, qid, now=now, exclude=locked, descending=True)
                ref = ops.fetch_by_lookup(c, qid, lookup_id)
                if ref is None:
                    raise MQError(HResult.MQ_ERROR_MESSAGE_NOT_FOUND, f"no message {lookup_id}")
                key, _msg = ref
                if action == LookupAction.CURRENT:
                    if lookup_id in locked:
                        # MS-MQDMPR 3.1.7.3.3: Locked position ⇒ MQ_ERROR_TRANSACTION_USAGE.
                        raise MQError(HResult.MQ_ERROR_TRANSACTION_USAGE, f"message {lookup_id} is locked")
                    return ops.fetch_available(c, qid, now=now, from_key=key, before_key=key + 1)
                if action == LookupAction.NEXT:
                    return ops.fetch_available(c, qid, now=now, exclude=locked, after_key=key)
                return ops.fetch_available(c, qid, now=now, exclude=locked, before_key=key, descending=True)

            found = self.store.read(q)
            if not found:
                raise MQError(HResult.MQ_ERROR_MESSAGE_NOT_FOUND, f"no message for {action.name} {lookup_id}")
            return found

        return select

    def peek_by_lookup_id(
        self, queue: QueueRef, lookup_id: int, action: LookupAction = LookupAction.CURRENT
    ) -> Message:
        """MQ_LOOKUP_PEEK_* (MS-MQRR): MQ_ERROR_MESSAGE_NOT_FOUND when there is none."""
        qs = self._resolve(queue)
        return self._take(qs, self._lookup_select(qs, lookup_id, action, True), timeout=0, lock=False)[0][1]

    def receive_by_lookup_id(
        self,
        queue: QueueRef,
        lookup_id: int,
        action: LookupAction = LookupAction.CURRENT,
        *,
        tx: Transaction | None = None,
    ) -> Message:
        """MQ_LOOKUP_RECEIVE_* (MS-MQRR), inside ``tx`` or not."""
        qs = self._resolve(queue)
        self._check_receive(qs, tx)
        found = self._take(qs, self._lookup_select(qs, lookup_id, action, False), timeout=0, lock=True)
        return self._finish(qs, found, tx)[0]

    # ---- two-phase receive (Dequeue Message Begin / End) ---------------------------------

    def dequeue_begin(
        self,
        queue: QueueRef,
        *,
        tx: Transaction | None = None,
        timeout: float | None = 0.0,
        lookup_id: int | None = None,
        action: LookupAction = LookupAction.CURRENT,
    ) -> PendingReceive:
        """Dequeue Message Begin (MS-MQDMPR 3.1.7.1.11): lock the first message (or the one
        selected by LookupIdentifier) for a pending request. With ``tx`` the lock joins the
        transaction (MS-MQRR R_StartTransactionalReceive)."""
        qs = self._resolve(queue)
        self._check_receive(qs, tx)
        if lookup_id is None:
            select = self._head_select(qs, 1)
        else:
            select = self._lookup_select(qs, lookup_id, action, False)
            timeout = 0
        (_key, msg), *_ = self._take(qs, select, timeout=timeout, lock=True)
        if tx is not None and not tx._add_receives(qs, [msg]):
            self._release([_Receive(qs, msg)])
            tx._check_active()
        return PendingReceive(msg, qs, tx)

    def dequeue_end(self, pending: PendingReceive, delete: bool) -> None:
        """Dequeue Message End (MS-MQDMPR 3.1.7.1.12).

        Outside a transaction: ``delete`` removes the message durably (AckReceive, or
        NackQueuePurged if it was purged meanwhile), else it is available again. Inside:
        ``delete`` leaves the decision to commit/abort; ``delete=False`` (RR_NACK) takes it
        out of the transaction and makes it available again (remote-read.md §7.13,
        inferred). A second end raises MQ_ERROR_TRANSACTION_SEQUENCE.
        """
        if pending.ended:
            raise MQError(HResult.MQ_ERROR_TRANSACTION_SEQUENCE, "receive already ended")
        pending.ended = True
        receive = _Receive(pending.queue, pending.message)
        if pending.transaction is not None:
            if not delete and pending.transaction._drop_receive(pending.lookup_id) is not None:
                self._release([receive])
            return
        if delete:
            self._finish(pending.queue, [(0, pending.message)], None)
        else:
            self._release([receive])

    # ---- expiry --------------------------------------------------------------------------

    def expire(self, now: float, limit: int = 10000) -> int:
        """Move messages whose TimeToBeReceived / TimeToReachQueue passed to the dead-letter
        queues (transactional ones to the transactional dead-letter queue) with the class
        NackReceiveTimeout / NackReachQueueTimeout recorded. Locked messages wait for their
        lock to end. Returns how many moved."""
        self._check_open()
        rows = self.store.read(lambda c: ops.fetch_expired(c, int(now), limit))
        dead = self._queues[names.DEADLETTER].record.queue_id
        dead_x = self._queues[names.DEADXACT].record.queue_id
        removes: list[Remove] = []
        held: list[_Receive] = []
        for qid, lookup_id, size, transactional, cls in rows:
            qs = self._by_id.get(qid)
            if qs is None:
                continue
            with qs.cond:
                if lookup_id in qs.locked:
                    continue
                qs.locked.add(lookup_id)
            held.append(_Receive(qs, Message(lookup_id=lookup_id)))
            removes.append(Remove(qid, lookup_id, size, dead_x if transactional else dead, cls))
        if not removes:
            return 0
        try:
            events = self.store.write(ops.expire_messages(removes))
        finally:
            self._unlock(held)
        self._notify([self._by_id[dead], self._by_id[dead_x]])
        self._emit(events)
        return len(removes)

    # ---- transfer between queue managers (issue 4 seams) ---------------------------------

    def outgoing_sequence(self, queue: QueueRef) -> OutgoingSequenceState:
        """Persisted OutgoingTxSequenceID / next OutgoingTxSequenceNumber of an outgoing queue."""
        qs = self._resolve(queue)
        return self.store.read(lambda c: ops.outgoing_sequence(c, qs.record.queue_id))

    def release_outgoing(self, queue: QueueRef, up_to_number: int) -> tuple[list[int], OutgoingSequenceState]:
        """OrderAck for ``up_to_number``: drop the acknowledged messages of the current
        sequence durably; start a new sequence when none is left (MS-MQQB 3.1.5.6)."""
        qs = self._resolve(queue)
        return self.store.write(ops.release_outgoing(qs.record.queue_id, up_to_number))

    def accept_incoming(
        self, queue: QueueRef, messages: Sequence[Message], state: IncomingSequenceState
    ) -> list[int]:
        """Store accepted incoming transactional messages (as sent: Identifier, sequence
        fields kept) together with the new incoming sequence state, atomically and durably
        (invariant 4); ArrivedTime is set now. Returns their local LookupIdentifiers."""
        qs = self._resolve(queue)
        sends = [self._send_record(qs, message_to_row(m), m, m.sent_time) for m in messages]
        stored = self.store.write(
            ops.accept_incoming(sends, [replace(state, queue_id=qs.record.queue_id)], self._now())
        )
        self._notify([qs])
        return stored

    def record_incoming(self, states: Sequence[IncomingSequenceState]) -> None:
        """Persist incoming sequence state without messages (rejections)."""
        self._check_open()
        self.store.write(ops.record_incoming(states))

    def incoming_sequences(self) -> list[IncomingSequenceState]:
        """Every persisted incoming sequence (restore the receiver state at start)."""
        self._check_open()
        return self.store.read(ops.incoming_sequences)


def _acks(m: Message) -> bool:
    return bool(m.ack_flags or m.positive_journaling or m.negative_journaling or m.final_ack_required)


__all__ += ["ACK_RECEIVE"]
