"""The PostgreSQL store's own behaviour on a real server: bad input at open (nothing
written), the fencing epoch checked in every write transaction, and PostgreSQL failing
under a stream of commits (nothing reported committed that did not commit, nothing
lost, nothing duplicated)."""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import psycopg
import pytest

from openmsmq.errors import ConfigError, FencedError, MQError, StorageError
from openmsmq.store import MessageRecord, ops, queues, ranges
from openmsmq.store.pg.db import PgStore
from openmsmq.store.pg.schema import PG_SCHEMA_VERSION
from tests.pgserver import PgServer
from tests.store.support import private_queue


def _open(dsn: str, **options: Any) -> PgStore:
    store = PgStore(dsn, **options)
    store.write(queues.init_qm_state(options.get("expected_guid") or uuid.uuid4(), 1000))
    return store


def _bodies(store: PgStore, queue_id: int) -> list[bytes]:
    return [
        m.body for m in store.read(lambda c: ranges.fetch_range_through(c, queue_id, False, 0, None, 10**6))
    ]


def _dump(dsn: str) -> list[tuple[Any, ...]]:
    """Every table of the database with its rows: to show that nothing was written."""
    with psycopg.connect(dsn) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename"
            ).fetchall()
        ]
        return [(t, conn.execute(f'SELECT * FROM "{t}" ORDER BY 1').fetchall()) for t in tables]


# ---- bad input at open ----------------------------------------------------------------


def test_a_malformed_dsn_names_the_setting_and_no_secret() -> None:
    with pytest.raises(ConfigError) as info:
        PgStore("host=127.0.0.1 password=s3cr3t-value port")
    assert info.value.key == "store.dsn"
    assert "s3cr3t" not in str(info.value)


def test_an_unreachable_database_names_the_setting_and_no_secret(pg_server: PgServer) -> None:
    with socket_free_port() as port:
        dsn = f"postgresql://openmsmq:s3cr3t-value@127.0.0.1:{port}/nothing"
    with pytest.raises(ConfigError) as info:
        PgStore(dsn, connect_timeout=2)
    assert info.value.key == "store.dsn"
    assert f"127.0.0.1:{port}" in str(info.value)
    assert "s3cr3t" not in str(info.value)


def test_a_wrong_password_names_the_setting_and_no_secret(pg_dsn: str) -> None:
    wrong = pg_dsn.replace("@127.0.0.1", "x-wrong-pw@127.0.0.1")
    with pytest.raises(ConfigError) as info:
        PgStore(wrong)
    assert info.value.key == "store.dsn"
    assert "wrong-pw" not in str(info.value)
    assert _dump(pg_dsn) == []


def test_a_schema_of_a_newer_version_is_refused_and_left_as_it_is(pg_dsn: str) -> None:
    _open(pg_dsn).close()
    with psycopg.connect(pg_dsn) as conn:
        conn.execute("UPDATE openmsmq_schema SET version = %s", (PG_SCHEMA_VERSION + 1,))
    before = _dump(pg_dsn)
    with pytest.raises(StorageError, match="newer openmsmq") as info:
        PgStore(pg_dsn)
    assert "store.dsn" in str(info.value)
    assert _dump(pg_dsn) == before


def test_a_database_of_another_queue_manager_is_refused_before_anything_is_written(pg_dsn: str) -> None:
    mine, other = uuid.uuid4(), uuid.uuid4()
    with _open(pg_dsn, expected_guid=other) as store:
        private_queue(store)
    before = _dump(pg_dsn)
    with pytest.raises(ConfigError) as info:
        PgStore(pg_dsn, expected_guid=mine)
    assert info.value.key == "store.dsn"
    assert str(other) in str(info.value) and str(mine) in str(info.value)
    assert _dump(pg_dsn) == before
    PgStore(pg_dsn, expected_guid=other).close()  # its own QM opens it


def test_a_database_of_another_application_is_refused_and_left_as_it_is(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn) as conn:
        conn.execute("CREATE TABLE invoices (id int)")
    with pytest.raises(ConfigError) as info:
        PgStore(pg_dsn)
    assert info.value.key == "store.dsn"
    assert _dump(pg_dsn) == [("invoices", [])]


# ---- fencing ---------------------------------------------------------------------------


def _set_lease(dsn: str, guid: uuid.UUID, epoch: int) -> None:
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "INSERT INTO qm_lease (qm_guid, epoch, holder, expires_at, since)"
            " VALUES (%s, %s, 'test', now(), now())"
            " ON CONFLICT (qm_guid) DO UPDATE SET epoch = excluded.epoch",
            (str(guid), epoch),
        )


