"""Where a remote one-message-per-transaction consumer spends its time.

    .venv/bin/python bench/remote_breakdown.py [--messages 2000] [--clients 1] [--paths unary,steps,ahead]
        [--stream-workers 256[,0]]

For each client path (``unary``: one gRPC call per operation, ``?steps=0``; ``steps``: the
step stream without messages taken ahead, ``?prefetch=0``; ``ahead``: the step stream
with the next receive begun ahead by each commit, the default) it runs ``--clients``
client processes of the loop users write (``with conn.transaction() as tx:
q.receive(tx=tx)``) over ``--messages`` messages, and prints:

* round trips per transaction, by kind (unary rpcs and step-stream requests, counted in
  the clients), the clients' median time per receive and per commit call and their CPU
  per transaction (the client processes, all threads: gRPC's included; and the calling
  thread's alone: the client library and the reply's decoding, gRPC's threads excluded);
* the server's side: CPU seconds of the server process per transaction (this process
  runs only the service; its main thread sleeps), of which the thread CPU spent running
  step requests (ops, session lookup, replies built), their commits and their receives;
  the store's COMMITs (fsyncs) per
  transaction and their median duration, and the median time a remote commit spends
  in the queue manager beyond its COMMIT (waiting for a batch leader, or for the group
  commit's wait for committers of the previous batch).

``--stream-workers``: the server's ``stream_workers`` (a comma list, each run in turn per
path): 0 runs step requests in the shared worker pools instead of a thread per stream.
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing as mp
import os
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _consumer_loop as loop
from peers import machine_header

from openmsmq.qm import MessageRecord, QueueManager
from openmsmq.remote import steps
from openmsmq.remote.server import RemoteServer

QUEUE = "private$\\bench"
PATHS = {"unary": "?steps=0", "steps": "?prefetch=0", "ahead": ""}
_RPCS = ("Read", "StartReceive", "EndReceive", "Commit", "Abort", "BeginTransaction")


class _Commits:
    """Records each group commit of the store: (operations, seconds)."""

    def __init__(self) -> None:
        self.batches: list[tuple[int, float]] = []

    def observe_commit(self, ops: int, seconds: float) -> None:
        self.batches.append((ops, seconds))

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None  # every other metric: not recorded


def _client(target: str, n: int, go: Any, out: Any) -> None:
    """The loop, with the transport's calls counted and timed."""
    import openmsmq
    from openmsmq.client import Access
    from openmsmq.client.grpc_steps import StepStream
    from openmsmq.errors import IOTimeoutError

    counts: collections.Counter[str] = collections.Counter()
    original = StepStream.exchange

    def exchange(self: StepStream, ops: list[Any]) -> list[Any]:
        counts["stream: " + " + ".join(str(o.WhichOneof("op")) for o in ops)] += 1
        return original(self, ops)

    StepStream.exchange = exchange  # type: ignore[method-assign]
    conn = openmsmq.connect(target)
    t: Any = conn.transport
    for name in _RPCS:
        rpc = getattr(t._stub, name)

        def counted(request: Any, metadata: Any = None, rpc: Any = rpc, name: str = name) -> Any:
            counts["unary " + name] += 1
            return rpc(request, metadata=metadata)

        setattr(t._stub, name, counted)
    q = conn.open_queue(QUEUE, Access.RECEIVE)
    receive_s: list[float] = []
    commit_s: list[float] = []
    done = 0
    go.wait()
    cpu0 = os.times()
    caller0 = time.thread_time()
    while done < n:
        tx = conn.transaction()
        a = time.perf_counter()
        try:
            q.receive(timeout=loop.IDLE, tx=tx)
        except IOTimeoutError:
            tx.abort()
            break
        b = time.perf_counter()
        tx.commit()
        c = time.perf_counter()
        receive_s.append(b - a)
        commit_s.append(c - b)
        done += 1
    cpu1 = os.times()
    caller = time.thread_time() - caller0
    conn.close()
    cpu = cpu1.user + cpu1.system - cpu0.user - cpu0.system
    out.put((done, dict(counts), receive_s, commit_s, cpu, caller))


