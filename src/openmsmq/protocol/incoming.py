"""Receiver side of MS-MQQB transactional sequences (sans-I/O).

This module implements, for the *final destination* queue manager:

* the acceptance rule of MS-MQQB 3.1.5.8.6 (exactly once, in order),
* TxMessageRejectCount and IncomingTransactionalTransferInfo.RejectCount /
  LastAccessTime (MS-MQQB 3.1.5.8.6, MS-MQDMPR 3.1.1.5),
* the update of IncomingTxSequenceID / IncomingTxSequenceNumber,
* the durability split: an accepted message is *not* acknowledged until the queue
  manager reports that it (and the new sequence state) is durable,
* OrderAck scheduling with the Order Ack Send Timer (MS-MQQB 3.1.2.7, 3.1.6.9,
  3.1.1.6.2): OrderAckTimeout, MaximumOrderAckDelay, LastOrderAckSendTime.

Nothing here reads a clock: every input takes ``now`` (seconds, float; any epoch,
as long as the caller is consistent).

Contract with the queue manager
-------------------------------
1. For every transactional UserMessage whose final destination is this QM, call
   :meth:`IncomingSequence.receive`. It returns :class:`Accepted` or :class:`Rejected`.
2. For :class:`Accepted`, store the message *and* ``Accepted.state`` (the new
   :class:`IncomingSequenceSnapshot`) in one store transaction. Store transactions of one
   sequence must commit in acceptance order (a single writer with group commit does
   this naturally); completion *reports* may arrive in any order.
3. When durable, call :meth:`IncomingSequence.messages_stored` (or
   :meth:`message_stored`). Only then can an OrderAck cover the message, and OrderAcks
   always carry the highest number of the durable, contiguous prefix in acceptance
   order (seed 003: never acknowledge 4 before 3 is stored).
4. If the store fails, call :meth:`IncomingSequence.store_failed`: the volatile
   acceptance state rolls back so that the sender's retransmission is accepted again.
5. Drive :meth:`get_timer` / :meth:`handle_timer`; each :class:`SendOrderAck` is to be
   sent to the original sender (MS-MQQB 3.1.7.17) over any session to that QM.
6. At start, pass the persisted snapshot back in (invariant 4).
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import IntEnum
from operator import is_ as _is

from openmsmq.errors import LocalProtocolError
from openmsmq.wire.fast import fast_constructor
from openmsmq.wire.ids import ZERO_SEQUENCE_ID, TxSequenceId

__all__ = [
    "Accepted",
    "IncomingSequence",
    "IncomingSequenceSnapshot",
    "IncomingSequences",
    "OrderAckConfig",
    "RejectReason",
    "Rejected",
    "SendOrderAck",
    "SequenceKey",
]

_U32_MAX = 0xFFFFFFFF


@dataclass(frozen=True, slots=True)
class SequenceKey:
    """Identifies one incoming transactional sequence stream at the receiver.

    The spec keeps IncomingTxSequenceID per session but requires it to survive
    restarts (MS-MQQB 3.1.1.3.1) while an acceptor builds a fresh session for every
    TCP connection (3.1.5.10); MS-MQDMPR 3.1.1.5 keys IncomingTransactionalTransferInfo
    per destination queue. We key by (source QM GUID, destination queue format name).
    """

    source_qm: uuid.UUID
    destination: str


@dataclass(frozen=True, slots=True)
class OrderAckConfig:
    """Durations of the Order Ack Send Timer, in seconds (MS-MQQB 3.1.1.3.1, 3.1.2.7)."""

    #: OrderAckTimeout ADM element: MUST be 500 ms.
    order_ack_timeout: float = 0.5
    #: MaximumOrderAckDelay ADM element: SHOULD be 10 s (Windows SeqMaxAckDelay).
    maximum_order_ack_delay: float = 10.0

    def __post_init__(self) -> None:
        if self.order_ack_timeout <= 0 or self.maximum_order_ack_delay <= 0:
            raise LocalProtocolError("OrderAck durations must be positive")


@dataclass(frozen=True, slots=True)
class IncomingSequenceSnapshot:
    """Receiver sequence state that must survive any crash (DESIGN invariant 4).

    ``tx_sequence_id`` / ``tx_sequence_number`` are the IncomingTxSequenceID /
    IncomingTxSequenceNumber ADM elements; ``reject_count`` is TxMessageRejectCount
    (= IncomingTransactionalTransferInfo.RejectCount) and ``last_access_time`` is
    IncomingTransactionalTransferInfo.LastAccessTime.
    """

    key: SequenceKey
    tx_sequence_id: TxSequenceId = ZERO_SEQUENCE_ID
    tx_sequence_number: int = 0
    reject_count: int = 0
    last_access_time: float = 0.0


class RejectReason(IntEnum):
    """Why a transactional message failed the acceptance rule (MS-MQQB 3.1.5.8.6)."""

    #: Same TxSequenceID, TxSequenceNumber <= IncomingTxSequenceNumber: already accepted.
    DUPLICATE = 1
    #: Same TxSequenceID, PreviousTxSequenceNumber > IncomingTxSequenceNumber: a message is missing.
    GAP = 2
    #: TxSequenceID < IncomingTxSequenceID: a sequence that is already finished.
    OLD_SEQUENCE = 3
    #: TxSequenceID > IncomingTxSequenceID but PreviousTxSequenceNumber != 0: not the start.
    NEW_SEQUENCE_NOT_AT_START = 4
    #: A new TxSequenceID whose TimeStamp lies further ahead of this QM's clock than
    #: :attr:`IncomingSequences.timestamp_lead` allows. TimeStamp is a time (MS-MQQB
    #: 3.1.1.3.1: greater than any earlier one; Windows uses its install time, openmsmq the
    #: outgoing queue's creation), so no sender reaches it; accepted, such an ID would move
    #: the sequence past anything its real sender can ever send (every later message of it
    #: rejected as OLD_SEQUENCE). Not part of the spec's rule: a refusal of this QM's own.
    IMPLAUSIBLE_SEQUENCE = 5


@dataclass(frozen=True, slots=True)
class Accepted:
    """The message passed the acceptance rule: store it durably together with ``state``."""

    key: SequenceKey
    tx_sequence_id: TxSequenceId
    tx_sequence_number: int
    previous_tx_sequence_number: int
    #: IncomingTransactionalTransferInfo.LastAccessTime set by this acceptance.
    last_access_time: float

    @property
    def state(self) -> IncomingSequenceSnapshot:
        """The sequence state to persist in the same store transaction as the message:
        IncomingTxSequenceID / Number at this message, TxMessageRejectCount 0 (an accepted
        message resets it), LastAccessTime of the acceptance. Built on access: a run of
        accepted messages is stored with the state of its last one only."""
        return _new_snapshot(self.key, self.tx_sequence_id, self.tx_sequence_number, 0, self.last_access_time)


@dataclass(frozen=True, slots=True)
class Rejected:
    """The message failed the acceptance rule: do not insert it (a duplicate or out of order)."""

    key: SequenceKey
    tx_sequence_id: TxSequenceId
    tx_sequence_number: int
    previous_tx_sequence_number: int
    reason: RejectReason
    #: TxMessageRejectCount after this rejection.
    reject_count: int


@dataclass(frozen=True, slots=True)
class SendOrderAck:
    """Send an OrderAck (MS-MQQB 2.2.4, 3.1.7.17) to the original sender of ``key``.

    ``tx_sequence_number`` is the highest number of the sequence that has been received
    and saved to disk, in order; TxPreviousSequenceNumber is ``tx_sequence_number - 1``.
    ``tx_sequence_id`` is IncomingTxSequenceID (protocol.md §11 item 2: the literal text
    names OutgoingTxSequenceID).
    """

    key: SequenceKey
    tx_sequence_id: TxSequenceId
    tx_sequence_number: int


@dataclass(slots=True)
class _Position:
    """A (TxSequenceID, TxSequenceNumber) pair; the zero pair means 'nothing'."""

    tx_sequence_id: TxSequenceId = ZERO_SEQUENCE_ID
    tx_sequence_number: int = 0


_new_snapshot = fast_constructor(IncomingSequenceSnapshot)
_new_accepted = fast_constructor(Accepted)


class IncomingSequence:
    """IncomingTxSequenceID/Number, the acceptance rule and the Order Ack Send Timer.

    One instance per :class:`SequenceKey`; it outlives TCP sessions. The persisted
    :class:`IncomingSequenceSnapshot` is by definition durable: pass it in at start.
    """

    def __init__(
        self,
        snapshot: IncomingSequenceSnapshot,
        now: float,
        config: OrderAckConfig | None = None,
        registry: IncomingSequences | None = None,
    ) -> None:
        self._config = config or OrderAckConfig()
        #: The registry this sequence belongs to: its TxSequenceID limit and its set of
        #: sequences whose Order Ack Send Timer runs (see IncomingSequences.get_timer).
        self._registry = registry
        self._key = snapshot.key
        # Volatile acceptance state: what the acceptance rule compares against.
        self._incoming = _Position(snapshot.tx_sequence_id, snapshot.tx_sequence_number)
        # Highest durable position, contiguous in acceptance order.
        self._durable = _Position(snapshot.tx_sequence_id, snapshot.tx_sequence_number)
        self._reject_count = snapshot.reject_count
        self._last_access_time = snapshot.last_access_time
        # Accepted, not yet (all) durable, in acceptance order.
        self._pending: deque[Accepted] = deque()
        # ids of pending entries reported durable while an older one is not (yet).
        self._stored_early: set[int] = set()
        # Order Ack Send Timer (MS-MQQB 3.1.2.7): None = inactive.
        self._order_ack_deadline: float | None = None
        # LastOrderAckSendTime: initialised to "now" (MS-MQQB 3.1.3.2).
        self._last_order_ack_send_time = now
        # The timer expired while the messages it should cover were not durable yet:
        # send as soon as the durable point advances.
        self._ack_due = False
        self._last_acked: _Position | None = None

    # ------------------------------------------------------------------ queries

    @property
    def key(self) -> SequenceKey:
        """The sequence stream this object tracks."""
        return self._key

    @property
    def incoming_tx_sequence_id(self) -> TxSequenceId:
        """IncomingTxSequenceID: the last accepted TxSequenceID (volatile, ahead of durable)."""
        return self._incoming.tx_sequence_id

    @property
    def incoming_tx_sequence_number(self) -> int:
        """IncomingTxSequenceNumber: the last accepted TxSequenceNumber."""
        return self._incoming.tx_sequence_number

    @property
    def durable_position(self) -> tuple[TxSequenceId, int]:
        """(TxSequenceID, TxSequenceNumber) of the highest durable, contiguous message."""
        return (self._durable.tx_sequence_id, self._durable.tx_sequence_number)

    @property
    def reject_count(self) -> int:
        """TxMessageRejectCount (= IncomingTransactionalTransferInfo.RejectCount)."""
        return self._reject_count

    @property
    def last_access_time(self) -> float:
        """IncomingTransactionalTransferInfo.LastAccessTime."""
        return self._last_access_time

    @property
    def last_order_ack_send_time(self) -> float:
        """LastOrderAckSendTime ADM element."""
        return self._last_order_ack_send_time

    @property
    def has_pending(self) -> bool:
        """Accepted messages wait to be reported durable (a store batch has them)."""
        return bool(self._pending)

    @property
    def order_ack_timer_active(self) -> bool:
        """Whether the Order Ack Send Timer is running."""
        return self._order_ack_deadline is not None

    def snapshot(self) -> IncomingSequenceSnapshot:
        """The durable state: what a restart must resume from.

        It reflects only messages reported stored, plus the current reject counter and
        LastAccessTime (which the QM may persist lazily; they do not affect safety).
        """
        return IncomingSequenceSnapshot(
            key=self._key,
            tx_sequence_id=self._durable.tx_sequence_id,
            tx_sequence_number=self._durable.tx_sequence_number,
            reject_count=self._reject_count,
            last_access_time=self._last_access_time,
        )

    # ------------------------------------------------------------------ inputs

    def receive(
        self,
        tx_sequence_id: TxSequenceId,
        tx_sequence_number: int,
        previous_tx_sequence_number: int,
        now: float,
    ) -> Accepted | Rejected:
        """Apply MS-MQQB 3.1.5.8.6 to one transactional message addressed to this QM.

        Every such message, accepted or not, schedules an OrderAck: that is how an
        OrderAck lost on the way back is repaired when the sender retransmits.
        """
        if not (0 <= tx_sequence_number <= _U32_MAX and 0 <= previous_tx_sequence_number <= _U32_MAX):
            raise LocalProtocolError("TxSequenceNumber and PreviousTxSequenceNumber are 32-bit unsigned")
        # Order Ack Send Timer, seeds 002/003: "If the timer is active and the time elapsed
        # from the LastOrderAckSendTime ADM element is less than the MaximumOrderAckDelay
        # ADM element, the timer MUST be restarted with the duration set to the
        # OrderAckTimeout ADM element. If the timer is inactive, it MUST be started with
        # the duration set to the OrderAckTimeout ADM element." When active and
        # MaximumOrderAckDelay has elapsed, it is left running, so a steady stream cannot
        # postpone the OrderAck forever.
        deadline = self._order_ack_deadline
        if deadline is None or (
            now - self._last_order_ack_send_time < self._config.maximum_order_ack_delay
            # Already restarted at this ``now`` (the messages of one read share it): a
            # running timer is armed in the registry, so a restart would change nothing.
            and deadline != now + self._config.order_ack_timeout
        ):
            self._start_order_ack_timer(now)

        incoming_id = self._incoming.tx_sequence_id
        incoming_no = self._incoming.tx_sequence_number
        reason: RejectReason | None = None
        # The two acceptance conditions, in the order the spec gives them.
        # Identity first: the decoder shares one TxSequenceId object per stream (its __eq__ is Python).
        if tx_sequence_id is incoming_id or tx_sequence_id == incoming_id:
            if tx_sequence_number <= incoming_no:
                reason = RejectReason.DUPLICATE
            elif previous_tx_sequence_number > incoming_no:
                reason = RejectReason.GAP
        elif tx_sequence_id > incoming_id:
            if previous_tx_sequence_number != 0:
                reason = RejectReason.NEW_SEQUENCE_NOT_AT_START
            elif (
                self._registry is not None
                and (lead := self._registry.timestamp_lead) is not None
                and tx_sequence_id.timestamp > now + lead
            ):
                reason = RejectReason.IMPLAUSIBLE_SEQUENCE
        else:
            reason = RejectReason.OLD_SEQUENCE

        # "The IncomingTransactionalTransferInfo.LastAccessTime ADM attribute MUST be set
        # to the current system time." (for accepted and rejected messages alike)
        self._last_access_time = now
        if reason is not None:
            # "If the message is not accepted, the TxMessageRejectCount ADM element MUST be
            # incremented by 1"; RejectCount mirrors it. The incoming state is NOT updated
            # (protocol.md §11 item 1: updating it would let a late duplicate roll it back).
            self._reject_count += 1
            return Rejected(
                self._key,
                tx_sequence_id,
                tx_sequence_number,
                previous_tx_sequence_number,
                reason,
                self._reject_count,
            )

        # "If the packet is accepted, the TxMessageRejectCount ADM element MUST be set to zero."
        self._reject_count = 0
        # _incoming is private to this object (snapshots copy its fields): update in place.
        incoming = self._incoming
        incoming.tx_sequence_id = tx_sequence_id
        incoming.tx_sequence_number = tx_sequence_number
        # One message at a time on the receive path: built with the fast constructor (every
        # field, in order; they were validated above). Its ``state`` is built on access.
        accepted = _new_accepted(
            self._key, tx_sequence_id, tx_sequence_number, previous_tx_sequence_number, now
        )
        self._pending.append(accepted)
        return accepted

    def message_stored(
        self, tx_sequence_id: TxSequenceId, tx_sequence_number: int, now: float
    ) -> list[SendOrderAck]:
        """The QM made one accepted message durable. See :meth:`messages_stored`."""
        return self.messages_stored([(tx_sequence_id, tx_sequence_number)], now)

    def messages_stored(
        self, stored: Iterable[Accepted | tuple[TxSequenceId, int]], now: float
    ) -> list[SendOrderAck]:
        """The QM made these accepted messages durable (any order, e.g. one group commit):
        their :class:`Accepted` values, or (TxSequenceID, TxSequenceNumber) positions.

        Returns an OrderAck to send immediately when the Order Ack Send Timer already
        expired while waiting for this durability (at most one element).
        Unknown positions raise :class:`LocalProtocolError` (a QM bug).
        """
        pending = self._pending
        stored = stored if isinstance(stored, list | tuple) else list(stored)
        early = self._stored_early
        n = len(stored)
        head: Accepted | None = None
        # The QM reports one sequence's batches in acceptance order with the Accepted
        # values it was given, so ``stored`` is normally the oldest pending entries
        # themselves, in order: compared by identity (no hashing), then popped, as the
        # durable prefix below would pop them.
        if n and not early and n <= len(pending) and all(map(_is, stored, pending)):
            if n == len(pending):  # all of them (one group commit stored every accepted one)
                head = pending[-1]
                pending.clear()
            else:
                popleft = pending.popleft
                for _ in range(n):
                    head = popleft()
        else:
            index = {(p.tx_sequence_id, p.tx_sequence_number): p for p in pending}
            for s in stored:
                position = s if isinstance(s, tuple) else (s.tx_sequence_id, s.tx_sequence_number)
                found = index.get(position)
                if found is None:
                    raise LocalProtocolError(
                        f"message_stored for {position!r}, which is not awaiting storage"
                    )
                early.add(id(found))  # pending entries are alive: their ids are unique
            # The durable point only moves over a contiguous prefix (seed 003).
            while pending and id(pending[0]) in early:
                head = pending.popleft()
                early.discard(id(head))
        advanced = head is not None
        if head is not None:
            self._durable = _Position(head.tx_sequence_id, head.tx_sequence_number)
        if advanced and self._ack_due:
            # The deferred OrderAck goes out once, now that the data it covers is durable
            # (seeds 002/003: never acknowledge what is not on disk); then the Order Ack
            # Send Timer governs again. What is still being stored is acknowledged by the
            # timer, started here when nothing restarted it meanwhile (a later durable
            # advance alone sends nothing, MS-MQQB 3.1.6.9: OrderAcks go when it expires).
            self._ack_due = False
            ack = self._emit_order_ack(now)
            if self._pending and self._order_ack_deadline is None:
                self._start_order_ack_timer(now)
            return [ack]
        return []

    def store_failed(self, tx_sequence_id: TxSequenceId, tx_sequence_number: int) -> None:
        """The QM could not store an accepted message: forget it and everything accepted after it.

        The acceptance state goes back to the message accepted just before, so the
        sender's retransmission is accepted again. The QM must not commit the later ones.
        """
        for i, entry in enumerate(self._pending):
            if (entry.tx_sequence_id, entry.tx_sequence_number) == (tx_sequence_id, tx_sequence_number):
                while len(self._pending) > i:
                    self._stored_early.discard(id(self._pending.pop()))
                if self._pending:
                    last = self._pending[-1]
                    self._incoming = _Position(last.tx_sequence_id, last.tx_sequence_number)
                else:
                    self._incoming = _Position(self._durable.tx_sequence_id, self._durable.tx_sequence_number)
                if not self._pending:
                    self._ack_due = False
                return
        raise LocalProtocolError(
            f"store_failed for {(tx_sequence_id, tx_sequence_number)!r}, which is not awaiting storage"
        )

    # ------------------------------------------------------------------ timer

    def get_timer(self) -> float | None:
        """Deadline of the Order Ack Send Timer, or None when it is inactive."""
        return self._order_ack_deadline

    def handle_timer(self, now: float) -> SendOrderAck | None:
        """Fire the Order Ack Send Timer if due (MS-MQQB 3.1.6.9).

        An OrderAck covering the durable prefix is returned and LastOrderAckSendTime
        becomes ``now``. If nothing new is durable yet while accepted messages are still
        being stored, the ack is deferred to the :meth:`messages_stored` call that makes
        them durable (never acknowledging what is not on disk, seed 003).
        """
        if self._order_ack_deadline is None or now < self._order_ack_deadline:
            return None
        self._order_ack_deadline = None
        if self._registry is not None:
            self._registry.armed.pop(self, None)
        if self._durable.tx_sequence_number == 0:
            # Nothing stored yet (OrderAck numbers are 1..0xFFFFFFFF, MS-MQQB 2.2.4.1).
            self._ack_due = bool(self._pending)
            return None
        if self._pending and self._last_acked == self._durable:
            self._ack_due = True
            return None
        self._ack_due = bool(self._pending)
        return self._emit_order_ack(now)

    def flush_order_ack(self, now: float) -> SendOrderAck | None:
        """Fire a running Order Ack Send Timer now: the OrderAck of the durable prefix,
        as :meth:`handle_timer` would send it at the deadline. For a graceful stop, after
        the QM stored what it accepted and before the session closes: the sender then
        releases those messages instead of resending them after the restart. The spec
        says nothing of a running timer at session close (docs/conformance.md)."""
        if self._order_ack_deadline is None:
            return None
        self._order_ack_deadline = now
        return self.handle_timer(now)

    # ------------------------------------------------------------------ internals

    def _start_order_ack_timer(self, now: float) -> None:
        """(Re)start the Order Ack Send Timer (MS-MQQB 3.1.6.9): the one place that sets a
        deadline, so that the registry's scan of running timers always sees it."""
        self._order_ack_deadline = now + self._config.order_ack_timeout
        if self._registry is not None:
            self._registry.armed[self] = None

    def _emit_order_ack(self, now: float) -> SendOrderAck:
        self._last_order_ack_send_time = now
        self._last_acked = _Position(self._durable.tx_sequence_id, self._durable.tx_sequence_number)
        return SendOrderAck(self._key, self._durable.tx_sequence_id, self._durable.tx_sequence_number)


