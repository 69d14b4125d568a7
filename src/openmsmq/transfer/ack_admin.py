"""Acknowledgments when a message leaves its destination queue (MS-MQQB 3.1.7.2).

:func:`attach_acknowledgments` registers an :class:`AcknowledgmentListener` with
:meth:`QueueManager.add_removal_listener`. For every removed message it applies

* 3.1.7.2.1 Administration Acknowledgment: AcknowledgementsRequested asks for a positive
  receive ack (PR) and the reason is AckReceive, or a negative receive ack (NR) and the
  reason is not AckReceive ⇒ Send Administration Acknowledgment (3.1.7.15,
  :func:`build_administration_acknowledgment`) to the message's admin queue;
* 3.1.7.2.2 Final Acknowledgment: PositiveJournalingRequested, NegativeJournalingRequested
  or FinalAckRequired ⇒ Send Transactional Acknowledgment (3.1.7.17) with iUserMessage —
  only when a ``session_of`` resolver tells which session the message came in on (the
  stored message does not record it; see docs/conformance.md, "Seed 000").

The acknowledgments of a receive, a purge, a queue deletion or an expiry are written in
that operation's own transaction through the commit hook (:meth:`AcknowledgmentListener.sends_for`);
events that reach the listener itself (no hook ran, or the removal removed other messages
than the hook's rows were built for) are enqueued with one commit per destination queue.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from openmsmq.store.ops import RemovedMessage, Send
from openmsmq.store.records import INFINITE, MessageRecord, QueueType
from openmsmq.transfer.acknowledgments import (
    CLASS_NAMES,
    AckSession,
    acknowledgment_sends,
    build_transactional_acknowledgment,
    enqueue_acknowledgments,
)
from openmsmq.wire.constants import AckRequest, MessageClass
from openmsmq.wire.ids import ObjectId

if TYPE_CHECKING:
    from openmsmq.qm.manager import QueueManager

__all__ = [
    "INSECURE_NACK_CLASSES",
    "REMOVAL_REASON_CLASSES",
    "AcknowledgmentListener",
    "attach_acknowledgments",
    "build_administration_acknowledgment",
]

log = logging.getLogger(__name__)

#: MS-MQQB 3.1.7.2.1 table: removal reason (Message.Class name) → iMessageClass.
REMOVAL_REASON_CLASSES: Mapping[int, MessageClass] = {
    MessageClass.ACK_RECEIVE: MessageClass.ACK_RECEIVE,
    MessageClass.NACK_Q_DELETED: MessageClass.NACK_Q_DELETED,
    MessageClass.NACK_Q_PURGED: MessageClass.NACK_Q_PURGED,
    MessageClass.NACK_RECEIVE_TIMEOUT: MessageClass.NACK_RECEIVE_TIMEOUT,
    MessageClass.NACK_RECEIVE_REJECTED: MessageClass.NACK_RECEIVE_REJECTED,
}

#: NACK classes sent only when SendInsecureNacks is TRUE (MS-MQQB 3.1.7.15, 5.1).
INSECURE_NACK_CLASSES = frozenset(
    {
        MessageClass.NACK_BAD_DST_Q,
        MessageClass.NACK_BAD_ENCRYPTION,
        MessageClass.NACK_BAD_SIGNATURE,
        MessageClass.NACK_ACCESS_DENIED,
        MessageClass.NACK_UNSUPPORTED_CRYPTO_PROVIDER,
    }
)

#: Classes whose admin acknowledgment carries no body (3.1.7.15 names
#: MQMSG_CLASS_ACK_REACH_QUEUE, MQMSG_CLASS_ACK_RECEIVED and
#: MQMSG_CLASS_NACK_MESSAGE_TOO_LARGE; the last two are not defined in MS-MQMQ, and
#: ACK_RECEIVED is read as MQMSG_CLASS_ACK_RECEIVE — protocol.md §9).
_NO_BODY_CLASSES = frozenset({MessageClass.ACK_REACH_QUEUE, MessageClass.ACK_RECEIVE})
#: Removals from an outgoing queue that the sending QM NACKs (negative arrival acks).
_NOT_REACHED = frozenset({MessageClass.NACK_REACH_QUEUE_TIMEOUT, MessageClass.NACK_DELETED})


def build_administration_acknowledgment(
    i_message_class: int, received: MessageRecord, *, send_insecure_nacks: bool = False
) -> tuple[MessageRecord, str] | None:
    """adminAcknowledgment and DestinationForAck for a stored message (MS-MQQB 3.1.7.15
    with iReceivedMessage), or None when no acknowledgment is to be sent (no admin queue;
    an insecure NACK class while SendInsecureNacks is FALSE).

    Class from the 3.1.7.15 table (the wire value of its Class name); CorrelationIdentifier
    = the message's Identifier (OBJECTID); ResponseQueueFormatName = its destination
    queue; DeliveryGuarantee copied; AcknowledgementsRequested None; TimeToReachQueue and
    TimeToBeReceived 0xFFFFFFFF; no journaling; the original body except for
    reach-queue / receive acks.
    """
    if not received.admin_queue:
        return None
    if i_message_class in INSECURE_NACK_CLASSES and not send_insecure_nacks:
        return None
    if i_message_class == MessageClass.ORDER_ACK or i_message_class not in CLASS_NAMES:
        raise ValueError(f"iMessageClass {i_message_class:#06x} is not an administration acknowledgment")
    # PrivacyLevel is None for every stored message (no encrypted bodies are kept).
    body = b"" if i_message_class in _NO_BODY_CLASSES else received.body
    ack = MessageRecord(
        body=body,
        message_class=i_message_class,
        correlation_id=ObjectId(received.id_lineage, received.id_uniquifier).encode(),
        response_queue=received.destination_queue,
        delivery=received.delivery,
        ack_flags=AckRequest.NONE,
        time_to_reach_queue=INFINITE,
        time_to_be_received=INFINITE,
        positive_journaling=False,
        negative_journaling=False,
    )
    return ack, received.admin_queue


def _admin_ack_wanted(ack_flags: int, reason: int) -> bool:
    """3.1.7.2.1: PR (AckPosReceive / AckFullReceive) and reason AckReceive, or NR
    (AckNegReceive / AckNackReceive / AckFullReceive) and any other reason."""
    if reason == MessageClass.ACK_RECEIVE:
        return bool(ack_flags & AckRequest.POS_RECEIVE)
    return bool(ack_flags & AckRequest.NEG_RECEIVE)


class AcknowledgmentListener:
    """Removal listener sending the MS-MQQB 3.1.7.2 acknowledgments of a queue manager.

    ``session_of(message)`` returns the :class:`AckSession` the message arrived on (None
    when unknown): FinalAcks are sent only through it. ``send_insecure_nacks`` is the
    SendInsecureNacks ADM element (default FALSE, MS-MQQB 3.1.1.3).
    """

    def __init__(
        self,
        qm: QueueManager,
        *,
        session_of: Callable[[MessageRecord], AckSession | None] | None = None,
        send_insecure_nacks: bool = False,
    ) -> None:
        self.qm = qm
        self.session_of = session_of
        self.send_insecure_nacks = send_insecure_nacks
        #: Acknowledgments enqueued / discarded so far (for metrics and tests).
        self.sent = 0
        self.discarded = 0

    def __call__(self, events: list[RemovedMessage]) -> None:
        by_destination: dict[str, list[MessageRecord]] = {}
        for ev in events:
            for ack, destination in self.acknowledgments_for(ev):
                by_destination.setdefault(destination, []).append(ack)
        for destination, acks in by_destination.items():
            if enqueue_acknowledgments(self.qm, destination, acks):
                self.sent += len(acks)
            else:
                self.discarded += len(acks)

    def sends_for(self, events: list[RemovedMessage]) -> list[Send]:
        """The acknowledgments of ``events`` as store rows for the commit that removes the
        messages (:meth:`QueueManager.add_commit_hook`): one transaction for both."""
        acks = [pair for ev in events for pair in self.acknowledgments_for(ev)]
        if not acks:
            return []
        sends, discarded = acknowledgment_sends(self.qm, acks)
        self.sent += len(sends)
        self.discarded += discarded
        return sends

    def acknowledgments_for(self, ev: RemovedMessage) -> Sequence[tuple[MessageRecord, str]]:
        """The (Message, DestinationForAck) pairs one removal raises (3.1.7.2.1, 3.1.7.2.2)."""
        if ev.reason in _NOT_REACHED and self._from_outgoing_queue(ev.queue_id):
            # TimeToReachQueue passed while the message waited in an outgoing queue, or the
            # queue was purged: the sending QM NACKs it (MS-MQQB 3.1.5.8.5 / MS-MQDMPR
            # 3.1.7.2.1, class NA; NACK_DELETED is MS-MQMQ 2.2.18.1.6's "deleted by an
            # administrative action before reaching the queue").
            if ev.message.ack_flags & AckRequest.NEG_ARRIVAL:
                built = build_administration_acknowledgment(ev.reason, ev.message)
                return [built] if built is not None else []
            return ()
        i_class = REMOVAL_REASON_CLASSES.get(ev.reason)
        if i_class is None or self._from_outgoing_queue(ev.queue_id):
            # Not a removal from a final destination queue (3.1.7.2): outgoing-queue
            # expiry (NackReachQueueTimeout) and the like are handled by the sender side.
            return ()
        m = ev.message
        out: list[tuple[MessageRecord, str]] = []
        if _admin_ack_wanted(m.ack_flags, ev.reason):
            built = build_administration_acknowledgment(
                i_class, m, send_insecure_nacks=self.send_insecure_nacks
            )
            if built is not None:
                out.append(built)
        if (m.positive_journaling or m.negative_journaling or m.final_ack_required) and m.transactional:
            session = self.session_of(m) if self.session_of is not None else None
            if session is None:
                log.debug("no session known for message %s: FinalAck not sent", m.id_uniquifier)
            else:
                out.append(build_transactional_acknowledgment(i_class, session, user_message=m))
        return out

    def _from_outgoing_queue(self, queue_id: int) -> bool:
        # The QM keeps its queue states by id; a deleted queue is gone from it already,
        # so its type is unknown here (RemovedMessage does not carry it).
        state = self.qm.queues.get(queue_id)
        return state is not None and state.record.queue_type == QueueType.OUTGOING


def attach_acknowledgments(
    qm: QueueManager,
    *,
    session_of: Callable[[MessageRecord], AckSession | None] | None = None,
    send_insecure_nacks: bool = False,
) -> AcknowledgmentListener:
    """Register an :class:`AcknowledgmentListener` on ``qm`` and return it."""
    listener = AcknowledgmentListener(qm, session_of=session_of, send_insecure_nacks=send_insecure_nacks)
    qm.add_removal_listener(listener)
    # Receives: the acknowledgment is written in the receive's own commit.
    qm.add_commit_hook(listener, listener.sends_for)
    return listener
