"""Messages leaving a queue without being received: expiry into the dead-letter queues
(TimeToBeReceived / TimeToReachQueue), moves by the transfer (a message it cannot send),
and the purge of an outgoing queue."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from functools import partial

from openmsmq.errors import MQError
from openmsmq.observability.sink import MetricsSink
from openmsmq.qm import names
from openmsmq.qm.handles import QueueHandle, QueueState
from openmsmq.qm.locks import LockTable
from openmsmq.qm.registry import QueueRegistry
from openmsmq.qm.removals import RemovalEvents
from openmsmq.qm.transaction import Receive
from openmsmq.store import ops, reads
from openmsmq.store.backend import StoreBackend
from openmsmq.store.ops import Remove
from openmsmq.store.records import MessageRecord
from openmsmq.wire.constants import MessageClass

__all__ = ["EXPIRY_PASS", "DeadLetters", "Expirer"]

#: Messages moved per store transaction by the expiry thread and by an outgoing-queue
#: purge: other writers get in between.
EXPIRY_PASS = 2000


class DeadLetters:
    """Expiry, dead-lettering and outgoing-queue purges of a queue manager.

    ``stop`` is set when the QM closes: a long expiry stops between passes."""

    def __init__(
        self,
        store: StoreBackend,
        metrics: MetricsSink,
        queues: QueueRegistry,
        removals: RemovalEvents,
        locks: LockTable,
        stop: threading.Event,
    ) -> None:
        self._store = store
        self._metrics = metrics
        self._queues = queues
        self._removals = removals
        self._locks = locks
        self._stop = stop

    def expire(self, now: float, limit: int = 10000) -> int:
        """Move messages whose TimeToBeReceived / TimeToReachQueue passed to the dead-letter
        queues (transactional ones to the transactional dead-letter queue) with the class
        NackReceiveTimeout / NackReachQueueTimeout recorded. Locked messages wait for their
        lock to end. Returns how many moved."""
        self._queues.check_open()
        rows = self._store.read(lambda c: reads.fetch_expired(c, int(now), limit))
        return self._dead_letter_rows(rows)

    def expire_due(self, now: float) -> int:
        """:meth:`expire` pass after pass (:data:`EXPIRY_PASS` messages each, one short
        store transaction each, so other writers get in between) until a pass comes back
        short: a backlog of expired messages drains at once, not one pass per interval
        of the expiry thread, and no pass holds the writer long. Returns how many moved."""
        total = 0
        while True:
            moved = self.expire(now, limit=EXPIRY_PASS)
            total += moved
            if moved < EXPIRY_PASS or self._stop.is_set():
                return total

    def dead_letter(self, queue: str | QueueHandle, lookup_ids: Sequence[int], message_class: int) -> int:
        """Move messages of ``queue`` to the dead-letter queues (transactional ones to the
        transactional dead-letter queue) with ``message_class`` recorded, as :meth:`expire`
        moves expired ones (acknowledgments in the same transaction); those no longer
        stored or locked are skipped. Returns how many moved."""
        self._queues.check_open()
        qid = self._queues.resolve(queue).record.queue_id
        ids = list(lookup_ids)
        rows = self._store.read(lambda c: reads.fetch_for_dead_letter(c, qid, ids, message_class))
        return self._dead_letter_rows(rows)

    def settle_outgoing(self, queue: str | QueueHandle, settles: Sequence[tuple[int, int, int]]) -> int:
        """FinalAcks for messages of an outgoing queue that no OrderAck covered yet
        (MS-MQQB 3.1.5.7: "the message ... in the OutgoingMessageTable"), each
        ``(LookupIdentifier, MessageID, class)``: the message moves to the system journal
        (JP and class AckReceive), to the transactional dead-letter queue with the class
        recorded (JN and another class) or away; one whose MessageID differs, no longer
        stored or locked is skipped. One store transaction. Returns how many left."""
        self._queues.check_open()
        qid = self._queues.resolve(queue).record.queue_id
        wanted = {lid: (message_id, cls) for lid, message_id, cls in settles}
        # Without the bodies: the rows move or go by LookupIdentifier.
        found = self._store.read(lambda c: reads.fetch_heads(c, qid, list(wanted)))
        rows: list[tuple[int, int, int, bool, int]] = []
        drop: set[int] = set()
        journal: set[int] = set()
        for m, size in found:
            message_id, cls = wanted[m.lookup_id]
            if m.id_uniquifier & 0xFFFFFFFF != message_id & 0xFFFFFFFF:
                continue
            rows.append((qid, m.lookup_id, size, m.transactional, cls))
            if cls == MessageClass.ACK_RECEIVE and m.positive_journaling:
                journal.add(m.lookup_id)
            elif cls == MessageClass.ACK_RECEIVE or not m.negative_journaling:
                drop.add(m.lookup_id)
        return self._dead_letter_rows(rows, deleted=drop, journal=journal)

    def purge_outgoing(self, qs: QueueState) -> int:
        """Purge an outgoing queue: every message leaves it with the class
        MQMSG_CLASS_NACK_DELETED (0x8001, "deleted by an administrative action before
        reaching the queue", MS-MQMQ 2.2.18.1.6; the ADM calls it NackPurged). One sent
        with negative source journaling (``dead_letter``) goes to the dead-letter queue,
        the others are deleted; one that asked for negative arrival acknowledgments gets
        its NACK, as when its TimeToReachQueue passes there (:mod:`openmsmq.transfer.ack_admin`).
        Passes of :data:`EXPIRY_PASS` messages in queue order, one transaction each.
        Returns how many left.

        The transfer bridges the gap: the next message of the queue is sent with the
        PreviousTxSequenceNumber of the last one acknowledged (MS-MQQB 3.1.7.1.3).
        A message already handed to the next hop may have arrived there all the same."""
        qid = qs.record.queue_id
        total = 0
        while True:
            with qs.cond:
                qs.settle()
                exclude = set(qs.locked)
            rows = self._store.read(
                partial(
                    reads.fetch_for_purge,
                    queue_id=qid,
                    message_class=MessageClass.NACK_DELETED,
                    limit=EXPIRY_PASS,
                    exclude=exclude,
                )
            )
            if not rows:
                return total
            deleted = {r[1] for r in rows if not r[5]}
            moved = self._dead_letter_rows([r[:5] for r in rows], deleted=deleted)
            total += moved
            if moved == 0 or len(rows) < EXPIRY_PASS:
                return total

    def _dead_letter_rows(
        self,
        rows: list[tuple[int, int, int, bool, int]],
        *,
        deleted: Iterable[int] = (),
        journal: Iterable[int] = (),
    ) -> int:
        """Move (queue_id, lookup_id, size, transactional, class) messages to the
        dead-letter queues, those in ``journal`` to the system journal (class unchanged),
        or delete those in ``deleted`` (their class still reported to the
        acknowledgments), skipping locked ones; returns how many left their queue."""
        dead = self._queues.system(names.DEADLETTER).record.queue_id
        dead_x = self._queues.system(names.DEADXACT).record.queue_id
        drop = set(deleted)
        journaled = set(journal)
        system_journal = self._queues.system(names.SYSTEM_JOURNAL).record.queue_id
        removes: list[Remove] = []
        held: list[Receive] = []
        for qid, lookup_id, size, transactional, cls in rows:
            qs = self._queues.by_id.get(qid)
            if qs is None:
                continue
            with qs.cond:
                qs.settle()
                if lookup_id in qs.locked:
                    continue
                qs.drop_prefetch()
                qs.locked.add(lookup_id)
            held.append(Receive(qs, MessageRecord(lookup_id=lookup_id)))
            if lookup_id in journaled:
                removes.append(Remove(qid, lookup_id, size, system_journal, None))
                continue
            target = None if lookup_id in drop else dead_x if transactional else dead
            removes.append(Remove(qid, lookup_id, size, target, cls))
        if not removes:
            return 0
        try:
            acks = None
            if self._removals.hooks:  # acknowledgments written with the move (held: stable)
                pre = self._store.read(ops.expiry_events(removes))
                acks = self._removals.ack_rows(pre) if pre else None
            events = self._store.write(ops.expire_messages(removes, acks))
        except BaseException:
            self._locks.unlock(held)
            raise
        self._locks.unlock(held, removed=True)
        self._metrics.count_dead_lettered(
            r.new_class or 0
            for r in removes
            if r.target_queue_id is not None and r.target_queue_id != system_journal
        )
        self._queues.count_moves((r.queue_id, r.target_queue_id) for r in removes)
        by_id = self._queues.by_id
        self._queues.notify([by_id[dead], by_id[dead_x], by_id[system_journal]])
        self._removals.done(events, acks)
        return len(removes)


class Expirer:
    """The expiry thread: every ``interval`` seconds, :meth:`DeadLetters.expire_due` at
    ``clock()``, then ``prune`` (forgetting old idempotent-send identities), until
    ``stop`` is set. A store error waits for the next round."""

    def __init__(
        self,
        dead_letters: DeadLetters,
        clock: Callable[[], float],
        prune: Callable[[], object],
        stop: threading.Event,
        interval: float,
    ) -> None:
        self._dead_letters = dead_letters
        #: Seconds since 1970 (the QueueManager sets it when its clock changes).
        self.clock = clock
        self._prune = prune
        self._stop = stop
        self._interval = interval
        self._thread = threading.Thread(target=self._run, name="openmsmq-expiry", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self) -> None:
        """Wait for the thread (after ``stop`` was set)."""
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._dead_letters.expire_due(self.clock())
                if self._stop.is_set():
                    return
                self._prune()
            except MQError:
                continue  # store trouble: try again next round
