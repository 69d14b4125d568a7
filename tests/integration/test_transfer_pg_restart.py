"""PostgreSQL restarted (``pg_ctl stop -m immediate``, then start) in the middle of an
MS-MQQB transfer from QM A (SQLite) to QM B (two real ``openmsmq serve`` processes; B's
store is PostgreSQL): B survives it, and at the end B's queue holds every message
exactly once, in each sender's commit order, and A's outgoing queue is empty."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import psycopg
import pytest

from openmsmq.qm.manager import QueueManager
from openmsmq.qm.options import StoreOptions
from openmsmq.store.records import MessageRecord
from tests.pgserver import PgServer
from tests.serve_proc import A, B, ServeProcess, free_port, outgoing_count

Q = "private$\\orders"
DEST = f"DIRECT=TCP:{B}\\PRIVATE$\\orders"
TXS, PER_TX = 20, 200  # 4,000 messages

pytestmark = pytest.mark.slow


def _b_count(dsn: str) -> int:
    try:
        with psycopg.connect(dsn, connect_timeout=2) as conn:
            row = conn.execute("SELECT msg_count FROM queues WHERE name = %s", (Q,)).fetchone()
    except psycopg.OperationalError:
        return -1  # the server is down
    return int(row[0]) if row else 0


def test_a_postgresql_restart_during_a_transfer_loses_and_duplicates_nothing(
    tmp_path: Path, pg_server: PgServer, pg_dsn: str
) -> None:
    port = free_port()
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    with QueueManager(b_dir, store_options=StoreOptions(backend="postgresql", dsn=pg_dsn)) as qb:
        qb.create_queue(Q, transactional=True)
    a = ServeProcess(a_dir, A, port, tmp_path / "a.log")
    b = ServeProcess(b_dir, B, port, tmp_path / "b.log")  # its data directory names the database
    sender_qm = QueueManager(a_dir)
    committed = [0]
    errors: list[BaseException] = []

    def sender() -> None:
        try:
            for t in range(TXS):
                with sender_qm.begin() as tx:
                    sender_qm.send_many(
                        DEST, [MessageRecord(body=f"{t}-{i}".encode()) for i in range(PER_TX)], tx
                    )
                committed[0] += PER_TX
                time.sleep(0.05)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    try:
        b.start()
        a.start()
        th = threading.Thread(target=sender)
        th.start()
        deadline = time.monotonic() + 60
        while _b_count(pg_dsn) < 600 and time.monotonic() < deadline:
            time.sleep(0.02)
        at_stop = _b_count(pg_dsn)
        pg_server.stop_immediate()
        time.sleep(1.5)
        pg_server.restart()
        th.join(120)
        assert not errors, errors
        assert committed[0] == TXS * PER_TX
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if outgoing_count(a_dir) == 0 and _b_count(pg_dsn) >= committed[0]:
                break
            time.sleep(0.1)
        assert 0 < at_stop < committed[0], "the restart did not hit the transfer"
        assert b.proc is not None and b.proc.poll() is None, "B did not survive the restart"
        assert a.stop() == 0 and b.stop() == 0
    finally:
        sender_qm.close()
        for s in (a, b):
            s.close()
    assert outgoing_count(a_dir) == 0, (tmp_path / "b.log").read_text()[-5000:]
    with QueueManager(b_dir) as qb:
        got = qb.peek_range(Q, 0, 100_000)
    bodies = [m.body.decode() for m in got]
    assert len(bodies) == len(set(bodies)), "duplicates delivered"
    assert bodies == [f"{t}-{i}" for t in range(TXS) for i in range(PER_TX)]
