"""UserHeader (MS-MQMQ 2.2.19.2) and its queue-format fields (MS-MQMQ 2.2.18.1.5, 2.2.18.1.7).

The DQ / AQ / RQ flag bits of the UserHeader are derived from the queue objects:

=========================================  ===============  ===========================
object                                     type value       wire structure
=========================================  ===============  ===========================
``None``                                   0x0              absent
:data:`SAME_AS_ADMIN` (RQ only)            0x1              absent
:class:`PrivateQueueFormatNameId`          its ``kind``     u32 PrivateQueueIdentifier
                                           (0x2, 0x3, 0x4)
:class:`PublicQueueFormatName`             0x5              16-byte queue GUID
:class:`PrivateQueueFormatName`            0x6              QM GUID + u32 identifier
:class:`DirectQueueFormatName`             0x7              u16 Count + UTF-16 + padding
=========================================  ===============  ===========================
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field
from enum import Enum
from typing import Final

from openmsmq.errors import LocalProtocolError, WireError
from openmsmq.wire.constants import (
    ADMIN_QUEUE_TYPES,
    DESTINATION_QUEUE_TYPES,
    INFINITE,
    ORDER_QUEUE_ID,
    QueueFormatType,
)
from openmsmq.wire.fast import fast_constructor
from openmsmq.wire.util import (
    U16,
    U32,
    cached_guid,
    guid_from_le,
    guid_to_le,
    need,
    pad4,
    padding_bytes,
    to_utf16,
    truncated,
    utf16,
)

__all__ = [
    "SAME_AS_ADMIN",
    "DirectQueueFormatName",
    "PrivateQueueFormatName",
    "PrivateQueueFormatNameId",
    "PublicQueueFormatName",
    "QueueFormat",
    "SameAsAdmin",
    "UserHeader",
]


@dataclass(frozen=True, slots=True)
class PrivateQueueFormatNameId:
    """PrivateQueueFormatNameId (MS-MQMQ 2.2.18.1.5.1): u32 PrivateQueueIdentifier.

    ``kind`` says on which QM the private queue lives: 0x3 destination QM (DQ/AQ/RQ),
    0x2 source QM (AQ/RQ), 0x4 the admin queue's QM (RQ only).
    """

    identifier: int
    kind: int = QueueFormatType.PRIVATE_ON_DESTINATION

    @property
    def is_order_queue(self) -> bool:
        """True for ``order_queue$`` (identifier 0x00000004, MS-MQQB 2.2.4)."""
        return self.identifier == ORDER_QUEUE_ID


@dataclass(frozen=True, slots=True)
class PublicQueueFormatName:
    """PublicQueueFormatName (MS-MQMQ 2.2.18.1.7.1): the 16-byte public queue GUID (type 0x5)."""

    queue_guid: uuid.UUID


@dataclass(frozen=True, slots=True)
class PrivateQueueFormatName:
    """PrivateQueueFormatName (MS-MQMQ 2.2.18.1.7.2): hosting QM GUID + u32 identifier (type 0x6)."""

    queue_manager_guid: uuid.UUID
    identifier: int


@dataclass(frozen=True, slots=True)
class DirectQueueFormatName:
    """DirectQueueFormatName (MS-MQMQ 2.2.18.1.5.2), type 0x7.

    ``name`` is the direct format name without ``DIRECT=``, e.g. ``TCP:10.0.0.1\\PRIVATE$\\q``.
    On the wire: u16 Count (bytes of the UTF-16 string incl. its null), the string,
    then padding to a 4-byte boundary. ``padding`` keeps the observed padding bytes
    (values are unconstrained) for byte-exact re-encoding; it is not compared.
    """

    name: str
    padding: bytes = field(default=b"", compare=False, repr=False)

    @property
    def is_order_queue(self) -> bool:
        """True when the queue is ``...\\PRIVATE$\\order_queue$`` (MS-MQQB 2.2.4)."""
        return self.name.lower().endswith("\\private$\\order_queue$")


class SameAsAdmin(Enum):
    """ResponseQueue type 0x1: the response queue is the admin queue (no field on the wire)."""

    SAME_AS_ADMIN = 1


#: The only :class:`SameAsAdmin` value.
SAME_AS_ADMIN: Final = SameAsAdmin.SAME_AS_ADMIN

#: Any queue-format field of a UserHeader.
QueueFormat = (
    PrivateQueueFormatNameId | PublicQueueFormatName | PrivateQueueFormatName | DirectQueueFormatName
)

_FIXED = struct.Struct("<16s16sIIII")
# Bounded memo caches of direct format names (a QM talks to few queues): wire bytes <-> value.
_CACHE_MAX = 1024
_direct_by_wire: dict[bytes, DirectQueueFormatName] = {}
_direct_wire: dict[tuple[str, bytes], bytes] = {}
# ... and of private queue ids (order_queue$ in every OrderAck/FinalAck): (identifier << 3 | kind) -> value.
_private_id_by_key: dict[int, PrivateQueueFormatNameId] = {}
#: ``cached_direct_queue(wire)``: the DirectQueueFormatName already decoded from the whole
#: wire field ``wire`` (Count, string, padding), or ``None``. Entries were validated when
#: first decoded, so the UserMessage fast path trusts a hit.
cached_direct_queue = _direct_by_wire.get
_HDR = "UserHeader"


def _queue_type(q: QueueFormat | SameAsAdmin | None) -> int:
    if q is None:
        return 0
    if type(q) is PrivateQueueFormatNameId:
        return q.kind
    if type(q) is DirectQueueFormatName:
        return 7
    if type(q) is PublicQueueFormatName:
        return 5
    if type(q) is PrivateQueueFormatName:
        return 6
    return 1


#: ``cached_direct_wire((name, padding))``: the memoised wire field of a DirectQueueFormatName
#: or ``None`` (the UserMessage fast path inlines ``... or direct_queue_wire(q)``).
cached_direct_wire = _direct_wire.get


def direct_queue_wire(q: DirectQueueFormatName) -> bytes:
    """The wire field of a DirectQueueFormatName: Count, UTF-16 string with null, padding (memoised)."""
    key = (q.name, q.padding)
    wire = _direct_wire.get(key)
    if wire is None:
        raw = to_utf16(q.name) + b"\x00\x00"
        n = pad4(2 + len(raw))
        wire = U16.pack(len(raw)) + raw + padding_bytes(q.padding, n)
        if len(_direct_wire) >= _CACHE_MAX:
            _direct_wire.clear()
        _direct_wire[key] = wire
    return wire


def _encode_queue(q: QueueFormat | SameAsAdmin) -> bytes:
    """The wire bytes of a present queue field (b"" for :data:`SAME_AS_ADMIN`)."""
    if type(q) is DirectQueueFormatName:
        return direct_queue_wire(q)
    if type(q) is PrivateQueueFormatNameId:
        return U32.pack(q.identifier)
    if type(q) is PublicQueueFormatName:
        return guid_to_le(q.queue_guid)
    if type(q) is PrivateQueueFormatName:
        return guid_to_le(q.queue_manager_guid) + U32.pack(q.identifier)
    return b""


def _decode_queue(
    buf: bytes, off: int, end: int, qtype: int, name: str
) -> tuple[QueueFormat | SameAsAdmin | None, int]:
    """Decode one queue field of type ``qtype`` at ``off``; every field starts 4-aligned."""
    if qtype == 0:
        return None, off
    if qtype == 7:
        if off + 2 > end:
            truncated(_HDR, f"{name}.Count", off, 2, end)
        (count,) = U16.unpack_from(buf, off)
        stop = off + 2 + count
        full = stop + pad4(2 + count)
        if full <= end:
            cached = _direct_by_wire.get(buf[off:full])
            if cached is not None:
                return cached, full
        if count < 2 or count & 1:
            raise WireError(_HDR, f"{name}.Count", count, "an even byte count >= 2 (UTF-16 incl. null)")
        start = off + 2
        need(_HDR, f"{name}.DirectFormatName", start, count, end)
        stop = start + count
        if buf[stop - 2] or buf[stop - 1]:
            raise WireError(
                _HDR, f"{name}.DirectFormatName", "no terminating null", "a null-terminated string"
            )
        n = pad4(2 + count)
        need(_HDR, f"{name}.padding", stop, n, end)
        queue = DirectQueueFormatName(utf16(buf[start : stop - 2]), buf[stop : stop + n])
        if len(_direct_by_wire) >= _CACHE_MAX:
            _direct_by_wire.clear()
        _direct_by_wire[buf[off : stop + n]] = queue
        return queue, stop + n
    if qtype in (2, 3, 4):
        need(_HDR, name, off, 4, end)
        key = (U32.unpack_from(buf, off)[0] << 3) | qtype
        private_id = _private_id_by_key.get(key)
        if private_id is None:
            private_id = PrivateQueueFormatNameId(key >> 3, qtype)
            if len(_private_id_by_key) >= _CACHE_MAX:
                _private_id_by_key.clear()
            _private_id_by_key[key] = private_id
        return private_id, off + 4
    if qtype == 5:
        need(_HDR, name, off, 16, end)
        return PublicQueueFormatName(guid_from_le(buf[off : off + 16])), off + 16
    if qtype == 6:
        need(_HDR, name, off, 20, end)
        return PrivateQueueFormatName(
            guid_from_le(buf[off : off + 16]), U32.unpack_from(buf, off + 16)[0]
        ), off + 20
    return SAME_AS_ADMIN, off  # qtype 1, RQ only (callers validate the allowed sets)


@dataclass(frozen=True, slots=True)
class UserHeader:
    """UserHeader (MS-MQMQ 2.2.19.2): 48 bytes + queue fields + optional ConnectorType.

    ``flags`` keeps only the Flags bits that are not derived from the packet's
    structure: RC (hop count), DM (delivery mode), JN, JP and the reserved bits.
    DQ/AQ/RQ come from the queue objects, CQ from ``connector_type``, MP is always
    set, and SH/TH/MQ/HH are supplied by the enclosing UserMessage.
    """

    source_queue_manager: uuid.UUID
    queue_manager_address: uuid.UUID
    sent_time: int
    message_id: int
    destination_queue: QueueFormat | None
    admin_queue: QueueFormat | None = None
    response_queue: QueueFormat | SameAsAdmin | None = None
    time_to_be_received: int = INFINITE
    flags: int = 0
    connector_type: uuid.UUID | None = None

    @property
    def hop_count(self) -> int:
        """Flags.RC."""
        return self.flags & 0x1F

    @property
    def delivery_mode(self) -> int:
        """Flags.DM (:class:`~openmsmq.wire.constants.DeliveryMode`)."""
        return (self.flags >> 5) & 0x3

    @property
    def negative_journaling(self) -> bool:
        """Flags.JN."""
        return bool(self.flags & 0x100)

    @property
    def positive_journaling(self) -> bool:
        """Flags.JP."""
        return bool(self.flags & 0x200)

    @staticmethod
    def make_flags(
        *,
        hop_count: int = 0,
        delivery_mode: int = 0,
        negative_journaling: bool = False,
        positive_journaling: bool = False,
    ) -> int:
        """Compose :attr:`flags` from its parts."""
        if not 0 <= hop_count <= 0x1F:
            raise ValueError(f"hop_count must fit in 5 bits, got {hop_count!r}")
        if not 0 <= delivery_mode <= 3:
            raise ValueError(f"delivery_mode must fit in 2 bits, got {delivery_mode!r}")
        return hop_count | (delivery_mode << 5) | (negative_journaling << 8) | (positive_journaling << 9)

    def queue_flags(self) -> int:
        """The DQ | AQ | RQ | CQ | MP bits this header's fields imply."""
        dq = _queue_type(self.destination_queue)
        aq = 0 if self.admin_queue is None else _queue_type(self.admin_queue)
        rq = 0 if self.response_queue is None else _queue_type(self.response_queue)
        if dq not in DESTINATION_QUEUE_TYPES:
            raise LocalProtocolError(f"UserHeader.DestinationQueue: type {dq} not allowed (0, 3, 5, 7)")
        if aq not in ADMIN_QUEUE_TYPES:
            raise LocalProtocolError(f"UserHeader.AdminQueue: type {aq} not allowed (0, 2, 3, 5, 6, 7)")
        bits = (dq << 10) | (aq << 13) | (rq << 16) | 0x00200000
        if self.connector_type is not None:
            bits |= 0x00400000
        return bits

    def encode(self, header_flags: int = 0) -> bytes:
        """The wire bytes; ``header_flags`` adds the SH / TH / MQ / HH bits of a UserMessage."""
        flags = (self.flags & ~STRUCTURAL) | self.queue_flags() | header_flags
        out = _FIXED.pack(
            guid_to_le(self.source_queue_manager),
            guid_to_le(self.queue_manager_address),
            self.time_to_be_received,
            self.sent_time,
            self.message_id,
            flags,
        )
        # Queue fields in wire order; absent ones (None) take no bytes.
        if self.destination_queue is not None:
            out += _encode_queue(self.destination_queue)
        if self.admin_queue is not None:
            out += _encode_queue(self.admin_queue)
        if self.response_queue is not None:
            out += _encode_queue(self.response_queue)
        if self.connector_type is not None:
            out += guid_to_le(self.connector_type)
        return out

    @classmethod
    def decode(cls, buf: bytes, offset: int = 0) -> UserHeader:
        """Decode at ``offset``; the SH/TH/MQ/HH bits (other headers) are ignored here."""
        return decode_user_header(buf, offset, len(buf))[0]


