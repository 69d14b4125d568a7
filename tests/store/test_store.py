"""Store: open checks, migrations, group commit, per-op failure, disk full, sequences.

Tests taking ``open_store`` run on both backends (SQLite and PostgreSQL); those taking
``tmp_path`` test what only the SQLite file has (its header, WAL, pages, size limit and
write lock, its schema migrations) and stay on SQLite.
"""

from __future__ import annotations

import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from openmsmq.errors import HResult, MQError, StorageError
from openmsmq.store import IncomingSequenceState, MessageRecord, Store, ops, outgoing, queues, ranges, reads
from openmsmq.store.schema import APPLICATION_ID, SCHEMA_VERSION
from openmsmq.store.writes import WriteContext
from tests.store.conftest import Opener
from tests.store.support import every_attribute_message, make_rows_v5, private_queue


def _open(where: Path | Opener, threaded: bool = True) -> Any:
    """Open a store (a SQLite file, or the backend's store of ``open_store``) with its QM state."""
    store = Store(where, threaded=threaded) if isinstance(where, Path) else where(threaded=threaded)
    store.write(queues.init_qm_state(uuid.uuid4(), 1000))
    return store


def _count(store: Any, queue_id: int) -> int:
    return len(store.read(lambda c: ranges.fetch_range_through(c, queue_id, False, 0, None, 1_000_000)))


@pytest.mark.parametrize("threaded", [True, False])
def test_open_sets_wal_schema_and_application_id(tmp_path: Path, threaded: bool) -> None:
    with _open(tmp_path / "s.db", threaded) as store:
        conn = sqlite3.connect(tmp_path / "s.db")
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        conn.close()
        q = private_queue(store)
        stored = store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"a"))], []))
        assert stored == [1]
    # reopening keeps data and does not migrate again
    with Store(tmp_path / "s.db", threaded=threaded) as store:
        assert _count(store, q.queue_id) == 1


def test_deletes_do_not_zero_freed_pages(tmp_path: Path) -> None:
    """secure_delete=FAST on the writer (2): freed pages are not rewritten with zeros
    (Debian's SQLite defaults to 1; see Store._connect)."""
    with _open(tmp_path / "s.db") as store:
        assert store.write(lambda ctx: ctx.conn.execute("PRAGMA secure_delete").fetchone()[0]) == 2


def test_schema_v4_store_gets_the_final_ack_index(tmp_path: Path) -> None:
    """A store of schema 4 opens at the current version with the messages_final_ack
    partial index, built over the messages already there."""
    path = tmp_path / "s.db"
    with _open(path) as store:
        q = private_queue(store)
        store.write(
            ops.commit_work(
                [ops.Send.of(q.queue_id, MessageRecord(body=b"old", negative_journaling=True))], []
            )
        )
    conn = sqlite3.connect(path)
    conn.execute("DROP INDEX messages_final_ack")
    make_rows_v5(conn)
    conn.execute("PRAGMA user_version = 4")
    conn.commit()
    conn.close()
    with Store(path) as store:
        assert store.read(lambda c: c.execute("PRAGMA user_version").fetchone()[0]) == SCHEMA_VERSION
        sql = store.read(
            lambda c: c.execute("SELECT sql FROM sqlite_master WHERE name = 'messages_final_ack'").fetchone()
        )
        assert sql is not None and "WHERE ack_wanted" in sql[0]
        assert (
            store.read(
                lambda c: c.execute(
                    "SELECT count(*) FROM messages INDEXED BY messages_final_ack"
                    " WHERE tx_sequence_id = 0 AND ack_wanted"
                ).fetchone()[0]
            )
            == 1
        )


def test_schema_v3_store_is_migrated_in_place(tmp_path: Path) -> None:
    """A store written before queues had a sender allowlist (schema 3) opens, keeps its
    messages and gets the column with its default (every sender)."""
    path = tmp_path / "s.db"
    with _open(path) as store:
        q = private_queue(store)
        store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"old"))], []))
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE queues DROP COLUMN allowed_senders")
    make_rows_v5(conn)
    conn.execute("PRAGMA user_version = 3")
    conn.commit()
    conn.close()
    with Store(path) as store:
        assert store.read(lambda c: c.execute("PRAGMA user_version").fetchone()[0]) == SCHEMA_VERSION
        assert store.read(lambda c: reads.get_queue(c, q.queue_id)).allowed_senders == ""
        assert [
            m.body
            for m in store.read(lambda c: ranges.fetch_range_through(c, q.queue_id, False, 0, None, 10))
        ] == [b"old"]