def test_a_fenced_store_commits_only_while_the_lease_holds_its_epoch(pg_dsn: str) -> None:
    guid = uuid.uuid4()
    with _open(pg_dsn, expected_guid=guid) as store:
        q = private_queue(store)
        store.fence(1)
        with pytest.raises(FencedError) as info:  # no lease row: nothing may be written
            store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"no lease"))], []))
        assert info.value.epoch == 1 and info.value.found is None
        _set_lease(pg_dsn, guid, 1)
        store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"epoch 1"))], []))
        _set_lease(pg_dsn, guid, 2)  # another process took over
        gate = threading.Event()
        blocker = store.submit(lambda ctx: gate.wait(5))  # the next ones form one batch
        late = [
            store.submit(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"late %d" % i))], []))
            for i in range(3)
        ]
        gate.set()
        for f in [blocker, *late]:
            with pytest.raises(FencedError) as fenced:
                f.result()
            assert fenced.value.found == 2
        assert isinstance(fenced.value, StorageError)
        assert _bodies(store, q.queue_id) == [b"epoch 1"]
        store.fence(None)  # unfenced (single-node use): writes go on
        store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"unfenced"))], []))
        assert _bodies(store, q.queue_id) == [b"epoch 1", b"unfenced"]


def test_a_takeover_waits_for_the_fenced_transaction_in_flight(pg_dsn: str) -> None:
    """The check holds the lease row FOR SHARE until COMMIT: a takeover's UPDATE of the
    epoch cannot slip between the check and the commit of a transaction."""
    guid = uuid.uuid4()
    _open(pg_dsn, expected_guid=guid).close()
    _set_lease(pg_dsn, guid, 1)
    with PgStore(pg_dsn, expected_guid=guid, fencing_epoch=1) as store:
        q = private_queue(store)
        inside, release = threading.Event(), threading.Event()

        def slow(ctx: Any) -> list[int]:
            ids = ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"in flight"))], [])(ctx)
            inside.set()
            release.wait(10)
            return ids

        pending = store.submit(slow)
        assert inside.wait(10)
        with psycopg.connect(pg_dsn) as other:
            other.execute("SET lock_timeout = '300ms'")
            with pytest.raises(psycopg.errors.LockNotAvailable):
                other.execute("UPDATE qm_lease SET epoch = 2 WHERE qm_guid = %s", (str(guid),))
        release.set()
        assert len(pending.result(10)) == 1
        _set_lease(pg_dsn, guid, 2)
        with pytest.raises(FencedError):
            store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"after"))], []))
        assert _bodies(store, q.queue_id) == [b"in flight"]


# ---- PostgreSQL failing ----------------------------------------------------------------


def test_a_connection_lost_during_commit_fails_that_commit_and_commits_nothing(pg_dsn: str) -> None:
    """A deferred trigger makes the COMMIT of the next transaction take a second; the
    writer's backend is terminated in it. The caller gets StorageError (the store asked
    the server: the transaction aborted), nothing of it is stored, and the next commit
    goes through on a new connection."""
    with _open(pg_dsn) as store:
        q = private_queue(store)
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute(
                "CREATE FUNCTION slow_commit() RETURNS trigger LANGUAGE plpgsql AS"
                " $$ BEGIN IF NEW.body = '\\x736c6f77' THEN PERFORM pg_sleep(2); END IF; RETURN NULL; END $$"
            )
            admin.execute(
                "CREATE CONSTRAINT TRIGGER slow AFTER INSERT ON messages DEFERRABLE INITIALLY DEFERRED"
                " FOR EACH ROW EXECUTE FUNCTION slow_commit()"
            )
            future = store.submit(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"slow"))], []))
            deadline = time.monotonic() + 10
            killed = False
            while time.monotonic() < deadline and not killed:
                row = admin.execute(
                    "SELECT pid FROM pg_stat_activity WHERE query = 'COMMIT' AND state = 'active'"
                    " AND application_name = 'openmsmq'"
                ).fetchone()
                if row:
                    killed = bool(admin.execute("SELECT pg_terminate_backend(%s)", (row[0],)).fetchone()[0])
                time.sleep(0.01)
            assert killed
        with pytest.raises(StorageError, match="during COMMIT"):
            future.result(30)
        store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"next"))], []))
        assert _bodies(store, q.queue_id) == [b"next"]


