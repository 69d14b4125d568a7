"""A packed PeekRange reply decoded straight into Arrow equals the Message-by-Message path."""

from __future__ import annotations

import uuid

import pytest

from openmsmq.client import grpc_transport as gt
from openmsmq.errors import MQError
from openmsmq.qm import MessageRecord
from openmsmq.remote.packed import encode_messages
from openmsmq.spark.arrow import ARROW_SCHEMA, page_to_batch
from openmsmq.spark.backend import _page
from openmsmq.spark.packed_arrow import packed_to_page

QUEUE = "private$\\orders"
LINEAGES = [uuid.UUID(int=0x12345678_9ABC_DEF0_1234_56789ABCDEF0), uuid.UUID(int=7)]
SOURCES = [uuid.UUID(int=0x0FEDCBA9_8765_4321_0FED_CBA987654321), uuid.UUID(int=(1 << 128) - 1)]


def message(i: int) -> MessageRecord:
    """Messages whose every column varies: lengths, text, GUIDs, sequences present or not."""
    return MessageRecord(
        body=bytes([i % 256]) * (i % 7), label=f"étiquette {i}" if i % 3 else "", priority=i % 8,
        message_class=0xC004 if i % 5 == 0 else 0, correlation_id=bytes(range(20)) if i % 2 else b"",
        app_specific=0xFFFFFFFF - i, lookup_id=1000 + 3 * i, id_lineage=LINEAGES[i % 2],
        id_uniquifier=4_000_000_000 + i, sent_time=1_700_000_000 + i, arrived_time=1_700_000_100 + i,
        destination_queue="private$\\dést", admin_queue="DIRECT=OS:a\\private$\\admin" if i % 4 else "",
        extension=b"\x01" * (i % 3), source_machine=SOURCES[i % 2 if i % 3 else 0],
        transactional=i % 4 != 0, tx_sequence_id=0 if i % 4 == 0 else (1 << 64) - 1 - i,
        tx_sequence_number=i,
    )  # fmt: skip


def old_path(msgs: list[MessageRecord]) -> tuple[object, list[int], int]:
    """What the source did before: client Messages, then columns, then the batch."""
    page = _page(gt._messages(gt.pb.ReadReply(packed=encode_messages(msgs))))
    return page_to_batch(QUEUE, page), list(page.lookup_id), page.body_bytes


@pytest.mark.parametrize("n", [1, 2, 50])
def test_packed_page_equals_the_message_path(n: int) -> None:
    msgs = [message(i) for i in range(n)]
    want_batch, want_ids, want_bytes = old_path(msgs)
    page = packed_to_page(QUEUE, encode_messages(msgs))
    assert page.batch.schema == ARROW_SCHEMA
    assert page.batch.equals(want_batch)
    assert page.lookup_id == want_ids and page.body_bytes == want_bytes and len(page) == n
    assert page.batch.to_pylist()[0]["tx_sequence_id"] is None
    if n == 1:
        return
    row = page.batch.to_pylist()[1]
    assert row["message_id"] == f"{{{LINEAGES[1]}}}\\{4_000_000_001}"
    assert row["source_qm"] == str(SOURCES[1]) and row["label"] == "étiquette 1"
    assert row["tx_sequence_id"] == -2 and row["tx_sequence_number"] == 1


def test_empty_reply_is_an_empty_batch() -> None:
    page = packed_to_page(QUEUE, b"")
    assert len(page) == 0 and page.batch.num_rows == 0 and page.batch.schema == ARROW_SCHEMA


@pytest.mark.parametrize("cut", [1, 60, -1])
def test_a_truncated_reply_fails(cut: int) -> None:
    blob = encode_messages([message(i) for i in range(3)])
    with pytest.raises(MQError, match="malformed packed"):
        packed_to_page(QUEUE, blob[:cut])


def test_a_label_that_is_not_utf8_fails() -> None:
    blob = bytearray(encode_messages([message(1)]))
    at = blob.index("étiquette".encode())
    blob[at] = 0xFF
    with pytest.raises(MQError, match="not UTF-8"):
        packed_to_page(QUEUE, bytes(blob))


def same_size(i: int, *, shift: bool) -> MessageRecord:
    """Records all of one size; with ``shift`` the body and label sizes trade bytes."""
    k = i % 2 if shift else 0
    return MessageRecord(
        body=b"b%d" % (i % 10) + b"x" * (8 - 3 * k), label="abc" * k, lookup_id=10 + i,
        id_lineage=LINEAGES[0], id_uniquifier=i + 1, sent_time=1_700_000_000, arrived_time=1_700_000_000,
        source_machine=SOURCES[0], correlation_id=bytes([i % 256]) * 20, transactional=True,
        tx_sequence_id=5, tx_sequence_number=i,
    )  # fmt: skip


@pytest.mark.parametrize("shift", [False, True])
@pytest.mark.parametrize("n", [1, 3, 40])
def test_pages_of_equal_sized_records_take_the_strided_path(n: int, shift: bool) -> None:
    from openmsmq.spark.packed_arrow import _uniform_stride

    msgs = [same_size(i, shift=shift) for i in range(n)]
    blob = encode_messages(msgs)
    assert _uniform_stride(blob) == len(blob) // n
    want_batch, want_ids, want_bytes = old_path(msgs)
    page = packed_to_page(QUEUE, blob)
    assert page.batch.equals(want_batch)
    assert page.lookup_id == want_ids and page.body_bytes == want_bytes


def test_a_blob_of_unequal_records_is_walked() -> None:
    from openmsmq.spark.packed_arrow import _uniform_stride

    msgs = [same_size(0, shift=False), message(3), same_size(2, shift=False)]
    assert _uniform_stride(encode_messages(msgs)) == 0
    assert packed_to_page(QUEUE, encode_messages(msgs)).batch.equals(old_path(msgs)[0])