def test_schema_v5_store_gets_compact_props(tmp_path: Path) -> None:
    """A store of schema 5 (the three QM GUIDs and the CorrelationId in every row's
    props) opens with each row rewritten in the compact layout: the same messages come
    back, in fewer bytes."""
    path = tmp_path / "s.db"
    own = uuid.uuid4()
    sent = [
        every_attribute_message(),
        MessageRecord(body=b"local", id_lineage=own, source_machine=own, destination_queue="private$\\q"),
        MessageRecord(
            body=b"forwarded", id_lineage=own, source_machine=uuid.uuid4(), correlation_id=b"c" * 20
        ),
        MessageRecord(body=b"arrived", id_lineage=own, source_machine=own, destination_qm=uuid.uuid4()),
    ]
    with _open(path) as store:
        q = private_queue(store)
        store.write(ops.commit_work([ops.Send.of(q.queue_id, m) for m in sent], []))
    conn = sqlite3.connect(path)
    compact = conn.execute("SELECT sum(length(props)) FROM messages").fetchone()[0]
    assert make_rows_v5(conn) == len(sent)
    conn.execute("PRAGMA user_version = 5")
    conn.commit()
    old = conn.execute("SELECT sum(length(props)) FROM messages").fetchone()[0]
    conn.close()
    with Store(path) as store:
        assert store.read(lambda c: c.execute("PRAGMA user_version").fetchone()[0]) == SCHEMA_VERSION
        got = store.read(lambda c: ranges.fetch_range_through(c, q.queue_id, False, 0, None, 10))
        total = store.read(lambda c: c.execute("SELECT sum(length(props)) FROM messages").fetchone()[0])
    assert total == compact
    assert [replace(m, lookup_id=0) for m in got] == [replace(m, lookup_id=0) for m in sent]
    # A 118-byte head before; now 39 bytes and the lineage (16), and what the flags add:
    # every GUID, the CorrelationId and the rare lengths (32 + 20 + 12), nothing else, a
    # source and a CorrelationId (16 + 20), a destination QM (16).
    assert old - compact == (118 - 55 - 64) + (118 - 55) + (118 - 55 - 36) + (118 - 55 - 16)


def test_a_store_of_a_newer_schema_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    """A store written by a later openmsmq may hold rows this version cannot read: it is
    refused with MQ_ERROR_MESSAGE_STORAGE_FAILED naming both versions, unchanged."""
    path = tmp_path / "s.db"
    with _open(path) as store:
        q = private_queue(store)
        store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"kept"))], []))
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.commit()
    before = conn.execute("SELECT lookup_id, props, body FROM messages").fetchall()
    conn.close()
    with pytest.raises(StorageError) as info:
        Store(path)
    assert info.value.hresult == HResult.MQ_ERROR_MESSAGE_STORAGE_FAILED
    assert f"store schema {SCHEMA_VERSION + 1}" in str(info.value)
    assert f"reads up to {SCHEMA_VERSION}" in str(info.value)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION + 1
    assert conn.execute("SELECT lookup_id, props, body FROM messages").fetchall() == before
    conn.close()


def test_lookup_ids_never_reused_across_reopen(open_store: Opener) -> None:
    with _open(open_store) as store:
        q = private_queue(store)
        got = store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord())] * 3, []))
        store.write(ops.commit_work([], [ops.Remove(q.queue_id, lid, 0) for lid in got]))
    with open_store() as store:
        again = store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord())], []))
        assert again[0] > 3  # a restart continues above the reserved block: gaps, no reuse


