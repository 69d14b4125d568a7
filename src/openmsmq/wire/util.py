"""Small helpers shared by the codecs: GUID conversion with memoisation, UTF-16, bounds checks.

Nothing here keeps protocol state; the GUID memo is a bounded pure-function cache
(queue managers exchange the same few GUIDs over and over, and building a
:class:`uuid.UUID` from bytes costs more than the rest of a header decode).
"""

from __future__ import annotations

import struct
import uuid
from typing import NoReturn

from openmsmq.errors import WireError

U16 = struct.Struct("<H")
U32 = struct.Struct("<I")

_GUID_CACHE_MAX = 4096
_uuid_by_bytes: dict[bytes, uuid.UUID] = {}
# keyed by UUID.int: hashing an int is done in C, UUID.__hash__ is a Python call
_bytes_by_int: dict[int, bytes] = {}


def guid_from_le(raw: bytes) -> uuid.UUID:
    """``uuid.UUID(bytes_le=raw)`` for a 16-byte ``raw``, memoised."""
    g = _uuid_by_bytes.get(raw)
    if g is None:
        g = uuid.UUID(bytes_le=raw)
        if len(_uuid_by_bytes) >= _GUID_CACHE_MAX:
            _uuid_by_bytes.clear()
        _uuid_by_bytes[raw] = g
    return g


#: ``cached_guid(raw)``: the memoised UUID of ``raw`` or ``None``; decoders inline
#: ``cached_guid(raw) or guid_from_le(raw)`` (a UUID is always true).
cached_guid = _uuid_by_bytes.get


def guid_to_le(guid: uuid.UUID) -> bytes:
    """``guid.bytes_le``, memoised."""
    key = guid.int
    b = _bytes_by_int.get(key)
    if b is None:
        b = guid.bytes_le
        if len(_bytes_by_int) >= _GUID_CACHE_MAX:
            _bytes_by_int.clear()
        _bytes_by_int[key] = b
    return b


#: ``cached_guid_bytes(guid.int)``: the memoised ``bytes_le`` of a GUID or ``None``; encoders
#: inline ``cached_guid_bytes(g.int) or guid_to_le(g)`` (16 bytes are always true).
cached_guid_bytes = _bytes_by_int.get


def pad4(n: int) -> int:
    """Bytes of padding that bring ``n`` up to a multiple of 4."""
    return -n & 3


def padding_bytes(stored: bytes, n: int) -> bytes:
    """The ``n`` padding bytes to emit: the stored (observed) ones if they fit, else zeros."""
    if len(stored) == n:
        return stored
    return b"\x00" * n


def utf16(data: bytes) -> str:
    """Decode UTF-16LE losslessly (lone surrogates survive a round trip)."""
    return data.decode("utf-16-le", "surrogatepass")


def to_utf16(text: str) -> bytes:
    """Encode to UTF-16LE losslessly (inverse of :func:`utf16`)."""
    return text.encode("utf-16-le", "surrogatepass")


def need(header: str, field: str, off: int, size: int, end: int) -> None:
    """Raise :class:`WireError` unless ``size`` bytes at ``off`` fit before ``end``."""
    if off + size > end:
        truncated(header, field, off, size, end)


def truncated(header: str, field: str, off: int, size: int, end: int) -> NoReturn:
    """Raise the :class:`WireError` of :func:`need` (hot paths test ``off + size > end`` inline)."""
    raise WireError(header, field, f"{size} bytes at offset {off}", f"to fit within {end} bytes")
