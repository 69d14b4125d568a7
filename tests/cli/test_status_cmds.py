"""``openmsmq status``: in-process (stored state) and against two running queue managers."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from click.testing import CliRunner

import openmsmq
from openmsmq.cli.main import cli
from openmsmq.cli.status_cmds import format_age
from openmsmq.client import Access
from openmsmq.qm.manager import QueueManager
from openmsmq.remote.status import status_from_pb, status_to_pb
from tests.serve_proc import A, B, ServeProcess, free_port

Q = "private$\\orders"
DEST = f"DIRECT=TCP:{B}\\PRIVATE$\\orders"


def _status(data: Path, *extra: str) -> Any:
    result = CliRunner().invoke(cli, ["--qm", str(data), "status", "--json", *extra])
    assert result.exit_code == 0, (result.output, result.exception)
    return json.loads(result.stdout)


def test_status_of_a_stopped_qm_shows_queues_and_stored_sequences(tmp_path: Path) -> None:
    data = tmp_path / "qm"
    with openmsmq.connect(data) as conn:
        conn.create_queue(Q, transactional=True)
        with conn.transaction() as tx:
            conn.open_queue(Q).send_many([b"abc", b"de"], tx=tx)
            conn.open_queue(DEST, Access.SEND).send_many([b"x", b"y", b"z"], tx=tx)  # to an outgoing queue
        st = conn.transport.status()
    assert status_from_pb(status_to_pb(st)) == st  # the Status rpc carries it unchanged
    doc = _status(data)
    assert doc["qm"]["running"] is False and doc["qm"]["transfer"] is False
    assert doc["qm"]["guid"] == st.qm_guid and doc["qm"]["endpoints"] == {}
    orders = next(q for q in doc["queues"] if q["name"] == Q)
    assert orders["message_count"] == 2 and orders["total_bytes"] >= 5
    assert orders["kind"] == "private" and orders["transactional"] is True
    assert orders["oldest_age"] is not None and orders["oldest_age"] >= 0
    assert doc["dead_letter"] == {"xact": 0, "non_xact": 0}
    [out] = doc["outgoing"]
    assert out["format_name"].lower() == DEST.lower()
    assert out["state"] == "stopped" and out["waiting"] == 3 and out["in_flight"] == 0
    assert out["next_tx_sequence_number"] == 4 and out["tx_sequence_id"] > 0
    assert out["last_acked_number"] is None
    assert out["window"] is None and out["round_trip"] is None  # no session when stopped
    assert doc["incoming"] == []
    human = CliRunner().invoke(cli, ["--qm", str(data), "status"])
    assert human.exit_code == 0, human.output
    text = " ".join(human.output.split())  # rich wraps at the terminal width
    assert "needs a running queue manager" in text and "not running" in text
    # --watch with --json: one document per refresh
    watched = CliRunner().invoke(
        cli, ["--qm", str(data), "--json", "status", "--watch", "0.1", "--count", "2"]
    )
    assert watched.exit_code == 0, watched.output
    assert [json.loads(line)["qm"]["guid"] for line in watched.stdout.splitlines()] == [st.qm_guid] * 2
    live = CliRunner().invoke(cli, ["--qm", str(data), "status", "--watch", "0.1", "--count", "2"])
    assert live.exit_code == 0, live.output
    assert st.qm_guid in live.output  # rich Live (not a terminal here: each refresh is printed)


def test_format_age() -> None:
    assert [format_age(x) for x in (None, 5, 187, 7500, 4 * 86400 + 3 * 3600)] == [
        "-", "5s", "3m07s", "2h05m", "4d03h",
    ]  # fmt: skip


def _serve(data_dir: Path, address: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    """Start ``openmsmq serve``; return once its runtime.json is published."""
    env = {"OPENMSMQ_PROTOCOL_MAXIMUM_ORDER_ACK_DELAY": "0.5", "OPENMSMQ_PROTOCOL_ORDER_ACK_TIMEOUT": "0.05"}
    serve = ServeProcess(data_dir, address, port, log, env=env)
    serve.start(ready="runtime")
    assert serve.proc is not None
    return serve.proc


def test_status_of_running_qms_after_a_transfer(tmp_path: Path) -> None:
    port = free_port()
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    with QueueManager(b_dir) as qb:
        qb.create_queue(Q, transactional=True)
    procs = [_serve(b_dir, B, port, tmp_path / "b.log"), _serve(a_dir, A, port, tmp_path / "a.log")]
    try:
        with openmsmq.connect(a_dir) as conn:
            q = conn.open_queue(DEST, Access.SEND)
            with conn.transaction() as tx:
                q.send_many([b"m1", b"m2", b"m3"], tx=tx)
            with conn.transaction() as tx:
                q.send_many([b"m4", b"m5"], tx=tx)
        deadline = time.monotonic() + 10
        a_doc = _status(a_dir)
        while time.monotonic() < deadline:
            outs = a_doc["outgoing"]
            if outs and outs[0]["waiting"] == 0 and outs[0]["last_acked_number"] == 5:
                break
            time.sleep(0.1)
            a_doc = _status(a_dir)
        assert a_doc["qm"]["running"] is True and a_doc["qm"]["transfer"] is True
        assert a_doc["qm"]["pid"] == procs[1].pid
        assert set(a_doc["qm"]["endpoints"]) == {"mqqb", "remote", "metrics"}
        assert a_doc["qm"]["endpoints"]["mqqb"] == f"{A}:{port}"
        [out] = a_doc["outgoing"]
        assert out["format_name"].lower() == DEST.lower(), out
        assert out["waiting"] == 0 and out["in_flight"] == 0, out
        assert out["last_acked_number"] == 5 and out["last_unacked_number"] is None, out
        assert out["state"] in ("connected", "idle"), out
        if out["state"] == "connected":  # A opened the session: its window and round trip
            assert out["window"] == 1024 and 0 <= out["round_trip"] < 5, out
        else:
            assert out["window"] is None and out["round_trip"] is None, out

        b_doc = _status(b_dir)
        [inc] = b_doc["incoming"]
        assert inc["source_qm"] == a_doc["qm"]["guid"]
        assert inc["destination"].lower() == DEST.lower()
        assert inc["tx_sequence_number"] == 5 and inc["reject_count"] == 0
        assert inc["tx_sequence_id"] == out["last_acked_sequence_id"]
        assert abs(inc["last_access_time"] - b_doc["qm"]["time"]) < 3600
        assert next(x for x in b_doc["queues"] if x["name"] == Q)["message_count"] == 5

        human = CliRunner().invoke(cli, ["--qm", str(a_dir), "status"])
        assert human.exit_code == 0, human.output
        text = " ".join(human.output.split())
        assert "outgoing queues" in text and "needs a running" not in text
        if out["state"] == "connected":
            wide = CliRunner().invoke(cli, ["--qm", str(a_dir), "status"], env={"COLUMNS": "300"})
            assert "(window 1024, " in wide.output and " ms)" in wide.output, wide.output
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)
    # Stopped again: the stored sequence state is still shown, transfer state is not.
    stopped = _status(a_dir)
    assert stopped["qm"]["running"] is False
    [out] = stopped["outgoing"]
    assert out["state"] == "stopped" and out["waiting"] == 0
