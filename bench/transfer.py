"""End-to-end transfer between two queue managers, beside RabbitMQ and Redis.

    .venv/bin/python bench/transfer.py [--messages 100000] [--body-size 256] [--per-tx 100]
                                       [--senders 1] [--single N] [--no-peers]
                                       [--fsyncs auto|perf|strace|none] [--timeout 600] [--repeat 3]
                                       [--disk-flushes N] [--duration SECONDS] [--store sqlite|postgresql]
                                       [--dsn DSN]

Two real ``openmsmq serve`` processes run on 127.0.0.1 (QM A) and 127.0.0.2 (QM B), each
over its own temporary data directory with the durable store (WAL, synchronous=FULL).
The transactional destination queue is created on B; a sender process (the application)
opens A's data directory and commits ``--messages`` transactional messages of
``--body-size`` bytes to ``DIRECT=TCP:127.0.0.2\\PRIVATE$\\bench``, ``--per-tx`` per
transaction from ``--senders`` threads. ``serve`` A transfers them to B over MS-MQQB.

``OPENMSMQ_*`` variables in the environment reach both ``serve`` processes (configuration,
e.g. ``OPENMSMQ_PROTOCOL_WINDOW_SIZE=1024``) and are printed with the command line.

Figures, all from the sender's first send (CLOCK_MONOTONIC is shared by the processes):

* *all committed at A*: the sender's last commit returned;
* *all stored at B*: B's destination queue holds every message (its store counter);
* *last OrderAck*: additionally A's outgoing queue is empty, i.e. every message was
  OrderAck'ed by B and released by A — the end-to-end figure.

The two counters are read every ``--poll`` seconds through read-only SQLite connections
(WAL readers, they do not block the QMs). fsyncs are counted per process tree (A, B and
the sender) with kernel counters, the same way as for the peers (``perf stat`` on the
fsync/fdatasync/syncfs tracepoints, strace as a fallback; see ``bench/_peer_setup.py``).
Afterwards B's queue is read back: every message exactly once and in each sender's
order, or the run is marked CHECK FAILED.

``--store postgresql``: the same runs again with B's store on PostgreSQL (a new database
per run on a server started for the run from Debian's binaries, ``fsync=on``, or on
``--dsn``), beside the runs with B on SQLite, then the peers; A stays on SQLite. B's
counter is then read over a PostgreSQL connection. For each run: CPU per message of each
process (A, B, the application, and the PostgreSQL server's processes when the run started
it), and B's commits with, on PostgreSQL, the round trips per commit of B's store writer
(``openmsmq_store_round_trips_total`` / ``openmsmq_store_commits_total`` from B's metrics
endpoint, read before and after the window).

The main figure is the median of ``--repeat`` runs (all are listed), as for the peers.
``--single N`` adds a run of N messages at 1 per transaction (``--senders`` threads,
8 if left at 1). Then the RabbitMQ quorum queue and Redis Streams runs of
``bench/peers.py`` move the same messages (skipped with a note if a server cannot be
installed or started; ``--no-peers`` skips both), and the ratios are printed.
``--duration S`` measures sustained throughput instead of a burst: the application
commits for S seconds as fast as it can, the figure is from its first send to the last
message stored at B, with the messages stored at B in each second while it sent (median,
lowest, highest) and the OrderAck tail after the last message reported apart (seed 003's
OrderAckTimeout); the peers then move as many messages as openmsmq moved.
``--disk-flushes N`` runs everything, the peers included, on an emulated disk that
completes N flushes per second (``bench/README.md``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _peer_setup as setup

ROOT = Path(__file__).resolve().parent.parent
COMMAND = ".venv/bin/python bench/transfer.py"
A, B = "127.0.0.1", "127.0.0.2"
QUEUE = "private$\\bench"
DEST = f"DIRECT=TCP:{B}\\PRIVATE$\\bench"


@dataclass(frozen=True)
class TransferResult:
    """One openmsmq run."""

    messages: int
    body_size: int
    per_tx: int
    senders: int
    committed_s: float
    stored_s: float
    acked_s: float
    fsyncs: dict[str, int | None]
    notes: list[str]
    #: CPU seconds (user + system, all threads) each process used in the window.
    cpu: dict[str, float]
    #: ``--duration``: seconds the application sent for (0: a burst of ``messages``).
    duration: float = 0.0
    #: ``--duration``: messages stored at B in each whole second while the application sent.
    per_second: tuple[int, ...] = ()
    #: B's store: "sqlite" or "postgresql".
    store: str = "sqlite"
    #: B's store commits in the window, and its writer's round trips (PostgreSQL; else None).
    b_commits: int | None = None
    b_round_trips: int | None = None

    @property
    def msgs_per_s(self) -> float:
        """A burst: first send to last OrderAck. ``--duration``: first send to the last
        message stored at B (the OrderAck tail after it is reported apart)."""
        return self.messages / (self.stored_s if self.duration else self.acked_s)

    @property
    def fsyncs_total(self) -> int | None:
        """fsyncs of A, B and the sender together (None if any was not counted)."""
        vals = list(self.fsyncs.values())
        return None if any(v is None for v in vals) else sum(v for v in vals if v is not None)


def _body(sender: int, seq: int, size: int) -> bytes:
    """A body: sender number (4 bytes), sequence number (8 bytes), zero padding."""
    return sender.to_bytes(4, "big") + seq.to_bytes(8, "big") + bytes(max(0, size - 12))


# --------------------------------------------------------------------------- sender process


def sender_main(a_dir: str, n: int, body_size: int, per_tx: int, senders: int, duration: float = 0.0) -> None:
    """The application: commit ``n`` messages to DEST on A's data directory, then report;
    with ``duration``, commit for that many seconds instead (as fast as it can).

    Protocol with the parent on stdin/stdout: prints ``ready``, waits for a line on stdin,
    sends, prints one JSON line (t0, t_committed, sent: the messages committed, tx_ms: the
    median, 99th percentile and longest of its transactions' durations, begin to commit
    returned, in ms).
    """
    from openmsmq.qm import MessageRecord, QueueManager

    qm = QueueManager(a_dir)
    qm.open_queue(DEST)
    share = [n // senders + (1 if k < n % senders else 0) for k in range(senders)]
    if duration:
        share = [0] * senders  # bodies are built per transaction until the time is up
    bodies = [[_body(k, i, body_size) for i in range(share[k])] for k in range(senders)]
    sent = [0] * senders
    print("ready", flush=True)
    sys.stdin.readline()
    errors: list[BaseException] = []
    start = threading.Barrier(senders + 1)
    durations: list[float] = []

    def run(k: int) -> None:
        clock = time.monotonic
        mine_durations = []
        try:
            start.wait()
            mine = bodies[k]
            if duration:
                until = clock() + duration
                while clock() < until:
                    began = clock()
                    tx = qm.begin()
                    i = sent[k]
                    batch = [MessageRecord(body=_body(k, j, body_size)) for j in range(i, i + per_tx)]
                    qm.send_many(DEST, batch, tx)
                    tx.commit()
                    sent[k] = i + per_tx
                    mine_durations.append(clock() - began)
            for i in range(0, len(mine), per_tx):
                began = clock()
                tx = qm.begin()
                qm.send_many(DEST, [MessageRecord(body=b) for b in mine[i : i + per_tx]], tx)
                tx.commit()
                mine_durations.append(clock() - began)
            sent[k] += len(mine)
        except BaseException as exc:
            errors.append(exc)
        durations.extend(mine_durations)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(senders)]
    for th in threads:
        th.start()
    start.wait()
    t0 = time.monotonic()
    for th in threads:
        th.join()
    t1 = time.monotonic()
    if errors:
        raise errors[0]
    durations.sort()
    tx_ms = [
        round(durations[min(len(durations) - 1, int(q * len(durations)))] * 1000, 2) for q in (0.5, 0.99, 1.0)
    ]
    print(json.dumps({"t0": t0, "t_committed": t1, "sent": sum(sent), "tx_ms": tx_ms}), flush=True)
    sys.stdin.readline()  # stay alive until the parent has closed the fsync window
    qm.close()


# --------------------------------------------------------------------------- processes


def free_port() -> int:
    """A TCP port free on both 127.0.0.1 and 127.0.0.2 (bounded tries)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind((A, 0))
            port = int(s.getsockname()[1])
        try:
            with socket.socket() as s2:
                s2.bind((B, port))
            return port
        except OSError:
            continue
    raise RuntimeError("no port free on both loopback addresses")


