"""Numeric codes and limits of the MS-MQMQ / MS-MQQB wire formats.

Every enumeration cites the spec section that defines it. Flag *masks* are
``IntEnum`` members so that they can be combined with plain ``int`` arithmetic
(``flags & UserFlag.TH``); the codecs themselves use the module-level ``int``
aliases at the bottom of this file on the hot path.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "ACK_BODY_SIZE",
    "ADMIN_QUEUE_TYPES",
    "AQ_SHIFT",
    "BASE_HEADER_SIZE",
    "DEFAULT_PRIORITY",
    "DEFAULT_WINDOW_SIZE",
    "DESTINATION_QUEUE_TYPES",
    "DM_SHIFT",
    "DQ_SHIFT",
    "ESTABLISH_CONNECTION_PADDING_BYTE",
    "INFINITE",
    "MAX_HANDSHAKE_PACKET_SIZE",
    "MAX_HOP_COUNT",
    "MAX_LABEL_LENGTH",
    "MAX_PACKET_SIZE",
    "MAX_PRIORITY",
    "MESSAGE_CLASS_CUSTOM_MASK",
    "MIN_PRIORITY",
    "ORDER_ACK_LABEL",
    "ORDER_QUEUE_ID",
    "ORDER_QUEUE_NAME",
    "PACKET_SIGNATURE",
    "PACKET_VERSION",
    "PING_SIGNATURE",
    "RESPONSE_QUEUE_TYPES",
    "RQ_SHIFT",
    "SESSION_HEADER_SIZE",
    "TX_ID_SHIFT",
    "AckRequest",
    "BaseFlag",
    "BodyType",
    "DeliveryMode",
    "EncryptionAlgorithm",
    "HashAlgorithm",
    "InternalFlag",
    "MQFFormatType",
    "MQFHeaderId",
    "MessageClass",
    "OperatingSystemFlag",
    "PacketType",
    "PrivacyLevel",
    "QueueFormatType",
    "SecurityFlag",
    "SenderIdType",
    "SoapSectionId",
    "TransactionFlag",
    "UserFlag",
    "describe_message_class",
    "is_final_ack_class",
    "is_nack_class",
    "message_class_name",
]

# ---------------------------------------------------------------------------
# Limits and fixed values
# ---------------------------------------------------------------------------

#: BaseHeader.VersionNumber MUST be 0x10 (MS-MQMQ 2.2.19.1).
PACKET_VERSION = 0x10
#: BaseHeader.Signature MUST be 0x524F494C, bytes "LIOR" (MS-MQMQ 2.2.19.1, MS-MQQB 3.1.5.1.2).
PACKET_SIGNATURE = 0x524F494C
#: BaseHeader.PacketSize upper bound, 4 MiB (MS-MQMQ 2.2.19.1).
MAX_PACKET_SIZE = 0x00400000
#: Largest packet a session waits for before it is open: the handshake's packets are
#: EstablishConnection (its header padded to 512 bytes, MS-MQQB 2.2.3) and the smaller
#: ConnectionParameters (2.2.2); nothing else is valid before state OPEN (3.1.5), so a
#: peer that declares more is not waited for (it would hold memory without a session).
MAX_HANDSHAKE_PACKET_SIZE = 1024
#: Size of the BaseHeader (MS-MQMQ 2.2.19.1).
BASE_HEADER_SIZE = 16
#: Size of a SessionHeader (MS-MQMQ 2.2.20.4).
SESSION_HEADER_SIZE = 16
#: "Infinite" for TimeToReachQueue / TimeToBeReceived (MS-MQMQ 2.2.19.1, 2.2.19.2).
INFINITE = 0xFFFFFFFF
#: Lowest, default and highest BaseHeader.Flags.PR priority (MS-MQMQ 2.2.19.1).
MIN_PRIORITY = 0
DEFAULT_PRIORITY = 3
MAX_PRIORITY = 7
#: Highest valid UserHeader.Flags.RC routing hop count (MS-MQMQ 2.2.19.2).
MAX_HOP_COUNT = 0x1D
#: MessagePropertiesHeader.LabelLength upper bound in WCHARs incl. the null (MS-MQMQ 2.2.19.3).
MAX_LABEL_LENGTH = 0xFA
#: Application message classes use only these bits (MS-MQMQ 2.2.18.1.6).
MESSAGE_CLASS_CUSTOM_MASK = 0xE1FF
#: Default SessionHeader / ConnectionParameters window size (MS-MQMQ 2.2.20.4).
DEFAULT_WINDOW_SIZE = 0x0040
#: EstablishConnection response padding byte (MS-MQQB 2.2.3.1).
ESTABLISH_CONNECTION_PADDING_BYTE = 0x5A
#: PrivateQueueIdentifier of the order queue ``order_queue$`` (MS-MQQB 2.2.4).
ORDER_QUEUE_ID = 0x00000004
#: Queue name part of the OrderAck/FinalAck direct destination (MS-MQQB 2.2.4).
ORDER_QUEUE_NAME = "PRIVATE$\\order_queue$"
#: Label of OrderAck and FinalAck packets (MS-MQQB 2.2.4, 2.2.5).
ORDER_ACK_LABEL = "QM Ordering Ack"
#: OrderAck / FinalAck body size = MessagePropertiesHeader.MessageSize 0x24 (MS-MQQB 2.2.4.1, 2.2.5.1).
ACK_BODY_SIZE = 0x24
#: Ping packet signature (MS-MQQB 2.2.7); ping is UDP only, never on the TCP session.
PING_SIGNATURE = 0x5548


# ---------------------------------------------------------------------------
# Message classes
# ---------------------------------------------------------------------------


class MessageClass(IntEnum):
    """MESSAGE_CLASS_VALUES (MS-MQMQ 2.2.18.1.6).

    The field on the wire may also hold an application-defined class that uses only
    the bits of :data:`MESSAGE_CLASS_CUSTOM_MASK`, so decoders keep it as ``int``.
    """

    #: Application message (MS-MQMQ 2.2.18.1.6).
    NORMAL = 0x0000
    #: Trace report message (MS-MQMQ 2.2.18.1.6, MS-MQQB 3.1.5.8.9).
    REPORT = 0x0001
    #: Admin ack: the message reached its destination queue (MS-MQMQ 2.2.18.1.6).
    ACK_REACH_QUEUE = 0x0002
    #: OrderAck: in-order receipt of a transactional message (MS-MQMQ 2.2.18.1.6, MS-MQQB 2.2.4).
    ORDER_ACK = 0x00FF
    #: Admin ack / positive FinalAck: retrieved by a receiving application (MS-MQMQ 2.2.18.1.6).
    ACK_RECEIVE = 0x4000
    #: Destination queue not available to the sender (MS-MQMQ 2.2.18.1.6).
    NACK_BAD_DST_Q = 0x8000
    #: Deleted by an administrative action before reaching the queue (MS-MQMQ 2.2.18.1.6).
    NACK_DELETED = 0x8001
    #: TimeToReachQueue / TimeToBeReceived expired before reaching the queue (MS-MQMQ 2.2.18.1.6).
    NACK_REACH_QUEUE_TIMEOUT = 0x8002
    #: Destination queue quota exceeded (MS-MQMQ 2.2.18.1.6).
    NACK_Q_EXCEED_QUOTA = 0x8003
    #: Sender lacks the send right (MS-MQMQ 2.2.18.1.6).
    NACK_ACCESS_DENIED = 0x8004
    #: Maximum routing hop count exceeded (MS-MQMQ 2.2.18.1.6).
    NACK_HOP_COUNT_EXCEEDED = 0x8005
    #: Digital signature not valid (MS-MQMQ 2.2.18.1.6).
    NACK_BAD_SIGNATURE = 0x8006
    #: Destination could not decrypt the message (MS-MQMQ 2.2.18.1.6).
    NACK_BAD_ENCRYPTION = 0x8007
    #: Transactional message sent to a non-transactional queue (MS-MQMQ 2.2.18.1.6).
    NACK_NOT_TRANSACTIONAL_Q = 0x8009
    #: Non-transactional message sent to a transactional queue (MS-MQMQ 2.2.18.1.6).
    NACK_NOT_TRANSACTIONAL_MSG = 0x800A
    #: Requested encryption provider not supported (MS-MQMQ 2.2.18.1.6).
    NACK_UNSUPPORTED_CRYPTO_PROVIDER = 0x800B
    #: Queue deleted before the message was read (MS-MQMQ 2.2.18.1.6).
    NACK_Q_DELETED = 0xC000
    #: Queue purged before the message was read (MS-MQMQ 2.2.18.1.6).
    NACK_Q_PURGED = 0xC001
    #: TimeToBeReceived expired in the destination queue (MS-MQMQ 2.2.18.1.6).
    NACK_RECEIVE_TIMEOUT = 0xC002
    #: Rejected by the receiving application (MS-MQMQ 2.2.18.1.6).
    NACK_RECEIVE_REJECTED = 0xC004

    @property
    def is_nack(self) -> bool:
        """True for negative acknowledgment classes (bit 15 set)."""
        return is_nack_class(self.value)

    @property
    def is_receive_nack(self) -> bool:
        """True for the negative *receive* acknowledgments (0xC000-0xC004)."""
        return (self.value & 0xC000) == 0xC000

    @property
    def is_admin_ack(self) -> bool:
        """True for administration acknowledgment classes (positive or negative)."""
        return self.value in (0x0002, 0x4000) or is_nack_class(self.value)

    @property
    def is_final_ack(self) -> bool:
        """True for classes a FinalAck packet may carry (MS-MQQB 2.2.5: class >= 0x4000)."""
        return is_final_ack_class(self.value)


def message_class_name(message_class: int) -> str:
    """The one name of a Message.Class everywhere a person or a program reads it (logs,
    the CLI, JSON documents, metrics labels, docs): the MESSAGE_CLASS_VALUES constant of
    MS-MQMQ 2.2.18.1.6 without its common ``MQMSG_CLASS_`` prefix, e.g. ``NACK_BAD_DST_Q``
    for 0x8000. An application-defined class (MS-MQMQ 2.2.18.1.6 allows any value of the
    bits of :data:`MESSAGE_CLASS_CUSTOM_MASK`) has no name: ``0x....``."""
    try:
        return MessageClass(message_class).name
    except ValueError:
        return f"0x{int(message_class):04X}"


def describe_message_class(message_class: int) -> str:
    """The name with the wire value beside it, for logs and tables: ``NACK_BAD_DST_Q (0x8000)``
    (an application-defined class is its value alone)."""
    name = message_class_name(message_class)
    return name if name.startswith("0x") else f"{name} (0x{int(message_class):04X})"


def is_nack_class(message_class: int) -> bool:
    """True when ``message_class`` is a negative acknowledgment (MS-MQMQ 2.2.18.1.6: 0x8000 bit)."""
    return bool(message_class & 0x8000)


def is_final_ack_class(message_class: int) -> bool:
    """True when ``message_class`` marks a FinalAck rather than an OrderAck (MS-MQQB 2.2.5)."""
    return message_class >= 0x4000


# ---------------------------------------------------------------------------
# BaseHeader and InternalHeader
# ---------------------------------------------------------------------------


class BaseFlag(IntEnum):
    """BaseHeader.Flags masks (MS-MQMQ 2.2.19.1)."""

    #: Priority 0-7, bits 0-2; MUST be 0 for transactional messages.
    PR = 0x0007
    #: Internal packet (EstablishConnection, ConnectionParameters, SessionAck).
    IN = 0x0008
    #: A SessionHeader is present at the end of the packet.
    SH = 0x0010
    #: A DebugHeader is present (UserMessage only).
    DH = 0x0020
    #: Tracing requested; DH MUST then be set.
    TR = 0x0100
    #: Reserved bits X0-X9 (send 0, ignore on receipt).
    RESERVED = 0xFEC0


class PacketType(IntEnum):
    """InternalHeader.Flags.PT packet types (MS-MQQB 2.2.1)."""

    #: SessionAck packet (MS-MQQB 2.2.6).
    SESSION_ACK = 0x1
    #: EstablishConnection packet (MS-MQQB 2.2.3).
    ESTABLISH_CONNECTION = 0x2
    #: ConnectionParameters packet (MS-MQQB 2.2.2).
    CONNECTION_PARAMETERS = 0x3


class InternalFlag(IntEnum):
    """InternalHeader.Flags masks (MS-MQQB 2.2.1)."""

    #: Packet type, bits 0-3 (:class:`PacketType`).
    PT = 0x000F
    #: Connection refused (EstablishConnection / ConnectionParameters only).
    CS = 0x0010
    #: Reserved bits X5-X15.
    RESERVED = 0xFFE0


class OperatingSystemFlag(IntEnum):
    """EstablishConnectionHeader.OperatingSystem masks (MS-MQQB 2.2.3.1)."""

    #: Reserved byte RE, MUST be 0x10.
    RE = 0x00FF
    #: 1 = no Ping Request was sent while creating this session.
    SE = 0x0100
    #: 1 = the initiator runs a server-class operating system.
    OS = 0x0200
    #: 1 = the transport supports GQoS (informational).
    QS = 0x0400


# ---------------------------------------------------------------------------
# UserHeader
# ---------------------------------------------------------------------------


class UserFlag(IntEnum):
    """UserHeader.Flags masks (MS-MQMQ 2.2.19.2)."""

    #: Routing-server hop count, bits 0-4.
    RC = 0x0000001F
    #: Delivery mode, bits 5-6 (:class:`DeliveryMode`).
    DM = 0x00000060
    #: Negative source journaling requested.
    JN = 0x00000100
    #: Positive source journaling requested.
    JP = 0x00000200
    #: Destination queue format type, bits 10-12 (:class:`QueueFormatType`).
    DQ = 0x00001C00
    #: Administration queue format type, bits 13-15.
    AQ = 0x0000E000
    #: Response queue format type, bits 16-18.
    RQ = 0x00070000
    #: SecurityHeader present.
    SH = 0x00080000
    #: TransactionHeader present; DM MUST then not be 0.
    TH = 0x00100000
    #: MessagePropertiesHeader present; MUST always be 1.
    MP = 0x00200000
    #: ConnectorType GUID present.
    CQ = 0x00400000
    #: MultiQueueFormatHeader present.
    MQ = 0x00800000
    #: Packet arrived over HTTP; MUST NOT be set on MS-MQQB.
    AH = 0x02000000
    #: SoapHeader present.
    HH = 0x10000000


#: Bit offsets of the multi-bit UserHeader.Flags fields (MS-MQMQ 2.2.19.2).
DM_SHIFT = 5
DQ_SHIFT = 10
AQ_SHIFT = 13
RQ_SHIFT = 16


class DeliveryMode(IntEnum):
    """UserHeader.Flags.DM delivery modes (MS-MQMQ 2.2.19.2); 0x2 and 0x3 are not defined."""

    #: Express: kept in memory only.
    EXPRESS = 0x0
    #: Recoverable: persisted at every hop; transactional messages are recoverable.
    RECOVERABLE = 0x1


class QueueFormatType(IntEnum):
    """Queue format types of UserHeader.Flags.DQ / AQ / RQ (MS-MQMQ 2.2.19.2, 2.2.18.1.5)."""

    #: No queue; no field on the wire.
    NONE = 0x0
    #: RQ only: the response queue is the admin queue; no field on the wire.
    SAME_AS_ADMIN = 0x1
    #: AQ/RQ: private queue on the source QM; PrivateQueueFormatNameId (4 bytes).
    PRIVATE_ON_SOURCE = 0x2
    #: Private queue on the destination QM; PrivateQueueFormatNameId (4 bytes).
    PRIVATE_ON_DESTINATION = 0x3
    #: RQ only: private queue on the admin queue's QM; PrivateQueueFormatNameId (4 bytes).
    PRIVATE_ON_ADMIN_QM = 0x4
    #: Public queue; PublicQueueFormatName (16-byte GUID).
    PUBLIC = 0x5
    #: AQ/RQ: private queue on another QM; PrivateQueueFormatName (GUID + u32).
    PRIVATE = 0x6
    #: Direct format name; DirectQueueFormatName (u16 Count + UTF-16 string + padding).
    DIRECT = 0x7


#: Allowed DQ / AQ / RQ values; anything else closes the session (MS-MQMQ 2.2.19.2).
DESTINATION_QUEUE_TYPES = frozenset({0x0, 0x3, 0x5, 0x7})
ADMIN_QUEUE_TYPES = frozenset({0x0, 0x2, 0x3, 0x5, 0x6, 0x7})
RESPONSE_QUEUE_TYPES = frozenset(range(8))


# ---------------------------------------------------------------------------
# TransactionHeader, SecurityHeader, MessagePropertiesHeader
# ---------------------------------------------------------------------------


class TransactionFlag(IntEnum):
    """TransactionHeader.Flags masks (MS-MQMQ 2.2.20.5)."""

    #: ConnectorQMGuid present.
    CG = 0x00000001
    #: FinalAck required.
    FA = 0x00000002
    #: First message of its transaction.
    FM = 0x00000004
    #: Last message of its transaction.
    LM = 0x00000008
    #: 20-bit transaction correlation identifier, bits 4-23.
    ID = 0x00FFFFF0
    #: Unused bits X1-X8 (send 0, ignore).
    RESERVED = 0xFF000000


#: Bit offset of TransactionHeader.Flags.ID (MS-MQMQ 2.2.20.5).
TX_ID_SHIFT = 4


class SecurityFlag(IntEnum):
    """SecurityHeader.Flags masks (MS-MQMQ 2.2.20.6)."""

    #: Sender ID type, bits 0-3 (:class:`SenderIdType`).
    ST = 0x000F
    #: Authenticated; MUST be 0.
    AU = 0x0010
    #: Body encrypted.
    EB = 0x0020
    #: Default cryptographic provider used.
    DE = 0x0040
    #: SecurityData present.
    AI = 0x0080
    #: Authentication signature type; MUST be 0.
    AS = 0x0F00


class SenderIdType(IntEnum):
    """SecurityHeader.Flags.ST sender ID types (MS-MQMQ 2.2.20.6)."""

    #: No sender ID (SenderIdSize 0).
    NONE = 0x0
    #: A SID (MS-DTYP 2.4.2.2).
    SID = 0x1
    #: The sending QM's GUID.
    QM = 0x2


class AckRequest(IntEnum):
    """MessagePropertiesHeader.Flags acknowledgment requests (MS-MQMQ 2.2.19.3).

    Any bit set requires an AdminQueue in the UserHeader.
    """

    #: No acknowledgment requested.
    NONE = 0x00
    #: PA: positive ack on arrival in the destination queue.
    POS_ARRIVAL = 0x01
    #: PR: positive ack on receive by an application.
    POS_RECEIVE = 0x02
    #: NA: negative ack when the message cannot reach the queue.
    NEG_ARRIVAL = 0x04
    #: NR: negative ack when the message is not received.
    NEG_RECEIVE = 0x08


class BodyType(IntEnum):
    """MessagePropertiesHeader.BodyType VARTYPE values (MS-MQMQ 2.2.12)."""

    VT_EMPTY = 0x0000
    VT_NULL = 0x0001
    VT_I2 = 0x0002
    VT_I4 = 0x0003
    #: Not in MS-MQMQ 2.2.12's list, but used by the MS-MQQB 4.1.7 example frame.
    VT_BSTR = 0x0008
    VT_BOOL = 0x000B
    VT_VARIANT = 0x000C
    VT_I1 = 0x0010
    VT_UI1 = 0x0011
    VT_UI2 = 0x0012
    VT_UI4 = 0x0013
    VT_I8 = 0x0014
    VT_UI8 = 0x0015
    VT_LPWSTR = 0x001F
    VT_BLOB = 0x0041
    VT_CLSID = 0x0048
    #: OR-ed flag: a counted vector of the base type.
    VT_VECTOR = 0x1000


class PrivacyLevel(IntEnum):
    """MessagePropertiesHeader.PrivacyLevel (MS-MQMQ 2.2.19.3)."""

    NONE = 0x0
    BODY_BASE = 0x1
    BODY_ENHANCED = 0x3
    BODY_AES = 0x5


class HashAlgorithm(IntEnum):
    """MessagePropertiesHeader.HashAlgorithm (MS-MQMQ 2.2.19.3)."""

    MD2 = 0x8001
    MD4 = 0x8002
    MD5 = 0x8003
    SHA1 = 0x8004
    SHA256 = 0x800C
    SHA512 = 0x800E


class EncryptionAlgorithm(IntEnum):
    """MessagePropertiesHeader.EncryptionAlgorithm (MS-MQMQ 2.2.19.3)."""

    RC2 = 0x6602
    RC4 = 0x6801
    AES128 = 0x660E
    AES192 = 0x660F
    AES256 = 0x6610


# ---------------------------------------------------------------------------
# MultiQueueFormatHeader and SoapHeader
# ---------------------------------------------------------------------------


class MQFHeaderId(IntEnum):
    """MQFAddressHeader / MQFSignatureHeader HeaderID values (MS-MQMQ 2.2.20.2, 2.2.20.3)."""

    DESTINATION = 0x0064
    ADMINISTRATION = 0x00C8
    RESPONSE = 0x012C
    SIGNATURE = 0x015E


class MQFFormatType(IntEnum):
    """MQFFormatNameElement.FormatType (MS-MQMQ 2.2.18.1.4)."""

    PUBLIC = 0x0001
    PRIVATE = 0x0002
    DIRECT = 0x0003
    DISTRIBUTION_LIST = 0x0006


class SoapSectionId(IntEnum):
    """SoapHeader section identifiers (MS-MQMQ 2.2.20.7)."""

    HEADER = 0x0320
    BODY = 0x0384
