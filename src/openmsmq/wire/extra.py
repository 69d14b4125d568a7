"""Optional UserMessage headers that openmsmq carries but does not interpret:
SecurityHeader (MS-MQMQ 2.2.20.6), SoapHeader (2.2.20.7) and MultiQueueFormatHeader
(2.2.20.1-2.2.20.3 with MQFFormatNameElement, 2.2.18.1.4).

They are decoded far enough to know their length and validate their framing, and
re-encoded byte for byte (observed padding bytes are kept, outside equality).
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

from openmsmq.errors import LocalProtocolError, WireError
from openmsmq.wire.constants import MQFFormatType, MQFHeaderId, SoapSectionId
from openmsmq.wire.util import U16, U32, guid_from_le, guid_to_le, need, pad4, padding_bytes, to_utf16, utf16

__all__ = [
    "MQFAddressHeader",
    "MQFFormatNameElement",
    "MQFSignatureHeader",
    "MultiQueueFormatHeader",
    "SecurityHeader",
    "SoapHeader",
]

_SEC = struct.Struct("<HHHHII")
_SOAP_SECTION = struct.Struct("<HHI")
_MQF_ADDR = struct.Struct("<IHHI")
_MQF_SIG = struct.Struct("<HHI")
_NO_PADS: tuple[bytes, ...] = ()


# ---------------------------------------------------------------------------
# SecurityHeader
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SecurityHeader:
    """SecurityHeader (MS-MQMQ 2.2.20.6): 16 bytes + SecurityData, opaque to openmsmq.

    The five SecurityData items are kept as bytes (their sizes are derived); each is
    padded to a 4-byte boundary on the wire. ``paddings`` keeps the observed padding
    of each item (not compared). Security is not implemented: a queue manager
    carries the header through and does not authenticate or decrypt.
    """

    flags: int
    sender_id: bytes = b""
    encryption_key: bytes = b""
    signature: bytes = b""
    sender_cert: bytes = b""
    provider_info: bytes = b""
    paddings: tuple[bytes, ...] = field(default=_NO_PADS, compare=False, repr=False)

    @property
    def sender_id_type(self) -> int:
        """Flags.ST (:class:`~openmsmq.wire.constants.SenderIdType`)."""
        return self.flags & 0xF

    @property
    def size(self) -> int:
        """Encoded size."""
        items = (self.sender_id, self.encryption_key, self.signature, self.sender_cert, self.provider_info)
        return 16 + sum(len(i) + pad4(len(i)) for i in items)

    def encode(self) -> bytes:
        """The wire bytes."""
        items = (self.sender_id, self.encryption_key, self.signature, self.sender_cert, self.provider_info)
        out = [
            _SEC.pack(
                self.flags,
                len(self.sender_id),
                len(self.encryption_key),
                len(self.signature),
                len(self.sender_cert),
                len(self.provider_info),
            )
        ]
        pads = self.paddings if len(self.paddings) == 5 else ((b"",) * 5)
        for item, pad in zip(items, pads, strict=True):
            out.append(item)
            out.append(padding_bytes(pad, pad4(len(item))))
        return b"".join(out)

    @classmethod
    def decode(cls, buf: bytes, offset: int = 0) -> SecurityHeader:
        """Decode at ``offset`` (see :func:`decode_security_header`)."""
        return decode_security_header(buf, offset, len(buf))[0]


def decode_security_header(buf: bytes, off: int, end: int) -> tuple[SecurityHeader, int]:
    """Decode a SecurityHeader at ``off`` that must end by ``end``; returns it and its end."""
    hdr = "SecurityHeader"
    need(hdr, "length", off, 16, end)
    flags, *sizes = _SEC.unpack_from(buf, off)
    if flags & 0xF > 2:
        raise WireError(hdr, "Flags.ST", flags & 0xF, "0 (none), 1 (SID) or 2 (QM GUID)")
    if not any(sizes):
        raise WireError(hdr, "sizes", 0, "at least one of SenderIdSize..ProviderInfoSize non-zero")
    if sizes[3] > 0xFFFF:
        raise WireError(hdr, "SenderCertSize", sizes[3], "<= 0xFFFF")
    p = off + 16
    items: list[bytes] = []
    pads: list[bytes] = []
    names = ("SecurityID", "EncryptionKey", "Signature", "SenderCert", "ProviderInfo")
    for name, size in zip(names, sizes, strict=True):
        n = pad4(size)
        need(hdr, f"SecurityData.{name}", p, size + n, end)
        items.append(buf[p : p + size])
        pads.append(buf[p + size : p + size + n])
        p += size + n
    return SecurityHeader(flags, items[0], items[1], items[2], items[3], items[4], tuple(pads)), p


# ---------------------------------------------------------------------------
# SoapHeader
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SoapHeader:
    """SoapHeader (MS-MQMQ 2.2.20.7): application-defined SOAP header and body strings.

    ``header`` and ``body`` hold the raw UTF-16LE data including the terminating
    null (their WCHAR counts are the DataLength fields); :attr:`header_text` and
    :attr:`body_text` decode them. The two sections follow each other without
    padding (the spec states none); the whole header is padded to 4 bytes so the
    next header stays aligned, with ``padding`` keeping the observed bytes.
    """

    header: bytes = b"\x00\x00"
    body: bytes = b"\x00\x00"
    reserved: int = 0
    reserved1: int = 0
    padding: bytes = field(default=b"", compare=False, repr=False)

    @classmethod
    def from_text(cls, header: str, body: str) -> SoapHeader:
        """Build from text (adds the terminating nulls)."""
        return cls(to_utf16(header) + b"\x00\x00", to_utf16(body) + b"\x00\x00")

    @property
    def header_text(self) -> str:
        """The Header string without its null."""
        return utf16(self.header).rstrip("\x00")

    @property
    def body_text(self) -> str:
        """The Body string without its null."""
        return utf16(self.body).rstrip("\x00")

    def encode(self) -> bytes:
        """The wire bytes."""
        if len(self.header) & 1 or len(self.body) & 1:
            raise LocalProtocolError("SoapHeader header/body must be whole UTF-16 code units")
        n = pad4(16 + len(self.header) + len(self.body))
        return b"".join(
            (
                _SOAP_SECTION.pack(SoapSectionId.HEADER, self.reserved, len(self.header) >> 1),
                self.header,
                _SOAP_SECTION.pack(SoapSectionId.BODY, self.reserved1, len(self.body) >> 1),
                self.body,
                padding_bytes(self.padding, n),
            )
        )

    @classmethod
    def decode(cls, buf: bytes, offset: int = 0) -> SoapHeader:
        """Decode at ``offset`` (see :func:`decode_soap_header`)."""
        return decode_soap_header(buf, offset, len(buf))[0]


def decode_soap_header(buf: bytes, off: int, end: int) -> tuple[SoapHeader, int]:
    """Decode a SoapHeader at ``off`` that must end by ``end``; returns it and its end."""
    hdr = "SoapHeader"
    need(hdr, "length", off, 8, end)
    sid, reserved, hlen = _SOAP_SECTION.unpack_from(buf, off)
    if sid != SoapSectionId.HEADER:
        raise WireError(hdr, "HeaderSectionID", hex(sid), "0x0320")
    p = off + 8
    need(hdr, "Header", p, 2 * hlen, end)
    header = buf[p : p + 2 * hlen]
    p += 2 * hlen
    need(hdr, "BodySectionID", p, 8, end)
    bid, reserved1, blen = _SOAP_SECTION.unpack_from(buf, p)
    if bid != SoapSectionId.BODY:
        raise WireError(hdr, "BodySectionID", hex(bid), "0x0384")
    p += 8
    need(hdr, "Body", p, 2 * blen, end)
    body = buf[p : p + 2 * blen]
    p += 2 * blen
    n = pad4(p - off)
    need(hdr, "padding", p, n, end)
    return SoapHeader(header, body, reserved, reserved1, buf[p : p + n]), p + n


# ---------------------------------------------------------------------------
# MultiQueueFormatHeader
# ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MQFFormatNameElement:
    """MQFFormatNameElement (MS-MQMQ 2.2.18.1.4): one queue of a multiple-element format name.

    ``value`` is a GUID for PUBLIC and DISTRIBUTION_LIST, ``(QM GUID, identifier)``
    for PRIVATE and the direct format name text for DIRECT.
    """

    format_type: int
    value: uuid.UUID | tuple[uuid.UUID, int] | str

    def encode_at(self, pos: int) -> bytes:
        """Encode when the element starts at ``pos`` bytes from its header's start."""
        t = self.format_type
        head = U16.pack(t)
        v = self.value
        if t == MQFFormatType.PUBLIC and isinstance(v, uuid.UUID):
            return head + guid_to_le(v)
        if t == MQFFormatType.DISTRIBUTION_LIST and isinstance(v, uuid.UUID):
            return head + b"\x00" * pad4(pos + 2) + guid_to_le(v)
        if t == MQFFormatType.PRIVATE and isinstance(v, tuple):
            return head + b"\x00" * pad4(pos + 2) + guid_to_le(v[0]) + U32.pack(v[1])
        if t == MQFFormatType.DIRECT and isinstance(v, str):
            return head + to_utf16(v) + b"\x00\x00"
        raise LocalProtocolError(f"MQFFormatNameElement: type {t} does not match value {v!r}")