@pytest.mark.parametrize("neighbours", ["none", "plain", "sends"])
def test_a_connection_lost_before_commit_runs_the_batch_again_on_a_new_connection(
    pg_dsn: str, neighbours: str
) -> None:
    """An operation terminates its own backend the first time it runs (the connection is
    lost inside the batch, before COMMIT, with nothing committed): the whole batch runs
    again once on a new connection, whether the operation is alone in its batch (no
    savepoint) or between two others under savepoints (operations that write nothing,
    or sends, each stored once): every caller gets its result."""
    with _open(pg_dsn) as store:
        q = private_queue(store)
        runs: list[int] = []

        def lose_connection_once(ctx: Any) -> str:
            runs.append(1)
            if len(runs) == 1:
                ctx.conn.execute("SELECT pg_terminate_backend(pg_backend_pid())")
            return "ran"

        def send(body: bytes) -> Any:
            return ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=body))], [])

        held, go = threading.Event(), threading.Event()

        def hold(ctx: Any) -> bool:
            held.set()
            return go.wait(30)

        holder = store.submit(hold)
        assert held.wait(30)  # the writer runs the holder's batch: the rest queue up as one
        before, after = {
            "none": (None, None),
            "plain": (lambda ctx: "before", lambda ctx: "after"),
            "sends": (send(b"1"), send(b"2")),
        }[neighbours]
        futures = [store.submit(fn) for fn in (before, lose_connection_once, after) if fn is not None]
        go.set()
        assert holder.result(30) is True
        results = [f.result(30) for f in futures]
        assert len(runs) == 2 and store.reconnects == 1
        if neighbours == "plain":
            assert results == ["before", "ran", "after"]
        assert _bodies(store, q.queue_id) == ([b"1", b"2"] if neighbours == "sends" else [])


def test_postgresql_killed_and_restarted_during_a_stream_of_commits(pg_server: PgServer, pg_dsn: str) -> None:
    """``pg_ctl stop -m immediate`` while four threads commit, down for longer than the
    store waits for it (``reconnect_wait``), then started again: commits in flight and
    during the outage fail with StorageError, every commit reported done is stored
    exactly once, every one reported failed is absent, and commits go on after the
    restart on a new connection."""
    with _open(pg_dsn, reconnect_wait=1.0) as store:
        q = private_queue(store)
        done: list[bytes] = []
        failed: list[bytes] = []
        stop = threading.Event()
        after_restart = threading.Event()
        lock = threading.Lock()

        def commit(k: int) -> None:
            i = 0
            while not stop.is_set() and i < 5000:
                body = b"%d-%d" % (k, i)
                i += 1
                try:
                    store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=body))] * 2, []))
                except StorageError:
                    with lock:
                        failed.append(body)
                    continue
                with lock:
                    done.append(body)
                    if after_restart.is_set() and sum(b.startswith(b"%d-" % k) for b in done[-50:]) >= 5:
                        return

        threads = [threading.Thread(target=commit, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 30
        while len(done) < 100 and time.monotonic() < deadline:
            time.sleep(0.01)
        pg_server.stop_immediate()
        time.sleep(2.5)
        pg_server.restart()
        after_restart.set()
        for t in threads:
            t.join(60)
        stop.set()
        assert not any(t.is_alive() for t in threads)
        stored = _bodies(store, q.queue_id)
        counts: dict[bytes, int] = {}
        for b in stored:
            counts[b] = counts.get(b, 0) + 1
        assert all(counts.get(b) == 2 for b in done), "a commit reported done is missing or doubled"
        assert not any(b in counts for b in failed), "a commit reported failed was stored"
        assert set(counts) == set(done)
        assert failed, "the outage failed no commit: it did not hit the stream"
        assert store.reconnects >= 1


def test_a_short_postgresql_restart_delays_commits_and_fails_none(pg_server: PgServer, pg_dsn: str) -> None:
    """Down for less than ``reconnect_wait``: the batch that lost its connection before
    COMMIT runs again on a new one, so the committer only waits."""
    with _open(pg_dsn, reconnect_wait=20.0) as store:
        q = private_queue(store)
        store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"before"))], []))
        pg_server.stop_immediate()
        restarter = threading.Timer(0.5, pg_server.restart)
        restarter.start()
        try:
            store.write(ops.commit_work([ops.Send.of(q.queue_id, MessageRecord(body=b"during"))], []))
        finally:
            restarter.join()
        assert _bodies(store, q.queue_id) == [b"before", b"during"]
        assert store.reconnects == 1


class socket_free_port:
    """A loopback port nobody listens on (bound, then released on exit)."""

    def __enter__(self) -> int:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        return int(self.sock.getsockname()[1])

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


def test_closed_store_refuses_writes(pg_dsn: str) -> None:
    store = _open(pg_dsn)
    store.close()
    with pytest.raises(MQError):
        store.write(lambda ctx: None)