def test_group_commit_shares_commits(open_store: Opener) -> None:
    with _open(open_store) as store:
        q = private_queue(store)
        before = store.stats.batches
        barrier = threading.Barrier(8)
        done = []

        def sender() -> None:
            barrier.wait()
            for _ in range(25):
                done.extend(
                    store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"x"))], []))
                )

        threads = [threading.Thread(target=sender) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(set(done)) == 200
        assert _count(store, q.queue_id) == 200
        batches = store.stats.batches - before
        assert batches < 200, "8 concurrent committers should share COMMITs"


@pytest.mark.parametrize("wait", [0.0, 0.05])
def test_writer_wait_for_previous_committers_is_bounded(tmp_path: Path, wait: float) -> None:
    """Steady committers on alternating threads all complete; a lone committer (or one
    that hops threads) is never held back for long: every wait is bounded."""
    with Store(tmp_path / "w.db", max_commit_wait=wait) as store:
        store.write(queues.init_qm_state(uuid.uuid4(), 1000))
        q = private_queue(store)
        for _ in range(20):  # lone committer: its own thread is in every batch
            store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"a"))], []))
        for i in range(20):  # one client hopping threads: waits find nobody, then back off
            t = threading.Thread(
                target=store.write,
                args=(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"h"))], []),),
            )
            t.start()
            t.join(30)
            assert not t.is_alive(), i
        done: list[int] = []

        def sender() -> None:
            for _ in range(25):
                done.extend(
                    store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"x"))], []))
                )

        threads = [threading.Thread(target=sender) for _ in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert len(set(done)) == 150
        assert _count(store, q.queue_id) == 190


def test_commit_after_a_lone_committers_batch_does_not_wait(tmp_path: Path) -> None:
    """Two threads committing in turn, each alone in its batch (a transfer storing an accept
    batch, then a consumer committing its receive): no leader waits for the other thread,
    however long ``max_commit_wait`` is; only a batch several threads shared is waited for."""
    import queue as queue_mod

    with Store(tmp_path / "w.db", max_commit_wait=30.0) as store:
        store.write(queues.init_qm_state(uuid.uuid4(), 1000))
        q = private_queue(store)
        turns: list[queue_mod.Queue[bool]] = [queue_mod.Queue(), queue_mod.Queue()]
        done: queue_mod.Queue[int] = queue_mod.Queue()

        def committer(me: int) -> None:
            while turns[me].get(timeout=60):
                store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"t"))], []))
                done.put(me)

        threads = [threading.Thread(target=committer, args=(i,)) for i in (0, 1)]
        for t in threads:
            t.start()
        try:
            for i in range(8):
                turns[i % 2].put(True)
                assert done.get(timeout=60) == i % 2
        finally:
            for turn in turns:
                turn.put(False)
            for t in threads:
                t.join(60)
        assert _count(store, q.queue_id) == 8
        assert store.stats.commit_waits == 0


def test_commit_does_not_wait_for_committers_that_come_back_late(tmp_path: Path) -> None:
    """Two threads (say a remote consumer's commit and the transfer's accept batch) share a
    batch, but each commits again only long after its last commit: the next leader, alone,
    does not wait for them (``max_commit_wait`` 30 s would otherwise bound the wait by half
    the last COMMIT only)."""
    with Store(tmp_path / "w.db", max_commit_wait=30.0) as store:
        store.write(queues.init_qm_state(uuid.uuid4(), 1000))
        q = private_queue(store)

        def send() -> None:
            store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"s"))], []))

        def in_thread(fn: Callable[[], None]) -> threading.Thread:
            t = threading.Thread(target=fn)
            t.start()
            return t

        go = [threading.Event(), threading.Event()]
        late = [threading.Event(), threading.Event()]

        def committer(me: int) -> None:
            send()  # alone: the store learns when this thread's commit ended
            late[me].set()
            assert go[me].wait(60)
            send()  # long after: this thread comes back late

        blocked, release = threading.Event(), threading.Event()

        def hold(_ctx: WriteContext) -> None:
            blocked.set()
            assert release.wait(60)

        workers = [in_thread(lambda me=me: committer(me)) for me in (0, 1)]  # type: ignore[misc]
        for e in late:
            assert e.wait(60)
        time.sleep(1.0)  # far beyond half a COMMIT: both come back late
        holder = in_thread(lambda: store.write(hold))
        assert blocked.wait(60)
        for e in go:  # both queue behind the held batch: they share the next one
            e.set()
        for _ in range(3000):
            if len(store._pending) == 2:
                break
            time.sleep(0.01)
        assert len(store._pending) == 2
        release.set()
        for t in [holder, *workers]:
            t.join(60)
        waits = store.stats.commit_waits
        # Alone (not the main thread, which never waits) after a batch two threads shared,
        # both of which come back late.
        in_thread(send).join(60)
        assert store.stats.commit_waits == waits
        assert _count(store, q.queue_id) == 5