class Proc:
    """A child process (serve or sender) under an optional fsync counter."""

    def __init__(self, name: str, workdir: Path, argv: list[str], fsyncs: str, stdin: bool = False) -> None:
        self.name = name
        self.dir = workdir / f"{name}-trace"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.counter = setup.fsync_counter(self.dir, fsyncs, lambda m: None)
        self.log = workdir / f"{name}.log"
        argv = self.counter.wrap(argv) if self.counter is not None else argv
        self.token = os.urandom(8).hex()
        env = dict(os.environ, OPENMSMQ_LOG_LEVEL="warning", **{setup.TOKEN_ENV: self.token})
        with self.log.open("wb") as err:
            self.proc = subprocess.Popen(
                argv,
                stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                stdout=subprocess.PIPE if stdin else err,
                stderr=err,
                env=env,
                cwd=ROOT,
                text=True,
                start_new_session=True,
            )

    def check(self) -> None:
        """Raise with the log tail if the process has exited."""
        if self.proc.poll() is not None:
            tail = self.log.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{tail}")

    def stop(self) -> None:
        """SIGTERM the counted process (graceful stop of serve); perf/strace, the spawned
        process when counting, exits after it having written its counts."""
        if self.proc.poll() is None:
            own = self.proc.pid
            pids = [p for p in setup.token_pids(self.token) if p != own] or [own]
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(own, signal.SIGKILL)
                self.proc.wait(10)

    def cpu_seconds(self) -> float:
        """User + system CPU seconds of the counted process so far (its threads included)."""
        own = self.proc.pid
        return setup.cpu_seconds([p for p in setup.token_pids(self.token) if p != own] or [own])

    def fsyncs(self) -> int | None:
        """fsyncs counted in the window (after the process exited)."""
        return None if self.counter is None else self.counter.count()


