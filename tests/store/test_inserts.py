"""The "numbered" INSERT of an outgoing queue's rows stores exactly what numbering each
row in Python and inserting it with the general statement stores; the "uniform" forms
(the columns all rows share bound once) store exactly what binding every value does."""

from __future__ import annotations

import sqlite3
import uuid
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openmsmq.store import inserts, schema
from openmsmq.store.ops import Send
from openmsmq.store.records import COL, MessageRecord, stamped_rows, to_i64

#: SQLite only: compares the multi-row INSERT forms on a bare sqlite3 connection, statement by statement.
pytestmark = pytest.mark.sqlite_only


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=OFF")
    schema.migrate(conn)
    return conn


def _table(conn: sqlite3.Connection) -> list[tuple[object, ...]]:
    return conn.execute("SELECT * FROM messages ORDER BY lookup_id").fetchall()


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 150),
    first=st.integers(1, 2**40),
    number=st.integers(1, 2**31),
    sequence_id=st.integers(1, 2**64 - 1),
    expiry=st.sampled_from([(None, 0), (1_700_345_600, 0xC001), (5, 0xC002)]),
    labels=st.booleans(),
    odd=st.sampled_from([None, "message_class", "ack_flags", "priority"]),
)
def test_numbered_insert_equals_rows_numbered_in_python(
    tmp_path_factory: pytest.TempPathFactory,
    n: int,
    first: int,
    number: int,
    sequence_id: int,
    expiry: tuple[int | None, int],
    labels: bool,
    odd: str | None,
) -> None:
    d = tmp_path_factory.mktemp("ins")
    msgs = [MessageRecord(body=b"%d" % i, label=f"L{i}" if labels else "") for i in range(n)]
    rows = stamped_rows(msgs, True, uuid.uuid4(), 7, 1_700_000_000, "private$\\q")
    _make_one_row_odd(rows, odd)
    queue_id = 3
    numbered, general = _connect(d / "a.db"), _connect(d / "b.db")
    numbered.execute("BEGIN")
    inserts.insert_numbered(numbered, first, rows, queue_id, expiry, to_i64(sequence_id), number)
    numbered.execute("COMMIT")
    copies = []
    for j, row in enumerate(rows):
        r = list(row)
        r[COL["tx_sequence_id"]] = to_i64(sequence_id)
        r[COL["tx_sequence_number"]] = number + j
        r[COL["tx_previous_sequence_number"]] = number + j - 1
        copies.append(r)
    sends = [Send(queue_id, r, 0, expiry[0], expiry[1]) for r in copies]
    general.execute("BEGIN")
    inserts.insert_rows(general, first, copies, sends, None)
    general.execute("COMMIT")
    got = _table(numbered)
    assert got == _table(general)
    assert [r[0] for r in got] == list(range(first, first + n))
    numbered.close()
    general.close()


def _make_one_row_odd(rows: list[list[object]], column: str | None) -> None:
    """Give the middle row a value of ``column`` no other row has (None: leave the rows
    alike), so that the batch takes the form that binds every value."""
    if column is None:
        return
    row = rows[len(rows) // 2]
    if column == "ack_flags":
        row[COL["ack_wanted"]] = 1
    else:
        row[COL[column]] = 5


#: A column one row of a batch gets a value of its own in (None: the rows stay alike).
_ODD = [
    None,
    "message_class",
    "ack_flags",
    "priority",
    "arrived_time",
    "tx_sequence_number",
    "tx_sequence_id",
]


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 150),
    first=st.integers(1, 2**40),
    transactional=st.booleans(),
    sequenced=st.booleans(),
    odd=st.sampled_from(_ODD),
)
def test_plain_insert_equals_one_row_at_a_time(
    tmp_path_factory: pytest.TempPathFactory,
    n: int,
    first: int,
    transactional: bool,
    sequenced: bool,
    odd: str | None,
) -> None:
    d = tmp_path_factory.mktemp("ins")
    msgs = [MessageRecord(body=b"%d" % i, label="L" if i % 3 else "", priority=4) for i in range(n)]
    rows = stamped_rows(msgs, transactional, uuid.uuid4(), 7, 1_700_000_000, "private$\\q")
    if sequenced:  # as a receiving QM stores a run of one incoming sequence
        for j, row in enumerate(rows):
            row[COL["tx_sequence_id"]] = to_i64(2**63 + 5)
            row[COL["tx_sequence_number"]] = 10 + j
            row[COL["tx_previous_sequence_number"]] = 9 + j
    rows[0][COL["tx_flags"]] = 1
    rows[-1][COL["tx_flags"]] |= 2
    _make_one_row_odd(rows, odd)
    batch, single = _connect(d / "a.db"), _connect(d / "b.db")
    batch.execute("BEGIN")
    inserts.insert_plain(batch, first, rows, 3)
    batch.execute("COMMIT")
    single.execute("BEGIN")
    for j, row in enumerate(rows):
        inserts.insert_plain(single, first + j, [row], 3)
    single.execute("COMMIT")
    assert _table(batch) == _table(single)
    assert len(_table(batch)) == n
    batch.close()
    single.close()
