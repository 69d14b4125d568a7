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
from openmsmq.wire.constants import (
    DEFAULT_PRIORITY,
    INFINITE,
    MAX_LABEL_LENGTH,
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
from openmsmq.wire.fast import fast_constructor
from openmsmq.wire.headers import (
    DebugHeader,
    SessionHeader,
    TransactionHeader,
    decode_debug_header,
    decode_transaction_header,
)
from openmsmq.wire.ids import ObjectId, TxSequenceId, cached_tx_sequence_id, tx_sequence_id_from_u64
from openmsmq.wire.properties import (
    MessagePropertiesHeader,
    cached_label,
    cached_label_wire,
    decode_properties_header,
    label_text,
    label_wire,
)
from openmsmq.wire.userheader import (
    STRUCTURAL,
    DirectQueueFormatName,
    QueueFormat,
    SameAsAdmin,
    UserHeader,
    cached_direct_queue,
    cached_direct_wire,
    decode_user_header,
    direct_queue_wire,
)
from openmsmq.wire.util import cached_guid, cached_guid_bytes, guid_from_le, guid_to_le

__all__ = ["UserMessage", "decode_user_message", "encode_direct_transactional"]

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
        user = self.user
        tx = self.transaction
        dest = user.destination_queue
        if (
            tx is not None
            and type(dest) is DirectQueueFormatName
            and user.admin_queue is None
            and user.response_queue is None
            and user.connector_type is None
            and user.flags & 0x60
            and tx.connector_qm_guid is None
            and self.security is None
            and self.debug is None
            and self.soap is None
            and self.multi_queue is None
            and not self.extensions
            and not self.base_flags & _TR
        ):
            return _encode_common(self, user, tx, dest)
        return self._encode_general()

    def _encode_general(self) -> bytes:
        """The wire bytes of any UserMessage, header by header."""
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


# -- encode fast path -----------------------------------------------------------------------
#
# The same common shape as the decode fast path, transactional: BaseHeader and the
# UserHeader's fixed part in one pack, the memoised DirectQueueFormatName field, then
# TransactionHeader and the MessagePropertiesHeader's fixed part in one pack. Bytes
# are those of the general encoder (tests/wire/test_fast_path.py).
_BASE_USER_FIXED = struct.Struct("<BBHIII16s16sIIII")
_TX_PROPS_FIXED = struct.Struct("<IQIIBBH20sIIIIIIII")
# DQ = 0x7, TH, MP (MS-MQMQ 2.2.19.2): the structural UserHeader bits of the common shape.
_COMMON_UFLAGS = (7 << 10) | _U_TH | 0x00200000
_PADS = (b"", b"\x00", b"\x00\x00", b"\x00\x00\x00")


def _encode_common(
    m: UserMessage, user: UserHeader, tx: TransactionHeader, dest: DirectQueueFormatName
) -> bytes:
    """:meth:`UserMessage.encode` for the common transactional shape (checked by the caller)."""
    props = m.properties
    corr = props.correlation_id
    if len(corr) != 20:
        return m._encode_general()  # raises its LocalProtocolError
    dwire = cached_direct_wire((dest.name, dest.padding)) or direct_queue_wire(dest)
    label = props.label
    raw_label = b"" if label is None else cached_label_wire(label) or label_wire(label)
    body = props.body
    ext = props.extension
    n = len(raw_label) + len(ext) + len(body)
    pad_len = -n & 3
    pad = props.padding
    if len(pad) != pad_len:
        pad = _PADS[pad_len]
    size = 140 + len(dwire) + n + pad_len  # 16 + 48 + 20 + 56 fixed bytes
    if size > MAX_PACKET_SIZE:
        raise LocalProtocolError(f"UserMessage of {size} bytes exceeds the 4 MiB PacketSize limit")
    bflags = m.base_flags & ~_BASE_STRUCTURAL
    session = m.session
    if session is not None:
        bflags |= _SH
    src = user.source_queue_manager
    qma = user.queue_manager_address
    seq = tx.tx_sequence_id
    parts = [
        _BASE_USER_FIXED.pack(
            PACKET_VERSION, m.base_reserved, bflags, PACKET_SIGNATURE, size, m.time_to_reach_queue,
            cached_guid_bytes(src.int) or guid_to_le(src), cached_guid_bytes(qma.int) or guid_to_le(qma),
            user.time_to_be_received, user.sent_time, user.message_id,
            (user.flags & ~STRUCTURAL) | _COMMON_UFLAGS,
        ),
        dwire,
        _TX_PROPS_FIXED.pack(
            tx.flags & ~1, (seq.timestamp << 32) | seq.ordinal, tx.tx_sequence_number,
            tx.previous_tx_sequence_number, props.ack_flags, len(raw_label) >> 1, props.message_class,
            corr, props.body_type, props.application_tag, len(body), props.allocation_body_size,
            props.privacy_level, props.hash_algorithm, props.encryption_algorithm, len(ext),
        ),
        raw_label,
        ext,
        body,
        pad,
    ]  # fmt: skip
    if session is not None:
        parts.append(session.encode())
    return b"".join(parts)


def encode_direct_transactional(
    time_to_reach_queue: int,
    source_qm_le: bytes,
    destination_qm_le: bytes,
    time_to_be_received: int,
    sent_time: int,
    message_id: int,
    user_flags: int,
    direct_wire: bytes,
    tx_flags: int,
    tx_sequence_id: int,
    tx_sequence_number: int,
    previous_tx_sequence_number: int,
    ack_flags: int,
    raw_label: bytes,
    message_class: int,
    correlation_id: bytes,
    body_type: int,
    application_tag: int,
    body: bytes,
) -> bytes:
    """The bytes :meth:`UserMessage.encode` gives for the common transactional shape (see
    :func:`_encode_common`) built from plain values, for an encoder that has them without
    a :class:`UserMessage` (the transfer's sender reads them from a stored row).

    The message has BaseHeader.Flags 0 (priority 0, no tracing) and reserved 0, no
    SessionHeader, admin / response queue, extension or uninterpreted bytes; its
    properties have the default privacy, hash and encryption algorithms and an
    AllocationBodySize equal to the body's size. ``source_qm_le`` / ``destination_qm_le``
    are the GUIDs' little-endian bytes, ``direct_wire`` the DestinationQueue field
    (:func:`~openmsmq.wire.userheader.direct_queue_wire`), ``raw_label`` the Label field
    with its null (:func:`~openmsmq.wire.properties.label_wire`; ``b""`` for none),
    ``tx_sequence_id`` the TxSequenceID as its u64 value, ``user_flags`` the UserHeader
    flags without structural bits (DM must be set: a transactional message is never
    express). Out-of-range values raise :class:`struct.error`; a packet over the 4 MiB
    PacketSize limit raises :class:`LocalProtocolError`. Bytes equal to ``encode``'s
    (tests/transfer/test_codec.py, through the row encoder)."""
    n_label = len(raw_label)
    n_body = len(body)
    n = n_label + n_body
    pad_len = -n & 3
    size = 140 + len(direct_wire) + n + pad_len  # as _encode_common (no extension)
    if size > MAX_PACKET_SIZE:
        raise LocalProtocolError(f"UserMessage of {size} bytes exceeds the 4 MiB PacketSize limit")
    if not user_flags & 0x60:
        raise LocalProtocolError("a transactional UserMessage must not be express (UserHeader.DM)")
    return b"".join(
        (
            _BASE_USER_FIXED.pack(
                PACKET_VERSION, 0, 0, PACKET_SIGNATURE, size, time_to_reach_queue, source_qm_le,
                destination_qm_le, time_to_be_received, sent_time, message_id,
                (user_flags & ~STRUCTURAL) | _COMMON_UFLAGS,
            ),
            direct_wire,
            _TX_PROPS_FIXED.pack(
                tx_flags & ~1, tx_sequence_id, tx_sequence_number, previous_tx_sequence_number,
                ack_flags, n_label >> 1, message_class, correlation_id, body_type,
                application_tag, n_body, n_body, 0, 0, 0, 0,
            ),
            raw_label,
            body,
            _PADS[pad_len],
        )
    )  # fmt: skip


_new_user_message = fast_constructor(UserMessage)
# The fast path's values: fields it always leaves absent take their declared default (None).
_new_common_message = fast_constructor(
    UserMessage,
    fields=("user", "properties", "transaction", "session", "extensions", "base_flags",
            "time_to_reach_queue", "base_reserved"),
)  # fmt: skip
_new_direct_user_header = fast_constructor(
    UserHeader,
    fields=("source_queue_manager", "queue_manager_address", "sent_time", "message_id",
            "destination_queue", "time_to_be_received", "flags"),
)  # fmt: skip
_new_tx = fast_constructor(TransactionHeader)
_new_properties = fast_constructor(MessagePropertiesHeader)

# -- decode fast path -----------------------------------------------------------------------
#
# The common UserMessage of a transfer is BaseHeader + UserHeader with a direct
# DestinationQueue and no admin / response queue + TransactionHeader without
# ConnectorQMGuid + MessagePropertiesHeader (+ trailing SessionHeader). The fast path
# below decodes exactly that shape with one unpack for the UserHeader's fixed part and
# one for the TransactionHeader and the MessagePropertiesHeader's fixed part together.
# It accepts a packet only when every check of the general path would pass on it;
# anything else (another shape, a direct name not decoded before, any rule broken)
# returns to the general path, which decodes it or raises its usual WireError.
_USER_FIXED = struct.Struct("<16s16sIIII")
_PROPS_FIXED = struct.Struct("<BBH20sIIIIIIII")
_TX_PROPS_FIXED = struct.Struct("<IQIIBBH20sIIIIIIII")
_U16 = struct.Struct("<H")
_U_AH = 0x02000000
# UserHeader.Flags bits the fast path pins (MS-MQMQ 2.2.19.2): the structural bits
# DQ, AQ, RQ, SH, TH, MP, CQ, MQ, HH and AH. TH is free (masked out of the comparison).
_FAST_MASK = (STRUCTURAL | _U_AH) & ~_U_TH
# DQ = 0x7 (direct), AQ = RQ = 0 (absent), MP = 1, every other pinned bit 0.
_FAST_BITS = (7 << 10) | 0x00200000
# The previous packet's GUIDs, TxSequenceID and DestinationQueue field with their values:
# consecutive packets of a stream repeat them, and comparing the bytes costs less than a
# memo lookup per field. Each is one tuple, so threads never see a key paired with another
# key's value.
_last_guids: tuple[bytes, bytes, uuid.UUID, uuid.UUID] = (b"", b"", uuid.UUID(int=0), uuid.UUID(int=0))
_last_sequence: tuple[int, TxSequenceId | None] = (-1, None)
_last_destination: tuple[bytes, DirectQueueFormatName | None] = (b"", None)


def decode_user_message(buf: bytes, bflags: int, breserved: int, size: int, ttrq: int) -> UserMessage:
    """Decode the UserMessage in ``buf`` (the whole packet, trailing SessionHeader included)."""
    global _last_guids, _last_sequence, _last_destination
    # The fast path (see above), one function: every "return _decode_general(...)" hands a
    # packet of another shape, or one breaking a rule, to the general decoder.
    if size < 68 or bflags & (_DH | _TR):
        return _decode_general(buf, bflags, breserved, size, ttrq)
    src, qma, ttbr, sent, mid, uflags = _USER_FIXED.unpack_from(buf, 16)
    if uflags & _FAST_MASK != _FAST_BITS:
        return _decode_general(buf, bflags, breserved, size, ttrq)
    # DirectQueueFormatName (MS-MQMQ 2.2.18.1.5.2): Count, string, pad to 4; known ones only.
    (count,) = _U16.unpack_from(buf, 64)
    p = 66 + count + (-(2 + count) & 3)
    if p > size:
        return _decode_general(buf, bflags, breserved, size, ttrq)
    wire = buf[64:p]
    last_destination = _last_destination
    if wire == last_destination[0]:
        dest = last_destination[1]
    else:
        dest = cached_direct_queue(wire)
        if dest is None:
            return _decode_general(buf, bflags, breserved, size, ttrq)
        _last_destination = (wire, dest)
    tx: TransactionHeader | None = None
    if uflags & _U_TH:
        if not uflags & 0x60 or p + 76 > size:  # DM must be non-zero with TH
            return _decode_general(buf, bflags, breserved, size, ttrq)
        (tflags, seq, number, previous, ack_flags, label_len, mclass, corr, body_type, app_tag,
         msg_size, alloc, privacy, hash_alg, enc_alg, ext_size) = _TX_PROPS_FIXED.unpack_from(
            buf, p)  # fmt: skip
        # TransactionHeader (MS-MQMQ 2.2.20.5): no ConnectorQMGuid (CG), valid numbers.
        if tflags & 1 or number == 0 or previous == 0xFFFFFFFF:
            return _decode_general(buf, bflags, breserved, size, ttrq)
        last_sequence = _last_sequence
        if seq == last_sequence[0]:
            sequence_id = last_sequence[1]
        else:
            sequence_id = cached_tx_sequence_id(seq) or tx_sequence_id_from_u64(seq)
            _last_sequence = (seq, sequence_id)
        tx = _new_tx(sequence_id, number, previous, tflags, None)
        start = p + 20
    else:
        if p + 56 > size:
            return _decode_general(buf, bflags, breserved, size, ttrq)
        (ack_flags, label_len, mclass, corr, body_type, app_tag, msg_size, alloc, privacy, hash_alg,
         enc_alg, ext_size) = _PROPS_FIXED.unpack_from(buf, p)  # fmt: skip
        start = p
    # MessagePropertiesHeader (MS-MQMQ 2.2.19.3): Label, ExtensionData, MessageBody, padding.
    p = start + 56
    label: str | None = None
    if label_len:
        n = label_len * 2
        if label_len > MAX_LABEL_LENGTH or p + n > size or buf[p + n - 2] or buf[p + n - 1]:
            return _decode_general(buf, bflags, breserved, size, ttrq)
        raw = buf[p : p + n - 2]
        label = cached_label(raw) or label_text(raw)
        p += n
    extension = b""
    if ext_size:
        if p + ext_size > size:
            return _decode_general(buf, bflags, breserved, size, ttrq)
        extension = buf[p : p + ext_size]
        p += ext_size
    stop = p + msg_size
    pad = -(stop - start) & 3
    if stop + pad > size:
        return _decode_general(buf, bflags, breserved, size, ttrq)
    # Empty padding / extensions (the usual case) without a slice each.
    props = _new_properties(mclass, buf[p:stop], alloc, label, ack_flags, corr, body_type, app_tag,
                            privacy, hash_alg, enc_alg, extension,
                            buf[stop : stop + pad] if pad else b"")  # fmt: skip
    p = stop + pad
    guids = _last_guids
    if src == guids[0] and qma == guids[1]:
        source_qm, qm_address = guids[2], guids[3]
    else:
        source_qm = cached_guid(src) or guid_from_le(src)
        qm_address = cached_guid(qma) or guid_from_le(qma)
        _last_guids = (src, qma, source_qm, qm_address)
    user = _new_direct_user_header(source_qm, qm_address, sent, mid, dest, ttbr, uflags & ~STRUCTURAL)
    session = SessionHeader.decode(buf, size) if bflags & _SH else None
    message: UserMessage = _new_common_message(user, props, tx, session, buf[p:size] if p < size else b"",
                                               bflags & ~_BASE_STRUCTURAL, ttrq, breserved)  # fmt: skip
    return message


def _decode_general(buf: bytes, bflags: int, breserved: int, size: int, ttrq: int) -> UserMessage:
    """Decode any UserMessage, header by header (every shape MS-MQMQ 2.2.20 allows)."""
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
