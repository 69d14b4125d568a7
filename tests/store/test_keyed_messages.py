"""The receive path's batch row decoder (records.keyed_messages) against message_from_row:
the same Message for every row, through the builder and through its fallback."""

from __future__ import annotations

import dataclasses
import sqlite3
import uuid
from pathlib import Path
from typing import Any

import pytest

from openmsmq.qm import MessageRecord, QueueManager
from openmsmq.qm.options import StoreOptions
from openmsmq.store import records
from openmsmq.store.records import (
    KEYED_COLUMNS,
    KEYED_SELECT,
    ROW_COLUMNS,
    keyed_messages,
    message_from_row,
    message_to_row,
)
from openmsmq.wire.fast import slot_builder
from tests.store.support import every_attribute_message

_QM = uuid.uuid4()


def _variants() -> list[MessageRecord]:
    base = MessageRecord(body=bytes(256), id_lineage=_QM, destination_qm=_QM, source_machine=_QM, lookup_id=7)
    zurich = dataclasses.replace(base, destination_queue="private$\\zürich")
    out = [MessageRecord(), every_attribute_message(), base, zurich]
    # Each rare variable-length field alone (the decoder's branch on "any rare field").
    for name, value in [
        ("label", "l"),
        ("admin_queue", "a"),
        ("response_queue", "r"),
        ("extension", b"e"),
        ("sender_id", b"s"),
    ]:
        out.append(dataclasses.replace(base, **{name: value}))
    # Each flag bit alone.
    for name in [
        "positive_journaling",
        "negative_journaling",
        "tracing",
        "final_ack_required",
        "transactional",
        "first_in_transaction",
        "last_in_transaction",
    ]:
        out.append(dataclasses.replace(base, **{name: True}))
    out.append(dataclasses.replace(base, tx_sequence_id=(1 << 64) - 1, correlation_id=b"\xff" * 20))
    # Message.Class shares one selected value with the transactional and tx_flags bits.
    both = dict(transactional=True, first_in_transaction=True, last_in_transaction=True)
    out += [dataclasses.replace(base, message_class=c, **both) for c in (0xFFFF, 0x8000, 1, (1 << 59) - 1)]
    out.append(dataclasses.replace(base, message_class=0xFFFF, last_in_transaction=True))
    # Every priority (order_key's top byte) and LookupIdentifiers up to 56 bits.
    out += [dataclasses.replace(base, priority=p, lookup_id=(1 << (7 * p + 7)) - 1) for p in range(8)]
    return out


def _keyed_rows(full: list[list[Any]], keys: list[int]) -> list[tuple[Any, ...]]:
    """The rows a SELECT of KEYED_SELECT returns for these message rows: through SQLite
    (a row built by message_to_row holds a bytearray body and props; SQLite returns bytes)."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute(f"CREATE TABLE messages ({', '.join(ROW_COLUMNS)}, order_key)")
        marks = ", ".join("?" * (len(ROW_COLUMNS) + 1))
        conn.executemany(
            f"INSERT INTO messages VALUES ({marks})", [(*row, k) for row, k in zip(full, keys, strict=True)]
        )
        rows = conn.execute(f"SELECT {KEYED_SELECT} FROM messages m ORDER BY m.rowid").fetchall()
    finally:
        conn.close()
    assert len(rows[0]) == len(KEYED_COLUMNS)
    return rows


def _check(messages: list[MessageRecord]) -> None:
    """keyed_messages over rows of KEYED_COLUMNS (as SQL returns them) equals
    message_from_row over the same messages' full rows."""
    full = [message_to_row(m) for m in messages]
    keys = [((7 - m.priority) << 56) | m.lookup_id for m in messages]
    got = keyed_messages(_keyed_rows(full, keys))
    want = [(k, message_from_row(row)) for k, row in zip(keys, full, strict=True)]
    assert got == want
    for (_, m), (_, w) in zip(got, want, strict=True):
        assert type(m) is MessageRecord
        # Every field was stored (an unset slot would raise here) and has the same type.
        for f in dataclasses.fields(MessageRecord):
            assert type(getattr(m, f.name)) is type(getattr(w, f.name)), f.name
        with pytest.raises(dataclasses.FrozenInstanceError):
            m.label = "x"  # type: ignore[misc]
        assert hash(m) == hash(w)


