"""Fixed-layout headers of MS-MQQB packets: BaseHeader, InternalHeader, EstablishConnectionHeader,
ConnectionParametersHeader, SessionHeader, TransactionHeader, DebugHeader.

Each header is a frozen dataclass with ``encode() -> bytes`` and
``decode(buf, offset=0)``; decoders raise only :class:`~openmsmq.errors.WireError`.
Variable-length headers live in :mod:`openmsmq.wire.userheader` and
:mod:`openmsmq.wire.extra`.
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field
from typing import ClassVar

from openmsmq.errors import WireError
from openmsmq.wire.constants import (
    DEFAULT_WINDOW_SIZE,
    ESTABLISH_CONNECTION_PADDING_BYTE,
    INFINITE,
    MAX_PACKET_SIZE,
    PACKET_SIGNATURE,
    PACKET_VERSION,
    TX_ID_SHIFT,
    OperatingSystemFlag,
)
from openmsmq.wire.fast import fast_constructor
from openmsmq.wire.ids import TxSequenceId, tx_sequence_id_from_u64
from openmsmq.wire.util import cached_guid, guid_from_le, guid_to_le, need, truncated

__all__ = [
    "BaseHeader",
    "ConnectionParametersHeader",
    "DebugHeader",
    "EstablishConnectionHeader",
    "InternalHeader",
    "SessionHeader",
    "TransactionHeader",
]

_BASE = struct.Struct("<BBHIII")
_INTERNAL = struct.Struct("<HH")
_EC = struct.Struct("<16s16sIHH")
_CP = struct.Struct("<IIHH")
_SESSION = struct.Struct("<HHIHHHH")
_TX = struct.Struct("<IQII")
_DEBUG = struct.Struct("<HH")

_EC_PADDING = bytes([ESTABLISH_CONNECTION_PADDING_BYTE]) * 512


@dataclass(frozen=True, slots=True)
class BaseHeader:
    """BaseHeader (MS-MQMQ 2.2.19.1), 16 bytes, first in every packet.

    ``flags`` is the raw Flags word (:class:`~openmsmq.wire.constants.BaseFlag`).
    Packet classes do not store a BaseHeader: they derive PacketSize and the
    structural flag bits (IN, SH, DH) when encoding.
    """

    flags: int
    packet_size: int
    time_to_reach_queue: int = INFINITE
    reserved: int = 0

    SIZE: ClassVar[int] = 16

    @property
    def priority(self) -> int:
        """Flags.PR, 0-7."""
        return self.flags & 0x7

    def encode(self) -> bytes:
        """The 16 wire bytes."""
        return _BASE.pack(
            PACKET_VERSION,
            self.reserved,
            self.flags,
            PACKET_SIGNATURE,
            self.packet_size,
            self.time_to_reach_queue,
        )

    @classmethod
    def decode(cls, buf: bytes | bytearray | memoryview, offset: int = 0) -> BaseHeader:
        """Decode and validate VersionNumber, Signature and PacketSize (MS-MQQB 3.1.5.1.2)."""
        if len(buf) - offset < 16:
            raise WireError("BaseHeader", "length", len(buf) - offset, "16 bytes")
        version, reserved, flags, signature, size, ttrq = _BASE.unpack_from(buf, offset)
        check_base(version, signature, size)
        return cls(flags, size, ttrq, reserved)


def check_base(version: int, signature: int, size: int) -> None:
    """The BaseHeader rules of MS-MQMQ 2.2.19.1 / MS-MQQB 3.1.5.1.2 that need no other header."""
    if version != PACKET_VERSION:
        raise WireError("BaseHeader", "VersionNumber", hex(version), "0x10")
    if signature != PACKET_SIGNATURE:
        raise WireError("BaseHeader", "Signature", hex(signature), "0x524F494C ('LIOR')")
    if size > MAX_PACKET_SIZE:
        raise WireError("BaseHeader", "PacketSize", size, f"<= {MAX_PACKET_SIZE} (4 MiB)")
    if size < 20:
        raise WireError("BaseHeader", "PacketSize", size, ">= 20 (BaseHeader plus a following header)")
    if size & 3:
        raise WireError("BaseHeader", "PacketSize", size, "a multiple of 4 (headers are 4-byte aligned)")


@dataclass(frozen=True, slots=True)
class InternalHeader:
    """InternalHeader (MS-MQQB 2.2.1), 4 bytes after the BaseHeader of internal packets.

    ``flags`` is the raw Flags word: PT in bits 0-3, CS in bit 4.
    """

    flags: int
    reserved: int = 0

    SIZE: ClassVar[int] = 4

    @property
    def packet_type(self) -> int:
        """Flags.PT (:class:`~openmsmq.wire.constants.PacketType`)."""
        return self.flags & 0xF

    @property
    def connection_refused(self) -> bool:
        """Flags.CS."""
        return bool(self.flags & 0x10)

    def encode(self) -> bytes:
        """The 4 wire bytes."""
        return _INTERNAL.pack(self.reserved, self.flags)

    @classmethod
    def decode(cls, buf: bytes | bytearray | memoryview, offset: int = 0) -> InternalHeader:
        """Decode the 4 bytes at ``offset`` (PT is validated by the packet decoder)."""
        need("InternalHeader", "length", offset, 4, len(buf))
        reserved, flags = _INTERNAL.unpack_from(buf, offset)
        return cls(flags, reserved)


@dataclass(frozen=True, slots=True)
class EstablishConnectionHeader:
    """EstablishConnectionHeader (MS-MQQB 2.2.3.1), 552 bytes.

    ``operating_system`` is the raw OperatingSystem word
    (:class:`~openmsmq.wire.constants.OperatingSystemFlag`; RE MUST be 0x10).
    ``padding`` holds the 512 padding bytes: 0x5A in a response (MUST), uninitialized
    in a request; it does not take part in equality.
    """

    client_guid: uuid.UUID
    server_guid: uuid.UUID
    timestamp: int
    operating_system: int = 0x0010
    reserved: int = 0
    padding: bytes = field(default=_EC_PADDING, compare=False, repr=False)

    SIZE: ClassVar[int] = 552

    @property
    def ping_not_sent(self) -> bool:
        """OperatingSystem.SE: 1 = no Ping Request was sent while creating this session."""
        return bool(self.operating_system & OperatingSystemFlag.SE)

    @property
    def server_os(self) -> bool:
        """OperatingSystem.OS: the initiator runs a server-class OS."""
        return bool(self.operating_system & OperatingSystemFlag.OS)

    def encode(self) -> bytes:
        """The 552 wire bytes."""
        pad = self.padding if len(self.padding) == 512 else _EC_PADDING
        return (
            _EC.pack(
                guid_to_le(self.client_guid),
                guid_to_le(self.server_guid),
                self.timestamp,
                self.operating_system,
                self.reserved,
            )
            + pad
        )

    @classmethod
    def decode(cls, buf: bytes | bytearray | memoryview, offset: int = 0) -> EstablishConnectionHeader:
        """Decode the 552 bytes at ``offset``."""
        need("EstablishConnectionHeader", "length", offset, 552, len(buf))
        client, server, ts, os_flags, reserved = _EC.unpack_from(buf, offset)
        pad = bytes(buf[offset + 40 : offset + 552])
        return cls(guid_from_le(client), guid_from_le(server), ts, os_flags, reserved, pad)


@dataclass(frozen=True, slots=True)
class ConnectionParametersHeader:
    """ConnectionParametersHeader (MS-MQQB 2.2.2.1), 12 bytes.

    Ranges (enforced by the session state machine, not the codec): RecoverableAckTimeout
    500-120000 ms, AckTimeout 20000-120000 ms, WindowSize 0-0xFFFF.
    """

    recoverable_ack_timeout: int
    ack_timeout: int
    window_size: int = DEFAULT_WINDOW_SIZE
    reserved: int = 0

    SIZE: ClassVar[int] = 12

    def encode(self) -> bytes:
        """The 12 wire bytes."""
        return _CP.pack(self.recoverable_ack_timeout, self.ack_timeout, self.reserved, self.window_size)

    @classmethod
    def decode(cls, buf: bytes | bytearray | memoryview, offset: int = 0) -> ConnectionParametersHeader:
        """Decode the 12 bytes at ``offset``."""
        need("ConnectionParametersHeader", "length", offset, 12, len(buf))
        rat, at, reserved, window = _CP.unpack_from(buf, offset)
        return cls(rat, at, window, reserved)


@dataclass(frozen=True, slots=True)
class SessionHeader:
    """SessionHeader (MS-MQMQ 2.2.20.4), 16 bytes: session acknowledgment state.

    Stand-alone in a SessionAck packet, or the last element of a UserMessage
    (BaseHeader.Flags.SH), where it is not counted in PacketSize (MS-MQMQ 2.2.19.1).
    """

    ack_sequence_number: int
    recoverable_msg_ack_seq_number: int = 0
    recoverable_msg_ack_flags: int = 0
    user_msg_sequence_number: int = 0
    recoverable_msg_seq_number: int = 0
    window_size: int = DEFAULT_WINDOW_SIZE
    reserved: int = 0

    SIZE: ClassVar[int] = 16

    def encode(self) -> bytes:
        """The 16 wire bytes."""
        return _SESSION.pack(
            self.ack_sequence_number,
            self.recoverable_msg_ack_seq_number,
            self.recoverable_msg_ack_flags,
            self.user_msg_sequence_number,
            self.recoverable_msg_seq_number,
            self.window_size,
            self.reserved,
        )

    @classmethod
    def decode(cls, buf: bytes | bytearray | memoryview, offset: int = 0) -> SessionHeader:
        """Decode the 16 bytes at ``offset``; WindowSize MUST be 0x0001-0xFFFF."""
        if offset + 16 > len(buf):
            truncated("SessionHeader", "length", offset, 16, len(buf))
        v = _SESSION.unpack_from(buf, offset)
        if v[5] == 0:
            raise WireError("SessionHeader", "WindowSize", 0, "0x0001..0xFFFF")
        if cls is SessionHeader:
            return _new_session(*v)
        return cls(*v)


_new_session = fast_constructor(SessionHeader)


@dataclass(frozen=True, slots=True)
class TransactionHeader:
    """TransactionHeader (MS-MQMQ 2.2.20.5): 20 bytes, 36 with ConnectorQMGuid.

    ``flags`` is the raw Flags word without CG, which is derived from
    ``connector_qm_guid`` (:class:`~openmsmq.wire.constants.TransactionFlag`).
    """

    tx_sequence_id: TxSequenceId
    tx_sequence_number: int
    previous_tx_sequence_number: int
    flags: int = 0
    connector_qm_guid: uuid.UUID | None = None

    @property
    def final_ack_required(self) -> bool:
        """Flags.FA: the sender wants a FinalAck."""
        return bool(self.flags & 0x2)

    @property
    def first_in_transaction(self) -> bool:
        """Flags.FM."""
        return bool(self.flags & 0x4)

    @property
    def last_in_transaction(self) -> bool:
        """Flags.LM."""
        return bool(self.flags & 0x8)

    @property
    def transaction_id(self) -> int:
        """Flags.ID, the 20-bit transaction correlation identifier."""
        return (self.flags >> TX_ID_SHIFT) & 0xFFFFF

    @staticmethod
    def make_flags(
        *, final_ack: bool = False, first: bool = False, last: bool = False, transaction_id: int = 0
    ) -> int:
        """Compose a Flags word (without CG)."""
        if not 0 <= transaction_id <= 0xFFFFF:
            raise ValueError(f"transaction_id must fit in 20 bits, got {transaction_id!r}")
        return (final_ack << 1) | (first << 2) | (last << 3) | (transaction_id << TX_ID_SHIFT)

    @property
    def size(self) -> int:
        """Encoded size: 20 or 36."""
        return 20 if self.connector_qm_guid is None else 36

    def encode(self) -> bytes:
        """The wire bytes."""
        seq = self.tx_sequence_id
        if self.connector_qm_guid is None:
            return _TX.pack(
                self.flags & ~1,
                (seq.timestamp << 32) | seq.ordinal,
                self.tx_sequence_number,
                self.previous_tx_sequence_number,
            )
        return _TX.pack(
            self.flags | 1,
            (seq.timestamp << 32) | seq.ordinal,
            self.tx_sequence_number,
            self.previous_tx_sequence_number,
        ) + guid_to_le(self.connector_qm_guid)

    @classmethod
    def decode(cls, buf: bytes | bytearray | memoryview, offset: int = 0) -> TransactionHeader:
        """Decode at ``offset`` (see :func:`decode_transaction_header`)."""
        return decode_transaction_header(buf, offset, len(buf))[0]


def decode_transaction_header(
    buf: bytes | bytearray | memoryview, off: int, end: int
) -> tuple[TransactionHeader, int]:
    """Decode a TransactionHeader at ``off`` that must end by ``end``; returns it and its end."""
    if off + 20 > end:
        truncated("TransactionHeader", "length", off, 20, end)
    flags, seq, number, previous = _TX.unpack_from(buf, off)
    if number == 0:
        raise WireError("TransactionHeader", "TxSequenceNumber", 0, "0x00000001..0xFFFFFFFF")
    if previous == 0xFFFFFFFF:
        raise WireError(
            "TransactionHeader", "PreviousTxSequenceNumber", hex(previous), "0x00000000..0xFFFFFFFE"
        )
    tx_id = tx_sequence_id_from_u64(seq)
    if flags & 1:
        need("TransactionHeader", "ConnectorQMGuid", off + 20, 16, end)
        raw = bytes(buf[off + 20 : off + 36])
        guid = cached_guid(raw) or guid_from_le(raw)
        return _new_tx(tx_id, number, previous, flags & ~1, guid), off + 36
    return _new_tx(tx_id, number, previous, flags, None), off + 20


_new_tx = fast_constructor(TransactionHeader)


@dataclass(frozen=True, slots=True)
class DebugHeader:
    """DebugHeader (MS-MQMQ 2.2.20.8): 4 bytes, 20 with the report QueueIdentifier.

    ``flags`` holds the Flags bits other than QT, which is derived from
    ``queue_identifier`` (QT = 1 iff present; QT 2 and 3 are undefined).
    """

    queue_identifier: uuid.UUID | None = None
    flags: int = 0
    reserved: int = 0

    @property
    def size(self) -> int:
        """Encoded size: 4 or 20."""
        return 4 if self.queue_identifier is None else 20

    def encode(self) -> bytes:
        """The wire bytes."""
        if self.queue_identifier is None:
            return _DEBUG.pack(self.flags & ~3, self.reserved)
        return _DEBUG.pack((self.flags & ~3) | 1, self.reserved) + guid_to_le(self.queue_identifier)

    @classmethod
    def decode(cls, buf: bytes | bytearray | memoryview, offset: int = 0) -> DebugHeader:
        """Decode at ``offset`` (see :func:`decode_debug_header`)."""
        return decode_debug_header(buf, offset, len(buf))[0]


def decode_debug_header(buf: bytes | bytearray | memoryview, off: int, end: int) -> tuple[DebugHeader, int]:
    """Decode a DebugHeader at ``off`` that must end by ``end``; returns it and its end."""
    need("DebugHeader", "length", off, 4, end)
    flags, reserved = _DEBUG.unpack_from(buf, off)
    qt = flags & 3
    if qt == 0:
        return _new_debug(None, flags, reserved), off + 4
    if qt != 1:
        raise WireError("DebugHeader", "Flags.QT", qt, "0x0 (no queue) or 0x1 (public queue GUID)")
    need("DebugHeader", "QueueIdentifier", off + 4, 16, end)
    return _new_debug(guid_from_le(bytes(buf[off + 4 : off + 20])), flags & ~3, reserved), off + 20


_new_debug = fast_constructor(DebugHeader)
