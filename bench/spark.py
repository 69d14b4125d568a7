"""Spark benchmark: messages/s from an openmsmq queue into Parquet through the data source,
beside Spark's built-in rate source writing the same number of rows to Parquet, in one run.

One ``openmsmq serve`` on 127.0.0.1 (free ports, temporary data directory) holds a
transactional queue filled with ``--messages`` messages of ``--body-size`` bytes. Then,
on one local SparkSession (``local[2]``):

* openmsmq: ``readStream.format("openmsmq")`` (every read column, through the remote-read
  service) → ``writeStream.format("parquet")`` with ``Trigger.AvailableNow``: the time
  from start to termination covers planning, peeking every message over gRPC, writing
  Parquet, and the commit that removes them from the queue (checked: the queue is empty);
* rate: ``readStream.format("rate-micro-batch")`` with ``rowsPerBatch`` = the same
  number, one AvailableNow batch → Parquet.

Each is run once small first (warm-up: JVM, Python workers), then ``--repeat`` times;
the median is printed with every run, and the ratio openmsmq / rate.

``--floor`` adds, in the same rounds, a Python streaming source that reads nothing
(``bench/_spark_floor.py``: Arrow batches built in memory, no queue manager) with the rate
source's 2 columns and with the openmsmq source's 14: what Spark's Python data source path
costs by itself, i.e. the best any Python source could do here.

    .venv/bin/python bench/spark.py [--messages 200000] [--body-size 100] [--repeat 3] [--floor]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import openmsmq
from openmsmq.client import Access, OutgoingMessage
from openmsmq.runtime import live_runtime
from openmsmq.spark import launcher_path


def start_qm(data: Path, log: Path) -> subprocess.Popen[bytes]:
    """``openmsmq serve`` on 127.0.0.1 with free ports; returns once runtime.json is there."""
    data.mkdir(parents=True)
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "openmsmq.cli.serve", "--data-dir", str(data), "--listen", "127.0.0.1",
             "--port", "0", "--remote-port", "0", "--metrics-port", "0", "--log-level", "warning"],
            stdout=out, stderr=out,
        )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError("serve exited: " + log.read_text()[-2000:])
        info = live_runtime(data)
        if info is not None and info.get("pid") == proc.pid:
            return proc
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("serve did not start: " + log.read_text()[-2000:])


def fill(endpoint: str, queue: str, n: int, body_size: int) -> None:
    """Send ``n`` messages to ``queue`` in transactions of 5,000."""
    body = b"x" * body_size
    with openmsmq.connect(endpoint) as conn:
        q = conn.open_queue(queue, Access.SEND)
        sent = 0
        while sent < n:
            k = min(5000, n - sent)
            with conn.transaction() as tx:
                q.send_many([OutgoingMessage(body=body) for _ in range(k)], tx=tx)
            sent += k


def run_query(df: Any, out: Path, ck: Path) -> float:
    """Run ``df`` → Parquet with Trigger.AvailableNow; seconds from start to termination."""
    t0 = time.perf_counter()
    query = (
        df.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(ck))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    elapsed = time.perf_counter() - t0
    if query.exception() is not None:
        raise RuntimeError(str(query.exception()))
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description="openmsmq Spark source vs the rate source, into Parquet")
    parser.add_argument("--messages", type=int, default=200_000)
    parser.add_argument("--body-size", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=2, help="partitionsPerQueue (default: 2 cores)")
    parser.add_argument("--floor", action="store_true", help="also run the read-nothing Python source")
    args = parser.parse_args()
    # Spark's Python processes import the installed pyspark, not pyspark.zip (docs/spark.md).
    os.environ.setdefault("PYSPARK_PYTHON", launcher_path())
    # Where this host's name resolves to loopback, Spark would bind to another interface.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if args.floor:
        # Spark's Python workers import bench/_spark_floor.py by module name.
        here = str(Path(__file__).resolve().parent)
        sys.path.insert(0, here)
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH")) if p)
    work = Path(tempfile.mkdtemp(prefix="openmsmq-bench-spark-"))
    proc = start_qm(work / "qm", work / "serve.log")
    spark: Any = None
    try:
        info = live_runtime(work / "qm")
        assert info is not None
        endpoint = str(info["remote"])
        from pyspark.sql import SparkSession

        from openmsmq.spark import register

        spark = (
            SparkSession.builder.master("local[2]")
            .appName("openmsmq-bench-spark")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=ERROR")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.host", "127.0.0.1")
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)
        if args.floor:
            from _spark_floor import FloorSource

            spark.dataSource.register(FloorSource)

        def timed(df: Any, name: str, n: int) -> float:
            """run_query into ``work/<name>-out``; checks the Parquet table holds ``n`` rows."""
            t = run_query(df, work / f"{name}-out", work / f"{name}-ck")
            rows = spark.read.parquet(str(work / f"{name}-out")).count()
            if rows != n:
                raise RuntimeError(f"{name}: {rows} rows for {n}")
            return t

        def openmsmq_run(i: int, n: int) -> float:
            queue = f"private$\\bench{i}"
            with openmsmq.connect(endpoint) as conn:
                conn.create_queue(queue, transactional=True)
            fill(endpoint, queue, n, args.body_size)
            df = (
                spark.readStream.format("openmsmq")
                .option("endpoint", endpoint)
                .option("queues", queue)
                .option("partitionsPerQueue", args.partitions)
                .option("fetchSize", 10_000)
                .load()
            )
            t = timed(df, f"om{i}", n)
            with openmsmq.connect(endpoint) as conn:
                left = conn.queue_info(queue).message_count
            if left != 0:
                raise RuntimeError(f"openmsmq run {i}: {left} messages left in the queue")
            return t

        def rate_run(i: int, n: int) -> float:
            df = (
                spark.readStream.format("rate-micro-batch")
                .option("rowsPerBatch", n)
                .option("numPartitions", args.partitions)
                .load()
            )
            return timed(df, f"rate{i}", n)

        def floor_run(columns: str) -> Any:
            def run(i: int, n: int) -> float:
                df = (
                    spark.readStream.format("openmsmq-floor")
                    .option("rows", n)
                    .option("partitions", args.partitions)
                    .option("columns", columns)
                    .option("bodySize", args.body_size)
                    .load()
                )
                return timed(df, f"floor-{columns}{i}", n)

            return run

        floors = {"rate": floor_run("rate"), "openmsmq": floor_run("openmsmq")} if args.floor else {}
        openmsmq_run(0, 1000)  # warm-up
        rate_run(0, 1000)
        for run in floors.values():
            run(0, 1000)
        om: list[float] = []
        rate: list[float] = []
        floor_times: dict[str, list[float]] = {k: [] for k in floors}
        for i in range(1, args.repeat + 1):
            om.append(openmsmq_run(i, args.messages))
            rate.append(rate_run(i, args.messages))
            for columns, run in floors.items():
                floor_times[columns].append(run(i, args.messages))
        om_rate = args.messages / statistics.median(om)
        rate_rate = args.messages / statistics.median(rate)
        cmd = " ".join([".venv/bin/python", "bench/spark.py", *sys.argv[1:]])
        print(f"$ {cmd}")
        print(f"{args.messages:,} messages of {args.body_size} bytes, local[2], partitionsPerQueue "
              f"{args.partitions}, {os.cpu_count()} CPUs, median of {args.repeat}")  # fmt: skip
        print(
            f"openmsmq source -> Parquet  {om_rate:>12,.0f} msgs/s   runs: "
            + ", ".join(f"{t:.2f} s" for t in om)
        )
        print(
            f"rate source     -> Parquet  {rate_rate:>12,.0f} rows/s   runs: "
            + ", ".join(f"{t:.2f} s" for t in rate)
        )
        print(f"ratio openmsmq / rate: {om_rate / rate_rate:.2f}")
        for columns, times in floor_times.items():
            floor_rate = args.messages / statistics.median(times)
            shape = "2 columns, as rate" if columns == "rate" else "14 columns, as openmsmq"
            runs = ", ".join(f"{t:.2f} s" for t in times)
            print(
                f"read-nothing Python source ({shape}) -> Parquet  {floor_rate:>12,.0f} rows/s   "
                f"ratio to rate {floor_rate / rate_rate:.2f}   runs: {runs}"
            )
            if columns == "openmsmq":
                print(f"ratio openmsmq / read-nothing source, same 14 columns: {om_rate / floor_rate:.2f}")
        print(f"load average at the end: {os.getloadavg()[0]:.2f}")
    finally:
        if spark is not None:
            spark.stop()
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
