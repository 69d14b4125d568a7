"""One query over queues of two queue managers (two ``openmsmq serve`` processes) on a
local SparkSession: rows, offsets per (queue manager, queue), lag in the progress, the
reader's position in the QM's metrics, and the checks at start (another queue manager
behind a name, another set of queues, a queue manager that is down)."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

import openmsmq
from openmsmq.runtime import live_runtime

from .conftest import QM, start_serve, stop_serve
from .test_source import Collector

pytestmark = pytest.mark.spark


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[QM, subprocess.Popen[bytes]]]:
    """A second queue manager, for this test only, and its process."""
    proc = start_serve(tmp_path / "qm2", tmp_path / "qm2.log")
    info = live_runtime(tmp_path / "qm2")
    assert info is not None
    conn = openmsmq.connect(str(info["remote"]))
    try:
        yield QM(tmp_path / "qm2", str(info["remote"]), conn), proc
    finally:
        conn.close()
        stop_serve(proc)


def _position_gauge(qm: QM, queue: str) -> float | None:
    info = live_runtime(qm.data_dir)
    assert info is not None and info.get("metrics")
    with urllib.request.urlopen(str(info["metrics"]), timeout=10) as reply:
        text = reply.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "openmsmq_range_reader_position" and sample.labels.get("queue") == queue:
                return sample.value
    return None


def _start(spark: Any, endpoints: str, queues: str, ck: Path, sink: Collector, **options: Any) -> Any:
    reader = spark.readStream.format("openmsmq").option("endpoints", endpoints).option("queues", queues)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load().writeStream.foreachBatch(sink).option("checkpointLocation", str(ck)).start()


def test_two_queue_managers_in_one_query(
    spark: Any, qm: QM, served: tuple[QM, subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    qm2, proc2 = served
    a, b = qm.new_queues("a", "b")
    for q in (a, b):  # the same names on the second QM, to point names at the wrong QM below
        qm2.conn.create_queue(q, transactional=True)
    a_ids = qm.send(a, [b"one-a%d" % i for i in range(5)])
    b_ids = qm2.send(b, [b"two-b%d" % i for i in range(3)])
    endpoints = f"one={qm.endpoint},two={qm2.endpoint}"
    keys = f"one/{a},two/{b}"
    ck, sink = tmp_path / "ck", Collector()

    query = _start(spark, endpoints, keys, ck, sink, maxOffsetsPerTrigger=4, partitionsPerQueue=2)
    query.processAllAvailable()
    progress = [p for p in query.recentProgress if p["numInputRows"] > 0]
    query.stop()
    got = sorted(row for _, rows in sink.batches for row in rows)
    assert got == sorted(
        [(f"one/{a}", i, b"one-a%d" % n) for n, i in enumerate(a_ids)]
        + [(f"two/{b}", i, b"two-b%d" % n) for n, i in enumerate(b_ids)]
    )
    assert len(sink.batches) >= 2  # 8 messages, at most 4 a batch
    assert qm.lookup_ids(a) == [] and qm2.lookup_ids(b) == []
    # The progress of the first batch: 4 of the 8 taken, so 4 behind across the two queues.
    latest = progress[0]["sources"][0]["latestOffset"]
    lag = (json.loads(latest) if isinstance(latest, str) else latest)["lag"]
    assert set(lag) == {f"one/{a}", f"two/{b}"}
    assert sum(v["messages"] for v in lag.values()) == 4
    assert all(v["bytes"] > 0 for v in lag.values() if v["messages"])
    # Each QM shows how far the reader has committed in its queue.
    assert _position_gauge(qm, a) == a_ids[-1] and _position_gauge(qm2, b) == b_ids[-1]

    more_a, more_b = qm.send(a, [b"x"]), qm2.send(b, [b"y"])
    batches = len(sink.batches)
    # The names pointed at each other's queue manager: refused at start, nothing read or removed.
    swapped = f"one={qm2.endpoint},two={qm.endpoint}"
    query = _start(spark, swapped, keys, ck, sink)
    with pytest.raises(Exception, match=r"option 'endpoints': queue manager 'one' at .* answers with GUID"):
        query.awaitTermination(120)
    # Another set of queues than the checkpoint's: refused too, naming the queue.
    query = _start(spark, endpoints, f"one/{a}", ck, sink)
    with pytest.raises(Exception, match=re.escape(f"holds queue {f'two/{b}'!r}")):
        query.awaitTermination(120)
    assert qm.lookup_ids(a) == more_a and qm2.lookup_ids(b) == more_b
    assert len(sink.batches) == batches

    # A queue manager that goes down fails the batch; nothing of the other one is skipped.
    query = _start(spark, endpoints, keys, ck, sink)
    query.processAllAvailable()
    assert len(sink.batches) == batches + 1 and qm.lookup_ids(a) == []
    proc2.kill()
    proc2.wait(10)
    (last_a,) = qm.send(a, [b"z"])
    with pytest.raises(Exception, match="MQ_ERROR_REMOTE_MACHINE_NOT_AVAILABLE"):
        query.processAllAvailable()
    assert qm.lookup_ids(a) == [last_a] and len(sink.batches) == batches + 1


def test_batch_read_between_offsets_on_two_queue_managers(
    spark: Any, qm: QM, served: tuple[QM, subprocess.Popen[bytes]]
) -> None:
    qm2, _ = served
    (a,) = qm.new_queues("a")
    qm2.conn.create_queue(a, transactional=True)
    ids1 = qm.send(a, [b"p%d" % i for i in range(4)])
    ids2 = qm2.send(a, [b"q%d" % i for i in range(4)])
    df = (
        spark.read.format("openmsmq")
        .option("endpoints", f"one={qm.endpoint},two={qm2.endpoint}")
        .option("queues", f"one/{a},two/{a}")
        .option("startingOffsets", f'{{"queues": {{"one/{a}": {ids1[0]}}}}}'.replace("\\", "\\\\"))
        .option("endingOffsets", f'{{"queues": {{"two/{a}": {ids2[1]}}}}}'.replace("\\", "\\\\"))
        .load()
    )
    rows = sorted((r.queue, bytes(r.body)) for r in df.collect())
    assert rows == [
        (f"one/{a}", b"p1"),
        (f"one/{a}", b"p2"),
        (f"one/{a}", b"p3"),
        (f"two/{a}", b"q0"),
        (f"two/{a}", b"q1"),
    ]
    assert qm.lookup_ids(a) == ids1 and qm2.lookup_ids(a) == ids2  # a batch read removes nothing


def test_option_errors_at_load_are_one_line(spark: Any, qm: QM) -> None:
    (a,) = qm.new_queues("a")
    with pytest.raises(Exception) as info:
        spark.read.format("openmsmq").option("endpoint", qm.endpoint).option("queues", a).option(
            "maxMessagePerTrigger", 3
        ).load()
    text = str(info.value)
    assert "openmsmq data source: unknown reader option 'maxmessagepertrigger'" in text
    assert "planning.py" not in text  # the traceback stops at the data source method
    with pytest.raises(Exception, match=r"option 'queues' entry 'nowhere/q' names queue manager 'nowhere'"):
        spark.read.format("openmsmq").option("endpoints", f"one={qm.endpoint}").option(
            "queues", "nowhere/q"
        ).load()
    missing = "one/private$\\zz"
    with pytest.raises(Exception, match=re.escape(f"option 'queues': queue {missing!r} does not exist")):
        spark.read.format("openmsmq").option("endpoints", f"one={qm.endpoint}").option(
            "queues", missing
        ).load()
