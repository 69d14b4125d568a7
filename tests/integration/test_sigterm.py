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
from openmsmq.store.records import MessageRecord
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
                    app.send_many(DEST, [MessageRecord(body=f"{t}-{i}".encode()) for i in range(PER_TX)], tx)
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


def test_a_stopping_receiver_sends_the_order_ack_of_what_it_stored(tmp_path: Path) -> None:
    """The receiver's Order Ack Send Timer runs (here for 30 s) when it gets SIGTERM: it
    sends the OrderAck of what it stored before it closes the session, so the sender
    releases those messages while the receiver is down, instead of keeping them and
    sending them again after the restart (where they would be rejected as duplicates)."""
    total = 300
    port = free_port()
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    with QueueManager(b_dir) as qb:
        qb.create_queue(Q, transactional=True)
    slow_acks = {
        "OPENMSMQ_PROTOCOL_ORDER_ACK_TIMEOUT": "30",
        "OPENMSMQ_PROTOCOL_MAXIMUM_ORDER_ACK_DELAY": "60",
    }
    a = ServeProcess(a_dir, A, port, tmp_path / "a.log")
    b = ServeProcess(b_dir, B, port, tmp_path / "b.log", env=slow_acks)
    try:
        b.start(ready="runtime")
        a.start(ready="runtime")
        with QueueManager(a_dir) as app, app.begin() as tx:
            app.send_many(DEST, [MessageRecord(body=b"%d" % i) for i in range(total)], tx)
        deadline = time.monotonic() + 60
        while queue_count(b_dir, Q) < total and time.monotonic() < deadline:
            time.sleep(0.02)
        assert queue_count(b_dir, Q) == total
        time.sleep(0.3)
        assert outgoing_count(a_dir) == total  # no OrderAck yet: its timer runs for 30 s
        assert b.stop() == 0, b.log.read_text()[-3000:]
        deadline = time.monotonic() + 20
        while outgoing_count(a_dir) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert outgoing_count(a_dir) == 0, (tmp_path / "a.log").read_text()[-3000:]
        assert a.stop() == 0
    finally:
        for s in (a, b):
            s.close()
    with QueueManager(b_dir) as qb:
        assert [m.body for m in qb.peek_range(Q, 0, 2 * total)] == [b"%d" % i for i in range(total)]
