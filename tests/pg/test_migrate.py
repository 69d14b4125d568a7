"""``openmsmq migrate``: a stopped queue manager moves from its SQLite store to a real
PostgreSQL database with every row of every table (compared column by column), the data
directory then names the database, and bad input is refused with nothing written."""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner, Result

from openmsmq.cli.main import cli
from openmsmq.qm import QueueManager
from openmsmq.qm.migration import migrate_to_postgresql
from openmsmq.retry_policy import RetryPolicy
from openmsmq.runtime import STORE_FILE, STORE_POINTER, take_serve_lock
from openmsmq.store.db import Store
from openmsmq.store.pg.db import PgStore
from openmsmq.store.pg.from_sqlite import PG_ONLY_TABLES, TABLE_RULES, MigrationRefused, sqlite_tables
from openmsmq.store.records import MessageRecord
from tests.pgserver import PgServer

Q = "private$\\orders"
REMOTE = "DIRECT=TCP:127.0.0.9\\private$\\far"


def run(*args: str, env: dict[str, str] | None = None, code: int = 0) -> Result:
    result = CliRunner().invoke(cli, list(args), env=env)
    assert result.exit_code == code, (result.output, result.exception)
    return result


def _populate(data: Path) -> uuid.UUID:
    """A queue manager with a row in every table of its store."""
    with QueueManager(data) as qm:
        qm.create_queue(
            Q, transactional=True, journal=True, quota_kb=5000, label="orders",
            retry_policy=RetryPolicy(receive_retry_count=2, max_retry_cycles=1, retry_cycle_delay=600),
        )  # fmt: skip
        qm.create_queue("private$\\plain")
        with qm.begin() as tx:
            qm.send_many(Q, [MessageRecord(body=f"m{i}".encode(), label=f"l{i}") for i in range(8)], tx)
        ids = [m.lookup_id for m in qm.peek_range(Q, 0, 100)]
        tx = qm.begin()
        qm.receive(Q, tx=tx)
        tx.abort()  # AbortCount 1 on m0
        with qm.begin() as tx:
            qm.receive(Q, tx=tx)  # m0 received: a journal copy
        qm.move_message(Q, ids[1], "poison")
        qm.move_message(Q, ids[2], "retry", return_after=3600)  # a retry due time
        qm.dead_letter(Q, [ids[3]], 0x8000 | 0x02)
        tx = qm.begin()
        assert qm.receive(Q, tx=tx).body == b"m4"
        tx.abort()  # AbortCount 1 on m4, the head of the queue
        with qm.begin() as tx:
            qm.send_many(REMOTE, [MessageRecord(body=b"out-1"), MessageRecord(body=b"out-2")], tx)
        qm.send_idempotent("private$\\plain", [MessageRecord(body=b"once")], ["key-1"])
        guid = qm.guid
    with _store_sql(data) as conn:
        # An incoming sequence (a peer's, last accepted number 42): what MS-MQQB arrivals
        # write (the transfer tests make real ones).
        q = conn.execute("SELECT queue_id FROM queues WHERE name = ?", (Q,)).fetchone()[0]
        conn.execute(
            "INSERT INTO incoming_sequences VALUES (?, ?, ?, ?, ?, 0, 1.5, '127.0.0.9', 1)",
            (uuid.UUID(int=7).bytes, Q, q, 0x1122334455, 42),
        )
    return guid


@contextlib.contextmanager
def _store_sql(data: Path) -> Iterator[sqlite3.Connection]:
    """A connection to the SQLite store in ``data``, committed and closed at the end."""
    conn = sqlite3.connect(data / STORE_FILE)
    try:
        with conn:
            yield conn
    finally:
        conn.close()


def _table_rows(run_sql: Any, table: str, cols: list[str]) -> list[tuple[Any, ...]]:
    rows = run_sql(f"SELECT {', '.join(cols)} FROM {table}")
    return sorted((tuple(bytes(v) if isinstance(v, memoryview) else v for v in r) for r in rows), key=repr)


def _sqlite_columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA table_info({table})")]


