"""Arrival of a message at its destination queue manager (MS-MQQB 3.1.5.8) and the
acknowledgments it raises.

:func:`refusal_class` applies the rules of receipt that come before Transactional
Message Processing (MS-MQQB 3.1.5.8, in its order) and :func:`arrival_class` those and
the queue's quota at insertion: the message is inserted, or rejected with a NACK class —

* the destination queue does not exist here ⇒ MQMSG_CLASS_NACK_BAD_DST_Q (3.1.5.8.2);
* a transactional message for a non-transactional queue ⇒ NACK_NOT_TRANSACTIONAL_Q,
  a non-transactional message for a transactional queue ⇒ NACK_NOT_TRANSACTIONAL_MSG
  (3.1.5.8.2);
* the sending QM has no write access to the queue (it is not in the queue's
  ``allowed_senders``) ⇒ NACK_ACCESS_DENIED (3.1.5.8.3);
* TimeToReachQueue passed before arrival ⇒ NACK_REACH_QUEUE_TIMEOUT (Message
  Expiration, 3.1.7.1.2: the administration NACK only, no FinalAck);
* Enqueue would exceed the queue's quota ⇒ NACK_Q_EXCEED_QUOTA (3.1.5.8.8; MS-MQDMPR
  3.1.7.1.9 rStatus 1).

A transactional message is checked on receipt, before the acceptance rule
(:class:`ReceiptCheck`, run by the session): one refused there never enters its incoming
sequence, and :func:`refuse` enqueues its NACKs. A non-transactional one refused with
negative source journaling also goes to this QM's dead-letter queue
(:func:`dead_letter_copies`).

:func:`store_arrivals` stores one accepted run of a transactional sequence: the messages
that pass, the new incoming sequence state, and every acknowledgment they raise — the
administration acknowledgment (3.1.7.15 with iReceivedUserMessagePacket: ACK_REACH_QUEUE
when PA is set, the NACK when NA is set) and, for a rejected transactional message, the
negative FinalAck to the sender's order queue (3.1.7.17) — in ONE store transaction, so
a crash can lose neither the sequence advance nor the acknowledgment.

A transactional message rejected here was accepted into its sequence before (the queue's
quota, or a queue deleted or changed between receipt and storing): it still advances the
incoming sequence, received in order (MS-MQQB 2.2.4 "received (accepted or rejected)"):
the OrderAck covers it and the FinalAck tells the sender it never reached the queue.

Write access is decided by the message's SourceQueueManager GUID (UserHeader), the one
sender identity every MS-MQQB message carries; SIDs in a SecurityHeader are not
evaluated (docs/acknowledgments.md).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from openmsmq.errors import MQError, StorageError
from openmsmq.observability.repeats import RepeatedEvents
from openmsmq.protocol.events import destination_key
from openmsmq.store.records import (
    INFINITE,
    IncomingSequenceState,
    MessageRecord,
    QueueRecord,
    QueueType,
    sender_allowed,
)
from openmsmq.transfer.ack_admin import build_administration_acknowledgment
from openmsmq.transfer.acknowledgments import (
    AckSession,
    acknowledgment_sends,
    build_transactional_acknowledgment,
)
from openmsmq.transfer.codec import arrival_rows, message_from_packet, split_direct
from openmsmq.transfer.state import WallClock
from openmsmq.wire.constants import AckRequest, MessageClass, QueueFormatType, describe_message_class
from openmsmq.wire.packets import UserMessage
from openmsmq.wire.userheader import DirectQueueFormatName, PrivateQueueFormatNameId

if TYPE_CHECKING:
    from openmsmq.qm.handles import QueueHandle, QueueState
    from openmsmq.qm.manager import QueueManager
    from openmsmq.qm.sequences import SequenceStore

__all__ = [
    "ARRIVAL_NACK_CLASSES",
    "ArrivalResult",
    "arrival_acknowledgments",
    "arrival_class",
    "session_of_state",
    "store_arrivals",
]

log = logging.getLogger("openmsmq.arrival")
#: Rejections come by the backlog (a deleted queue rejects every message still on its
#: way): the first of a queue and class is logged, the rest summed up every 10 s.
_rejections = RepeatedEvents(log)

#: NACK classes raised on arrival here (MS-MQMQ 2.2.18.1.6).
ARRIVAL_NACK_CLASSES = frozenset(
    {
        MessageClass.NACK_BAD_DST_Q,
        MessageClass.NACK_ACCESS_DENIED,
        MessageClass.NACK_NOT_TRANSACTIONAL_Q,
        MessageClass.NACK_NOT_TRANSACTIONAL_MSG,
        MessageClass.NACK_REACH_QUEUE_TIMEOUT,
        MessageClass.NACK_Q_EXCEED_QUOTA,
        MessageClass.NACK_HOP_COUNT_EXCEEDED,
    }
)


def refusal_class(
    queue: QueueRecord | None,
    source_qm: uuid.UUID,
    transactional: bool,
    sent_time: int,
    time_to_reach_queue: int,
    now: int,
) -> int | None:
    """The rules of receipt that MS-MQQB 3.1.5.8 applies before Transactional Message
    Processing (3.1.5.8.6), in its order: General Processing (3.1.5.8.2: the destination
    queue exists, a transactional message only into a transactional queue and the other
    way round), Security (3.1.5.8.3: the sender may write to the queue) and Message
    Expiration (3.1.7.1.2: TimeToReachQueue). None when the message passes them, else the
    NACK class that refuses it (``queue``: the destination's record, None when it does not
    exist)."""
    if queue is None or queue.queue_type != QueueType.PRIVATE:
        return MessageClass.NACK_BAD_DST_Q
    if transactional and not queue.transactional:
        return MessageClass.NACK_NOT_TRANSACTIONAL_Q
    if not transactional and queue.transactional:
        return MessageClass.NACK_NOT_TRANSACTIONAL_MSG
    if queue.allowed_senders and not sender_allowed(queue, source_qm):
        return MessageClass.NACK_ACCESS_DENIED
    if time_to_reach_queue != INFINITE and now > sent_time + time_to_reach_queue:
        return MessageClass.NACK_REACH_QUEUE_TIMEOUT
    return None


class ReceiptCheck:
    """:func:`refusal_class` for transactional packets addressed to this QM, as the
    sessions run it before the acceptance rule (MS-MQQB 3.1.5.8). The destination's
    queue is looked up once per DestinationQueue object (the decoder shares them) and
    again once it is deleted; the record read is the queue's current one.

    Runs once per received message: the DestinationQueue of the previous message is
    compared by identity first (a run of one sequence shares one object), and the
    queue's in-memory state is read directly (no dataclass hash, no handle properties)."""

    def __init__(self, qm: QueueManager, wall: WallClock) -> None:
        self._qm = qm
        self._wall = wall
        self._queues: dict[object, QueueState] = {}
        #: (DestinationQueue object, its queue's state) of the last message: one reference,
        #: so threads never see an object paired with another object's state.
        self._last: tuple[object, QueueState | None] = (None, None)
        #: (queue record, SourceQueueManager object) that last passed every rule: a record
        #: is replaced whenever its queue changes, and the decoder shares GUID objects.
        self._passed: tuple[object, object] = (None, None)

    def refusal_class(self, message: UserMessage, now: float) -> int | None:
        """None, or the NACK class that refuses ``message`` on receipt at ``now`` (the
        driver's clock; compared with the message's times on the QM's clock, seconds
        since 1970, through ``wall``)."""
        user = message.user
        dest = user.destination_queue
        last_dest, state = self._last
        if dest is not last_dest or state is None or state.deleted:
            state = self._queues.get(dest)
            if state is None or state.deleted:
                handle = self._find(dest, user.queue_manager_address)
                state = None if handle is None else handle.state
                if state is not None and len(self._queues) < 4096:
                    self._queues[dest] = state
            if state is not None:
                self._last = (dest, state)
        record = None if state is None else state.record
        source = user.source_queue_manager
        ttrq = message.time_to_reach_queue
        sent = user.sent_time
        wall = int(now + self._wall.offset)
        passed = self._passed
        if (
            record is passed[0]
            and source is passed[1]
            and record is not None
            and (ttrq == INFINITE or wall <= sent + ttrq)
        ):
            # The same queue record and sender passed the queue's rules before, and the
            # message is within its TimeToReachQueue: the verdict refusal_class gives.
            return None
        cls = refusal_class(record, source, True, sent, ttrq, wall)
        if cls is None:
            self._passed = (record, source)
        return cls

    def _find(self, dest: object, qm_address: uuid.UUID) -> QueueHandle | None:
        """The local queue a DestinationQueue of a message for this QM names, or None:
        a direct name by its path, a private one (kind 0x3) by its number here."""
        if isinstance(dest, DirectQueueFormatName):
            parts = split_direct(dest.name)
            return self._qm.find_queue(parts[1]) if parts else None
        if isinstance(dest, PrivateQueueFormatNameId) and dest.kind == QueueFormatType.PRIVATE_ON_DESTINATION:
            return self._qm.find_queue(destination_key(dest, qm_address))
        return None


