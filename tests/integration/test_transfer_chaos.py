"""Chaos test: two real ``openmsmq serve`` processes (127.0.0.1 and 127.0.0.2), two sending
threads on QM A's data directory, SIGKILL of either QM at random moments.

At the end QM B's queue holds every committed message exactly once and in commit order
per transactional sequence, and QM A's outgoing queue is empty; during the run, a
message is always either still in A's outgoing queue or already in B (it leaves A only
after B stored it and OrderAck'ed it). ``OPENMSMQ_CHAOS_ROUNDS`` sets the kill rounds
(default 10); ``OPENMSMQ_CHAOS_SEED`` the random seed.
"""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path

import pytest

from openmsmq.qm.manager import QueueManager
from openmsmq.store.records import MessageRecord
from tests.serve_proc import A, B, ServeProcess, free_port, outgoing_count, queue_count

Q = "private$\\orders"
DEST = f"DIRECT=TCP:{B}\\PRIVATE$\\orders"
SENDERS, TXS, PER_TX = 2, 10, 500  # 10,000 messages
ROUNDS = int(os.environ.get("OPENMSMQ_CHAOS_ROUNDS", "10"))
SEED = int(os.environ.get("OPENMSMQ_CHAOS_SEED", str(random.SystemRandom().randrange(1 << 30))))

pytestmark = pytest.mark.slow


def test_transfer_survives_sigkill_of_either_qm(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    print(f"chaos seed {SEED}, rounds {ROUNDS}")
    port = free_port()
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    with QueueManager(b_dir) as qb:
        qb.create_queue(Q, transactional=True)
    a = ServeProcess(a_dir, A, port, tmp_path / "a.log")
    b = ServeProcess(b_dir, B, port, tmp_path / "b.log")
    sender_qm = QueueManager(a_dir)  # the sending applications' QM handle on A's data dir
    committed = [0]
    lock = threading.Lock()
    errors: list[BaseException] = []

    def sender(k: int) -> None:
        try:
            for t in range(TXS):
                tx = sender_qm.begin()
                sender_qm.send_many(
                    DEST, [MessageRecord(body=f"{k}-{t}-{i}".encode()) for i in range(PER_TX)], tx
                )
                tx.commit()
                with lock:
                    committed[0] += PER_TX
                time.sleep(rng.uniform(0.0, 0.15))
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    try:
        b.start()
        a.start()
        threads = [threading.Thread(target=sender, args=(k,)) for k in range(SENDERS)]
        for th in threads:
            th.start()
        violations = []
        in_flight_at_kill = []
        for r in range(ROUNDS):
            time.sleep(rng.uniform(0.1, 0.6))
            victims = rng.choice([[a], [b], [a, b]])
            for v in victims:
                v.kill()
            # Nothing committed is lost: it is in A's outgoing queue or already in B.
            with lock:
                done = committed[0]
            out, got = outgoing_count(a_dir), queue_count(b_dir, Q)
            if out + got < done:
                violations.append((r, done, out, got))
            in_flight_at_kill.append(out)
            time.sleep(rng.uniform(0.0, 0.3))
            for v in victims:
                v.start()
        for th in threads:
            th.join(120)
        assert not errors, errors
        assert committed[0] == SENDERS * TXS * PER_TX
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if outgoing_count(a_dir) == 0 and queue_count(b_dir, Q) >= committed[0]:
                break
            time.sleep(0.1)
        assert not violations, violations
        assert any(in_flight_at_kill), "no kill hit a transfer in progress"
        assert a.stop() == 0 and b.stop() == 0  # SIGTERM: clean exit
    finally:
        sender_qm.close()
        for s in (a, b):
            s.close()
    assert outgoing_count(a_dir) == 0, (tmp_path / "a.log").read_text()[-5000:]
    with QueueManager(b_dir) as qb:
        got = qb.peek_range(Q, 0, 100_000)
    bodies = [m.body.decode() for m in got]
    assert len(bodies) == len(set(bodies)), "duplicates delivered"
    expected = {f"{k}-{t}-{i}" for k in range(SENDERS) for t in range(TXS) for i in range(PER_TX)}
    assert set(bodies) == expected
    # In commit order per sequence: contiguous TxSequenceNumbers per TxSequenceID, in order.
    by_seq: dict[int, list[int]] = {}
    for m in got:
        by_seq.setdefault(m.tx_sequence_id, []).append(m.tx_sequence_number)
    for numbers in by_seq.values():
        assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))
    assert list(by_seq) == sorted(by_seq)
    # Each application's commits arrive in its commit order.
    for k in range(SENDERS):
        mine = [b for b in bodies if b.startswith(f"{k}-")]
        assert mine == [f"{k}-{t}-{i}" for t in range(TXS) for i in range(PER_TX)]