def _pg_state(dsn: str) -> dict[str, Any]:
    """Every table of the database and its rows (what 'nothing written' compares)."""
    with psycopg.connect(dsn) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1"
            ).fetchall()
        ]
        return {t: conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in tables}


def _digest(path: Path) -> str:
    """The SQLite store's content: every statement of its dump, and its schema version
    (the bytes of the file may change by a checkpoint of its WAL, which writes nothing new)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        text = "\n".join(conn.iterdump()) + f"\nversion {conn.execute('PRAGMA user_version').fetchone()[0]}"
    finally:
        conn.close()
    return hashlib.sha256(text.encode()).hexdigest()


def test_every_table_of_the_sqlite_schema_has_a_migrate_rule(tmp_path: Path, pg_dsn: str) -> None:
    """A table added to the SQLite schema without a rule in TABLE_RULES fails here; so does a
    PostgreSQL table that is neither copied nor PostgreSQL's own."""
    Store(tmp_path / "s.db", threaded=False).close()
    assert set(sqlite_tables(tmp_path / "s.db")) == set(TABLE_RULES)
    PgStore(pg_dsn, threaded=False).close()
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
        pg = {r[0] for r in rows}
    assert pg == set(TABLE_RULES) | set(PG_ONLY_TABLES)


def test_migrate_moves_every_row_and_the_qm_runs_on_postgresql(tmp_path: Path, pg_dsn: str) -> None:
    data = tmp_path / "qm"
    guid = _populate(data)
    with _store_sql(data) as conn:
        empty = [t for t in TABLE_RULES if not conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]]
    assert not empty, f"the test leaves {empty} empty: populate every table"

    out = run("--qm", str(data), "migrate", "--dsn", pg_dsn, "--json")
    doc = json.loads(out.stdout)
    assert doc["qm_guid"] == str(guid)
    assert doc["configuration"]["store.backend"] == "postgresql"
    assert "secret" not in out.stdout and pg_dsn not in out.stdout  # the password is not printed
    kept = Path(doc["sqlite_kept_as"])
    assert kept.name == STORE_FILE + ".migrated" and not (data / STORE_FILE).exists()
    assert json.loads((data / STORE_POINTER).read_text())["qm_guid"] == str(guid)

    # Every table, every column, every row: equal on both sides.
    src = sqlite3.connect(f"file:{kept}?mode=ro", uri=True)
    with psycopg.connect(pg_dsn) as pg:
        for table in TABLE_RULES:
            cols = _sqlite_columns(src, table)
            want = _table_rows(lambda s: src.execute(s).fetchall(), table, cols)
            got = _table_rows(lambda s: pg.execute(s).fetchall(), table, cols)
            assert got == want, table
            assert doc["tables"][table] == len(want)
    src.close()
    per_queue = {q["name"]: q["messages"] for q in doc["queues"]}
    assert per_queue[Q] == 4 and per_queue[Q + ";poison"] == 1 and per_queue[Q + ";retry"] == 1

    # The data directory now opens the database; the QM works on, ids continue.
    with QueueManager(data) as qm:
        assert qm.guid == guid and isinstance(qm.store, PgStore)
        before = [m.body for m in qm.peek_range(Q, 0, 100)]
        assert before == [b"m4", b"m5", b"m6", b"m7"]
        assert qm.peek(Q).abort_count == 1 and qm.peek(Q + ";retry").body == b"m2"
        high = max(m.lookup_id for m in qm.peek_range(Q, 0, 100))
        qm.create_queue("private$\\new")  # queue ids continue above the copied ones
        lid = qm.send("private$\\new", MessageRecord(body=b"after")).lookup_id
        assert lid > high
        assert qm.send_idempotent("private$\\plain", [MessageRecord(body=b"once")], ["key-1"]) == [None]
        assert [s.tx_sequence_number for s in qm.incoming_sequences()] == [42]
    status = run("--qm", str(data), "queue", "list", "--json")
    assert "private$\\new" in [q["path"] for q in json.loads(status.stdout)["queues"]]