def test_removal_events_take_one_statement_per_chunk_not_per_message(tmp_path: Path) -> None:
    """The events of removed messages (FinalAck settlements, expiry passes) are read inside
    the store's write transaction: a statement per message held every other committer of
    the QM for thousands of statements. Those that asked for acknowledgments are reported,
    in the order of the removes, with their own class; the others are not."""
    with _open(tmp_path / "e.db") as store:
        q = private_queue(store)
        other = private_queue(store, "private$\\other")
        n = 1200  # three chunks
        lids = store.write(
            ops.commit_work(
                [
                    ops.Send.of(q.queue_id, MessageRecord(body=b"j", positive_journaling=i % 3 == 0))
                    for i in range(n)
                ],
                [],
            )
        )
        removes = [ops.Remove(q.queue_id, lid, 1, None, 0x4000 + i % 2) for i, lid in enumerate(lids)]
        removes.append(ops.Remove(other.queue_id, lids[0], 1, None, 0x4000))  # not in that queue
        statements: list[str] = []

        def run(conn: sqlite3.Connection) -> list[ops.RemovedMessage]:
            conn.set_trace_callback(statements.append)
            try:
                return ops.expiry_events(removes)(conn)
            finally:
                conn.set_trace_callback(None)

        events = store.read(run)
        selects = [s for s in statements if s.lstrip().upper().startswith("SELECT")]
        assert len(selects) == 3
        assert [(e.queue_id, e.message.lookup_id, e.reason) for e in events] == [
            (q.queue_id, lid, 0x4000 + i % 2) for i, lid in enumerate(lids) if i % 3 == 0
        ]


def test_failing_op_does_not_abort_the_batch(open_store: Opener) -> None:
    with _open(open_store) as store:
        q = private_queue(store)
        gate = threading.Event()
        blocker = store.submit(lambda ctx: gate.wait(5))  # holds the writer so the rest batch up
        good1 = store.submit(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"1"))], []))

        def bad(ctx):
            ctx.conn.execute("INSERT INTO messages (lookup_id) VALUES (NULL)")  # NOT NULL violation

        failing = store.submit(bad)
        good2 = store.submit(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"2"))], []))
        gate.set()
        blocker.result()
        assert len(good1.result()) == 1
        assert len(good2.result()) == 1
        with pytest.raises(StorageError) as info:
            failing.result()
        assert info.value.hresult == HResult.MQ_ERROR_MESSAGE_STORAGE_FAILED
        assert [
            m.body
            for m in store.read(lambda c: ranges.fetch_range_through(c, q.queue_id, False, 0, None, 10))
        ] == [b"1", b"2"]


def test_disk_full_fails_only_that_op_and_recovers(tmp_path: Path) -> None:
    with _open(tmp_path / "s.db") as store:
        q = private_queue(store)
        store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"keep" * 10))], []))
        size = (tmp_path / "s.db").stat().st_size + (tmp_path / "s.db-wal").stat().st_size
        store.set_size_limit(size + 64 * 1024)
        big = MessageRecord(body=bytes(200 * 1024))
        with pytest.raises(StorageError) as info:
            store.write(ops.commit_work([ops.Send.of(q.queue_id, big)], []))
        assert info.value.hresult == HResult.MQ_ERROR_INSUFFICIENT_RESOURCES
        # small writes still fit; committed data intact
        store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"small"))], []))
        bodies = [
            m.body
            for m in store.read(lambda c: ranges.fetch_range_through(c, q.queue_id, False, 0, None, 10))
        ]
        assert bodies == [b"keep" * 10, b"small"]
        store.set_size_limit(None)
        store.write(ops.commit_work([ops.Send.of(q.queue_id, big)], []))
        assert _count(store, q.queue_id) == 3
        stats = store.read(lambda c: reads.get_queue(c, q.queue_id))
        assert stats.msg_count == 3


def _hold_write_lock(path: Path) -> sqlite3.Connection:
    """Another process's connection to the store holding its write lock."""
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    return other


@pytest.mark.parametrize("threaded", [True, False])
def test_a_write_waits_for_another_connections_write_lock(tmp_path: Path, threaded: bool) -> None:
    # The writer's SQLite busy timeout is a couple of milliseconds (it polls instead of
    # sleeping on SQLite's 1-2-5-...-100 ms schedule); a lock held longer than that but
    # within lock_wait is waited for, not reported.
    with _open(tmp_path / "s.db", threaded=threaded) as store:
        q = private_queue(store)
        other = _hold_write_lock(tmp_path / "s.db")
        other.execute("CREATE TABLE other_writer (x)")
        release = threading.Timer(0.05, other.execute, ("COMMIT",))
        release.start()
        try:
            store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"after"))], []))
        finally:
            release.join()
            other.close()
        assert _count(store, q.queue_id) == 1
        tables = store.read(lambda c: c.execute("SELECT name FROM sqlite_master").fetchall())
        assert ("other_writer",) in tables  # its transaction committed first


