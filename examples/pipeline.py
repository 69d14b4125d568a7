"""The openmsmq demo pipeline (``make demo``): two queue managers, MS-MQQB transfer, Spark.

1. Starts two queue managers with ``openmsmq serve`` (embedded SQLite stores in temporary
   data directories): QM A on 127.0.0.1 and QM B on 127.0.0.2, on the same MS-MQQB port
   (1801 when it is free, else a free one).
2. Creates the transactional queue ``private$\\orders`` on B through B's remote read.
3. Sends a stream of order events from A (``openmsmq.connect(<A's data dir>)``) to
   ``DIRECT=TCP:127.0.0.2\\PRIVATE$\\orders`` in transactions: A moves them to B exactly
   once and in order over MS-MQQB (transactional sequences, OrderAck).
4. A Structured Streaming job reads B's queue with the ``openmsmq`` source through
   ``grpc://`` (remote read) and writes the orders to a Parquet table; a second query
   over that table writes per-customer totals (the aggregate table).
5. Prints a summary: messages sent, received, in the tables, duplicates, missing,
   throughput; exits 1 if any check fails. Everything is stopped and removed at the end,
   also on Ctrl-C.

    python examples/pipeline.py [--orders 20000] [--per-tx 500] [--keep DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import openmsmq
from openmsmq.client import Access, OutgoingMessage
from openmsmq.runtime import live_runtime

A_HOST, B_HOST = "127.0.0.1", "127.0.0.2"
QUEUE = "private$\\orders"
DESTINATION = f"DIRECT=TCP:{B_HOST}\\PRIVATE$\\orders"
CUSTOMERS = 50


# ---- queue managers ----------------------------------------------------------------------------


def _free_on_both(port: int) -> bool:
    for host in (A_HOST, B_HOST):
        with socket.socket() as s:
            try:
                s.bind((host, port))
            except OSError:
                return False
    return True


def pick_port() -> int:
    """1801 if it is free on both addresses, else a free port that is free on both."""
    if _free_on_both(1801):
        return 1801
    for _ in range(50):
        with socket.socket() as s:
            s.bind((A_HOST, 0))
            port = int(s.getsockname()[1])
        if _free_on_both(port):
            return port
    raise RuntimeError("no port free on both 127.0.0.1 and 127.0.0.2")


def start_qm(data: Path, host: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    """``openmsmq serve`` on ``host:port`` (remote read and metrics on free ports of ``host``)."""
    data.mkdir(parents=True)
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "openmsmq.cli.serve", "--data-dir", str(data), "--listen", host,
             "--port", str(port), "--remote-port", "0", "--metrics-port", "0", "--log-level", "warning"],
            stdout=out, stderr=out, start_new_session=True,
        )  # fmt: skip
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"serve on {host} exited: {log.read_text()[-2000:]}")
        info = live_runtime(data)
        if info is not None and info.get("pid") == proc.pid:
            return proc
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"serve on {host} did not start: {log.read_text()[-2000:]}")


def stop_qm(proc: subprocess.Popen[bytes]) -> None:
    """Graceful stop (SIGTERM), SIGKILL after 20 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


# ---- the order events ------------------------------------------------------------------------


def order(n: int) -> bytes:
    """Order event ``n`` as JSON."""
    return json.dumps(
        {"order_id": n, "customer": f"c{n % CUSTOMERS:03d}", "amount_cents": 100 + (n * 37) % 9900}
    ).encode()


class Sender(threading.Thread):
    """Sends ``total`` orders from QM A in transactions of ``per_tx``."""

    def __init__(self, a_dir: Path, total: int, per_tx: int) -> None:
        super().__init__(name="sender", daemon=True)
        self.a_dir, self.total, self.per_tx = a_dir, total, per_tx
        self.sent = 0
        self.started = self.finished = 0.0
        self.error: BaseException | None = None
        self.stop = threading.Event()

    def run(self) -> None:
        try:
            with openmsmq.connect(self.a_dir) as conn:
                q = conn.open_queue(DESTINATION, Access.SEND)
                self.started = time.monotonic()
                while self.sent < self.total and not self.stop.is_set():
                    n = min(self.per_tx, self.total - self.sent)
                    with conn.transaction() as tx:
                        q.send_many([OutgoingMessage(body=order(self.sent + i)) for i in range(n)], tx=tx)
                    self.sent += n
                self.finished = time.monotonic()
        except BaseException as exc:  # reported in the summary
            self.error = exc