def test_running_queue_manager_is_refused(tmp_path: Path, pg_dsn: str) -> None:
    data = tmp_path / "qm"
    _populate(data)
    before, db_before = _digest(data / STORE_FILE), _pg_state(pg_dsn)
    lock = take_serve_lock(data)  # what a running serve holds
    assert lock is not None
    try:
        r = run("--qm", str(data), "migrate", "--dsn", pg_dsn, code=1)
    finally:
        import os

        os.close(lock)
    assert "running" in r.stderr and "serve.lock" in r.stderr
    assert _digest(data / STORE_FILE) == before and _pg_state(pg_dsn) == db_before
    assert not (data / STORE_POINTER).exists()


def test_bad_dsn_and_unreachable_database_name_the_setting(tmp_path: Path, pg_server: PgServer) -> None:
    data = tmp_path / "qm"
    _populate(data)
    before = _digest(data / STORE_FILE)
    r = run("--qm", str(data), "migrate", "--dsn", "host=127.0.0.1 port=notaport =x", code=1)
    assert "store.dsn" in r.stderr
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    r = run("--qm", str(data), "migrate", "--dsn", f"postgresql://u:secret@127.0.0.1:{closed}/x", code=1)
    assert "store.dsn" in r.stderr and "cannot connect" in r.stderr and "secret" not in r.stderr
    r = run("--qm", str(data), "migrate", env={"OPENMSMQ_STORE_DSN": ""}, code=1)
    assert "store.dsn" in r.stderr
    assert _digest(data / STORE_FILE) == before and not (data / STORE_POINTER).exists()


def test_a_database_holding_another_queue_manager_is_refused_even_with_replace(
    tmp_path: Path, pg_dsn: str
) -> None:
    with QueueManager(tmp_path / "other", store=PgStore(pg_dsn)) as other:
        other.create_queue("private$\\theirs")
    data = tmp_path / "qm"
    _populate(data)
    before, db_before = _digest(data / STORE_FILE), _pg_state(pg_dsn)
    for extra in ((), ("--replace",)):
        r = run("--qm", str(data), "migrate", "--dsn", pg_dsn, *extra, code=1)
        assert "store.dsn" in r.stderr and "another queue manager" in r.stderr
    assert _digest(data / STORE_FILE) == before and _pg_state(pg_dsn) == db_before
    assert not (data / STORE_POINTER).exists()


def test_an_earlier_copy_of_the_same_queue_manager_needs_replace(tmp_path: Path, pg_dsn: str) -> None:
    data = tmp_path / "qm"
    _populate(data)
    copy = tmp_path / "copy"
    copy.mkdir()
    (copy / STORE_FILE).write_bytes((data / STORE_FILE).read_bytes())
    migrate_to_postgresql(copy, pg_dsn)  # the same QM, migrated once (a trial run)
    with QueueManager(copy) as qm:  # and changed since
        qm.send("private$\\plain", MessageRecord(body=b"only in the trial"))
    db_before = _pg_state(pg_dsn)
    before = _digest(data / STORE_FILE)
    with pytest.raises(MigrationRefused) as err:
        migrate_to_postgresql(data, pg_dsn)
    assert err.value.key == "store.dsn" and "not empty" in str(err.value)
    with QueueManager(copy), pytest.raises(MigrationRefused) as err:  # the trial copy is in use
        migrate_to_postgresql(data, pg_dsn, replace=True)
    assert "is using the database" in str(err.value)
    assert _pg_state(pg_dsn) == db_before and _digest(data / STORE_FILE) == before
    result = migrate_to_postgresql(data, pg_dsn, replace=True)
    assert result.report.replaced
    with QueueManager(data) as qm:
        assert b"only in the trial" not in [m.body for m in qm.peek_range("private$\\plain", 0, 100)]


def test_rows_without_a_queue_manager_are_refused(tmp_path: Path, pg_dsn: str) -> None:
    PgStore(pg_dsn, threaded=False).close()
    with psycopg.connect(pg_dsn) as conn:
        conn.execute("INSERT INTO retry_due VALUES (1, 1, 1.0)")
    data = tmp_path / "qm"
    _populate(data)
    db_before = _pg_state(pg_dsn)
    r = run("--qm", str(data), "migrate", "--dsn", pg_dsn, code=1)
    assert "not empty" in r.stderr and "retry_due 1" in r.stderr
    assert _pg_state(pg_dsn) == db_before