def _decode_elements(buf: bytes, start: int, count: int, base: int) -> tuple[MQFFormatNameElement, ...]:
    """Parse ``count`` elements of a FormatNameList; alignment is relative to ``base``."""
    hdr = "MQFFormatNameElement"
    out: list[MQFFormatNameElement] = []
    p, end = start, len(buf)
    for _ in range(count):
        need(hdr, "FormatType", p, 2, end)
        (t,) = U16.unpack_from(buf, p)
        p += 2
        value: uuid.UUID | tuple[uuid.UUID, int] | str
        if t == MQFFormatType.PUBLIC:
            need(hdr, "PublicQueueFormatName", p, 16, end)
            value = guid_from_le(buf[p : p + 16])
            p += 16
        elif t in (MQFFormatType.PRIVATE, MQFFormatType.DISTRIBUTION_LIST):
            p += pad4(p - base)
            size = 20 if t == MQFFormatType.PRIVATE else 16
            need(hdr, "FormatName", p, size, end)
            guid = guid_from_le(buf[p : p + 16])
            value = (guid, U32.unpack_from(buf, p + 16)[0]) if size == 20 else guid
            p += size
        elif t == MQFFormatType.DIRECT:
            q = p
            while True:
                need(hdr, "DirectFormatName", q, 2, end)
                if buf[q] == 0 and buf[q + 1] == 0:
                    break
                q += 2
            value = utf16(buf[p:q])
            p = q + 2
        else:
            raise WireError(hdr, "FormatType", t, "0x0001, 0x0002, 0x0003 or 0x0006")
        out.append(MQFFormatNameElement(t, value))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class MQFAddressHeader:
    """MQFAddressHeader (MS-MQMQ 2.2.20.2): one list of format names of a MultiQueueFormatHeader.

    ``format_name_list`` holds the FormatNameList bytes as sent; :meth:`elements`
    parses them. HeaderSize = 12 + len(format_name_list); the header then ends on a
    4-byte boundary (``padding`` keeps the observed bytes).
    """

    header_id: int
    element_count: int
    format_name_list: bytes
    reserved: int = 0
    padding: bytes = field(default=b"", compare=False, repr=False)

    @classmethod
    def from_elements(cls, header_id: int, elements: tuple[MQFFormatNameElement, ...]) -> MQFAddressHeader:
        """Build the header for ``elements``."""
        parts: list[bytes] = []
        pos = 12
        for e in elements:
            raw = e.encode_at(pos)
            parts.append(raw)
            pos += len(raw)
        return cls(header_id, len(elements), b"".join(parts))

    def elements(self) -> tuple[MQFFormatNameElement, ...]:
        """Parse the FormatNameList; raises :class:`WireError` when malformed."""
        return _decode_elements(b"\x00" * 12 + self.format_name_list, 12, self.element_count, 0)

    def encode(self) -> bytes:
        """The wire bytes, padded to 4."""
        size = 12 + len(self.format_name_list)
        return b"".join(
            (
                _MQF_ADDR.pack(size, self.header_id, self.reserved, self.element_count),
                self.format_name_list,
                padding_bytes(self.padding, pad4(size)),
            )
        )


