"""``openmsmq serve`` as a node of a highly available queue manager on a real PostgreSQL:
``status`` and ``/ready`` of the active and of the standby, a graceful stop that hands the
lease over, and a standby configured differently from the active (refused, naming the
setting, nothing written)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

import openmsmq
from openmsmq.cli.main import cli
from openmsmq.qm.manager import QueueManager
from openmsmq.store.pg.db import PgStore
from openmsmq.store.records import MessageRecord
from tests.ha_proc import accepts, create_pg_qm, dump, ha_node, role, runtime_json, store_state, wait_role
from tests.pgserver import PgServer
from tests.serve_proc import B, free_port

Q = "private$\\orders"

pytestmark = pytest.mark.slow


def _probe(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def _metrics_url(data_dir: Path) -> str:
    return str(json.loads((data_dir / "runtime.json").read_text())["metrics"]).rsplit("/", 1)[0]


def _lease_row(dsn: str) -> tuple[int, str | None]:
    with psycopg.connect(dsn, connect_timeout=10) as conn:
        row = conn.execute("SELECT epoch, holder FROM qm_lease").fetchone()
    assert row is not None
    return int(row[0]), row[1]


def test_status_and_readiness_of_the_active_and_the_standby(tmp_path: Path, pg_server: PgServer) -> None:
    dsn = pg_server.new_database()
    create_pg_qm(dsn, tmp_path / "init", Q)
    port = free_port(B)
    b1, b2 = ha_node(tmp_path, "b1", B, port, dsn), ha_node(tmp_path, "b2", B, port, dsn)
    try:
        b1.start()
        wait_role(b1, "active")
        b2.start(ready="runtime")
        wait_role(b2, "standby", epoch=1)
        runner = CliRunner()
        got = runner.invoke(cli, ["--qm", str(b2.data_dir), "status", "--json"])
        assert got.exit_code == 0, got.output
        doc = json.loads(got.output)
        assert doc["ha"]["role"] == "standby" and doc["ha"]["epoch"] == 1 and "queues" not in doc
        assert not (b2.data_dir / "openmsmq.db").exists()  # no SQLite store made on the side
        got = runner.invoke(cli, ["--qm", str(b1.data_dir), "status", "--json"])
        assert got.exit_code == 0, got.output
        doc = json.loads(got.output)
        assert doc["ha"]["role"] == "active" and doc["ha"]["epoch"] == 1 and doc["ha"]["since"] > 0
        assert any(q["name"] == Q for q in doc["queues"])
        human = runner.invoke(cli, ["--qm", str(b2.data_dir), "status"])
        assert "standby" in human.output and "lease epoch" in human.output
        assert _probe(_metrics_url(b1.data_dir) + "/ready") == (200, "ready\n")
        code, text = _probe(_metrics_url(b2.data_dir) + "/ready")
        assert code == 503 and "standby node" in text
        assert _probe(_metrics_url(b2.data_dir) + "/live")[0] == 200
        # A graceful stop of the active hands the lease over at once (released, not expired).
        assert b1.stop() == 0
        epoch, holder = _lease_row(dsn)
        assert holder is None or epoch == 2
        ha = wait_role(b2, "active")
        assert ha["epoch"] == 2
        deadline = time.monotonic() + 30  # ready once its term has opened and bound
        while _probe(_metrics_url(b2.data_dir) + "/ready")[0] != 200:
            assert time.monotonic() < deadline, b2.log.read_text()[-3000:]
            time.sleep(0.05)
    finally:
        b1.close()
        b2.close()


@pytest.mark.parametrize(
    ("setting", "env"),
    [("mqqb.port", None), ("qm.name", {"OPENMSMQ_QM_NAME": "elsewhere"})],
)
def test_a_standby_configured_differently_is_refused_and_writes_nothing(
    tmp_path: Path, pg_server: PgServer, setting: str, env: dict[str, str] | None
) -> None:
    dsn = pg_server.new_database()
    create_pg_qm(dsn, tmp_path / "init", Q)
    port = free_port(B)
    b1 = ha_node(tmp_path, "b1", B, port, dsn)
    other_port = free_port(B) if env is None else port
    b2 = ha_node(tmp_path, "b2", B, other_port, dsn, **(env or {}))
    try:
        b1.start()
        wait_role(b1, "active")
        before, lease = store_state(dsn), _lease_row(dsn)
        result = subprocess.run(
            [sys.executable, "-m", "openmsmq.cli.serve", "--data-dir", str(b2.data_dir), "--listen", B,
             "--port", str(other_port), "--remote-port", "0", "--metrics-port", "0"],
            env={**os.environ, **b2.env}, capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert result.returncode == 1, result.stdout + result.stderr
        assert setting in result.stderr and "nothing was written" in result.stderr
        assert store_state(dsn) == before and _lease_row(dsn) == lease
        assert role(b1) is not None and (role(b1) or {})["role"] == "active"
    finally:
        b1.close()
        b2.close()


def test_losing_the_lease_aborts_remote_reads_and_the_next_active_delivers_them(
    tmp_path: Path, pg_server: PgServer
) -> None:
    dsn = pg_server.new_database()
    create_pg_qm(dsn, tmp_path / "init", Q, "private$\\empty")
    with QueueManager(tmp_path / "init", store=PgStore(dsn)) as qm, qm.begin() as tx:
        qm.send_many(Q, [MessageRecord(body=b"m%d" % i) for i in range(3)], tx)
    port = free_port(B)
    b1, b2 = ha_node(tmp_path, "b1", B, port, dsn), ha_node(tmp_path, "b2", B, port, dsn)
    try:
        b1.start()
        wait_role(b1, "active")
        b2.start(ready="runtime")
        wait_role(b2, "standby", epoch=1)
        conn = openmsmq.connect(str(runtime_json(b1)["remote"]))
        q = conn.open_queue(Q)
        tx = conn.transaction()
        tx.__enter__()
        assert q.receive(timeout=5, tx=tx).body == b"m0"  # locked in the active's memory
        waiting: list[BaseException | bytes] = []

        def pending_receive() -> None:
            try:
                waiting.append(conn.open_queue("private$\\empty").receive(timeout=60).body)
            except BaseException as exc:
                waiting.append(exc)

        waiter = threading.Thread(target=pending_receive)
        waiter.start()
        time.sleep(0.3)
        # Another process takes the lease (as after a partition of B1): B1's next renewal
        # is refused and it steps down.
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute("UPDATE qm_lease SET epoch = epoch + 1, holder = 'intruder',"
                      " expires_at = now() + interval '3 seconds'")  # fmt: skip
        wait_role(b1, "standby", timeout=10)
        assert "taken over" in (role(b1) or {}).get("last_step_down", "")
        waiter.join(30)
        assert len(waiting) == 1 and isinstance(waiting[0], BaseException), waiting
        with pytest.raises(Exception):  # noqa: B017 - whichever error the gone session gives
            tx.__exit__(None, None, None)
        conn.close()
        # The intruder's lease runs out; a node takes over and m0 is there, first, once.
        deadline = time.monotonic() + 30
        while True:
            active = next((n for n in (b1, b2) if (role(n) or {}).get("role") == "active"), None)
            # Serving: the term's runtime document (with its remote-read address) is written.
            if active is not None and accepts(B, port) and runtime_json(active).get("remote"):
                break
            assert time.monotonic() < deadline, dump(b1, b2)
            time.sleep(0.05)
        assert (role(active) or {})["epoch"] == 3
        with openmsmq.connect(str(runtime_json(active)["remote"])) as again:
            got = [m.body for m in again.open_queue(Q).receive_many(10, timeout=5)]
        assert got == [b"m0", b"m1", b"m2"]
    finally:
        b1.close()
        b2.close()
