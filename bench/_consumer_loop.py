"""The consumer loop users write, one message per transaction, for bench/remote.py:
openmsmq's remote-read clients (sync and asyncio) and RabbitMQ's consumer with one manual
ack per message, each in client processes of their own, each checked (every message
received exactly once, nothing left) before a figure is reported.

Bodies carry their sequence number (8 bytes, big-endian) so the check can tell a lost or
a duplicated message from a count that happens to match.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

BODY_SIZE = 256
#: A client stops after a receive of this many seconds found nothing.
IDLE = 0.5


def body(seq: int) -> bytes:
    return seq.to_bytes(8, "big") + bytes(BODY_SIZE - 8)


@dataclass(frozen=True)
class LoopRun:
    """One run: messages each client received (sequence numbers) and the time from the
    start signal to the last commit (ack) of any client."""

    seqs: list[int]
    seconds: float

    def problems(self, n: int, left: int) -> list[str]:
        """What the correctness check found wrong (empty: every message exactly once)."""
        out = []
        dups = len(self.seqs) - len(set(self.seqs))
        missing = n - len(set(self.seqs) & set(range(n)))
        if dups:
            out.append(f"{dups} received twice")
        if missing:
            out.append(f"{missing} of {n} never received")
        if left:
            out.append(f"{left} left in the queue")
        return out


# ---- openmsmq -------------------------------------------------------------------------------


def _openmsmq_sync(target: str, queue: str, go: Any, out: Any) -> None:
    import openmsmq
    from openmsmq.client import Access
    from openmsmq.errors import IOTimeoutError

    with openmsmq.connect(target) as conn:
        q = conn.open_queue(queue, Access.RECEIVE)
        seqs: list[int] = []
        last = 0.0
        go.wait()
        while True:
            try:
                with conn.transaction() as tx:
                    m = q.receive(timeout=IDLE, tx=tx)
                    seqs.append(int.from_bytes(m.body[:8], "big"))
            except IOTimeoutError:
                break
            last = time.monotonic()
        out.put((seqs, last))


def _openmsmq_async(target: str, queue: str, go: Any, out: Any) -> None:
    from openmsmq.client import Access, aio
    from openmsmq.errors import IOTimeoutError

    async def main() -> tuple[list[int], float]:
        conn = await aio.connect(target)
        q = await conn.open_queue(queue, Access.RECEIVE)
        seqs: list[int] = []
        last = 0.0
        await asyncio.to_thread(go.wait)
        while True:
            try:
                async with conn.transaction() as tx:
                    m = await q.receive(timeout=IDLE, tx=tx)
                    seqs.append(int.from_bytes(m.body[:8], "big"))
            except IOTimeoutError:
                break
            last = time.monotonic()
        await conn.close()
        return seqs, last

    out.put(asyncio.run(main()))


WORKERS: dict[str, Callable[..., None]] = {"sync": _openmsmq_sync, "asyncio": _openmsmq_async}


def run_clients(
    worker: Callable[..., None], args: tuple[Any, ...], clients: int, timeout: float = 600
) -> LoopRun:
    """Run ``clients`` processes of ``worker(*args, go, out)``; start them together."""
    ctx = mp.get_context("spawn")
    go, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=worker, args=(*args, go, out), daemon=True) for _ in range(clients)]
    for p in procs:
        p.start()
    time.sleep(2.0)  # every client connects before the clock starts
    start = time.monotonic()
    go.set()
    seqs: list[int] = []
    last = start
    for _ in procs:
        got, t = out.get(timeout=timeout)
        seqs += got
        last = max(last, t)
    for p in procs:
        p.join(timeout=30)
    return LoopRun(seqs, last - start)


# ---- RabbitMQ -------------------------------------------------------------------------------


def _rabbit_consumer(port: int, queue: str, prefetch: int, go: Any, out: Any) -> None:
    """basic_consume with manual acks, one basic_ack (multiple=False) per message."""
    import pika

    conn = pika.BlockingConnection(pika.ConnectionParameters(host="127.0.0.1", port=port))
    ch = conn.channel()
    ch.basic_qos(prefetch_count=prefetch)
    seqs: list[int] = []
    last = 0.0
    go.wait()
    for method, _props, payload in ch.consume(queue, auto_ack=False, inactivity_timeout=IDLE):
        if method is None:
            break
        seqs.append(int.from_bytes(payload[:8], "big"))
        ch.basic_ack(method.delivery_tag)
        last = time.monotonic()
    ch.cancel()
    conn.close()
    out.put((seqs, last))


def rabbit_fill(port: int, queue: str, n: int) -> None:
    """Declare the durable quorum queue and publish ``n`` persistent messages, confirmed."""
    import pika

    conn = pika.BlockingConnection(pika.ConnectionParameters(host="127.0.0.1", port=port))
    ch = conn.channel()
    ch.queue_declare(queue, durable=True, arguments={"x-queue-type": "quorum"})
    ch.confirm_delivery()
    props = pika.BasicProperties(delivery_mode=2)
    for i in range(n):
        ch.basic_publish("", queue, body(i), props)
    conn.close()


def rabbit_left(port: int, queue: str) -> int:
    """Messages still in ``queue`` (ready or unacked), then delete it."""
    import pika

    conn = pika.BlockingConnection(pika.ConnectionParameters(host="127.0.0.1", port=port))
    ch = conn.channel()
    left = int(ch.queue_declare(queue, passive=True).method.message_count)
    ch.queue_delete(queue)
    conn.close()
    return left


def rabbit_run(port: int, queue: str, n: int, clients: int, prefetch: int) -> tuple[LoopRun, int]:
    rabbit_fill(port, queue, n)
    run = run_clients(_rabbit_consumer, (port, queue, prefetch), clients)
    return run, rabbit_left(port, queue)