@dataclass
class IncomingSequences:
    """All incoming sequences of this QM, keyed by :class:`SequenceKey`.

    A registry shared by every session: the QM builds it at start from the persisted
    snapshots and drives its aggregated timer.

    ``max_sequences`` bounds how many it holds: :meth:`admit` creates no sequence beyond it
    (each one is persisted and lives until it expires, so a peer inventing senders or queue
    names must not grow it without end). ``timestamp_lead``: a new sequence may start
    with a TxSequenceID whose TimeStamp (seconds since 1970) is at most ``now`` plus this
    (:attr:`RejectReason.IMPLAUSIBLE_SEQUENCE`; None: any). The QM keeps it at the offset
    of its wall clock from ``now`` plus the clock skew it allows between QMs.
    """

    config: OrderAckConfig = field(default_factory=OrderAckConfig)
    _sequences: dict[SequenceKey, IncomingSequence] = field(default_factory=dict)
    max_sequences: int | None = None
    timestamp_lead: float | None = None
    #: The sequences whose Order Ack Send Timer runs (a dict for its deterministic order):
    #: the timer scan looks at these only (a few, the ones with recent traffic), not at
    #: every sequence the QM remembers.
    armed: dict[IncomingSequence, None] = field(default_factory=dict)
    #: The class of the sequences this registry creates: :class:`IncomingSequence`, or a
    #: subclass given by :meth:`use_sequence_type` (the simulator's planted bugs).
    sequence_type: type[IncomingSequence] = IncomingSequence

    @classmethod
    def restore(
        cls,
        snapshots: Iterable[IncomingSequenceSnapshot],
        now: float,
        config: OrderAckConfig | None = None,
        *,
        max_sequences: int | None = None,
    ) -> IncomingSequences:
        """Rebuild the registry from persisted snapshots (invariant 4). Every persisted
        sequence is restored, even beyond ``max_sequences`` (they are state, not requests)."""
        registry = cls(config or OrderAckConfig(), max_sequences=max_sequences)
        for snap in snapshots:
            registry._sequences[snap.key] = IncomingSequence(snap, now, registry.config, registry)
        return registry

    def use_sequence_type(self, sequence_type: type[IncomingSequence], now: float) -> None:
        """Create sequences as ``sequence_type`` from now on, and rebuild the ones held
        from their snapshots. Only right after :meth:`restore`, before any message: a
        snapshot carries the durable state only, not what is pending."""
        if any(seq.has_pending or seq.order_ack_timer_active for seq in self._sequences.values()):
            raise LocalProtocolError("the sequence type changes only before any message is received")
        self.sequence_type = sequence_type
        for key, seq in self._sequences.items():
            self._sequences[key] = sequence_type(seq.snapshot(), now, self.config, self)

    def get(self, key: SequenceKey, now: float) -> IncomingSequence:
        """The sequence for ``key``, created in its initial state (ID 0, number 0) if new."""
        seq = self._sequences.get(key)
        if seq is None:
            seq = self.sequence_type(IncomingSequenceSnapshot(key), now, self.config, self)
            self._sequences[key] = seq
        return seq

    def admit(self, key: SequenceKey, now: float) -> IncomingSequence | None:
        """:meth:`get`, except that a new sequence beyond ``max_sequences`` is not created
        (None): the message that wanted it is refused, the registry stays bounded."""
        seq = self._sequences.get(key)
        if seq is None and self.max_sequences is not None and len(self._sequences) >= self.max_sequences:
            return None
        return seq if seq is not None else self.get(key, now)

    def find(self, key: SequenceKey) -> IncomingSequence | None:
        """The sequence for ``key`` if there is one (never creates it)."""
        return self._sequences.get(key)

    def remove(self, key: SequenceKey) -> IncomingSequence | None:
        """Forget the sequence for ``key`` (expired or reset by an operator; the QM deletes
        or rewrites its persisted state). Returns it, or None when there was none."""
        seq = self._sequences.pop(key, None)
        if seq is not None:
            self.armed.pop(seq, None)
        return seq

    def replace(self, snapshot: IncomingSequenceSnapshot, now: float) -> IncomingSequence:
        """Put a sequence in the state of ``snapshot`` (an operator's reset), dropping the
        one it replaces."""
        self.remove(snapshot.key)
        seq = self.sequence_type(snapshot, now, self.config, self)
        self._sequences[snapshot.key] = seq
        return seq

    def __iter__(self) -> Iterator[IncomingSequence]:
        return iter(self._sequences.values())

    def __len__(self) -> int:
        return len(self._sequences)

    def receive(
        self,
        key: SequenceKey,
        tx_sequence_id: TxSequenceId,
        tx_sequence_number: int,
        previous_tx_sequence_number: int,
        now: float,
    ) -> Accepted | Rejected:
        """:meth:`IncomingSequence.receive` on the sequence for ``key``."""
        seq = self.get(key, now)
        return seq.receive(tx_sequence_id, tx_sequence_number, previous_tx_sequence_number, now)

    def get_timer(self) -> float | None:
        """Earliest Order Ack Send Timer deadline over all sequences (those in ``armed``)."""
        deadlines = [d for s in self.armed if (d := s.get_timer()) is not None]
        return min(deadlines) if deadlines else None

    def handle_timer(self, now: float) -> list[SendOrderAck]:
        """Fire every due Order Ack Send Timer."""
        due = [s for s in self.armed if (d := s.get_timer()) is not None and d <= now]
        return [ack for seq in due if (ack := seq.handle_timer(now)) is not None]

    def flush_order_acks(self, now: float) -> list[SendOrderAck]:
        """:meth:`IncomingSequence.flush_order_ack` of every sequence (graceful stop)."""
        return [ack for seq in list(self.armed) if (ack := seq.flush_order_ack(now)) is not None]

    def snapshots(self) -> list[IncomingSequenceSnapshot]:
        """Durable snapshots of every sequence."""
        return [s.snapshot() for s in self._sequences.values()]
