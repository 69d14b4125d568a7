"""The web console's cost: the overview of a large queue manager, and browsers watching a transfer.

1. A QM with ``--queues`` private queues holding ``--messages`` messages in all is served
   with its console; the overview page is fetched ``--fetches`` times over one kept-alive
   connection: time to first byte and to the complete page (median and worst).
2. Two QMs (127.0.0.1 → 127.0.0.2): ``--transfer`` messages committed in A's outgoing
   queue while A is stopped, then A is started and the time until B holds them all is the
   transfer time (measured from when every watcher streams, scaled to the whole); once
   with no browser, once with ``--watchers`` clients that load the overview and then
   read its live event stream (as a browser on the overview does),
   alternating ``--rounds`` times. Throughput with watchers is given as a share of the one
   without.

    .venv/bin/python bench/console.py                       # 1,000 queues, 1,000,000 messages
    .venv/bin/python bench/console.py --messages 100000 --transfer 50000

Aims: the overview complete in under 300 ms; throughput with 5 watchers within 5 % of none.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from openmsmq.qm.manager import QueueManager
from openmsmq.store.records import MessageRecord

A, B = "127.0.0.1", "127.0.0.2"


def free_port(*hosts: str) -> int:
    for _ in range(50):
        with socket.socket() as s:
            s.bind((hosts[0], 0))
            port = int(s.getsockname()[1])
        try:
            for h in hosts[1:]:
                with socket.socket() as s2:
                    s2.bind((h, port))
            return port
        except OSError:
            continue
    raise RuntimeError("no free port")


def serve(data: Path, address: str, port: int, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    env = dict(os.environ, OPENMSMQ_PROTOCOL_MAXIMUM_ORDER_ACK_DELAY="1",
               OPENMSMQ_MQQB_CONNECT_BACKOFF_MIN="0.05", OPENMSMQ_MQQB_CONNECT_BACKOFF_MAX="0.5")  # fmt: skip
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "openmsmq.cli.serve", "--data-dir", str(data), "--listen", address,
             "--port", str(port), "--remote-port", "0", "--metrics-port", "0", *extra],
            stdout=out, stderr=out, env=env,
        )  # fmt: skip
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(log.read_text()[-2000:])
        runtime = data / "runtime.json"
        if runtime.exists():
            try:
                if json.loads(runtime.read_text()).get("pid") == proc.pid:
                    return proc
            except ValueError:
                pass
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("serve did not start")


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def fill(data: Path, queues: int, messages: int, per_tx: int = 5000) -> None:
    """``queues`` private transactional queues and ``messages`` 100-byte messages spread over them."""
    with QueueManager(data) as qm:
        names = [f"private$\\q{i:04d}" for i in range(queues)]
        for name in names:
            qm.create_queue(name, transactional=True)
        body = b"x" * 100
        sent = 0
        while sent < messages:
            n = min(per_tx, messages - sent)
            name = names[(sent // per_tx) % queues]
            tx = qm.begin()
            qm.send_many(name, [MessageRecord(body=body, label="bench") for _ in range(n)], tx)
            tx.commit()
            sent += n


def session(host: str, port: int) -> tuple[http.client.HTTPConnection, str]:
    """A kept-alive connection and the session cookie (no tokens file: loopback)."""
    conn = http.client.HTTPConnection(host, port, timeout=60)
    conn.request("GET", "/")
    r = conn.getresponse()
    r.read()
    cookie = r.getheader("set-cookie", "").split(";")[0]
    return conn, cookie


def time_overview(url: str, fetches: int) -> tuple[list[float], list[float], int]:
    host, port = url.removeprefix("http://").split(":")
    conn, cookie = session(host, int(port))
    firsts, wholes, size = [], [], 0
    for _ in range(fetches):
        start = time.perf_counter()
        conn.request("GET", "/", headers={"Cookie": cookie})
        r = conn.getresponse()
        r.read(1)
        firsts.append(time.perf_counter() - start)
        size = len(r.read()) + 1
        wholes.append(time.perf_counter() - start)
        assert r.status == 200, r.status
    conn.close()
    return firsts, wholes, size


class Watcher(threading.Thread):
    """A browser on the overview: loads it, then reads its event stream until told to stop."""

    def __init__(self, url: str, done: threading.Event) -> None:
        super().__init__(daemon=True)
        self.url, self.done, self.events = url, done, 0

    def run(self) -> None:
        host, port = self.url.removeprefix("http://").split(":")
        conn, cookie = session(host, int(port))
        conn.request("GET", "/", headers={"Cookie": cookie})
        conn.getresponse().read()
        conn.request("GET", "/events", headers={"Cookie": cookie})
        r = conn.getresponse()
        while not self.done.is_set():
            line = r.fp.readline()
            if not line:
                return
            if line.startswith(b"data:"):
                self.events += 1
        conn.close()


def count_in(data: Path, queue: str) -> int:
    db = sqlite3.connect(f"file:{data / 'openmsmq.db'}?mode=ro", uri=True, timeout=30)
    try:
        row = db.execute("SELECT msg_count FROM queues WHERE display_name = ?", (queue,)).fetchone()
        return int(row[0]) if row else 0
    finally:
        db.close()


def transfer_once(work: Path, n: int, watchers: int) -> tuple[float, int]:
    """Seconds to move ``n`` messages A → B with ``watchers`` watching A's overview."""
    a_dir, b_dir = work / "a", work / "b"
    port = free_port(A, B)
    dest = f"DIRECT=TCP:{B}\\private$\\bench"
    with QueueManager(b_dir, computer_name="qmb") as qm:
        qm.create_queue("private$\\bench", transactional=True)
    with QueueManager(a_dir, computer_name="qma") as qm:
        body = b"y" * 256
        for at in range(0, n, 5000):
            tx = qm.begin()
            qm.send_many(dest, [MessageRecord(body=body) for _ in range(min(5000, n - at))], tx)
            tx.commit()
    b = serve(b_dir, B, port, work / "b.log")
    a = None
    done = threading.Event()
    try:
        a = serve(a_dir, A, port, work / "a.log", "--console-port", "0")
        url = json.loads((a_dir / "runtime.json").read_text())["console"]
        threads = [Watcher(url, done) for _ in range(watchers)]
        for t in threads:
            t.start()
        # Measured from when every watcher streams (a browser left on the overview), over
        # what is still to move then; without watchers from the same moment after the start.
        began, deadline = time.monotonic(), time.monotonic() + 60
        while any(t.events == 0 for t in threads) and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(max(0.0, 1.0 - (time.monotonic() - began)))
        start, first = time.monotonic(), count_in(b_dir, "private$\\bench")
        while count_in(b_dir, "private$\\bench") < n:
            if time.monotonic() - start > 600:
                raise RuntimeError("transfer did not finish in 10 minutes")
            time.sleep(0.02)
        seconds = (time.monotonic() - start) * n / max(1, n - first)  # scaled to the whole
        events = sum(t.events for t in threads)
        return seconds, events
    finally:
        done.set()
        if a is not None:
            stop(a)
        stop(b)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--queues", type=int, default=1000)
    p.add_argument("--messages", type=int, default=1_000_000)
    p.add_argument("--fetches", type=int, default=20)
    p.add_argument("--transfer", type=int, default=100_000)
    p.add_argument("--watchers", type=int, default=5)
    p.add_argument("--rounds", type=int, default=2)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="openmsmq-bench-console-") as tmp:
        root = Path(tmp)
        print(f"filling a QM: {args.queues} queues, {args.messages} messages ...", flush=True)
        started = time.monotonic()
        fill(root / "big", args.queues, args.messages)
        print(f"  filled in {time.monotonic() - started:.1f} s", flush=True)
        proc = serve(root / "big", A, free_port(A), root / "big.log", "--console-port", "0")
        try:
            url = json.loads((root / "big" / "runtime.json").read_text())["console"]
            firsts, wholes, size = time_overview(url, args.fetches)
        finally:
            stop(proc)
        ms = 1000.0
        print(f"overview ({size} bytes), {args.fetches} fetches:"
              f" first byte median {statistics.median(firsts) * ms:.1f} ms"
              f" (max {max(firsts) * ms:.1f}), complete median {statistics.median(wholes) * ms:.1f} ms"
              f" (max {max(wholes) * ms:.1f}); aim < 300 ms")  # fmt: skip
        runs: dict[int, list[float]] = {0: [], args.watchers: []}  # transfer seconds by watchers
        for r in range(args.rounds):
            order = (0, args.watchers) if r % 2 == 0 else (args.watchers, 0)
            for w in order:
                work = root / f"t{r}-{w}"
                work.mkdir()
                seconds, events = transfer_once(work, args.transfer, w)
                runs[w].append(seconds)
                rate = args.transfer / seconds
                print(f"  round {r + 1}, {w} watchers: {args.transfer} messages in {seconds:.2f} s"
                      f" ({rate:,.0f} msgs/s; {events} events read)", flush=True)  # fmt: skip
        none = args.transfer / statistics.median(runs[0])
        watched = args.transfer / statistics.median(runs[args.watchers])
        print(f"transfer: {none:,.0f} msgs/s without watchers, {watched:,.0f} with {args.watchers}"
              f" ({watched / none * 100:.1f} %); aim >= 95 %")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