def test_newer_schemas_are_refused(tmp_path: Path, pg_dsn: str) -> None:
    data = tmp_path / "qm"
    _populate(data)
    PgStore(pg_dsn, threaded=False).close()
    with psycopg.connect(pg_dsn) as conn:
        conn.execute("UPDATE openmsmq_schema SET version = 99")
    db_before, before = _pg_state(pg_dsn), _digest(data / STORE_FILE)
    r = run("--qm", str(data), "migrate", "--dsn", pg_dsn, code=1)
    assert "store.dsn" in r.stderr and "newer openmsmq" in r.stderr
    assert _pg_state(pg_dsn) == db_before and _digest(data / STORE_FILE) == before
    with psycopg.connect(pg_dsn) as conn:
        conn.execute("UPDATE openmsmq_schema SET version = 1")
    with _store_sql(data) as conn:
        conn.execute("PRAGMA user_version = 99")
    db_before, before = _pg_state(pg_dsn), _digest(data / STORE_FILE)
    r = run("--qm", str(data), "migrate", "--dsn", pg_dsn, code=1)
    assert "newer openmsmq" in r.stderr and "qm.data_dir" in r.stderr
    assert _pg_state(pg_dsn) == db_before and _digest(data / STORE_FILE) == before


def test_a_file_that_is_no_store_is_refused(tmp_path: Path, pg_dsn: str) -> None:
    data = tmp_path / "qm"
    data.mkdir()
    (data / STORE_FILE).write_bytes(b"not a database" * 100)
    r = run("--qm", str(data), "migrate", "--dsn", pg_dsn, code=1)
    assert "qm.data_dir" in r.stderr and "cannot be read" in r.stderr
    assert _pg_state(pg_dsn) == {} and not (data / STORE_POINTER).exists()


def test_a_failing_copy_writes_nothing(tmp_path: Path, pg_dsn: str) -> None:
    """A table of no migrate rule is refused; a row PostgreSQL refuses in the middle of the
    copy rolls the whole transaction back, schema included."""
    data = tmp_path / "qm"
    _populate(data)
    with _store_sql(data) as conn:
        conn.execute("CREATE TABLE tmp AS SELECT * FROM send_identities")
    r = run("--qm", str(data), "migrate", "--dsn", pg_dsn, code=1)
    assert "no migrate rule" in r.stderr
    with _store_sql(data) as conn:
        conn.execute("DROP TABLE tmp")
        # PostgreSQL's text holds no NUL character: the label of the last queue copied
        conn.execute("UPDATE queues SET label = 'a' || char(0) || 'b' WHERE name = 'private$\\plain'")
    r = run("--qm", str(data), "migrate", "--dsn", pg_dsn, code=1)
    assert "nothing was written" in r.stderr
    assert _pg_state(pg_dsn) == {}  # not even the schema
    assert (data / STORE_FILE).exists() and not (data / STORE_POINTER).exists()


def test_the_dsn_from_the_environment_and_what_to_set_printed(tmp_path: Path, pg_dsn: str) -> None:
    """Without --dsn the command takes store.dsn (here OPENMSMQ_STORE_DSN), prints the rows
    per table and the settings for serve, the password left out."""
    data = tmp_path / "qm"
    _populate(data)
    out = run("--qm", str(data), "migrate", env={"OPENMSMQ_STORE_DSN": pg_dsn}).stdout
    password = pg_dsn.split("://", 1)[1].split("@", 1)[0].split(":", 1)[1]
    assert password and password not in out
    assert '[store]\nbackend = "postgresql"\ndsn = "' in out
    assert "messages per queue:" in out and "private$\\orders" in out
    assert "openmsmq.db.migrated" in out
    with QueueManager(data) as qm:
        assert isinstance(qm.store, PgStore)
