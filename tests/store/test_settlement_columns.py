"""A release of OrderAck'ed messages and a FinalAck settlement decide from a message's
head columns (its flags, MessageID, destination, size) and never read its body: SQLite's
authorizer is told every column each statement reads, and the body is not among them.
The outcome is the same as before (what moved where, the counters)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from openmsmq.qm import MessageRecord, QueueManager, names
from openmsmq.store import outgoing
from openmsmq.store.writes import WriteContext

#: SQLite only: the authorizer is SQLite's (PostgreSQL runs the same statements).
pytestmark = pytest.mark.sqlite_only

DEST = "DIRECT=TCP:192.0.2.9\\private$\\orders"
BODY = b"b" * 5000  # in overflow pages of its own


def _filled(tmp_path: Path) -> tuple[Path, dict[str, int]]:
    """A QM store whose outgoing queue holds 12 transactional messages, every third of
    them asking for a FinalAck (FA, JP or JN) and one asking for acknowledgments only."""
    qm = QueueManager(tmp_path / "qm")
    kinds: list[dict[str, Any]] = [
        {}, {"final_ack_required": True}, {}, {"positive_journaling": True}, {"ack_flags": 0x0F}, {},
        {"negative_journaling": True}, {}, {}, {"final_ack_required": True}, {}, {},
    ]  # fmt: skip
    with qm.begin() as tx:
        qm.send_many(DEST, [MessageRecord(body=BODY, **k) for k in kinds], tx)
    ids = {
        "out": qm.get_queue(qm.open_queue(DEST)).queue_id,
        "awaiting": qm.get_queue(names.AWAITING_FINAL_ACK).queue_id,
        "journal": qm.get_queue(names.SYSTEM_JOURNAL).queue_id,
        "deadxact": qm.get_queue(names.DEADXACT).queue_id,
    }
    qm.close()
    return tmp_path / "qm" / "openmsmq.db", ids


def _run_reading(path: Path, op: Callable[[WriteContext], Any]) -> tuple[Any, set[tuple[str, str]]]:
    """Run the write operation ``op`` in a transaction on ``path`` (committed); return its
    result and the (table, column) pairs its statements read."""
    conn = sqlite3.connect(path, isolation_level=None)
    read: set[tuple[str, str]] = set()

    def authorize(action: int, arg1: str | None, arg2: str | None, *_: object) -> int:
        if action == sqlite3.SQLITE_READ and arg1 is not None and arg2 is not None:
            read.add((arg1, arg2))
        return sqlite3.SQLITE_OK

    try:
        conn.execute("BEGIN IMMEDIATE")
        conn.set_authorizer(authorize)
        result = op(WriteContext(conn, 1 << 40))
        conn.set_authorizer(None)
        conn.execute("COMMIT")
        counts = dict(conn.execute("SELECT queue_id, msg_count FROM queues").fetchall())
    finally:
        conn.close()
    return (result, counts), read


@pytest.mark.parametrize("return_ids", [False, True])
def test_a_release_does_not_read_bodies(tmp_path: Path, return_ids: bool) -> None:
    path, q = _filled(tmp_path)
    ((moved, _state, left), counts), read = _run_reading(
        path, outgoing.release_outgoing_counted(q["out"], 12, q["awaiting"], return_ids=return_ids)
    )
    assert ("messages", "body") not in read and ("messages", "tx_sequence_number") in read
    assert left == 12 and counts[q["out"]] == 0 and counts[q["awaiting"]] == 4
    if not return_ids:
        assert len(moved) == 4


def test_a_final_ack_settlement_does_not_read_bodies(tmp_path: Path) -> None:
    path, q = _filled(tmp_path)
    _run_reading(path, outgoing.release_outgoing_counted(q["out"], 12, q["awaiting"], return_ids=False))
    conn = sqlite3.connect(path)
    waiting = conn.execute(
        "SELECT tx_sequence_id, tx_sequence_number, lookup_id FROM messages WHERE queue_id = ?"
        " ORDER BY lookup_id",
        (q["awaiting"],),
    ).fetchall()
    conn.close()
    assert len(waiting) == 4
    qm = QueueManager(tmp_path / "qm")
    uniquifiers = [m.id_uniquifier for m in qm.peek_range(names.AWAITING_FINAL_ACK)]
    qm.close()
    # FA (deleted), JP + AckReceive (journal), JN + a NACK (transactional dead letters),
    # FA again, and one for no waiting message.
    classes = [0x4000, 0x4000, 0xC000, 0xC000]
    acks = [
        (seq & 0xFFFFFFFFFFFFFFFF, number, uniq, cls)
        for (seq, number, _), uniq, cls in zip(waiting, uniquifiers, classes, strict=True)
    ] + [(waiting[0][0] & 0xFFFFFFFFFFFFFFFF, 999, 1, 0x4000)]
    (outcomes, counts), read = _run_reading(
        path, outgoing.settle_final_acks(q["awaiting"], acks, q["journal"], q["deadxact"])
    )
    assert ("messages", "body") not in read and ("messages", "tx_sequence_number") in read
    assert [o.target_queue_id for o in outcomes] == [None, q["journal"], q["deadxact"], None, None]
    assert [o.message is not None for o in outcomes] == [True] * 4 + [False]
    assert counts[q["awaiting"]] == 0 and counts[q["journal"]] == 1 and counts[q["deadxact"]] == 1
    # Moved with their bodies, which the settlement never read.
    qm = QueueManager(tmp_path / "qm")
    assert [m.body for m in qm.peek_range(names.SYSTEM_JOURNAL)] == [BODY]
    assert [m.body for m in qm.peek_range(names.DEADXACT)] == [BODY]
    qm.close()


def test_a_final_ack_before_its_order_ack_reads_no_bodies(tmp_path: Path) -> None:
    """A FinalAck for a message no OrderAck released yet (MS-MQQB 3.1.5.7) settles it in
    the outgoing queue by LookupIdentifier: the messages are read without their bodies,
    and the one that goes to the transactional dead-letter queue keeps its body."""
    _filled(tmp_path)
    qm = QueueManager(tmp_path / "qm")
    try:
        out = qm.open_queue(DEST)
        waiting = {m.tx_sequence_number: m for m in qm.peek_range(out)}
        fa, jn = waiting[2], waiting[7]  # FinalAckRequired, negative journaling
        read: set[tuple[str, str]] = set()

        def authorize(action: int, arg1: str | None, arg2: str | None, *_: object) -> int:
            if action == sqlite3.SQLITE_READ and arg1 is not None and arg2 is not None:
                read.add((arg1, arg2))
            return sqlite3.SQLITE_OK

        reader = qm.store.reader()  # this thread's read connection: where the settlement reads
        reader.set_authorizer(authorize)
        try:
            left = qm.settle_outgoing(
                out, [(fa.lookup_id, fa.id_uniquifier, 0xC000), (jn.lookup_id, jn.id_uniquifier, 0xC000)]
            )
        finally:
            reader.set_authorizer(None)
        assert left == 2
        assert ("messages", "body") not in read and ("messages", "props") in read
        assert qm.get_queue(out).msg_count == 10
        assert [(m.body, m.message_class) for m in qm.peek_range(names.DEADXACT)] == [(BODY, 0xC000)]
    finally:
        qm.close()