def test_a_write_lock_held_beyond_lock_wait_fails_the_write_and_loses_nothing(tmp_path: Path) -> None:
    with _open(tmp_path / "s.db") as store:
        q = private_queue(store)
        store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"kept"))], []))
        store.lock_wait = 0.05
        other = _hold_write_lock(tmp_path / "s.db")
        try:
            with pytest.raises(StorageError) as info:
                store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"x"))], []))
        finally:
            other.rollback()
            other.close()
        assert info.value.hresult == HResult.MQ_ERROR_MESSAGE_STORAGE_FAILED
        assert "locked" in str(info.value)
        store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"next"))], []))
        bodies = [
            m.body
            for m in store.read(lambda c: ranges.fetch_range_through(c, q.queue_id, False, 0, None, 10))
        ]
        assert bodies == [b"kept", b"next"]


def test_garbage_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not a database at all" * 100)
    with pytest.raises(StorageError) as info:
        Store(path)
    assert str(path) in str(info.value)
    assert "not an SQLite database" in str(info.value)


def test_foreign_sqlite_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    with pytest.raises(StorageError, match="another application"):
        Store(path)


def test_corrupted_store_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "s.db"
    with _open(path) as store:
        q = private_queue(store)
        store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=bytes(5000)))] * 50, []))
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'messages_order'").fetchone()[0]
    conn.close()
    data = bytearray(path.read_bytes())
    start = (root - 1) * page_size
    data[start : start + page_size] = b"\xa5" * page_size  # smash an index b-tree page
    path.write_bytes(bytes(data))
    with pytest.raises(StorageError) as info:
        Store(path)
    assert str(path) in str(info.value)
    assert info.value.hresult == HResult.MQ_ERROR_MESSAGE_STORAGE_FAILED


def test_quota_is_checked_in_the_commit(open_store: Opener) -> None:
    with _open(open_store, threaded=False) as store:
        q = private_queue(store, quota_kb=1)
        store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=bytes(600)))], []))
        with pytest.raises(MQError) as info:
            store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=bytes(600)))], []))
        assert info.value.hresult == HResult.MQ_ERROR_INSUFFICIENT_RESOURCES
        assert _count(store, q.queue_id) == 1


def test_outgoing_sequence_numbers_assigned_at_commit_and_persisted(open_store: Opener) -> None:
    with _open(open_store) as store:
        out = store.write(queues.ensure_outgoing_queue("DIRECT=TCP:192.0.2.1\\private$\\q", 0x1234))
        assert (
            store.write(queues.ensure_outgoing_queue("direct=tcp:192.0.2.1\\PRIVATE$\\q", 99)).queue_id
            == out.queue_id
        )
        state = store.read(lambda c: reads.outgoing_sequence(c, out.queue_id))
        assert state.tx_sequence_id == (0x1234 << 32) | 1
        assert state.next_tx_sequence_number == 1
        tx_msg = MessageRecord(transactional=True)
        store.write(ops.commit_work([ops.Send.of(out.queue_id, tx_msg)] * 2, []))
        store.write(
            ops.commit_work(
                [ops.Send.of(out.queue_id, tx_msg), ops.Send.of(out.queue_id, MessageRecord())], []
            )
        )
        both = store.read(lambda c: ranges.fetch_range_through(c, out.queue_id, False, 0, None, 10))
        a, b = both[:2], both[2:]
        assert [(m.tx_sequence_number, m.tx_previous_sequence_number) for m in a + b] == [
            (1, 0),
            (2, 1),
            (3, 2),
            (0, 0),
        ]
        assert {m.tx_sequence_id for m in a + b[:1]} == {state.tx_sequence_id}
    with open_store() as store:
        state = store.read(lambda c: reads.outgoing_sequence(c, out.queue_id))
        assert state.next_tx_sequence_number == 4
        # OrderAck for 2: messages 1-2 go, the sequence goes on
        removed, state = store.write(outgoing.release_outgoing(out.queue_id, 2))
        assert removed == [a[0].lookup_id, a[1].lookup_id]
        assert state.next_tx_sequence_number == 4
        # OrderAck for 3: nothing transactional left -> new sequence, Ordinal + 1
        _, state = store.write(outgoing.release_outgoing(out.queue_id, 3))
        assert state.tx_sequence_id == (0x1234 << 32) | 2
        assert state.next_tx_sequence_number == 1
        store.write(ops.commit_work([ops.Send.of(out.queue_id, tx_msg)], []))
        c = store.read(lambda c: ranges.fetch_range_through(c, out.queue_id, False, 0, None, 10))[-1:]
        assert (c[0].tx_sequence_id, c[0].tx_sequence_number, c[0].tx_previous_sequence_number) == (
            (0x1234 << 32) | 2,
            1,
            0,
        )