def arrival_class(
    queue: QueueRecord | None, m: MessageRecord, now: int, used_bytes: int, *, expiry: bool = True
) -> int | None:
    """None when ``m`` may be inserted into ``queue`` (its record, None when it does not
    exist; ``used_bytes`` = what the queue holds, counting messages accepted before in the
    same batch), else the NACK class that rejects it: :func:`refusal_class`, then the
    queue's quota at insertion (3.1.5.8.8, Enqueue Message rStatus 1). ``expiry`` False:
    TimeToReachQueue is not looked at (a transactional message was checked on receipt,
    before it was accepted into its sequence)."""
    cls = refusal_class(
        queue, m.source_machine, m.transactional, m.sent_time,
        m.time_to_reach_queue if expiry else INFINITE, now,
    )  # fmt: skip
    if cls is not None:
        return cls
    assert queue is not None
    if queue.quota_kb != INFINITE and used_bytes + m.size > queue.quota_kb * 1024:
        return MessageClass.NACK_Q_EXCEED_QUOTA
    return None


def session_of_state(state: IncomingSequenceState) -> AckSession:
    """The :class:`AckSession` a FinalAck for a message of this incoming sequence uses:
    RemoteQMAddress / DirectFormatSession as recorded at arrival, RemoteQMGuid = the
    sender QM."""
    return AckSession(
        direct_format_session=state.direct_format_session and bool(state.sender_address),
        remote_qm_address=state.sender_address,
        remote_qm_guid=state.sender_qm,
    )


