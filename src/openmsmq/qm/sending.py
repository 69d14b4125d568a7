"""Sending and committing for a queue manager: the QM-assigned attributes stamped into
store rows (Identifier, SentTime, source, destination, expiry), sends outside a
transaction, and Transaction Commit (MS-MQDMPR 3.1.7.1.8) as one store operation."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

from openmsmq.errors import HResult, MQError, quoted
from openmsmq.observability.sink import MetricsSink
from openmsmq.qm import names
from openmsmq.qm.handles import QueueHandle, QueueState
from openmsmq.qm.locks import LockTable, removes_for
from openmsmq.qm.registry import QueueRef, QueueRegistry
from openmsmq.qm.removals import RemovalEvents
from openmsmq.qm.transaction import ACK_RECEIVE, Receive, Transaction
from openmsmq.store import ops, queues
from openmsmq.store.backend import StoreBackend
from openmsmq.store.moves import Move, apply_moves
from openmsmq.store.ops import Remove, RemovedMessage, Send
from openmsmq.store.records import COL, INFINITE, MAX_MESSAGE_BYTES, MessageRecord, QueueType, stamped_rows
from openmsmq.store.writes import WriteContext
from openmsmq.wire.fast import fast_constructor
from openmsmq.wire.remote_names import check_remote_names

__all__ = ["NACK_REACH_QUEUE_TIMEOUT", "NACK_RECEIVE_TIMEOUT", "Sender", "refuse_subqueue"]

#: Message.Class values used here (MS-MQDMPR 3.1.1.12, MS-MQMQ 2.2.18.1.6).
NACK_REACH_QUEUE_TIMEOUT = 0x8002
NACK_RECEIVE_TIMEOUT = 0xC002

_UNIQUIFIER_BLOCK = 4096
#: Room kept in a 4 MiB MS-MQQB packet (MAX_PACKET_SIZE, MS-MQMQ 2.2.19.1) for the headers
#: of a message sent to a remote queue: 140 fixed bytes (BaseHeader, UserHeader,
#: TransactionHeader, MessagePropertiesHeader), a piggy-backed SessionHeader and the
#: UTF-16 admin and response queue names; the destination name is counted on its own.
REMOTE_HEADROOM = 4096
_C_SIZE = COL["size"]


class Sender:
    """Stamps, sends and commits for one queue manager.

    ``guid`` is the QM's GUID (the source of every Identifier), ``clock`` gives seconds
    since 1970 (SentTime), ``open_queue`` opens a queue by name (the outgoing queue of a
    remote format name is created on first use), ``max_message_bytes`` is the largest
    message accepted."""

    def __init__(
        self,
        store: StoreBackend,
        metrics: MetricsSink,
        queues: QueueRegistry,
        locks: LockTable,
        removals: RemovalEvents,
        guid: uuid.UUID,
        clock: Callable[[], float],
        open_queue: Callable[[str], QueueHandle],
        max_message_bytes: int,
    ) -> None:
        self._store = store
        self._metrics = metrics
        self._queues = queues
        self._locks = locks
        self._removals = removals
        self._guid = guid
        #: Seconds since 1970 (the QueueManager sets it when its clock changes).
        self.clock = clock
        self._open_queue = open_queue
        self.max_message_bytes = max_message_bytes
        self._lock = threading.Lock()  # guards the block of uniquifiers
        self._uniq_next = 0
        self._uniq_end = 0

    def _now(self) -> int:
        return int(self.clock())

    def _uniquifiers(self, count: int) -> int:
        with self._lock:
            if self._uniq_next + count > self._uniq_end:
                block = max(_UNIQUIFIER_BLOCK, count)
                self._uniq_next = self._store.write(queues.reserve_uniquifiers(block))
                self._uniq_end = self._uniq_next + block
            first = self._uniq_next
            self._uniq_next += count
            return first

    def prepare(
        self,
        qs: QueueState,
        messages: Sequence[MessageRecord],
        transactional: bool,
        name: str,
        *,
        check_names: bool = True,
    ) -> list[Send]:
        """Validate and stamp the QM-assigned attributes (Identifier, SentTime, source,
        destination; priority 0 and Recoverable for transactional messages) straight into
        the store rows. ``check_names``: refuse a message to a remote queue whose admin or
        response queue cannot travel with it (the acknowledgments a QM writes itself
        pass False: a response queue that cannot travel is left out of their packet)."""
        rec = qs.record
        if rec.queue_type == QueueType.SUBQUEUE:
            refuse_subqueue(name, qs)
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
        now = self._now()
        first = self._uniquifiers(len(messages))
        # Checks each message (size, label, priority) as it builds its row.
        qid = rec.queue_id
        outgoing = rec.queue_type == QueueType.OUTGOING
        # A message to a remote queue must fit one packet with its headers, or it could
        # never be transferred (and would hold up its sequence): refused here instead.
        limit = self.max_message_bytes
        if outgoing:
            limit = min(limit, MAX_MESSAGE_BYTES - REMOTE_HEADROOM - 2 * len(name))
        rows = stamped_rows(messages, transactional, self._guid, first, now, name, limit)
        if outgoing and check_names:
            for m in messages:
                if m.admin_queue or m.response_queue:  # they travel in the packet too
                    check_remote_names(m.admin_queue, m.response_queue, m.size, limit)
        out: list[Send] = []
        append = out.append
        for m, row in zip(messages, rows, strict=True):
            if m.time_to_be_received != INFINITE:
                append(self.send_record(qs, row, m, now))
            elif not outgoing or (ttrq := m.time_to_reach_queue) == INFINITE:
                append(_make_send(qid, row, row[_C_SIZE], None, 0))  # never expires
            else:
                # Into an outgoing queue only TimeToReachQueue runs out (_send_record's
                # case, inline: every message to a remote queue has one, 4 days by default).
                append(_make_send(qid, row, row[_C_SIZE], now + ttrq, NACK_REACH_QUEUE_TIMEOUT))
        return out

    def send_record(self, qs: QueueState, row: list[Any], m: MessageRecord, sent: int) -> Send:
        """Attach the absolute expiry: TimeToBeReceived in a destination queue
        (NackReceiveTimeout); in an outgoing queue also TimeToReachQueue (NackReachQueueTimeout).
        Times count from ``sent`` (SentTime)."""
        candidates = []
        if m.time_to_be_received != INFINITE:
            candidates.append((sent + m.time_to_be_received, NACK_RECEIVE_TIMEOUT))
        if qs.record.queue_type == QueueType.OUTGOING and m.time_to_reach_queue != INFINITE:
            candidates.append((sent + m.time_to_reach_queue, NACK_REACH_QUEUE_TIMEOUT))
        if not candidates:
            return _make_send(qs.record.queue_id, row, row[_C_SIZE], None, 0)
        at, cls = min(candidates)
        return _make_send(qs.record.queue_id, row, row[_C_SIZE], at, cls)

    def send(
        self, queue: QueueRef, messages: Sequence[MessageRecord], tx: Transaction | None
    ) -> tuple[list[Send], list[int]]:
        registry = self._queues
        known = registry.sent_to(queue) if isinstance(queue, str) else None
        if known is not None and isinstance(queue, str):
            # A name sent to before: a local queue, or a remote one's outgoing queue.
            self._queues.check_open()
            qs, name = known, queue
        else:
            hosts = registry.local_hosts
            if isinstance(queue, str):
                refuse_subqueue(queue)
            if isinstance(queue, str) and registry.is_remote(queue):
                handle: QueueRef = self._open_queue(queue)
            else:
                handle = queue
            qs = registry.resolve(handle)
            name = handle.format_name if isinstance(handle, QueueHandle) else handle
            if isinstance(queue, str):
                # Remember the name: the next send skips parsing and resolving it twice,
                # and for a remote name the store write that makes sure its outgoing
                # queue exists (else every commit to a remote queue costs a second store
                # batch). A deleted queue's state says so (then this path runs again);
                # set_local_addresses forgets every name (not kept if it ran meanwhile).
                registry.remember_send_name(queue, qs, hosts)
        if tx is not None:
            tx.check_active()
        sends = self.prepare(qs, messages, tx is not None, name)
        if tx is not None:
            tx.add_sends(qs, sends)
            return sends, []
        lookup_ids = self._store.write(ops.commit_work(sends, []))
        self._metrics.count_committed(len(sends), 0)
        qs.messages_in += len(sends)
        self._queues.notify([qs])
        return sends, lookup_ids

    def commit(
        self,
        sends: list[tuple[QueueState, list[Send]]],
        received: Sequence[tuple[QueueState, Sequence[MessageRecord]]],
        reasons: dict[int, int] | None = None,
        moves: Sequence[Move] = (),
    ) -> list[int]:
        """Transaction Commit (MS-MQDMPR 3.1.7.1.8) as one store operation; ``sends`` holds
        (queue, Sends) per send call, in order; ``received`` (queue, locked messages) per
        receive call, in order; ``reasons`` the DequeueReasons other than AckReceive.

        A batch of received messages costs no object per message unless the queue
        journals (a :class:`Remove` per move): its LookupIdentifiers and total size go to
        the store as one :class:`~openmsmq.store.ops.DeleteMany`, its locks are dropped
        with one ``set.difference_update``. ``moves`` (Move Message in the transaction,
        :mod:`openmsmq.qm.poison`) are written in the same store operation; their locks
        are the caller's.
        """
        self._queues.check_open()
        rows = sends[0][1] if len(sends) == 1 else [s for _, chunk in sends for s in chunk]
        count = len(rows)
        if not received:  # a sending transaction: none of the receive bookkeeping
            work = ops.commit_work(rows, ())
            stored = self._store.write(_with_moves(work, moves) if moves else work)
            self._metrics.count_committed(count, 0)
            _count_in(sends)
            if sends:
                self._queues.notify(map(_first, sends))  # C iteration: no generator frame
            return stored
        held: dict[QueueState, list[int]] = {}
        events: list[RemovedMessage] = []
        removes: list[Remove] = []
        deletes: list[ops.DeleteMany] = []
        consumed = 0
        # Counted once the commit is durable: (queue, messages) taken out and journaled.
        taken: list[tuple[QueueState, int]] = []
        journaled: list[tuple[QueueState, int]] = []
        for qs, msgs in received:
            if not msgs:
                continue
            ids = [m.lookup_id for m in msgs]
            unlock = held.get(qs)
            if unlock is None:
                unlock = held[qs] = []
            unlock += ids  # a copy: ids also goes to the store in a DeleteMany
            if qs.deleted:
                continue
            rec = qs.record
            qid = rec.queue_id
            if rec.queue_type != _OUTGOING:
                consumed += len(msgs)
            taken.append((qs, len(msgs)))
            # Messages that asked for acknowledgments, journaling or a FinalAck (locks._acks, inlined).
            wanting = [
                m
                for m in msgs
                if m.ack_flags or m.positive_journaling or m.negative_journaling or m.final_ack_required
            ]
            if wanting:
                events += [
                    RemovedMessage(qid, m, reasons.get(m.lookup_id, ACK_RECEIVE) if reasons else ACK_RECEIVE)
                    for m in wanting
                ]
            target = rec.journal_queue_id if rec.journal else None
            if target is None:
                size = sum([len(m.body) + 2 * len(m.label) + len(m.extension) for m in msgs])  # Message.size
                deletes.append(_make_delete_many(qid, ids, size))
            else:
                removes += removes_for([Receive(qs, m) for m in msgs])
                journal = self._queues.by_id.get(target)
                if journal is not None:
                    journaled.append((journal, len(msgs)))
        removals = self._removals
        if events:
            rows = list(rows)
            rows += removals.hook_rows(events)
        work = ops.commit_work(rows, removes, None, deletes)
        stored = self._store.write(_with_moves(work, moves) if moves else work)
        self._metrics.count_committed(count, consumed)
        _count_in(sends)
        for qs, n in taken:
            qs.messages_out += n
        for qs, n in journaled:
            qs.messages_in += n
        if len(rows) > count:  # acknowledgments and journal copies the removals raised
            by_id = self._queues.by_id
            for s in rows[count:]:
                hooked = by_id.get(s.queue_id)
                if hooked is not None:
                    hooked.messages_in += 1
        self._locks.unlock_ids(held, removed=True)
        notify = self._queues.notify
        if sends:
            notify(map(_first, sends))  # C iteration: no generator frame
        if len(rows) > count:
            by_id = self._queues.by_id
            notify(by_id[s.queue_id] for s in rows[count:] if s.queue_id in by_id)
        removals.emit(events, hooked=True)
        return stored[:count]


def _count_in(sends: list[tuple[QueueState, list[Send]]]) -> None:
    """Add a durable commit's sends to their queues' :attr:`QueueState.messages_in`: one
    addition per send call of the transaction, not per message."""
    for qs, chunk in sends:
        qs.messages_in += len(chunk)


def _with_moves(work: ops.CommitWork, moves: Sequence[Move]) -> Callable[[WriteContext], list[int]]:
    """``work`` with ``moves`` applied first in the same store transaction (without
    moves the work itself is written: the writer may merge it with other commits)."""

    def op(ctx: WriteContext) -> list[int]:
        apply_moves(ctx, moves)
        return work(ctx)

    return op


def refuse_subqueue(name: str, qs: QueueState | None = None) -> None:
    """Nothing is sent to a subqueue: messages enter one only by a move (MS-MQRR
    3.1.4.10). MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION names the subqueue."""
    if (qs is not None and qs.record.queue_type == QueueType.SUBQUEUE) or (
        qs is None and names.parse_name(name).subqueue
    ):
        raise MQError(
            HResult.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION,
            f"cannot send to subqueue {quoted(name)}: a message enters a subqueue only by a move",
        )


# Send / Remove are frozen dataclasses; built once per message on the hot paths, so
# through the wire layer's fast constructor (every field, in order).
_make_send = fast_constructor(Send)
_make_delete_many = fast_constructor(ops.DeleteMany)
_OUTGOING = QueueType.OUTGOING
#: The queue of a (queue, Sends) pair of a transaction.
_first = itemgetter(0)
