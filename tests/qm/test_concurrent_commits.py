"""Concurrent 1-message transactions: wake-ups of waiting receivers and exactly-once
delivery with several senders and receivers sharing group commits."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from openmsmq.qm import MessageRecord, QueueManager, reader


@pytest.fixture
def qm(tmp_path: Path):
    manager = QueueManager(tmp_path / "qm", computer_name="host1")
    yield manager
    manager.close()


def test_every_waiting_receive_is_woken_by_the_send(
    qm: QueueManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit notifies a queue only while a read is in progress on it
    (``QueueState.readers``): no wake-up may be lost. The periodic re-check is pushed
    out of reach, so a lost one would leave its receiver waiting."""
    monkeypatch.setattr(reader, "_WAKE_SLICE", 3600.0)
    qm.create_queue("private$\\w", transactional=True)
    for i in range(200):
        got: list[MessageRecord] = []

        def waiter(into: list[MessageRecord]) -> None:
            with qm.begin() as tx:
                into.append(qm.receive("private$\\w", tx=tx, timeout=None))

        t = threading.Thread(target=waiter, args=(got,))
        t.start()
        with qm.begin() as tx:
            qm.send("private$\\w", MessageRecord(body=b"%d" % i), tx)
        t.join(60)
        assert not t.is_alive(), f"round {i}: the waiting receive was not woken"
        assert [m.body for m in got] == [b"%d" % i]


def test_concurrent_single_message_transactions_deliver_exactly_once(qm: QueueManager) -> None:
    qm.create_queue("private$\\x", transactional=True)
    senders, receivers, per = 4, 4, 150
    received: list[bytes] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def send(k: int) -> None:
        try:
            for i in range(per):
                with qm.begin() as tx:
                    qm.send("private$\\x", MessageRecord(body=b"%d-%d" % (k, i)), tx)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def receive(k: int) -> None:
        try:
            for i in range(senders * per // receivers):
                tx = qm.begin()
                m = qm.receive("private$\\x", tx=tx, timeout=60)
                if i % 7 == k:  # some aborts: the message goes back and is received again
                    tx.abort()
                    tx = qm.begin()
                    m = qm.receive("private$\\x", tx=tx, timeout=60)
                tx.commit()
                with lock:
                    received.append(m.body)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=send, args=(k,)) for k in range(senders)]
    threads += [threading.Thread(target=receive, args=(k,)) for k in range(receivers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors
    assert not any(t.is_alive() for t in threads)
    assert sorted(received) == sorted(b"%d-%d" % (k, i) for k in range(senders) for i in range(per))
    assert qm.get_queue("private$\\x").msg_count == 0
