"""Store work of :class:`~openmsmq.transfer.engine.Transfer`: accepted messages stored in
batches with their incoming sequence state (reported durable to the protocol only after
the commit, seed 003), local (non-transactional) arrivals, messages stored to forward,
the NACKs of refused messages and the OrderAcks to enqueue. With the releases
(:class:`~openmsmq.transfer.settlements.Settlements`) and the sequences' upkeep
(:class:`~openmsmq.transfer.sequences.IncomingUpkeep`) it hands out the store work, at
most one work item of each kind in flight, so accepted messages of one sequence commit in
acceptance order and whatever arrives meanwhile forms the next batch.
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import groupby
from operator import itemgetter
from typing import Any

from openmsmq.errors import LocalProtocolError, MQError
from openmsmq.protocol.incoming import IncomingSequences, IncomingSequenceSnapshot, SendOrderAck, SequenceKey
from openmsmq.qm.manager import QueueManager
from openmsmq.qm.sequences import SequenceStore
from openmsmq.store.records import IncomingSequenceState, MessageRecord
from openmsmq.transfer.ack_sessions import AckSessions
from openmsmq.transfer.acknowledgments import AckSession, enqueue_acknowledgment_list
from openmsmq.transfer.arrival import plain_packet_rows, refuse, store_arrivals, store_packet_messages
from openmsmq.transfer.connections import Connections
from openmsmq.transfer.sequences import IncomingUpkeep, SequenceUpkeep
from openmsmq.transfer.session import AcceptRoute, Conn, Pending
from openmsmq.transfer.settlements import Settlements
from openmsmq.transfer.state import (
    RECEIVED_OVERHEAD,
    AcceptBatch,
    AcceptGroup,
    OutgoingTransfer,
    ReleaseBatch,
    StoreLocal,
    StoreWork,
    TransferConfig,
    WallClock,
    hop_host,
    pad_outcome,
)

#: The queue name of a (name, ...) store-work item.
_first = itemgetter(0)

__all__ = ["STORE_RETRY_MAX", "STORE_RETRY_MIN", "AfterStore", "PeerBackoff", "StoreWorkQueue"]

log = logging.getLogger("openmsmq.transfer")
#: Back-off (s) of a peer whose messages could not be stored: its sessions are refused
#: this long after the first failure, twice as long after each further one in a row.
STORE_RETRY_MIN = 5.0
STORE_RETRY_MAX = 60.0

#: A received non-transactional message waiting for the store: (queue or format name,
#: message, connection, RecoverableMessage number).
LocalItem = tuple[str, MessageRecord, int, "int | None"]


@dataclass(frozen=True, slots=True)
class AfterStore:
    """What the transfer does once arrivals were stored (or not): ``stored``: something
    was, so the refusal back-off starts over; ``retry``: the connections whose messages
    could not be stored, to close and refuse for a while, with the sequence whose
    OrderAck goes first (:meth:`~openmsmq.transfer.engine.Transfer.store_work_done`);
    ``acks``: OrderAcks just enqueued, whose outgoing queues load at once."""

    stored: bool
    retry: tuple[tuple[Conn | None, SequenceKey | None], ...] = ()
    acks: tuple[tuple[MessageRecord, str], ...] = ()


class PeerBackoff:
    """Peers whose sessions are refused after messages they sent could not be stored (a
    full disk, the QM quota), by host: the back-off doubles from :data:`STORE_RETRY_MIN`
    to :data:`STORE_RETRY_MAX` while stores keep failing and starts over once one works."""

    def __init__(self) -> None:
        self._until: dict[str, float] = {}
        self._delay = 0.0
        #: Some peer is refused (tested without a call on every look for wanted peers).
        self.active = False

    def next_delay(self) -> float:
        """The back-off of a refusal now (twice the last one, within the bounds)."""
        self._delay = min(max(self._delay * 2, STORE_RETRY_MIN), STORE_RETRY_MAX)
        return self._delay

    def refuse(self, hosts: Iterable[str], until: float) -> None:
        """Refuse the sessions of ``hosts`` until ``until`` (loop time)."""
        for host in hosts:
            self._until[host] = until
            self.active = True

    def stored(self) -> None:
        """Messages were stored: the next refusal starts from the shortest back-off."""
        self._delay = 0.0

    def refusing(self, peer: str, now: float) -> bool:
        """Whether a session from ``peer`` is refused at ``now``."""
        return now < self._until.get(hop_host(peer), now)

    def blocks(self, peer: str) -> bool:
        """Whether ``peer``'s host is refused (until its back-off ends at a timer)."""
        return hop_host(peer) in self._until

    def deadline(self) -> float | None:
        """When the first refusal ends (None: none)."""
        return min(self._until.values()) if self._until else None

    def expire(self, now: float) -> None:
        """End the refusals whose back-off passed."""
        for host in [h for h, until in self._until.items() if now >= until]:
            del self._until[host]
        self.active = bool(self._until)


