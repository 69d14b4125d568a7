"""A packed PeekRange reply straight into an Arrow record batch (numpy + pyarrow, no pyspark).

The remote-read service returns a page of peeked messages in the packed form of
:mod:`openmsmq.remote.packed`: per message a fixed 128-byte little-endian header, then
its variable-length fields. Turning that into client ``Message`` objects and then into
columns would cost Python work per message and field on the executor, most of the
client's time in a Spark read. Here the fixed fields are read for all records at once
through a numpy structured dtype, and the text columns (``message_id``, ``source_qm``)
are built by Arrow kernels from the few distinct GUIDs of a page. When all records of
a page have the same size (checked, see :func:`_uniform_stride`) nothing is done per
record in Python; otherwise a walk finds where each record starts and each
variable-length column takes one slice per record.

The batch equals :func:`openmsmq.spark.arrow.page_to_batch` of the same messages
(``tests/spark/test_packed_arrow.py``).
"""

from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from openmsmq.errors import HResult, MQError
from openmsmq.remote.packed import HEADER
from openmsmq.spark.arrow import ARROW_SCHEMA

__all__ = ["ArrowPage", "packed_to_page"]

#: :data:`openmsmq.remote.packed.HEADER` as a numpy record (no padding: 128 bytes).
_HEADER_DTYPE = np.dtype(
    [
        ("lookup_id", "<u8"), ("uniq", "<u4"), ("message_class", "<u4"), ("priority", "u1"),
        ("app_specific", "<u4"), ("body_type", "<u4"), ("delivery", "u1"), ("sent_time", "<u8"),
        ("arrived_time", "<u8"), ("ttrq", "<u4"), ("ttbr", "<u4"), ("ack_flags", "u1"),
        ("flags", "u1"), ("request_id", "<u4"), ("tx_seq_id", "<u8"), ("tx_seq_num", "<u4"),
        ("lineage", "V16"), ("source", "V16"), ("lens", "<u4", (7,)),
    ]
)  # fmt: skip
assert _HEADER_DTYPE.itemsize == HEADER.size
#: The seven u32 lengths that end a header.
_LENGTHS = struct.Struct("<7I")
_LENGTHS_AT = HEADER.size - _LENGTHS.size
_TIMESTAMP = pa.timestamp("us", tz="UTC")


@dataclass(frozen=True)
class ArrowPage:
    """One peeked page as an Arrow record batch in :data:`~openmsmq.spark.arrow.ARROW_SCHEMA`,
    with what the partition reader needs to page on (LookupIdentifiers, body bytes)."""

    batch: pa.RecordBatch
    lookup_id: list[int]
    """LookupIdentifiers in page order (the reader checks they rise within its range)."""
    body_bytes: int
    """Total size of the bodies (to size the next peek)."""

    def __len__(self) -> int:
        return len(self.lookup_id)


def _record_starts(blob: bytes) -> list[int]:
    """Offsets of the records of ``blob`` (MQ_ERROR if it does not split into whole records)."""
    lengths = _LENGTHS.unpack_from
    size, end, off = HEADER.size, len(blob), 0
    starts: list[int] = []
    append = starts.append
    try:
        while off < end:
            append(off)
            a, b, c, d, e, f, g = lengths(blob, off + _LENGTHS_AT)
            off += size + a + b + c + d + e + f + g
    except struct.error as exc:  # a header cut short
        raise MQError(HResult.MQ_ERROR, f"malformed packed messages at byte {off}: {exc}") from None
    if off != end:
        raise MQError(HResult.MQ_ERROR, f"malformed packed messages: last record runs past byte {end}")
    return starts


def _guid_texts(raw: np.ndarray, braces: bool) -> pa.Array:
    """A column of 16-byte GUIDs (RFC 4122 order) as text (``{...}`` or bare), formatted
    once per distinct GUID (a page comes from few QMs, usually one)."""
    n = len(raw)
    raw = np.ascontiguousarray(raw).view(np.uint8).reshape(n, 16)
    if bool((raw == raw[0]).all()):
        return pa.repeat(pa.scalar(_guid_text(raw[0].tobytes(), braces), type=pa.string()), n)
    distinct, inverse = np.unique(raw, axis=0, return_inverse=True)
    texts = pa.array([_guid_text(g.tobytes(), braces) for g in distinct], type=pa.string())
    return texts.take(pa.array(inverse.astype(np.int32).ravel()))


def _guid_text(raw: bytes, braces: bool) -> str:
    text = str(uuid.UUID(bytes=raw))
    return f"{{{text}}}" if braces else text


def _uniform_stride(blob: bytes) -> int:
    """The record size if every record of ``blob`` has the size of the first, else 0.

    Checked for all records at once: if the lengths in the header found at every
    multiple of the first record's size add up to that size, the record-by-record walk
    of :func:`_record_starts` would find exactly those starts (by induction), so the
    two are interchangeable. Pages of equal-sized messages are common (fixed-layout
    bodies, no labels) and then need no per-record Python at all.
    """
    end = len(blob)
    if end < HEADER.size:
        return 0
    stride = HEADER.size + sum(_LENGTHS.unpack_from(blob, _LENGTHS_AT))
    if end % stride:
        return 0
    n = end // stride
    rows = np.frombuffer(blob, dtype=np.uint8).reshape(n, stride)
    lens = np.ascontiguousarray(rows[:, _LENGTHS_AT : HEADER.size]).view("<u4").astype(np.int64)
    return stride if bool((lens.sum(axis=1) == stride - HEADER.size).all()) else 0