def _decode_address(buf: bytes, off: int, end: int, expected: MQFHeaderId) -> tuple[MQFAddressHeader, int]:
    hdr = "MQFAddressHeader"
    need(hdr, "length", off, 12, end)
    size, hid, reserved, count = _MQF_ADDR.unpack_from(buf, off)
    if hid != expected:
        raise WireError(hdr, "HeaderID", hex(hid), f"{expected:#06x} ({expected.name.lower()})")
    if size < 12:
        raise WireError(hdr, "HeaderSize", size, ">= 0x0C")
    n = pad4(size)
    need(hdr, "FormatNameList", off, size + n, end)
    h = MQFAddressHeader(hid, count, buf[off + 12 : off + size], reserved, buf[off + size : off + size + n])
    return h, off + size + n


@dataclass(frozen=True, slots=True)
class MQFSignatureHeader:
    """MQFSignatureHeader (MS-MQMQ 2.2.20.3): ID 0x015E, Size, Signature bytes; padded to 4."""

    signature: bytes = b""
    reserved: int = 0
    padding: bytes = field(default=b"", compare=False, repr=False)

    def encode(self) -> bytes:
        """The wire bytes, padded to 4."""
        n = pad4(len(self.signature))
        return b"".join(
            (
                _MQF_SIG.pack(MQFHeaderId.SIGNATURE, self.reserved, len(self.signature)),
                self.signature,
                padding_bytes(self.padding, n),
            )
        )