def arrival_acknowledgments(
    i_class: int | None,
    m: MessageRecord,
    session: AckSession | None,
    *,
    send_insecure_nacks: bool = False,
) -> list[tuple[MessageRecord, str]]:
    """The (acknowledgment, destination) pairs the arrival of ``m`` raises: ``i_class``
    None = inserted (ACK_REACH_QUEUE when PA is set), else rejected with that class (the
    NACK to the admin queue when NA is set; a FinalAck for a transactional message when
    the sender's session is known)."""
    out: list[tuple[MessageRecord, str]] = []
    if i_class is None:
        if m.ack_flags & AckRequest.POS_ARRIVAL:
            built = build_administration_acknowledgment(MessageClass.ACK_REACH_QUEUE, m)
            if built is not None:
                out.append(built)
        return out
    if m.ack_flags & AckRequest.NEG_ARRIVAL:
        built = build_administration_acknowledgment(i_class, m, send_insecure_nacks=send_insecure_nacks)
        if built is not None:
            out.append(built)
    # 3.1.7.1.2 (Message Expiration) raises the administration NACK alone: no FinalAck of
    # class NACK_REACH_QUEUE_TIMEOUT, which 2.2.5 does not list for FinalAcks.
    if (
        m.transactional
        and m.tx_sequence_number
        and session is not None
        and i_class != MessageClass.NACK_REACH_QUEUE_TIMEOUT
    ):
        out.append(build_transactional_acknowledgment(i_class, session, user_message=m))
    return out