class StoreWorkQueue:
    """What received messages leave for the store (their single owner), and the scheduler
    of every kind of store work of one transfer.

    ``outgoing`` is the sender's outgoing queues (read for their format names); ``stats``
    the transfer's counters (this part adds ``accepted`` and ``batches``)."""

    def __init__(
        self,
        qm: QueueManager,
        config: TransferConfig,
        sequence_store: SequenceStore,
        incoming: IncomingSequences,
        sequences: IncomingUpkeep,
        settlements: Settlements,
        ack_sessions: AckSessions,
        connections: Connections,
        outgoing: dict[int, OutgoingTransfer],
        wall: WallClock,
        stats: dict[str, int],
    ) -> None:
        self._qm = qm
        self._config = config
        self._sequence_store = sequence_store
        self._incoming = incoming
        self._sequences = sequences
        self._settlements = settlements
        self._ack_sessions = ack_sessions
        self._connections = connections
        self._outgoing = outgoing
        self._wall = wall
        self._stats = stats
        self._accepted: deque[Pending] = deque()
        #: Body bytes of the received messages not yet stored (accepted, passed on or
        #: non-transactional, in a batch or waiting for one), with RECEIVED_OVERHEAD each:
        #: above TransferConfig.unstored_bytes a driver stops reading.
        self.unstored_bytes = 0
        self._accepted_bytes = 0  # the part of it in _accepted
        self._accept_in_flight: AcceptBatch | None = None
        #: Sequences whose last message was rejected by the acceptance rule since the last
        #: accept batch: key -> (TxMessageRejectCount, LastAccessTime as wall clock),
        #: persisted with the next batch (MS-MQQB 3.1.5.8.6, RejectCount).
        self._rejects: dict[SequenceKey, tuple[int, float]] = {}
        self._nontx_in: list[LocalItem] = []
        #: Recoverable non-transactional messages this QM passes on: stored in the outgoing
        #: queue of their destination before they are acknowledged.
        self._forward_in: list[LocalItem] = []
        #: Messages disregarded on receipt (their NACKs to enqueue): see StoreLocal.refusals.
        self._refusals: list[tuple[MessageRecord, int, AckSession | None]] = []
        #: OrderAcks built and not yet enqueued (MS-MQQB 3.1.7.17): (Message, DestinationForAck).
        self._order_acks: list[tuple[MessageRecord, str]] = []
        self._local_in_flight: StoreLocal | None = None

    # ------------------------------------------------------------------ intake

    def add_accepted(self, run: list[Pending], count: int, nbytes: int) -> None:
        """Accepted messages (a run of ``count`` of them, in order) for the next accept
        batch; ``nbytes``: what they count in :attr:`unstored_bytes`."""
        if self._rejects:
            # An acceptance resets TxMessageRejectCount: its state (0) is stored with the
            # message, after any rejection before it.
            for key in {p[0].key for p in run}:
                self._rejects.pop(key, None)
        self._accepted.extend(run)
        self._stats["accepted"] += count
        self.unstored_bytes += nbytes
        self._accepted_bytes += nbytes

    def add_reject(self, key: SequenceKey, reject_count: int, wall_time: float) -> None:
        """The acceptance rule rejected ``key``'s last message: its RejectCount and
        LastAccessTime go with the next accept batch."""
        self._rejects[key] = (reject_count, wall_time)

    def add_local(self, item: LocalItem) -> None:
        """A non-transactional message for a local queue."""
        self._nontx_in.append(item)
        self.unstored_bytes += len(item[1].body) + RECEIVED_OVERHEAD

    def add_forward(self, item: LocalItem) -> None:
        """A recoverable message this QM passes on (into its destination's outgoing queue)."""
        self._forward_in.append(item)
        self.unstored_bytes += len(item[1].body) + RECEIVED_OVERHEAD

    def add_refusal(self, message: MessageRecord, message_class: int, session: AckSession | None) -> None:
        """A message disregarded on receipt, whose NACKs are enqueued (StoreLocal.refusals)."""
        self._refusals.append((message, message_class, session))

    def send_order_ack(self, ack: SendOrderAck) -> None:
        """The Order Ack Send Timer fired (MS-MQQB 3.1.6.9): raise Send Transactional
        Acknowledgment (seed 000) with MQMSG_CLASS_ORDER_ACK. The transAcknowledgment
        Message (:meth:`AckSessions.order_ack`) is enqueued to DestinationForAck with the
        next store work (Open Queue + Enqueue Message To An Open Queue); its outgoing queue
        then carries it like any recoverable message."""
        built = self._ack_sessions.order_ack(ack)
        if built is not None:
            self._order_acks.append(built)

    def enqueue_order_acks_now(self) -> list[tuple[MessageRecord, str]]:
        """Enqueue the OrderAcks built so far on the caller's thread (one store write);
        returns them (the caller hands them to their sessions at once: before a session
        closes, its OrderAcks must be on it)."""
        acks, self._order_acks = self._order_acks, []
        if not acks:
            return []
        try:
            enqueue_acknowledgment_list(self._qm, self._sequence_store, acks)
        except MQError as exc:  # the senders' next retransmissions schedule new ones
            log.warning("enqueueing %d OrderAcks failed: %s", len(acks), exc)
            return []
        return acks

    # ------------------------------------------------------------------ status

    @property
    def accepts_waiting(self) -> bool:
        """Accepted messages wait for a batch and none is in flight: a driver holding them
        for a larger batch (``accept_min``) must hand them out soon."""
        return bool(self._accepted) and self._accept_in_flight is None

    def waiting_accepted(self) -> list[Pending]:
        """A snapshot of the accepted messages waiting for the next accept batch, in order."""
        return list(self._accepted)

    @property
    def accepted_count(self) -> int:
        """Accepted messages waiting for the next accept batch."""
        return len(self._accepted)

    @property
    def accepted_bytes(self) -> int:
        """The part of :attr:`unstored_bytes` that waits for the next accept batch."""
        return self._accepted_bytes

    @property
    def idle(self) -> bool:
        """Nothing waits for the store (used by tests and graceful stop)."""
        return not (
            self._accepted or self._accept_in_flight or self._nontx_in or self._forward_in
            or self._local_in_flight or self._refusals or self._rejects or self._order_acks
            or not self._settlements.idle or not self._sequences.idle
        )  # fmt: skip

    # ------------------------------------------------------------------ work items

    def next_work(self, accept_min: int = 1) -> StoreWork | None:
        """The next batch of store work to run, or None (at most one per kind in flight).

        Accepted messages form a batch once at least ``accept_min`` wait (a driver that
        passes more than 1 also passes 1 after a short wait, see :attr:`accepts_waiting`):
        storing them in fewer, larger transactions costs less per message."""
        if self._accept_in_flight is None and (len(self._accepted) >= max(1, accept_min) or self._rejects):
            return self._accept_batch()
        if self._settlements.ready:
            release = self._settlements.next_batch(self._outgoing.values(), self._qm.clock)
            if release is not None:
                return release
        upkeep = self._sequences.next_work()
        if upkeep is not None:
            return upkeep
        if self._local_in_flight is None and (
            self._nontx_in or self._refusals or self._forward_in or self._order_acks
        ):
            work_l = StoreLocal(
                tuple(self._nontx_in),
                tuple(self._refusals),
                tuple(self._forward_in),
                tuple(self._order_acks),
            )
            self._nontx_in.clear()
            self._refusals.clear()
            self._forward_in.clear()
            self._order_acks.clear()
            self._local_in_flight = work_l
            return work_l
        return None

    def _accept_batch(self) -> AcceptBatch:
        # Consecutive messages of one sequence for one queue form one group: cut as slices
        # where the route changes (no call per message).
        accepted = list(self._accepted)
        runs: list[list[Pending]] = []
        head: AcceptRoute | None = None
        start = 0
        for i, p in enumerate(accepted):
            route = p[0]
            if head is not None and (
                route is head
                or (head.queue == route.queue and (head.key is route.key or head.key == route.key))
            ):
                continue
            if head is not None:
                runs.append(accepted[start:i])
            start = i
            head = route
        if head is not None:
            runs.append(accepted[start:])
        self._accepted.clear()
        wall_offset = self._wall.offset
        groups = tuple(
            AcceptGroup(
                run[0][0].queue,
                run[0][0].key,
                tuple([ev.packet for _, ev in run]),
                tuple([ev.result for _, ev in run]),
                _state_record(run[-1][1].result.state, run[-1][0].peer, run[-1][0].direct, wall_offset),
            )
            for run in runs
        )
        rejects = tuple(
            (key.source_qm, key.destination, count, at) for key, (count, at) in self._rejects.items()
        )
        self._rejects.clear()
        self._accept_in_flight = AcceptBatch(groups, self._accepted_bytes, rejects)
        self._accepted_bytes = 0
        return self._accept_in_flight

    def run(self, work: StoreWork) -> list[BaseException | None]:
        """Run ``work`` through the queue manager (blocking until durable; thread-safe).
        Returns one outcome per item (None = durable)."""
        if isinstance(work, AcceptBatch):
            return self._store_accepts(work)
        if isinstance(work, SequenceUpkeep):
            return self._sequences.run(work)
        if isinstance(work, ReleaseBatch):
            return self._settlements.run(work)
        qm = self._qm
        seq_store = self._sequence_store
        insecure = self._config.send_insecure_nacks
        out: list[BaseException | None] = []
        # One store transaction per run of messages for one queue (not one per message).
        for queue, items in groupby(work.items, key=_first):
            # message_from_packet built them non-transactional (these packets had no
            # TransactionHeader): no copy each (dataclasses.replace took about a tenth
            # of the receiver's CPU for non-transactional messages).
            msgs = [m for _, m, _cid, _n in items]
            try:
                store_arrivals(qm, seq_store, queue, msgs, None, send_insecure_nacks=insecure)
                out += [None] * len(msgs)
            except MQError as exc:
                out += [exc] * len(msgs)
        for name, forwards in groupby(work.forwards, key=_first):
            msgs = [m for _, m, _cid, _n in forwards]
            try:
                # Into the destination's outgoing queue as received (Identifier, SentTime,
                # properties kept; TimeToReachQueue counts from SentTime).
                seq_store.accept_arrivals(qm.open_queue(name), msgs, None)
                out += [None] * len(msgs)
            except MQError as exc:
                out += [exc] * len(msgs)
        if work.acks:
            try:
                enqueue_acknowledgment_list(qm, seq_store, work.acks)
            except MQError as exc:  # the sender's next retransmission schedules a new one
                log.warning("enqueueing %d OrderAcks failed: %s", len(work.acks), exc)
        for dropped, cls, session in work.refusals:
            with contextlib.suppress(MQError):
                sess = session if isinstance(session, AckSession) else None
                refuse(qm, seq_store, dropped, cls, sess, send_insecure_nacks=insecure)
        return out

    def _store_accepts(self, work: AcceptBatch) -> list[BaseException | None]:
        """The groups of an AcceptBatch, in order per sequence. Runs of different
        sequences that need none of the arrival rules' outcomes (the usual case) are
        stored together, sharing one commit: a receiver with many senders, or a sender
        with many queues, paid one fsync per sequence (4,000 queues of one message each:
        4,000 commits). Others take the full arrival rules (MS-MQQB 3.1.5.8: rejected
        messages are consumed in order, their NACKs enqueued in the same transaction,
        openmsmq.transfer.arrival) one at a time. A group after a failed one of its sequence
        fails too (its state would skip the failed messages)."""
        qm = self._qm
        seq_store = self._sequence_store
        insecure = self._config.send_insecure_nacks
        out: list[BaseException | None] = [None] * len(work.groups)
        failed: set[SequenceKey] = set()
        together: list[tuple[int, list[list[Any]]]] = []  # (group index, rows), one per sequence
        together_keys: set[SequenceKey] = set()

        def flush() -> None:
            if not together:
                return
            runs = [(work.groups[i].queue, rows, work.groups[i].state) for i, rows in together]
            for (i, _rows), res in zip(together, seq_store.accept_arrival_rows_many(runs), strict=True):
                out[i] = res
                if res is not None:
                    failed.add(work.groups[i].key)
            together.clear()
            together_keys.clear()

        for i, g in enumerate(work.groups):
            if g.key in together_keys:
                flush()  # a sequence's runs stay in order: the earlier one first
            if g.key in failed:
                out[i] = LocalProtocolError("an earlier batch of this sequence failed")
                continue
            rows = plain_packet_rows(qm, g.queue, g.packets, g.key.destination)
            if rows is not None:
                together.append((i, rows))
                together_keys.add(g.key)
                continue
            flush()
            try:
                store_packet_messages(
                    qm,
                    seq_store,
                    g.queue,
                    g.packets,
                    g.key.destination,
                    g.state,
                    send_insecure_nacks=insecure,
                )
            except MQError as exc:
                failed.add(g.key)
                out[i] = exc
        flush()
        if work.rejects:
            try:
                seq_store.record_reject_counts(work.rejects)
            except MQError as exc:  # only the counter: nothing of the sequence depends on it
                log.warning(
                    "recording the RejectCount of %d incoming sequences failed: %s", len(work.rejects), exc
                )
        return out

    def local_done(self, work: StoreLocal, outcome: list[BaseException | None], now: float) -> AfterStore:
        """``work`` finished (``outcome`` from :meth:`run`, or one exception for all of it
        when the call itself failed): stored recoverable messages are reported to their
        sessions (which acknowledge them)."""
        self._local_in_flight = None
        stored = work.items + work.forwards
        self.unstored_bytes -= sum([len(m.body) for _, m, _c, _n in stored]) + len(stored) * RECEIVED_OVERHEAD
        failed: Counter[tuple[str, str]] = Counter()
        failed_conns: list[Conn | None] = []
        for (queue, _m, cid, number), res in zip(stored, pad_outcome(outcome, len(stored)), strict=True):
            conn = self._connections.get(cid)
            if res is None:
                if conn is not None and number is not None:
                    conn.session.recoverable_message_stored(number, now)
                continue
            # One line per queue and error for the batch (a full disk fails every one).
            failed[(queue, str(res))] += 1
            failed_conns.append(conn)
        for (queue, err), n in failed.items():
            log.warning("storing %d message(s) for %s failed: %s", n, queue, err)
        return AfterStore(
            len(failed_conns) < len(stored),
            tuple((conn, None) for conn in failed_conns),
            work.acks,
        )

    def accepts_done(self, work: AcceptBatch, outcome: list[BaseException | None], now: float) -> AfterStore:
        """``work`` finished (as :meth:`local_done`): the accepted messages are reported
        durable to their sequences (which may schedule OrderAcks), or dropped with the
        later acceptances of their sequence when they could not be stored."""
        self._accept_in_flight = None
        self._stats["batches"] += 1
        self.unstored_bytes -= work.nbytes
        stored = False
        failed_keys: list[SequenceKey] = []
        for g, res in zip(work.groups, pad_outcome(outcome, len(work.groups)), strict=True):
            seq = self._incoming.get(g.key, now)
            if res is None:
                self._ack_sessions.record(g.state)
                for ack in seq.messages_stored(g.accepted, now):
                    self.send_order_ack(ack)
                stored = True
                continue
            log.warning("storing %d messages for %s failed: %s", len(g.packets), g.queue, res)
            failed_keys.append(g.key)
            # (already rolled back when an earlier group of the same sequence failed)
            with contextlib.suppress(LocalProtocolError):
                seq.store_failed(g.accepted[0].tx_sequence_id, g.accepted[0].tx_sequence_number)
            # Later acceptances of this sequence were rolled back too: drop them.
            kept = deque(p for p in self._accepted if p[0].key != g.key)
            still = sum([len(p[1].packet.properties.body) for p in kept]) + len(kept) * RECEIVED_OVERHEAD
            self.unstored_bytes -= self._accepted_bytes - still
            self._accepted_bytes = still
            self._accepted = kept
        if not failed_keys:
            return AfterStore(stored)
        return AfterStore(stored, tuple((self._ack_sessions.connection_of(key), key) for key in failed_keys))


def _state_record(
    s: IncomingSequenceSnapshot, peer: str = "", direct: bool = False, wall_offset: float = 0.0
) -> IncomingSequenceState:
    """The store record of the incoming sequence state to commit with a group (with the
    session facts a later FinalAck needs: RemoteQMAddress, DirectFormatSession).
    LastAccessTime goes to the store as wall-clock seconds (``now`` + ``wall_offset``)."""
    return IncomingSequenceState(
        s.key.source_qm, s.key.destination, None, s.tx_sequence_id.value, s.tx_sequence_number,
        s.reject_count, s.last_access_time + wall_offset, peer, direct,
    )  # fmt: skip
