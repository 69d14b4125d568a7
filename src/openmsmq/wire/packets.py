"""Packets of an MS-MQQB session (MS-MQQB 2.2, MS-MQMQ 2.2.20) and whole-packet codecs.

Packet classes do not store a BaseHeader: PacketSize and the structural BaseHeader
flag bits (IN, SH, DH) are derived when encoding, so a packet value can never
disagree with its own framing. ``base_flags`` keeps the remaining bits (PR, TR,
reserved) and ``base_reserved`` the BaseHeader.Reserved byte.

Identification (MS-MQQB 3.1.5.1.1): IN = 1 ⇒ InternalHeader.PT selects
SessionAck / EstablishConnection / ConnectionParameters; IN = 0 ⇒ a UserMessage,
reported as :class:`OrderAck` when its destination is ``order_queue$`` and its class
is MQMSG_CLASS_ORDER_ACK, as :class:`FinalAck` when the destination is
``order_queue$`` and the class is >= 0x4000, and as :class:`UserMessage` otherwise.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from openmsmq.errors import LocalProtocolError, WireError
from openmsmq.wire._util import guid_from_le, guid_to_le, need
from openmsmq.wire.constants import (
    ACK_BODY_SIZE,
    DEFAULT_PRIORITY,
    INFINITE,
    MAX_PACKET_SIZE,
    ORDER_ACK_LABEL,
    PACKET_SIGNATURE,
    PACKET_VERSION,
    DeliveryMode,
    MessageClass,
)
from openmsmq.wire.extra import (
    MultiQueueFormatHeader,
    SecurityHeader,
    SoapHeader,
    decode_multi_queue_header,
    decode_security_header,
    decode_soap_header,
)
from openmsmq.wire.headers import (
    ConnectionParametersHeader,
    DebugHeader,
    EstablishConnectionHeader,
    SessionHeader,
    TransactionHeader,
    check_base,
    decode_debug_header,
    decode_transaction_header,
)
from openmsmq.wire.ids import ObjectId, TxSequenceId
from openmsmq.wire.properties import MessagePropertiesHeader, decode_properties_header
from openmsmq.wire.userheader import (
    DirectQueueFormatName,
    PrivateQueueFormatNameId,
    QueueFormat,
    SameAsAdmin,
    UserHeader,
    decode_user_header,
)

__all__ = [
    "ConnectionParameters",
    "EstablishConnection",
    "FinalAck",
    "FinalAckBody",
    "OrderAck",
    "OrderAckBody",
    "Packet",
    "SessionAck",
    "UserMessage",
    "decode_packet",
    "encode_packets",
    "packet_length",
]

_BASE = struct.Struct("<BBHIII")
_INTERNAL = struct.Struct("<HH")
_ORDER_BODY = struct.Struct("<QII20s")
_FINAL_BODY = struct.Struct("<QII16sI")
_SESSION_SIZE = 16

# BaseHeader.Flags bits (MS-MQMQ 2.2.19.1)
_IN = 0x0008
_SH = 0x0010
_DH = 0x0020
_TR = 0x0100
_BASE_STRUCTURAL = _IN | _SH | _DH
# UserHeader.Flags header-presence bits (MS-MQMQ 2.2.19.2)
_U_SH = 0x00080000
_U_TH = 0x00100000
_U_MQ = 0x00800000
_U_HH = 0x10000000
_ZERO20 = b"\x00" * 20


# ---------------------------------------------------------------------------
# Internal packets
# ---------------------------------------------------------------------------


def _internal_prefix(
    base_flags: int, extra: int, reserved: int, size: int, ttrq: int, ireserved: int, iflags: int
) -> bytes:
    flags = (base_flags & ~_BASE_STRUCTURAL) | _IN | extra
    return _BASE.pack(PACKET_VERSION, reserved, flags, PACKET_SIGNATURE, size, ttrq) + _INTERNAL.pack(
        ireserved, iflags
    )


@dataclass(frozen=True, slots=True)
class EstablishConnection:
    """EstablishConnection packet (MS-MQQB 2.2.3): BaseHeader + InternalHeader (PT 0x2) + 552 bytes.

    ``internal_flags`` holds InternalHeader.Flags without PT (so CS, bit 4, and reserved bits).
    """

    header: EstablishConnectionHeader
    base_flags: int = DEFAULT_PRIORITY
    base_reserved: int = 0
    time_to_reach_queue: int = INFINITE
    internal_flags: int = 0
    internal_reserved: int = 0

    SIZE = 572

    @property
    def connection_refused(self) -> bool:
        """InternalHeader.Flags.CS."""
        return bool(self.internal_flags & 0x10)

    def encode(self) -> bytes:
        """The 572 wire bytes."""
        return (
            _internal_prefix(
                self.base_flags,
                0,
                self.base_reserved,
                572,
                self.time_to_reach_queue,
                self.internal_reserved,
                (self.internal_flags & ~0xF) | 0x2,
            )
            + self.header.encode()
        )


@dataclass(frozen=True, slots=True)
class ConnectionParameters:
    """ConnectionParameters packet (MS-MQQB 2.2.2): BaseHeader + InternalHeader (PT 0x3) + 12 bytes."""

    header: ConnectionParametersHeader
    base_flags: int = DEFAULT_PRIORITY
    base_reserved: int = 0
    time_to_reach_queue: int = INFINITE
    internal_flags: int = 0
    internal_reserved: int = 0

    SIZE = 32

    @property
    def connection_refused(self) -> bool:
        """InternalHeader.Flags.CS."""
        return bool(self.internal_flags & 0x10)

    def encode(self) -> bytes:
        """The 32 wire bytes."""
        return (
            _internal_prefix(
                self.base_flags,
                0,
                self.base_reserved,
                32,
                self.time_to_reach_queue,
                self.internal_reserved,
                (self.internal_flags & ~0xF) | 0x3,
            )
            + self.header.encode()
        )


@dataclass(frozen=True, slots=True)
class SessionAck:
    """SessionAck packet (MS-MQQB 2.2.6): BaseHeader (IN, SH) + InternalHeader (PT 0x1) + SessionHeader.

    PacketSize is 36: the stand-alone SessionAck counts its SessionHeader (MS-MQQB 4.1.8),
    unlike a SessionHeader piggy-backed on a UserMessage (packets.md §2).
    """

    session: SessionHeader
    base_flags: int = DEFAULT_PRIORITY
    base_reserved: int = 0
    time_to_reach_queue: int = INFINITE
    internal_flags: int = 0
    internal_reserved: int = 0

    SIZE = 36

    def encode(self) -> bytes:
        """The 36 wire bytes."""
        if self.internal_flags & 0x10:
            raise LocalProtocolError("InternalHeader.Flags.CS is only allowed in connection packets")
        return (
            _internal_prefix(
                self.base_flags,
                _SH,
                self.base_reserved,
                36,
                self.time_to_reach_queue,
                self.internal_reserved,
                (self.internal_flags & ~0xF) | 0x1,
            )
            + self.session.encode()
        )


# ---------------------------------------------------------------------------
# UserMessage
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class UserMessage:
    """UserMessage packet (MS-MQMQ 2.2.20): every header a queue manager needs, in wire order.

    Optional headers are ``None`` when absent; their presence bits (UserHeader SH/TH/MQ/HH,
    BaseHeader SH/DH) are derived. ``extensions`` keeps, uninterpreted, any bytes
    between the last known header and PacketSize (multiple of 4). ``session`` is the
    trailing SessionHeader, which is not counted in PacketSize (MS-MQMQ 2.2.19.1).
    """

    user: UserHeader
    properties: MessagePropertiesHeader
    transaction: TransactionHeader | None = None
    security: SecurityHeader | None = None
    debug: DebugHeader | None = None
    soap: SoapHeader | None = None
    multi_queue: MultiQueueFormatHeader | None = None
    session: SessionHeader | None = None
    extensions: bytes = b""
    base_flags: int = DEFAULT_PRIORITY
    time_to_reach_queue: int = INFINITE
    base_reserved: int = 0

    # -- construction ------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        *,
        source_qm: uuid.UUID,
        message_id: int,
        destination_queue: QueueFormat,
        body: bytes,
        sent_time: int,
        destination_qm: uuid.UUID | None = None,
        admin_queue: QueueFormat | None = None,
        response_queue: QueueFormat | SameAsAdmin | None = None,
        label: str | None = None,
        message_class: int = MessageClass.NORMAL,
        priority: int | None = None,
        delivery_mode: int | None = None,
        ack_requests: int = 0,
        hop_count: int = 0,
        time_to_reach_queue: int = INFINITE,
        time_to_be_received: int = INFINITE,
        correlation_id: bytes = _ZERO20,
        application_tag: int = 0,
        body_type: int = 0,
        transaction: TransactionHeader | None = None,
        session: SessionHeader | None = None,
        tracing: bool = False,
        debug: DebugHeader | None = None,
        negative_journaling: bool = False,
        positive_journaling: bool = False,
        connector_type: uuid.UUID | None = None,
    ) -> UserMessage:
        """Build a UserMessage from its fields.

        Defaults follow MS-MQQB: a transactional message (``transaction`` given) is
        recoverable with priority 0; otherwise express with priority 3.
        ``destination_qm`` is UserHeader.QueueManagerAddress (NULL GUID for direct names).
        """
        if priority is None:
            priority = 0 if transaction is not None else DEFAULT_PRIORITY
        if delivery_mode is None:
            delivery_mode = DeliveryMode.RECOVERABLE if transaction is not None else DeliveryMode.EXPRESS
        if not 0 <= priority <= 7:
            raise LocalProtocolError(f"priority must be 0..7, got {priority}")
        if tracing and debug is None:
            raise LocalProtocolError("tracing (BaseHeader.Flags.TR) requires a DebugHeader")
        user = UserHeader(
            source_qm,
            destination_qm if destination_qm is not None else uuid.UUID(int=0),
            sent_time,
            message_id,
            destination_queue,
            admin_queue,
            response_queue,
            time_to_be_received,
            UserHeader.make_flags(
                hop_count=hop_count,
                delivery_mode=delivery_mode,
                negative_journaling=negative_journaling,
                positive_journaling=positive_journaling,
            ),
            connector_type,
        )
        props = MessagePropertiesHeader(
            message_class,
            body,
            len(body),
            label,
            ack_requests,
            correlation_id,
            body_type,
            application_tag,
        )
        return cls(
            user,
            props,
            transaction,
            debug=debug,
            session=session,
            base_flags=priority | (_TR if tracing else 0),
            time_to_reach_queue=time_to_reach_queue,
        )

    def with_session(self, session: SessionHeader | None) -> UserMessage:
        """A copy carrying ``session`` as its trailing SessionHeader (or none)."""
        return replace(self, session=session)

    # -- the fields a queue manager reads ---------------------------------------------------

    @property
    def message_id(self) -> ObjectId:
        """Message identifier: OBJECTID(SourceQueueManager, UserHeader.MessageID) (MS-MQMQ 2.2.8)."""
        return ObjectId(self.user.source_queue_manager, self.user.message_id)

    @property
    def source_qm(self) -> uuid.UUID:
        """UserHeader.SourceQueueManager."""
        return self.user.source_queue_manager

    @property
    def destination_qm(self) -> uuid.UUID:
        """UserHeader.QueueManagerAddress (NULL GUID for a direct destination)."""
        return self.user.queue_manager_address

    @property
    def destination_queue(self) -> QueueFormat | None:
        """UserHeader.DestinationQueue."""
        return self.user.destination_queue

    @property
    def sent_time(self) -> int:
        """UserHeader.SentTime, seconds since 1970 UTC."""
        return self.user.sent_time

    @property
    def time_to_be_received(self) -> int:
        """UserHeader.TimeToBeReceived, seconds; 0xFFFFFFFF = infinite."""
        return self.user.time_to_be_received

    @property
    def priority(self) -> int:
        """BaseHeader.Flags.PR."""
        return self.base_flags & 0x7

    @property
    def tracing(self) -> bool:
        """BaseHeader.Flags.TR."""
        return bool(self.base_flags & _TR)

    @property
    def delivery_mode(self) -> int:
        """UserHeader.Flags.DM."""
        return self.user.delivery_mode

    @property
    def hop_count(self) -> int:
        """UserHeader.Flags.RC."""
        return self.user.hop_count

    @property
    def message_class(self) -> int:
        """MessagePropertiesHeader.MessageClass."""
        return self.properties.message_class

    @property
    def ack_requests(self) -> int:
        """MessagePropertiesHeader.Flags (:class:`~openmsmq.wire.constants.AckRequest` bits)."""
        return self.properties.ack_flags

    @property
    def label(self) -> str:
        """The label ("" when absent)."""
        return self.properties.label or ""

    @property
    def body(self) -> bytes:
        """MessagePropertiesHeader.MessageBody."""
        return self.properties.body

    @property
    def is_transactional(self) -> bool:
        """True when a TransactionHeader is present."""
        return self.transaction is not None

    # -- codec -----------------------------------------------------------------------------

    def encode(self) -> bytes:
        """The wire bytes (with the trailing SessionHeader when present)."""
        parts: list[bytes] = [b""]
        uflags = 0
        tx = self.transaction
        if tx is not None:
            uflags |= _U_TH
        sec = self.security
        if sec is not None:
            uflags |= _U_SH
        if self.soap is not None:
            uflags |= _U_HH
        if self.multi_queue is not None:
            uflags |= _U_MQ
        parts.append(self.user.encode(uflags))
        if tx is not None:
            if not self.user.flags & 0x60:
                raise LocalProtocolError("a transactional UserMessage must not be express (UserHeader.DM)")
            parts.append(tx.encode())
        if sec is not None:
            parts.append(sec.encode())
        parts.append(self.properties.encode())
        bflags = self.base_flags & ~_BASE_STRUCTURAL
        if self.debug is not None:
            bflags |= _DH
            parts.append(self.debug.encode())
        elif bflags & _TR:
            raise LocalProtocolError("BaseHeader.Flags.TR requires a DebugHeader")
        if self.soap is not None:
            parts.append(self.soap.encode())
        if self.multi_queue is not None:
            parts.append(self.multi_queue.encode())
        if self.extensions:
            if len(self.extensions) & 3:
                raise LocalProtocolError("UserMessage.extensions must be a multiple of 4 bytes")
            parts.append(self.extensions)
        size = 16
        for part in parts:
            size += len(part)
        if size > MAX_PACKET_SIZE:
            raise LocalProtocolError(f"UserMessage of {size} bytes exceeds the 4 MiB PacketSize limit")
        if self.session is not None:
            bflags |= _SH
            parts.append(self.session.encode())
        parts[0] = _BASE.pack(
            PACKET_VERSION, self.base_reserved, bflags, PACKET_SIGNATURE, size, self.time_to_reach_queue
        )
        return b"".join(parts)


def _decode_user_message(
    buf: bytes, bflags: int, breserved: int, size: int, ttrq: int
) -> UserMessage | OrderAck | FinalAck:
    """Decode the UserMessage in ``buf`` (the whole packet, trailing SessionHeader included)."""
    user, uflags, p = decode_user_header(buf, 16, size)
    tx = sec = debug = soap = mq = session = None
    if uflags & _U_TH:
        tx, p = decode_transaction_header(buf, p, size)
    if uflags & _U_SH:
        sec, p = decode_security_header(buf, p, size)
    props, p = decode_properties_header(buf, p, size)
    if bflags & _DH:
        debug, p = decode_debug_header(buf, p, size)
    elif bflags & _TR:
        raise WireError("BaseHeader", "Flags.TR", 1, "0 unless Flags.DH is set (tracing needs a DebugHeader)")
    if uflags & _U_HH:
        soap, p = decode_soap_header(buf, p, size)
    if uflags & _U_MQ:
        mq, p = decode_multi_queue_header(buf, p, size)
    if bflags & _SH:
        session = SessionHeader.decode(buf, size)
    msg = UserMessage(
        user,
        props,
        tx,
        sec,
        debug,
        soap,
        mq,
        session,
        buf[p:size],
        bflags & ~_BASE_STRUCTURAL,
        ttrq,
        breserved,
    )
    mclass = props.message_class
    if mclass == 0xFF or mclass >= 0x4000:
        dest = user.destination_queue
        if (
            type(dest) is PrivateQueueFormatNameId or type(dest) is DirectQueueFormatName
        ) and dest.is_order_queue:
            if len(props.body) != ACK_BODY_SIZE:
                raise WireError(
                    "MessagePropertiesHeader",
                    "MessageSize",
                    len(props.body),
                    f"{ACK_BODY_SIZE} in OrderAck/FinalAck",
                )
            if mclass == 0xFF:
                OrderAckBody.decode(props.body)  # validates
                return OrderAck(msg)
            return FinalAck(msg)
    return msg


# ---------------------------------------------------------------------------
# OrderAck and FinalAck
# ---------------------------------------------------------------------------


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
        return cls(TxSequenceId(seq >> 32, seq & 0xFFFFFFFF), number, previous, guid_from_le(guid), mid)


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


#: Any packet of an MS-MQQB TCP session.
Packet = EstablishConnection | ConnectionParameters | SessionAck | UserMessage | OrderAck | FinalAck


# ---------------------------------------------------------------------------
# Whole-packet codecs
# ---------------------------------------------------------------------------


def packet_length(flags: int, packet_size: int) -> int:
    """Bytes the packet occupies on the stream (packets.md §2).

    IN = 1: PacketSize covers everything (the stand-alone SessionAck counts its
    SessionHeader, MS-MQQB 4.1.8). IN = 0 and SH = 1: a SessionHeader of 16 bytes
    follows, not counted in PacketSize (MS-MQMQ 2.2.19.1).
    """
    if flags & _SH and not flags & _IN:
        return packet_size + _SESSION_SIZE
    return packet_size


_INTERNAL_KINDS = {
    0x1: ("SessionAck", 36),
    0x2: ("EstablishConnection", 572),
    0x3: ("ConnectionParameters", 32),
}


def _decode_internal(buf: bytes, bflags: int, breserved: int, size: int, ttrq: int) -> Packet:
    if bflags & _DH:
        raise WireError(
            "BaseHeader", "Flags.DH", 1, "0 in internal packets (DebugHeader only in UserMessage)"
        )
    ireserved, iflags = _INTERNAL.unpack_from(buf, 16)
    pt = iflags & 0xF
    kind = _INTERNAL_KINDS.get(pt)
    if kind is None:
        raise WireError(
            "InternalHeader", "Flags.PT", pt, "0x1 (SessionAck), 0x2 (EstablishConnection) or 0x3"
        )
    name, expected = kind
    if size != expected:
        raise WireError("BaseHeader", "PacketSize", size, f"{expected} for {name}")
    rest_flags = bflags & ~_BASE_STRUCTURAL
    if pt == 0x1:
        if not bflags & _SH:
            raise WireError("BaseHeader", "Flags.SH", 0, "1 in a SessionAck")
        if iflags & 0x10:
            raise WireError("InternalHeader", "Flags.CS", 1, "0 in a SessionAck (only in connection packets)")
        return SessionAck(
            SessionHeader.decode(buf, 20), rest_flags, breserved, ttrq, iflags & ~0xF, ireserved
        )
    if bflags & _SH:
        raise WireError("BaseHeader", "Flags.SH", 1, f"0 in {name} (no SessionHeader)")
    if pt == 0x2:
        return EstablishConnection(
            EstablishConnectionHeader.decode(buf, 20), rest_flags, breserved, ttrq, iflags & ~0xF, ireserved
        )
    return ConnectionParameters(
        ConnectionParametersHeader.decode(buf, 20), rest_flags, breserved, ttrq, iflags & ~0xF, ireserved
    )


def decode_packet_body(buf: bytes, flags: int, reserved: int, size: int, ttrq: int) -> Packet:
    """Decode a packet whose BaseHeader fields were already read and validated (stream decoder)."""
    if flags & _IN:
        return _decode_internal(buf, flags, reserved, size, ttrq)
    return _decode_user_message(buf, flags, reserved, size, ttrq)


def decode_packet(buf: bytes | bytearray | memoryview) -> Packet:
    """Decode exactly one whole packet (trailing SessionHeader included); raises :class:`WireError`."""
    data = bytes(buf)
    if len(data) < 16:
        raise WireError("BaseHeader", "length", len(data), ">= 16 bytes")
    version, reserved, flags, signature, size, ttrq = _BASE.unpack_from(data, 0)
    check_base(version, signature, size)
    total = packet_length(flags, size)
    if len(data) != total:
        raise WireError("BaseHeader", "PacketSize", size, f"a packet of {len(data)} bytes (needs {total})")
    return decode_packet_body(data, flags, reserved, size, ttrq)


def encode_packets(packets: Iterable[Packet]) -> bytes:
    """Encode many packets into one buffer, for a single socket write."""
    return b"".join([p.encode() for p in packets])