def test_accept_incoming_stores_messages_and_state_atomically(open_store: Opener) -> None:
    sender = uuid.uuid4()
    with _open(open_store) as store:
        q = private_queue(store, transactional=True)
        state = IncomingSequenceState(
            sender, "DIRECT=TCP:10.0.0.1\\private$\\q", q.queue_id, 7 << 32 | 1, 2, 0, 5.5
        )
        msgs = [
            MessageRecord(body=b"1", transactional=True, tx_sequence_id=7 << 32 | 1, tx_sequence_number=1),
            MessageRecord(body=b"2", transactional=True, tx_sequence_id=7 << 32 | 1, tx_sequence_number=2),
        ]
        store.write(ops.accept_incoming([ops.Send.of(q.queue_id, m) for m in msgs], [state], 77))
        assert [
            m.arrived_time
            for m in store.read(lambda c: ranges.fetch_range_through(c, q.queue_id, False, 0, None, 10))
        ] == [
            77,
            77,
        ]
        # a failing accept (queue gone) stores neither the message nor the state
        bad = IncomingSequenceState(sender, "x", 999, 7 << 32 | 1, 3, 0, 6.0)
        with pytest.raises(MQError) as info:
            store.write(ops.accept_incoming([ops.Send.of(999, msgs[0])], [bad], 78))
        assert info.value.hresult == HResult.MQ_ERROR_QUEUE_DELETED
        store.write(
            ops.record_incoming([IncomingSequenceState(sender, "other", None, 1 << 63 | 5, 9, 3, 1.0)])
        )
    with open_store() as store:
        states = store.read(reads.incoming_sequences)
        by_dest = {s.destination: s for s in states}
        assert by_dest["direct=tcp:10.0.0.1\\private$\\q"].tx_sequence_number == 2
        assert by_dest["other"].tx_sequence_id == 1 << 63 | 5  # u64 above 2**63 round-trips
        assert by_dest["other"].reject_count == 3
        assert "x" not in by_dest
        got = store.read(lambda c: ranges.fetch_range_through(c, q.queue_id, False, 0, None, 10))
        assert [m.tx_sequence_number for m in got] == [1, 2]


def test_uniquifier_blocks_never_overlap(open_store: Opener) -> None:
    with _open(open_store, threaded=False) as store:
        a = store.write(queues.reserve_uniquifiers(10))
        b = store.write(queues.reserve_uniquifiers(10))
        assert b == a + 10
        store.write(lambda ctx: ctx.conn.execute("UPDATE qm_state SET message_id_ordinal = ?", (0xFFFFFFFA,)))
        assert store.write(queues.reserve_uniquifiers(10)) == 1  # wraps, skipping 0


def test_closed_store_refuses_writes(open_store: Opener) -> None:
    store = _open(open_store)
    store.close()
    with pytest.raises(MQError) as info:
        store.submit(lambda ctx: None)
    assert info.value.hresult == HResult.MQ_ERROR_SERVICE_NOT_AVAILABLE


def test_group_commit_takes_at_most_max_batch_ops_per_commit_in_order(open_store: Opener) -> None:
    # store.group_commit_max_batch: the rest of what waits goes in the next batches, in
    # submission order.
    class Sizes:
        def __init__(self) -> None:
            self.sizes: list[int] = []

        def observe_commit(self, ops_count: int, seconds: float) -> None:
            self.sizes.append(ops_count)

        def observe_stage(self, stage: str, seconds: float) -> None:
            pass

    store = open_store(max_batch_ops=3)
    store.write(queues.init_qm_state(uuid.uuid4(), 1000))
    try:
        q = private_queue(store)
        sizes = Sizes()
        store.metrics = sizes  # type: ignore[assignment]
        gate = threading.Event()
        blocker = store.submit(lambda ctx: gate.wait(5))  # the rest queues behind it
        sends = [[ops.Send.of(q.queue_id, MessageRecord(body=b"%d" % i))] for i in range(10)]
        futures = [store.submit(ops.commit_work(send, [])) for send in sends]
        gate.set()
        blocker.result()
        ids = [f.result()[0] for f in futures]
        assert ids == sorted(ids)  # committed in submission order
        assert sizes.sizes and max(sizes.sizes) <= 3
        assert sum(sizes.sizes) == 11  # the blocker and the ten sends
        assert _count(store, q.queue_id) == 10
    finally:
        store.close()


