"""MessagePropertiesHeader (MS-MQMQ 2.2.19.3): class, acknowledgments, label, body."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from openmsmq.errors import LocalProtocolError, WireError
from openmsmq.wire.constants import MAX_LABEL_LENGTH
from openmsmq.wire.fast import fast_constructor
from openmsmq.wire.util import pad4, to_utf16, truncated, utf16

__all__ = ["MessagePropertiesHeader"]

_FIXED = struct.Struct("<BBH20sIIIIIIII")
_HDR = "MessagePropertiesHeader"
_ZERO20 = b"\x00" * 20
_ZEROS = (b"", b"\x00", b"\x00\x00", b"\x00\x00\x00")
# Bounded memo caches of labels (labels repeat): wire bytes <-> text.
_CACHE_MAX = 1024
_label_text: dict[bytes, str] = {}
_label_wire: dict[str, bytes] = {}


@dataclass(frozen=True, slots=True)
class MessagePropertiesHeader:
    """MessagePropertiesHeader (MS-MQMQ 2.2.19.3): 56 bytes + Label + ExtensionData + MessageBody.

    ``label`` is ``None`` when LabelLength is 0 (no Label field) and otherwise the
    text without its terminating null. MessageSize, ExtensionSize and LabelLength
    are derived from ``body``, ``extension`` and ``label``. ``allocation_body_size``
    is carried as sent (it may exceed MessageSize). The whole header is padded to a
    multiple of 4; ``padding`` keeps the observed padding bytes and is not compared.
    """

    message_class: int
    body: bytes
    allocation_body_size: int
    label: str | None = None
    ack_flags: int = 0
    correlation_id: bytes = _ZERO20
    body_type: int = 0
    application_tag: int = 0
    privacy_level: int = 0
    hash_algorithm: int = 0
    encryption_algorithm: int = 0
    extension: bytes = b""
    padding: bytes = field(default=b"", compare=False, repr=False)

    @property
    def size(self) -> int:
        """Encoded size, including padding."""
        n = 56 + len(self.body) + len(self.extension)
        if self.label is not None:
            n += len(to_utf16(self.label)) + 2
        return n + pad4(n)

    def encode(self) -> bytes:
        """The wire bytes."""
        if self.label is None:
            raw_label = b""
            label_len = 0
        else:
            raw_label = _label_wire.get(self.label) or label_wire(self.label)
            label_len = len(raw_label) >> 1
        corr = self.correlation_id
        if len(corr) != 20:
            raise LocalProtocolError(f"{_HDR}.CorrelationID must be 20 bytes, got {len(corr)}")
        head = _FIXED.pack(
            self.ack_flags,
            label_len,
            self.message_class,
            corr,
            self.body_type,
            self.application_tag,
            len(self.body),
            self.allocation_body_size,
            self.privacy_level,
            self.hash_algorithm,
            self.encryption_algorithm,
            len(self.extension),
        )
        n = -(len(raw_label) + len(self.extension) + len(self.body)) & 3  # pad4
        pad = self.padding if len(self.padding) == n else _ZEROS[n]  # padding_bytes
        return b"".join((head, raw_label, self.extension, self.body, pad))

    @classmethod
    def decode(cls, buf: bytes, offset: int = 0) -> MessagePropertiesHeader:
        """Decode at ``offset`` (see :func:`decode_properties_header`)."""
        return decode_properties_header(buf, offset, len(buf))[0]


_new_properties = fast_constructor(MessagePropertiesHeader)

#: ``cached_label(raw)``: the memoised text of the UTF-16 bytes ``raw`` or ``None``
#: (the UserMessage fast path inlines ``cached_label(raw) or label_text(raw)``).
cached_label = _label_text.get


#: ``cached_label_wire(text)``: the memoised wire Label of ``text`` or ``None``.
cached_label_wire = _label_wire.get


def label_wire(text: str) -> bytes:
    """The wire Label of ``text``: UTF-16 with its terminating null (memoised)."""
    raw = _label_wire.get(text)
    if raw is None:
        raw = to_utf16(text) + b"\x00\x00"
        if len(_label_wire) >= _CACHE_MAX:
            _label_wire.clear()
        _label_wire[text] = raw
    return raw


def label_text(raw: bytes) -> str:
    """The text of a Label's UTF-16 bytes without its null, memoised (labels repeat)."""
    label = _label_text.get(raw)
    if label is None:
        label = utf16(raw)
        if len(_label_text) >= _CACHE_MAX:
            _label_text.clear()
        _label_text[raw] = label
    return label


def decode_properties_header(buf: bytes, off: int, end: int) -> tuple[MessagePropertiesHeader, int]:
    """Decode a MessagePropertiesHeader at ``off`` that must end by ``end``; returns it and its end."""
    if off + 56 > end:
        truncated(_HDR, "length", off, 56, end)
    (
        ack_flags,
        label_len,
        mclass,
        corr,
        body_type,
        app_tag,
        msg_size,
        alloc,
        privacy,
        hash_alg,
        enc_alg,
        ext_size,
    ) = _FIXED.unpack_from(buf, off)
    if label_len > MAX_LABEL_LENGTH:
        raise WireError(_HDR, "LabelLength", label_len, f"0..{MAX_LABEL_LENGTH} WCHARs incl. the null")
    p = off + 56
    label: str | None = None
    if label_len:
        n = label_len * 2
        if p + n > end:
            truncated(_HDR, "Label", p, n, end)
        if buf[p + n - 2] or buf[p + n - 1]:
            raise WireError(_HDR, "Label", "no terminating null", "a null-terminated UTF-16 string")
        raw = buf[p : p + n - 2]
        label = _label_text.get(raw) or label_text(raw)
        p += n
    extension = b""
    if ext_size:
        if p + ext_size > end:
            truncated(_HDR, "ExtensionData", p, ext_size, end)
        extension = buf[p : p + ext_size]
        p += ext_size
    if p + msg_size > end:
        truncated(_HDR, "MessageBody", p, msg_size, end)
    body = buf[p : p + msg_size]
    p += msg_size
    n = -(p - off) & 3  # pad4
    if p + n > end:
        truncated(_HDR, "padding", p, n, end)
    header: MessagePropertiesHeader = _new_properties(
        mclass,
        body,
        alloc,
        label,
        ack_flags,
        corr,
        body_type,
        app_tag,
        privacy,
        hash_alg,
        enc_alg,
        extension,
        buf[p : p + n],
    )
    return header, p + n
