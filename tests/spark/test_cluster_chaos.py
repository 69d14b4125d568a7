"""Exactly once on a standalone cluster while processes die (``make spark-cluster``; the
test is skipped unless ``OPENMSMQ_SPARK_CLUSTER_LONG=1``).

Two queue managers (``openmsmq serve``) take messages the whole time. A streaming query
submitted with ``spark-submit`` reads both into Parquet; in each round an executor JVM
is SIGKILLed while a micro-batch is in flight (its tasks are retried on an executor the
cluster starts anew), then the driver's whole process group is SIGKILLed and the query
submitted again from its checkpoint. At the end, once nothing is sent any more, a
Trigger.AvailableNow run drains the queues. The table (read through ``_spark_metadata``)
holds every message exactly once, in LookupIdentifier order per queue, and both queues
are empty.

``OPENMSMQ_SPARK_CLUSTER_ROUNDS`` (default 3) sets the rounds,
``OPENMSMQ_SPARK_KILL_SEED`` the random moments."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from . import cluster as sc
from .conftest import QM
from .test_cluster import JOB, qm2, read_table, spark_cluster  # noqa: F401  (fixtures)

pytestmark = [
    pytest.mark.spark,
    pytest.mark.slow,
    pytest.mark.skipif(
        os.environ.get("OPENMSMQ_SPARK_CLUSTER_LONG") != "1",
        reason="long cluster run: make spark-cluster (OPENMSMQ_SPARK_CLUSTER_LONG=1)",
    ),
]

ROUNDS = int(os.environ.get("OPENMSMQ_SPARK_CLUSTER_ROUNDS", "3"))


class Feeder(threading.Thread):
    """Sends 5-message transactions to each queue about 20 times a second until stopped."""

    def __init__(self, targets: list[tuple[str, QM, str]]) -> None:
        super().__init__(daemon=True)
        self.targets = targets
        self.sent: dict[str, list[bytes]] = {key: [] for key, _, _ in targets}
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            n = 0
            while not self.stop.is_set() and n < 100_000:
                for key, qm, queue in self.targets:
                    bodies = [f"{key}#{n + i}".encode() for i in range(5)]
                    qm.send(queue, bodies)
                    self.sent[key].extend(bodies)
                n += 5
                self.stop.wait(0.05)
        except BaseException as exc:  # reported by the test
            self.error = exc


def _count(d: Path) -> int:
    return len([p for p in d.iterdir() if p.name.isdigit()]) if d.exists() else 0


def _wait(cond: Any, what: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert proc.poll() is None, f"driver ended while waiting for {what}: " + log.read_text()[-4000:]
        assert time.monotonic() < deadline, f"no {what} in {timeout} s: " + log.read_text()[-4000:]
        time.sleep(0.02)


@pytest.fixture
def feeder() -> Iterator[list[Feeder]]:
    made: list[Feeder] = []
    yield made
    for f in made:
        f.stop.set()
        f.join(30)


def test_executors_and_drivers_killed_while_messages_arrive(
    spark: Any,
    qm: QM,
    qm2: QM,  # noqa: F811
    tmp_path: Path,
    spark_cluster: tuple[sc.Cluster, Path, Path],  # noqa: F811
    feeder: list[Feeder],
) -> None:
    cluster, wheel, python = spark_cluster
    rng = random.Random(int(os.environ.get("OPENMSMQ_SPARK_KILL_SEED", "11")))
    (a,) = qm.new_queues("chaos-a")
    (b,) = qm2.new_queues("chaos-b")
    keys = {f"one/{a}": (qm, a), f"two/{b}": (qm2, b)}
    endpoints = f"one={qm.endpoint},two={qm2.endpoint}"
    out, ck, log = tmp_path / "out", tmp_path / "ck", tmp_path / "driver.log"
    feed = Feeder([(k, owner, q) for k, (owner, q) in keys.items()])
    feeder.append(feed)
    feed.start()
    args = ["stream", endpoints, ",".join(keys), str(out), str(ck)]

    executor_kills = 0
    for round_no in range(ROUNDS):
        driver = sc.submit(cluster, JOB, [*args, "run", "300"], py_files=wheel, python=python, log=log)
        try:
            start = _count(ck / "commits")
            _wait(lambda n=start: _count(ck / "commits") > n, "first commit", driver, log)
            # An executor dies while a micro-batch is in flight (planned, not committed).
            _wait(lambda: _count(ck / "offsets") > _count(ck / "commits"), "batch in flight", driver, log)
            time.sleep(rng.uniform(0.0, 0.3))
            victims = cluster.executor_pids()
            assert victims, "no executor running"
            os.kill(rng.choice(victims), signal.SIGKILL)
            executor_kills += 1
            after_kill = _count(ck / "commits")
            after = after_kill + 1
            _wait(lambda n=after: _count(ck / "commits") > n, "progress after the kill", driver, log)
            time.sleep(rng.uniform(0.0, 2.0))
        finally:
            os.killpg(driver.pid, signal.SIGKILL)  # the driver: spark-submit's JVM and its Python
            driver.wait(30)
            sc.stop_group(driver)
        print(f"round {round_no}: {_count(ck / 'commits')} batches committed", flush=True)
    feed.stop.set()
    feed.join(60)
    assert feed.error is None, feed.error
    drain = sc.submit(cluster, JOB, [*args, "drain", "300"], py_files=wheel, python=python, log=log)
    try:
        assert drain.wait(600) == 0, log.read_text()[-4000:]
    finally:
        sc.stop_group(drain)

    table = read_table(spark, out)
    for key, (owner, queue) in keys.items():
        bodies = [body for _, body in table.get(key, [])]
        assert len(bodies) == len(set(bodies)), f"duplicates in {key}"
        assert bodies == feed.sent[key], f"{key}: {len(bodies)} rows for {len(feed.sent[key])} messages"
        assert owner.lookup_ids(queue) == [], f"{key} is not empty"
    assert executor_kills == ROUNDS and all(feed.sent.values())
    # Each killed executor was noticed by its driver (its tasks then ran elsewhere).
    assert log.read_text(errors="replace").count("Lost executor") >= ROUNDS
    print(
        f"{ROUNDS} executor and {ROUNDS} driver kills, {sum(len(v) for v in feed.sent.values())} messages "
        f"in {_count(ck / 'commits')} batches",
        flush=True,
    )
