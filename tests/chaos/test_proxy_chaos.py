"""Chaos test through a TCP fault proxy: QM A (127.0.0.1) → proxy (127.0.0.3) → QM B
(127.0.0.2), two real ``openmsmq serve`` processes.

A reaches B through a static route ``127.0.0.2=127.0.0.3``; the proxy forwards to B and,
for ``OPENMSMQ_PROXY_CHAOS_SECONDS`` (default 20), cuts connections (sometimes
mid-packet), refuses some, stalls directions and splits writes, while two sending
threads commit transactions on A's data directory and A or B is SIGKILLed and restarted
a few times. Then faults stop and everything must drain: B's queue holds every committed
message exactly once and in commit order per transactional sequence, and A's outgoing
queue is empty. ``OPENMSMQ_PROXY_CHAOS_SEED`` sets the seed (printed).
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

from .proxy import FaultProxy, ProxyThread

P = "127.0.0.3"  # the fault proxy
Q = "private$\\orders"
DEST = f"DIRECT=TCP:{B}\\PRIVATE$\\orders"
SENDERS, PER_TX = 2, 50
SECONDS = float(os.environ.get("OPENMSMQ_PROXY_CHAOS_SECONDS", "20"))
SEED = int(os.environ.get("OPENMSMQ_PROXY_CHAOS_SEED", str(random.SystemRandom().randrange(1 << 30))))
DRAIN_SECONDS = 120.0

pytestmark = pytest.mark.slow


def test_transfer_through_fault_proxy_with_sigkills(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    print(f"proxy chaos seed {SEED}, {SECONDS:g} s of faults")
    port = free_port(A, B, P)
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    with QueueManager(b_dir) as qb:
        qb.create_queue(Q, transactional=True)
    b = ServeProcess(b_dir, B, port, tmp_path / "b.log")
    a = ServeProcess(a_dir, A, port, tmp_path / "a.log", "--route", f"{B}={P}")
    # The proxy connects to B from A's address, so B sees A as its peer.
    proxy = ProxyThread(FaultProxy((P, port), (B, port), SEED, source=A))
    sender_qm = QueueManager(a_dir)  # the sending applications' QM handle on A's data dir
    stop_sending = threading.Event()
    committed: list[list[int]] = [[] for _ in range(SENDERS)]  # per sender: its committed tx numbers
    lock = threading.Lock()
    errors: list[BaseException] = []

    def sender(k: int) -> None:
        pace = random.Random(SEED + 1 + k)
        try:
            for t in range(100_000):  # bounded; stops when the fault window ends
                if stop_sending.is_set():
                    return
                tx = sender_qm.begin()
                sender_qm.send_many(
                    DEST, [MessageRecord(body=f"{k}-{t}-{i}".encode()) for i in range(PER_TX)], tx
                )
                tx.commit()
                with lock:
                    committed[k].append(t)
                time.sleep(pace.uniform(0.0, 0.2))
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    def done() -> int:
        with lock:
            return sum(len(c) for c in committed) * PER_TX

    started = time.monotonic()
    violations: list[tuple[float, int, int, int]] = []
    kills: list[str] = []
    try:
        proxy.start()
        b.start()
        a.start()
        threads = [threading.Thread(target=sender, args=(k,)) for k in range(SENDERS)]
        for th in threads:
            th.start()
        # A few SIGKILLs of A, B or both at random moments of the fault window.
        n_kills = max(2, int(SECONDS / 7))
        kill_at = sorted(rng.uniform(0.1, 0.9) * SECONDS for _ in range(n_kills))
        for at in kill_at:
            time.sleep(max(0.0, started + at - time.monotonic()))
            victims = rng.choice([[a], [b], [a, b]])
            for v in victims:
                v.kill()
            kills.append("+".join("A" if v is a else "B" for v in victims))
            # Nothing committed is lost: in A's outgoing queue or already in B.
            before = done()
            out, got = outgoing_count(a_dir), queue_count(b_dir, Q)
            if out + got < before:
                violations.append((at, before, out, got))
            time.sleep(rng.uniform(0.0, 0.3))
            for v in victims:
                v.start()
        time.sleep(max(0.0, started + SECONDS - time.monotonic()))
        stop_sending.set()
        for th in threads:
            th.join(60)
        proxy.set_faults(False)
        faulted = time.monotonic() - started
        assert not errors, errors
        total = done()
        deadline = time.monotonic() + DRAIN_SECONDS
        while time.monotonic() < deadline:
            if outgoing_count(a_dir) == 0 and queue_count(b_dir, Q) >= total:
                break
            time.sleep(0.1)
        drained = time.monotonic() - started - faulted
        counts = proxy.counts()
        print(
            f"messages {total} in {total // PER_TX} transactions; kills {', '.join(kills)}; "
            f"faults for {faulted:.1f} s, drained in {drained:.1f} s"
        )
        print("proxy:", ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
        assert not violations, violations
        assert a.stop() == 0 and b.stop() == 0  # SIGTERM: clean exit
    finally:
        sender_qm.close()
        proxy.stop()
        for s in (a, b):
            s.close()
    cuts = counts.get("cut", 0) + counts.get("cut-mid-packet", 0) + counts.get("cut-timer", 0)
    assert cuts > 0 and counts.get("split", 0) > 0, counts
    assert outgoing_count(a_dir) == 0, (tmp_path / "a.log").read_text()[-5000:]
    with QueueManager(b_dir) as qb:
        stored = qb.peek_range(Q, 0, total + 1000)
    bodies = [m.body.decode() for m in stored]
    assert len(bodies) == len(set(bodies)), "duplicates delivered"
    expected = [f"{k}-{t}-{i}" for k in range(SENDERS) for t in committed[k] for i in range(PER_TX)]
    assert set(bodies) == set(expected)
    # In commit order per sequence: contiguous TxSequenceNumbers per TxSequenceID, in order.
    by_seq: dict[int, list[int]] = {}
    for m in stored:
        by_seq.setdefault(m.tx_sequence_id, []).append(m.tx_sequence_number)
    for numbers in by_seq.values():
        assert numbers == list(range(numbers[0], numbers[0] + len(numbers)))
    assert list(by_seq) == sorted(by_seq)
    # Each application's commits arrive in its commit order.
    for k in range(SENDERS):
        mine = [x for x in bodies if x.startswith(f"{k}-")]
        assert mine == [f"{k}-{t}-{i}" for t in committed[k] for i in range(PER_TX)]
