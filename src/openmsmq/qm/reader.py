"""Reads of the queue manager: receive, peek, cursors, reads by LookupIdentifier and
two-phase receive (MS-MQDMPR 3.1.7.1.10–12, MS-MQRR R_StartReceive / R_EndReceive).

The :class:`Reader` of a :class:`~openmsmq.qm.manager.QueueManager`; the queue manager
delegates to it. Every waiting call takes an optional
:class:`~openmsmq.qm.handles.CancelToken`: its ``cancel()`` wakes the waiter at once
with MQ_ERROR_OPERATION_CANCELLED (MS-MQRR R_CancelReceive, or a handle closed while a
read waits).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from openmsmq.errors import HResult, MQError
from openmsmq.observability.sink import NULL_METRICS, MetricsSink
from openmsmq.qm.handles import (
    PREFETCH,
    PREFETCH_BYTES,
    CancelToken,
    Cursor,
    CursorAction,
    LookupAction,
    QueueState,
)
from openmsmq.qm.locks import LockTable
from openmsmq.qm.registry import QueueRef, QueueRegistry
from openmsmq.qm.transaction import CommitWork, PendingReceive, Receive, Transaction
from openmsmq.store import reads
from openmsmq.store.backend import StoreBackend
from openmsmq.store.records import INFINITE, MessageRecord, QueueType

__all__ = ["Reader"]

_WAKE_SLICE = 1.0  # s: waiters re-check deletion/close at least this often


def _read_ahead(found: list[tuple[int, MessageRecord]]) -> list[tuple[int, MessageRecord]] | None:
    """What a head receive keeps of the messages it read beyond the first: those up to
    the first that can expire (the read-ahead is handed out without looking at the
    clock) and within :data:`PREFETCH_BYTES`, last first (``list.pop`` order)."""
    kept: list[tuple[int, MessageRecord]] = []
    size = 0
    for entry in found[1:]:
        m = entry[1]
        size += len(m.body)
        if m.time_to_be_received != INFINITE or size > PREFETCH_BYTES:
            break
        kept.append(entry)
    kept.reverse()
    return kept or None


#: A candidate query: (locked LookupIdentifiers, now) -> [(order_key, message)].
Select = Callable[[set[int], int], list[tuple[int, MessageRecord]]]


class Reader:
    """Receive / peek / cursor / lookup / two-phase receive of a queue manager.

    ``commit`` writes a transaction's work (the QueueManager's commit: a receive outside
    a transaction is committed at once); ``clock`` gives seconds since 1970 (expiry)."""

    def __init__(
        self,
        store: StoreBackend,
        queues: QueueRegistry,
        locks: LockTable,
        clock: Callable[[], float],
        commit: CommitWork,
        metrics: MetricsSink = NULL_METRICS,
    ) -> None:
        self._store = store
        #: Where a waiting read that was woken by a commit reports the wake-up
        #: (``stored_to_reader``, observability.sink.STAGES).
        self._metrics = metrics
        self._queues = queues
        self._locks = locks
        #: Seconds since 1970 (the QueueManager sets it when its clock changes).
        self.clock = clock
        self._commit = commit
        self._lock = threading.Lock()  # guards the cursors
        self._cursors: dict[int, Cursor] = {}
        self._next_handle = 1

    def _now(self) -> int:
        return int(self.clock())

    # ---- receiving -----------------------------------------------------------------------

    def _take(
        self,
        qs: QueueState,
        select: Select,
        *,
        timeout: float | None,
        lock: bool,
        cancel: CancelToken | None = None,
        head: bool = False,
    ) -> list[tuple[int, MessageRecord]]:
        """Select under the queue's condition, lock if asked, wait for an enqueue up to
        ``timeout``; a cancelled ``cancel`` token fails it with MQ_ERROR_OPERATION_CANCELLED.
        ``head``: ``select`` is an advancing head select, which keeps the queue's
        read-ahead itself; a lock taken by any other select drops it."""
        deadline = None if timeout is None else time.monotonic() + timeout
        cond = qs.cond
        if cancel is not None:
            cancel.enter(cond)
        try:
            with cond:
                # Counted before the first select: a commit that this select does not see
                # completes after the count went up, so its notify (QueueManager._notify)
                # is not skipped while this read goes on to wait.
                qs.readers += 1
                waited = False
                try:
                    while True:
                        if qs.deleted:
                            raise MQError(
                                HResult.MQ_ERROR_QUEUE_DELETED, f"queue {qs.record.display_name} was deleted"
                            )
                        self._queues.check_open()
                        if cancel is not None and cancel.cancelled:
                            raise MQError(HResult.MQ_ERROR_OPERATION_CANCELLED, "the read was cancelled")
                        qs.settle()
                        found = select(qs.locked, self._now())
                        if found:
                            if qs.notified is not None:
                                if waited:
                                    self._metrics.observe_stage(
                                        "stored_to_reader", time.monotonic() - qs.notified
                                    )
                                qs.notified = None
                            if lock:
                                qs.locked.update([m.lookup_id for _, m in found])
                                if not head and qs.prefetch is not None:
                                    qs.drop_prefetch()
                            return found
                        remaining = None if deadline is None else deadline - time.monotonic()
                        if remaining is not None and remaining <= 0:
                            raise MQError(
                                HResult.MQ_ERROR_IO_TIMEOUT, f"no message in {qs.record.display_name}"
                            )
                        cond.wait(_WAKE_SLICE if remaining is None else min(remaining, _WAKE_SLICE))
                        waited = True
                finally:
                    qs.readers -= 1
        finally:
            if cancel is not None:
                cancel.leave(cond)

    def _finish(
        self, qs: QueueState, found: list[tuple[int, MessageRecord]], tx: Transaction | None
    ) -> list[MessageRecord]:
        """Complete a destructive read of locked messages: hand them to ``tx``, or delete now."""
        msgs = [m for _, m in found]
        if tx is not None:
            if not tx.add_receives(qs, msgs):
                self._locks.release([Receive(qs, m) for m in msgs])
                tx.check_active()
            return msgs
        try:
            self._commit([], [(qs, msgs)], None)
        except BaseException:
            self._locks.unlock_ids({qs: [m.lookup_id for m in msgs]})
            self._queues.notify([qs])
            raise
        return msgs

    def _check_receive(self, qs: QueueState, tx: Transaction | None) -> None:
        if tx is not None:
            tx.check_active()
            if not qs.record.transactional:
                raise MQError(
                    HResult.MQ_ERROR_TRANSACTION_USAGE, f"queue {qs.record.display_name} is not transactional"
                )

    def _head_select(
        self, qs: QueueState, limit: int, *, advance: bool = False, max_bytes: int | None = None
    ) -> Select:
        """The first ``limit`` available messages, read from the queue's head hint.

        ``advance``: the caller locks what is found (under the same hold of the queue's
        condition), so the hint moves past the last of them: every message of that
        priority band before it is then locked (or expired — an expired message is never
        received again; the expiry moves it). See :meth:`QueueManager._unlock` for when
        the hint is dropped.
        """
        rec = qs.record
        qid = rec.queue_id
        # A transactional private queue holds priority 0 only (MS-MQDMPR forces PR to 0
        # with a TransactionHeader): no higher-priority band to read before the hint.
        one_band = rec.transactional and rec.queue_type == QueueType.PRIVATE
        # A receive of one message from such a queue reads ahead (see PREFETCH).
        single = advance and one_band and limit == 1

        def select(locked: set[int], now: int) -> list[tuple[int, MessageRecord]]:
            pre = qs.prefetch
            if pre is not None and advance:
                if single:
                    entry = pre.pop()
                    if not pre:
                        qs.prefetch = None
                    # Never locked (any other lock drops the read-ahead) and never
                    # expiring; checked all the same: otherwise read the head again.
                    if entry[1].lookup_id not in locked and entry[1].time_to_be_received == INFINITE:
                        qs.head_key = entry[0] + 1
                        return [entry]
                # A batch read (or a read-ahead found stale) reads the rows again: they
                # are neither locked nor removed, so the head read finds them.
                qs.prefetch = None
            hint = qs.head_key
            ahead = qs.ahead if single else 0
            # On the write connection when the store is idle (Store.read_idle): its page
            # cache holds what the last commits wrote.
            found = self._store.read_idle(
                lambda c: reads.fetch_available(
                    c,
                    qid,
                    now=now,
                    limit=limit + ahead,
                    exclude=locked,
                    head_key=hint,
                    one_band=one_band,
                    max_bytes=max_bytes,
                )
            )
            if single and found:
                # The next read's read-ahead, judged by this message: none after one that
                # can expire (nothing of it would be kept), fewer for large ones.
                m = found[0][1]
                qs.ahead = (
                    min(PREFETCH, PREFETCH_BYTES // max(1, len(m.body)))
                    if m.time_to_be_received == INFINITE
                    else 0
                )
                if len(found) > 1:
                    qs.prefetch = _read_ahead(found)
                    found = found[:1]
            if advance and found:
                qs.head_key = found[-1][0] + 1
            return found

        return select

    def receive(
        self,
        queue: QueueRef,
        *,
        tx: Transaction | None = None,
        timeout: float | None = 0.0,
        cursor: int | None = None,
        cancel: CancelToken | None = None,
    ) -> MessageRecord:
        """Receive the first message (priority, then LookupIdentifier), or the one at ``cursor``.

        ``timeout`` in seconds (None = wait forever) → MQ_ERROR_IO_TIMEOUT; ``cancel`` →
        MQ_ERROR_OPERATION_CANCELLED. With ``tx`` the message is locked until commit
        (deleted / journaled) or abort (back in place).
        """
        if cursor is not None:
            return self._cursor_read(
                cursor, CursorAction.CURRENT, peek=False, tx=tx, timeout=timeout, cancel=cancel
            )
        return self.receive_many(queue, 1, tx=tx, timeout=timeout, cancel=cancel)[0]

    def receive_many(
        self,
        queue: QueueRef,
        max_count: int,
        *,
        tx: Transaction | None = None,
        timeout: float | None = 0.0,
        cancel: CancelToken | None = None,
        max_bytes: int | None = None,
    ) -> list[MessageRecord]:
        """Receive up to ``max_count`` messages at once (waits for the first only);
        ``max_bytes``: no more after the one whose body brings the total to it (one at
        least), so a reply that carries them stays bounded."""
        qs = self._queues.resolve(queue)
        self._check_receive(qs, tx)
        select = self._head_select(qs, max_count, advance=True, max_bytes=max_bytes)
        found = self._take(qs, select, timeout=timeout, lock=True, cancel=cancel, head=True)
        return self._finish(qs, found, tx)

    def peek(
        self,
        queue: QueueRef,
        *,
        timeout: float | None = 0.0,
        cursor: int | None = None,
        action: CursorAction = CursorAction.CURRENT,
        cancel: CancelToken | None = None,
    ) -> MessageRecord:
        """Read without removing: the first message, or through a cursor."""
        if cursor is not None:
            return self._cursor_read(cursor, action, peek=True, tx=None, timeout=timeout, cancel=cancel)
        qs = self._queues.resolve(queue)
        return self._take(qs, self._head_select(qs, 1), timeout=timeout, lock=False, cancel=cancel)[0][1]

    def read_through_cursor(
        self,
        queue: QueueRef,
        cursor: int,
        n: int,
        *,
        receive: bool,
        advance: bool = False,
        tx: Transaction | None = None,
        timeout: float | None = 0.0,
        first_read: Callable[[Callable[[float | None], MessageRecord]], MessageRecord] | None = None,
        max_bytes: int | None = None,
    ) -> list[MessageRecord]:
        """Up to ``n`` reads through ``cursor`` (a batched R_StartReceive with a cursor,
        MS-MQRR 3.1.4.7): a receive takes the message at the cursor each time; a peek
        reads the message at it (after it when ``advance``), then the following ones.
        Only the first read waits, up to ``timeout``; ``first_read``, given that read as
        a function of the wait, runs it instead (e.g. a cancellable sliced wait). The
        batch ends early when no message is left after the first, or after the message
        whose body brings the total to ``max_bytes``."""
        out: list[MessageRecord] = []
        used = 0
        for i in range(n):
            if max_bytes is not None and used >= max_bytes:
                break
            move = CursorAction.NEXT if (advance or i > 0) else CursorAction.CURRENT

            def one(x: float | None, move: CursorAction = move) -> MessageRecord:
                if receive:
                    return self.receive(queue, tx=tx, timeout=x, cursor=cursor)
                return self.peek(queue, timeout=x, cursor=cursor, action=move)

            try:
                if i:
                    out.append(one(0.0))
                else:
                    out.append(first_read(one) if first_read is not None else one(timeout))
                used += len(out[-1].body)
            except MQError as exc:
                if i == 0 or exc.hresult != HResult.MQ_ERROR_IO_TIMEOUT:
                    raise
                break
        return out

    def peek_many(
        self,
        queue: QueueRef,
        max_count: int,
        *,
        timeout: float | None = 0.0,
        cursor: int | None = None,
        action: CursorAction = CursorAction.CURRENT,
        cancel: CancelToken | None = None,
        max_bytes: int | None = None,
    ) -> list[MessageRecord]:
        """Peek up to ``max_count`` available messages in queue order (priority, then
        LookupIdentifier), skipping locked and expired ones as :meth:`peek` does; waits
        up to ``timeout`` for the first only (MQ_ERROR_IO_TIMEOUT when there is none).

        With ``cursor``: the batch starts at the cursor (``CURRENT``: the message at it,
        or the first for a new cursor; ``NEXT``: the one after it) and the cursor is left
        on the last message returned — as that many single PEEK_NEXT calls would.
        """
        if max_count < 1:
            raise MQError(HResult.MQ_ERROR_ILLEGAL_PROPERTY_VALUE, "max_count must be at least 1")
        if cursor is not None:
            cur = self._get_cursor(cursor)
            select = self._cursor_select(cur, action, max_count)
            found = self._take(cur.queue, select, timeout=timeout, lock=False, cancel=cancel)
            cur.key = found[-1][0]
        else:
            qs = self._queues.resolve(queue)
            select = self._head_select(qs, max_count, max_bytes=max_bytes)
            found = self._take(qs, select, timeout=timeout, lock=False, cancel=cancel)
        return [m for _, m in found]

    # ---- cursors -------------------------------------------------------------------------

    def create_cursor(self, queue: QueueRef) -> int:
        """Open a cursor (positioned before the first message); returns its handle."""
        qs = self._queues.resolve(queue)
        with self._lock:
            handle = self._next_handle
            self._next_handle += 1
            self._cursors[handle] = Cursor(qs)
        return handle

    def close_cursor(self, handle: int) -> None:
        """Close a cursor; an unknown handle raises MQ_ERROR_INVALID_HANDLE."""
        with self._lock:
            if self._cursors.pop(handle, None) is None:
                raise MQError(HResult.MQ_ERROR_INVALID_HANDLE, f"no cursor {handle}")

    def _get_cursor(self, handle: int) -> Cursor:
        with self._lock:
            cur = self._cursors.get(handle)
        if cur is None:
            raise MQError(HResult.MQ_ERROR_INVALID_HANDLE, f"no cursor {handle}")
        return cur

    def _cursor_select(self, cur: Cursor, action: CursorAction, limit: int) -> Select:
        qid = cur.queue.record.queue_id

        def select(locked: set[int], now: int) -> list[tuple[int, MessageRecord]]:
            key = cur.key
            after = key if (key is not None and action == CursorAction.NEXT) else None
            start = key if (key is not None and action == CursorAction.CURRENT) else None
            return self._store.read(
                lambda c: reads.fetch_available(
                    c, qid, now=now, limit=limit, exclude=locked, after_key=after, from_key=start
                )
            )

        return select

    def _cursor_read(
        self,
        handle: int,
        action: CursorAction,
        *,
        peek: bool,
        tx: Transaction | None,
        timeout: float | None,
        cancel: CancelToken | None = None,
    ) -> MessageRecord:
        cur = self._get_cursor(handle)
        qs = cur.queue
        if not peek:
            self._check_receive(qs, tx)
        select = self._cursor_select(cur, action, 1)
        found = self._take(qs, select, timeout=timeout, lock=not peek, cancel=cancel)
        cur.key = found[0][0]
        if peek:
            return found[0][1]
        return self._finish(qs, found, tx)[0]

    # ---- by LookupIdentifier -------------------------------------------------------------

    def _lookup_select(self, qs: QueueState, lookup_id: int, action: LookupAction, peek: bool) -> Select:
        qid = qs.record.queue_id

        def select(locked: set[int], now: int) -> list[tuple[int, MessageRecord]]:
            def q(c: Any) -> list[tuple[int, MessageRecord]]:
                if action == LookupAction.FIRST:
                    return reads.fetch_available(c, qid, now=now, exclude=locked)
                if action == LookupAction.LAST:
                    return reads.fetch_available(c, qid, now=now, exclude=locked, descending=True)
                ref = reads.fetch_by_lookup(c, qid, lookup_id)
                if ref is None:
                    raise MQError(HResult.MQ_ERROR_MESSAGE_NOT_FOUND, f"no message {lookup_id}")
                key, _msg = ref
                if action == LookupAction.CURRENT:
                    if lookup_id in locked:
                        # MS-MQDMPR 3.1.7.3.3: Locked position ⇒ MQ_ERROR_TRANSACTION_USAGE.
                        raise MQError(HResult.MQ_ERROR_TRANSACTION_USAGE, f"message {lookup_id} is locked")
                    return reads.fetch_available(c, qid, now=now, from_key=key, before_key=key + 1)
                if action == LookupAction.NEXT:
                    return reads.fetch_available(c, qid, now=now, exclude=locked, after_key=key)
                return reads.fetch_available(c, qid, now=now, exclude=locked, before_key=key, descending=True)

            found = self._store.read(q)
            if not found:
                raise MQError(HResult.MQ_ERROR_MESSAGE_NOT_FOUND, f"no message for {action.name} {lookup_id}")
            return found

        return select

    def peek_by_lookup_id(
        self, queue: QueueRef, lookup_id: int, action: LookupAction = LookupAction.CURRENT
    ) -> MessageRecord:
        """MQ_LOOKUP_PEEK_* (MS-MQRR): MQ_ERROR_MESSAGE_NOT_FOUND when there is none."""
        qs = self._queues.resolve(queue)
        return self._take(qs, self._lookup_select(qs, lookup_id, action, True), timeout=0, lock=False)[0][1]

    def receive_by_lookup_id(
        self,
        queue: QueueRef,
        lookup_id: int,
        action: LookupAction = LookupAction.CURRENT,
        *,
        tx: Transaction | None = None,
    ) -> MessageRecord:
        """MQ_LOOKUP_RECEIVE_* (MS-MQRR), inside ``tx`` or not."""
        qs = self._queues.resolve(queue)
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
        cancel: CancelToken | None = None,
    ) -> PendingReceive:
        """Dequeue Message Begin (MS-MQDMPR 3.1.7.1.11): lock the first message (or the one
        selected by LookupIdentifier) for a pending request. With ``tx`` the lock joins the
        transaction (MS-MQRR R_StartTransactionalReceive)."""
        qs = self._queues.resolve(queue)
        self._check_receive(qs, tx)
        if lookup_id is None:
            select = self._head_select(qs, 1, advance=True)
        else:
            select = self._lookup_select(qs, lookup_id, action, False)
            timeout = 0
        (_key, msg), *_ = self._take(
            qs, select, timeout=timeout, lock=True, cancel=cancel, head=lookup_id is None
        )
        if tx is not None and not tx.add_receives(qs, [msg]):
            self._locks.release([Receive(qs, msg)])
            tx.check_active()
        return PendingReceive(msg, qs, tx)

    def dequeue_begin_many(
        self,
        queue: QueueRef,
        max_count: int,
        *,
        tx: Transaction | None = None,
        timeout: float | None = 0.0,
        cancel: CancelToken | None = None,
        max_bytes: int | None = None,
    ) -> list[PendingReceive]:
        """Dequeue Message Begin (MS-MQDMPR 3.1.7.1.11) for up to ``max_count`` messages
        from the head at once: one select and one lock, as :meth:`receive_many` (waits up
        to ``timeout`` for the first only; ``max_bytes`` as there). End each with
        :meth:`dequeue_end`."""
        if max_count < 1:
            raise MQError(HResult.MQ_ERROR_ILLEGAL_PROPERTY_VALUE, "max_count must be at least 1")
        qs = self._queues.resolve(queue)
        self._check_receive(qs, tx)
        select = self._head_select(qs, max_count, advance=True, max_bytes=max_bytes)
        msgs = [m for _, m in self._take(qs, select, timeout=timeout, lock=True, cancel=cancel, head=True)]
        if tx is not None and not tx.add_receives(qs, msgs):
            self._locks.release([Receive(qs, m) for m in msgs])
            tx.check_active()
        return [PendingReceive(m, qs, tx) for m in msgs]

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
        receive = Receive(pending.queue, pending.message)
        if pending.transaction is not None:
            if not delete and pending.transaction.drop_receive(pending.lookup_id) is not None:
                self._locks.release([receive])
            return
        if delete:
            self._finish(pending.queue, [(0, pending.message)], None)
        else:
            self._locks.release([receive])
