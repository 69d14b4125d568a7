"""The openmsmq data source on a local SparkSession against a real queue manager
(``openmsmq serve``, reached over its remote-read service)."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from openmsmq.spark.schema import READ_COLUMNS

from .conftest import QM, start_serve, stop_serve

pytestmark = pytest.mark.spark


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


def test_batch_read_is_a_snapshot_and_removes_nothing(spark: Any, qm: QM) -> None:
    a, b = qm.new_queues("a", "b")
    a_ids = qm.send(a, [b"a%d" % i for i in range(5)])
    b_ids = qm.send(b, [b"b0", b"b1", b"b2"])
    df = (
        spark.read.format("openmsmq")
        .option("endpoint", qm.endpoint)
        .option("queues", f"{a},{b}")
        .option("partitionsPerQueue", 2)
        .option("fetchSize", 2)
        .load()
    )
    assert df.columns == [c for c, _ in READ_COLUMNS]
    rows = df.collect()
    assert sorted((r.queue, bytes(r.body)) for r in rows) == sorted(
        [(a, b"a%d" % i) for i in range(5)] + [(b, b"b%d" % i) for i in range(3)]
    )
    assert sorted(r.lookup_id for r in rows) == sorted(a_ids + b_ids)
    first = min(rows, key=lambda r: r.lookup_id)
    assert first.priority == 0 and len(first.correlation_id) == 20 and first.message_id.startswith("{")
    assert first.tx_sequence_id is None  # sent locally: no transactional sequence
    assert qm.lookup_ids(a) == a_ids and qm.lookup_ids(b) == b_ids


def test_bad_options_fail_at_start_naming_the_option(spark: Any, qm: QM) -> None:
    (a,) = qm.new_queues("a")
    ep = qm.endpoint
    with pytest.raises(Exception, match="option 'endpoint' is required"):
        spark.read.format("openmsmq").option("queues", a).load().collect()
    with pytest.raises(Exception, match=r"option 'queues': queue .*zz.* does not exist"):
        stream(spark, ep, f"{a},private$\\zz")
    with pytest.raises(Exception, match="option 'maxMessagesPerTrigger' must be an integer"):
        stream(spark, ep, a, maxMessagesPerTrigger="many")
    with pytest.raises(Exception, match="MQ_ERROR_REMOTE_MACHINE_NOT_AVAILABLE"):
        stream(spark, "grpc://127.0.0.1:1", a)
    with pytest.raises(Exception, match=r"option 'endpoint'.*not a data directory"):
        stream(spark, "/nonexistent/dir", a)
    df = spark.createDataFrame([(b"x", "extra")], "body binary, other string")
    with pytest.raises(Exception, match="column 'other' is not a message property"):
        df.write.format("openmsmq").option("endpoint", ep).option("queue", a).mode("append").save()
    with pytest.raises(Exception, match="cannot be overwritten"):
        df.select("body").write.format("openmsmq").option("endpoint", ep).option("queue", a).mode(
            "overwrite"
        ).save()
    assert qm.lookup_ids(a) == []


def test_batch_write_with_failed_task_retry_and_rerun_has_no_duplicate(
    spark: Any, qm: QM, tmp_path: Path
) -> None:
    from pyspark.sql import functions as F
    from pyspark.sql.functions import udf

    (out,) = qm.new_queues("out")
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
            .option("endpoint", qm.endpoint)
            .option("queue", out)
            .option("writeId", "job-1")
            .option("sendBatchSize", 1)
            .mode("append")
            .save()
        )

    save()
    assert os.path.exists(marker)  # the failure really happened and the retry succeeded
    assert sorted(qm.bodies(out)) == sorted(b"m%d" % i for i in range(20))
    save()  # the whole job again, same writeId: nothing new
    assert len(qm.bodies(out)) == 20
    assert {m.label for m in qm.messages(out)} == {"lbl"}


def test_stream_admission_commit_and_restart(spark: Any, qm: QM, tmp_path: Path) -> None:
    a, b = qm.new_queues("a", "b")
    a_ids = qm.send(a, [b"a%d" % i for i in range(6)])
    b_ids = qm.send(b, [b"b%d" % i for i in range(3)])
    ck = str(tmp_path / "ck")
    sink = Collector()

    def start() -> Any:
        df = stream(spark, qm.endpoint, f"{a},{b}", maxMessagesPerTrigger=4, partitionsPerQueue=2)
        return df.writeStream.foreachBatch(sink).option("checkpointLocation", ck).start()

    def rows(q: str, ids: list[int], pfx: bytes, idx: range) -> list[tuple[str, int, bytes]]:
        return [(q, ids[i], pfx + b"%d" % i) for i in idx]

    query = start()
    query.processAllAvailable()
    # Fair admission: 2 + 2, then b's last one and 3 of a, then a's last.
    assert [r for _, r in sink.batches] == [
        sorted(rows(a, a_ids, b"a", range(2)) + rows(b, b_ids, b"b", range(2))),
        sorted(rows(a, a_ids, b"a", range(2, 5)) + rows(b, b_ids, b"b", range(2, 3))),
        rows(a, a_ids, b"a", range(5, 6)),
    ]
    # A batch is removed once Spark asks for the next one: everything read is gone.
    assert qm.lookup_ids(a) == [] and qm.lookup_ids(b) == []

    (b3,) = qm.send(b, [b"b3"])
    query.processAllAvailable()
    assert sink.batches[-1][1] == [(b, b3, b"b3")]
    assert qm.lookup_ids(a) == [] and qm.lookup_ids(b) == []
    query.stop()

    (a6,) = qm.send(a, [b"a6"])
    query = start()
    query.processAllAvailable()
    query.stop()
    assert sink.batches[-1][1] == [(a, a6, b"a6")]
    assert sorted(sink.ids()) == sorted([*a_ids, *b_ids, b3, a6])  # each message exactly once
    assert qm.lookup_ids(a) == [] and qm.lookup_ids(b) == []


def test_qm_gone_mid_batch_fails_it_and_restart_replays_exactly_it(spark: Any, tmp_path: Path) -> None:
    import openmsmq
    from openmsmq.client import Access, OutgoingMessage

    data = tmp_path / "qm"
    log = tmp_path / "serve.log"
    proc = start_serve(data, log)
    q = "private$\\gone"
    with openmsmq.connect(data) as conn:  # the data directory of the running QM
        conn.create_queue(q, transactional=True)
        with conn.transaction() as tx:
            msgs = [OutgoingMessage(body=b"m%d" % i) for i in range(6)]
            conn.open_queue(q, Access.SEND).send_many(msgs, tx=tx)
    ck = str(tmp_path / "ck")
    sink = Collector()
    procs = [proc]

    def failing(df: Any, batch_id: int) -> None:
        if batch_id == 1 and procs[0].poll() is None and len(procs) == 1:
            procs[0].send_signal(signal.SIGKILL)  # the QM goes away while batch 1 runs
            procs[0].wait(10)
        sink(df, batch_id)

    def start() -> Any:
        df = stream(spark, str(data), q, maxMessagesPerTrigger=2)
        return df.writeStream.foreachBatch(failing).option("checkpointLocation", ck).start()

    try:
        query = start()
        with pytest.raises(Exception, match="MQ_ERROR_REMOTE_MACHINE_NOT_AVAILABLE"):
            query.processAllAvailable()
        assert [b for b, _ in sink.batches] == [0]
        procs.append(start_serve(data, log))  # same data directory, new ports
        query = start()
        query.processAllAvailable()
        query.stop()
        assert [b for b, _ in sink.batches] == [0, 1, 2]
        got = [body for _, rows in sink.batches for _, _, body in rows]
        assert got == [b"m%d" % i for i in range(6)]  # batch 1 replayed once, nothing skipped
    finally:
        for p in procs:
            stop_serve(p)


def test_available_now_stops_at_the_messages_present_at_start(spark: Any, qm: QM, tmp_path: Path) -> None:
    (a,) = qm.new_queues("a")
    ids = qm.send(a, [b"m%d" % i for i in range(7)])
    sink = Collector()

    def collect_and_send_more(df: Any, batch_id: int) -> None:
        sink(df, batch_id)
        if batch_id == 0:
            qm.send(a, [b"late1", b"late2"])  # after the AvailableNow target was fixed

    query = (
        stream(spark, qm.endpoint, a, maxMessagesPerTrigger=3)
        .writeStream.foreachBatch(collect_and_send_more)
        .option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(120)
    assert not query.isActive
    assert [len(rows) for _, rows in sink.batches] == [3, 3, 1]
    assert sink.ids() == ids
    # The run removed what it read (at its last latestOffset), nothing else.
    assert qm.bodies(a) == [b"late1", b"late2"]


def test_stream_to_stream_replayed_batch_writes_nothing_twice(spark: Any, qm: QM, tmp_path: Path) -> None:
    src, out = qm.new_queues("in", "out")
    qm.send(src, [b"m%d" % i for i in range(10)])
    ck = tmp_path / "ck"

    def run() -> None:
        query = (
            stream(spark, qm.endpoint, src, partitionsPerQueue=2)
            .select("body", "label")
            .writeStream.format("openmsmq")
            .option("endpoint", qm.endpoint)
            .option("queue", out)
            .option("checkpointLocation", str(ck))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        assert query.exception() is None

    run()
    assert sorted(qm.bodies(out)) == sorted(b"m%d" % i for i in range(10))
    # Forget that batch 0 committed: the restart replays it with the same offsets.
    (ck / "commits" / "0").unlink()
    (ck / "commits" / ".0.crc").unlink(missing_ok=True)
    run()
    assert (ck / "commits" / "0").exists()  # batch 0 ran (and committed) again
    assert sorted(qm.bodies(out)) == sorted(b"m%d" % i for i in range(10))


def test_corrupt_checkpoint_offset_fails_the_query_naming_it(spark: Any, qm: QM, tmp_path: Path) -> None:
    (a,) = qm.new_queues("a")
    (only,) = qm.send(a, [b"x"])
    ck = tmp_path / "ck"

    def start() -> Any:
        return (
            stream(spark, qm.endpoint, a)
            .writeStream.foreachBatch(lambda df, i: None)
            .option("checkpointLocation", str(ck))
            .trigger(availableNow=True)
            .start()
        )

    query = start()
    query.awaitTermination(120)
    offsets = ck / "offsets" / "0"
    lines = offsets.read_text().splitlines()
    written = json.loads(lines[-1])
    assert written["queues"] == {a: only} and set(written["qms"]) == {""}
    offsets.write_text("\n".join([*lines[:-1], json.dumps({"queues": {a: -3}})]) + "\n")
    query = start()
    with pytest.raises(Exception, match="checkpoint offset has position -3"):
        query.awaitTermination(120)


def test_a_checkpoint_written_before_guids_were_recorded_still_runs(
    spark: Any, qm: QM, tmp_path: Path
) -> None:
    (a,) = qm.new_queues("a")
    (first,) = qm.send(a, [b"x"])
    ck = tmp_path / "ck"
    sink = Collector()

    def run() -> None:
        query = (
            stream(spark, qm.endpoint, a)
            .writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(ck))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(120)
        assert query.exception() is None, query.exception()

    run()
    offsets = ck / "offsets" / "0"
    lines = offsets.read_text().splitlines()
    offsets.write_text("\n".join([*lines[:-1], json.dumps({"queues": {a: first}})]) + "\n")  # the old form
    (second,) = qm.send(a, [b"y"])
    run()
    assert [rows for _, rows in sink.batches] == [[(a, first, b"x")], [(a, second, b"y")]]
    assert qm.lookup_ids(a) == []
    newest = json.loads((ck / "offsets" / "1").read_text().splitlines()[-1])
    assert newest["queues"] == {a: second} and set(newest["qms"]) == {""}  # the GUID recorded again