def _binary(blob: bytes, at: np.ndarray, length: np.ndarray, stride: int) -> pa.Array:
    """The BINARY column of the fields at offsets ``at`` with sizes ``length``.

    When every record has the same size (``stride``) and this field the same size and
    place in each, the values are one strided copy of the blob; otherwise one slice per
    record.
    """
    n = len(at)
    size = int(length[0])
    if stride and bool((length == size).all()):
        place = at - np.arange(n, dtype=np.int64) * stride
        first = int(place[0])
        if bool((place == first).all()) and n * size < 2**31:
            rows = np.frombuffer(blob, dtype=np.uint8).reshape(n, stride)
            data = np.ascontiguousarray(rows[:, first : first + size])
            offsets = np.arange(n + 1, dtype=np.int32) * size
            return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    ends = (at + length).tolist()
    return pa.array([blob[s:e] for s, e in zip(at.tolist(), ends, strict=True)], type=pa.binary())


def packed_to_page(queue: str, blob: bytes) -> ArrowPage:
    """The record batch of the packed reply ``blob`` peeked from ``queue``.

    Columns as :func:`openmsmq.spark.arrow.page_to_batch`: ``message_id`` is the
    OBJECTID text ``{GUID}\\uniquifier`` (MS-MQMQ 2.2.8) of IdLineage and the
    uniquifier, ``source_qm`` the bare GUID of SourceMachineIdentifier, and
    ``tx_sequence_id`` / ``tx_sequence_number`` are null where TxSequenceID is 0.
    """
    stride = _uniform_stride(blob)
    if stride:
        n = len(blob) // stride
        at = np.arange(n, dtype=np.int64) * stride
        rows = np.frombuffer(blob, dtype=np.uint8).reshape(n, stride)
        h = np.ascontiguousarray(rows[:, : HEADER.size]).view(_HEADER_DTYPE).ravel()
    else:
        starts = _record_starts(blob)
        n = len(starts)
        if n == 0:
            return ArrowPage(_empty(), [], 0)
        at = np.asarray(starts, dtype=np.int64)
        size = HEADER.size
        h = np.frombuffer(b"".join([blob[s : s + size] for s in starts]), dtype=_HEADER_DTYPE)
    lens = h["lens"].astype(np.int64)
    body_at = at + HEADER.size
    label_at = body_at + lens[:, 0]
    corr_at = label_at + lens[:, 1]
    bodies = _binary(blob, body_at, lens[:, 0], stride)
    correlations = _binary(blob, corr_at, lens[:, 2], stride)
    if lens[:, 1].any():
        labels: pa.Array = _binary(blob, label_at, lens[:, 1], stride)
        try:
            labels = labels.cast(pa.string())  # validates the UTF-8
        except pa.ArrowInvalid as exc:
            raise MQError(
                HResult.MQ_ERROR, f"malformed packed messages: a label is not UTF-8: {exc}"
            ) from None
    else:
        labels = pa.repeat(pa.scalar("", type=pa.string()), n)
    message_id = pc.binary_join_element_wise(
        _guid_texts(h["lineage"], braces=True), pc.cast(pa.array(h["uniq"]), pa.string()), "\\"
    )
    zeros = pa.array(np.zeros(n, dtype=np.int32), type=pa.int32())
    seq = np.ascontiguousarray(h["tx_seq_id"])
    no_seq = seq == 0
    columns = [
        pa.array(h["lookup_id"].astype(np.int64), type=pa.int64()),
        message_id,
        pa.repeat(pa.scalar(queue, type=pa.string()), n),
        labels,
        bodies,
        pa.array(h["message_class"].astype(np.int32), type=pa.int32()),
        pa.array(h["priority"].astype(np.int32), type=pa.int32()),
        correlations,
        pa.array(h["app_specific"].astype(np.int64), type=pa.int64()),
        pa.array(h["sent_time"].astype(np.int64) * 1_000_000, type=_TIMESTAMP),
        pa.array(h["arrived_time"].astype(np.int64) * 1_000_000, type=_TIMESTAMP),
        _guid_texts(h["source"], braces=False),
        pa.array(seq.view(np.int64), mask=no_seq, type=pa.int64()),
        pa.array(h["tx_seq_num"].astype(np.int64), mask=no_seq, type=pa.int64()),
        # AbortCount, MoveCount: a server sends the packed form only for messages whose
        # counts are all 0 (others come as repeated Message, openmsmq.remote.server).
        zeros,
        zeros,
    ]
    batch = pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)
    return ArrowPage(batch, h["lookup_id"].tolist(), int(lens[:, 0].sum()))


def _empty() -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.array([], type=f.type) for f in ARROW_SCHEMA], schema=ARROW_SCHEMA)
