"""The queue manager's side of MS-MQQB transactional sequences.

:class:`SequenceStore` holds the store operations only the transfer performs: release on
OrderAck (MS-MQQB 3.1.5.6), FinalAck settlement (3.1.5.7), incoming acceptance stored with
the incoming sequence state in one durable transaction (seed 002). The transfer gets one
from :meth:`QueueManager.sequence_store` and owns it; what status, the CLI and clients read
or reset (the persisted outgoing and incoming sequence states) stays on the queue manager.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from openmsmq.errors import MQError
from openmsmq.observability.sink import MetricsSink
from openmsmq.qm import names
from openmsmq.qm.handles import QueueState
from openmsmq.qm.registry import QueueRef, QueueRegistry
from openmsmq.qm.sending import Sender
from openmsmq.store import ops, outgoing, reads
from openmsmq.store.backend import StoreBackend
from openmsmq.store.ops import Send
from openmsmq.store.records import (
    COL,
    INFINITE,
    IncomingSequenceState,
    MessageRecord,
    OutgoingSequenceState,
    QueueType,
    message_to_row,
    with_queue_id,
)
from openmsmq.store.writes import WriteContext
from openmsmq.wire.fast import fast_constructor

__all__ = ["SequenceStore"]

_C_SIZE = COL["size"]
_OUTGOING = QueueType.OUTGOING
# Built once per arriving message: through the wire layer's fast constructor.
_make_send = fast_constructor(Send)


class SequenceStore:
    """Outgoing release on OrderAck, FinalAck settlement, incoming acceptance: the store
    operations of MS-MQQB transactional sequences, over one queue manager's queues.

    Made by :meth:`QueueManager.sequence_store` from the queue manager's collaborators: its
    store and metrics, its :class:`~openmsmq.qm.registry.QueueRegistry` (queue states by
    name and id, name resolution, waking waiting readers), its
    :class:`~openmsmq.qm.sending.Sender` (stored sends with TimeToBeReceived /
    TimeToReachQueue) and the store's clock."""

    def __init__(
        self,
        store: StoreBackend,
        metrics: MetricsSink,
        registry: QueueRegistry,
        sender: Sender,
        now: Callable[[], int],
    ) -> None:
        self.store = store
        self.metrics = metrics
        self._queues = registry.by_name
        self._by_id = registry.by_id
        self._resolve = registry.resolve
        self._check_open = registry.check_open
        self._now = now
        self._notify = registry.notify
        self._send_record = sender.send_record

    def delete_sent(self, queue: QueueRef, lookup_ids: Sequence[int]) -> int:
        """Delete non-transactional messages of an outgoing queue that the next hop's
        SessionAck acknowledged (MS-MQQB 3.1.5.5.3) in one store transaction; those
        already gone are skipped. Returns how many were deleted."""
        qs = self._resolve(queue)
        deleted: int = self.store.write(outgoing.delete_sent(qs.record.queue_id, lookup_ids))
        qs.messages_out += deleted
        return deleted

    def release_outgoing(
        self, queue: QueueRef, up_to_number: int, *, return_ids: bool = True
    ) -> tuple[list[int], OutgoingSequenceState]:
        """OrderAck for ``up_to_number``: drop the acknowledged messages of the current
        sequence durably; start a new sequence when none is left (MS-MQQB 3.1.5.6).
        Returns their LookupIdentifiers (with ``return_ids=False`` only those moved to the
        awaiting-FinalAck queue: cheaper for a large release) and the sequence state."""
        qs = self._resolve(queue)
        waiting = self._queues[names.AWAITING_FINAL_ACK]
        ids, state, released = self.store.write(
            outgoing.release_outgoing_counted(
                qs.record.queue_id, up_to_number, waiting.record.queue_id, return_ids=return_ids
            )
        )
        qs.messages_out += released
        return ids, state

    def wait_for_queued_commits(self) -> None:
        """Return once the store committed every write queued before this call (other
        threads' commits queued behind a release turn run before the next turn)."""
        self.store.wait_for_queued()

    def release_outgoing_many(self, releases: Sequence[tuple[QueueRef, int]]) -> list[BaseException | None]:
        """:meth:`release_outgoing` (``return_ids=False``) of several outgoing queues in one
        store batch (:meth:`Store.write_each`: one COMMIT, one fsync, each in its own
        savepoint). One outcome per release: None (durable) or the MQError."""
        self._check_open()
        awaiting = self._queues[names.AWAITING_FINAL_ACK].record.queue_id
        out: list[BaseException | None] = [None] * len(releases)
        todo: list[tuple[int, QueueState]] = []
        fns = []
        for i, (queue, up_to) in enumerate(releases):
            try:
                qs = self._resolve(queue)
            except MQError as exc:
                out[i] = exc
                continue
            todo.append((i, qs))
            fns.append(
                outgoing.release_outgoing_counted(qs.record.queue_id, up_to, awaiting, return_ids=False)
            )
        for (i, qs), res in zip(todo, self.store.write_each(fns), strict=True):
            if isinstance(res, MQError):
                out[i] = res
            else:
                qs.messages_out += res[2]
        return out

    def accept_arrival_rows_many(
        self, runs: Sequence[tuple[QueueRef, Sequence[list[Any]], IncomingSequenceState]]
    ) -> list[BaseException | None]:
        """:meth:`accept_arrival_rows` of runs of different incoming sequences in one store
        batch (:meth:`Store.write_each`: one COMMIT, one fsync, each in its own savepoint).
        A receiver with many senders (or one sender with many queues) otherwise paid one
        fsync per sequence. One outcome per run: None (durable) or the MQError."""
        self._check_open()
        now = self._now()
        out: list[BaseException | None] = [None] * len(runs)
        planned: list[tuple[int, QueueState, int]] = []  # (run, queue, rows)
        fns = []
        for i, (queue, rows, state) in enumerate(runs):
            try:
                qs, fn = self._arrival_rows_op(queue, rows, state, now)
            except MQError as exc:
                out[i] = exc
                continue
            planned.append((i, qs, len(rows)))
            fns.append(fn)
        stored: list[QueueState] = []
        count = 0
        for (i, qs, n), res in zip(planned, self.store.write_each(fns), strict=True):
            if isinstance(res, MQError):
                out[i] = res
                self._reread(qs)
            else:
                stored.append(qs)
                count += n
                qs.messages_in += n
        self.metrics.count_accepted(count)
        self._notify(stored)
        return out

    def settle_final_acks(
        self,
        final_acks: Sequence[tuple[int, int, int, int]],
        accept: Callable[[int, MessageRecord], bool] | None = None,
    ) -> list[outgoing.FinalAckOutcome]:
        """FinalAcks for messages of this QM (MS-MQQB 3.1.5.7), each ``(TxSequenceID,
        TxSequenceNumber, MessageID, class)``, settled in one store transaction: the
        message waiting for each (moved aside by :meth:`release_outgoing`) goes to the
        system journal (JP, class AckReceive), to the transactional dead-letter queue (JN,
        any other class) or away. One outcome per FinalAck (``message`` None: no waiting
        message matched it). ``accept(i, message)`` may refuse the i-th FinalAck for the
        message it matched (``refused``: nothing changes)."""
        self._check_open()
        if not final_acks:
            return []
        deadxact = self._queues[names.DEADXACT].record.queue_id
        outcomes = self.store.write(
            outgoing.settle_final_acks(
                self._queues[names.AWAITING_FINAL_ACK].record.queue_id,
                final_acks,
                self._queues[names.SYSTEM_JOURNAL].record.queue_id,
                deadxact,
                accept,
            )
        )
        by_id = self._by_id
        waiting = self._queues[names.AWAITING_FINAL_ACK]
        for o in outcomes:  # one FinalAck at a time already
            if o.message is not None and o.refused is None:
                waiting.messages_out += 1
                target = by_id.get(o.target_queue_id or 0)
                if target is not None:
                    target.messages_in += 1
        targets = {o.target_queue_id for o in outcomes if o.target_queue_id is not None}
        if targets:
            self._notify([self._by_id[qid] for qid in sorted(targets)])
        dead = [fa[3] for fa, o in zip(final_acks, outcomes, strict=True) if o.target_queue_id == deadxact]
        if dead:
            self.metrics.count_dead_lettered(dead)
        return outcomes

    def accept_incoming(
        self, queue: QueueRef, messages: Sequence[MessageRecord], state: IncomingSequenceState
    ) -> list[int]:
        """Store accepted incoming transactional messages (as sent: Identifier, sequence
        fields kept) together with the new incoming sequence state, atomically and durably
        (invariant 4); ArrivedTime is set now. Returns their local LookupIdentifiers."""
        qs = self._resolve(queue)
        sends = [self._send_record(qs, message_to_row(m), m, m.sent_time) for m in messages]
        stored = self.store.write(
            ops.accept_incoming(sends, [with_queue_id(state, qs.record.queue_id)], self._now())
        )
        qs.messages_in += len(sends)
        self._notify([qs])
        return stored

    def _reread(self, qs: QueueState) -> None:
        """Read the queue's row again into its state after a store operation on it failed:
        the arrival path decides from the properties the QM holds
        (``QueueManager.queue_properties``), and a change made by another process on the
        data directory (a sender allowlist, say) is seen only so."""
        # Deleted meanwhile, or the store unreadable: found when the queue is used next.
        with contextlib.suppress(MQError):
            qs.record = self.store.read(lambda c: reads.get_queue(c, qs.record.queue_id))

    def accept_arrivals(
        self,
        queue: QueueRef | None,
        messages: Sequence[MessageRecord],
        state: IncomingSequenceState | None,
        acks: Sequence[Send] = (),
        *,
        dead_letters: Sequence[MessageRecord] = (),
    ) -> list[int]:
        """:meth:`accept_incoming` with the acknowledgments the arrival raised
        (:mod:`openmsmq.transfer.arrival`, rows already stamped) and the copies of rejected
        messages for the system dead-letter queue (``dead_letters``, as received with
        their NACK class) in the same durable store transaction; ``queue`` may be None
        when no message is inserted (all rejected), ``state`` None for non-transactional
        arrivals. Returns the messages' LookupIdentifiers."""
        self._check_open()
        sends: list[Send] = []
        notify: list[QueueState] = []
        if queue is not None and messages:
            qs = self._resolve(queue)
            qid = qs.record.queue_id
            outgoing = qs.record.queue_type == _OUTGOING
            for m in messages:
                row = message_to_row(m)
                if m.time_to_be_received == INFINITE and (not outgoing or m.time_to_reach_queue == INFINITE):
                    sends.append(_make_send(qid, row, row[_C_SIZE], None, 0))  # never expires
                else:
                    sends.append(self._send_record(qs, row, m, m.sent_time))
            notify.append(qs)
            if state is not None:
                state = with_queue_id(state, qs.record.queue_id)
        count = len(sends)
        sends += acks
        if dead_letters:
            dead = self._queues[names.DEADLETTER]
            for m in dead_letters:
                row = message_to_row(m)
                sends.append(_make_send(dead.record.queue_id, row, row[_C_SIZE], None, 0))  # stays there
            notify.append(dead)
        states = [state] if state is not None else []
        stored = self.store.write(ops.accept_incoming(sends, states, self._now()))
        self.metrics.count_accepted(count)
        if count:
            notify[0].messages_in += count
        if dead_letters:
            self.metrics.count_dead_lettered(m.message_class for m in dead_letters)
            self._queues[names.DEADLETTER].messages_in += len(dead_letters)
        acked = [self._by_id[s.queue_id] for s in acks if s.queue_id in self._by_id]
        for qs in acked:  # acknowledgments: few, one each
            qs.messages_in += 1
        self._notify(notify + acked)
        return stored[:count]

    def accept_arrival_rows(
        self, queue: QueueRef, rows: Sequence[list[Any]], state: IncomingSequenceState
    ) -> list[int]:
        """:meth:`accept_arrivals` of messages already as store rows that never expire here
        and raise no acknowledgment (:func:`openmsmq.transfer.arrival.plain_packet_rows`):
        inserted with ``state`` in one durable store transaction, ArrivedTime now (written
        into the rows, which the call takes over). Returns their LookupIdentifiers."""
        self._check_open()
        qs, fn = self._arrival_rows_op(queue, rows, state, self._now())
        try:
            stored: list[int] = self.store.write(fn)
        except MQError:
            self._reread(qs)
            raise
        self.metrics.count_accepted(len(rows))
        qs.messages_in += len(rows)
        self._notify([qs])
        return stored

    def _arrival_rows_op(
        self, queue: QueueRef, rows: Sequence[list[Any]], state: IncomingSequenceState, now: int
    ) -> tuple[QueueState, Callable[[WriteContext], list[int]]]:
        """The queue and the store operation of :meth:`accept_arrival_rows`."""
        qs = self._resolve(queue)
        qid = qs.record.queue_id
        batch = rows if isinstance(rows, list) else list(rows)
        return qs, ops.accept_incoming_rows(qid, batch, [with_queue_id(state, qid)], now)

    def record_incoming(self, states: Sequence[IncomingSequenceState]) -> None:
        """Persist incoming sequence state without messages (rejections)."""
        self._check_open()
        self.store.write(ops.record_incoming(states))

    def record_reject_counts(self, rejects: Sequence[tuple[uuid.UUID, str, int, float]]) -> None:
        """Persist RejectCount / LastAccessTime of incoming sequences after rejections
        (``(sender QM, destination, RejectCount, LastAccessTime)``; MS-MQQB 3.1.5.8.6:
        "IncomingTransactionalTransferInfo.RejectCount MUST be set to the
        TxMessageRejectCount"), the position left as stored."""
        self._check_open()
        if rejects:
            self.store.write(ops.record_reject_counts(rejects))
