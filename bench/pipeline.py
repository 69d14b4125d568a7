"""Pipeline benchmark: the ``make demo`` path under sustained load, beside its two halves.

QM A (127.0.0.1) → MS-MQQB → QM B (127.0.0.2) → Structured Streaming (the ``openmsmq``
source, ``examples/pipeline.py``'s query: orders parsed from JSON) → Parquet, on one
local SparkSession (``local[2]``), in three phases of ``--seconds`` each, one queue of B
per phase:

1. *transfer alone*: A's sender commits transactions of ``--per-tx`` orders as fast as it
   can to B's queue; the rate is the messages that arrived in B's queue per second
   (B's queue depth, sampled), nobody reading them.
2. *source alone*: B's queue holds ``--prefill`` orders, put there before the query
   starts; the rate is rows committed in Parquet per second while the query drains it,
   from its first batch's commit to its last one's.
3. *pipeline*: A's sender offers ``--rate`` orders a second (default: half the transfer
   rate of phase 1, the aim) to B over MS-MQQB while the query reads B's queue into
   Parquet. Reported: rows committed in Parquet per second, the latency of each message
   from its transaction's commit on A to the commit of the micro-batch holding its row
   (the time the batch's ``_spark_metadata`` entry was written), median and 99th
   percentile, and what was left unread at the end.

Rates are taken over the phase after a warm-up of ``--warmup`` seconds. The command,
the machine (cores, load average before and after) and every figure are printed.

    .venv/bin/python bench/pipeline.py [--seconds 60] [--warmup 10] [--per-tx 100] [--rate N] [--prefill N]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import openmsmq
from openmsmq.client import Access, OutgoingMessage
from openmsmq.runtime import live_runtime


def _demo() -> ModuleType:
    """``examples/pipeline.py`` (``make demo``): its queue managers, order events, query."""
    path = Path(__file__).resolve().parents[1] / "examples" / "pipeline.py"
    spec = importlib.util.spec_from_file_location("openmsmq_demo_pipeline", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


demo = _demo()


class Sender(threading.Thread):
    """Sends orders in transactions of ``per_tx`` to ``destination`` through ``qm_dir``'s
    queue manager, at ``rate`` orders a second (None: as fast as it can), until stopped;
    remembers each transaction's commit time (wall clock) by its first order number."""

    def __init__(self, qm_dir: Path, destination: str, per_tx: int, rate: float | None) -> None:
        super().__init__(daemon=True)
        self.qm_dir, self.destination, self.per_tx, self.rate = qm_dir, destination, per_tx, rate
        self.sent = 0
        self.commits: list[tuple[int, float]] = []  # (first order number, commit time)
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with openmsmq.connect(self.qm_dir) as conn:
                q = conn.open_queue(self.destination, Access.SEND)
                start = time.monotonic()
                while not self.stop.is_set():
                    if self.rate is not None:
                        due = start + self.sent / self.rate
                        if due > time.monotonic():
                            self.stop.wait(due - time.monotonic())
                            continue
                    n = self.per_tx
                    with conn.transaction() as tx:
                        q.send_many(
                            [OutgoingMessage(body=demo.order(self.sent + i)) for i in range(n)], tx=tx
                        )
                    self.commits.append((self.sent, time.time()))
                    self.sent += n
        except BaseException as exc:  # reported by the phase
            self.error = exc

    def commit_time(self, order_id: int) -> float:
        """When the transaction holding order ``order_id`` committed on the sender's QM."""
        lo, hi = 0, len(self.commits) - 1
        while lo < hi:  # the last transaction starting at or before order_id
            mid = (lo + hi + 1) // 2
            if self.commits[mid][0] <= order_id:
                lo = mid
            else:
                hi = mid - 1
        return self.commits[lo][1]


def prefill(qm_dir: Path, queue: str, n: int) -> None:
    """Put ``n`` orders into ``queue`` on its own queue manager, 5,000 a transaction."""
    with openmsmq.connect(qm_dir) as conn:
        q = conn.open_queue(queue, Access.SEND)
        for start in range(0, n, 5000):
            with conn.transaction() as tx:
                q.send_many(
                    [OutgoingMessage(body=demo.order(i)) for i in range(start, min(n, start + 5000))], tx=tx
                )


