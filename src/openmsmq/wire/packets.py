"""Packets of an MS-MQQB session (MS-MQQB 2.2, MS-MQMQ 2.2.20) and whole-packet codecs.

Identification (MS-MQQB 3.1.5.1.1): IN = 1 ⇒ InternalHeader.PT selects
SessionAck / EstablishConnection / ConnectionParameters; IN = 0 ⇒ a UserMessage,
reported as :class:`OrderAck` when its destination is ``order_queue$`` and its class
is MQMSG_CLASS_ORDER_ACK, as :class:`FinalAck` when the destination is
``order_queue$`` and the class is >= 0x4000, and as :class:`UserMessage` otherwise.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from openmsmq.errors import WireError
from openmsmq.wire.acks import FinalAck, FinalAckBody, OrderAck, OrderAckBody, classify
from openmsmq.wire.headers import check_base
from openmsmq.wire.internal import ConnectionParameters, EstablishConnection, SessionAck, decode_internal
from openmsmq.wire.message import UserMessage, decode_user_message

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
_IN = 0x0008
_SH = 0x0010
_SESSION_SIZE = 16

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


def decode_packet_body(buf: bytes, flags: int, reserved: int, size: int, ttrq: int) -> Packet:
    """Decode a packet whose BaseHeader fields were already read and validated (stream decoder)."""
    if flags & _IN:
        return decode_internal(buf, flags, reserved, size, ttrq)
    return classify(decode_user_message(buf, flags, reserved, size, ttrq))


def decode_packet(buf: bytes | bytearray | memoryview) -> Packet:
    """Decode exactly one whole packet (trailing SessionHeader included); raises :class:`WireError`."""
    data = bytes(buf)
    if len(data) < 16:
        raise WireError("BaseHeader", "length", len(data), ">= 16 bytes")
    version, reserved, flags, signature, size, ttrq = _BASE.unpack_from(data, 0)
    check_base(version, signature, size)
    # packet_length and decode_packet_body, inlined (one call per packet instead of four).
    if flags & _IN:
        if len(data) != size:
            raise WireError("BaseHeader", "PacketSize", size, f"a packet of {len(data)} bytes (needs {size})")
        return decode_internal(data, flags, reserved, size, ttrq)
    total = size + _SESSION_SIZE if flags & _SH else size
    if len(data) != total:
        raise WireError("BaseHeader", "PacketSize", size, f"a packet of {len(data)} bytes (needs {total})")
    message = decode_user_message(data, flags, reserved, size, ttrq)
    mclass = message.properties.message_class
    # Only class 0x00FF or >= 0x4000 can be an OrderAck / FinalAck (MS-MQQB 3.1.5.1.1).
    return classify(message) if mclass == 0xFF or mclass >= 0x4000 else message


def encode_packets(packets: Iterable[Packet]) -> bytes:
    """Encode many packets into one buffer, for a single socket write."""
    return b"".join([p.encode() for p in packets])