def serve(
    name: str, workdir: Path, data: Path, address: str, port: int, fsyncs: str, metrics: bool = False
) -> Proc:
    """``openmsmq serve`` on ``address:port`` over ``data``; its remote-read service on a free
    port of the same address (what ``openmsmq.connect(data)`` reaches); its metrics endpoint
    on a free port when ``metrics`` (:func:`_store_counters`), else none."""
    argv = [sys.executable, "-m", "openmsmq.cli.serve", "--data-dir", str(data),
            "--listen", address, "--port", str(port), "--log-level", "warning",
            "--remote-port", str(free_port()),
            *(["--metrics-port", "0"] if metrics else ["--no-metrics"])]  # fmt: skip
    p = Proc(name, workdir, argv, fsyncs)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        p.check()
        try:
            with socket.create_connection((address, port), timeout=0.2):
                return p
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{name} did not listen on {address}:{port} within 30 s")


def _store_counters(data: Path) -> tuple[int, int | None]:
    """(commits, round trips or None) of the store of the serve process over ``data``, from
    its metrics endpoint (named in its runtime.json)."""
    import urllib.request

    import _stages

    with urllib.request.urlopen(_stages.metrics_url(data), timeout=30) as resp:
        text = resp.read().decode()
    values: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(("openmsmq_store_commits_total ", "openmsmq_store_round_trips_total ")):
            name, value = line.split()
            values[name] = float(value)
    trips = values.get("openmsmq_store_round_trips_total")
    return int(values.get("openmsmq_store_commits_total", 0)), None if trips is None else int(trips)


