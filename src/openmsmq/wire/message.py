"""UserMessage packet (MS-MQMQ 2.2.20): BaseHeader + UserHeader + optional TransactionHeader,
SecurityHeader + MessagePropertiesHeader + optional DebugHeader, SoapHeader,
MultiQueueFormatHeader + optional trailing SessionHeader.

The packet does not store a BaseHeader: PacketSize and the structural flag bits
(IN, SH, DH of the BaseHeader; SH, TH, MQ, HH of the UserHeader) are derived from
which headers are present, so a value can never disagree with its own framing.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, replace

from openmsmq.errors import LocalProtocolError, WireError
from openmsmq.wire._fast import fast_constructor
from openmsmq.wire.constants import (
    DEFAULT_PRIORITY,
    INFINITE,
    MAX_PACKET_SIZE,
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
    DebugHeader,
    SessionHeader,
    TransactionHeader,
    decode_debug_header,
    decode_transaction_header,
)
from openmsmq.wire.ids import ObjectId
from openmsmq.wire.properties import MessagePropertiesHeader, decode_properties_header
from openmsmq.wire.userheader import QueueFormat, SameAsAdmin, UserHeader, decode_user_header

__all__ = ["UserMessage", "decode_user_message"]

_BASE = struct.Struct("<BBHIII")
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
        size = 16 + sum(map(len, parts))
        if size > MAX_PACKET_SIZE:
            raise LocalProtocolError(f"UserMessage of {size} bytes exceeds the 4 MiB PacketSize limit")
        if self.session is not None:
            bflags |= _SH
            parts.append(self.session.encode())
        parts[0] = _BASE.pack(
            PACKET_VERSION, self.base_reserved, bflags, PACKET_SIGNATURE, size, self.time_to_reach_queue
        )
        return b"".join(parts)


_new_user_message = fast_constructor(UserMessage)


def decode_user_message(buf: bytes, bflags: int, breserved: int, size: int, ttrq: int) -> UserMessage:
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
    message: UserMessage = _new_user_message(
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
    return message
