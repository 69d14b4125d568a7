"""Child process of the exactly-once test: a streaming query from openmsmq queues to Parquet.

    python stream_child.py ENDPOINT QUEUES OUT CHECKPOINT run|drain

The child starts its SparkSession (JVM, Python workers) at once, then waits for a line
``go`` on stdin before it starts the query, so the test can warm the next child up while
the current one runs (a closed stdin without ``go`` ends the child). ``run`` then runs
until killed (micro-batches of at most 1,000 messages); ``drain`` runs one
Trigger.AvailableNow query from the checkpoint (it removes from the queues what it
wrote), then exits 0. The child never calls ``register(spark)``: PySpark's data source
discovery finds the installed ``pyspark_openmsmq`` module.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    endpoint, queues, out, checkpoint, mode = sys.argv[1:6]
    from openmsmq.spark import launcher_path

    os.environ["PYSPARK_PYTHON"] = launcher_path()  # as in conftest.py
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("openmsmq-exactly-once")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.streaming.pollingDelay", "10ms")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    # No register(spark): PySpark finds format openmsmq itself (module pyspark_openmsmq).

    def start(available_now: bool):  # type: ignore[no-untyped-def]
        df = (
            spark.readStream.format("openmsmq")
            .option("endpoint", endpoint)
            .option("queues", queues)
            .option("maxMessagesPerTrigger", 1000)
            .option("partitionsPerQueue", 2)
            .load()
            .select("queue", "lookup_id", "body")
        )
        writer = df.writeStream.format("parquet").option("path", out).option("checkpointLocation", checkpoint)
        if available_now:
            writer = writer.trigger(availableNow=True)
        return writer.start()

    # Warm the Python worker up too (the first task of a query would start it otherwise).
    spark.sparkContext.parallelize([0], 1).map(lambda x: x).collect()
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("no go: the test is gone")
    if mode == "run":
        print("started", flush=True)
        start(False).awaitTermination()
    else:
        query = start(True)
        query.awaitTermination()
        if query.exception() is not None:
            raise SystemExit(f"query failed: {query.exception()}")
    spark.stop()


if __name__ == "__main__":
    main()
