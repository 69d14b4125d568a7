"""Transactional acknowledgment packets (MS-MQQB 2.2.4, 2.2.5): OrderAck and FinalAck.

Both are UserMessage packets to the sender's ``order_queue$`` with label
"QM Ordering Ack" and a 36-byte body; OrderAck has class MQMSG_CLASS_ORDER_ACK
(0x00FF), FinalAck a class >= 0x4000 (MQMSG_CLASS_ACK_RECEIVE or a NACK class).
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

from openmsmq.errors import LocalProtocolError, WireError
from openmsmq.wire.constants import ACK_BODY_SIZE, INFINITE, ORDER_ACK_LABEL, DeliveryMode, MessageClass
from openmsmq.wire.fast import fast_constructor
from openmsmq.wire.ids import ObjectId, TxSequenceId, tx_sequence_id_from_u64
from openmsmq.wire.message import UserMessage
from openmsmq.wire.properties import MessagePropertiesHeader
from openmsmq.wire.userheader import DirectQueueFormatName, PrivateQueueFormatNameId, UserHeader
from openmsmq.wire.util import guid_from_le, guid_to_le, need

__all__ = ["FinalAck", "FinalAckBody", "OrderAck", "OrderAckBody", "classify"]

_ORDER_BODY = struct.Struct("<QII20s")
_FINAL_BODY = struct.Struct("<QII16sI")
_ZERO20 = b"\x00" * 20


@dataclass(frozen=True, slots=True)
class OrderAckBody:
    """OrderAck Body (MS-MQQB 2.2.4.1), 36 bytes.

    ``tx_previous_sequence_number`` MUST be ``tx_sequence_number - 1``. ``reserved`` is
    20 bytes that SHOULD be zero and are ignored on receipt (Windows may send
    garbage, MS-MQQB note <17>), so they are kept but not compared.
    """

    tx_sequence_id: TxSequenceId
    tx_sequence_number: int
    tx_previous_sequence_number: int
    reserved: bytes = field(default=_ZERO20, compare=False, repr=False)

    @classmethod
    def for_number(cls, tx_sequence_id: TxSequenceId, tx_sequence_number: int) -> OrderAckBody:
        """The body acknowledging everything up to ``tx_sequence_number`` (MS-MQQB 3.1.7.17)."""
        return cls(tx_sequence_id, tx_sequence_number, tx_sequence_number - 1)

    def encode(self) -> bytes:
        """The 36 wire bytes."""
        seq = self.tx_sequence_id
        reserved = self.reserved if len(self.reserved) == 20 else _ZERO20
        return _ORDER_BODY.pack(
            (seq.timestamp << 32) | seq.ordinal,
            self.tx_sequence_number,
            self.tx_previous_sequence_number,
            reserved,
        )

    @classmethod
    def decode(cls, buf: bytes, offset: int = 0) -> OrderAckBody:
        """Decode 36 bytes at ``offset``; TxSequenceNumber MUST be 1..0xFFFFFFFF."""
        need("OrderAckBody", "length", offset, 36, len(buf))
        seq, number, previous, reserved = _ORDER_BODY.unpack_from(buf, offset)
        if number == 0:
            raise WireError("OrderAckBody", "TxSequenceNumber", 0, "0x00000001..0xFFFFFFFF")
        if cls is OrderAckBody:
            return _new_order_body(tx_sequence_id_from_u64(seq), number, previous, reserved)
        return cls(TxSequenceId(seq >> 32, seq & 0xFFFFFFFF), number, previous, reserved)


@dataclass(frozen=True, slots=True)
class FinalAckBody:
    """FinalAck Body (MS-MQQB 2.2.5.1), 36 bytes: identifies the acknowledged message."""

    tx_sequence_id: TxSequenceId
    tx_sequence_number: int
    tx_previous_sequence_number: int
    source_guid: uuid.UUID
    message_id: int

    @property
    def acknowledged_message_id(self) -> ObjectId:
        """OBJECTID of the acknowledged message (SourceGUID, MessageID)."""
        return ObjectId(self.source_guid, self.message_id)

    def encode(self) -> bytes:
        """The 36 wire bytes."""
        seq = self.tx_sequence_id
        return _FINAL_BODY.pack(
            (seq.timestamp << 32) | seq.ordinal,
            self.tx_sequence_number,
            self.tx_previous_sequence_number,
            guid_to_le(self.source_guid),
            self.message_id,
        )

    @classmethod
    def decode(cls, buf: bytes, offset: int = 0) -> FinalAckBody:
        """Decode 36 bytes at ``offset``."""
        need("FinalAckBody", "length", offset, 36, len(buf))
        seq, number, previous, guid, mid = _FINAL_BODY.unpack_from(buf, offset)
        return cls(tx_sequence_id_from_u64(seq), number, previous, guid_from_le(guid), mid)


_new_order_body = fast_constructor(OrderAckBody)


def _ack_message(
    body: bytes,
    message_class: int,
    *,
    source_qm: uuid.UUID,
    destination_queue: PrivateQueueFormatNameId | DirectQueueFormatName,
    destination_qm: uuid.UUID | None,
    sent_time: int,
    message_id: int,
    delivery_mode: int,
    time_to_reach_queue: int,
    time_to_be_received: int,
) -> UserMessage:
    if destination_qm is None:
        destination_qm = uuid.UUID(int=0)
    user = UserHeader(
        source_qm,
        destination_qm,
        sent_time,
        message_id,
        destination_queue,
        time_to_be_received=time_to_be_received,
        flags=delivery_mode << 5,
    )
    props = MessagePropertiesHeader(message_class, body, len(body), ORDER_ACK_LABEL)
    # BaseHeader.Flags: all 16 bits 0 (MS-MQQB 2.2.4, 2.2.5).
    return UserMessage(user, props, base_flags=0, time_to_reach_queue=time_to_reach_queue)


@dataclass(frozen=True, slots=True)
class OrderAck:
    """OrderAck packet (MS-MQQB 2.2.4): a UserMessage to ``order_queue$`` of class 0x00FF.

    ``message`` is the whole packet; :attr:`body` parses its 36-byte OrderAck Body.
    Build one with :meth:`build`.
    """

    message: UserMessage

    @property
    def body(self) -> OrderAckBody:
        """The OrderAck Body."""
        return OrderAckBody.decode(self.message.properties.body)

    @classmethod
    def build(
        cls,
        body: OrderAckBody,
        *,
        source_qm: uuid.UUID,
        destination_queue: PrivateQueueFormatNameId | DirectQueueFormatName,
        destination_qm: uuid.UUID | None = None,
        sent_time: int = 0,
        message_id: int = 0,
        delivery_mode: int = DeliveryMode.EXPRESS,
        time_to_reach_queue: int = INFINITE,
        time_to_be_received: int = INFINITE,
    ) -> OrderAck:
        """Build an OrderAck to the sender's order queue.

        ``destination_queue`` is ``PrivateQueueFormatNameId(ORDER_QUEUE_ID)`` with
        ``destination_qm`` = the sender's QM GUID on a routed session, or
        ``DirectQueueFormatName("TCP:<ip>\\PRIVATE$\\order_queue$")`` on a direct one.
        MS-MQQB 2.2.4 wants UserHeader.DM = 0; 3.1.7.17 makes the ack recoverable
        (see packets.md §12) — ``delivery_mode`` lets the caller choose.
        """
        return cls(
            _ack_message(
                body.encode(),
                MessageClass.ORDER_ACK,
                source_qm=source_qm,
                destination_queue=destination_queue,
                destination_qm=destination_qm,
                sent_time=sent_time,
                message_id=message_id,
                delivery_mode=delivery_mode,
                time_to_reach_queue=time_to_reach_queue,
                time_to_be_received=time_to_be_received,
            )
        )

    def encode(self) -> bytes:
        """The wire bytes."""
        return self.message.encode()


@dataclass(frozen=True, slots=True)
class FinalAck:
    """FinalAck packet (MS-MQQB 2.2.5): a UserMessage to ``order_queue$`` of class >= 0x4000.

    ``message`` is the whole packet; :attr:`body` parses its FinalAck Body and
    :attr:`message_class` tells positive (0x4000) from negative acknowledgments.
    """

    message: UserMessage

    @property
    def body(self) -> FinalAckBody:
        """The FinalAck Body."""
        return FinalAckBody.decode(self.message.properties.body)

    @property
    def message_class(self) -> int:
        """MessagePropertiesHeader.MessageClass (MQMSG_CLASS_ACK_RECEIVE or a NACK class)."""
        return self.message.properties.message_class

    @classmethod
    def build(
        cls,
        body: FinalAckBody,
        message_class: int,
        *,
        source_qm: uuid.UUID,
        destination_queue: PrivateQueueFormatNameId | DirectQueueFormatName,
        destination_qm: uuid.UUID | None = None,
        sent_time: int = 0,
        message_id: int = 0,
        time_to_reach_queue: int = INFINITE,
        time_to_be_received: int = INFINITE,
    ) -> FinalAck:
        """Build a FinalAck (UserHeader.DM = recoverable, MS-MQQB 2.2.5)."""
        if message_class < 0x4000:
            raise LocalProtocolError(f"FinalAck class must be >= 0x4000, got {message_class:#06x}")
        return cls(
            _ack_message(
                body.encode(),
                message_class,
                source_qm=source_qm,
                destination_queue=destination_queue,
                destination_qm=destination_qm,
                sent_time=sent_time,
                message_id=message_id,
                delivery_mode=DeliveryMode.RECOVERABLE,
                time_to_reach_queue=time_to_reach_queue,
                time_to_be_received=time_to_be_received,
            )
        )

    def encode(self) -> bytes:
        """The wire bytes."""
        return self.message.encode()


def classify(msg: UserMessage) -> UserMessage | OrderAck | FinalAck:
    """Report a decoded UserMessage as OrderAck / FinalAck when it is one (MS-MQQB 3.1.5.1.1).

    The destination must be ``order_queue$`` and the class 0x00FF (OrderAck) or >= 0x4000
    (FinalAck); the body must then be the 36-byte acknowledgment body.
    """
    props = msg.properties
    mclass = props.message_class
    if mclass != 0xFF and mclass < 0x4000:
        return msg
    dest = msg.user.destination_queue
    if not (
        (type(dest) is PrivateQueueFormatNameId or type(dest) is DirectQueueFormatName)
        and dest.is_order_queue
    ):
        return msg
    if len(props.body) != ACK_BODY_SIZE:
        raise WireError(
            "MessagePropertiesHeader", "MessageSize", len(props.body), f"{ACK_BODY_SIZE} in OrderAck/FinalAck"
        )
    if mclass == 0xFF:
        OrderAckBody.decode(props.body)  # validates the body
        return _new_order_ack(msg)
    return _new_final_ack(msg)


_new_order_ack = fast_constructor(OrderAck)
_new_final_ack = fast_constructor(FinalAck)
