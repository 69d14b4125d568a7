"""The openmsmq data source on a local SparkSession, against the file-backed TEST BACKEND."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from openmsmq.spark.schema import READ_COLUMNS
from openmsmq.spark.testbackend import FileBackend

pytestmark = pytest.mark.spark


def new_qm(tmp_path: Path, *queues: str) -> tuple[FileBackend, str]:
    qm = FileBackend.create(str(tmp_path / "qm.db"))
    for q in queues:
        qm.create_queue(q)
    return qm, f"file://{qm.path}"


def stream(spark: Any, endpoint: str, queues: str, **options: Any) -> Any:
    reader = spark.readStream.format("openmsmq").option("endpoint", endpoint).option("queues", queues)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


class Collector:
    """foreachBatch sink remembering (batch id, [(queue, lookup_id, body)]) on the driver."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, list[tuple[str, int, bytes]]]] = []

    def __call__(self, df: Any, batch_id: int) -> None:
        rows = sorted((r.queue, r.lookup_id, bytes(r.body)) for r in df.collect())
        self.batches.append((batch_id, rows))

    def ids(self) -> list[int]:
        return [lid for _, rows in self.batches for _, lid, _ in rows]


def test_batch_read_is_a_snapshot_and_removes_nothing(spark: Any, tmp_path: Path) -> None:
    qm, ep = new_qm(tmp_path, "private$\\a", "b")
    qm.send("private$\\a", [b"a%d" % i for i in range(5)])
    qm.send("b", [b"b0", b"b1", b"b2"])
    df = (
        spark.read.format("openmsmq")
        .option("endpoint", ep)
        .option("queues", "private$\\a,b")
        .option("partitionsPerQueue", 2)
        .option("fetchSize", 2)
        .load()
    )
    assert df.columns == [c for c, _ in READ_COLUMNS]
    rows = df.collect()
    assert sorted((r.queue, bytes(r.body)) for r in rows) == sorted(
        [("private$\\a", b"a%d" % i) for i in range(5)] + [("b", b"b%d" % i) for i in range(3)]
    )
    assert sorted(r.lookup_id for r in rows) == list(range(1, 9))
    first = min(rows, key=lambda r: r.lookup_id)
    assert first.tx_sequence_number == 1 and first.priority == 0 and len(first.correlation_id) == 20
    assert len(qm.lookup_ids("private$\\a")) == 5 and len(qm.lookup_ids("b")) == 3


def test_bad_options_fail_at_start_naming_the_option(spark: Any, tmp_path: Path) -> None:
    qm, ep = new_qm(tmp_path, "a")
    with pytest.raises(Exception, match="option 'endpoint' is required"):
        spark.read.format("openmsmq").option("queues", "a").load().collect()
    with pytest.raises(Exception, match="option 'queues': queue 'zz' does not exist"):
        stream(spark, ep, "a,zz")
    with pytest.raises(Exception, match="option 'maxMessagesPerTrigger' must be an integer"):
        stream(spark, ep, "a", maxMessagesPerTrigger="many")
    df = spark.createDataFrame([(b"x", "extra")], "body binary, other string")
    with pytest.raises(Exception, match="column 'other' is not a message property"):
        df.write.format("openmsmq").option("endpoint", ep).option("queue", "a").mode("append").save()
    with pytest.raises(Exception, match="cannot be overwritten"):
        df.select("body").write.format("openmsmq").option("endpoint", ep).option("queue", "a").mode(
            "overwrite"
        ).save()
    assert qm.lookup_ids("a") == []