def run_path(qm: QueueManager, srv: RemoteServer, path: str, n: int, clients: int, sink: _Commits) -> str:
    for i in range(0, n, 5000):
        with qm.begin() as t:
            qm.send_many(QUEUE, [MessageRecord(body=bytes(256)) for _ in range(min(5000, n - i))], t)
    core = srv.core
    waits: list[float] = []
    real_commit, real_read, real_steps = core.commit, core.read, steps.run_steps
    #: Thread CPU seconds in the server: a whole step request, its commit, its receive.
    cpu_in: collections.Counter[str] = collections.Counter()

    def timed_commit(s: Any, uow: bytes) -> list[int]:
        a, c = time.perf_counter(), time.thread_time()
        try:
            return real_commit(s, uow)
        finally:
            waits.append(time.perf_counter() - a)
            cpu_in["commit"] += time.thread_time() - c

    def timed_read(*args: Any, **kwargs: Any) -> Any:
        c = time.thread_time()
        try:
            return real_read(*args, **kwargs)
        finally:
            cpu_in["receive"] += time.thread_time() - c

    def timed_steps(*args: Any) -> Any:
        c = time.thread_time()
        try:
            return real_steps(*args)
        finally:
            cpu_in["step request"] += time.thread_time() - c

    core.commit = timed_commit  # type: ignore[method-assign]
    core.read = timed_read  # type: ignore[method-assign]
    steps.run_steps = timed_steps
    ctx = mp.get_context("spawn")
    go, out = ctx.Event(), ctx.Queue()
    share = n // clients
    procs = [
        ctx.Process(target=_client, args=(srv.target + PATHS[path], share, go, out)) for _ in range(clients)
    ]
    for p in procs:
        p.start()
    time.sleep(2.0)
    sink.batches.clear()
    waits.clear()
    cpu_in.clear()
    waited0 = qm.store.stats.commit_waits
    cpu0, t0 = time.process_time(), time.perf_counter()
    go.set()
    results = [out.get(timeout=600) for _ in procs]
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    waited = qm.store.stats.commit_waits - waited0
    for p in procs:
        p.join()
    core.commit = real_commit  # type: ignore[method-assign]
    core.read = real_read  # type: ignore[method-assign]
    steps.run_steps = real_steps
    done = sum(r[0] for r in results)
    counts: collections.Counter[str] = collections.Counter()
    for r in results:
        counts.update(r[1])
    receive_s = [x for r in results for x in r[2]]
    commit_s = [x for r in results for x in r[3]]
    client_cpu = sum(r[4] for r in results)
    caller_cpu = sum(r[5] for r in results)
    batches = list(sink.batches)
    commit_wall = statistics.median(waits) if waits else 0.0
    batch_s = statistics.median(s for _, s in batches) if batches else 0.0
    ops = sum(o for o, _ in batches)
    lines = [
        f"{path}, {clients} client(s): {done / elapsed:,.0f} msgs/s ({done} in {elapsed:.2f} s)",
        "  round trips per transaction: "
        + ", ".join(f"{k} {v / done:.2f}" for k, v in sorted(counts.items()) if v >= done / 100),
        f"  client: receive call median {statistics.median(receive_s) * 1e3:.3f} ms,"
        f" commit call median {statistics.median(commit_s) * 1e3:.3f} ms,"
        f" {client_cpu / done * 1e6:,.0f} us CPU per transaction (all its threads;"
        f" the calling thread {caller_cpu / done * 1e6:,.0f})",
        f"  server: {cpu / done * 1e6:,.0f} us CPU per transaction (thread CPU in: "
        + ", ".join(f"{k} {v / done * 1e6:,.0f}" for k, v in sorted(cpu_in.items()))
        + ");"
        f" {len(batches) / done:.2f} COMMITs (fsyncs) per transaction,"
        f" {ops / max(1, len(batches)):.1f} operations each ({waited} waited for the previous"
        f" batch's committers), COMMIT median"
        f" {batch_s * 1e3:.3f} ms; remote commit in the QM median {commit_wall * 1e3:.3f} ms"
        f" (beyond its COMMIT: {max(0.0, commit_wall - batch_s) * 1e3:.3f} ms)",
    ]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--clients", type=int, default=1)
    ap.add_argument("--paths", default="unary,steps,ahead")
    ap.add_argument(
        "--stream-workers", default="256",
        help="the server's stream_workers, a comma list run in turn for each path (0: the worker pools)",
    )  # fmt: skip
    args = ap.parse_args()
    print("$ .venv/bin/python bench/remote_breakdown.py " + shlex.join(sys.argv[1:]))
    print(machine_header())
    print(f"# server process {os.getpid()}, load {os.getloadavg()[0]:.1f}")
    sink = _Commits()
    metrics: Any = sink
    with tempfile.TemporaryDirectory() as d, QueueManager(Path(d)) as qm:
        qm.store.metrics = metrics
        qm.create_queue(QUEUE, transactional=True)
        for path in args.paths.split(","):
            for workers in (int(w) for w in args.stream_workers.split(",")):
                with RemoteServer(qm, port=0, stream_workers=workers) as srv:
                    srv.start()
                    print(f"[stream_workers={workers}] ", end="", flush=True)
                    print(run_path(qm, srv, path, args.messages, args.clients, sink), flush=True)


if __name__ == "__main__":
    main()
