"""Remote-read throughput: the gRPC service and client against one QueueManager, with the
same operations done in-process on that QM in the same run for the ratio.

    .venv/bin/python bench/remote.py [--messages 50000] [--single 2000] [--consumers 4]
                                     [--loop 4000] [--loop-clients 1,8] [--loop-apis sync,asyncio]
                                     [--alternate 2] [--rabbit-prefetch 1,100] [--no-peers]
                                     [--no-batched]

Client work runs in separate processes (spawned; the server runs in this one). Prints
msgs/s for remote send (batches of 500 in one transaction each, and 1 message per
call), remote transactional receive + commit (begin, Read of N in the transaction,
commit) with N = 500 and N = 1, the two-phase variant (StartReceive of 500, one batched
EndReceive ACK, commit), the same with several concurrent consumers, and the in-process
receive + commit rate of the QM itself.

The consumer loop users write (``with conn.transaction() as tx: m = q.receive(tx=tx)``,
one message per transaction) runs with ``--loop-clients`` client processes through the
client API (sync and asyncio), each figure from ``--loop`` messages of 256 bytes, alternating
the unary path (``?steps=0``: one gRPC call per operation, no message taken ahead) and the
step stream with the next receive begun ahead by each commit (docs/remote.md); then
RabbitMQ's consumer (durable quorum queue, persistent messages, basic_consume with one
manual basic_ack per message, prefetch ``--rabbit-prefetch``) in the same run on a private
broker (bench/peers.py's). Every run is checked (each message received exactly once,
nothing left in the queue); a run that fails the check prints CHECK FAILED and no figure,
and the script exits non-zero. RabbitMQ runs first and is stopped before openmsmq runs; if
it cannot start the script says why and stops before measuring anything.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _consumer_loop as loop
import _peer_setup as setup
from peers import machine_header

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


def fill_numbered(qm: QueueManager, n: int) -> None:
    """``n`` messages whose bodies carry their sequence number (the loop's check)."""
    for i in range(0, n, 5000):
        with qm.begin() as t:
            qm.send_many(QUEUE, [MessageRecord(body=loop.body(j)) for j in range(i, min(n, i + 5000))], t)


#: The client paths the loop alternates: the unary calls (as clients did before the step
#: stream), and the step stream with the next receive begun ahead by each commit.
PATHS = {"unary calls (?steps=0)": "?steps=0", "step stream + receive ahead": ""}


def loop_rows(
    qm: QueueManager, target: str, n: int, clients: list[int], apis: list[str], alternate: int
) -> tuple[list[tuple[str, float]], list[str]]:
    """The one-message-per-transaction loop, each path ``alternate`` times in turn."""
    rows: list[tuple[str, float]] = []
    failed: list[str] = []
    for api in apis:
        for k in clients:
            for _ in range(alternate):
                for path, query in PATHS.items():
                    name = f"loop {api}, {k} client{'s' if k > 1 else ''}, {path}"
                    fill_numbered(qm, n)
                    run = loop.run_clients(loop.WORKERS[api], (target + query, QUEUE), k)
                    problems = run.problems(n, qm.get_queue(QUEUE).msg_count)
                    if problems:
                        failed.append(f"CHECK FAILED: {name}: {'; '.join(problems)}")
                        print(failed[-1], flush=True)
                        qm.purge_queue(qm.open_queue(QUEUE))
                        continue
                    rows.append((name, n / run.seconds))
                    print(f"{name:<58} {n / run.seconds:>10,.0f} msgs/s", flush=True)
    return rows, failed


def rabbit_rows(
    n: int, clients: list[int], prefetches: list[int]
) -> tuple[list[tuple[str, float]], list[str]]:
    """RabbitMQ's consumer, one manual ack per message, on a private broker."""
    try:
        setup.ensure_debian_packages(["rabbitmq-server"])
        setup.ensure_python_clients()
    except Exception as exc:
        raise SystemExit(f"RabbitMQ cannot be installed, so nothing is measured: {exc}") from None
    server = setup.RabbitMQServer(None, "none", setup._print)
    rows: list[tuple[str, float]] = []
    failed: list[str] = []
    try:
        try:
            server.start(180.0)
        except Exception as exc:
            raise SystemExit(f"RabbitMQ cannot start, so nothing is measured: {exc}") from None
        version = setup.debian_version("rabbitmq-server").split(":")[-1].rsplit("-", 1)[0]
        for k in clients:
            for prefetch in prefetches:
                name = f"RabbitMQ {version} quorum, {k} consumer{'s' if k > 1 else ''}, prefetch {prefetch}"
                run, left = loop.rabbit_run(server.port, f"bench-loop-{k}-{prefetch}", n, k, prefetch)
                problems = run.problems(n, left)
                if problems:
                    failed.append(f"CHECK FAILED: {name}: {'; '.join(problems)}")
                    print(failed[-1], flush=True)
                    continue
                rows.append((name, n / run.seconds))
                print(f"{name:<58} {n / run.seconds:>10,.0f} msgs/s", flush=True)
    finally:
        server.stop()
        server.cleanup()
    return rows, failed


def ratios(loop_results: list[tuple[str, float]]) -> list[str]:
    """step stream / unary for each (api, clients), from the alternated runs in order."""
    old, new = PATHS
    out = []
    groups: dict[str, dict[str, list[float]]] = {}
    for name, value in loop_results:
        head, path = name.rsplit(", ", 1)
        groups.setdefault(head, {}).setdefault(path, []).append(value)
    for head, by_path in groups.items():
        a, b = by_path.get(old, []), by_path.get(new, [])
        pairs = [f"{y / x:.2f}" for x, y in zip(a, b, strict=False)]
        if pairs:
            out.append(f"# {head}: step stream / unary, per alternation: {', '.join(pairs)}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=50_000, help="messages for the batched runs")
    ap.add_argument("--single", type=int, default=2_000, help="messages for the one-per-call runs")
    ap.add_argument("--consumers", type=int, default=4, help="concurrent remote consumers")
    ap.add_argument(
        "--loop", type=int, default=4_000, help="messages per run of the one-per-transaction loop"
    )
    ap.add_argument("--loop-clients", default="1,8", help="client processes of the loop (comma list)")
    ap.add_argument("--loop-apis", default="sync,asyncio", help="client APIs of the loop: sync, asyncio")
    ap.add_argument("--alternate", type=int, default=2, help="runs of each loop path, alternated")
    ap.add_argument("--rabbit-prefetch", default="1,100", help="RabbitMQ consumer prefetch counts")
    ap.add_argument("--no-peers", action="store_true", help="skip RabbitMQ")
    ap.add_argument("--no-batched", action="store_true", help="only the one-per-transaction loop")
    args = ap.parse_args()
    n, single, k = args.messages, args.single, args.consumers
    n -= n % (500 * k)
    clients = [int(c) for c in args.loop_clients.split(",") if c]
    apis = [a for a in args.loop_apis.split(",") if a]
    print("$ .venv/bin/python bench/remote.py " + shlex.join(sys.argv[1:]))
    print(machine())
    print(machine_header())
    rows: list[tuple[str, float]] = []
    peer_rows: list[tuple[str, float]] = []
    failed: list[str] = []
    if not args.no_peers:
        peer_rows, failed = rabbit_rows(args.loop, clients, [int(p) for p in args.rabbit_prefetch.split(",")])
    loop_results: list[tuple[str, float]] = []
    local = 0.0
    with tempfile.TemporaryDirectory() as d, QueueManager(Path(d)) as qm:
        qm.create_queue(QUEUE, transactional=True)
        with RemoteServer(qm, port=0) as srv:
            srv.start()
            tgt = srv.target
            if args.loop:
                loop_results, more = loop_rows(qm, tgt, args.loop, clients, apis, args.alternate)
                failed += more
            if not args.no_batched:
                rows += batched_rows(qm, tgt, n, single, k)
        if not args.no_batched:
            fill(qm, n)
            local = rate(n, lambda: local_receive(qm, n, 500))
    width = max([len(name) for name, _ in rows + loop_results + peer_rows] + [44])
    for name, value in rows + loop_results + peer_rows:
        print(f"{name:<{width}}  {value:>10,.0f} msgs/s")
    if local:
        print(f"{'in-process QM tx receive + commit, batch 500':<{width}}  {local:>10,.0f} msgs/s")
        print(f"remote ({k} clients) / in-process (batch 500): {rows[2][1] / local:.2f}")
    for line in ratios(loop_results):
        print(line)
    new = list(PATHS)[1]
    for peer, value in peer_rows:
        mine = [v for name, v in loop_results if name.startswith("loop sync, ") and name.endswith(new)
                and f", {peer.split(', ')[1].split()[0]} client" in name]  # fmt: skip
        if mine:
            print(f"# loop sync, step stream / {peer}: {sorted(mine)[len(mine) // 2] / value:.2f}")
    print(machine())
    if failed:
        print("\n".join(failed))
        raise SystemExit(1)


def batched_rows(qm: QueueManager, tgt: str, n: int, single: int, k: int) -> list[tuple[str, float]]:
    """The batched rows and the one-per-call rows (unchanged since before the loop rows)."""
    rows: list[tuple[str, float]] = []
    rows.append(("remote send, 500 per call, 1 client", in_processes(tgt, "send", n, 500, 1)))
    rows.append(("remote tx receive + commit, batch 500, 1 client", in_processes(tgt, "read", n, 500, 1)))
    fill(qm, n)
    rows.append((f"remote tx receive + commit, batch 500, {k} clients", in_processes(tgt, "read", n, 500, k)))
    fill(qm, n)
    rows.append(
        ("remote two-phase tx receive + ACK + commit, batch 500", in_processes(tgt, "two-phase", n, 500, 1))
    )
    rows.append(("remote send, 1 per call, 1 client", in_processes(tgt, "send", single, 1, 1)))
    rows.append(("remote tx receive + commit, batch 1, 1 client", in_processes(tgt, "read", single, 1, 1)))
    fill(qm, single)
    rows.append(
        (f"remote tx receive + commit, batch 1, {k} clients", in_processes(tgt, "read", single, 1, k))
    )
    return rows


if __name__ == "__main__":
    main()