def depth(qm_dir: Path, queue: str) -> int:
    with openmsmq.connect(qm_dir) as conn:
        return conn.queue_info(queue).message_count


def batch_commits(table: Path) -> list[tuple[float, list[Path]]]:
    """Per committed micro-batch of the Parquet sink, in batch order: the time its
    ``_spark_metadata`` entry was written and the files it added (a compacted entry
    repeats earlier batches' files: each file counts for the first batch naming it)."""
    log = table / "_spark_metadata"
    entries = []
    for p in log.iterdir():
        name = p.name.removesuffix(".compact")
        if name.isdigit():
            entries.append((int(name), p))
    seen: set[str] = set()
    out = []
    for _, p in sorted(entries):
        files = []
        for line in p.read_text().splitlines()[1:]:
            path = json.loads(line)["path"]
            if path not in seen:
                seen.add(path)
                files.append(Path(path.removeprefix("file:")))
        out.append((p.stat().st_mtime, files))
    return out


def rows_in(file: Path) -> int:
    import pyarrow.parquet as pq

    rows: int = pq.ParquetFile(file).metadata.num_rows
    return rows


def committed_rows(table: Path) -> list[tuple[int, float]]:
    """(order_id, commit time of its batch) of every row the sink committed."""
    import pyarrow.parquet as pq

    rows: list[tuple[int, float]] = []
    for when, files in batch_commits(table):
        for f in files:
            rows.extend((int(i), when) for i in pq.read_table(f, columns=["order_id"]).column(0).to_pylist())
    return rows


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def wait_outgoing_empty(a_dir: Path, timeout: float) -> int:
    """Wait until A's outgoing queues are empty (everything OrderAcked); what is left."""
    deadline = time.monotonic() + timeout
    left = -1
    while time.monotonic() < deadline:
        with openmsmq.connect(a_dir) as conn:
            left = sum(q.message_count for q in conn.list_queues(include_system=True) if q.kind == "outgoing")
        if left == 0:
            break
        time.sleep(0.5)
    return left


