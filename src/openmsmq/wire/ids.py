"""Identifiers shared by every MSMQ packet: OBJECTID, MessageIdentifier, TxSequenceID, XACTUOW.

GUIDs travel in their MS-DTYP 2.3.4.2 packet representation (Data1..Data3 little-endian),
which is :attr:`uuid.UUID.bytes_le`.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass
from typing import ClassVar

from openmsmq.errors import WireError

__all__ = [
    "NULL_GUID",
    "ZERO_SEQUENCE_ID",
    "MessageIdentifier",
    "ObjectId",
    "TxSequenceId",
    "XactUow",
    "decode_guid",
    "encode_guid",
]

#: GUID_NULL: all 16 bytes zero.
NULL_GUID = uuid.UUID(int=0)

_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_GUID_U32 = struct.Struct("<16sI")


def encode_guid(guid: uuid.UUID) -> bytes:
    """The 16-byte MS-DTYP 2.3.4.2 encoding of ``guid``."""
    return guid.bytes_le


def decode_guid(
    data: bytes | memoryview, offset: int = 0, *, header: str = "GUID", field: str = "value"
) -> uuid.UUID:
    """Read a 16-byte MS-DTYP GUID at ``offset``; raises :class:`WireError` when truncated."""
    raw = bytes(data[offset : offset + 16])
    if len(raw) != 16:
        raise WireError(header, field, len(raw), "16 bytes")
    return uuid.UUID(bytes_le=raw)


def _check_u32(header: str, field: str, value: int) -> None:
    if not 0 <= value <= 0xFFFFFFFF:
        raise ValueError(f"{header}.{field} must be a u32, got {value!r}")


@dataclass(frozen=True, slots=True)
class ObjectId:
    """OBJECTID (MS-MQMQ 2.2.8): GUID Lineage + u32 Uniquifier, 20 bytes.

    A message's identifier is ``ObjectId(source QM GUID, UserHeader.MessageID)``
    (MS-MQQB 3.1.7.15, 3.1.7.17). ``str()`` gives the MSMQ text form ``{GUID}\\N``.
    """

    lineage: uuid.UUID
    uniquifier: int

    SIZE: ClassVar[int] = 20

    def __post_init__(self) -> None:
        _check_u32("ObjectId", "uniquifier", self.uniquifier)

    def encode(self) -> bytes:
        """The 20-byte wire form."""
        return _GUID_U32.pack(self.lineage.bytes_le, self.uniquifier)

    @classmethod
    def decode(cls, data: bytes | memoryview, offset: int = 0) -> ObjectId:
        """Read 20 bytes at ``offset``."""
        if len(data) - offset < 20:
            raise WireError("ObjectId", "length", len(data) - offset, "20 bytes")
        guid, uniq = _GUID_U32.unpack_from(data, offset)
        return cls(uuid.UUID(bytes_le=guid), uniq)

    def __str__(self) -> str:
        return f"{{{self.lineage}}}\\{self.uniquifier}"


@dataclass(frozen=True, slots=True)
class MessageIdentifier:
    """MessageIdentifier (MS-MQMQ 2.2.18.1.3): sender QM GUID + u32 Ordinal, 20 bytes.

    Same layout as :class:`ObjectId`; admin acknowledgments carry one in CorrelationID.
    """

    queue_manager_guid: uuid.UUID
    ordinal: int

    SIZE: ClassVar[int] = 20

    def __post_init__(self) -> None:
        _check_u32("MessageIdentifier", "ordinal", self.ordinal)

    def encode(self) -> bytes:
        """The 20-byte wire form."""
        return _GUID_U32.pack(self.queue_manager_guid.bytes_le, self.ordinal)

    @classmethod
    def decode(cls, data: bytes | memoryview, offset: int = 0) -> MessageIdentifier:
        """Read 20 bytes at ``offset``."""
        if len(data) - offset < 20:
            raise WireError("MessageIdentifier", "length", len(data) - offset, "20 bytes")
        guid, ordinal = _GUID_U32.unpack_from(data, offset)
        return cls(uuid.UUID(bytes_le=guid), ordinal)

    def to_object_id(self) -> ObjectId:
        """The same identity as an :class:`ObjectId`."""
        return ObjectId(self.queue_manager_guid, self.ordinal)

    @classmethod
    def from_object_id(cls, oid: ObjectId) -> MessageIdentifier:
        """The MessageIdentifier with the same bytes as ``oid``."""
        return cls(oid.lineage, oid.uniquifier)


@dataclass(frozen=True, slots=True, order=True)
class TxSequenceId:
    """TxSequenceID (MS-MQMQ 2.2.18.1.2): 8 bytes, Ordinal (u32) then TimeStamp (u32) on the wire.

    MS-MQMQ 2.2.18.1.2 compares TxSequenceIDs "as a 64-bit unsigned integer with
    Ordinal being the low-order bytes and TimeStamp being the high-order bytes".
    Both parts are u32 (checked when encoding, not on construction: this is a hot path).
    The fields are declared ``timestamp`` first so that the generated ordering
    (field tuple comparison) is exactly that 64-bit order; :attr:`value` is the
    64-bit number, which is also the little-endian u64 read of the 8 wire bytes.
    """

    timestamp: int
    ordinal: int

    SIZE: ClassVar[int] = 8

    @property
    def value(self) -> int:
        """The unsigned 64-bit ``(TimeStamp << 32) | Ordinal``."""
        return (self.timestamp << 32) | self.ordinal

    @classmethod
    def from_int(cls, value: int) -> TxSequenceId:
        """Inverse of :attr:`value`."""
        if not 0 <= value <= 0xFFFFFFFFFFFFFFFF:
            raise ValueError(f"TxSequenceId must be a u64, got {value!r}")
        return cls(value >> 32, value & 0xFFFFFFFF)

    def encode(self) -> bytes:
        """The 8-byte wire form (Ordinal first)."""
        return _U64.pack(self.value)

    @classmethod
    def decode(cls, data: bytes | memoryview, offset: int = 0) -> TxSequenceId:
        """Read 8 bytes at ``offset``."""
        if len(data) - offset < 8:
            raise WireError("TxSequenceId", "length", len(data) - offset, "8 bytes")
        (v,) = _U64.unpack_from(data, offset)
        if cls is TxSequenceId:
            return tx_sequence_id_from_u64(v)
        return cls(v >> 32, v & 0xFFFFFFFF)

    def __str__(self) -> str:
        return f"{self.timestamp:08X}:{self.ordinal:08X}"


#: The all-zero TxSequenceID: "no sequence yet" in the protocol's persistent state.
ZERO_SEQUENCE_ID = TxSequenceId(0, 0)

# Bounded memo of decoded TxSequenceIDs: every message of a transactional sequence
# carries the same one (MS-MQQB 3.1.7.15), so decoders share one immutable value.
_SEQ_CACHE_MAX = 1024
_seq_by_u64: dict[int, TxSequenceId] = {}


def tx_sequence_id_from_u64(value: int) -> TxSequenceId:
    """The TxSequenceId whose 8 wire bytes read as the little-endian u64 ``value`` (memoised).

    For decoders: ``value`` comes from a ``<Q`` unpack, so it is already a u64.
    """
    seq = _seq_by_u64.get(value)
    if seq is None:
        seq = TxSequenceId(value >> 32, value & 0xFFFFFFFF)
        if len(_seq_by_u64) >= _SEQ_CACHE_MAX:
            _seq_by_u64.clear()
        _seq_by_u64[value] = seq
    return seq


#: ``cached_tx_sequence_id(value)``: the memoised TxSequenceId of ``value`` or ``None``
#: (hot decoders inline ``cached_tx_sequence_id(v) or tx_sequence_id_from_u64(v)``).
cached_tx_sequence_id = _seq_by_u64.get


@dataclass(frozen=True, slots=True)
class XactUow:
    """XACTUOW (MS-MQMQ 2.2.18.1.8): 16 raw bytes holding a transaction unit-of-work GUID."""

    guid: uuid.UUID

    SIZE: ClassVar[int] = 16

    def encode(self) -> bytes:
        """The 16-byte wire form."""
        return self.guid.bytes_le

    @classmethod
    def decode(cls, data: bytes | memoryview, offset: int = 0) -> XactUow:
        """Read 16 bytes at ``offset``."""
        return cls(decode_guid(data, offset, header="XACTUOW", field="rgb"))