@dataclass(frozen=True, slots=True)
class ArrivalResult:
    """What :func:`store_arrivals` did: LookupIdentifiers of the inserted messages,
    (message, NACK class) of the rejected ones, acknowledgments enqueued / discarded."""

    stored: tuple[int, ...]
    rejected: tuple[tuple[MessageRecord, int], ...]
    acks_sent: int
    acks_discarded: int


def store_arrivals(
    qm: QueueManager,
    sequences: SequenceStore,
    queue: str,
    messages: Sequence[MessageRecord],
    state: IncomingSequenceState | None,
    *,
    send_insecure_nacks: bool = False,
) -> ArrivalResult:
    """Insert the messages of one run into ``queue`` (a local path) after the arrival
    rules, with the incoming sequence ``state`` (None for non-transactional messages)
    and the acknowledgments raised, in one durable store transaction. Raises
    :class:`MQError` only when that transaction fails (nothing is then stored)."""
    rec: QueueRecord | None
    try:
        rec = qm.get_queue(queue)
    except StorageError:
        # The store could not be read (a database restarting): nothing is decided about
        # these messages, the caller stores nothing and the sender sends them again. Taken
        # for "no such queue" it made every message of the run a NACK_BAD_DST_Q.
        raise
    except MQError:
        rec = None
    now = qm.now()
    used = rec.total_bytes if rec is not None else 0
    session = session_of_state(state) if state is not None else None
    accepted: list[MessageRecord] = []
    rejected: list[tuple[MessageRecord, int]] = []
    acks: list[tuple[MessageRecord, str]] = []
    # The common case, checked once per run: a private queue with no sender allowlist and
    # no quota. A message of the queue's kind (transactional or not), within its
    # TimeToReachQueue and asking for no acknowledgment is then inserted and raises
    # nothing (arrival_class None, arrival_acknowledgments empty) without those calls;
    # every other message takes the full rules below.
    plain = (
        rec is not None
        and rec.queue_type == QueueType.PRIVATE
        and not rec.allowed_senders
        and rec.quota_kb == INFINITE
    )
    tx_queue = rec.transactional if rec is not None else False
    # An accepted transactional run passed Message Expiration on receipt, before the
    # acceptance rule (MS-MQQB 3.1.5.8): its TimeToReachQueue is not looked at again.
    expiry = state is None
    for m in messages:
        if plain and not m.ack_flags and m.transactional == tx_queue:
            ttrq = m.time_to_reach_queue
            if not expiry or ttrq == INFINITE or now <= m.sent_time + ttrq:
                accepted.append(m)
                continue
        cls = arrival_class(rec, m, now, used, expiry=expiry)
        if cls is None:
            accepted.append(m)
            used += m.size
        else:
            rejected.append((m, cls))
            _rejections.log(
                (qm.guid, queue, cls), logging.INFO, "message %s:%d for %s rejected on arrival: %s",
                m.id_lineage, m.id_uniquifier, queue, describe_message_class(cls),
            )  # fmt: skip
        acks += arrival_acknowledgments(cls, m, session, send_insecure_nacks=send_insecure_nacks)
    ack_sends, discarded = acknowledgment_sends(qm, acks)
    dead = dead_letter_copies(rejected) if rejected else []
    stored = sequences.accept_arrivals(
        queue if accepted else None, accepted, state, ack_sends, dead_letters=dead
    )
    if rejected:  # counted once the rejection (the sequence state, the NACKs) is durable
        qm.metrics.count_arrival_rejected(cls for _, cls in rejected)
    return ArrivalResult(tuple(stored), tuple(rejected), len(ack_sends), discarded)


