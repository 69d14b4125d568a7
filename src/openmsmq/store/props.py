"""The ``props`` column of a message row: every attribute SQL never filters on, packed.

Layout (schema 6; little-endian)::

    head      HEAD (39 bytes): BodyType u32, AppSpecific u32, DeliveryGuarantee u8,
              TimeToReachQueue u32, TimeToBeReceived u32, acknowledgment flags u32,
              bits u8 (1 PositiveJournaling, 2 NegativeJournaling, 4 Trace,
              8 FinalAckRequired), hop count u16, Identifier.Uniquifier u32, SentTime
              i64, the length of the destination queue name (UTF-8, u16), ``gflags`` u8
    guids     the Identifier lineage (16 bytes); the destination QM GUID (16) when
              gflags & DEST_QM; the source QM GUID (16) when gflags & SOURCE
    corr      CorrelationId (20 bytes) when gflags & CORRELATION
    lengths   RARE_LENGTHS (12 bytes) when gflags & RARE: the lengths of Label, admin
              queue, response queue (UTF-8, u16 each), Extension (u32), SenderId (u16)
    strings   Label, admin queue, response queue, destination queue, Extension, SenderId

What the flags leave out has its usual value: a null destination QM GUID (a message
sent on this QM), a source QM equal to the lineage (every message until another QM
forwards it), a CorrelationId of 20 zero bytes, no Label, admin or response queue,
Extension or SenderId. A local send's ``props`` is then 55 bytes plus the destination
name, against 118 plus the name in the layout of schemas 1-5 (:data:`HEAD_V5`,
converted at open by :func:`convert_v5`).

The head's first ten fields keep the offsets they had, so readers of the Identifier
uniquifier, SentTime and the expiry fields (``openmsmq.transfer.codec``) read any
row without looking at the flags.
"""

from __future__ import annotations

import struct

__all__ = [
    "CORRELATION",
    "DEST_QM",
    "GFLAGS_AT",
    "GUIDS_END",
    "HEAD",
    "HEAD_V5",
    "LENGTHS_AT",
    "RARE",
    "RARE_LENGTHS",
    "SOURCE",
    "STRINGS_AT",
    "ZERO_CORRELATION",
    "ZERO_GUID",
    "convert_v5",
    "guid_block",
    "guid_blocks",
    "split_guids",
]

HEAD = struct.Struct("<IIBIIIBHIqHB")
#: Offset of ``gflags``, the head's last byte.
GFLAGS_AT = HEAD.size - 1
#: gflags: the destination QM GUID follows the lineage (else the null GUID).
DEST_QM = 1
#: gflags: the source QM GUID follows (else it equals the lineage).
SOURCE = 2
#: gflags: the CorrelationId follows the GUIDs (else 20 zero bytes).
CORRELATION = 4
#: gflags: :data:`RARE_LENGTHS` follows (else those five strings are empty).
RARE = 8
#: Lengths of the Label, admin queue, response queue, Extension and SenderId.
RARE_LENGTHS = struct.Struct("<HHHIH")
#: End of the GUIDs, by ``gflags & 3``.
GUIDS_END: tuple[int, ...] = tuple(HEAD.size + 16 + 16 * (g & 1) + 16 * (g >> 1 & 1) for g in range(4))
#: Offset of :data:`RARE_LENGTHS` (after the CorrelationId if any), by ``gflags & 7``.
LENGTHS_AT: tuple[int, ...] = tuple(GUIDS_END[g & 3] + (20 if g & 4 else 0) for g in range(8))
#: Start of the strings, by ``gflags & 15``.
STRINGS_AT: tuple[int, ...] = tuple(LENGTHS_AT[g & 7] + (12 if g & 8 else 0) for g in range(16))
assert RARE_LENGTHS.size == 12
ZERO_GUID = bytes(16)
ZERO_CORRELATION = bytes(20)

#: ``props`` of schemas 1-5: the three GUIDs and the CorrelationId always present, in
#: the head, before the string lengths.
HEAD_V5 = struct.Struct("<IIBIIIBHIq16s16s16s20sHHHHIH")
assert HEAD.format[:11] == HEAD_V5.format[:11] == "<IIBIIIBHIq"

#: Memo of :func:`guid_block`: (lineage, destination QM, source QM) -> its result.
guid_blocks: dict[tuple[bytes, bytes, bytes], tuple[int, bytes]] = {}


def guid_block(lineage: bytes, dest_qm: bytes, source: bytes) -> tuple[int, bytes]:
    """``(gflags bits, bytes)`` of the GUIDs part for these three GUIDs (16 bytes each),
    memoised: a store sees few distinct QM GUIDs."""
    key = (lineage, dest_qm, source)
    got = guid_blocks.get(key)
    if got is None:
        g = 0
        block = lineage
        if dest_qm != ZERO_GUID:
            g |= DEST_QM
            block += dest_qm
        if source != lineage:
            g |= SOURCE
            block += source
        if len(guid_blocks) > 4096:
            guid_blocks.clear()
        got = guid_blocks[key] = (g, block)
    return got


def split_guids(key: bytes) -> tuple[bytes, bytes, bytes]:
    """(lineage, destination QM, source QM), 16 bytes each, of ``props[GFLAGS_AT:end]``:
    the flags byte and the GUIDs it names (``end`` = ``GUIDS_END[gflags & 3]``)."""
    g = key[0]
    lineage = key[1:17]
    at = 17
    dest_qm = ZERO_GUID
    if g & DEST_QM:
        dest_qm = key[at : at + 16]
        at += 16
    source = key[at : at + 16] if g & SOURCE else lineage
    return lineage, dest_qm, source


def convert_v5(old: bytes) -> bytes:
    """The ``props`` of a row written by schemas 1-5, in this layout (the schema 6
    migration runs it over every stored message)."""
    (
        body_type, app_specific, delivery, ttrq, ttbr, ack_flags, bits, hops, uniquifier, sent,
        lineage, dest_qm, source, corr, n_label, n_admin, n_response, n_dest, n_ext, n_sender,
    ) = HEAD_V5.unpack_from(old)  # fmt: skip
    g, block = guid_block(lineage, dest_qm, source)
    if corr != ZERO_CORRELATION:
        g |= CORRELATION
        block += corr
    if n_label or n_admin or n_response or n_ext or n_sender:
        g |= RARE
        block += RARE_LENGTHS.pack(n_label, n_admin, n_response, n_ext, n_sender)
    head = HEAD.pack(
        body_type, app_specific, delivery, ttrq, ttbr, ack_flags, bits, hops, uniquifier, sent, n_dest, g
    )  # fmt: skip
    return head + block + bytes(old[HEAD_V5.size :])
