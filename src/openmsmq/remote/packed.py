"""The packed message form of the remote-read service: many messages in one ``bytes`` blob.

A batched read returns hundreds of messages per call. As ``repeated Message`` each one is
a protobuf object of 29 fields built on the server and taken apart again on the client;
that costs more than reading the messages from the store. The packed form (``ReadReply
.packed``, asked for with ``reply_format = 1``) is a plain concatenation of records, one
per message, each a fixed little-endian header followed by its variable-length fields::

    lookup_id u64, id_uniquifier u32, message_class u32, priority u8, app_specific u32,
    body_type u32, delivery u8, sent_time u64, arrived_time u64, time_to_reach_queue u32,
    time_to_be_received u32, ack_flags u8, flags u8, request_id u32, tx_sequence_id u64,
    tx_sequence_number u32, id_lineage 16 bytes, source_machine 16 bytes,
    then seven u32 lengths: body, label, correlation_id, destination_queue, admin_queue,
    response_queue, extension; then those seven fields, strings as UTF-8.

``flags`` bits: 0x01 positive journaling, 0x02 negative journaling (dead letter), 0x04
transactional, 0x08 FirstInTransaction, 0x10 LastInTransaction. The fields are those of
the protobuf ``Message`` (MS-MQDMPR 3.1.1.12 Message attributes), with the same
meaning; GUIDs are 16 bytes in RFC 4122 order. Pure code: no I/O.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from openmsmq.errors import HResult, MQError

if TYPE_CHECKING:  # the client decodes without loading the queue manager
    from openmsmq.qm import MessageRecord

__all__ = [
    "FLAG_DEAD_LETTER",
    "FLAG_FIRST_IN_TRANSACTION",
    "FLAG_JOURNAL",
    "FLAG_LAST_IN_TRANSACTION",
    "FLAG_TRANSACTIONAL",
    "HEADER",
    "PACKED_V1",
    "PackedRecord",
    "decode_messages",
    "encode_messages",
    "encode_rows",
]

#: ``reply_format`` value asking for the packed form (0 = ``repeated Message``).
PACKED_V1 = 1

#: The fixed part of a record (see the module docstring).
HEADER = struct.Struct("<QIIBIIBQQIIBBIQI16s16sIIIIIII")
#: Values of the fixed part before the seven lengths.
_VALUES = 18

FLAG_JOURNAL = 0x01
FLAG_DEAD_LETTER = 0x02
FLAG_TRANSACTIONAL = 0x04
FLAG_FIRST_IN_TRANSACTION = 0x08
FLAG_LAST_IN_TRANSACTION = 0x10

#: A decoded record: the 18 header values (lengths excluded) then the seven variable
#: fields (body, label, correlation_id, destination_queue, admin_queue, response_queue,
#: extension), strings decoded.
PackedRecord = tuple[object, ...]

# Few distinct strings and GUIDs occur in a batch (queue names, the QM's GUID): memoise
# their encodings, bounded.
_MEMO_LIMIT = 4096
_TEXT: dict[str, bytes] = {}
_GUIDS: dict[uuid.UUID, bytes] = {}
_DECODED: dict[bytes, str] = {}


def _text(s: str) -> bytes:
    b = _TEXT.get(s)
    if b is None:
        if len(_TEXT) > _MEMO_LIMIT:
            _TEXT.clear()
        b = _TEXT[s] = s.encode("utf-8")
    return b


def _guid(g: uuid.UUID) -> bytes:
    b = _GUIDS.get(g)
    if b is None:
        if len(_GUIDS) > _MEMO_LIMIT:
            _GUIDS.clear()
        b = _GUIDS[g] = g.bytes
    return b


def encode_messages(messages: Sequence[MessageRecord], request_ids: Sequence[int] | None = None) -> bytes:
    """The packed form of ``messages`` (with their dwRequestId, else 0 each)."""
    pack = HEADER.pack
    parts: list[bytes] = []
    append = parts.append
    for i, m in enumerate(messages):
        label, dest = _text(m.label), _text(m.destination_queue)
        admin, resp = _text(m.admin_queue), _text(m.response_queue)
        body, corr, ext = m.body, m.correlation_id, m.extension
        flags = (
            (FLAG_JOURNAL if m.positive_journaling else 0)
            | (FLAG_DEAD_LETTER if m.negative_journaling else 0)
            | (FLAG_TRANSACTIONAL if m.transactional else 0)
            | (FLAG_FIRST_IN_TRANSACTION if m.first_in_transaction else 0)
            | (FLAG_LAST_IN_TRANSACTION if m.last_in_transaction else 0)
        )
        header = pack(
            m.lookup_id, m.id_uniquifier, m.message_class, m.priority, m.app_specific,
            m.body_type, m.delivery, m.sent_time, m.arrived_time, m.time_to_reach_queue,
            m.time_to_be_received, m.ack_flags & 0xFF, flags,
            request_ids[i] if request_ids is not None else 0,
            m.tx_sequence_id, m.tx_sequence_number, _guid(m.id_lineage), _guid(m.source_machine),
            len(body), len(label), len(corr), len(dest), len(admin), len(resp), len(ext),
        )  # fmt: skip
        append(header)
        append(body)
        append(label)
        append(corr)
        append(dest)
        append(admin)
        append(resp)
        append(ext)
    return b"".join(parts)


def encode_rows(rows: Sequence[Sequence[Any]]) -> bytes:
    """The packed form of stored message rows (``openmsmq.store.records.ROW_COLUMNS``
    order, as :meth:`openmsmq.qm.QueueManager.peek_range_rows` returns them), equal to
    :func:`encode_messages` of their ``message_from_row`` messages, without building
    them: the store's row reader (:func:`openmsmq.store.rows.message_fields`) gives the
    strings UTF-8 encoded and the GUIDs as 16 bytes, so each record is one pack and the
    fields as they are. dwRequestId is 0."""
    # Server side only: the client never loads the store.
    from openmsmq.store.rows import message_fields

    pack = HEADER.pack
    parts: list[bytes] = []
    append = parts.append
    for (
        lookup_id, uniquifier, cls, priority, app_specific, body_type, delivery, sent, arrived, ttrq, ttbr,
        ack_flags, journal, transactional, tx_bits, seq_id, seq_no, lineage, source,
        body, label, corr, dest, admin, resp, ext,
    ) in message_fields(rows):  # fmt: skip
        # journal: 1 positive, 2 negative journaling (= FLAG_JOURNAL, FLAG_DEAD_LETTER);
        # tx_bits: 1 FirstInTransaction, 2 LastInTransaction (the flags' 0x08, 0x10).
        flags = journal | (FLAG_TRANSACTIONAL if transactional else 0) | tx_bits << 3
        header = pack(
            lookup_id, uniquifier, cls, priority, app_specific, body_type, delivery, sent, arrived,
            ttrq, ttbr, ack_flags & 0xFF, flags, 0, seq_id, seq_no, lineage, source,
            len(body), len(label), len(corr), len(dest), len(admin), len(resp), len(ext),
        )  # fmt: skip
        append(header)
        append(body)
        append(label)
        append(corr)
        append(dest)
        append(admin)
        append(resp)
        append(ext)
    return b"".join(parts)


def _str(b: bytes) -> str:
    s = _DECODED.get(b)
    if s is None:
        if len(_DECODED) > _MEMO_LIMIT:
            _DECODED.clear()
        s = _DECODED[b] = b.decode("utf-8")
    return s


def decode_messages(blob: bytes) -> Iterator[PackedRecord]:
    """The records of a packed blob, in order; a malformed blob raises MQError(MQ_ERROR)."""
    unpack = HEADER.unpack_from
    size = HEADER.size
    end = len(blob)
    off = 0
    try:
        while off < end:
            h = unpack(blob, off)
            off += size
            lb, ll, lc, ld, la, lr, le = h[_VALUES:]
            body = blob[off : off + lb]
            off += lb
            label = _str(blob[off : off + ll]) if ll else ""
            off += ll
            corr = blob[off : off + lc]
            off += lc
            dest = _str(blob[off : off + ld]) if ld else ""
            off += ld
            admin = _str(blob[off : off + la]) if la else ""
            off += la
            resp = _str(blob[off : off + lr]) if lr else ""
            off += lr
            ext = blob[off : off + le]
            off += le
            if off > end:
                raise ValueError("record runs past the end")
            yield (*h[:_VALUES], body, label, corr, dest, admin, resp, ext)
    except (struct.error, ValueError, UnicodeDecodeError) as exc:
        raise MQError(HResult.MQ_ERROR, f"malformed packed messages at byte {off}: {exc}") from None
