"""A job submitted with ``spark-submit`` to the standalone cluster of the tests.

    cluster_job.py stream ENDPOINTS QUEUES OUT CHECKPOINT run|drain MAX_PER_TRIGGER
    cluster_job.py write ENDPOINT QUEUE WRITE_ID ROWS MARKER_DIR REPORT
    cluster_job.py JOB ARGS... + JOB ARGS...      (several, one after the other, one app)

Its Python has no openmsmq installed: the wheel given to ``--py-files`` brings it to the
driver and the executors, so the job registers the data source itself
(``register(spark)``; PySpark's discovery of installed data sources runs a Python that
sees installed packages only, not ``--py-files``).

``stream``: ENDPOINTS / QUEUES as the options ``endpoints`` / ``queues``; ``run`` streams
into Parquet until killed, ``drain`` runs one Trigger.AvailableNow query and exits 0.
``write``: ROWS rows written to QUEUE with ``writeId`` WRITE_ID, 4 partitions; the first
attempt of the task of each partition SIGKILLs its own Python worker halfway (a marker
file per partition in MARKER_DIR records it), so Spark retries it; the report lists the
partitions whose first attempt was killed and where the executors import openmsmq from.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path


def session():  # type: ignore[no-untyped-def]
    from pyspark.sql import SparkSession

    from openmsmq.spark import register

    spark = SparkSession.builder.appName("openmsmq-cluster").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def stream(spark, endpoints: str, queues: str, out: str, ck: str, mode: str, per_trigger: str) -> None:  # type: ignore[no-untyped-def]
    df = (
        spark.readStream.format("openmsmq")
        .option("endpoints", endpoints)
        .option("queues", queues)
        .option("maxMessagesPerTrigger", per_trigger)
        .option("partitionsPerQueue", 2)
        .load()
        .select("queue", "lookup_id", "body")
    )
    writer = df.writeStream.format("parquet").option("path", out).option("checkpointLocation", ck)
    if mode == "drain":
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination()
        if query.exception() is not None:
            raise SystemExit(f"query failed: {query.exception()}")
        return
    print("started", flush=True)
    writer.trigger(processingTime="200 milliseconds").start().awaitTermination()


def write(spark, endpoint: str, queue: str, write_id: str, rows: int, markers: str, report: str) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql.functions import udf

    @udf("binary")
    def body(i: int) -> bytes:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        marker = Path(markers) / f"killed-{ctx.partitionId()}"
        # Halfway through the partition, on its first attempt only: kill this Python
        # worker with the rows before it already sent (sendBatchSize 5).
        if i % (rows // 4) == rows // 8 and ctx.attemptNumber() == 0 and not marker.exists():
            marker.write_text(str(os.getpid()))
            os.kill(os.getpid(), signal.SIGKILL)
        return b"row-%d" % i

    df = spark.range(0, rows, numPartitions=4).select(body("id").alias("body"))
    (
        df.write.format("openmsmq")
        .option("endpoint", endpoint)
        .option("queue", queue)
        .option("writeId", write_id)
        .option("sendBatchSize", 5)
        .mode("append")
        .save()
    )
    killed = sorted(p.name for p in Path(markers).glob("killed-*"))
    Path(report).write_text(json.dumps({"killed": killed, "openmsmq": executors_openmsmq(spark)}))


def executors_openmsmq(spark) -> list[str]:  # type: ignore[no-untyped-def]
    """Where the executors' Python workers import openmsmq from."""

    def origin(_: object) -> list[str]:
        import openmsmq

        return [openmsmq.__file__ or ""]

    found: list[str] = spark.sparkContext.parallelize(range(4), 4).flatMap(origin).distinct().collect()
    return found


def main() -> None:
    spark = session()
    jobs: list[list[str]] = [[]]
    for arg in sys.argv[1:]:
        if arg == "+":
            jobs.append([])
        else:
            jobs[-1].append(arg)
    for kind, *args in jobs:
        if kind == "stream":
            endpoints, queues, out, ck, mode, per_trigger = args
            stream(spark, endpoints, queues, out, ck, mode, per_trigger)
        elif kind == "write":
            endpoint, queue, write_id, rows, markers, report = args
            write(spark, endpoint, queue, write_id, int(rows), markers, report)
        else:
            raise SystemExit(f"unknown job {kind!r}")
    spark.stop()


if __name__ == "__main__":
    main()