def test_batch_write_with_failed_task_retry_and_rerun_has_no_duplicate(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.functions import udf

    qm, ep = new_qm(tmp_path, "out")
    marker = str(tmp_path / "failed-once")

    @udf("binary")
    def flaky_body(i: int) -> bytes:
        # Fails the first attempt of the task holding row 15, after earlier rows were sent.
        if i == 15 and not os.path.exists(marker):
            with open(marker, "w") as f:
                f.write("x")
            raise RuntimeError("injected task failure")
        return b"m%d" % i

    df = spark.range(0, 20, numPartitions=2).select(
        flaky_body("id").alias("body"), F.lit("lbl").alias("label")
    )

    def save() -> None:
        (
            df.write.format("openmsmq")
            .option("endpoint", ep)
            .option("queue", "out")
            .option("writeId", "job-1")
            .option("sendBatchSize", 1)
            .mode("append")
            .save()
        )

    save()
    assert os.path.exists(marker)  # the failure really happened and the retry succeeded
    assert sorted(qm.bodies("out")) == sorted(b"m%d" % i for i in range(20))
    save()  # the whole job again, same writeId: nothing new
    assert len(qm.bodies("out")) == 20


def test_stream_admission_commit_and_restart(spark: Any, tmp_path: Path) -> None:
    qm, ep = new_qm(tmp_path, "a", "b")
    qm.send("a", [b"a%d" % i for i in range(6)])  # lookup ids 1-6
    qm.send("b", [b"b%d" % i for i in range(3)])  # lookup ids 7-9
    ck = str(tmp_path / "ck")
    sink = Collector()

    def start() -> Any:
        df = stream(spark, ep, "a,b", maxMessagesPerTrigger=4, partitionsPerQueue=2)
        return df.writeStream.foreachBatch(sink).option("checkpointLocation", ck).start()

    query = start()
    query.processAllAvailable()
    # Fair admission: 2 + 2, then b's last one and 3 of a, then a's last.
    assert [rows for _, rows in sink.batches] == [
        [("a", 1, b"a0"), ("a", 2, b"a1"), ("b", 7, b"b0"), ("b", 8, b"b1")],
        [("a", 3, b"a2"), ("a", 4, b"a3"), ("a", 5, b"a4"), ("b", 9, b"b2")],
        [("a", 6, b"a5")],
    ]
    # commit(end) of a batch runs when the next one is planned: batches 0 and 1 are gone.
    assert qm.lookup_ids("a") == [6] and qm.lookup_ids("b") == []

    qm.send("b", [b"b3"])  # lookup id 10
    query.processAllAvailable()
    assert sink.batches[-1][1] == [("b", 10, b"b3")]
    assert qm.lookup_ids("a") == [] and qm.lookup_ids("b") == [10]
    query.stop()

    qm.send("a", [b"a6"])  # lookup id 11
    query = start()
    query.processAllAvailable()
    query.stop()
    assert sink.batches[-1][1] == [("a", 11, b"a6")]
    assert sorted(sink.ids()) == list(range(1, 12))  # each message exactly once
    assert qm.lookup_ids("b") == []  # the restart's first batch committed the earlier one


def test_qm_gone_mid_batch_fails_it_and_restart_replays_exactly_it(spark: Any, tmp_path: Path) -> None:
    qm, ep = new_qm(tmp_path, "a")
    qm.send("a", [b"m%d" % i for i in range(6)])
    ck = str(tmp_path / "ck")
    moved = str(tmp_path / "moved.db")
    sink = Collector()

    def failing(df: Any, batch_id: int) -> None:
        if batch_id == 1 and not os.path.exists(moved + ".done"):
            os.rename(qm.path, moved)  # the QM goes away while batch 1 runs
            open(moved + ".done", "w").close()
        sink(df, batch_id)

    def start() -> Any:
        df = stream(spark, ep, "a", maxMessagesPerTrigger=2)
        return df.writeStream.foreachBatch(failing).option("checkpointLocation", ck).start()

    query = start()
    with pytest.raises(Exception, match="MQ_ERROR_REMOTE_MACHINE_NOT_AVAILABLE"):
        query.processAllAvailable()
    os.rename(moved, qm.path)
    assert [b for b, _ in sink.batches] == [0]
    query = start()
    query.processAllAvailable()
    query.stop()
    assert [b for b, _ in sink.batches] == [0, 1, 2]
    assert sink.ids() == [1, 2, 3, 4, 5, 6]  # batch 1 replayed once, nothing skipped


def test_available_now_stops_at_the_messages_present_at_start(spark: Any, tmp_path: Path) -> None:
    qm, ep = new_qm(tmp_path, "a")
    qm.send("a", [b"m%d" % i for i in range(7)])
    sink = Collector()

    def collect_and_send_more(df: Any, batch_id: int) -> None:
        sink(df, batch_id)
        if batch_id == 0:
            qm.send("a", [b"late1", b"late2"])  # after the AvailableNow target was fixed

    query = (
        stream(spark, ep, "a", maxMessagesPerTrigger=3)
        .writeStream.foreachBatch(collect_and_send_more)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert not query.isActive
    assert [len(rows) for _, rows in sink.batches] == [3, 3, 1]
    assert sink.ids() == list(range(1, 8))
    assert qm.bodies("a")[-2:] == [b"late1", b"late2"]


def test_stream_to_stream_replayed_batch_writes_nothing_twice(spark: Any, tmp_path: Path) -> None:
    qm, ep = new_qm(tmp_path, "in", "out")
    qm.send("in", [b"m%d" % i for i in range(10)])
    ck = tmp_path / "ck"

    def run() -> None:
        query = (
            stream(spark, ep, "in", partitionsPerQueue=2)
            .select("body", "label")
            .writeStream.format("openmsmq")
            .option("endpoint", ep)
            .option("queue", "out")
            .option("checkpointLocation", str(ck))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        assert query.exception() is None

    run()
    assert sorted(qm.bodies("out")) == sorted(b"m%d" % i for i in range(10))
    # Forget that batch 0 committed: the restart replays it with the same offsets.
    (ck / "commits" / "0").unlink()
    (ck / "commits" / ".0.crc").unlink(missing_ok=True)
    run()
    assert (ck / "commits" / "0").exists()  # batch 0 ran (and committed) again
    assert sorted(qm.bodies("out")) == sorted(b"m%d" % i for i in range(10))


def test_corrupt_checkpoint_offset_fails_the_query_naming_it(spark: Any, tmp_path: Path) -> None:
    qm, ep = new_qm(tmp_path, "a")
    qm.send("a", [b"x"])
    ck = tmp_path / "ck"

    def start() -> Any:
        return (
            stream(spark, ep, "a")
            .writeStream.foreachBatch(lambda df, i: None)
            .option("checkpointLocation", str(ck))
            .trigger(availableNow=True)
            .start()
        )

    query = start()
    query.awaitTermination(120)
    offsets = ck / "offsets" / "0"
    lines = offsets.read_text().splitlines()
    assert json.loads(lines[-1]) == {"queues": {"a": 1}}
    offsets.write_text("\n".join([*lines[:-1], json.dumps({"queues": {"a": -3}})]) + "\n")
    query = start()
    with pytest.raises(Exception, match="checkpoint offset has position -3"):
        query.awaitTermination(120)