def test_keyed_messages_equal_message_from_row() -> None:
    _check(_variants())
    assert keyed_messages([]) == []


def test_keyed_messages_fallback_without_builder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(records, "_MessageBuilder", None)
    _check(_variants())


def test_keyed_messages_many_distinct_guids() -> None:
    # More distinct GUID triples than the memo keeps (it is cleared, never wrong).
    msgs = [
        MessageRecord(id_lineage=uuid.uuid4(), destination_qm=_QM, source_machine=uuid.uuid4())
        for _ in range(5000)
    ]
    _check(msgs)


def test_slot_builder_refuses_what_it_cannot_build() -> None:
    @dataclasses.dataclass(frozen=True)
    class NoSlots:
        a: int

    @dataclasses.dataclass(frozen=True, slots=True)
    class PostInit:
        a: int

        def __post_init__(self) -> None:
            pass

    with pytest.raises(TypeError):
        slot_builder(NoSlots)
    with pytest.raises(TypeError):
        slot_builder(PostInit)
    assert slot_builder(MessageRecord) is not None


def test_received_messages_equal_peeked_ones(tmp_path: Path, qm_store: StoreOptions) -> None:
    """Through the QM: receive_many (head read, keyed_messages) returns what
    peek_range (message_from_row) shows, with and without locked rows to skip."""
    with QueueManager(tmp_path / "qm", integrity_check=False, store_options=qm_store) as qm:
        qm.create_queue("private$\\q", transactional=True)
        msgs = [dataclasses.replace(m, priority=0) for m in _variants()] * 3
        with qm.begin() as tx:
            qm.send_many("private$\\q", msgs, tx)
        shown = qm.peek_range("private$\\q", 0, 1000)
        assert len(shown) == len(msgs)
        got: list[MessageRecord] = []
        with qm.begin() as other:  # a lock past the head, skipped by the read below
            qm.receive_by_lookup_id("private$\\q", shown[5].lookup_id, tx=other)
            with qm.begin() as tx:
                got += qm.receive_many("private$\\q", 10, tx=tx)
                got += qm.receive_many("private$\\q", 1000, tx=tx)
            other.abort()
        with qm.begin() as tx:
            got += qm.receive_many("private$\\q", 10, tx=tx)
        assert sorted(got, key=lambda m: m.lookup_id) == shown


def test_reads_of_every_priority_and_of_moved_messages(tmp_path: Path, qm_store: StoreOptions) -> None:
    """A non-transactional queue holds all eight priorities (order_key bands); its journal
    holds moved messages (new LookupIdentifiers, same priority part). Head reads, cursor
    reads and reads by LookupIdentifier (keyed_messages) return what peek_range
    (message_from_row) shows."""
    from openmsmq.qm import CursorAction, LookupAction

    name = "private$\\n"
    with QueueManager(tmp_path / "qm", integrity_check=False, store_options=qm_store) as qm:
        qm.create_queue(name, journal=True)
        variants = _variants()
        for i, m in enumerate(variants):
            qm.send(name, dataclasses.replace(m, priority=i % 8, transactional=False))
        shown = qm.peek_range(name, 0, 1000)
        in_order = sorted(shown, key=lambda m: (-m.priority, m.lookup_id))
        assert qm.peek_many(name, 1000) == in_order
        cursor = qm.create_cursor(name)
        walked = [qm.peek(name, cursor=cursor)]
        walked += [qm.peek(name, cursor=cursor, action=CursorAction.NEXT) for _ in in_order[1:]]
        assert walked == in_order
        last = qm.peek_by_lookup_id(name, 0, LookupAction.LAST)
        assert last == in_order[-1]
        assert qm.peek_by_lookup_id(name, in_order[3].lookup_id) == in_order[3]
        got = qm.receive_many(name, 5)
        got += [qm.receive_by_lookup_id(name, in_order[-1].lookup_id)]
        got += qm.receive_many(name, 1000)
        assert sorted(got, key=lambda m: m.lookup_id) == shown
        journal = qm.peek_range(name + ";journal", 0, 1000)
        assert len(journal) == len(shown)
        assert qm.peek_many(name + ";journal", 1000) == sorted(
            journal, key=lambda m: (-m.priority, m.lookup_id)
        )
