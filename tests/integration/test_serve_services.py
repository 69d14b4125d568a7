"""``openmsmq serve`` runs the remote-read service and the metrics endpoint beside the
MS-MQQB listener, publishes where they listen in ``runtime.json``, and a program given the
data directory of a running queue manager talks to it through remote read (one process
owns a store)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from click.testing import CliRunner

import openmsmq
from openmsmq.cli.main import cli
from openmsmq.client.grpc_transport import GrpcTransport
from openmsmq.runtime import RUNTIME_FILE, live_runtime

Q = "private$\\orders"


def _start(data_dir: Path, log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "openmsmq.cli.serve", "--data-dir", str(data_dir), "--listen", "127.0.0.1",
             "--port", "0", "--remote-port", "0", "--metrics-port", "0"],
            stdout=out, stderr=out, env=dict(os.environ),
        )  # fmt: skip
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-3000:]
        if live_runtime(data_dir) is not None:
            return proc
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("serve did not publish runtime.json: " + log.read_text()[-3000:])


def test_serve_publishes_services_and_clients_go_through_remote_read(tmp_path: Path) -> None:
    data = tmp_path / "qm"
    proc = _start(data, tmp_path / "serve.log")
    try:
        info = live_runtime(data)
        assert info is not None
        assert info["pid"] == proc.pid
        assert str(info["remote"]).startswith("grpc://127.0.0.1:")
        assert str(info["metrics"]).startswith("http://127.0.0.1:")

        # the data directory of a running QM is reached through its remote-read service
        with openmsmq.connect(data) as conn:
            assert isinstance(conn.transport, GrpcTransport)
            conn.create_queue(Q, transactional=True)
            q = conn.open_queue(Q)
            with conn.transaction() as tx:
                q.send_many([b"a", b"b", b"c"], tx=tx)

        # the CLI, given the same directory, sees what the running QM holds
        result = CliRunner().invoke(cli, ["--qm", str(data), "--json", "peek", Q, "--count", "5"])
        assert result.exit_code == 0, result.output
        peeked = json.loads(result.output)
        bodies = [m.get("body") or m.get("text") for m in peeked["messages"]]
        assert len(bodies) == 3

        # the metrics endpoint answers with the queue depth of that queue
        with urllib.request.urlopen(str(info["metrics"]), timeout=10) as resp:
            text = resp.read().decode()
        lines = text.splitlines()
        depth = [ln for ln in lines if ln.startswith("openmsmq_queue_messages") and "orders" in ln]
        assert depth and depth[0].rstrip().endswith(" 3.0"), depth
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    # a clean stop removes the runtime file, and the store opens in-process again
    assert not (data / RUNTIME_FILE).exists()
    with openmsmq.connect(data) as conn:
        assert not isinstance(conn.transport, GrpcTransport)
        assert conn.queue_info(Q).message_count == 3


def test_stale_runtime_file_of_a_killed_qm_is_ignored(tmp_path: Path) -> None:
    data = tmp_path / "qm"
    proc = _start(data, tmp_path / "serve.log")
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert (data / RUNTIME_FILE).exists()
    assert live_runtime(data) is None
    with openmsmq.connect(data) as conn:
        assert not isinstance(conn.transport, GrpcTransport)
