"""Internal packets of an MS-MQQB session (MS-MQQB 2.2.1-2.2.3, 2.2.6): EstablishConnection,
ConnectionParameters and SessionAck, each BaseHeader (IN = 1) + InternalHeader + one header.

``base_flags`` keeps the BaseHeader.Flags bits other than IN / SH / DH (which are
derived), ``internal_flags`` the InternalHeader.Flags bits other than PT (so CS).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from openmsmq.errors import LocalProtocolError, WireError
from openmsmq.wire.constants import DEFAULT_PRIORITY, INFINITE, PACKET_SIGNATURE, PACKET_VERSION
from openmsmq.wire.headers import ConnectionParametersHeader, EstablishConnectionHeader, SessionHeader

__all__ = ["ConnectionParameters", "EstablishConnection", "SessionAck", "decode_internal"]

_BASE = struct.Struct("<BBHIII")
_INTERNAL = struct.Struct("<HH")
_IN = 0x0008
_SH = 0x0010
_DH = 0x0020
_BASE_STRUCTURAL = _IN | _SH | _DH


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


_INTERNAL_KINDS = {
    0x1: ("SessionAck", 36),
    0x2: ("EstablishConnection", 572),
    0x3: ("ConnectionParameters", 32),
}


def decode_internal(
    buf: bytes, bflags: int, breserved: int, size: int, ttrq: int
) -> EstablishConnection | ConnectionParameters | SessionAck:
    """Decode an internal packet (BaseHeader.Flags.IN = 1) already framed in ``buf``."""
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
