"""The floor of gRPC in Python on this machine: an echo service that does nothing, its
cost per exchange as the remote-read service uses gRPC (a ``grpc.aio`` server in a process
of its own, the sync client), for a unary call and for a message each way on one
bidirectional stream, with one client and with several client processes.

    .venv/bin/python bench/grpc_floor.py [--exchanges 3000] [--clients 8]

What it says about the remote consumer loop: a transaction needs at least one exchange
(its commit's answer), so one client cannot go faster than one over the stream's time
per exchange, and several clients not faster than the echo service's exchanges/s.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import queue
import shlex
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import grpc.aio

sys.path.insert(0, str(Path(__file__).resolve().parent))

from peers import machine_header

PAYLOAD = bytes(300)  # about a StepRequest / StepReply of the consumer loop


async def _unary(request: bytes, context: Any) -> bytes:
    return request


async def _stream(requests: Any, context: Any) -> None:
    while True:
        request = await context.read()
        if request is grpc.aio.EOF:
            return
        await context.write(request)


def _server(port_out: Any) -> None:
    async def main() -> None:
        server = grpc.aio.server()
        handlers = {
            "Unary": grpc.unary_unary_rpc_method_handler(_unary),
            "Stream": grpc.stream_stream_rpc_method_handler(_stream),
        }
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("floor.Echo", handlers),))
        port_out.put(server.add_insecure_port("127.0.0.1:0"))
        await server.start()
        await server.wait_for_termination()

    asyncio.run(main())


def _client(port: int, kind: str, n: int, go: Any, out: Any) -> None:
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    grpc.channel_ready_future(channel).result(timeout=10)
    if kind == "unary":
        call = channel.unary_unary("/floor.Echo/Unary")
        call(PAYLOAD)
        go.wait()
        start = time.perf_counter()
        for _ in range(n):
            call(PAYLOAD)
    else:
        requests: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()

        def iterate() -> Iterator[bytes]:
            while (item := requests.get()) is not None:
                yield item

        replies = channel.stream_stream("/floor.Echo/Stream")(iterate())
        requests.put(PAYLOAD)
        next(replies)
        go.wait()
        start = time.perf_counter()
        for _ in range(n):
            requests.put(PAYLOAD)
            next(replies)
        requests.put(None)
    out.put((start, time.perf_counter()))
    channel.close()


def run(port: int, kind: str, n: int, clients: int) -> tuple[float, float]:
    """(µs per exchange of one client, exchanges/s of all clients together)."""
    ctx = mp.get_context("spawn")
    go, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_client, args=(port, kind, n, go, out)) for _ in range(clients)]
    for p in procs:
        p.start()
    time.sleep(2.0)
    go.set()
    spans = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    per = sum(end - start for start, end in spans) / clients / n * 1e6
    whole = max(end for _, end in spans) - min(start for start, _ in spans)
    return per, clients * n / whole


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--exchanges", type=int, default=3000, help="exchanges per client")
    ap.add_argument("--clients", type=int, default=8)
    args = ap.parse_args()
    print("$ .venv/bin/python bench/grpc_floor.py " + shlex.join(sys.argv[1:]))
    print(machine_header())
    ctx = mp.get_context("spawn")
    port_out = ctx.Queue()
    server = ctx.Process(target=_server, args=(port_out,), daemon=True)
    server.start()
    try:
        port = port_out.get(timeout=60)
        for kind in ("unary", "stream"):
            for clients in (1, args.clients):
                per, total = run(port, kind, args.exchanges, clients)
                line = f"{per:,.0f} µs per exchange, {total:,.0f} exchanges/s in all"
                print(f"{kind:<6} {clients} client(s): {line}")
    finally:
        server.terminate()
        server.join(10)


if __name__ == "__main__":
    main()
