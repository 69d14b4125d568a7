"""Store throughput: transactional send then receive through the QueueManager, beside
raw SQLite (WAL, synchronous=FULL) measured in the same run on the same disk.

    .venv/bin/python bench/store.py [--messages 100000] [--single 40000] [--senders 8] [--repeat 3]
                                    [--disk-flushes N]

Prints msgs/s for 100 messages per transaction and for 1 message per transaction from
8 concurrent senders (with the commits that shared each fsync: group commit), the raw
SQLite rates for 100 rows and 1 row per transaction, and the ratios. Each of
``--repeat`` rounds measures raw SQLite and the QM back to back (the ratio of a round
compares like with like on a disk whose fsync latency drifts); figures are medians
over the rounds, with their range. ``--disk-flushes N`` runs everything on an emulated
disk that completes N flushes per second (``bench/_peer_setup.run_on_slow_disk``).
"""

from __future__ import annotations

import argparse
import os
import shlex
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

from openmsmq.qm import MessageRecord, QueueManager

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _peer_setup as setup

BODY = bytes(256)


def raw_sqlite(path: Path, rows: int, per_tx: int) -> float:
    """Rows/s inserting ``rows`` 256-byte rows, ``per_tx`` per transaction, one executemany each."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE IF NOT EXISTS m (id INTEGER PRIMARY KEY, queue_id INTEGER, body BLOB)")
    start = time.perf_counter()
    for _ in range(rows // per_tx):
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany("INSERT INTO m (queue_id, body) VALUES (1, ?)", [(BODY,)] * per_tx)
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return rows / elapsed


def batched(qm: QueueManager, n: int, per_tx: int) -> tuple[float, float, float, float]:
    """(send msgs/s, receive msgs/s, send CPU µs/msg, receive CPU µs/msg). CPU is this
    process's CPU time (Python and SQLite, not the wait for fsync): steadier than the
    rates on a shared machine whose disk latency drifts."""
    q = "private$\\batched"
    qm.create_queue(q, transactional=True)
    msgs = [MessageRecord(body=BODY)] * per_tx
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(n // per_tx):
        with qm.begin() as tx:
            qm.send_many(q, msgs, tx)
    send_rate = n / (time.perf_counter() - start)
    send_cpu = (time.process_time() - cpu) / n * 1e6
    start, cpu = time.perf_counter(), time.process_time()
    got = 0
    while got < n:
        with qm.begin() as tx:
            got += len(qm.receive_many(q, per_tx, tx=tx))
    recv_rate = n / (time.perf_counter() - start)
    recv_cpu = (time.process_time() - cpu) / n * 1e6
    return send_rate, recv_rate, send_cpu, recv_cpu


def concurrent_single(
    qm: QueueManager, n: int, workers: int
) -> tuple[float, float, float, float, float, float]:
    """(send msgs/s, receive msgs/s, send commits per fsync, receive commits per fsync,
    send CPU µs per commit, receive CPU µs per commit): 1 message per transaction from
    ``workers`` threads. CPU is the whole process's (all threads)."""
    q = "private$\\single"
    qm.create_queue(q, transactional=True)
    msg = MessageRecord(body=BODY)
    per_worker = n // workers

    def sender() -> None:
        for _ in range(per_worker):
            with qm.begin() as tx:
                qm.send(q, msg, tx)

    def receiver() -> None:
        for _ in range(per_worker):
            with qm.begin() as tx:
                qm.receive(q, tx=tx, timeout=60)

    rates = []
    per_batch = []
    cpus = []
    for fn in (sender, receiver):
        b0, o0 = qm.store.stats.batches, qm.store.stats.ops
        threads = [threading.Thread(target=fn) for _ in range(workers)]
        start, cpu = time.perf_counter(), time.process_time()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        rates.append(per_worker * workers / (time.perf_counter() - start))
        cpus.append((time.process_time() - cpu) / (per_worker * workers) * 1e6)
        per_batch.append((qm.store.stats.ops - o0) / max(1, qm.store.stats.batches - b0))
    return rates[0], rates[1], per_batch[0], per_batch[1], cpus[0], cpus[1]


def _median(xs: list[float]) -> float:
    return statistics.median(xs)


