"""Graceful shutdown: SIGTERM to either of two ``openmsmq serve`` processes (QM A on
127.0.0.1 sends to QM B on 127.0.0.2) while a transfer of several thousand messages is in
progress, then a restart.

The stopped process exits with status 0 and removes its ``runtime.json``; nothing
committed is lost at any moment (a message is in A's outgoing queue or already in B); at
the end B's queue holds every message exactly once, in commit order, and A's outgoing
queue is empty. The application keeps committing on A's data directory meanwhile.
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from openmsmq.qm.manager import QueueManager
from openmsmq.runtime import RUNTIME_FILE
from openmsmq.store.records import Message

A, B = "127.0.0.1", "127.0.0.2"
Q = "private$\\orders"
DEST = f"DIRECT=TCP:{B}\\PRIVATE$\\orders"
TXS, PER_TX = 40, 100  # 4,000 messages

pytestmark = pytest.mark.slow


def _free_port() -> int:
    for _ in range(50):
        with socket.socket() as s:
            s.bind((A, 0))
            port = int(s.getsockname()[1])
        try:
            with socket.socket() as s2:
                s2.bind((B, port))
            return port
        except OSError:
            continue
    raise RuntimeError("no free port")


class Serve:
    """One ``openmsmq serve`` subprocess that can be stopped and started again."""

    def __init__(self, data_dir: Path, address: str, port: int, log: Path) -> None:
        self.data_dir, self.address, self.port, self.log = data_dir, address, port, log
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = dict(
            os.environ,
            OPENMSMQ_PROTOCOL_MAXIMUM_ORDER_ACK_DELAY="1",
            OPENMSMQ_MQQB_CONNECT_BACKOFF_MIN="0.05",
            OPENMSMQ_MQQB_CONNECT_BACKOFF_MAX="0.5",
        )
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "openmsmq.cli.serve", "--data-dir", str(self.data_dir),
                 "--listen", self.address, "--port", str(self.port),
                 "--remote-port", "0", "--metrics-port", "0"],
                stdout=out, stderr=out, env=env,
            )  # fmt: skip
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            if (self.data_dir / RUNTIME_FILE).exists():
                return
            time.sleep(0.05)
        raise AssertionError(f"serve on {self.address} did not start")

    def sigterm(self) -> int:
        """SIGTERM; the exit status (bounded wait)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)


def _ro(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{path / 'openmsmq.db'}?mode=ro", uri=True, timeout=30)


def _outgoing_count(a_dir: Path) -> int:
    with _ro(a_dir) as c:
        row = c.execute("SELECT coalesce(sum(msg_count), 0) FROM queues WHERE queue_type = 4").fetchone()
    return int(row[0])


def _dest_count(b_dir: Path) -> int:
    with _ro(b_dir) as c:
        row = c.execute("SELECT msg_count FROM queues WHERE name = ?", (Q,)).fetchone()
    return int(row[0]) if row else 0


@pytest.mark.parametrize("victim", ["sender", "receiver"])
def test_sigterm_during_a_transfer_then_restart_loses_nothing(tmp_path: Path, victim: str) -> None:
    total = TXS * PER_TX
    port = _free_port()
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    with QueueManager(b_dir) as qb:
        qb.create_queue(Q, transactional=True)
    a = Serve(a_dir, A, port, tmp_path / "a.log")
    b = Serve(b_dir, B, port, tmp_path / "b.log")
    target = a if victim == "sender" else b
    app = QueueManager(a_dir)  # the sending application, on A's data directory
    committed = [0]
    errors: list[BaseException] = []

    def send() -> None:
        try:
            for t in range(TXS):
                with app.begin() as tx:
                    app.send_many(DEST, [Message(body=f"{t}-{i}".encode()) for i in range(PER_TX)], tx)
                committed[0] += PER_TX
                time.sleep(0.02)
        except BaseException as exc:  # reported below
            errors.append(exc)

    sender = threading.Thread(target=send)
    try:
        b.start()
        a.start()
        sender.start()
        deadline = time.monotonic() + 60
        while _dest_count(b_dir) < total // 5 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _dest_count(b_dir) < total, "the transfer finished before the SIGTERM"

        assert target.sigterm() == 0, target.log.read_text()[-3000:]
        assert not (target.data_dir / RUNTIME_FILE).exists()
        done, out, got = committed[0], _outgoing_count(a_dir), _dest_count(b_dir)
        assert out > 0  # a transfer was in progress
        assert out + got >= done  # nothing committed is lost
        time.sleep(0.2)
        target.start()

        sender.join(120)
        assert not errors, errors
        assert committed[0] == total
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if _outgoing_count(a_dir) == 0 and _dest_count(b_dir) >= total:
                break
            time.sleep(0.1)
        assert a.sigterm() == 0 and b.sigterm() == 0
    finally:
        app.close()
        for s in (a, b):
            if s.proc is not None and s.proc.poll() is None:
                s.proc.kill()
                s.proc.wait(10)
    assert _outgoing_count(a_dir) == 0, (tmp_path / "a.log").read_text()[-5000:]
    with QueueManager(b_dir) as qb:
        got_msgs = qb.peek_range(Q, 0, 2 * total)
    bodies = [m.body.decode() for m in got_msgs]
    assert bodies == [f"{t}-{i}" for t in range(TXS) for i in range(PER_TX)]  # exactly once, in order
    log = (tmp_path / ("a.log" if victim == "sender" else "b.log")).read_text()
    assert "SIGTERM: stopping" in log and "stopped the services" in log