# ---- Spark ---------------------------------------------------------------------------------------


def spark_session() -> Any:
    """A local SparkSession; PySpark finds the installed ``openmsmq`` format by itself."""
    from openmsmq.spark import launcher_path

    # Spark's Python processes import the installed pyspark, not pyspark.zip (docs/spark.md).
    os.environ.setdefault("PYSPARK_PYTHON", launcher_path())
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # Where this host's name resolves to loopback, Spark would bind to another interface.
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("openmsmq-demo")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=ERROR")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def start_stream(
    spark: Any, endpoint: str, orders_dir: Path, ck: Path, available_now: bool = False, queue: str = QUEUE
) -> Any:
    """orders queue on B → parsed order rows → Parquet (exactly once: file sink + checkpoint)."""
    from pyspark.sql import functions as F

    schema = "order_id BIGINT, customer STRING, amount_cents BIGINT"
    df = (
        spark.readStream.format("openmsmq")
        .option("endpoint", endpoint)
        .option("queues", queue)
        .option("maxMessagesPerTrigger", 5000)
        .option("partitionsPerQueue", 2)
        .option("fetchSize", 5000)
        .load()
        .select(
            "lookup_id",
            "message_id",
            "arrived_time",
            F.from_json(F.col("body").cast("string"), schema).alias("o"),
        )
        .select("lookup_id", "message_id", "arrived_time", "o.*")
    )
    writer = (
        df.writeStream.format("parquet")
        .option("path", str(orders_dir))
        .option("checkpointLocation", str(ck))
        .queryName("orders_to_parquet")
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    return writer.start()


def rows_read(query: Any, seen: dict[int, int]) -> int:
    """Input rows of every completed micro-batch so far (progress reports, by batch id)."""
    for p in query.recentProgress:
        seen[int(p.batchId)] = int(p.numInputRows)
    return sum(seen.values())


# ---- main ------------------------------------------------------------------------------------------


def run(args: argparse.Namespace, work: Path) -> bool:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    console = Console()
    port = pick_port()
    a_dir, b_dir = work / "qm-a", work / "qm-b"
    procs: list[subprocess.Popen[bytes]] = []
    spark: Any = None
    query: Any = None
    sender: Sender | None = None
    try:
        console.print(f"[bold]openmsmq demo[/]: QM A {A_HOST}:{port} → QM B {B_HOST}:{port} → Spark")
        procs.append(start_qm(b_dir, B_HOST, port, work / "qm-b.log"))
        procs.append(start_qm(a_dir, A_HOST, port, work / "qm-a.log"))
        b_info = live_runtime(b_dir)
        assert b_info is not None
        endpoint = str(b_info["remote"])
        with openmsmq.connect(b_dir) as conn:  # through B's remote read
            conn.create_queue(QUEUE, transactional=True, label="order events")
        console.print(f"queue {QUEUE} created on B; Spark reads it through {endpoint}")

        console.print("starting Spark (local[2]) ...")
        spark = spark_session()
        orders_dir, totals_dir = work / "tables" / "orders", work / "tables" / "customer_totals"
        ck = work / "checkpoint"
        query = start_stream(spark, endpoint, orders_dir, ck)

        sender = Sender(a_dir, args.orders, args.per_tx)
        seen: dict[int, int] = {}
        deadline = time.monotonic() + args.timeout
        with Progress(
            TextColumn("{task.description:<34}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
        ) as progress:
            t_sent = progress.add_task(f"sent from A to {DESTINATION.split(':', 1)[1]}", total=args.orders)
            t_read = progress.add_task("read by Spark from B, in Parquet", total=args.orders)
            sender.start()
            received = 0
            while time.monotonic() < deadline:
                received = rows_read(query, seen)
                progress.update(t_sent, completed=sender.sent)
                progress.update(t_read, completed=received)
                if sender.error is not None or query.exception() is not None:
                    break
                if received >= args.orders and not sender.is_alive():
                    break
                time.sleep(0.2)
        t_done = time.monotonic()
        sender.join(10)
        query.stop()
        if query.exception() is not None:
            console.print(f"[red]streaming query failed[/]: {query.exception()}")
        # The last batch is removed from the queue when the query next starts (docs/spark.md):
        # one AvailableNow run commits it, and reads anything still there.
        drain = start_stream(spark, endpoint, orders_dir, ck, available_now=True)
        drain.awaitTermination(120)

        from pyspark.sql import functions as F

        orders_df = spark.read.parquet(str(orders_dir))
        ids = {int(r.order_id) for r in orders_df.select("order_id").collect()}
        in_orders = orders_df.count()
        totals = orders_df.groupBy("customer").agg(
            F.count("*").alias("orders"), F.sum("amount_cents").alias("total_cents")
        )
        totals.write.mode("overwrite").parquet(str(totals_dir))
        agg = spark.read.parquet(str(totals_dir)).agg(F.sum("orders"), F.count("*")).collect()[0]
        in_totals, customers = int(agg[0] or 0), int(agg[1])
        expected_cents = sum(100 + (n * 37) % 9900 for n in range(args.orders))
        got_cents = int(spark.read.parquet(str(totals_dir)).agg(F.sum("total_cents")).collect()[0][0] or 0)

        with openmsmq.connect(b_dir) as conn:
            left_b = conn.queue_info(QUEUE).message_count
        left_a = -1
        for _ in range(100):  # OrderAcks may still be on their way: wait a little
            with openmsmq.connect(a_dir) as conn:
                queues = conn.list_queues(include_system=True)
            left_a = sum(q.message_count for q in queues if q.kind == "outgoing")
            if left_a == 0:
                break
            time.sleep(0.2)

        sent = sender.sent
        duplicates = in_orders - len(ids)
        missing = len(set(range(sent)) - ids)
        elapsed = max(1e-9, t_done - sender.started) if sender.started else 0.0
        checks = {
            "every order sent": sender.error is None and sent == args.orders,
            "no duplicates": duplicates == 0,
            "nothing missing": missing == 0,
            "aggregate table matches": in_totals == in_orders and got_cents == expected_cents,
            "queue on B empty": left_b == 0,
            "A's outgoing queue empty (all OrderAcked)": left_a == 0,
        }
        table = Table(title="openmsmq demo: summary", show_header=False)
        table.add_row(f"messages sent (A, transactions of {args.per_tx})", f"{sent:,}")
        table.add_row("messages received (Spark micro-batches)", f"{sum(seen.values()):,}")
        table.add_row("rows in Parquet table orders", f"{in_orders:,}")
        table.add_row("orders in table customer_totals", f"{in_totals:,} ({customers} customers)")
        table.add_row("duplicates", f"{duplicates:,}")
        table.add_row("missing", f"{missing:,}")
        table.add_row("left in B's queue / A's outgoing queue", f"{left_b} / {left_a}")
        if elapsed:
            rate = f"{in_orders / elapsed:,.0f} msgs/s"
            table.add_row("end-to-end throughput (first send → all in Parquet)", rate)
        table.add_row("tables", str(work / "tables") if args.keep else "(removed; --keep DIR keeps them)")
        console.print(table)
        for name, ok in checks.items():
            console.print(f"  {'[green]OK[/]  ' if ok else '[red]FAIL[/]'} {name}")
        if sender.error is not None:
            console.print(f"[red]sender failed[/]: {sender.error}")
        return all(checks.values())
    finally:
        if sender is not None:
            sender.stop.set()
        if query is not None:
            with contextlib.suppress(Exception):
                query.stop()
        if spark is not None:
            with contextlib.suppress(Exception):
                spark.stop()
        for p in reversed(procs):
            stop_qm(p)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--orders", type=int, default=20_000, help="order events to send (default 20,000)")
    parser.add_argument("--per-tx", type=int, default=500, help="orders per sending transaction")
    parser.add_argument("--timeout", type=float, default=300.0, help="give up after this many seconds")
    parser.add_argument("--keep", type=Path, help="keep data directories and tables in this directory")
    args = parser.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="openmsmq-demo-"))
    work.mkdir(parents=True, exist_ok=True)
    ok = False
    try:
        ok = run(args, work)
    except KeyboardInterrupt:
        print("\ninterrupted: stopping Spark and both queue managers", file=sys.stderr)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
