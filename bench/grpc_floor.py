"""The floor of gRPC in Python on this machine: an echo service that does nothing, its
cost per exchange, for a unary call and for a message each way on one bidirectional
stream, with one client and with several client processes, for several ways of using
gRPC's Python stack on each end.

    .venv/bin/python bench/grpc_floor.py [--exchanges 3000] [--clients 8]
        [--servers aio,aio-hop,sync] [--client-kinds unary,sync-stream,aio-inline]
        [--option grpc.optimization_target=latency ...]

Servers (each in a process of its own):

* ``aio``: a ``grpc.aio`` server, the echo written on its event loop;
* ``aio-hop``: the same, each request handed to a worker thread and back
  (``run_in_executor``), as a service whose calls block (SQLite, fsync) must;
* ``sync``: ``grpc.server`` with a thread pool, one thread per stream.

Clients (each a process of its own; sync callers, as the blocking client API):

* ``unary``: one unary call per exchange (sync stub);
* ``sync-stream``: the sync stub's stream, requests fed through a queue to the iterator
  gRPC consumes in a thread of its own (a thread hop per request);
* ``aio-inline``: a ``grpc.aio`` channel on a private event loop that the calling thread
  runs for the length of each exchange (``run_until_complete``): no thread hop.

Each line gives the wall time per exchange of one client, the exchanges/s of all clients
together, and the CPU per exchange of the server and of the clients (CPU is what the
machine's load moves least). What it says about the remote consumer loop: a transaction
needs at least one exchange (its commit's answer), so one client cannot go faster than
one over the stream's time per exchange, and several clients not faster than the echo
service's exchanges/s.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import queue
import shlex
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers import machine_header

PAYLOAD = bytes(300)  # about a StepRequest / StepReply of the consumer loop
#: gRPC channel and server arguments (``--option``), set in every process.
OPTIONS: list[tuple[str, Any]] = []


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def _aio_server(port_out: Any, cpu_in: Any, cpu_out: Any, hop: bool) -> None:
    pool = ThreadPoolExecutor(max_workers=16)

    def echo(request: bytes) -> bytes:
        return request

    async def unary(request: bytes, context: Any) -> bytes:
        if hop:
            return await asyncio.get_running_loop().run_in_executor(pool, echo, request)
        return request

    async def stream(requests: Any, context: Any) -> None:
        loop = asyncio.get_running_loop()
        while True:
            request = await context.read()
            if request is grpc.aio.EOF:
                return
            if hop:
                request = await loop.run_in_executor(pool, echo, request)
            await context.write(request)

    async def main() -> None:
        server = grpc.aio.server(options=OPTIONS)
        handlers = {
            "Unary": grpc.unary_unary_rpc_method_handler(unary),
            "Stream": grpc.stream_stream_rpc_method_handler(stream),
        }
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("floor.Echo", handlers),))
        port_out.put(server.add_insecure_port("127.0.0.1:0"))
        await server.start()
        loop = asyncio.get_running_loop()
        while True:
            await loop.run_in_executor(None, cpu_in.get)
            cpu_out.put(_cpu())

    asyncio.run(main())


def _sync_server(port_out: Any, cpu_in: Any, cpu_out: Any) -> None:
    def unary(request: bytes, context: Any) -> bytes:
        return request

    def stream(requests: Iterator[bytes], context: Any) -> Iterator[bytes]:
        yield from requests

    server = grpc.server(ThreadPoolExecutor(max_workers=32), options=OPTIONS)
    handlers = {
        "Unary": grpc.unary_unary_rpc_method_handler(unary),
        "Stream": grpc.stream_stream_rpc_method_handler(stream),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("floor.Echo", handlers),))
    port_out.put(server.add_insecure_port("127.0.0.1:0"))
    server.start()
    while True:
        cpu_in.get()
        cpu_out.put(_cpu())


def _server(kind: str, port_out: Any, cpu_in: Any, cpu_out: Any, options: list[tuple[str, Any]]) -> None:
    OPTIONS[:] = options
    if kind == "sync":
        _sync_server(port_out, cpu_in, cpu_out)
    else:
        _aio_server(port_out, cpu_in, cpu_out, hop=kind == "aio-hop")


def _sync_stream(channel: grpc.Channel, n: int, go: Any) -> tuple[float, float, float]:
    requests: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()

    def iterate() -> Iterator[bytes]:
        while (item := requests.get()) is not None:
            yield item

    replies = channel.stream_stream("/floor.Echo/Stream")(iterate())
    requests.put(PAYLOAD)
    next(replies)
    go.wait()
    cpu, start = _cpu(), time.perf_counter()
    for _ in range(n):
        requests.put(PAYLOAD)
        next(replies)
    end, cpu = time.perf_counter(), _cpu() - cpu
    requests.put(None)
    return start, end, cpu


def _aio_inline(port: int, n: int, go: Any) -> tuple[float, float, float]:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)  # the channel binds to the loop current at its creation
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=OPTIONS)
    call = loop.run_until_complete(_open_aio_stream(channel))

    async def exchange() -> bytes:
        await call.write(PAYLOAD)
        return await call.read()  # type: ignore[no-any-return]

    loop.run_until_complete(exchange())
    go.wait()
    cpu, start = _cpu(), time.perf_counter()
    for _ in range(n):
        loop.run_until_complete(exchange())
    end, cpu = time.perf_counter(), _cpu() - cpu
    loop.run_until_complete(_finish(call))
    loop.run_until_complete(channel.close())
    loop.close()
    return start, end, cpu


async def _finish(call: Any) -> None:
    await call.done_writing()
    await call.read()  # EOF once the server has ended the stream
    await call.wait_for_connection()


async def _open_aio_stream(channel: grpc.aio.Channel) -> Any:
    await channel.channel_ready()
    return channel.stream_stream("/floor.Echo/Stream")()


def _client(port: int, kind: str, n: int, go: Any, out: Any, options: list[tuple[str, Any]]) -> None:
    OPTIONS[:] = options
    if kind == "aio-inline":
        out.put(_aio_inline(port, n, go))
        return
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=OPTIONS)
    grpc.channel_ready_future(channel).result(timeout=10)
    if kind == "unary":
        call = channel.unary_unary("/floor.Echo/Unary")
        call(PAYLOAD)
        go.wait()
        cpu, start = _cpu(), time.perf_counter()
        for _ in range(n):
            call(PAYLOAD)
        out.put((start, time.perf_counter(), _cpu() - cpu))
    else:
        out.put(_sync_stream(channel, n, go))
    channel.close()


def run(port: int, kind: str, n: int, clients: int, cpu_in: Any, cpu_out: Any) -> tuple[float, ...]:
    """(µs per exchange of one client, exchanges/s of all clients together, server CPU µs
    per exchange, client CPU µs per exchange)."""
    ctx = mp.get_context("spawn")
    go, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_client, args=(port, kind, n, go, out, OPTIONS)) for _ in range(clients)]
    for p in procs:
        p.start()
    time.sleep(2.0)
    cpu_in.put(None)
    server_cpu = cpu_out.get(timeout=60)
    go.set()
    spans = [out.get(timeout=120) for _ in procs]
    cpu_in.put(None)
    server_cpu = cpu_out.get(timeout=60) - server_cpu
    for p in procs:
        p.join()
    per = sum(end - start for start, end, _ in spans) / clients / n * 1e6
    whole = max(end for _, end, _ in spans) - min(start for start, _, _ in spans)
    client_cpu = sum(cpu for _, _, cpu in spans) / clients / n * 1e6
    return per, clients * n / whole, server_cpu / clients / n * 1e6, client_cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exchanges", type=int, default=3000, help="exchanges per client")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--servers", default="aio,aio-hop,sync", help="server kinds (comma list)")
    ap.add_argument("--client-kinds", default="unary,sync-stream,aio-inline", help="client kinds")
    ap.add_argument(
        "--option", action="append", default=[], metavar="KEY=VALUE",
        help="a gRPC argument for the server and the channels (integer values as integers)",
    )  # fmt: skip
    args = ap.parse_args()
    for item in args.option:
        key, _, value = item.partition("=")
        OPTIONS.append((key, int(value) if value.lstrip("-").isdigit() else value))
    print("$ .venv/bin/python bench/grpc_floor.py " + shlex.join(sys.argv[1:]))
    print(machine_header())
    ctx = mp.get_context("spawn")
    for server_kind in args.servers.split(","):
        port_out, cpu_in, cpu_out = ctx.Queue(), ctx.Queue(), ctx.Queue()
        server = ctx.Process(
            target=_server, args=(server_kind, port_out, cpu_in, cpu_out, OPTIONS), daemon=True
        )
        server.start()
        try:
            port = port_out.get(timeout=60)
            for kind in args.client_kinds.split(","):
                for clients in (1, args.clients):
                    per, total, scpu, ccpu = run(port, kind, args.exchanges, clients, cpu_in, cpu_out)
                    print(
                        f"server {server_kind:<7} client {kind:<11} {clients} client(s): {per:6,.0f} µs per"
                        f" exchange, {total:7,.0f} exchanges/s in all; CPU per exchange: server"
                        f" {scpu:4,.0f} µs, client {ccpu:4,.0f} µs  (load {os.getloadavg()[0]:.1f})",
                        flush=True,
                    )
        finally:
            server.terminate()
            server.join(10)


if __name__ == "__main__":
    main()
