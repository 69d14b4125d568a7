"""The tests' PostgreSQL server helper: a real cluster that survives an immediate stop
with what was committed, and leaves no process behind."""

from __future__ import annotations

import os

import psycopg

from tests.pgserver import PgServer


def _postmaster_pid(server: PgServer) -> int:
    first = (server.datadir / "postmaster.pid").read_text().splitlines()[0]
    return int(first)


def test_commit_survives_immediate_stop_and_cleanup_leaves_no_process() -> None:
    server = PgServer()
    try:
        server.start()
        dsn = server.new_database()
        with psycopg.connect(dsn) as conn:
            conn.execute("CREATE TABLE t (v int)")
            conn.execute("INSERT INTO t VALUES (7)")
        pid = _postmaster_pid(server)
        server.stop_immediate()
        server.restart()
        with psycopg.connect(dsn) as conn:
            assert conn.execute("SELECT v FROM t").fetchall() == [(7,)]
        pid = _postmaster_pid(server)
    finally:
        server.cleanup()
    assert not server.root.exists()
    assert not _running(pid), "the postmaster outlived cleanup()"


def _running(pid: int) -> bool:
    """The process exists and is no zombie (an exited server waits for init to reap it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_fixture_gives_an_empty_database(pg_dsn: str) -> None:
    with psycopg.connect(pg_dsn) as conn:
        tables = conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'").fetchone()
    assert tables == (0,)
