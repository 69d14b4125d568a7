"""The data source on a real Spark standalone cluster (``tests/spark/cluster.py``): a
master and two workers on loopback, jobs submitted with ``spark-submit``, openmsmq
shipped to the executors as the wheel of ``make wheel`` (``--py-files``), executors
reading from two ``openmsmq serve`` processes over their remote-read service (the
queue managers' data directories are never given to Spark).

The longer run with executors and drivers SIGKILLed is ``tests/spark/test_cluster_chaos.py``
(``make spark-cluster``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import openmsmq
from openmsmq.runtime import live_runtime

from . import cluster as sc
from .conftest import QM, java_available, start_serve, stop_serve

pytestmark = [pytest.mark.spark, pytest.mark.slow]

JOB = Path(__file__).with_name("cluster_job.py")


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[sc.Cluster, Path, Path]]:
    """The cluster, the wheel (as a ``.zip`` for ``--py-files``) and the executors' Python."""
    if not java_available():
        pytest.skip("Java is not installed: a Spark cluster needs a JVM")
    root = tmp_path_factory.mktemp("cluster")
    wheel = sc.copy_wheel_as_zip(sc.build_wheel(), root)
    python = sc.executor_python(root)
    cluster = sc.start_cluster(root)
    try:
        yield cluster, wheel, python
    finally:
        cluster.stop()


@pytest.fixture
def qm2(tmp_path: Path) -> Iterator[QM]:
    proc = start_serve(tmp_path / "qm2", tmp_path / "qm2.log")
    info = live_runtime(tmp_path / "qm2")
    assert info is not None
    conn = openmsmq.connect(str(info["remote"]))
    try:
        yield QM(tmp_path / "qm2", str(info["remote"]), conn)
    finally:
        conn.close()
        stop_serve(proc)


def run_job(spark_cluster: tuple[sc.Cluster, Path, Path], log: Path, *args: str) -> None:
    cluster, wheel, python = spark_cluster
    proc = sc.submit(cluster, JOB, list(args), py_files=wheel, python=python, log=log)
    try:
        rc = proc.wait(600)
    finally:
        sc.stop_group(proc)
    assert rc == 0, log.read_text(errors="replace")[-4000:]


def read_table(spark: Any, out: Path) -> dict[str, list[tuple[int, bytes]]]:
    """The Parquet table through its ``_spark_metadata`` log: rows per queue key, by LookupIdentifier."""
    got: dict[str, list[tuple[int, bytes]]] = {}
    for r in spark.read.parquet(str(out)).collect():
        got.setdefault(r.queue, []).append((r.lookup_id, bytes(r.body)))
    return {q: sorted(rows) for q, rows in got.items()}


def test_cluster_streams_two_queue_managers_and_writes_idempotently(
    spark: Any, qm: QM, qm2: QM, tmp_path: Path, spark_cluster: tuple[sc.Cluster, Path, Path]
) -> None:
    (a,) = qm.new_queues("ca")
    (b,) = qm2.new_queues("cb")
    sent = {f"one/{a}": [], f"two/{b}": []}  # type: dict[str, list[bytes]]
    for n in range(4):
        for key, owner, queue in ((f"one/{a}", qm, a), (f"two/{b}", qm2, b)):
            bodies = [f"{key}#{n * 250 + i}".encode() for i in range(250)]
            owner.send(queue, bodies)
            sent[key] += bodies
    out, ck = tmp_path / "out", tmp_path / "ck"
    endpoints = f"one={qm.endpoint},two={qm2.endpoint}"
    (dest,) = qm.new_queues("cwrite")
    rows = 400

    def write_job(attempt: int) -> list[str]:
        markers = tmp_path / f"markers{attempt}"
        markers.mkdir()
        return [
            "write",
            qm.endpoint,
            dest,
            "job-1",
            str(rows),
            str(markers),
            str(tmp_path / f"write{attempt}.json"),
        ]

    def check_write(attempt: int) -> None:
        done = json.loads((tmp_path / f"write{attempt}.json").read_text())
        assert len(done["killed"]) == 4  # every task's first attempt was killed halfway
        # Executors import openmsmq from the copy of the wheel Spark shipped to them.
        shipped = spark_cluster[1]
        assert all(".zip/openmsmq/" in f and not f.startswith(str(shipped.parent)) for f in done["openmsmq"])
        assert sorted(qm.bodies(dest)) == sorted(b"row-%d" % i for i in range(rows)), f"run {attempt}"

    # One application: the stream (AvailableNow into Parquet), then the write.
    stream = ["stream", endpoints, ",".join(sent), str(out), str(ck), "drain", "600"]
    run_job(spark_cluster, tmp_path / "app1.log", *stream, "+", *write_job(1))
    table = read_table(spark, out)
    for key, bodies in sent.items():
        assert [body for _, body in table[key]] == bodies  # once each, in LookupIdentifier order
    assert qm.lookup_ids(a) == [] and qm2.lookup_ids(b) == []
    check_write(1)
    # The whole write again, same writeId, in a new application: it adds nothing.
    run_job(spark_cluster, tmp_path / "app2.log", *write_job(2))
    check_write(2)
