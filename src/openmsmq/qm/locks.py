"""Lock bookkeeping of the QueueManager: in-memory locks of received messages dropped
after a commit, an abort or a NACK, and PurgePending messages deleted when their lock
ends (MS-MQDMPR 3.1.7.1.7). Split from :mod:`openmsmq.qm.manager`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from openmsmq.errors import MQError
from openmsmq.qm.handles import _QueueState
from openmsmq.qm.transaction import _Receive
from openmsmq.store import ops
from openmsmq.store.backend import StoreBackend
from openmsmq.store.ops import AckRows, Remove, RemovedMessage, Send
from openmsmq.store.records import Message

__all__ = ["NACK_Q_PURGED", "LocksMixin"]

#: MQMSG_CLASS_NACK_Q_PURGED (MS-MQMQ 2.2.18.1.6): the message was purged.
NACK_Q_PURGED = 0xC001


def _acks(m: Message) -> bool:
    """The message asked for acknowledgments, journaling or a FinalAck."""
    return bool(m.ack_flags or m.positive_journaling or m.negative_journaling or m.final_ack_required)


class LocksMixin:
    """Unlock and release methods of the QueueManager, and the acknowledgments of
    removals other than receives, written in the removal's own transaction."""

    if TYPE_CHECKING:
        store: StoreBackend
        _closed: bool
        _commit_hooks: dict[
            Callable[[list[RemovedMessage]], None], Callable[[list[RemovedMessage]], list[Send]]
        ]
        _by_id: dict[int, _QueueState]

        def _removes_for(self, receives: Sequence[_Receive]) -> list[Remove]: ...
        def _emit(self, events: list[RemovedMessage], *, hooked: bool = False) -> None: ...
        def _notify(self, states: Iterable[_QueueState]) -> None: ...

    def _ack_rows(self, events: list[RemovedMessage]) -> AckRows | None:
        """The commit hooks' acknowledgment rows for ``events`` (removals about to be
        written), for the removal's own transaction; None when no hook is registered.

        Built before the removal's store operation: building them may open (create) an
        outgoing queue or reserve Identifier uniquifiers, which are store writes of their
        own. A removal that turns out to remove other messages leaves them unwritten
        (:class:`~openmsmq.store.ops.AckRows`); :meth:`_removal_done` then sends them
        as before, in a second commit."""
        if not self._commit_hooks:
            return None
        rows: list[Send] = []
        for hook in list(self._commit_hooks.values()):
            rows += hook(events)
        return AckRows((ev.message.lookup_id for ev in events), rows)

    def _removal_done(self, events: list[RemovedMessage], acks: AckRows | None) -> None:
        """After a removal committed: wake receivers of the queues its acknowledgments went
        to, and report ``events`` to the listeners (hooks only if their rows were not
        written with it)."""
        if acks is not None and acks.written:
            if acks.sends:
                self._notify(self._by_id[s.queue_id] for s in acks.sends if s.queue_id in self._by_id)
            self._emit(events, hooked=True)
        else:
            self._emit(events)

    def _unlock(self, receives: Iterable[_Receive], *, removed: bool = False) -> None:
        """Drop the locks of ``receives``. Unless their messages were ``removed`` from the
        queue (durably deleted or moved), they are available again: the queue's head hint
        (:meth:`ReadsMixin._head_select`) is dropped so the next head read starts at
        the head."""
        by_queue: dict[_QueueState, list[int]] = {}
        for r in receives:
            ids = by_queue.get(r.queue)
            if ids is None:
                by_queue[r.queue] = [r.message.lookup_id]
            else:
                ids.append(r.message.lookup_id)
        self._unlock_ids(by_queue, removed=removed)

    def _unlock_ids(self, by_queue: dict[_QueueState, list[int]], *, removed: bool = False) -> None:
        """:meth:`_unlock` of LookupIdentifiers grouped by queue.

        The locks of ``removed`` messages are dropped without waiting for the queue's
        condition: the ids go to ``qs.removed`` and whoever holds the condition next
        drops them (:meth:`_QueueState.settle`, called before ``locked`` is read), this
        thread at once if the condition is free. Their rows are gone and LookupIdentifiers
        are never reused, so until then a stale lock hides nothing. With 8 threads
        receiving 1 message per transaction, the second wait for the condition per
        receive (behind the others' head reads) cost about 8% of the CPU per commit.
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

    def _release(self, receives: Sequence[_Receive]) -> None:
        """Put locked messages back (Transaction Abort / NACK); PurgePending ones are deleted.

        A purge or ``remove_through`` may mark a message PurgePending while this runs
        (between the look at the marks and the unlock): such a message stays locked at
        the unlock and is deleted in a second round, so the mark is never dropped."""
        handled: set[int] = set()
        pending: Sequence[_Receive] = receives
        while pending:
            purged = [
                r for r in pending if r.message.lookup_id in r.queue.purge_pending and not r.queue.deleted
            ]
            if purged and not self._closed:
                # On a store failure the message stays on disk (no acknowledgment); it
                # is unlocked below. The acknowledgments are written with the removal.
                removes = [replace(x, target_queue_id=None) for x in self._removes_for(purged)]
                events = [
                    RemovedMessage(r.queue.record.queue_id, r.message, NACK_Q_PURGED)
                    for r in purged
                    if _acks(r.message)
                ]
                acks = self._ack_rows(events) if events else None
                try:
                    self.store.write(ops.commit_work(acks.sends if acks else [], removes))
                except MQError:
                    pass
                else:
                    if acks is not None:
                        acks.written = True
                    self._removal_done(events, acks)
            handled.update(r.message.lookup_id for r in purged)
            pending = self._unlock_released(pending, handled)
        self._notify(r.queue for r in receives)

    def _unlock_released(self, receives: Sequence[_Receive], handled: set[int]) -> list[_Receive]:
        """Unlock released messages (available again: the head hint is dropped), except
        those marked PurgePending after ``handled`` was looked at: they stay locked and
        are returned, for :meth:`_release` to delete."""
        late: list[_Receive] = []
        by_queue: dict[_QueueState, list[_Receive]] = {}
        for r in receives:
            by_queue.setdefault(r.queue, []).append(r)
        for qs, rs in by_queue.items():
            with qs.cond:
                qs.settle()
                qs.reset_head()
                for r in rs:
                    lid = r.message.lookup_id
                    if lid in qs.purge_pending and lid not in handled and not qs.deleted and not self._closed:
                        late.append(r)
                        continue
                    qs.locked.discard(lid)
                    qs.purge_pending.discard(lid)
        return late
