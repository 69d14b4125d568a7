"""Message rows as the send path builds them: bound types, uniquifier wrap, field reads."""

from __future__ import annotations

import uuid

from openmsmq.store import records
from openmsmq.store.records import (
    COL,
    MessageRecord,
    message_from_row,
    message_sent_time,
    message_to_row,
    message_uniquifier,
    stamped_rows,
)


def test_rows_bind_plain_ints_never_bools() -> None:
    flags = MessageRecord(
        transactional=True, first_in_transaction=True, last_in_transaction=True, ack_flags=1
    )
    rows = [message_to_row(flags), message_to_row(MessageRecord())]
    rows += stamped_rows([MessageRecord(), flags], True, uuid.uuid4(), 1, 1_700_000_000, "private$\\q")
    for row in rows:
        assert not any(type(v) is bool for v in row), row
    assert message_from_row(message_to_row(flags)) == flags


def test_stamped_uniquifiers_wrap_to_one_never_zero() -> None:
    qm = uuid.uuid4()
    rows = stamped_rows([MessageRecord(body=b"x")] * 3, True, qm, 0xFFFFFFFE, 1_700_000_000, "private$\\q")
    assert [message_uniquifier(r) for r in rows] == [0xFFFFFFFE, 0xFFFFFFFF, 1]
    assert [message_from_row(r).id_uniquifier for r in rows] == [0xFFFFFFFE, 0xFFFFFFFF, 1]


def test_uniquifier_and_sent_time_read_at_their_offsets() -> None:
    m = MessageRecord(
        label="l",
        admin_queue="a",
        extension=b"e",
        id_uniquifier=0x89ABCDEF,
        sent_time=1_712_345_678,
        app_specific=0xFFFFFFFF,
        hop_count=0xFFFF,
    )
    row = message_to_row(m)
    assert message_uniquifier(row) == 0x89ABCDEF
    assert message_sent_time(row) == 1_712_345_678
    assert message_from_row(row) == m


def test_small_bodies_bind_as_bytearray_and_read_back_as_bytes() -> None:
    """sqlite3 binds a bytearray without its adapter lookup: a body up to BODY_COPY_MAX
    goes into the row as one; the Message read from any row has a bytes body."""
    limit = records.BODY_COPY_MAX
    bodies = [b"", b"x" * 10, bytes(limit), bytes(limit + 1)]
    msgs = [MessageRecord(body=b) for b in bodies]
    rows = stamped_rows(msgs, True, uuid.uuid4(), 1, 1_700_000_000, "private$\\q")
    rows.append(message_to_row(MessageRecord(body=b"y")))
    kinds = [type(r[COL["body"]]) for r in rows]
    assert kinds == [bytearray, bytearray, bytearray, bytes, bytearray]
    for row, body in zip(rows, [*bodies, b"y"], strict=True):
        m = message_from_row(row)
        assert type(m.body) is bytes and m.body == body
        hash(m)
