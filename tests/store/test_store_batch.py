"""Set-based removal of received messages (runs as ranges, the rest in one IN list), on
both backends; then the SQLite writer's leader/follower and idle-read paths (SQLite only)."""

from __future__ import annotations

import random
import sqlite3
import uuid
from pathlib import Path
from typing import Any

from openmsmq.store import MessageRecord, Store, ops, queues, ranges
from tests.store.conftest import Opener
from tests.store.support import private_queue


def _setup(open_store: Opener) -> tuple[Any, int]:
    store = open_store(threaded=False)
    store.write(queues.init_qm_state(uuid.uuid4(), 1000))
    q = private_queue(store, transactional=False, now=1000)
    return store, q.queue_id


def _left(store: Any, qid: int) -> tuple[list[int], int, int]:
    ids = store.read(
        lambda c: [r[0] for r in c.execute("SELECT lookup_id FROM messages WHERE queue_id = ?", (qid,))]
    )
    count, nbytes = store.read(
        lambda c: c.execute("SELECT msg_count, total_bytes FROM queues WHERE queue_id = ?", (qid,)).fetchone()
    )
    return sorted(ids), count, nbytes


def test_removes_delete_exactly_the_named_messages(open_store: Opener) -> None:
    store, qid = _setup(open_store)
    with store:
        ids = store.write(ops.commit_work([ops.Send.of(qid, MessageRecord(body=b"abc"))] * 300, []))
        rng = random.Random(7)
        # Runs of every length (1..9, some of them >= the range threshold), gaps between.
        chosen: list[int] = []
        i = 0
        while i < len(ids):
            n = rng.randint(1, 9)
            chosen += ids[i : i + n]
            i += n + rng.randint(1, 3)
        rng.shuffle(chosen)
        store.write(ops.commit_work([], [ops.Remove(qid, lid, 3) for lid in chosen]))
        left, count, nbytes = _left(store, qid)
        assert left == sorted(set(ids) - set(chosen))
        assert (count, nbytes) == (len(left), 3 * len(left))


def test_one_long_run_and_scattered_singles_beyond_one_in_chunk(open_store: Opener) -> None:
    store, qid = _setup(open_store)
    with store:
        ids = store.write(ops.commit_work([ops.Send.of(qid, MessageRecord(body=b"x"))] * 6000, []))
        run = ids[:1000]
        singles = ids[1001::2]  # 2,500 isolated ids: more than one IN chunk
        store.write(ops.commit_work([], [ops.Remove(qid, lid, 1) for lid in run + singles]))
        left, count, _ = _left(store, qid)
        assert left == sorted(set(ids) - set(run) - set(singles))
        assert count == len(left)


def test_lone_committer_runs_its_batch_in_its_own_thread_durably(tmp_path: Path) -> None:
    """A caller of write() on an idle store leads the batch itself; results and durability
    are those of the writer thread's batches."""
    import threading

    path = tmp_path / "s.db"
    with Store(path) as store:
        store.write(queues.init_qm_state(uuid.uuid4(), 1))
        q = private_queue(store, transactional=True, now=1)
        ran_in: list[int] = []
        ids = []
        for i in range(12):
            work = ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"%d" % i))], [])

            def op(ctx: object, work: ops.CommitWork = work) -> list[int]:
                ran_in.append(threading.get_ident())
                return work(ctx)  # type: ignore[arg-type]

            ids += store.write(op)
        me = threading.get_ident()
        assert ran_in == [me] * 12  # a lone committer leads every batch in its own thread
        assert ids == sorted(ids) and len(set(ids)) == 12
        assert store.stats.batches >= 12
        # Order: an operation submitted (not awaited) before write() completes first.
        order: list[str] = []
        fut = store.submit(lambda ctx: order.append("submitted"))
        store.write(lambda ctx: order.append("written"))
        fut.result()
        assert order == ["submitted", "written"]
    with Store(path) as store:
        bodies = [
            m.body
            for m in store.read(lambda c: ranges.fetch_range_through(c, q.queue_id, False, 0, None, 100))
        ]
        assert bodies == [b"%d" % i for i in range(12)]


def test_inline_commit_off_keeps_every_batch_on_the_writer(tmp_path: Path) -> None:
    import threading

    with Store(tmp_path / "s.db", inline_commit=False) as store:
        ran_in = [store.write(lambda ctx: threading.get_ident()) for _ in range(10)]
        assert threading.get_ident() not in ran_in