def run(args: argparse.Namespace, work: Path) -> None:
    port = demo.pick_port()
    a_dir, b_dir = work / "qm-a", work / "qm-b"
    procs = [
        demo.start_qm(b_dir, demo.B_HOST, port, work / "qm-b.log"),
        demo.start_qm(a_dir, demo.A_HOST, port, work / "qm-a.log"),
    ]
    spark: Any = None
    senders: list[Sender] = []
    try:
        b_info = live_runtime(b_dir)
        assert b_info is not None
        endpoint = str(b_info["remote"])
        queues = {phase: f"private$\\orders-{phase}" for phase in ("transfer", "source", "pipeline")}
        with openmsmq.connect(b_dir) as conn:
            for q in queues.values():
                conn.create_queue(q, transactional=True)

        def remote(queue: str) -> str:
            return f"DIRECT=TCP:{demo.B_HOST}\\{queue.upper()}"

        # 1. transfer alone
        sender = Sender(a_dir, remote(queues["transfer"]), args.per_tx, None)
        senders.append(sender)
        sender.start()
        time.sleep(args.warmup)
        n0, t0 = depth(b_dir, queues["transfer"]), time.monotonic()
        time.sleep(args.seconds)
        n1, t1 = depth(b_dir, queues["transfer"]), time.monotonic()
        sender.stop.set()
        sender.join(30)
        assert sender.error is None, sender.error
        transfer_rate = (n1 - n0) / (t1 - t0)
        print(f"transfer alone: {transfer_rate:,.0f} msgs/s arrived in B ({n1 - n0:,} in {t1 - t0:.1f} s)")
        left = wait_outgoing_empty(a_dir, 300)
        print(f"  (A's outgoing queue drained after the phase: {left} left)", flush=True)

        spark = demo.spark_session()
        tables = work / "tables"

        # 2. source alone: B's queue filled beforehand, drained by the query
        prefill(b_dir, queues["source"], args.prefill)
        out = tables / "source"
        query = demo.start_stream(spark, endpoint, out, work / "ck-source", queue=queues["source"])
        deadline = time.monotonic() + args.warmup + args.seconds
        while time.monotonic() < deadline and depth(b_dir, queues["source"]) > 0:
            time.sleep(0.5)
        query.processAllAvailable()
        query.stop()
        # From the first batch's commit to the last one's: the query start is not counted.
        per_batch = [(when, sum(rows_in(f) for f in files)) for when, files in batch_commits(out)]
        first, last = per_batch[0][0], per_batch[-1][0]
        source_rows = sum(n for _, n in per_batch[1:])
        source_rate = source_rows / (last - first)
        print(
            f"source alone: {source_rate:,.0f} msgs/s into Parquet ({source_rows:,} rows committed "
            f"{last - first:.1f} s after the first batch; {args.prefill:,} put in B's queue beforehand)",
            flush=True,
        )

        # 3. the pipeline at the offered rate
        offered = args.rate or transfer_rate / 2
        sender = Sender(a_dir, remote(queues["pipeline"]), args.per_tx, offered)
        senders.append(sender)
        out = tables / "pipeline"
        query = demo.start_stream(spark, endpoint, out, work / "ck-pipeline", queue=queues["pipeline"])
        sender.start()
        time.sleep(args.warmup)
        w0 = time.time()
        r0 = len(committed_rows(out)) if out.exists() else 0
        time.sleep(args.seconds)
        w1 = time.time()
        rows = committed_rows(out)
        sender.stop.set()
        sender.join(30)
        assert sender.error is None, sender.error
        wait_outgoing_empty(a_dir, 300)
        query.processAllAvailable()  # the rest, so that no batch is cut by the stop
        query.stop()
        drained = len({oid for oid, _ in committed_rows(out)})
        in_window = [(oid, when) for oid, when in rows if w0 <= sender.commit_time(oid) and when <= w1]
        latencies = [when - sender.commit_time(oid) for oid, when in in_window]
        pipeline_rate = (len(rows) - r0) / (w1 - w0)
        ids = [oid for oid, _ in rows]
        median, p99 = statistics.median(latencies), percentile(latencies, 0.99)
        print(
            f"pipeline: offered {offered:,.0f} msgs/s, {pipeline_rate:,.0f} msgs/s into Parquet; "
            f"latency A commit -> Parquet commit median {median:.3f} s, p99 {p99:.3f} s "
            f"({len(latencies):,} messages sent and committed in the window); "
            f"duplicates {len(ids) - len(set(ids))}; {sender.sent - len(set(ids)):,} of {sender.sent:,} "
            f"not yet in Parquet at the window's end, {sender.sent - drained:,} missing after the drain"
        )
        print(
            f"aims: pipeline >= half the transfer: {pipeline_rate:,.0f} vs {transfer_rate / 2:,.0f} msgs/s; "
            f"p99 < trigger interval (0: the next batch starts when one ends) + 1 s: {p99:.3f} s"
        )
    finally:
        for s in senders:
            s.stop.set()
        if spark is not None:
            with contextlib.suppress(Exception):
                spark.stop()
        for p in reversed(procs):
            demo.stop_qm(p)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="measured seconds per phase (default 60)")
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds before measuring (default 10)")
    parser.add_argument(
        "--per-tx", type=int, default=100, help="orders per sending transaction (default 100)"
    )
    parser.add_argument(
        "--rate", type=float, help="orders/s offered to the pipeline (default: half the transfer rate)"
    )
    parser.add_argument("--prefill", type=int, default=500_000, help="orders the source-alone phase drains")
    parser.add_argument("--keep", type=Path, help="keep data directories and tables in this directory")
    args = parser.parse_args()
    print("$ " + " ".join([Path(sys.executable).name, *sys.argv]))
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())  # fmt: skip
    print(f"machine: {os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.2f} at the start")  # fmt: skip
    work = args.keep or Path(tempfile.mkdtemp(prefix="openmsmq-bench-pipeline-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        run(args, work)
    finally:
        print(f"load average at the end: {os.getloadavg()[0]:.2f}")
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