def plain_packet_rows(
    qm: QueueManager, queue: str, packets: Sequence[UserMessage], destination: str
) -> list[list[Any]] | None:
    """The store rows of the accepted transactional packets of one run (their
    DestinationQueue format name ``destination``) when they need none of the arrival
    rules' outcomes, else None (then :func:`store_arrivals` applies them).

    That is the common case of :func:`store_arrivals`: a private transactional queue with
    no sender allowlist and no quota, and every packet a message that raises nothing (no
    acknowledgment asked, no TimeToBeReceived, so its row never expires here; its
    TimeToReachQueue was checked on receipt). The rows are built straight from the packets
    (:func:`~openmsmq.transfer.codec.arrival_rows`).

    The queue's properties are those the QM holds (``QueueManager.queue_properties``): no
    read of its row per batch. The store operation checks the row again inside its
    transaction (``store.ops.accept_incoming_rows``) and a failed one has the row read
    again, so a change made by another process on the data directory is not missed."""
    try:
        rec: QueueRecord | None = qm.queue_properties(queue)
    except StorageError:
        raise  # nothing decided (see store_arrivals)
    except MQError:
        rec = None
    if (
        rec is None
        or rec.queue_type != QueueType.PRIVATE
        or not rec.transactional
        or rec.allowed_senders
        or rec.quota_kb != INFINITE
    ):
        return None
    for p in packets:
        # The conditions of store_arrivals' plain branch on the packet's fields
        # (message_from_packet maps them 1:1), and accept_arrivals' "never expires".
        if p.transaction is None or p.properties.ack_flags or p.user.time_to_be_received != INFINITE:
            return None
    return arrival_rows(packets, destination)


def store_packet_messages(
    qm: QueueManager,
    sequences: SequenceStore,
    queue: str,
    packets: Sequence[UserMessage],
    destination: str,
    state: IncomingSequenceState,
    *,
    send_insecure_nacks: bool = False,
) -> ArrivalResult:
    """:func:`store_arrivals` of the packets as messages: the full arrival rules, for a
    run :func:`plain_packet_rows` gave no rows for."""
    messages = [message_from_packet(p, destination) for p in packets]
    return store_arrivals(qm, sequences, queue, messages, state, send_insecure_nacks=send_insecure_nacks)


def refuse(
    qm: QueueManager,
    sequences: SequenceStore,
    m: MessageRecord,
    i_class: int,
    session: AckSession | None,
    *,
    send_insecure_nacks: bool = False,
) -> int:
    """A message this QM disregards on receipt with the NACK class ``i_class`` (MS-MQQB
    3.1.5.8.2 / 3.1.5.8.3 / 3.1.7.1.2, before Transactional Message Processing; a hop
    count exceeded as an intermediate): enqueue its acknowledgments
    (:func:`arrival_acknowledgments`) and, for a non-transactional message sent with
    negative source journaling, its copy in this QM's dead-letter queue
    (:func:`dead_letter_copies`), in one store transaction. Returns how many
    acknowledgments were enqueued."""
    _rejections.log(
        (qm.guid, m.destination_queue, i_class), logging.INFO,
        "message %s:%d for %s refused on receipt: %s",
        m.id_lineage, m.id_uniquifier, m.destination_queue, describe_message_class(i_class),
    )  # fmt: skip
    acks = arrival_acknowledgments(i_class, m, session, send_insecure_nacks=send_insecure_nacks)
    dead = dead_letter_copies([(m, i_class)])
    sends, _ = acknowledgment_sends(qm, acks)
    if sends or dead:
        sequences.accept_arrivals(None, [], None, sends, dead_letters=dead)
    qm.metrics.count_arrival_rejected([i_class])
    return len(sends)


def dead_letter_copies(rejected: Sequence[tuple[MessageRecord, int]]) -> list[MessageRecord]:
    """The copies of rejected non-transactional messages sent with negative source
    journaling (UserHeader.Flags.JN) that go to this QM's dead-letter queue, their Class
    set to the NACK class. MS-MQQB 3.1.5.8.8 says so for the queue quota ("the message
    MUST be inserted into the SystemDeadletterQueue ... of the local QueueManager"); MSMQ
    does the same whatever the reason: a non-transactional message that cannot be
    delivered goes to the dead-letter queue of the computer that could not deliver it
    (PROPID_M_JOURNAL, MQMSG_DEADLETTER). A transactional one is dead-lettered at its
    source, by its FinalAck (3.1.5.7) or its expiry there (3.1.7.1.2)."""
    return [
        replace(m, message_class=cls) for m, cls in rejected if m.negative_journaling and not m.transactional
    ]


__all__ += [
    "ReceiptCheck",
    "dead_letter_copies",
    "plain_packet_rows",
    "refusal_class",
    "refuse",
    "store_packet_messages",
]
