"""Sender side of MS-MQQB transactional sequences (sans-I/O).

One :class:`OutgoingSequence` per outgoing queue (the TxOutgoingSequence of
MS-MQQB 3.1.1.3.1.1 plus the transactional part of the OutgoingMessageTable and the
AwaitingFinalACKTable). It

* retains every transactional message until a matching OrderAck (MS-MQQB 3.1.1.6.2;
  DESIGN invariant 3) — there is deliberately no session-acknowledgment input here, so
  a SessionAck cannot release anything;
* keeps a message whose sender asked for a FinalAck until that FinalAck arrives;
* releases every message up to the OrderAck's number at once (:class:`Released`);
* resends everything not yet OrderAck'ed on the Transactional Ack Wait Timer
  (MS-MQQB 3.1.2.6, 3.1.6.5) with the ResendTimerTable back-off, and after every
  reconnect, in order;
* reports, never raises on, OrderAcks/FinalAcks it cannot match;
* accepts an OrderAck beyond what it has sent when the QM vouches (:meth:`note_assigned`)
  that the number was assigned in that sequence: after a restart the sender reloads only
  part of its outgoing queue while the receiver may already hold more (its durable
  position); the OrderAck releases what is loaded and, as the rest is loaded, that too
  (without sending it). Nothing is released that was not loaded, i.e. assigned.

Numbering is the queue manager's: it assigns TxSequenceID / TxSequenceNumber /
PreviousTxSequenceNumber at commit and persists them (MS-MQQB 3.1.7.1.3, 3.1.1.5).
A new TxSequenceID may start only when every retained message has been OrderAck'ed
(:attr:`OutgoingSequence.all_order_acked`); TxSequenceIDs must be unique per QM so an
OrderAck, which names only the sequence, can be routed back to its outgoing queue.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from enum import IntEnum
from operator import attrgetter

from openmsmq.errors import LocalProtocolError
from openmsmq.wire.ids import TxSequenceId

__all__ = [
    "AwaitingFinalAck",
    "FinalAckIgnored",
    "IgnoreReason",
    "OrderAckIgnored",
    "OutgoingEvent",
    "OutgoingSequence",
    "Released",
    "ResendConfig",
    "RetainedMessage",
    "Settled",
    "Transmit",
]

_U32_MAX = 0xFFFFFFFF
#: MQMSG_CLASS_ACK_RECEIVE (MS-MQMQ 2.2.18.1.6): the positive FinalAck class.
_CLASS_ACK_RECEIVE = 0x4000


@dataclass(frozen=True, slots=True)
class ResendConfig:
    """ResendTimeoutsShort / Medium / Long / Final in seconds (MS-MQQB 3.1.1.3).

    The ResendTimerTable is three times each of the first three, then the final one.
    """

    short: float = 30.0
    medium: float = 300.0
    long: float = 1800.0
    final: float = 21600.0

    def __post_init__(self) -> None:
        if min(self.short, self.medium, self.long, self.final) <= 0:
            raise LocalProtocolError("resend timeouts must be positive")

    @property
    def table(self) -> tuple[float, ...]:
        """The 10-entry ResendTimerTable."""
        return (self.short,) * 3 + (self.medium,) * 3 + (self.long,) * 3 + (self.final,)


@dataclass(frozen=True, slots=True)
class RetainedMessage:
    """A committed transactional message as the sender protocol sees it.

    ``handle`` is the QM's own reference (e.g. its LookupIdentifier); the protocol
    hands it back in events and never interprets it.
    """

    tx_sequence_id: TxSequenceId
    tx_sequence_number: int
    previous_tx_sequence_number: int
    #: UserHeader.MessageID, used to match a FinalAck (MS-MQQB 3.1.5.7).
    message_id: int
    #: The sender asked for a FinalAck (JN/JP set, or TransactionHeader.Flags.FA).
    final_ack_requested: bool = False
    handle: int = 0

    @property
    def position(self) -> tuple[TxSequenceId, int]:
        """(TxSequenceID, TxSequenceNumber)."""
        return (self.tx_sequence_id, self.tx_sequence_number)


@dataclass(frozen=True, slots=True)
class Transmit:
    """Send these messages now, in this order.

    ``previous_tx_sequence_number`` may differ from the committed value on a resend:
    MS-MQQB 3.1.7.1.3 bridges the gap left by messages removed before acknowledgment.
    """

    messages: tuple[RetainedMessage, ...]
    resend: bool


@dataclass(frozen=True, slots=True)
class Released:
    """The QM may delete these messages: the receiver stored them (and, when one was
    requested, the FinalAck came back with ``final_ack_class``). They are of one
    TxSequenceID, in increasing TxSequenceNumber order."""

    messages: tuple[RetainedMessage, ...]
    final_ack_class: int | None = None


@dataclass(frozen=True, slots=True)
class Settled:
    """The FinalAck of a message not OrderAck'ed yet came (MS-MQQB 3.1.5.7): it left the
    sequence; the QM removes it from its outgoing queue (journal, dead-letter queue or
    away, by ``final_ack_class`` and its JP/JN flags)."""

    message: RetainedMessage
    final_ack_class: int


@dataclass(frozen=True, slots=True)
class AwaitingFinalAck:
    """These messages were OrderAck'ed but wait for their FinalAck (AwaitingFinalACKTable)."""

    messages: tuple[RetainedMessage, ...]


