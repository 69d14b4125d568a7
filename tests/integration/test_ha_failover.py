"""Failover of a highly available queue manager, with real processes and a real PostgreSQL.

QM A (SQLite, 127.0.0.1) sends transactional messages to QM B (127.0.0.2), whose two
``openmsmq serve`` processes share one PostgreSQL database, same listen address:

* the chaos test SIGKILLs B's active at random moments; each time the standby takes over
  (the time from the kill to B's listener accepting again is printed). At the end B's
  queue holds every message exactly once, in order, and A's outgoing queue is empty.
  ``OPENMSMQ_CHAOS_HA_ROUNDS`` (default 5) and ``OPENMSMQ_CHAOS_HA_MESSAGES`` (default
  2,000) size it; ``make chaos-ha ROUNDS=N`` runs 50,000 messages;
* the partition test freezes B's active (SIGSTOP) past its lease while A keeps sending to
  it, lets the standby take the lease, kills that one, resumes the frozen one: it commits
  nothing (the store does not change while the lease is another's), notices, steps down
  to standby, takes the lease again later and everything arrives exactly once.
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
from tests.ha_proc import (
    accepts,
    create_pg_qm,
    dump,
    ha_node,
    queue_bodies,
    role,
    store_state,
    wait_role,
)
from tests.pgserver import PgServer
from tests.serve_proc import A, B, ServeProcess, free_port, outgoing_count

Q = "private$\\orders"
DEST = f"DIRECT=TCP:{B}\\PRIVATE$\\orders"
ROUNDS = int(os.environ.get("OPENMSMQ_CHAOS_HA_ROUNDS", "5"))
MESSAGES = int(os.environ.get("OPENMSMQ_CHAOS_HA_MESSAGES", "2000"))
SEED = int(os.environ.get("OPENMSMQ_CHAOS_HA_SEED", str(random.SystemRandom().randrange(1 << 30))))

pytestmark = pytest.mark.slow


class Sender:
    """A thread sending ``total`` messages to B in transactions of ``per_tx`` through A's
    data directory, ``pause`` seconds apart; bodies are their numbers."""

    def __init__(self, a_dir: Path, total: int, per_tx: int, pause: float) -> None:
        self.qm = QueueManager(a_dir)
        self.total, self.per_tx, self.pause = total, per_tx, pause
        self.committed = 0
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        try:
            n = 0
            while n < self.total:
                k = min(self.per_tx, self.total - n)
                with self.qm.begin() as tx:
                    self.qm.send_many(DEST, [MessageRecord(body=b"%d" % (n + i)) for i in range(k)], tx)
                n += k
                self.committed = n
                time.sleep(self.pause)
        except BaseException as exc:  # reported by the test
            self.error = exc

    def close(self) -> None:
        if self.thread.ident is not None:
            self.thread.join(60)
        self.qm.close()


def _drained(a_dir: Path, dsn: str, total: int, nodes: list[ServeProcess], timeout: float) -> list[bytes]:
    deadline = time.monotonic() + timeout
    bodies: list[bytes] = []
    while time.monotonic() < deadline:
        bodies = queue_bodies(dsn, Q)
        if len(bodies) >= total and outgoing_count(a_dir) == 0:
            return bodies
        time.sleep(0.25)
    raise AssertionError(
        f"not drained: {len(bodies)} of {total} in B, {outgoing_count(a_dir)} in A's outgoing queue\n"
        + dump(*nodes)
    )


def _exactly_once_in_order(bodies: list[bytes], total: int) -> None:
    numbers = [int(b) for b in bodies]
    assert len(numbers) == len(set(numbers)), "duplicates in B's queue"
    assert numbers == list(range(total)), "B's queue is not every message in send order"


def test_failover_chaos_sigkill_of_the_active(tmp_path: Path, pg_server: PgServer) -> None:
    rng = random.Random(SEED)
    print(f"ha chaos seed {SEED}, rounds {ROUNDS}, messages {MESSAGES}")
    dsn = pg_server.new_database()
    create_pg_qm(dsn, tmp_path / "init", Q)
    port = free_port(A, B)
    b = [ha_node(tmp_path, "b1", B, port, dsn), ha_node(tmp_path, "b2", B, port, dsn)]
    a = ServeProcess(tmp_path / "a", A, port, tmp_path / "a.log")
    per_tx = 100
    # Spread the sending over the rounds (each about a lease and a half).
    sender = Sender(tmp_path / "a", MESSAGES, per_tx, pause=ROUNDS * 3.5 / max(1, MESSAGES // per_tx))
    takeovers: list[float] = []
    try:
        b[0].start()
        wait_role(b[0], "active")
        b[1].start(ready="runtime")
        wait_role(b[1], "standby")
        a.start()
        sender.thread.start()
        for r in range(ROUNDS):
            time.sleep(rng.uniform(0.3, 2.0))
            active = next(n for n in b if (role(n) or {}).get("role") == "active")
            standby = b[1] if active is b[0] else b[0]
            old = (role(active) or {})["epoch"]
            active.kill()
            killed = time.monotonic()
            deadline = killed + 30
            while not (((role(standby) or {}).get("epoch") or 0) > old and accepts(B, port)):
                assert time.monotonic() < deadline, f"no takeover after round {r + 1}\n" + dump(*b)
                time.sleep(0.01)
            took = time.monotonic() - killed
            takeovers.append(took)
            print(f"takeover {r + 1}: {took:.2f} s (epoch {old} -> {(role(standby) or {}).get('epoch')})")
            active.start(ready="runtime")
            wait_role(active, "standby")
        sender.thread.join(600)
        assert sender.error is None, sender.error
        bodies = _drained(tmp_path / "a", dsn, MESSAGES, [a, *b], 120 + MESSAGES / 200)
        _exactly_once_in_order(bodies, MESSAGES)
        assert len(takeovers) == ROUNDS
        print("takeover times (s): " + " ".join(f"{t:.2f}" for t in takeovers))
    finally:
        for p in (a, *b):
            p.close()
        sender.close()


def test_a_frozen_active_commits_nothing_after_losing_its_lease(tmp_path: Path, pg_server: PgServer) -> None:
    dsn = pg_server.new_database()
    create_pg_qm(dsn, tmp_path / "init", Q)
    port = free_port(A, B)
    b1, b2 = ha_node(tmp_path, "b1", B, port, dsn), ha_node(tmp_path, "b2", B, port, dsn)
    a = ServeProcess(tmp_path / "a", A, port, tmp_path / "a.log")
    total = 1500
    sender = Sender(tmp_path / "a", total, 50, pause=0.15)
    try:
        b1.start()
        wait_role(b1, "active")
        b2.start(ready="runtime")
        wait_role(b2, "standby")
        a.start()
        sender.thread.start()
        while sender.committed < 300:  # B1 is receiving
            assert sender.thread.is_alive(), sender.error
            time.sleep(0.05)
        assert b1.proc is not None
        b1.proc.send_signal(19)  # SIGSTOP: frozen, its sockets and its lease stay
        got = wait_role(b2, "active")  # the standby takes the lease once it has expired
        assert got["epoch"] == 2
        time.sleep(0.5)  # A keeps writing to the frozen B1's connection meanwhile
        b2.kill()  # nobody else may commit from here on
        before = store_state(dsn)
        assert before[0] == 2
        b1.proc.send_signal(18)  # SIGCONT
        wait_role(b1, "standby", timeout=10)
        after = store_state(dsn)
        assert after[0] == 2, "the lease moved on before the check"
        assert after == before, f"the frozen active committed after losing its lease: {before} -> {after}"
        log = b1.log.read_text()
        assert "stepping down from epoch 1" in log
        # It takes the lease again once B2's has expired, and serves everything once.
        wait_role(b1, "active", timeout=30)
        assert (role(b1) or {})["epoch"] == 3
        b2.start(ready="runtime")
        sender.thread.join(300)
        assert sender.error is None, sender.error
        bodies = _drained(tmp_path / "a", dsn, total, [a, b1, b2], 120)
        _exactly_once_in_order(bodies, total)
    finally:
        if b1.proc is not None and b1.proc.poll() is None:
            b1.proc.send_signal(18)
        for p in (a, b1, b2):
            p.close()
        sender.close()


def test_a_postgresql_restart_in_the_middle_of_a_transfer_loses_and_duplicates_nothing(
    tmp_path: Path, pg_server: PgServer
) -> None:
    dsn = pg_server.new_database()
    create_pg_qm(dsn, tmp_path / "init", Q)
    port = free_port(A, B)
    b = [ha_node(tmp_path, "b1", B, port, dsn), ha_node(tmp_path, "b2", B, port, dsn)]
    a = ServeProcess(tmp_path / "a", A, port, tmp_path / "a.log")
    total = 3000
    sender = Sender(tmp_path / "a", total, 100, pause=0.1)
    try:
        b[0].start()
        wait_role(b[0], "active")
        b[1].start(ready="runtime")
        a.start()
        sender.thread.start()
        while len(queue_bodies(dsn, Q)) < 500:
            assert sender.thread.is_alive() or sender.committed == total, sender.error
            time.sleep(0.05)
        pg_server.stop_immediate()  # no checkpoint: crash recovery at the start
        try:
            time.sleep(3.0)  # longer than the active can go without a renewal: it steps down
        finally:
            pg_server.restart()
        sender.thread.join(300)
        assert sender.error is None, sender.error
        bodies = _drained(tmp_path / "a", dsn, total, [a, *b], 120)
        _exactly_once_in_order(bodies, total)
        logs = "".join(n.log.read_text() for n in b)
        assert "stepping down from epoch 1" in logs  # the outage outlasted the lease
        assert any(((role(n) or {}).get("epoch") or 0) >= 2 for n in b)
    finally:
        if not pg_server.running:
            pg_server.restart()
        for p in (a, *b):
            p.close()
        sender.close()
