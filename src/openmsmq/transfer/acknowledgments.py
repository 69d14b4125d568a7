"""Send Transactional Acknowledgment (MS-MQQB 3.1.7.17): OrderAck and FinalAck messages.

The event builds a Message (``transAcknowledgment``) and enqueues it to the order queue
of the remote queue manager of a session, through the ordinary Open Queue (MS-MQDMPR
3.1.7.1.5) and Enqueue Message To An Open Queue (3.1.7.1.27) of the local QM: a remote
name opens (or creates) the OutgoingQueue that carries it.

* :func:`build_transactional_acknowledgment` is the pure part: every step of 3.1.7.17
  up to DestinationForAck, returning ``(Message, DestinationForAck)``.
* :func:`send_transactional_acknowledgment` runs it on a :class:`QueueManager` and
  discards the acknowledgment when Open Queue fails (returns False, logged).
* :func:`encode_transactional_acknowledgment` turns the built Message into the wire
  :class:`~openmsmq.wire.OrderAck` / :class:`~openmsmq.wire.FinalAck` packet.

Readings of the seed text (docs/conformance.md, "Seed 000"):

* MQMSG_CLASS_NACK_DELETED (0x8001) maps to the Class ``NackPurged``, as the seed's
  table says; MS-MQDMPR gives NackPurged the wire value 0x8001, so the stored class
  value is 0x8001.
* The OrderAck body's TxSequenceId is ``AckSession.outgoing_tx_sequence_id``, the slot
  the seed names OutgoingTxSequenceID; the queue manager passes the acknowledged
  stream's IncomingTxSequenceID there (protocol.md §11 item 2: the sender never reads
  this field to release, and matches the sequence by it).
* PrivacyLevel / AuthenticationLevel None: the store's Message has no such attributes;
  a Message it holds is always None / None.
* A RemoteQMAddress that is neither an IP address nor an SPX address leaves
  DestinationForAck empty; Open Queue of the empty name fails and the acknowledgment
  is discarded.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from openmsmq.errors import LocalProtocolError, MQError
from openmsmq.store.ops import Send
from openmsmq.store.records import MessageRecord
from openmsmq.wire.acks import FinalAck, FinalAckBody, OrderAck, OrderAckBody
from openmsmq.wire.constants import ORDER_ACK_LABEL, BodyType, DeliveryMode, MessageClass
from openmsmq.wire.format_name import PrivateFormatName, order_queue_private, parse_format_name
from openmsmq.wire.ids import TxSequenceId
from openmsmq.wire.message import UserMessage
from openmsmq.wire.userheader import DirectQueueFormatName, PrivateQueueFormatNameId

if TYPE_CHECKING:
    from openmsmq.qm.manager import QueueManager
    from openmsmq.qm.sequences import SequenceStore

__all__ = [
    "CLASS_NAMES",
    "CLASS_VALUES",
    "TRANSACTIONAL_ACK_CLASSES",
    "AckSession",
    "ack_destination",
    "acknowledgment_sends",
    "build_transactional_acknowledgment",
    "encode_transactional_acknowledgment",
    "enqueue_acknowledgment_list",
    "enqueue_acknowledgments",
    "send_transactional_acknowledgment",
]

log = logging.getLogger(__name__)

_NULL_GUID = uuid.UUID(int=0)

#: Message.Class enumeration names and their MessageClass wire values (MS-MQDMPR 3.1.1.12,
#: 3.1.7.1.31/32; OrderAck from MS-MQMQ 2.2.18.1.6). data-model.md §6.3.
CLASS_VALUES: Mapping[str, int] = {
    "Normal": MessageClass.NORMAL,
    "Report": MessageClass.REPORT,
    "AckReachQueue": MessageClass.ACK_REACH_QUEUE,
    "OrderAck": MessageClass.ORDER_ACK,
    "AckReceive": MessageClass.ACK_RECEIVE,
    "NackBadDestQueue": MessageClass.NACK_BAD_DST_Q,
    "NackPurged": MessageClass.NACK_DELETED,
    "NackReachQueueTimeout": MessageClass.NACK_REACH_QUEUE_TIMEOUT,
    "NackQueueExceedQuota": MessageClass.NACK_Q_EXCEED_QUOTA,
    "NackAccessDenied": MessageClass.NACK_ACCESS_DENIED,
    "NackHopCountExceeded": MessageClass.NACK_HOP_COUNT_EXCEEDED,
    "NackBadSignature": MessageClass.NACK_BAD_SIGNATURE,
    "NackBadEncryption": MessageClass.NACK_BAD_ENCRYPTION,
    "NackNotTransactionalQueue": MessageClass.NACK_NOT_TRANSACTIONAL_Q,
    "NackNotTransactionalMessage": MessageClass.NACK_NOT_TRANSACTIONAL_MSG,
    "NackUnsupportedCryptoProvider": MessageClass.NACK_UNSUPPORTED_CRYPTO_PROVIDER,
    "NackQueueDeleted": MessageClass.NACK_Q_DELETED,
    "NackQueuePurged": MessageClass.NACK_Q_PURGED,
    "NackReceiveTimeout": MessageClass.NACK_RECEIVE_TIMEOUT,
    "NackReceiveRejected": MessageClass.NACK_RECEIVE_REJECTED,
}
#: Wire value → Message.Class name (inverse of :data:`CLASS_VALUES`).
CLASS_NAMES: Mapping[int, str] = {value: name for name, value in CLASS_VALUES.items()}

#: MS-MQQB 3.1.7.17, first table: iMessageClass → transAcknowledgment.Class, row by row.
#: MQMSG_CLASS_NACK_DELETED → NackPurged is the seed's own row (not "NackDeleted").
TRANSACTIONAL_ACK_CLASSES: Mapping[MessageClass, str] = {
    MessageClass.ORDER_ACK: "OrderAck",
    MessageClass.ACK_RECEIVE: "AckReceive",
    MessageClass.NACK_BAD_DST_Q: "NackBadDestQueue",
    MessageClass.NACK_DELETED: "NackPurged",
    MessageClass.NACK_REACH_QUEUE_TIMEOUT: "NackReachQueueTimeout",
    MessageClass.NACK_Q_EXCEED_QUOTA: "NackQueueExceedQuota",
    MessageClass.NACK_ACCESS_DENIED: "NackAccessDenied",
    MessageClass.NACK_HOP_COUNT_EXCEEDED: "NackHopCountExceeded",
    MessageClass.NACK_BAD_SIGNATURE: "NackBadSignature",
    MessageClass.NACK_BAD_ENCRYPTION: "NackBadEncryption",
    MessageClass.NACK_NOT_TRANSACTIONAL_Q: "NackNotTransactionalQueue",
    MessageClass.NACK_NOT_TRANSACTIONAL_MSG: "NackNotTransactionalMessage",
    MessageClass.NACK_UNSUPPORTED_CRYPTO_PROVIDER: "NackUnsupportedCryptoProvider",
    MessageClass.NACK_Q_DELETED: "NackQueueDeleted",
    MessageClass.NACK_Q_PURGED: "NackQueuePurged",
    MessageClass.NACK_RECEIVE_TIMEOUT: "NackReceiveTimeout",
    MessageClass.NACK_RECEIVE_REJECTED: "NackReceiveRejected",
}

#: ``"PRIVATE$\\order_queue$"`` as 3.1.7.17 writes it in the direct names.
_ORDER_QUEUE_PATH = "PRIVATE$\\order_queue$"
#: An SPX address as MS-MQMQ writes it in direct names: ``<8 hex network>.<12 hex node>``.
_SPX_ADDRESS = re.compile(r"[0-9A-Fa-f]{8}\.[0-9A-Fa-f]{12}")


@dataclass(frozen=True, slots=True)
class AckSession:
    """The session ADM elements 3.1.7.17 reads (MS-MQQB 3.1.1.3, 3.1.1.5).

    ``outgoing_tx_sequence_id`` / ``incoming_tx_sequence_number`` are needed only for an
    OrderAck (MQMSG_CLASS_ORDER_ACK).
    """

    #: DirectFormatSession: the session was opened for a direct format name.
    direct_format_session: bool
    #: RemoteQMAddress: the remote QM's address (IPv4, IPv6 or SPX).
    remote_qm_address: str = ""
    #: RemoteQMGuid: the remote QM's identifier.
    remote_qm_guid: uuid.UUID = _NULL_GUID
    #: OutgoingTxSequenceID.
    outgoing_tx_sequence_id: TxSequenceId | None = None
    #: IncomingTxSequenceNumber: highest in-order number accepted and persisted.
    incoming_tx_sequence_number: int = 0


def ack_destination(session: AckSession) -> str:
    """DestinationForAck of MS-MQQB 3.1.7.17: the remote QM's order queue.

    Direct session: ``DIRECT=TCP:<RemoteQMAddress>\\PRIVATE$\\order_queue$`` for an IPv4 /
    IPv6 address, ``DIRECT=SPX:<RemoteQMAddress>\\PRIVATE$\\order_queue$`` for an SPX one,
    otherwise empty (the seed constructs nothing). Other sessions:
    ``PRIVATE=<RemoteQMGuid>\\00000004`` (MS-MQMQ 2.1.4).
    """
    if session.direct_format_session:
        address = session.remote_qm_address
        if _is_ip(address):
            return f"DIRECT=TCP:{address}\\{_ORDER_QUEUE_PATH}"
        if _SPX_ADDRESS.fullmatch(address):
            return f"DIRECT=SPX:{address}\\{_ORDER_QUEUE_PATH}"
        return ""
    return str(order_queue_private(session.remote_qm_guid))


def _is_ip(address: str) -> bool:
    try:
        ipaddress.ip_address(address)
    except ValueError:
        return False
    return True


def build_transactional_acknowledgment(
    i_message_class: int,
    session: AckSession,
    *,
    user_message_packet: UserMessage | None = None,
    user_message: MessageRecord | None = None,
) -> tuple[MessageRecord, str]:
    """The transAcknowledgment Message and DestinationForAck (MS-MQQB 3.1.7.17).

    ``i_message_class`` is a row of :data:`TRANSACTIONAL_ACK_CLASSES`. Unless it is
    MQMSG_CLASS_ORDER_ACK, ``user_message`` (iUserMessage, preferred when both are
    given) or ``user_message_packet`` (iUserMessagePacket, which then needs its
    TransactionHeader) identifies the acknowledged message. Raises
    :class:`LocalProtocolError` when the arguments break those rules.
    """
    try:
        name = TRANSACTIONAL_ACK_CLASSES[MessageClass(i_message_class)]
    except (ValueError, KeyError):
        raise LocalProtocolError(
            f"iMessageClass {i_message_class:#06x} is not in the MS-MQQB 3.1.7.17 table"
        ) from None
    if i_message_class == MessageClass.ORDER_ACK:
        body = _order_ack_body(session).encode()
    elif user_message is not None:
        body = final_ack_body_from_message(user_message).encode()
    elif user_message_packet is not None:
        body = final_ack_body_from_packet(user_message_packet).encode()
    else:
        raise LocalProtocolError(
            f"iMessageClass {i_message_class:#06x} needs iUserMessage or iUserMessagePacket"
        )
    ack = MessageRecord(
        body=body,
        label=ORDER_ACK_LABEL,
        priority=0,
        message_class=CLASS_VALUES[name],
        body_type=BodyType.VT_EMPTY,
        delivery=DeliveryMode.RECOVERABLE,
        tracing=False,
        positive_journaling=False,
        negative_journaling=False,
        admin_queue="",
        response_queue="",
    )
    return ack, ack_destination(session)


def _order_ack_body(session: AckSession) -> OrderAckBody:
    """OrderAck Body from the session (3.1.7.17, third table)."""
    if session.outgoing_tx_sequence_id is None:
        raise LocalProtocolError("an OrderAck needs the session's OutgoingTxSequenceID")
    number = session.incoming_tx_sequence_number
    if not 1 <= number <= 0xFFFFFFFF:
        raise LocalProtocolError(f"IncomingTxSequenceNumber {number} is not 1..0xFFFFFFFF")
    return OrderAckBody(session.outgoing_tx_sequence_id, number, number - 1)


def final_ack_body_from_message(m: MessageRecord) -> FinalAckBody:
    """FinalAck Body from a stored Message (iUserMessage, 3.1.7.17 fourth table):
    its TransactionalMessageSequenceIdentifier, TransactionSequenceNumber,
    TransactionPreviousSequenceNumber, SourceMachineIdentifier and the Uniquifier of its
    Identifier."""
    return FinalAckBody(
        TxSequenceId.from_int(m.tx_sequence_id),
        m.tx_sequence_number,
        m.tx_previous_sequence_number,
        m.source_machine,
        m.id_uniquifier,
    )


def final_ack_body_from_packet(packet: UserMessage) -> FinalAckBody:
    """FinalAck Body from a UserMessage packet (iUserMessagePacket, 3.1.7.17 fifth table):
    TransactionHeader TxSequenceID / TxSequenceNumber / PreviousTxSequenceNumber,
    UserHeader SourceQueueManager and MessageID."""
    tx = packet.transaction
    if tx is None:
        raise LocalProtocolError("a FinalAck for a UserMessage packet needs its TransactionHeader")
    return FinalAckBody(
        tx.tx_sequence_id,
        tx.tx_sequence_number,
        tx.previous_tx_sequence_number,
        packet.user.source_queue_manager,
        packet.user.message_id,
    )


def enqueue_acknowledgments(qm: QueueManager, destination: str, acks: list[MessageRecord]) -> bool:
    """Open Queue (SendAccess, DenyNone) of ``destination`` on ``qm`` and Enqueue Message
    To An Open Queue for each of ``acks`` (one durable commit for all).

    When Open Queue fails the acknowledgments are discarded (MS-MQQB 3.1.7.15 / 3.1.7.17);
    an enqueue failure discards them too. Both are logged; returns True when enqueued.
    """
    # QueueManager.open_queue is Open Queue with SendAccess / DenyNone semantics: a local
    # queue is found, a remote name opens or creates its OutgoingQueue (MS-MQDMPR
    # 3.1.7.1.5 step 4); it shares every queue (DenyNone), so no sharing violation arises.
    try:
        handle = qm.open_queue(destination)
    except MQError as exc:
        log.warning("acknowledgment discarded: Open Queue %r failed: %s", destination, exc)
        return False
    try:
        qm.send_many(handle, acks)
    except MQError as exc:
        log.warning("acknowledgment discarded: enqueue to %r failed: %s", destination, exc)
        return False
    return True


def acknowledgment_sends(
    qm: QueueManager, acks: Sequence[tuple[MessageRecord, str]]
) -> tuple[list[Send], int]:
    """Open Queue (SendAccess, DenyNone) of each acknowledgment's destination and the
    acknowledgments as stamped store rows, to be written in the caller's store
    transaction (with what raised them). An acknowledgment whose Open Queue or
    stamping fails is discarded and logged (3.1.7.15 / 3.1.7.17). Returns (sends,
    number discarded)."""
    by_dest: dict[str, list[MessageRecord]] = {}
    for ack, dest in acks:
        by_dest.setdefault(dest, []).append(ack)
    sends: list[Send] = []
    discarded = 0
    for dest, msgs in by_dest.items():
        try:
            handle = qm.open_queue(dest)
            sends += qm.prepare_sends(handle.state, msgs, False, dest, check_names=False)
        except MQError as exc:
            log.warning("acknowledgment discarded: Open Queue %r failed: %s", dest, exc)
            discarded += len(msgs)
    return sends, discarded


def enqueue_acknowledgment_list(
    qm: QueueManager, sequences: SequenceStore, acks: Sequence[tuple[MessageRecord, str]]
) -> tuple[int, int]:
    """Open Queue (SendAccess, DenyNone) of each acknowledgment's destination and Enqueue
    Message To An Open Queue, all in ONE durable store transaction; one whose Open Queue
    fails is discarded and logged (3.1.7.15 / 3.1.7.17). Returns (enqueued, discarded).
    Raises :class:`MQError` when the transaction fails (nothing is enqueued then)."""
    sends, discarded = acknowledgment_sends(qm, acks)
    if sends:
        sequences.accept_arrivals(None, [], None, sends)
    return len(sends), discarded


def send_transactional_acknowledgment(
    qm: QueueManager,
    i_message_class: int,
    session: AckSession,
    *,
    user_message_packet: UserMessage | None = None,
    user_message: MessageRecord | None = None,
) -> bool:
    """The Send Transactional Acknowledgment event (MS-MQQB 3.1.7.17) on ``qm``.

    Builds the acknowledgment (:func:`build_transactional_acknowledgment`), opens
    DestinationForAck and enqueues it; True when it was enqueued, False when it was
    discarded (Open Queue or the enqueue failed).
    """
    ack, destination = build_transactional_acknowledgment(
        i_message_class, session, user_message_packet=user_message_packet, user_message=user_message
    )
    return enqueue_acknowledgments(qm, destination, [ack])


def encode_transactional_acknowledgment(
    ack: MessageRecord,
    destination: str,
    *,
    source_qm: uuid.UUID,
    sent_time: int = 0,
    message_id: int = 0,
) -> OrderAck | FinalAck:
    """The wire packet of a built acknowledgment: an :class:`OrderAck` for class
    0x00FF, otherwise a :class:`FinalAck` (MS-MQQB 2.2.4, 2.2.5).

    ``destination`` is the DestinationForAck: ``DIRECT=...`` becomes a
    DirectQueueFormatName (UserHeader.DQ 0x7, QueueManagerAddress NULL), ``PRIVATE=g\\n``
    a PrivateQueueFormatNameId ``n`` with QueueManagerAddress ``g`` (DQ 0x3).
    """
    dest: DirectQueueFormatName | PrivateQueueFormatNameId
    dest_qm: uuid.UUID | None = None
    if destination[:7].upper() == "DIRECT=":
        dest = DirectQueueFormatName(destination[7:])
    else:
        parsed = parse_format_name(destination)
        if not isinstance(parsed, PrivateFormatName):
            raise LocalProtocolError(f"acknowledgment destination {destination!r} is not DIRECT= / PRIVATE=")
        dest, dest_qm = PrivateQueueFormatNameId(parsed.queue_number), parsed.machine_guid
    if ack.message_class == MessageClass.ORDER_ACK:
        return OrderAck.build(
            OrderAckBody.decode(ack.body),
            source_qm=source_qm,
            destination_queue=dest,
            destination_qm=dest_qm,
            sent_time=sent_time,
            message_id=message_id,
            delivery_mode=ack.delivery,
            time_to_reach_queue=ack.time_to_reach_queue,
            time_to_be_received=ack.time_to_be_received,
        )
    return FinalAck.build(
        FinalAckBody.decode(ack.body),
        ack.message_class,
        source_qm=source_qm,
        destination_queue=dest,
        destination_qm=dest_qm,
        sent_time=sent_time,
        message_id=message_id,
        time_to_reach_queue=ack.time_to_reach_queue,
        time_to_be_received=ack.time_to_be_received,
    )
