"""Reads and deletes by LookupIdentifier cost what they touch, not what the queue holds.

Counted in SQLite virtual-machine steps (a progress handler), not in time: the same
call on a queue of 1,000 messages and on one of 30,000 must take about the same
number of steps. A plan that walks the queue's index for an ``IN`` list, or sorts the
whole queue for one page, takes thirty times as many on the larger queue (the
non-transactional drain of a backlog and a Spark read of a deep queue were quadratic).
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from openmsmq.store import MessageRecord, Store, ops, outgoing, queues, ranges, reads
from openmsmq.store.writes import WriteContext
from tests.store.support import private_queue

#: SQLite only: counts SQLite virtual-machine steps of the store's statements (a query-plan
#: property of SQLite's indexes; PostgreSQL plans its own).
pytestmark = pytest.mark.sqlite_only

SMALL, LARGE = 1_000, 30_000


_SEQ = (1_700_000_000 << 32) | 1


def _queue_of(tmp_path: Path, n: int) -> tuple[Path, int, list[int]]:
    """A store with a queue of ``n`` messages (and a second queue beside it). Each asked
    for a FinalAck (dead_letter, JN) and has a TxSequenceNumber, like the messages in
    a sender's awaiting-FinalAck queue."""
    path = tmp_path / f"q{n}.db"
    with Store(path, threaded=False) as store:
        store.write(queues.init_qm_state(uuid.uuid4(), 1000))
        q = private_queue(store, transactional=False, now=1000)
        other = private_queue(store, transactional=False, now=1000, name="private$\\other")
        ids: list[int] = []
        for k in range(n // 1000):
            msgs = [
                MessageRecord(
                    body=b"x" * 32, transactional=True, negative_journaling=True, id_uniquifier=i,
                    tx_sequence_id=_SEQ, tx_sequence_number=i, tx_previous_sequence_number=i - 1,
                )
                for i in range(k * 1000 + 1, k * 1000 + 1001)
            ]  # fmt: skip
            ids += store.write(ops.commit_work([ops.Send.of(q.queue_id, m) for m in msgs], []))
            store.write(ops.commit_work([ops.Send.of(other.queue_id, MessageRecord(body=b"y"))] * 100, []))
    return path, q.queue_id, ids


def _steps(path: Path, fn: Callable[[sqlite3.Connection], Any]) -> int:
    """SQLite VM steps (in hundreds) that ``fn`` takes on a connection to ``path``; what
    it writes is rolled back."""
    conn = sqlite3.connect(path, isolation_level=None)
    count = [0]

    def tick() -> int:
        count[0] += 1
        return 0

    conn.execute("BEGIN IMMEDIATE")
    conn.set_progress_handler(tick, 100)
    try:
        fn(conn)
    finally:
        conn.set_progress_handler(None, 0)
        conn.execute("ROLLBACK")
        conn.close()
    return count[0]


def _middle(ids: list[int], k: int) -> list[int]:
    mid = len(ids) // 2
    return ids[mid : mid + k]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[int, tuple[Path, int, list[int]]]:
    base = tmp_path_factory.mktemp("cost")
    return {n: _queue_of(base, n) for n in (SMALL, LARGE)}


def _same_cost(cost: Callable[[tuple[Path, int, list[int]]], int], stores: dict[int, Any]) -> None:
    small, large = cost(stores[SMALL]), cost(stores[LARGE])
    assert large <= 2 * small + 20, (small, large)


def test_deleting_what_a_session_ack_acknowledged_does_not_walk_the_queue(stores: dict[int, Any]) -> None:
    def cost(s: tuple[Path, int, list[int]]) -> int:
        path, qid, ids = s
        deleted: list[int] = []
        steps = _steps(
            path, lambda c: deleted.append(outgoing.delete_sent(qid, _middle(ids, 64))(WriteContext(c, 0)))
        )
        assert deleted == [64]
        return steps

    _same_cost(cost, stores)


def test_fetching_messages_to_dead_letter_does_not_walk_the_queue(stores: dict[int, Any]) -> None:
    def cost(s: tuple[Path, int, list[int]]) -> int:
        path, qid, ids = s
        got: list[Any] = []
        steps = _steps(
            path, lambda c: got.extend(reads.fetch_for_dead_letter(c, qid, _middle(ids, 64), 0x8000))
        )
        assert [r[1] for r in got] == _middle(ids, 64)
        return steps

    _same_cost(cost, stores)


def test_a_page_of_a_deep_queue_does_not_sort_the_queue(stores: dict[int, Any]) -> None:
    def cost(s: tuple[Path, int, list[int]]) -> int:
        path, qid, ids = s
        after = _middle(ids, 1)[0]
        got: list[MessageRecord] = []
        steps = _steps(
            path, lambda c: got.extend(ranges.fetch_range_through(c, qid, False, after, None, 100))
        )
        assert [m.lookup_id for m in got] == _middle(ids, 101)[1:]
        return steps

    _same_cost(cost, stores)


def test_settling_a_final_ack_does_not_walk_the_awaiting_queue(stores: dict[int, Any]) -> None:
    """Messages that asked for a FinalAck wait for it in one queue (as many as the
    receiving application has not read yet); each FinalAck finds its message through
    the messages_final_ack index (schema 5), not by walking that queue."""

    def cost(s: tuple[Path, int, list[int]]) -> int:
        path, qid, ids = s
        n = len(ids) // 2
        out: list[Any] = []
        acks = [(_SEQ, k, k, 0x4000) for k in range(n, n + 50)]
        steps = _steps(
            path, lambda c: out.extend(outgoing.settle_final_acks(qid, acks, 0, 0)(WriteContext(c, 0)))
        )
        assert [o.message.tx_sequence_number for o in out] == list(range(n, n + 50))
        return steps

    _same_cost(cost, stores)


def _outgoing_of(base: Path, n: int) -> tuple[Path, int]:
    """A QM's store whose outgoing queue holds ``n`` numbered transactional messages."""
    from openmsmq.qm import QueueManager

    qm = QueueManager(base / f"qm{n}")
    dest = "DIRECT=TCP:192.0.2.9\\private$\\orders"
    for _ in range(n // 1000):
        with qm.begin() as tx:
            qm.send_many(dest, [MessageRecord(body=b"x" * 32)] * 1000, tx)
    qid = qm.get_queue(qm.open_queue(dest)).queue_id
    qm.close()
    return base / f"qm{n}" / "openmsmq.db", qid


@pytest.mark.parametrize("return_ids", [False, True])
def test_an_order_ack_release_does_not_walk_the_backlog_behind_it(
    tmp_path_factory: pytest.TempPathFactory, return_ids: bool
) -> None:
    """An OrderAck releases the first 500 messages of an outgoing queue that holds 1,000
    or 30,000: the release reads the released span, not the backlog behind it (each
    release of a deep backlog walked it all, and summed its sizes)."""
    base = tmp_path_factory.mktemp("release")

    def cost(n: int) -> int:
        path, qid = _outgoing_of(base, n)
        out: list[Any] = []
        steps = _steps(
            path,
            lambda c: out.append(
                outgoing.release_outgoing(qid, 500, return_ids=return_ids)(WriteContext(c, 0))
            ),
        )
        if return_ids:
            assert len(out[0][0]) == 500
        left = (
            sqlite3.connect(path)
            .execute("SELECT msg_count FROM queues WHERE queue_id = ?", (qid,))
            .fetchone()
        )
        assert left == (n,)  # rolled back
        return steps

    small, large = cost(SMALL), cost(LARGE)
    assert large <= 2 * small + 20, (small, large)
