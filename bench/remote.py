"""Remote-read throughput: the gRPC service and client against one QueueManager, with the
same operations done in-process on that QM in the same run for the ratio.

    .venv/bin/python bench/remote.py [--messages 50000] [--single 2000] [--consumers 4]

Client work runs in separate processes (spawned; the server runs in this one). Prints
msgs/s for remote send (batches of 500 in one transaction each, and 1 message per
call), remote transactional receive + commit (begin, Read of N in the transaction,
commit) with N = 500 and N = 1, the two-phase variant (StartReceive of 500, one batched
EndReceive ACK, commit), the same with several concurrent consumers, and the in-process
receive + commit rate of the QM itself.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shlex
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from openmsmq.client import SINGLE_MESSAGE, Access, Ack, OutgoingMessage
from openmsmq.client.grpc_transport import GrpcTransport
from openmsmq.qm import MessageRecord, QueueManager
from openmsmq.remote.server import RemoteServer

BODY = bytes(256)
QUEUE = "private$\\bench"


def fill(qm: QueueManager, n: int) -> None:
    for i in range(0, n, 5000):
        with qm.begin() as t:
            qm.send_many(QUEUE, [MessageRecord(body=BODY) for _ in range(min(5000, n - i))], t)


def rate(n: int, fn: Callable[[], int]) -> float:
    start = time.perf_counter()
    done = fn()
    elapsed = time.perf_counter() - start
    assert done == n, (done, n)
    return n / elapsed


def remote_send(t: GrpcTransport, n: int, batch: int) -> int:
    h = t.open_queue(QUEUE, Access.SEND)
    msgs = [OutgoingMessage(body=BODY)] * batch
    for _ in range(n // batch):
        t.send(h, msgs, tx=SINGLE_MESSAGE)
    t.close_queue(h)
    return n // batch * batch


def remote_receive(t: GrpcTransport, n: int, batch: int, two_phase: bool = False) -> int:
    h = t.open_queue(QUEUE, Access.RECEIVE)
    got = 0
    while got < n:
        tx = t.begin()
        if two_phase:
            pending = t.start_receive_many(h, min(batch, n - got), tx=tx)
            t.end_receive_many(h, [p.request_id for p in pending], Ack.ACK)
            got += len(pending)
        else:
            got += len(t.read(h, tx=tx, max_count=min(batch, n - got)))
        t.commit(tx)
    t.close_queue(h)
    return got


def _worker(target: str, job: str, n: int, batch: int, go: Any, done: Any) -> None:
    """A client process: connect, wait for the start signal, do ``n`` messages of ``job``."""
    t = GrpcTransport(target)
    try:
        go.wait()
        if job == "send":
            count = remote_send(t, n, batch)
        else:
            count = remote_receive(t, n, batch, two_phase=job == "two-phase")
        done.put(count)
    finally:
        t.close()


def in_processes(target: str, job: str, n: int, batch: int, processes: int) -> float:
    """msgs/s of ``processes`` client processes sharing ``n`` messages (clients are
    separate processes, as in a deployment: no GIL shared with the server)."""
    ctx = mp.get_context("spawn")
    go, done = ctx.Event(), ctx.Queue()
    share = n // processes
    procs = [
        ctx.Process(target=_worker, args=(target, job, share, batch, go, done)) for _ in range(processes)
    ]
    for p in procs:
        p.start()
    time.sleep(2.0)  # let every client connect before the clock starts
    start = time.perf_counter()
    go.set()
    total: int = sum(done.get(timeout=600) for _ in procs)
    elapsed = time.perf_counter() - start
    for p in procs:
        p.join()
    assert total == share * processes, (total, n)
    return total / elapsed


def local_receive(qm: QueueManager, n: int, batch: int) -> int:
    h = qm.open_queue(QUEUE)
    got = 0
    while got < n:
        with qm.begin() as t:
            got += len(qm.receive_many(h, min(batch, n - got), tx=t))
    return got


def machine() -> str:
    """Date, cores, CPU model and load average: the figures mean little without them."""
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        load = Path("/proc/loadavg").read_text().split()[:3]
    except OSError:
        load = ["?"] * 3
    now = time.strftime("%Y-%m-%d %H:%M:%S %Z")
    return f"# {now}, nproc {os.cpu_count()}, {model}, load average {' '.join(load)}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=50_000, help="messages for the batched runs")
    ap.add_argument("--single", type=int, default=2_000, help="messages for the one-per-call runs")
    ap.add_argument("--consumers", type=int, default=4, help="concurrent remote consumers")
    args = ap.parse_args()
    n, single, k = args.messages, args.single, args.consumers
    n -= n % (500 * k)
    print("$ .venv/bin/python bench/remote.py " + shlex.join(sys.argv[1:]))
    print(machine())
    with tempfile.TemporaryDirectory() as d, QueueManager(Path(d)) as qm:
        qm.create_queue(QUEUE, transactional=True)
        rows: list[tuple[str, float]] = []
        with RemoteServer(qm, port=0) as srv:
            srv.start()
            tgt = srv.target
            rows.append(("remote send, 500 per call, 1 client", in_processes(tgt, "send", n, 500, 1)))
            rows.append(
                ("remote tx receive + commit, batch 500, 1 client", in_processes(tgt, "read", n, 500, 1))
            )
            fill(qm, n)
            rows.append(
                (f"remote tx receive + commit, batch 500, {k} clients", in_processes(tgt, "read", n, 500, k))
            )
            fill(qm, n)
            rows.append(
                ("remote two-phase tx receive + ACK + commit, batch 500",
                 in_processes(tgt, "two-phase", n, 500, 1))
            )  # fmt: skip
            rows.append(("remote send, 1 per call, 1 client", in_processes(tgt, "send", single, 1, 1)))
            rows.append(
                ("remote tx receive + commit, batch 1, 1 client", in_processes(tgt, "read", single, 1, 1))
            )
            fill(qm, single)
            rows.append(
                (f"remote tx receive + commit, batch 1, {k} clients", in_processes(tgt, "read", single, 1, k))
            )
        fill(qm, n)
        local = rate(n, lambda: local_receive(qm, n, 500))
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value:>10,.0f} msgs/s")
    print(f"{'in-process QM tx receive + commit, batch 500':<{width}}  {local:>10,.0f} msgs/s")
    batched = rows[2][1]
    print(f"remote ({k} clients) / in-process (batch 500): {batched / local:.2f}")
    print(machine())


if __name__ == "__main__":
    main()
