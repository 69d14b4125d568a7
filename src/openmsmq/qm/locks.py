"""The lock table of the QueueManager: in-memory locks of received messages dropped
after a commit, an abort or a NACK, and PurgePending messages deleted when their lock
ends (MS-MQDMPR 3.1.7.1.7)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from openmsmq.errors import MQError
from openmsmq.qm.handles import QueueState
from openmsmq.qm.registry import QueueRegistry
from openmsmq.qm.removals import RemovalEvents
from openmsmq.qm.transaction import Receive
from openmsmq.store import ops
from openmsmq.store.backend import StoreBackend
from openmsmq.store.ops import Remove, RemovedMessage
from openmsmq.store.records import MessageRecord
from openmsmq.wire.fast import fast_constructor

__all__ = ["NACK_Q_PURGED", "LockTable", "removes_for"]

#: MQMSG_CLASS_NACK_Q_PURGED (MS-MQMQ 2.2.18.1.6): the message was purged.
NACK_Q_PURGED = 0xC001


def _acks(m: MessageRecord) -> bool:
    """The message asked for acknowledgments, journaling or a FinalAck."""
    return bool(m.ack_flags or m.positive_journaling or m.negative_journaling or m.final_ack_required)


def removes_for(receives: Sequence[Receive]) -> list[Remove]:
    """The store removals of received messages: deleted, or moved to their queue's
    journal when it journals."""
    out = []
    make = _make_remove
    rec = None
    qid = target = None
    for r in receives:
        if r.queue.record is not rec:  # receives come grouped by queue: once per run
            rec = r.queue.record
            qid, target = rec.queue_id, (rec.journal_queue_id if rec.journal else None)
        m = r.message
        size = len(m.body) + 2 * len(m.label) + len(m.extension)  # Message.size, inline
        out.append(make(qid, m.lookup_id, size, target, None))
    return out


class LockTable:
    """The in-memory locks of received messages: dropped after a commit, an abort or a
    NACK; PurgePending messages deleted when their lock ends (with the acknowledgments
    of that removal written in its own transaction)."""

    def __init__(self, store: StoreBackend, queues: QueueRegistry, removals: RemovalEvents) -> None:
        self._store = store
        self._queues = queues
        self._removals = removals

    def unlock(self, receives: Iterable[Receive], *, removed: bool = False) -> None:
        """Drop the locks of ``receives``. Unless their messages were ``removed`` from the
        queue (durably deleted or moved), they are available again: the queue's head hint
        (``Reader._head_select``) is dropped so the next head read starts at
        the head."""
        by_queue: dict[QueueState, list[int]] = {}
        for r in receives:
            ids = by_queue.get(r.queue)
            if ids is None:
                by_queue[r.queue] = [r.message.lookup_id]
            else:
                ids.append(r.message.lookup_id)
        self.unlock_ids(by_queue, removed=removed)

    def unlock_ids(self, by_queue: dict[QueueState, list[int]], *, removed: bool = False) -> None:
        """:meth:`unlock` of LookupIdentifiers grouped by queue.

        The locks of ``removed`` messages are dropped without waiting for the queue's
        condition: the ids go to ``qs.removed`` and whoever holds the condition next
        drops them (:meth:`QueueState.settle`, called before ``locked`` is read), this
        thread at once if the condition is free. Their rows are gone and LookupIdentifiers
        are never reused, so until then a stale lock hides nothing. With many threads
        receiving one message per transaction, a second wait for the condition per
        receive (behind the others' head reads) was a visible share of each commit.
        """
        for qs, ids in by_queue.items():  # one acquisition per queue, not per message
            if removed:
                qs.removed.append(ids)
                if qs.cond.acquire(blocking=False):
                    try:
                        qs.settle()
                    finally:
                        qs.cond.release()
                continue
            with qs.cond:
                qs.settle()
                qs.reset_head()
                qs.locked.difference_update(ids)
                if qs.purge_pending:
                    qs.purge_pending.difference_update(ids)

    def release(self, receives: Sequence[Receive]) -> None:
        """Put locked messages back (Transaction Abort / NACK); PurgePending ones are deleted.

        A purge or ``remove_through`` may mark a message PurgePending while this runs
        (between the look at the marks and the unlock): such a message stays locked at
        the unlock and is deleted in a second round, so the mark is never dropped."""
        handled: set[int] = set()
        pending: Sequence[Receive] = receives
        while pending:
            purged = [
                r for r in pending if r.message.lookup_id in r.queue.purge_pending and not r.queue.deleted
            ]
            if purged and not self._queues.closed:
                # On a store failure the message stays on disk (no acknowledgment); it
                # is unlocked below. The acknowledgments are written with the removal.
                removes = [replace(x, target_queue_id=None) for x in removes_for(purged)]
                events = [
                    RemovedMessage(r.queue.record.queue_id, r.message, NACK_Q_PURGED)
                    for r in purged
                    if _acks(r.message)
                ]
                acks = self._removals.ack_rows(events) if events else None
                try:
                    self._store.write(ops.commit_work(acks.sends if acks else [], removes))
                except MQError:
                    pass
                else:
                    if acks is not None:
                        acks.written = True
                    self._removals.done(events, acks)
            handled.update(r.message.lookup_id for r in purged)
            pending = self._unlock_released(pending, handled)
        self._queues.notify(r.queue for r in receives)

    def _unlock_released(self, receives: Sequence[Receive], handled: set[int]) -> list[Receive]:
        """Unlock released messages (available again: the head hint is dropped), except
        those marked PurgePending after ``handled`` was looked at: they stay locked and
        are returned, for :meth:`release` to delete."""
        late: list[Receive] = []
        by_queue: dict[QueueState, list[Receive]] = {}
        for r in receives:
            by_queue.setdefault(r.queue, []).append(r)
        for qs, rs in by_queue.items():
            with qs.cond:
                qs.settle()
                qs.reset_head()
                for r in rs:
                    lid = r.message.lookup_id
                    if (
                        lid in qs.purge_pending
                        and lid not in handled
                        and not qs.deleted
                        and not self._queues.closed
                    ):
                        late.append(r)
                        continue
                    qs.locked.discard(lid)
                    qs.purge_pending.discard(lid)
        return late


_make_remove = fast_constructor(Remove)