class IgnoreReason(IntEnum):
    """Why an acknowledgment was not applied."""

    #: The TxSequenceID is not a sequence this outgoing queue has sent on.
    UNKNOWN_SEQUENCE = 1
    #: The TxSequenceNumber is beyond the highest number sent on the sequence and
    #: beyond the highest the QM reported assigned in it (:meth:`OutgoingSequence.note_assigned`).
    BEYOND_SENT = 2
    #: No retained message matches the FinalAck.
    UNKNOWN_MESSAGE = 3
    #: OrderAck number out of range (MS-MQQB 2.2.4.1: 1..0xFFFFFFFF).
    INVALID_NUMBER = 4


@dataclass(frozen=True, slots=True)
class OrderAckIgnored:
    """An OrderAck that matches nothing sent: reported, never fatal."""

    tx_sequence_id: TxSequenceId
    tx_sequence_number: int
    reason: IgnoreReason


@dataclass(frozen=True, slots=True)
class FinalAckIgnored:
    """A FinalAck that matches no retained message: reported, never fatal."""

    tx_sequence_id: TxSequenceId
    tx_sequence_number: int
    message_id: int
    message_class: int
    reason: IgnoreReason


OutgoingEvent = Transmit | Released | Settled | AwaitingFinalAck | OrderAckIgnored | FinalAckIgnored

_NUMBER = attrgetter("tx_sequence_number")
_FINAL_ACK_REQUESTED = attrgetter("final_ack_requested")