def test_close_waits_for_an_inline_batch_in_progress(tmp_path: Path) -> None:
    import threading

    store = Store(tmp_path / "s.db")
    for _ in range(6):  # lone batches: the next write runs inline
        store.write(lambda ctx: None)
    inside, release = threading.Event(), threading.Event()
    results: list[object] = []

    def slow(ctx: object) -> int:
        results.append(threading.get_ident())
        inside.set()
        release.wait(5)
        return 7

    t = threading.Thread(target=lambda: results.append(store.write(slow)))
    t.start()
    assert inside.wait(5)
    closer = threading.Thread(target=store.close)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive()  # waits for the inline batch
    release.set()
    t.join(5)
    closer.join(5)
    assert results == [t.ident, 7] and not closer.is_alive()  # ran inline, in t


def test_interrupt_escaping_an_inline_batch_never_reuses_lookup_ids(tmp_path: Path) -> None:
    """KeyboardInterrupt can reach the main thread between COMMIT and the counter update;
    numbering then continues above the persisted reservation."""
    import pytest

    with Store(tmp_path / "s.db") as store:
        store.write(queues.init_qm_state(uuid.uuid4(), 1))
        q = private_queue(store, transactional=True, now=1)
        ids = []
        for i in range(6):
            ids += store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"%d" % i))], []))
        real_run = store._batches.run_batch

        def run_then_interrupt(batch: list) -> None:  # type: ignore[type-arg]
            counters = store._batches._sequential_id, store._batches._reserved
            real_run(batch)  # committed (durable) ...
            # ... interrupted before the counters moved:
            store._batches._sequential_id, store._batches._reserved = counters
            raise KeyboardInterrupt

        store._batches.run_batch = run_then_interrupt  # type: ignore[method-assign]
        with pytest.raises(KeyboardInterrupt):
            store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"x"))], []))
        store._batches.run_batch = real_run  # type: ignore[method-assign]
        assert not store._conn.in_transaction
        stored = [
            m.lookup_id
            for m in store.read(lambda c: ranges.fetch_range_through(c, q.queue_id, False, 0, None, 100))
        ]
        more = store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"y"))], []))
        assert more[0] > max(stored) and len(set(stored + more)) == len(stored) + 1


def test_idle_read_runs_on_the_write_connection_only_when_idle(tmp_path: Path) -> None:
    """Store.read_idle reads on the write connection (whose page cache holds what its
    commits wrote) only when write() would commit in the caller's thread; it sees every
    commit; otherwise, and with inline_commit off, it reads as read() does."""
    import pytest

    from openmsmq.errors import MQError

    path = tmp_path / "s.db"
    with Store(path) as store:
        store.write(queues.init_qm_state(uuid.uuid4(), 1))
        q = private_queue(store, transactional=True, now=1)

        def count(c: object) -> int:
            return int(c.execute("SELECT count(*) FROM messages").fetchone()[0])  # type: ignore[attr-defined]

        for i in range(6):  # lone batches
            store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"%d" % i))], []))
            assert store.read_idle(count) == i + 1
        assert store.read_idle(lambda c: c is store._conn)
        with store._sync_lock:  # as while a batch runs: this thread's read connection
            assert store.read_idle(lambda c: c is store.reader())
            assert store.read_idle(count) == 6
        with pytest.raises(MQError):
            store.read_idle(lambda c: c.execute("SELECT no_such_column FROM messages"))
        assert store.read_idle(lambda c: c is store._conn)  # nothing left open on it
        assert not store._conn.in_transaction
        # The write connection waits only a couple of milliseconds for a lock (say another
        # process recovering the WAL after a crash): a busy read goes to the read connection.
        tried = []

        def busy_on_the_writer(c: object) -> int:
            tried.append(c)
            if c is store._conn:
                exc = sqlite3.OperationalError("database is locked")
                exc.sqlite_errorcode = 5  # type: ignore[attr-defined]  # SQLITE_BUSY
                raise exc
            return count(c)

        assert store.read_idle(busy_on_the_writer) == 6
        assert tried == [store._conn, store.reader()]
    with pytest.raises(MQError):
        store.read_idle(count)
    with Store(path, inline_commit=False) as store:
        for _ in range(6):
            store.write(lambda ctx: None)
        assert store.read_idle(lambda c: c is store.reader())
