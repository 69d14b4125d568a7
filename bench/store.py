"""Store throughput: transactional send then receive through the QueueManager, beside
raw SQLite (WAL, synchronous=FULL) measured in the same run on the same disk.

    .venv/bin/python bench/store.py [--messages 100000] [--single 40000] [--senders 8] [--repeat 3]
                                    [--disk-flushes N] [--backend sqlite|postgresql] [--dsn DSN]

``--backend postgresql`` measures the same on a queue manager whose store is
PostgreSQL, beside the SQLite one in the same rounds (SQLite first in each round), and
raw PostgreSQL (psycopg, multi-row INSERTs, one transaction each) beside raw SQLite. The
server is started for the run from Debian's binaries (``tests/pgserver.py``, fsync on,
on the same disk) unless ``--dsn`` names one (each round gets a fresh database there:
the role needs CREATEDB). For PostgreSQL it also prints round trips per commit (the
store's statements) and the server's CPU per message (its processes' CPU time, read
from /proc) beside this process's.

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
from openmsmq.qm.options import StoreOptions

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

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


def raw_postgresql(dsn: str, rows: int, per_tx: int) -> float:
    """Rows/s inserting ``rows`` 256-byte rows, ``per_tx`` per transaction, one multi-row INSERT each."""
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS m (id bigserial PRIMARY KEY, queue_id bigint, body bytea)")
        sql = "INSERT INTO m (queue_id, body) VALUES " + ", ".join(["(1, %s)"] * per_tx)
        params = [BODY] * per_tx
        start = time.perf_counter()
        for _ in range(rows // per_tx):
            with conn.transaction():
                conn.execute(sql, params)
        return rows / (time.perf_counter() - start)


class PgSide:
    """The PostgreSQL of the run: a server started for it (or the one ``dsn`` names), a
    fresh database per round, and the server's CPU time."""

    def __init__(self, dsn: str | None) -> None:
        self.server = None
        self.admin = dsn
        if dsn is None:
            from tests.pgserver import PgServer

            self.server = PgServer(fsync=True)
            self.server.start()
            self.admin = self.server.dsn()
        self.n = 0

    def new_database(self) -> str:
        import psycopg

        self.n += 1
        assert self.admin is not None
        name = f"bench_store_{os.getpid()}_{self.n}"
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.admin.rsplit("/", 1)[0] + "/" + name

    def cpu_seconds(self) -> float:
        """CPU time of the server's processes (0 for a server named by --dsn)."""
        if self.server is None:
            return 0.0
        try:
            master = int((self.server.datadir / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError):
            return 0.0
        tick = os.sysconf("SC_CLK_TCK")
        total = 0
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(entry) == master or int(fields[1]) == master:
                total += int(fields[11]) + int(fields[12])
        return total / tick

    def close(self) -> None:
        if self.server is not None:
            self.server.cleanup()


def batched(
    qm: QueueManager, n: int, per_tx: int, pg: PgSide | None = None
) -> tuple[float, float, float, float, float]:
    """(send msgs/s, receive msgs/s, send CPU µs/msg, receive CPU µs/msg, the server's CPU
    seconds between send and receive). CPU is this process's CPU time (Python and SQLite,
    not the wait for fsync): steadier than the rates on a shared machine whose disk
    latency drifts."""
    q = "private$\\batched"
    qm.create_queue(q, transactional=True)
    msgs = [MessageRecord(body=BODY)] * per_tx
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(n // per_tx):
        with qm.begin() as tx:
            qm.send_many(q, msgs, tx)
    send_rate = n / (time.perf_counter() - start)
    send_cpu = (time.process_time() - cpu) / n * 1e6
    split = pg.cpu_seconds() if pg else 0.0
    start, cpu = time.perf_counter(), time.process_time()
    got = 0
    while got < n:
        with qm.begin() as tx:
            got += len(qm.receive_many(q, per_tx, tx=tx))
    recv_rate = n / (time.perf_counter() - start)
    recv_cpu = (time.process_time() - cpu) / n * 1e6
    return send_rate, recv_rate, send_cpu, recv_cpu, split


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
    ap.add_argument(
        "--backend", choices=("sqlite", "postgresql"), default="sqlite",
        help="postgresql: also a queue manager on PostgreSQL, beside the SQLite one",
    )  # fmt: skip
    ap.add_argument("--dsn", default=None, help="a PostgreSQL server to use (default: start one)")
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

    pg = PgSide(args.dsn) if args.backend == "postgresql" else None
    try:
        with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
            base = Path(tmp)
            # Each round measures raw SQLite and the QM back to back, so the per-round ratio
            # compares like with like on a disk whose fsync latency drifts; medians over rounds.
            for i in range(args.repeat):
                raw100 = raw_sqlite(base / f"raw100-{i}.db", args.messages, 100)
                raw1 = raw_sqlite(base / f"raw1-{i}.db", args.raw_single_rows, 1)
                for key, value in measure(QueueManager(base / f"qm-{i}"), args, raw100, raw1).items():
                    add(key, value)
                if pg is None:
                    continue
                raw100 = raw_postgresql(pg.new_database(), args.messages, 100)
                raw1 = raw_postgresql(pg.new_database(), args.raw_single_rows, 1)
                qm = QueueManager(
                    base / f"pg-{i}", store_options=StoreOptions(backend="postgresql", dsn=pg.new_database())
                )
                for key, value in measure(qm, args, raw100, raw1, pg).items():
                    add("pg_" + key, value)
    finally:
        if pg is not None:
            pg.close()
    print(f"load average after:  {os.getloadavg()[0]:.2f}; medians of {args.repeat} rounds")
    report(res, "", "SQLite", args)
    if pg is not None:
        print()
        report(res, "pg_", "PostgreSQL", args)
        print(
            f"{'PostgreSQL round trips per commit:':<46}send 100/tx {_median(res['pg_rt100']):.1f},"
            f" 1/tx ({args.senders} senders) {_median(res['pg_rt1']):.2f}"
        )
        print(
            f"{'PostgreSQL server CPU per message, 100/tx:':<46}"
            f"send {_median(res['pg_srv_send_cpu']):.1f} us, "
            f"receive {_median(res['pg_srv_recv_cpu']):.1f} us (PostgreSQL's processes, median)"
        )


def measure(
    qm: QueueManager, args: argparse.Namespace, raw100: float, raw1: float, pg: PgSide | None = None
) -> dict[str, float]:
    """One round on ``qm`` (closed at the end): the figures and their ratios to raw."""
    with qm:
        trips0 = getattr(qm.store, "round_trips", 0)
        batches0 = qm.store.stats.batches
        srv0 = pg.cpu_seconds() if pg else 0.0
        send100, recv100, send_cpu, recv_cpu, srv_split = batched(qm, args.messages, 100, pg)
        srv1 = pg.cpu_seconds() if pg else 0.0
        trips100 = (getattr(qm.store, "round_trips", 0) - trips0) / max(1, qm.store.stats.batches - batches0)
        trips0, batches0 = getattr(qm.store, "round_trips", 0), qm.store.stats.ops
        send1, recv1, fs_send, fs_recv, cpu1_send, cpu1_recv = concurrent_single(
            qm, args.single, args.senders
        )
        trips1 = (getattr(qm.store, "round_trips", 0) - trips0) / max(1, qm.store.stats.ops - batches0)
    out = {
        "raw100": raw100, "raw1": raw1, "send100": send100, "recv100": recv100, "send1": send1,
        "recv1": recv1, "fs_send": fs_send, "send_cpu": send_cpu, "recv_cpu": recv_cpu, "fs_recv": fs_recv,
        "cpu1_send": cpu1_send, "cpu1_recv": cpu1_recv, "r_send100": raw100 / send100,
        "r_recv100": raw100 / recv100, "r_send1": send1 / raw1, "r_recv1": recv1 / raw1,
        "rt100": trips100, "rt1": trips1,
    }  # fmt: skip
    if pg:
        out["srv_send_cpu"] = (srv_split - srv0) / args.messages * 1e6
        out["srv_recv_cpu"] = (srv1 - srv_split) / args.messages * 1e6
    return out


def report(res: dict[str, list[float]], p: str, raw: str, args: argparse.Namespace) -> None:
    """Print the figures of one backend (keys prefixed ``p``)."""
    res = {k[len(p) :]: v for k, v in res.items() if k.startswith(p) and (p or not k.startswith("pg_"))}
    print(f"{f'raw {raw}, 100 rows/tx:':<46}{_fmt(res['raw100'], 'rows/s')}")
    print(f"{f'raw {raw}, 1 row/tx:':<46}{_fmt(res['raw1'], 'rows/s')}")
    print(
        f"{f'{raw} QM send, 100 msgs/tx:':<46}{_fmt(res['send100'], 'msgs/s')}"
        f"   raw/QM {_median(res['r_send100']):5.2f}x"
    )
    print(
        f"{f'{raw} QM receive, 100 msgs/tx:':<46}{_fmt(res['recv100'], 'msgs/s')}"
        f"   raw/QM {_median(res['r_recv100']):5.2f}x"
    )
    print(
        f"{'CPU per message, 100 msgs/tx:':<46}send {_median(res['send_cpu']):.1f} us, "
        f"receive {_median(res['recv_cpu']):.1f} us (process CPU time, median)"
    )
    print(
        f"{f'{raw} QM send, 1 msg/tx, {args.senders} senders:':<46}{_fmt(res['send1'], 'msgs/s')}"
        f"   {_median(res['r_send1']):5.1f}x raw 1-row/tx; {_median(res['fs_send']):.1f} commits per fsync"
    )
    print(
        f"{raw} QM receive, 1 msg/tx, {args.senders} receivers:{_fmt(res['recv1'], 'msgs/s')}"
        f"   {_median(res['r_recv1']):5.1f}x raw 1-row/tx; {_median(res['fs_recv']):.1f} commits per fsync"
    )
    print(
        f"{'CPU per commit, 1 msg/tx:':<46}send {_median(res['cpu1_send']):.1f} us, "
        f"receive {_median(res['cpu1_recv']):.1f} us (process CPU time, median)"
    )


if __name__ == "__main__":
    main()
