"""Exactly once across crashes: a streaming query process (Python driver, its JVM and its
workers) is SIGKILLed at random moments 3 times while messages keep arriving, and
restarted from its checkpoint each time; at the end the Parquet table holds every message
exactly once, in LookupIdentifier order per queue, and the queues are empty.

To keep the test short, the next child process is started (JVM, SparkSession) while the
current one runs; it starts its query only once told ``go``, after the current one has
been killed, so never two queries use the checkpoint at the same time."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import QM

pytestmark = [pytest.mark.spark, pytest.mark.slow]

KILLS = 3
PER_QUEUE = 3000
CHILD = Path(__file__).with_name("stream_child.py")


def _child(qm: QM, queues: list[str], out: Path, ck: Path, mode: str, log: Path) -> subprocess.Popen[bytes]:
    """Start a child (it warms up, then waits for :func:`_go`)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    with open(log, "ab") as f:
        return subprocess.Popen(
            [sys.executable, str(CHILD), qm.endpoint, ",".join(queues), str(out), str(ck), mode],
            stdin=subprocess.PIPE, stdout=f, stderr=f, env=env, start_new_session=True,
        )  # fmt: skip


def _go(child: subprocess.Popen[bytes]) -> None:
    """Let a warmed-up child start its query."""
    assert child.stdin is not None
    child.stdin.write(b"go\n")
    child.stdin.close()


def _kill(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is None:
        os.killpg(child.pid, signal.SIGKILL)
    child.wait(30)
    if child.stdin is not None and not child.stdin.closed:
        child.stdin.close()


def _commits(ck: Path) -> int:
    d = ck / "commits"
    return len([p for p in d.iterdir() if p.name.isdigit()]) if d.exists() else 0


class Feeder(threading.Thread):
    """Sends small transactions to every queue until stopped; bodies ``<queue>#<n>``."""

    def __init__(self, qm: QM, queues: list[str]) -> None:
        super().__init__(daemon=True)
        self.qm, self.queues = qm, queues
        self.sent: dict[str, list[bytes]] = {q: [] for q in queues}
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            n = 0
            # About 100 messages/s in all, at most PER_QUEUE per queue: a bounded backlog.
            while not self.stop.is_set() and n < PER_QUEUE:
                for q in self.queues:
                    bodies = [f"{q}#{n + i}".encode() for i in range(5)]
                    self.qm.send(q, bodies)
                    self.sent[q].extend(bodies)
                n += 5
                self.stop.wait(0.1)
        except BaseException as exc:  # reported by the test
            self.error = exc


def test_sigkilled_streaming_query_delivers_every_message_exactly_once(
    spark: Any, qm: QM, tmp_path: Path
) -> None:
    rng = random.Random(int(os.environ.get("OPENMSMQ_SPARK_KILL_SEED", "7")))
    queues = qm.new_queues("eo1", "eo2")
    out, ck, log = tmp_path / "out", tmp_path / "ck", tmp_path / "child.log"
    feeder = Feeder(qm, queues)
    feeder.start()
    current = _child(qm, queues, out, ck, "run", log)
    _go(current)
    nxt: subprocess.Popen[bytes] | None = None
    done = False
    try:
        for kill in range(KILLS):
            # Warm the next one up meanwhile; after the last kill it is the drain.
            nxt = _child(qm, queues, out, ck, "drain" if kill == KILLS - 1 else "run", log)
            before = _commits(ck)
            deadline = time.monotonic() + 240  # generous: a loaded 2-core CI machine
            # Kill once the query has made progress, at a random moment after it.
            while _commits(ck) <= before and time.monotonic() < deadline:
                assert current.poll() is None, log.read_text()[-3000:]
                time.sleep(0.05)
            progressed = _commits(ck) > before
            if progressed:
                time.sleep(rng.uniform(0.0, 1.5))
            _kill(current)
            assert progressed, "no progress: " + log.read_text()[-3000:]
            current, nxt = nxt, None
            if kill < KILLS - 1:
                _go(current)
        done = True
    finally:
        feeder.stop.set()
        feeder.join(30)
        for child in (nxt, None if done else current):
            if child is not None:
                _kill(child)
    assert feeder.error is None, feeder.error
    _go(current)  # the drain, once nothing is sent any more
    try:
        assert current.wait(240) == 0, log.read_text()[-3000:]
    finally:
        _kill(current)

    rows = spark.read.parquet(str(out)).collect()  # through the sink's metadata log
    got: dict[str, list[tuple[int, bytes]]] = {q: [] for q in queues}
    for r in rows:
        got[r.queue].append((r.lookup_id, bytes(r.body)))
    for q in queues:
        in_order = sorted(got[q])
        bodies = [b for _, b in in_order]
        assert len(bodies) == len(set(bodies)), f"duplicates in {q}"
        # every message sent, once, and LookupIdentifier order is send order
        assert bodies == feeder.sent[q], f"{q}: {len(bodies)} rows for {len(feeder.sent[q])} messages"
        assert qm.lookup_ids(q) == [], f"{q} is not empty"
    assert sum(len(v) for v in feeder.sent.values()) > 0