def _ro(data: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{data / 'openmsmq.db'}?mode=ro", uri=True, timeout=30, isolation_level=None)


class _PgCount:
    """``SELECT ... FROM queues`` of B's PostgreSQL store, as ``_ro`` gives it for SQLite."""

    def __init__(self, dsn: str) -> None:
        import psycopg

        self.conn = psycopg.connect(dsn, autocommit=True)

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        return self.conn.execute(sql.replace("?", "%s"), params)

    def close(self) -> None:
        self.conn.close()


def run_openmsmq(
    n: int,
    body_size: int,
    per_tx: int,
    senders: int,
    *,
    fsyncs: str,
    timeout: float,
    poll: float,
    duration: float = 0.0,
    b_dsn: Callable[[], str] | None = None,
    pg_pids: Callable[[], list[int]] | None = None,
) -> TransferResult:
    """One openmsmq A → B run (see the module docstring); with ``duration`` the application
    sends for that many seconds and ``n`` is what it sent; ``b_dsn``: B's store is a new
    PostgreSQL database it gives (store.backend = "postgresql"), else SQLite; ``pg_pids``:
    the processes of that PostgreSQL server (their CPU is counted), when known."""
    from openmsmq.qm import QueueManager
    from openmsmq.qm.options import StoreOptions

    work = Path(tempfile.mkdtemp(prefix="openmsmq-bench-transfer-"))
    a_dir, b_dir = work / "a", work / "b"
    dsn = b_dsn() if b_dsn is not None else None
    b_store = StoreOptions(backend="postgresql", dsn=dsn) if dsn else StoreOptions()
    with QueueManager(b_dir, store_options=b_store) as qb:  # serve B finds its database in b_dir
        qb.create_queue(QUEUE, transactional=True)
    port = free_port()
    procs: list[Proc] = []
    notes: list[str] = []
    try:
        b = serve("serve-b", work, b_dir, B, port, fsyncs, metrics=True)
        procs.append(b)
        a = serve("serve-a", work, a_dir, A, port, fsyncs)
        procs.append(a)
        argv = [sys.executable, str(Path(__file__).resolve()), "--sender-role", str(a_dir),
                "--messages", str(n), "--body-size", str(body_size), "--per-tx", str(per_tx),
                "--senders", str(senders), "--sender-duration", str(duration)]  # fmt: skip
        s = Proc("sender", work, argv, fsyncs, stdin=True)
        procs.append(s)
        assert s.proc.stdout is not None and s.proc.stdin is not None
        if s.proc.stdout.readline().strip() != "ready":
            s.proc.wait(30)
            s.check()
        ca, cb = _ro(a_dir), (_PgCount(dsn) if dsn else _ro(b_dir))
        cpu0 = {p.name: p.cpu_seconds() for p in procs}
        if pg_pids is not None:
            cpu0["postgres"] = setup.cpu_seconds(pg_pids())
        commits0, trips0 = _store_counters(b_dir)
        for p in procs:
            if p.counter is not None:
                p.counter.begin()
        before = setup.device_flushes()
        s.proc.stdin.write("go\n")
        s.proc.stdin.flush()
        # The sender's report arrives on its stdout when it has committed everything.
        report: dict[str, Any] = {}
        out = s.proc.stdout
        reader = threading.Thread(target=lambda: report.update(json.loads(out.readline() or "{}")))
        reader.start()
        t_stored = t_acked = None
        deadline = time.monotonic() + timeout + duration
        samples: list[tuple[float, int]] = []  # (time, messages at B) while polling
        while t_acked is None:
            now = time.monotonic()
            if now > deadline:
                raise TimeoutError(f"transfer not finished after {timeout:.0f} s")
            if duration:
                # What was sent is known once the application has reported.
                n = int(report["sent"]) if report else sys.maxsize
            if t_stored is None:
                row = cb.execute("SELECT msg_count FROM queues WHERE name = ?", (QUEUE,)).fetchone()
                samples.append((now, row[0] if row else 0))
                if row and row[0] >= n:
                    t_stored = now
            if t_stored is not None:
                row = ca.execute(
                    "SELECT coalesce(sum(msg_count), 0) FROM queues WHERE queue_type = 4"
                ).fetchone()
                if row[0] == 0:
                    t_acked = time.monotonic()
                    break
            for p in procs[:2]:
                p.check()
            time.sleep(poll)
        for p in procs:
            if p.counter is not None:
                p.counter.end()
        cpu = {p.name: p.cpu_seconds() - cpu0[p.name] for p in procs}
        if pg_pids is not None:
            cpu["postgres"] = setup.cpu_seconds(pg_pids()) - cpu0["postgres"]
        commits1, trips1 = _store_counters(b_dir)
        after = setup.device_flushes()
        reader.join(60)
        with contextlib.suppress(OSError):
            s.proc.stdin.write("quit\n")
            s.proc.stdin.flush()
        s.proc.wait(60)
        if not report:
            s.check()
            raise RuntimeError("sender did not report")
        ca.close()
        cb.close()
        for p in procs:
            p.stop()
        t0 = report["t0"]
        n = int(report["sent"])
        counts = {p.name: p.fsyncs() for p in procs}
        per_second = _per_second(samples, t0, report["t_committed"])
        notes.extend(_verify(b_dir, n, senders))
        p50, p99, longest = report["tx_ms"]
        notes.append(
            f"sender's transactions: median {p50} ms, 99th percentile {p99} ms, longest {longest} ms"
        )
        if before is not None and after is not None:
            notes.append(f"block-device flushes in the window, whole machine: {after - before}")
        notes.append(f"counters polled every {poll * 1000:.0f} ms")
        if procs[0].counter is not None:
            notes.append(
                "fsyncs counted with "
                + procs[0].counter.method.replace("server process tree", "per process tree")
            )
        return TransferResult(
            n,
            body_size,
            per_tx,
            senders,
            report["t_committed"] - t0,
            t_stored - t0,
            t_acked - t0,
            counts,
            notes,
            cpu,
            duration,
            per_second,
            "postgresql" if dsn else "sqlite",
            commits1 - commits0,
            None if trips0 is None or trips1 is None else trips1 - trips0,
        )
    finally:
        for p in procs:
            p.stop()
        import shutil

        shutil.rmtree(work, ignore_errors=True)


def _per_second(samples: list[tuple[float, int]], t0: float, t_end: float) -> tuple[int, ...]:
    """Messages stored at B in each whole second from ``t0`` while the application sent
    (until ``t_end``), from the polled counter (the last sample at or before each mark)."""
    marks: list[int] = []
    second, last = 1, 0
    for t, count in samples:
        while t - t0 >= second and t0 + second <= t_end:
            marks.append(last)
            second += 1
        last = count
    return tuple(b - a for a, b in zip([0, *marks], marks, strict=False))


def _pg_databases(dsn: str | None) -> tuple[Callable[[], str], Callable[[], list[int]] | None]:
    """A function giving a new database per run on ``dsn``'s server, or on a server
    started for the run (stopped at exit); and, for a server started here, one giving
    its processes (the postmaster and its children)."""
    import atexit
    import itertools

    import psycopg

    server: Any = None
    if dsn is None:
        sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
        from tests.pgserver import PgServer

        server = PgServer(fsync=True)
        server.start()
        atexit.register(server.cleanup)
        dsn = server.dsn()
    admin = dsn
    numbers = itertools.count(1)

    def tree() -> list[int]:
        return setup.process_tree(int((server.datadir / "postmaster.pid").read_text().split()[0]))

    def new() -> str:
        name = f"bench_transfer_{os.getpid()}_{next(numbers)}"
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
            conn.execute(f'CREATE DATABASE "{name}"')
        return admin.rsplit("/", 1)[0] + "/" + name

    return new, (tree if server is not None else None)


def _verify(b_dir: Path, n: int, senders: int) -> list[str]:
    """B holds every message once, in each sender's order; returns notes."""
    from openmsmq.qm import QueueManager

    with QueueManager(b_dir) as qb:
        got = qb.peek_range(QUEUE, 0, n + 1)
    expected = [0] * senders
    bad = 0
    for m in got:
        k, seq = int.from_bytes(m.body[:4], "big"), int.from_bytes(m.body[4:12], "big")
        if k >= senders or seq != expected[k]:
            bad += 1
        else:
            expected[k] = seq + 1
    if bad or len(got) != n:
        return [f"CHECK FAILED: {len(got)} messages at B, {bad} out of order or duplicated"]
    return [f"checked: all {n} at B exactly once, in each sender's order"]


# --------------------------------------------------------------------------- report


def median_run(n: int, *args: Any, **kw: Any) -> tuple[TransferResult, list[TransferResult]]:
    """``n`` runs of :func:`run_openmsmq`; the median one (by end-to-end msgs/s) and all."""
    runs = [run_openmsmq(*args, **kw) for _ in range(max(1, n))]
    ranked = sorted(runs, key=lambda r: r.msgs_per_s)
    return ranked[(len(ranked) - 1) // 2], runs


def format_transfer(r: TransferResult, runs: list[TransferResult] | None = None) -> str:
    """The figures of one openmsmq run (the median of ``runs`` when there are several)."""
    if runs is not None and len(runs) > 1:
        r.notes.append(f"runs: {', '.join(f'{x.msgs_per_s:,.0f}' for x in runs)} msgs/s (median shown)")
    tot = r.fsyncs_total
    per = "" if tot is None else f" = {tot / r.messages:.4f} per message"
    where = " (B on PostgreSQL)" if r.store == "postgresql" else " (B on SQLite)"
    if r.duration:
        steady = sorted(r.per_second)
        spread = (
            f"; stored at B per second while sending: median {steady[len(steady) // 2]:,},"
            f" lowest {steady[0]:,}, highest {steady[-1]:,}"
            if steady
            else ""
        )
        head = (
            f"openmsmq A->B{where} sustained ({r.per_tx}/tx, {r.duration:g} s of sending):"
            f" {r.msgs_per_s:,.0f} msgs/s first send to last stored at B ({r.messages:,} x {r.body_size} B)"
            f"{spread}\n"
            f"    OrderAck tail apart: last OrderAck {r.acked_s - r.stored_s:.2f} s after the last message"
            f" was stored at B (end to end {r.messages / r.acked_s:,.0f} msgs/s)\n"
        )
    else:
        head = (
            f"openmsmq A->B{where} ({r.per_tx}/tx, {r.senders} sender thread{'s' if r.senders > 1 else ''}):"
            f" {r.msgs_per_s:,.0f} msgs/s end to end  ({r.messages:,} x {r.body_size} B,"
            f" last OrderAck at {r.acked_s:.2f} s)\n"
        )
    parts = ", ".join(f"{k} {'n/a' if v is None else f'{v:,}'}" for k, v in r.fsyncs.items())
    cpu = ", ".join(f"{k} {v / r.messages * 1e6:.1f} us" for k, v in r.cpu.items())
    cpu += f"; all together {sum(r.cpu.values()) / r.messages * 1e6:.1f} us"
    commits = ""
    if r.b_commits:
        commits = (
            f"    B's store: {r.b_commits:,} commits ({r.messages / r.b_commits:,.1f} messages per commit)"
        )
        if r.b_round_trips is not None:
            commits += (
                f", {r.b_round_trips / r.b_commits:.2f} round trips per commit"
                f" ({r.b_round_trips / r.messages:.4f} per message)"
            )
        commits += "\n"
    return (
        head + f"    all committed at A {r.committed_s:.2f} s ({r.messages / r.committed_s:,.0f}/s),"
        f" all stored at B {r.stored_s:.2f} s ({r.messages / r.stored_s:,.0f}/s),"
        f" last OrderAck {r.acked_s:.2f} s\n"
        f"    fsyncs: {'n/a' if tot is None else f'{tot:,}'}{per} ({parts})\n"
        f"    CPU per message (user+system, all threads): {cpu}\n"
        f"{commits}"
        f"    {'; '.join(r.notes)}"
    )


def main(argv: list[str] | None = None) -> int:
    """Run openmsmq (and the peers) and print every figure with the command line."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--body-size", type=int, default=256)
    ap.add_argument("--per-tx", type=int, default=100)
    ap.add_argument("--senders", type=int, default=1, help="sender threads in the application process")
    ap.add_argument("--single", type=int, default=0, help="also run N messages at 1 per transaction")
    ap.add_argument("--no-peers", action="store_true", help="skip RabbitMQ and Redis")
    ap.add_argument("--fsyncs", choices=["auto", "perf", "strace", "none"], default="auto")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds allowed per run")
    ap.add_argument("--poll", type=float, default=0.005, help="seconds between counter reads")
    ap.add_argument("--repeat", type=int, default=3, help="runs of the main figure (the median is shown)")
    ap.add_argument(
        "--duration",
        type=float,
        default=0.0,
        help="sustained: the application sends for this many seconds (--messages is then ignored);"
        " the peers move as many messages as openmsmq did",
    )
    ap.add_argument("--sender-role", help=argparse.SUPPRESS)
    ap.add_argument("--sender-duration", type=float, default=0.0, help=argparse.SUPPRESS)
    ap.add_argument("--disk-flushes", type=float, help=setup.DISK_FLUSHES_HELP)
    ap.add_argument(
        "--store", choices=("sqlite", "postgresql"), default="sqlite",
        help="B's store; postgresql: the runs again with B on PostgreSQL (a server started for the run,"
        " fsync on, or --dsn), beside those on SQLite",
    )  # fmt: skip
    ap.add_argument("--dsn", default=None, help="with --store postgresql: a server to use (CREATEDB)")
    args = ap.parse_args(argv)
    if args.disk_flushes and not args.sender_role:
        setup.run_on_slow_disk(args.disk_flushes, argv)
    if args.sender_role:
        sender_main(
            args.sender_role, args.messages, args.body_size, args.per_tx, args.senders, args.sender_duration
        )
        return 0
    if args.body_size < 12:
        ap.error("--body-size must be at least 12 (the body carries sender and sequence numbers)")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    import peers

    command = " ".join([COMMAND, *map(shlex.quote, sys.argv[1:] if argv is None else argv)])
    settings = " ".join(
        f"{k}={v}"
        for k, v in sorted(os.environ.items())
        if k.startswith("OPENMSMQ_") and not k.startswith("OPENMSMQ_BENCH_")
    )
    print(f"# {settings + ' ' if settings else ''}{command}")
    print(peers.machine_header(), flush=True)
    from openmsmq.config import load_config

    # What the serve processes run with (the environment above included): the session
    # window moves the figure (docs/transfer.md, "Window size").
    protocol = load_config(None, dict(os.environ), {}).config.protocol
    print(f"# session window {protocol.window_size} packets (protocol.window_size)", flush=True)
    base: dict[str, Any] = dict(fsyncs=args.fsyncs, timeout=args.timeout, poll=args.poll)
    stores: list[tuple[str, dict[str, Any]]] = [("SQLite", base)]
    if args.store == "postgresql":
        new_db, pg_pids = _pg_databases(args.dsn)
        stores.append(("PostgreSQL", dict(base, b_dsn=new_db, pg_pids=pg_pids)))
        print(
            "# B's store: SQLite, then PostgreSQL"
            f" ({'--dsn' if args.dsn else 'a server started for the run, fsync on'})"
        )
    mains: list[tuple[str, TransferResult]] = []
    for label, kw in stores:
        main_run, runs = median_run(
            args.repeat,
            args.messages,
            args.body_size,
            args.per_tx,
            args.senders,
            duration=args.duration,
            **kw,
        )
        mains.append((label, main_run))
        print(format_transfer(main_run, runs), flush=True)
        if args.single:
            threads = args.senders if args.senders > 1 else 8
            single = run_openmsmq(args.single, args.body_size, 1, threads, **kw)
            print(format_transfer(single), flush=True)
    main_run = mains[0][1]
    if args.no_peers:
        print("# peers skipped (--no-peers)")
        print(f"# load after: {setup.load_average()}")
        return 0
    results = []
    for name, run in (("RabbitMQ", peers.run_rabbitmq), ("Redis", peers.run_redis)):
        try:
            r = run(
                main_run.messages,
                args.body_size,
                fsyncs=args.fsyncs,
                timeout=args.timeout + args.duration * 10,
                repeat=args.repeat,
            )
        except Exception as exc:  # a peer that cannot be installed or started is skipped
            print(f"# {name} skipped: {type(exc).__name__}: {str(exc).strip()[:500]}", flush=True)
            continue
        results.append(r)
        print(peers.format_result(r), flush=True)
    for r in results:
        for label, m in mains:
            print(f"# ratio openmsmq (B on {label}) / {r.name.split()[0]}: {m.msgs_per_s / r.msgs_per_s:.2f}")
    print(f"# load after: {setup.load_average()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