def test_merged_group_commit_fails_only_the_over_quota_transaction(open_store: Opener) -> None:
    with _open(open_store) as store:
        small = private_queue(store, "private$\\small", quota_kb=1)
        big = private_queue(store, "private$\\big")
        gate = threading.Event()
        blocker = store.submit(lambda ctx: gate.wait(5))  # queue the rest behind it: one batch
        ok1 = store.submit(ops.commit_work([ops.Send.of(big.queue_id, MessageRecord(body=b"1"))], []))
        over = store.submit(
            ops.commit_work([ops.Send.of(small.queue_id, MessageRecord(body=bytes(2048)))], [])
        )
        ok2 = store.submit(ops.commit_work([ops.Send.of(big.queue_id, MessageRecord(body=b"2"))], []))
        batches = store.stats.batches
        gate.set()
        blocker.result()
        assert len(ok1.result()) == 1 and len(ok2.result()) == 1
        with pytest.raises(MQError) as info:
            over.result()
        assert info.value.hresult == HResult.MQ_ERROR_INSUFFICIENT_RESOURCES
        assert store.stats.batches - batches <= 2
        assert [
            m.body
            for m in store.read(lambda c: ranges.fetch_range_through(c, big.queue_id, False, 0, None, 10))
        ] == [
            b"1",
            b"2",
        ]
        assert _count(store, small.queue_id) == 0
        assert store.read(lambda c: reads.get_queue(c, small.queue_id)).total_bytes == 0


def test_message_row_round_trip_keeps_every_attribute(open_store: Opener) -> None:
    from openmsmq.store.records import message_from_row, message_to_row

    full = every_attribute_message()
    assert message_from_row(message_to_row(full)) == full
    assert message_from_row(message_to_row(MessageRecord())) == MessageRecord()
    with _open(open_store) as store:
        q = private_queue(store, transactional=True)
        store.write(ops.commit_work([ops.Send.of(q.queue_id, full)], []))
        (got,) = store.read(lambda c: ranges.fetch_range_through(c, q.queue_id, False, 0, None, 10))
        assert got == replace(full, lookup_id=got.lookup_id)
    with pytest.raises(MQError) as info:
        message_to_row(MessageRecord(correlation_id=b"short"))
    assert info.value.hresult == HResult.MQ_ERROR_ILLEGAL_PROPERTY_SIZE


def test_tx_sequence_ids_are_never_shared_or_reused_across_outgoing_queues(open_store: Opener) -> None:
    """An OrderAck names only the TxSequenceID: two outgoing queues created in the same second,
    new sequences after releases, a deleted queue and a restart never yield an ID twice."""
    issued: list[int] = []
    tx_msg = MessageRecord(transactional=True)
    with _open(open_store, threaded=False) as store:
        q1 = store.write(queues.ensure_outgoing_queue("DIRECT=TCP:192.0.2.1\\private$\\a", 0x1234))
        q2 = store.write(queues.ensure_outgoing_queue("DIRECT=TCP:192.0.2.2\\private$\\b", 0x1234))
        for q in (q1, q2):
            issued.append(store.read(lambda c, q=q: reads.outgoing_sequence(c, q.queue_id)).tx_sequence_id)
        for _ in range(3):  # finish a sequence on each queue: each starts a new one
            for q in (q1, q2):
                store.write(ops.commit_work([ops.Send.of(q.queue_id, tx_msg)], []))
                _, state = store.write(outgoing.release_outgoing(q.queue_id, 1))
                issued.append(state.tx_sequence_id)
        store.write(queues.delete_queue(q2.queue_id, 0xC000))  # NackQueueDeleted
    with _open(open_store, threaded=False) as store:
        q3 = store.write(queues.ensure_outgoing_queue("DIRECT=TCP:192.0.2.3\\private$\\c", 0x1234))
        issued.append(store.read(lambda c: reads.outgoing_sequence(c, q3.queue_id)).tx_sequence_id)
    assert len(set(issued)) == len(issued), [hex(i) for i in issued]
    assert issued == sorted(issued)


def test_last_access_time_reads_wall_clock_and_old_monotonic_rows_as_unknown(open_store: Opener) -> None:
    # LastAccessTime is persisted as wall-clock seconds; rows written while it held the
    # driver's monotonic clock (small values) read as 0.0 = unknown.
    sender = uuid.uuid4()
    with _open(open_store) as store:
        store.write(
            ops.record_incoming(
                [
                    IncomingSequenceState(sender, "wall", None, 5, 1, 0, 1_790_000_000.25),
                    IncomingSequenceState(sender, "monotonic", None, 5, 1, 0, 13_579.5),
                    IncomingSequenceState(sender, "never", None, 5, 1, 0, 0.0),
                ]
            )
        )
        by_dest = {s.destination: s.last_access_time for s in store.read(reads.incoming_sequences)}
    assert by_dest == {"wall": 1_790_000_000.25, "monotonic": 0.0, "never": 0.0}


