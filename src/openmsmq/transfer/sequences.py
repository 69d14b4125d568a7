"""Upkeep of the incoming transactional sequences of a transfer: rejections watched and
reported, idle sequences expired, an operator's reset applied (docs/operations.md,
"Incoming sequences").

An incoming sequence (IncomingTransactionalTransferInfo, MS-MQDMPR 3.1.1.5; keyed by
sender QM and destination queue) lives as long as its sender may resend into it. One that
rejects every message (its state ahead of or behind what the sender sends: a restored
backup, a reinstalled sender, a forged message accepted before the trust rules existed)
blocks that sender's messages for that queue for good: it is logged as a warning with
the sender, the queue and why, and an operator can reset it after checking it. One that
stays idle for ``TrustConfig.incoming_sequence_max_idle`` is forgotten and its persisted
state deleted (the spec names no lifetime for it). The store work is one
:class:`SequenceUpkeep` item at a time.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass

from openmsmq.errors import HResult, MQError
from openmsmq.protocol.incoming import (
    IncomingSequences,
    IncomingSequenceSnapshot,
    Rejected,
    RejectReason,
    SequenceKey,
)
from openmsmq.qm.manager import QueueManager
from openmsmq.store.records import IncomingSequenceState
from openmsmq.transfer.trust import PeerTrust, TrustConfig
from openmsmq.wire.ids import ZERO_SEQUENCE_ID, TxSequenceId

__all__ = ["IncomingUpkeep", "RejectRecord", "SequenceReset", "SequenceUpkeep"]

log = logging.getLogger("openmsmq.transfer")


@dataclass(slots=True)
class RejectRecord:
    """What an incoming sequence rejected since it last accepted a message."""

    #: Driver clock of the first rejection since the last acceptance.
    since: float
    reason: RejectReason
    tx_sequence_id: TxSequenceId
    tx_sequence_number: int
    previous_tx_sequence_number: int
    #: The session's peer it last came from.
    peer: str
    count: int = 0
    #: Driver clock before which it is not logged again.
    next_log: float = 0.0


@dataclass(frozen=True, slots=True)
class SequenceReset:
    """An operator's reset of an incoming sequence: its state before and after
    ((TxSequenceID, TxSequenceNumber); ``(0, 0)`` = no state: the next message that starts a
    sequence is accepted) and the rejection that made it necessary, if one was seen."""

    source_qm: uuid.UUID
    destination: str
    before: tuple[TxSequenceId, int]
    after: tuple[TxSequenceId, int]
    last_rejected: RejectRecord | None


@dataclass(frozen=True, slots=True)
class SequenceUpkeep:
    """Store work: incoming sequence rows to delete and rows to rewrite (an operator's
    reset: (state it replaces, new state)), each only while the row still holds the state
    it replaces, so a sequence that accepted a message meanwhile keeps its newer row."""

    deletes: tuple[IncomingSequenceState, ...] = ()
    writes: tuple[tuple[IncomingSequenceState, IncomingSequenceState], ...] = ()


class IncomingUpkeep:
    """Watches, expires and resets the incoming sequences of one transfer (composed into
    :class:`~openmsmq.transfer.engine.Transfer`; it calls in on rejections, acceptances and
    its timer)."""

    def __init__(
        self, qm: QueueManager, incoming: IncomingSequences, trust: PeerTrust, config: TrustConfig, now: float
    ) -> None:
        self.qm = qm
        self.incoming = incoming
        self.trust = trust
        self.config = config
        self._started = now
        self.next_due = now + config.upkeep_interval
        #: Sequences rejecting since their last acceptance (at most one per sequence).
        self._rejecting: dict[SequenceKey, RejectRecord] = {}
        self._deletes: list[IncomingSequenceState] = []
        self._writes: list[tuple[IncomingSequenceState, IncomingSequenceState]] = []
        self.in_flight: SequenceUpkeep | None = None
        self.clock_moved(qm.clock() - now)

    def clock_moved(self, wall_offset: float) -> None:
        """The QM's wall clock is ``wall_offset`` ahead of the driver's clock (``now``):
        a new sequence's TxSequenceID may carry a TimeStamp (seconds since 1970, as MS-MQQB
        3.1.1.3.1 fills it) up to ``sequence_clock_skew`` ahead of the wall clock."""
        self.incoming.timestamp_lead = wall_offset + self.config.sequence_clock_skew

    # ------------------------------------------------------------------ rejections

    def rejected(self, result: Rejected, peer: str, now: float) -> None:
        """A message of ``result.key``'s sequence was rejected (it came from ``peer``)."""
        key = result.key
        rec = self._rejecting.get(key)
        if rec is None:
            rec = self._rejecting[key] = RejectRecord(
                now, result.reason, result.tx_sequence_id, result.tx_sequence_number,
                result.previous_tx_sequence_number, peer, next_log=now + self.config.stuck_after,
            )  # fmt: skip
        else:
            rec.reason, rec.tx_sequence_id = result.reason, result.tx_sequence_id
            rec.tx_sequence_number = result.tx_sequence_number
            rec.previous_tx_sequence_number = result.previous_tx_sequence_number
            rec.peer = peer
        rec.count += 1
        if result.reason is RejectReason.IMPLAUSIBLE_SEQUENCE:
            self.trust.refused(
                peer,
                "implausible-sequence",
                f"a message for {key.destination} as QM {key.source_qm}",
                f"TxSequenceID {result.tx_sequence_id} starts a sequence more than"
                f" {self.config.sequence_clock_skew:.0f} s ahead of this QM's clock"
                " (mqqb.sequence_clock_skew); the sequence keeps its state",
            )
        elif now >= rec.next_log:
            rec.next_log = now + self.config.stuck_repeat
            seq = self.incoming.find(key)
            current = seq.durable_position if seq is not None else (ZERO_SEQUENCE_ID, 0)
            log.warning(
                "incoming sequence of QM %s for %s rejects every message since %.0f s (%d rejected,"
                " last from %s: %s, TxSequenceID %s number %d previous %d; its state is %s number %d):"
                " check the sender, then reset it if its state is wrong (openmsmq sequence reset,"
                " docs/operations.md)",
                key.source_qm, key.destination, now - rec.since, rec.count, peer, rec.reason.name,
                rec.tx_sequence_id, rec.tx_sequence_number, rec.previous_tx_sequence_number,
                current[0], current[1],
            )  # fmt: skip

    def accepted(self, key: SequenceKey) -> None:
        """The sequence accepted a message: it is not stuck (called once per stream)."""
        if self._rejecting:
            self._rejecting.pop(key, None)

    def last_rejected(self, key: SequenceKey) -> RejectRecord | None:
        """What the sequence last rejected since its last acceptance (status, reset)."""
        return self._rejecting.get(key)

    # ------------------------------------------------------------------ expiry

    def due(self, now: float) -> list[SequenceKey]:
        """The upkeep timer fired: forget the sequences idle longer than
        ``incoming_sequence_max_idle`` (their rows are deleted by the next
        :meth:`next_work`). Returns the keys forgotten. Walks every sequence, once per
        ``upkeep_interval`` (never per packet or per pump)."""
        self.next_due = now + self.config.upkeep_interval
        oldest = now - self.config.incoming_sequence_max_idle
        if self._started > oldest:
            return []  # no sequence can be that idle yet (unknown ages count from the start)
        expired = [
            s for s in self.incoming
            if max(s.last_access_time, self._started) < oldest and not s.has_pending
            and not s.order_ack_timer_active
        ]  # fmt: skip
        for seq in expired:
            self.incoming.remove(seq.key)
            self._rejecting.pop(seq.key, None)
            sid, number = seq.durable_position
            self._deletes.append(_record(seq.key, sid, number))
        if expired:
            log.info(
                "forgot %d incoming sequence(s) idle for more than %.0f s (mqqb.incoming_sequence_max_idle)",
                len(expired), self.config.incoming_sequence_max_idle,
            )  # fmt: skip
        return [s.key for s in expired]

    # ------------------------------------------------------------------ reset

    def find(self, source_qm: uuid.UUID, destination: str) -> SequenceKey | None:
        """The key of the incoming sequence of ``source_qm`` for ``destination`` (as
        listed; compared without case)."""
        want = destination.lower()
        for seq in self.incoming:
            key = seq.key
            if key.source_qm == source_qm and key.destination.lower() == want:
                return key
        return None

    def reset(self, key: SequenceKey, position: tuple[TxSequenceId, int] | None, now: float) -> SequenceReset:
        """Put the sequence of ``key`` at ``position`` (TxSequenceID, TxSequenceNumber: the
        last message taken as accepted), or, with None, where the message it last rejected
        is accepted: (its TxSequenceID, its PreviousTxSequenceNumber), or no state when
        that message starts a sequence or none was rejected. Raises :class:`MQError` while
        accepted messages of it are being stored."""
        seq = self.incoming.find(key)
        if seq is None:
            raise MQError(HResult.MQ_ERROR_INVALID_PARAMETER, f"no incoming sequence {key}")
        if seq.has_pending:
            raise MQError(
                HResult.MQ_ERROR_INSUFFICIENT_RESOURCES,
                "messages of this sequence are being stored; try again in a moment",
            )
        rec = self._rejecting.pop(key, None)
        if position is None:
            position = (ZERO_SEQUENCE_ID, 0)
            if rec is not None and rec.previous_tx_sequence_number:
                position = (rec.tx_sequence_id, rec.previous_tx_sequence_number)
        before = seq.durable_position
        if position[0] == ZERO_SEQUENCE_ID:
            self.incoming.remove(key)
            self._deletes.append(_record(key, *before))
        else:
            self.incoming.replace(IncomingSequenceSnapshot(key, position[0], position[1], 0, now), now)
            self._writes.append((_record(key, *before), _record(key, *position, wall=self.qm.clock())))
        log.warning(
            "incoming sequence of QM %s for %s reset by an operator: from TxSequenceID %s number %d"
            " to %s number %d",
            key.source_qm, key.destination, before[0], before[1], position[0], position[1],
        )  # fmt: skip
        return SequenceReset(key.source_qm, key.destination, before, position, rec)

    # ------------------------------------------------------------------ store work

    def next_work(self) -> SequenceUpkeep | None:
        """The next store work (one at a time), or None."""
        if self.in_flight is not None or not (self._deletes or self._writes):
            return None
        self.in_flight = SequenceUpkeep(tuple(self._deletes), tuple(self._writes))
        self._deletes.clear()
        self._writes.clear()
        return self.in_flight

    def run(self, work: SequenceUpkeep) -> list[BaseException | None]:
        """Run ``work`` (blocking; on the driver's store thread)."""
        try:
            self.qm.update_incoming_sequences(work.deletes, work.writes)
        except MQError as exc:
            return [exc]
        return [None]

    def done(self, work: SequenceUpkeep, outcome: list[BaseException | None] | BaseException) -> None:
        """``work`` finished: a failure is logged and the work queued again."""
        self.in_flight = None
        failure = outcome if isinstance(outcome, BaseException) else next((o for o in outcome if o), None)
        if failure is not None:
            log.warning("updating the incoming sequences failed (tried again): %s", failure)
            self._deletes[:0] = work.deletes
            self._writes[:0] = work.writes

    @property
    def idle(self) -> bool:
        """No store work waits or runs."""
        return self.in_flight is None and not (self._deletes or self._writes)


def _record(key: SequenceKey, sid: TxSequenceId, number: int, wall: float = 0.0) -> IncomingSequenceState:
    return IncomingSequenceState(key.source_qm, key.destination, None, sid.value, number, 0, wall)