class OutgoingSequence:
    """Retention, release and resend of one outgoing queue's transactional messages."""

    def __init__(
        self,
        now: float,
        retained: Iterable[RetainedMessage] = (),
        awaiting_final_ack: Iterable[RetainedMessage] = (),
        config: ResendConfig | None = None,
    ) -> None:
        """Restore from the store: ``retained`` = not yet OrderAck'ed, in sequence order;
        ``awaiting_final_ack`` = OrderAck'ed, waiting for a FinalAck."""
        self._table = (config or ResendConfig()).table
        # Not yet OrderAck'ed, in send order (the transactional OutgoingMessageTable).
        self._unacked: list[RetainedMessage] = []
        # OrderAck'ed, waiting for their FinalAck (AwaitingFinalACKTable).
        self._awaiting: dict[tuple[TxSequenceId, int], RetainedMessage] = {}
        # How many of _awaiting are of each TxSequenceID (holds_sequence).
        self._awaiting_sids: dict[TxSequenceId, int] = {}
        # Highest number known sent, per sequence; restored messages count as sent.
        self._sent_high: dict[TxSequenceId, int] = {}
        # LastAck (MS-MQQB 3.1.1.3.1.1), per sequence.
        self._last_ack: dict[TxSequenceId, int] = {}
        # Highest number the QM assigned (persisted) per sequence: see note_assigned.
        self._assigned_high: dict[TxSequenceId, int] = {}
        self.connected = False
        # TxOutgoingSequence bookkeeping (MS-MQQB 3.1.1.3.1.1).
        self.resend_interval_index = 0
        self.time_of_last_ack = now
        self.last_ack_count = 0
        self._resend_deadline: float | None = None
        # Removed before acknowledgment: position -> its PreviousTxSequenceNumber.
        self._removed: dict[tuple[TxSequenceId, int], int] = {}
        for m in retained:
            self._append_many((m,))
            self._sent_high[m.tx_sequence_id] = max(
                self._sent_high.get(m.tx_sequence_id, 0), m.tx_sequence_number
            )
        for m in awaiting_final_ack:
            self._await_final_ack(m)
            self._sent_high[m.tx_sequence_id] = max(
                self._sent_high.get(m.tx_sequence_id, 0), m.tx_sequence_number
            )

    # ------------------------------------------------------------------ queries

    @property
    def current_sequence_id(self) -> TxSequenceId | None:
        """The TxSequenceID of the messages not yet OrderAck'ed (they share one), None
        when there are none. O(1), unlike :attr:`unacked`, which copies them."""
        return self._unacked[0].tx_sequence_id if self._unacked else None

    def holds_sequence(self, tx_sequence_id: TxSequenceId) -> bool:
        """Whether messages of ``tx_sequence_id`` are retained here (not yet OrderAck'ed,
        or awaiting their FinalAck): O(1), so a FinalAck asks only the sequences that may
        hold its message instead of every outgoing queue's."""
        unacked = self._unacked
        if unacked and unacked[0].tx_sequence_id == tx_sequence_id:
            return True
        return tx_sequence_id in self._awaiting_sids

    @property
    def unacked(self) -> tuple[RetainedMessage, ...]:
        """Messages not yet OrderAck'ed (TxOutgoingSequence.UnackedSequence), in order."""
        return tuple(self._unacked)

    @property
    def awaiting_final_ack(self) -> tuple[RetainedMessage, ...]:
        """Messages OrderAck'ed and waiting for a FinalAck."""
        return tuple(self._awaiting.values())

    @property
    def all_order_acked(self) -> bool:
        """True when no message waits for an OrderAck: the QM may start a new TxSequenceID."""
        return not self._unacked

    @property
    def resend_interval(self) -> float:
        """TxOutgoingSequence.ResendInterval = ResendTimerTable[ResendIntervalIndex]."""
        return self._table[self.resend_interval_index]

    def get_timer(self) -> float | None:
        """Deadline of the Transactional Ack Wait Timer (TxOutgoingSequence.ResendTime)."""
        return self._resend_deadline

    # ------------------------------------------------------------------ inputs

    def add(self, message: RetainedMessage, now: float) -> list[OutgoingEvent]:
        """A newly committed message joins the sequence; transmitted at once when connected.

        A message an earlier OrderAck already covers (see :meth:`note_assigned`) is
        released at once instead."""
        return self.add_many((message,), now)

    def add_many(self, messages: Iterable[RetainedMessage], now: float) -> list[OutgoingEvent]:
        """:meth:`add` for a batch (one :class:`Transmit` for all of them)."""
        batch = list(messages)
        self._append_many(batch)
        out: list[OutgoingEvent] = []
        if batch:
            sid = batch[0].tx_sequence_id
            acked = self._last_ack.get(sid, 0)
            if batch[0].tx_sequence_number <= acked:
                # The receiver acknowledged these before this process loaded them (an
                # OrderAck beyond the reloaded window after a restart): release, never send.
                out = self._release_through(sid, acked)
                batch = [m for m in batch if m.tx_sequence_id != sid or m.tx_sequence_number > acked]
        if not self.connected or not batch:
            return out
        # Numbers increase within a sequence (checked by _append): noting the last message
        # of each run of one TxSequenceID is the same as noting every message.
        prev = batch[0]
        for m in batch:
            if m.tx_sequence_id is not prev.tx_sequence_id:
                self._note_sent(prev)
            prev = m
        self._note_sent(prev)
        if self._resend_deadline is None:
            self._resend_deadline = now + self.resend_interval
        if self._removed:
            out.append(Transmit(tuple(self._effective(m) for m in batch), resend=False))
        else:
            out.append(Transmit(tuple(batch), resend=False))
        return out

    def note_assigned(self, tx_sequence_id: TxSequenceId, tx_sequence_number: int) -> None:
        """The QM reports that it assigned (and persisted) TxSequenceNumbers up to
        ``tx_sequence_number`` in ``tx_sequence_id`` (its next number minus one), loaded
        here or not. An OrderAck up to that number is then legitimate even beyond what this
        process has sent: after a restart only part of the outgoing queue is reloaded,
        while the receiver acknowledges its durable position (MS-MQQB 3.1.5.8.3 answers a
        duplicate with an OrderAck for IncomingTxSequenceNumber). Such an OrderAck releases
        the loaded messages it covers and, as they are added, the later ones it covers."""
        known = self._assigned_high.get(tx_sequence_id, 0)
        if known < tx_sequence_number <= _U32_MAX:
            self._assigned_high[tx_sequence_id] = tx_sequence_number

    def connection_made(self, now: float) -> list[OutgoingEvent]:
        """A session to the next hop is OPEN: send everything not OrderAck'ed, in order."""
        self.connected = True
        if not self._unacked:
            return []
        out = self._resend_batch()
        self._resend_deadline = now + self.resend_interval
        return [out]

    def connection_lost(self) -> None:
        """The session closed: stop the timer; retained messages wait for the reconnect."""
        self.connected = False
        self._resend_deadline = None

    def remove(
        self, tx_sequence_id: TxSequenceId, tx_sequence_number: int, now: float | None = None
    ) -> RetainedMessage:
        """The QM removed an un-acknowledged message (TimeToReachQueue expired, MS-MQQB
        3.1.7.1.2; its FinalAck came, 3.1.5.7); later resends bridge the gap with
        PreviousTxSequenceNumber (3.1.7.1.3).

        The messages after it that were already sent named it as their predecessor: the
        receiver refuses them until they are sent again, bridged. With ``now``, the
        Transactional Ack Wait Timer is brought forward to the first ResendTimerTable
        entry from now when it would fire later (an OrderAck may have moved the index to
        6 h, 3.1.5.6)."""
        i = self._index_of(tx_sequence_id, tx_sequence_number)
        if i < 0:
            raise LocalProtocolError(f"no retained message at {(tx_sequence_id, tx_sequence_number)!r}")
        m = self._unacked[i]
        del self._unacked[i]
        self._removed[m.position] = self._effective(m).previous_tx_sequence_number
        if not self._unacked:
            self._resend_deadline = None
            self.resend_interval_index = 0
        elif now is not None and self.connected and i < len(self._unacked):
            soon = now + self._table[0]
            if self._resend_deadline is None or self._resend_deadline > soon:
                self._resend_deadline = soon
        return m

    def order_ack_received(
        self, tx_sequence_id: TxSequenceId, tx_sequence_number: int, now: float
    ) -> list[OutgoingEvent]:
        """Process an OrderAck body (MS-MQQB 3.1.5.6)."""
        if not 1 <= tx_sequence_number <= _U32_MAX:
            return [OrderAckIgnored(tx_sequence_id, tx_sequence_number, IgnoreReason.INVALID_NUMBER)]
        high = self._sent_high.get(tx_sequence_id)
        assigned = self._assigned_high.get(tx_sequence_id)
        if high is None and assigned is None:
            return [OrderAckIgnored(tx_sequence_id, tx_sequence_number, IgnoreReason.UNKNOWN_SEQUENCE)]
        if tx_sequence_number > max(high or 0, assigned or 0):
            return [OrderAckIgnored(tx_sequence_id, tx_sequence_number, IgnoreReason.BEYOND_SENT)]
        # MS-MQQB 3.1.5.6 steps 1 and 5: TimeOfLastAck, LastAckCount.
        self.time_of_last_ack = now
        self.last_ack_count += 1
        if tx_sequence_number <= self._last_ack.get(tx_sequence_id, 0):
            return []  # a repeated OrderAck: nothing new
        self._last_ack[tx_sequence_id] = tx_sequence_number
        out = self._release_through(tx_sequence_id, tx_sequence_number)
        # ResendIntervalIndex counts the resends nothing answered: an OrderAck that makes
        # progress starts the back-off over. Step 2 ("MUST be incremented by 1" on each
        # OrderAck) is not followed: a backlog of OrderAcks would stretch the wait to 6 h
        # exactly when the peer answers, and a message lost behind an intermediate QM,
        # which only this timer resends, would wait that long (docs/conformance.md, resend back-off).
        self.resend_interval_index = 0
        self._resend_deadline = (now + self.resend_interval) if (self._unacked and self.connected) else None
        return out

    def _release_through(self, tx_sequence_id: TxSequenceId, tx_sequence_number: int) -> list[OutgoingEvent]:
        """Release (or move to the AwaitingFinalACKTable) every retained message of the
        sequence numbered up to ``tx_sequence_number``, which an OrderAck covered."""
        unacked = self._unacked
        if unacked and (
            unacked[0].tx_sequence_id is tx_sequence_id or unacked[0].tx_sequence_id == tx_sequence_id
        ):
            # Every retained message is of one sequence, numbers increasing (_append): the
            # released ones are a prefix, found by bisection and cut off in C when none of
            # them asked for a FinalAck (the usual case: an OrderAck at the end of a burst
            # releases up to max_in_flight messages at once).
            k = bisect_right(unacked, tx_sequence_number, key=_NUMBER)
            head = unacked[:k]
            if not any(map(_FINAL_ACK_REQUESTED, head)):
                del unacked[:k]
                self._forget_removed(tx_sequence_id, tx_sequence_number)
                if not unacked:
                    self._resend_deadline = None
                return [Released(tuple(head))] if head else []
        released: list[RetainedMessage] = []
        waiting: list[RetainedMessage] = []
        keep: list[RetainedMessage] = []
        same: TxSequenceId | None = None  # the retained messages share one object: compare once
        for m in self._unacked:
            sid = m.tx_sequence_id
            if sid is not same and sid == tx_sequence_id:
                same = sid
            if sid is same and m.tx_sequence_number <= tx_sequence_number:
                if not m.final_ack_requested:
                    released.append(m)
                else:
                    waiting.append(m)
            else:
                keep.append(m)
        self._unacked = keep
        self._forget_removed(tx_sequence_id, tx_sequence_number)
        for m in waiting:
            self._await_final_ack(m)
        if not self._unacked:
            self._resend_deadline = None

        out: list[OutgoingEvent] = []
        if released:
            out.append(Released(tuple(released)))
        if waiting:
            out.append(AwaitingFinalAck(tuple(waiting)))
        return out

    def _forget_removed(self, tx_sequence_id: TxSequenceId, tx_sequence_number: int) -> None:
        if self._removed:
            self._removed = {
                k: v
                for k, v in self._removed.items()
                if not (k[0] == tx_sequence_id and k[1] <= tx_sequence_number)
            }

    def final_ack_received(
        self,
        tx_sequence_id: TxSequenceId,
        tx_sequence_number: int,
        message_id: int,
        message_class: int,
        now: float,
    ) -> list[OutgoingEvent]:
        """Process a FinalAck body (MS-MQQB 3.1.5.7), matched on (TxSequenceID,
        TxSequenceNumber, MessageID). The QM journals or dead-letters the message according
        to ``final_ack_class`` and its JP/JN flags.

        A message awaiting its FinalAck is :class:`Released`. One not OrderAck'ed yet is
        :class:`Settled`: 3.1.5.7 moves "the message ... in the OutgoingMessageTable" as
        well, so it leaves the sequence here, its OrderAck never awaited (a message the
        receiver refused before its acceptance rule gets none), and later resends bridge
        it (3.1.7.1.3)."""
        pos = (tx_sequence_id, tx_sequence_number)
        m = self._awaiting.get(pos)
        if m is not None and m.message_id == message_id:
            del self._awaiting[pos]
            left = self._awaiting_sids[tx_sequence_id] - 1
            if left:
                self._awaiting_sids[tx_sequence_id] = left
            else:
                del self._awaiting_sids[tx_sequence_id]
            return [Released((m,), final_ack_class=message_class)]
        i = self._index_of(tx_sequence_id, tx_sequence_number)
        if i >= 0 and self._unacked[i].message_id == message_id:
            return [Settled(self.remove(tx_sequence_id, tx_sequence_number, now), message_class)]
        return [
            FinalAckIgnored(
                tx_sequence_id, tx_sequence_number, message_id, message_class, IgnoreReason.UNKNOWN_MESSAGE
            )
        ]

    def handle_timer(self, now: float) -> list[OutgoingEvent]:
        """Transactional Ack Wait Timer (MS-MQQB 3.1.6.5): resend all un-OrderAck'ed
        messages and move one step along the ResendTimerTable."""
        if self._resend_deadline is None or now < self._resend_deadline:
            return []
        if not self._unacked or not self.connected:
            self._resend_deadline = None
            return []
        # 3.1.6.5 says only "resend"; the ResendTimerTable is indexed by resends (its
        # entries are Windows' SeqResend13Time / 46Time / 79Time / 10Time, the 1st-3rd,
        # 4th-6th ... resend; 3.1.5.6 reports the index as EodResendCount): one step per
        # expiry, and the timer restarts with it.
        self.resend_interval_index = min(self.resend_interval_index + 1, len(self._table) - 1)
        self._resend_deadline = now + self.resend_interval
        return [self._resend_batch()]

    # ------------------------------------------------------------------ internals

    def _await_final_ack(self, m: RetainedMessage) -> None:
        self._awaiting[m.position] = m
        sid = m.tx_sequence_id
        self._awaiting_sids[sid] = self._awaiting_sids.get(sid, 0) + 1

    def _index_of(self, tx_sequence_id: TxSequenceId, tx_sequence_number: int) -> int:
        """Index in the retained messages of the one at this position, -1 if none.

        The retained messages are of one TxSequenceID in increasing TxSequenceNumber
        order (:meth:`_append` refuses anything else), so a bisection finds it: a
        FinalAck or a removal costs O(log n), not a scan of up to ``max_in_flight``
        retained messages each (a burst of FinalAcks for rejected messages was
        quadratic)."""
        unacked = self._unacked
        if not unacked:
            return -1
        sid = unacked[0].tx_sequence_id
        if sid is not tx_sequence_id and sid != tx_sequence_id:
            return -1
        i = bisect_left(unacked, tx_sequence_number, key=_NUMBER)
        if i < len(unacked) and unacked[i].tx_sequence_number == tx_sequence_number:
            return i
        return -1

    def _append_many(self, batch: Sequence[RetainedMessage]) -> None:
        # Each message is checked against the one before it (the last of _unacked, then
        # the previous one of the batch) and joins _unacked in one extend at the end; a
        # bad one raises with the messages checked before it appended, as one call per
        # message left them.
        unacked = self._unacked
        last = unacked[-1] if unacked else None
        # The previous message's TxSequenceId object: a batch's messages share one, and
        # the previous message of the same object either found the sequence known or
        # forgot the old ones for it (a second _forget_old_sequences would change nothing).
        last_sid: TxSequenceId | None = None
        done = 0
        try:
            for m in batch:
                sid = m.tx_sequence_id
                number = m.tx_sequence_number
                prev = m.previous_tx_sequence_number
                if not (1 <= number <= _U32_MAX and 0 <= prev < number):
                    raise LocalProtocolError(f"bad transactional numbering {m!r}")
                if last is not None:
                    if sid is not last.tx_sequence_id and sid != last.tx_sequence_id:
                        raise LocalProtocolError(
                            "a new TxSequenceID may start only when every message is OrderAck'ed"
                            " (MS-MQQB 3.1.1.5)"
                        )
                    if number <= last.tx_sequence_number:
                        raise LocalProtocolError("TxSequenceNumber must increase within a sequence")
                else:
                    known = max(self._sent_high.keys(), default=None)
                    if known is not None and sid < known:
                        raise LocalProtocolError(
                            "messages are never sent on an older sequence (MS-MQQB 3.1.1.5)"
                        )
                    if number <= self._sent_high.get(sid, 0):
                        raise LocalProtocolError("TxSequenceNumber must increase within a sequence")
                if sid is not last_sid and sid not in self._sent_high:
                    self._forget_old_sequences(sid)
                if prev:
                    # MS-MQQB 3.1.7.1.3: PreviousTxSequenceNumber names the previous message
                    # still in the table. The committed value names the message committed
                    # before; when that one is neither waiting here nor known acknowledged,
                    # it left the outgoing queue unsent (expired before it was loaded, maybe
                    # before a restart): bridge to the message before m that is still here,
                    # else to the last acknowledged number (0 when unknown, e.g. after a
                    # restart: then nothing of this sequence before m is waiting, and 0 is at
                    # most what the receiver has).
                    floor = last.tx_sequence_number if last is not None else self._last_ack.get(sid, 0)
                    if prev > floor and (sid, prev) not in self._removed:
                        self._removed[(sid, prev)] = floor
                last = m
                last_sid = sid
                done += 1
        finally:
            unacked.extend(batch if done == len(batch) else batch[:done])

    def _forget_old_sequences(self, new: TxSequenceId) -> None:
        # A new sequence starts: keep the bookkeeping of the newest previous sequence
        # (repeated OrderAcks for it are still recognised) and of any sequence with
        # messages awaiting a FinalAck; forget the rest so it does not grow forever.
        keep = {sid for sid, _ in self._awaiting}
        older = sorted(sid for sid in self._sent_high if sid < new)
        if older:
            keep.add(older[-1])
        for sid in list(self._sent_high):
            if sid not in keep:
                del self._sent_high[sid]
                self._last_ack.pop(sid, None)
        for sid in [s for s in self._assigned_high if s < new and s not in keep]:
            del self._assigned_high[sid]

    def _note_sent(self, m: RetainedMessage) -> None:
        if m.tx_sequence_number > self._sent_high.get(m.tx_sequence_id, 0):
            self._sent_high[m.tx_sequence_id] = m.tx_sequence_number

    def effective(self, m: RetainedMessage) -> RetainedMessage:
        """``m`` with its PreviousTxSequenceNumber bridged over the messages removed
        unacknowledged before it (MS-MQQB 3.1.7.1.3), for a message of a :class:`Transmit`
        sent after one of its predecessors in the same batch was removed."""
        return self._effective(m) if self._removed else m

    def _effective(self, m: RetainedMessage) -> RetainedMessage:
        # MS-MQQB 3.1.7.1.3: PreviousTxSequenceNumber names the previous transactional
        # message still in the table, which bridges messages removed unacknowledged
        # (expired): follow the chain of removed predecessors.
        prev = m.previous_tx_sequence_number
        while (m.tx_sequence_id, prev) in self._removed:
            prev = self._removed[(m.tx_sequence_id, prev)]
        return m if prev == m.previous_tx_sequence_number else replace(m, previous_tx_sequence_number=prev)

    def _resend_batch(self) -> Transmit:
        for m in self._unacked:
            self._note_sent(m)
        return Transmit(tuple(self._effective(m) for m in self._unacked), resend=True)