#: Flags bits that :class:`UserHeader` derives instead of storing.
STRUCTURAL: Final = 0x10FFFC00
_MP: Final = 0x00200000
_AH: Final = 0x02000000


_new_user_header = fast_constructor(UserHeader)


def decode_user_header(buf: bytes, off: int, end: int) -> tuple[UserHeader, int, int]:
    """Decode a UserHeader at ``off`` ending by ``end``; returns (header, raw Flags, end offset)."""
    if off + 48 > end:
        truncated(_HDR, "length", off, 48, end)
    src, qma, ttbr, sent, mid, flags = _FIXED.unpack_from(buf, off)
    if not flags & _MP:
        raise WireError(_HDR, "Flags.MP", 0, "1 (MessagePropertiesHeader MUST be present)")
    if flags & _AH:
        raise WireError(_HDR, "Flags.AH", 1, "0 (MUST NOT be set on MS-MQQB)")
    dq = (flags >> 10) & 7
    aq = (flags >> 13) & 7
    rq = (flags >> 16) & 7
    if dq not in DESTINATION_QUEUE_TYPES:
        raise WireError(_HDR, "Flags.DQ", dq, "one of 0x0, 0x3, 0x5, 0x7")
    if aq not in ADMIN_QUEUE_TYPES:
        raise WireError(_HDR, "Flags.AQ", aq, "one of 0x0, 0x2, 0x3, 0x5, 0x6, 0x7")
    if flags & 0x00100000 and not flags & 0x60:
        raise WireError(_HDR, "Flags.DM", 0, "non-zero when Flags.TH is set (transactional is recoverable)")
    p = off + 48
    # Absent fields (type 0) are the common case for AdminQueue / ResponseQueue.
    dest = admin = resp = None
    if dq:
        dest, p = _decode_queue(buf, p, end, dq, "DestinationQueue")
    if aq:
        admin, p = _decode_queue(buf, p, end, aq, "AdminQueue")
    if rq:
        resp, p = _decode_queue(buf, p, end, rq, "ResponseQueue")
    connector: uuid.UUID | None = None
    if flags & 0x00400000:
        need(_HDR, "ConnectorType", p, 16, end)
        connector = guid_from_le(buf[p : p + 16])
        p += 16
    header: UserHeader = _new_user_header(
        cached_guid(src) or guid_from_le(src),
        cached_guid(qma) or guid_from_le(qma),
        sent,
        mid,
        dest,  # dq is never 1, so never SAME_AS_ADMIN
        admin,  # aq is never 1
        resp,
        ttbr,
        flags & ~STRUCTURAL,
        connector,
    )
    return header, flags, p
