"""Graceful shutdown: SIGTERM to either of two ``openmsmq serve`` processes (QM A on
127.0.0.1 sends to QM B on 127.0.0.2) while a transfer of several thousand messages is in
progress, then a restart.

The stopped process exits with status 0 and removes its ``runtime.json``; nothing
committed is lost at any moment (a message is in A's outgoing queue or already in B); at
the end B's queue holds every message exactly once, in commit order, and A's outgoing
queue is empty. The application keeps committing on A's data directory meanwhile.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from openmsmq.qm.manager import QueueManager
from openmsmq.runtime import RUNTIME_FILE
from openmsmq.store.records import Message
from tests.serve_proc import A, B, ServeProcess, free_port, outgoing_count, queue_count

Q = "private$\\orders"
DEST = f"DIRECT=TCP:{B}\\PRIVATE$\\orders"
TXS, PER_TX = 40, 100  # 4,000 messages

pytestmark = pytest.mark.slow



@pytest.mark.parametrize("victim", ["sender", "receiver"])
def test_sigterm_during_a_transfer_then_restart_loses_nothing(tmp_path: Path, victim: str) -> None:
    total = TXS * PER_TX
    port = free_port()
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    with QueueManager(b_dir) as qb:
        qb.create_queue(Q, transactional=True)
    a = ServeProcess(a_dir, A, port, tmp_path / "a.log")
    b = ServeProcess(b_dir, B, port, tmp_path / "b.log")
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
        b.start(ready="runtime")
        a.start(ready="runtime")
        sender.start()
        deadline = time.monotonic() + 60
        while queue_count(b_dir, Q) < total // 5 and time.monotonic() < deadline:
            time.sleep(0.02)
        assert queue_count(b_dir, Q) < total, "the transfer finished before the SIGTERM"

        assert target.stop() == 0, target.log.read_text()[-3000:]
        assert not (target.data_dir / RUNTIME_FILE).exists()
        done, out, got = committed[0], outgoing_count(a_dir), queue_count(b_dir, Q)
        assert out > 0  # a transfer was in progress
        assert out + got >= done  # nothing committed is lost
        time.sleep(0.2)
        target.start(ready="runtime")

        sender.join(120)
        assert not errors, errors
        assert committed[0] == total
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if outgoing_count(a_dir) == 0 and queue_count(b_dir, Q) >= total:
                break
            time.sleep(0.1)
        assert a.stop() == 0 and b.stop() == 0
    finally:
        app.close()
        for s in (a, b):
            s.close()
    assert outgoing_count(a_dir) == 0, (tmp_path / "a.log").read_text()[-5000:]
    with QueueManager(b_dir) as qb:
        got_msgs = qb.peek_range(Q, 0, 2 * total)
    bodies = [m.body.decode() for m in got_msgs]
    assert bodies == [f"{t}-{i}" for t in range(TXS) for i in range(PER_TX)]  # exactly once, in order
    log = (tmp_path / ("a.log" if victim == "sender" else "b.log")).read_text()
    assert "SIGTERM: stopping" in log and "stopped the services" in log