def _fmt(xs: list[float], unit: str) -> str:
    return f"{_median(xs):12,.0f} {unit} (range {min(xs):,.0f}-{max(xs):,.0f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=100_000, help="messages for the 100-per-transaction run")
    ap.add_argument("--single", type=int, default=40_000, help="messages for the 1-per-transaction run")
    ap.add_argument("--senders", type=int, default=8)
    ap.add_argument("--raw-single-rows", type=int, default=3000, help="rows for raw SQLite 1 row/tx")
    ap.add_argument("--repeat", type=int, default=3, help="rounds (raw and QM back to back)")
    ap.add_argument("--dir", default=None, help="directory for the databases (default: a temp dir)")
    ap.add_argument("--disk-flushes", type=float, help=setup.DISK_FLUSHES_HELP)
    args = ap.parse_args()
    if args.disk_flushes:
        setup.run_on_slow_disk(args.disk_flushes)
    print("$", shlex.join([sys.executable, *sys.argv]))
    disk = setup.slow_disk_header()
    if disk:
        print(disk.lstrip("# "))
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    res: dict[str, list[float]] = {}

    def add(key: str, value: float) -> None:
        res.setdefault(key, []).append(value)

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        base = Path(tmp)
        # Each round measures raw SQLite and the QM back to back, so the per-round ratio
        # compares like with like on a disk whose fsync latency drifts; medians over rounds.
        for i in range(args.repeat):
            raw100 = raw_sqlite(base / f"raw100-{i}.db", args.messages, 100)
            raw1 = raw_sqlite(base / f"raw1-{i}.db", args.raw_single_rows, 1)
            with QueueManager(base / f"qm-{i}") as qm:
                send100, recv100, send_cpu, recv_cpu = batched(qm, args.messages, 100)
                send1, recv1, fs_send, fs_recv, cpu1_send, cpu1_recv = concurrent_single(
                    qm, args.single, args.senders
                )
            for key, value in [
                ("raw100", raw100),
                ("raw1", raw1),
                ("send100", send100),
                ("recv100", recv100),
                ("send1", send1),
                ("recv1", recv1),
                ("fs_send", fs_send),
                ("send_cpu", send_cpu),
                ("recv_cpu", recv_cpu),
                ("fs_recv", fs_recv),
                ("cpu1_send", cpu1_send),
                ("cpu1_recv", cpu1_recv),
                ("r_send100", raw100 / send100),
                ("r_recv100", raw100 / recv100),
                ("r_send1", send1 / raw1),
                ("r_recv1", recv1 / raw1),
            ]:
                add(key, value)
    print(f"load average after:  {os.getloadavg()[0]:.2f}; medians of {args.repeat} rounds")
    print(f"raw SQLite, 100 rows/tx:            {_fmt(res['raw100'], 'rows/s')}")
    print(f"raw SQLite, 1 row/tx:               {_fmt(res['raw1'], 'rows/s')}")
    print(
        f"QM send, 100 msgs/tx:               {_fmt(res['send100'], 'msgs/s')}"
        f"   raw/QM {_median(res['r_send100']):5.2f}x"
    )
    print(
        f"QM receive, 100 msgs/tx:            {_fmt(res['recv100'], 'msgs/s')}"
        f"   raw/QM {_median(res['r_recv100']):5.2f}x"
    )
    print(
        f"CPU per message, 100 msgs/tx:       send {_median(res['send_cpu']):.1f} us, "
        f"receive {_median(res['recv_cpu']):.1f} us (process CPU time, median)"
    )
    print(
        f"QM send, 1 msg/tx, {args.senders} senders:     {_fmt(res['send1'], 'msgs/s')}"
        f"   {_median(res['r_send1']):5.1f}x raw 1-row/tx; {_median(res['fs_send']):.1f} commits per fsync"
    )
    print(
        f"QM receive, 1 msg/tx, {args.senders} receivers:{_fmt(res['recv1'], 'msgs/s')}"
        f"   {_median(res['r_recv1']):5.1f}x raw 1-row/tx; {_median(res['fs_recv']):.1f} commits per fsync"
    )
    print(
        f"CPU per commit, 1 msg/tx:           send {_median(res['cpu1_send']):.1f} us, "
        f"receive {_median(res['cpu1_recv']):.1f} us (process CPU time, median)"
    )


if __name__ == "__main__":
    main()
