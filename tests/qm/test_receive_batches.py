"""A transaction keeps its receives as (queue, messages) batches and commits them without
an object per message (Transaction._batches, QueueManager._commit, ops.DeleteMany); a
DequeueReason or an RR_NACK switches it to the per-message index. The same operations
through both forms give the same result: messages returned, counters, what is left,
journal moves, events and metrics. The set-based delete's one-run shortcut deletes
exactly the ids given."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from openmsmq.qm import MessageRecord, QueueManager
from openmsmq.qm.transaction import Transaction
from openmsmq.store import ops
from openmsmq.store.ops import RemovedMessage

TX = "private$\\tx"
JR = "private$\\jr"
OTHER = "private$\\other"
PLAIN = "private$\\plain"
NACK_RECEIVE_REJECTED = 0xC004


class Counts:
    """A metrics sink that only sums count_committed."""

    def __init__(self) -> None:
        self.sent = 0
        self.received = 0

    def count_committed(self, sent: int, received: int) -> None:
        self.sent += sent
        self.received += received

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *a, **k: None


def _populate(qm: QueueManager) -> None:
    for batch in range(3):
        with qm.begin() as tx:
            qm.send_many(
                TX,
                [
                    MessageRecord(body=b"t%d-%d" % (batch, i), label="x" * i, ack_flags=1 if i == 2 else 0)
                    for i in range(7)
                ],
                tx,
            )
        with qm.begin() as tx:
            qm.send_many(OTHER, [MessageRecord(body=b"o%d-%d" % (batch, i)) for i in range(3)], tx)
        with qm.begin() as tx:
            qm.send_many(
                JR,
                [MessageRecord(body=b"j%d-%d" % (batch, i), positive_journaling=i == 0) for i in range(3)],
                tx,
            )
        for i in range(3):
            qm.send(
                PLAIN, MessageRecord(body=b"p%d-%d" % (batch, i), priority=i, ack_flags=1 if i == 1 else 0)
            )


def _snapshot(qm: QueueManager) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in (TX, JR, OTHER, PLAIN, JR + ";journal"):
        rec = qm.get_queue(name)
        msgs = qm.peek_range(name, 0, 1_000_000)
        assert rec.msg_count == len(msgs)
        assert rec.total_bytes == sum(m.size for m in msgs)
        out[name] = (rec.msg_count, rec.total_bytes, [(m.lookup_id, m.body) for m in msgs])
    return out


def _ids(msgs: list[MessageRecord]) -> list[tuple[int, bytes]]:
    return [(m.lookup_id, m.body) for m in msgs]


def _run(path: Path, *, indexed: bool, threaded: bool) -> list[Any]:
    counts = Counts()
    qm = QueueManager(path, threaded=threaded, computer_name="host1", metrics=counts)  # type: ignore[arg-type]
    events: list[RemovedMessage] = []
    qm.add_removal_listener(events.extend)

    def begin() -> Transaction:
        tx = qm.begin()
        if indexed:  # the per-message form from the start
            with tx._lock:
                tx._indexed()
        return tx

    steps: list[Any] = []
    try:
        qm.create_queue(TX, transactional=True)
        qm.create_queue(JR, transactional=True, journal=True)
        qm.create_queue(OTHER, transactional=True)
        qm.create_queue(PLAIN)
        _populate(qm)
        # Several queues, one of them journaling, a queue met twice; the caller's lists
        # are its own (clearing one changes nothing committed).
        with begin() as tx:
            a = qm.receive_many(TX, 4, tx=tx)
            b = qm.receive_many(JR, 2, tx=tx)
            c = qm.receive_many(TX, 5, tx=tx)
            d = qm.receive_many(OTHER, 2, tx=tx)
            steps.append([_ids(x) for x in (a, b, c, d)] + [tx.receive_count])
            c.clear()
        steps.append(_snapshot(qm))
        # Abort: every message back in place.
        tx = begin()
        steps.append(_ids(qm.receive_many(TX, 3, tx=tx)) + _ids(qm.receive_many(JR, 1, tx=tx)))
        tx.abort()
        steps.append(_snapshot(qm))
        # Two-phase receive in a transaction with an RR_NACK (the index form from then on).
        with begin() as tx:
            pending = qm.dequeue_begin_many(TX, 3, tx=tx)
            qm.dequeue_end(pending[1], delete=False)
            for p in (pending[0], pending[2]):
                qm.dequeue_end(p, delete=True)
            steps.append([p.lookup_id for p in pending] + [tx.receive_count])
        steps.append(_snapshot(qm))
        # A DequeueReason on a message that asked for acknowledgments.
        with begin() as tx:
            got = qm.receive_many(TX, 6, tx=tx)
            for m in got:
                tx.set_dequeue_reason(m.lookup_id, NACK_RECEIVE_REJECTED)
            steps.append(_ids(got) + _ids(qm.receive_many(JR, 5, tx=tx)))
        steps.append(_snapshot(qm))
        # Outside a transaction (non-transactional queue): deleted at once.
        steps.append(_ids(qm.receive_many(PLAIN, 4)))
        steps.append(_snapshot(qm))
        steps.append(sorted((e.queue_id, e.message.lookup_id, e.reason) for e in events))
        steps.append((counts.sent, counts.received))
    finally:
        qm.close()
    return steps


def test_batches_and_index_give_the_same_results(tmp_path: Path) -> None:
    for threaded in (False, True):
        fast = _run(tmp_path / f"b-{threaded}", indexed=False, threaded=threaded)
        slow = _run(tmp_path / f"i-{threaded}", indexed=True, threaded=threaded)
        assert fast == slow
    # And the outcome is the expected one, not merely the same twice.
    events = fast[-2]
    first = fast[0]
    assert first[-1] == 4 + 2 + 5 + 2
    after_first = fast[1]
    assert [after_first[q][0] for q in (TX, JR, OTHER, JR + ";journal")] == [21 - 9, 9 - 2, 9 - 2, 2]
    assert fast[3] == after_first  # the abort put everything back
    journal = after_first[JR + ";journal"]
    assert [body for _, body in journal[2]] == [body for _, body in first[1]]
    reasons = {reason for _, _, reason in events}
    assert reasons == {0x4000, NACK_RECEIVE_REJECTED}
    # TX: the message 2 of each batch asked for acknowledgments (received by the first
    # transaction, the two-phase one and, rejected, the DequeueReason one); JR: the
    # journaling ones received (j0-0, then j1-0 and j2-0); PLAIN: the priority-1 one.
    assert len(events) == 7
    assert sum(1 for e in events if e[2] == NACK_RECEIVE_REJECTED) == 1


def _delete_table(ids: list[int]) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE messages (lookup_id INTEGER PRIMARY KEY)")
    conn.executemany("INSERT INTO messages VALUES (?)", [(i,) for i in ids])
    return conn


def test_delete_lookup_ids_deletes_exactly_the_ids_given() -> None:
    table = list(range(1, 60))
    cases = [
        list(range(10, 20)),  # one run (the shortcut)
        list(range(19, 9, -1)),  # one run, unsorted
        [10, 11, 12],  # too short for a range
        [10, 11, 11, 13, 14],  # span n - 1 with a duplicate: not a run
        [5, 6, 7, 8, 20, 30, 31, 32, 33, 34, 50],  # runs and singles
        [40],
    ]
    for ids in cases:
        conn = _delete_table(table)
        ops.delete_lookup_ids(conn, ids)
        left = [r[0] for r in conn.execute("SELECT lookup_id FROM messages ORDER BY lookup_id")]
        assert left == [i for i in table if i not in set(ids)], ids