@dataclass(frozen=True, slots=True)
class MultiQueueFormatHeader:
    """MultiQueueFormatHeader (MS-MQMQ 2.2.20.1): Destination, Administration, Response, Signature."""

    destination: MQFAddressHeader
    administration: MQFAddressHeader
    response: MQFAddressHeader
    signature: MQFSignatureHeader = MQFSignatureHeader()

    def encode(self) -> bytes:
        """The wire bytes."""
        return b"".join(
            (
                self.destination.encode(),
                self.administration.encode(),
                self.response.encode(),
                self.signature.encode(),
            )
        )

    @classmethod
    def decode(cls, buf: bytes, offset: int = 0) -> MultiQueueFormatHeader:
        """Decode at ``offset`` (see :func:`decode_multi_queue_header`)."""
        return decode_multi_queue_header(buf, offset, len(buf))[0]


def decode_multi_queue_header(buf: bytes, off: int, end: int) -> tuple[MultiQueueFormatHeader, int]:
    """Decode a MultiQueueFormatHeader at ``off`` that must end by ``end``; returns it and its end."""
    dest, p = _decode_address(buf, off, end, MQFHeaderId.DESTINATION)
    admin, p = _decode_address(buf, p, end, MQFHeaderId.ADMINISTRATION)
    resp, p = _decode_address(buf, p, end, MQFHeaderId.RESPONSE)
    hdr = "MQFSignatureHeader"
    need(hdr, "length", p, 8, end)
    sid, reserved, size = _MQF_SIG.unpack_from(buf, p)
    if sid != MQFHeaderId.SIGNATURE:
        raise WireError(hdr, "ID", hex(sid), "0x015E")
    n = pad4(size)
    need(hdr, "Signature", p + 8, size + n, end)
    sig = MQFSignatureHeader(buf[p + 8 : p + 8 + size], reserved, buf[p + 8 + size : p + 8 + size + n])
    return MultiQueueFormatHeader(dest, admin, resp, sig), p + 8 + size + n