@pytest.mark.parametrize("count", [1, 2, 7, 8, 9, 63, 64, 65, 100, 121, 130])
def test_insert_fills_ids_order_keys_and_tails_in_every_chunk_shape(open_store: Opener, count: int) -> None:
    """The multi-row INSERT computes LookupIdentifier and order key in SQL from one bound
    first identifier: every chunk size and remainder gives each row its own identifier,
    ``((7 - priority) << 56) | lookup_id``, queue and expiry, in send order."""
    with _open(open_store, threaded=False) as store:
        qa, qb = private_queue(store, "private$\\a"), private_queue(store, "private$\\b")
        sends = [
            ops.Send.of(
                (qa if i % 3 else qb).queue_id,
                MessageRecord(body=bytes([i % 256]), priority=i % 8),
                expire_at=None if i % 4 else 10_000 + i,
                expire_class=0 if i % 4 else 0xC002,
            )
            for i in range(count)
        ]
        ids = store.write(ops.commit_work(sends, []))
        assert ids == list(range(ids[0], ids[0] + count))
        got = store.read(
            lambda c: c.execute(
                "SELECT lookup_id, queue_id, order_key, priority, expire_at, expire_class, body"
                " FROM messages ORDER BY lookup_id"
            ).fetchall()
        )
        assert got == [
            (lid, s.queue_id, ((7 - i % 8) << 56) | lid, i % 8, s.expire_at, s.expire_class, bytes([i % 256]))
            for i, (lid, s) in enumerate(zip(ids, sends, strict=True))
        ]


def test_two_connections_to_one_store_hand_out_increasing_lookup_ids(open_store: Opener) -> None:
    """Two processes on one data directory (serve and an application or the CLI) each
    have a Store on the file. Commits alternating between them all succeed, and every
    commit's LookupIdentifiers are above those of every earlier commit, whichever Store
    made it: readers that move past the highest identifier they saw (outgoing queues,
    remote and Spark readers) miss nothing. Before, both handed out the same identifiers
    from their own reservation and the second commit failed on the primary key."""
    with _open(open_store) as store:
        q = private_queue(store)
    first, second = open_store(), open_store()
    try:
        committed: list[list[int]] = []
        for i in range(12):
            store = (first, second)[(i // 2) % 2]  # two commits each, in turns
            committed.append(
                store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"%d" % i))] * 3, []))
            )
        flat = [lid for ids in committed for lid in ids]
        assert flat == sorted(flat) and len(set(flat)) == len(flat) == 36
        bodies = [
            m.body
            for m in first.read(lambda c: ranges.fetch_range_through(c, q.queue_id, False, 0, None, 100))
        ]
        assert bodies == [b"%d" % (k // 3) for k in range(36)]
    finally:
        first.close()
        second.close()


def test_a_watermark_reader_misses_nothing_two_stores_write_at_once(open_store: Opener) -> None:
    """Two Stores on one file commit at the same time from two threads (serve and an
    application); a reader that moves past the highest LookupIdentifier it saw, as the
    Spark source and remote readers do, sees every message. With each Store numbering
    from its own reservation, such a reader missed 57,600 of 120,000 (two processes)."""
    import threading

    with _open(open_store) as store:
        q = private_queue(store)
    stores = [open_store(), open_store()]
    seen: set[bytes] = set()
    done = threading.Event()

    def write(k: int) -> None:
        for i in range(150):
            batch = [ops.Send.of(q.queue_id, MessageRecord(body=b"%d-%d-%d" % (k, i, j))) for j in range(5)]
            stores[k].write(ops.commit_work(batch, []))

    def read() -> None:
        high = 0
        while True:
            last = done.is_set()
            rows = stores[0].read(
                lambda c, after=high: c.execute(
                    "SELECT lookup_id, body FROM messages WHERE queue_id = ? AND lookup_id > ?"
                    " ORDER BY lookup_id",
                    (q.queue_id, after),
                ).fetchall()
            )
            if rows:
                high = rows[-1][0]
                seen.update(bytes(b) for _, b in rows)
            if last:
                return

    try:
        writers = [threading.Thread(target=write, args=(k,)) for k in (0, 1)]
        reader = threading.Thread(target=read)
        reader.start()
        for t in writers:
            t.start()
        for t in writers:
            t.join()
        done.set()
        reader.join()
        assert len(seen) == 2 * 150 * 5
    finally:
        for s in stores:
            s.close()
