"""Incremental packet decoder for an MS-MQQB TCP byte stream (sans-I/O).

Framing (packets.md §2, MS-MQMQ 2.2.19.1): read the 16-byte BaseHeader, validate
VersionNumber / Signature / PacketSize at once (so garbage is rejected before its
claimed length has arrived), then wait for the whole packet: PacketSize bytes, plus
16 when a UserMessage (IN = 0) carries a trailing SessionHeader (SH = 1).
"""

from __future__ import annotations

import struct

from openmsmq.errors import WireError
from openmsmq.wire.acks import classify
from openmsmq.wire.constants import MAX_PACKET_SIZE, PACKET_SIGNATURE, PACKET_VERSION
from openmsmq.wire.headers import check_base
from openmsmq.wire.internal import decode_internal
from openmsmq.wire.message import decode_user_message
from openmsmq.wire.packets import Packet

__all__ = ["PacketDecoder"]

_BASE = struct.Struct("<BBHIII")
_IN = 0x0008
_SH = 0x0010


class PacketDecoder:
    """Turns arbitrarily chunked bytes into packets: ``decoder.feed(data) -> list[Packet]``.

    A partial packet is never consumed: its bytes wait in the buffer for the rest.
    The first malformed packet raises :class:`WireError`; the decoder is then
    broken (every later :meth:`feed` raises the same error) and the caller must close
    the session (MS-MQQB 3.1.5.1.3).
    """

    __slots__ = ("_buf", "_error", "_max")

    def __init__(self, max_packet_size: int = MAX_PACKET_SIZE) -> None:
        self._buf = bytearray()
        self._error: WireError | None = None
        self._max = min(max_packet_size, MAX_PACKET_SIZE)

    @property
    def buffered(self) -> int:
        """Bytes received but not yet part of a complete packet."""
        return len(self._buf)

    def check_waiting(self, limit: int, why: str) -> None:
        """Raise :class:`WireError` (and break the decoder) when the partial packet waiting
        in the buffer declares a PacketSize over ``limit``: its sender is not waited for
        (``why`` says what bounds it). Nothing to check without a whole BaseHeader."""
        if self._error is not None:
            raise self._error
        if len(self._buf) < 16:
            return
        size = _BASE.unpack_from(self._buf, 0)[4]
        if size > limit:
            self._error = WireError("BaseHeader", "PacketSize", size, f"<= {limit} {why}")
            self._buf.clear()
            raise self._error

    def feed(self, data: bytes | bytearray | memoryview) -> list[Packet]:
        """Add ``data`` and return every packet it completes, in order."""
        if self._error is not None:
            raise self._error
        buf = self._buf
        buf += data
        out: list[Packet] = []
        max_size = self._max
        pos = 0
        n = len(buf)
        # One copy per packet: bytes of a memoryview slice (bytes(bytearray[a:b]) copies twice).
        # The view must be released before the buffer is resized below.
        view = memoryview(buf)
        try:
            while n - pos >= 16:
                version, reserved, flags, signature, size, ttrq = _BASE.unpack_from(buf, pos)
                # check_base and packet_length / decode_packet_body of wire.packets, inlined:
                # this loop runs once per packet of the session.
                if version != PACKET_VERSION or signature != PACKET_SIGNATURE or size < 20 or size & 3:
                    check_base(version, signature, size)  # raises the rule's WireError
                if size > max_size:
                    check_base(version, signature, size)
                    raise WireError("BaseHeader", "PacketSize", size, f"<= {max_size} (configured limit)")
                if flags & _IN:
                    total = size
                    if n - pos < total:
                        break
                    packet = view[pos : pos + total].tobytes()
                    out.append(decode_internal(packet, flags, reserved, size, ttrq))
                else:
                    # A trailing SessionHeader (SH) is not counted in PacketSize (MS-MQMQ 2.2.19.1).
                    total = size + 16 if flags & _SH else size
                    if n - pos < total:
                        break
                    packet = view[pos : pos + total].tobytes()
                    message = decode_user_message(packet, flags, reserved, size, ttrq)
                    mclass = message.properties.message_class
                    # Only class 0x00FF or >= 0x4000 can be an OrderAck / FinalAck (MS-MQQB 3.1.5.1.1).
                    out.append(classify(message) if mclass == 0xFF or mclass >= 0x4000 else message)
                pos += total
        except WireError as exc:
            self._error = exc
            raise
        finally:
            view.release()
        if pos:
            del buf[:pos]
        return out
