"""Latency at a fixed offered load: QM A to QM B beside RabbitMQ and Redis Streams.

    .venv/bin/python bench/latency.py [--rates 1000,10000,30000] [--duration 30] [--warmup 2]
                                      [--body-size 256] [--max-batch 1000] [--peers rabbitmq,redis]
                                      [--no-peers] [--timeout 120]

For each rate, each system in turn carries ``rate`` messages per second for ``--warmup`` +
``--duration`` seconds from one producer process to one consumer process; the messages of
the warm-up seconds are checked but not recorded. The figure of a message is its latency
from the producer's durable confirmation returning to the consumer's acknowledgement:

* **openmsmq**: two real ``openmsmq serve`` processes, A on 127.0.0.1 and B on 127.0.0.2
  (durable stores, as ``bench/transfer.py``). The application connects to A's data
  directory (``openmsmq.connect``: the running QM's remote-read service) and sends to
  ``DIRECT=TCP:127.0.0.2\\PRIVATE$\\latency-<rate>`` with ``send_many(...,
  tx=SINGLE_MESSAGE)``: every message due at that moment in one call and one transaction;
  the time is taken when that call (the commit) returns. The consumer connects to B's data
  directory and loops: begin a transaction, ``receive_many`` (waits for the first
  message, takes what is there, up to ``--max-batch``), commit; the time is taken when
  the commit returns.
* **RabbitMQ** (quorum queue, persistent messages, publisher confirms, one consumer with
  manual acks, prefetch 1,000, one ack per message): from the confirm's arrival at the
  producer to the consumer's ``basic_ack`` of that message (AMQP does not confirm acks).
* **Redis Streams** (``appendfsync always``): the producer pipelines the XADDs of the
  messages due; the time is taken when the pipeline's replies (each after the AOF fsync)
  are in. The consumer does XREADGROUP (BLOCK, COUNT ``--max-batch``) then XACK of what it
  read; the time is taken when the XACK reply (after the fsync) is in.

The load is open-loop: message ``i`` is due at ``t0 + i / rate`` whatever happened
before; a producer that is late sends everything due at once, and the run reports how
many messages left more than 1 ms after they were due and the largest delay.

One clock: the body carries the message's sequence number; each process stores
``time.monotonic_ns()`` per sequence number (CLOCK_MONOTONIC, shared by every process of
the machine) and the parent subtracts. Latencies go into an HdrHistogram (the
``hdrhistogram`` package, 1 µs to 120 s, 3 significant digits): median, 99th and 99.9th
percentile, maximum. A consumer that acknowledges before the producer's confirm arrived
(possible for RabbitMQ, whose delivery and confirm race) counts as 0 and is reported.

Every message must arrive once and in order (the consumer checks the sequence numbers);
a run that fails the check prints CHECK FAILED and no figure. Every peer server is
started before the first run: if one cannot start, the script says which and why and
exits without measuring (``--peers`` / ``--no-peers`` choose the peers).
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
import shutil
import signal
import sys
import tempfile
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _peer_setup as setup
import _stages as stages
import peers

import transfer

COMMAND = ".venv/bin/python bench/latency.py"
LATE_NS = 1_000_000  # a message sent more than this after it was due counts as late


def _body(seq: int, size: int) -> bytes:
    return seq.to_bytes(8, "big") + bytes(size - 8)


# --------------------------------------------------------------------------- open-loop schedule


class Schedule:
    """Message ``i`` is due at ``t0 + i * period``; tracks how late messages leave."""

    def __init__(self, rate: float, n: int) -> None:
        self.period = 1e9 / rate
        self.n = n
        self.t0 = 0
        self.sent = 0
        self.late = 0
        self.max_late_ns = 0

    def start(self) -> None:
        self.t0 = time.monotonic_ns()

    def due(self, now: int) -> int:
        """How many messages are due at ``now`` (at most n)."""
        return min(self.n, int((now - self.t0) / self.period) + 1)

    def wait_ns(self, now: int) -> int:
        """Nanoseconds until the next unsent message is due (0 if due)."""
        return max(0, int(self.t0 + self.sent * self.period) - now)

    def take(self, now: int, max_batch: int) -> tuple[int, int]:
        """The range of messages to send now: every due one, at most ``max_batch``."""
        i = self.sent
        j = min(self.due(now), i + max_batch)
        if j > i:
            late = now - int(self.t0 + i * self.period)  # the first of the range waited longest
            self.max_late_ns = max(self.max_late_ns, late)
            if late > LATE_NS:
                # Messages i..j-1 are due at increasing times: count those more than 1 ms late.
                cutoff = (now - LATE_NS - self.t0) / self.period
                self.late += min(j, int(cutoff) + 1) - i
        self.sent = j
        return i, j

    def report(self) -> dict[str, Any]:
        return {"late": self.late, "max_late_ms": self.max_late_ns / 1e6}


def _closed_loop(
    sched: Schedule, max_batch: int, send: Callable[[int, int], None], stamps: array[int]
) -> None:
    """Send on schedule through a synchronous ``send(i, j)``; stamp each message when its
    call returned."""
    sched.start()
    while sched.sent < sched.n:
        now = time.monotonic_ns()
        wait = sched.wait_ns(now)
        if wait > 0:
            time.sleep(wait / 1e9)
            continue
        i, j = sched.take(now, max_batch)
        send(i, j)
        done = time.monotonic_ns()
        for k in range(i, j):
            stamps[k] = done


def _stamps(n: int) -> array[int]:
    return array("q", bytes(8 * n))


class _Order:
    """The consumer's check: sequence numbers arrive 0, 1, 2, ... once each."""

    def __init__(self, body_size: int) -> None:
        self.expected = 0
        self.bad = 0
        self.body_size = body_size

    def see(self, body: bytes) -> int:
        seq = int.from_bytes(body[:8], "big")
        if seq != self.expected or len(body) != self.body_size:
            self.bad += 1
        self.expected = seq + 1
        return seq


# --------------------------------------------------------------------------- openmsmq


def _openmsmq_producer(
    ready: Callable[[], None], go: Any, *, a_dir: str, dest: str, rate: float, n: int,
    body_size: int, max_batch: int, timeout: float, **_: Any,
) -> dict[str, Any]:  # fmt: skip
    import openmsmq
    from openmsmq.client import SINGLE_MESSAGE

    conn = openmsmq.connect(a_dir, create=False)
    q = conn.open_queue(dest)
    bodies = [_body(i, body_size) for i in range(n)]
    stamps = _stamps(n)
    sched = Schedule(rate, n)
    ready()
    if not go.wait(timeout):
        raise TimeoutError("no start signal")

    def send(i: int, j: int) -> None:
        q.send_many(bodies[i:j], tx=SINGLE_MESSAGE)

    _closed_loop(sched, max_batch, send, stamps)
    conn.close()
    return {"stamps": stamps, **sched.report()}


def _openmsmq_consumer(
    ready: Callable[[], None], go: Any, *, b_dir: str, queue: str, n: int, body_size: int,
    max_batch: int, timeout: float, **_: Any,
) -> dict[str, Any]:  # fmt: skip
    import openmsmq
    from openmsmq.errors import HResult, MQError

    conn = openmsmq.connect(b_dir, create=False)
    q = conn.open_queue(queue)
    stamps = _stamps(n)
    received_at = _stamps(n)  # when the receive that took the message returned
    order = _Order(body_size)
    received = 0
    ready()
    deadline = time.monotonic() + timeout
    while received < n:
        if time.monotonic() > deadline:
            raise TimeoutError(f"consumer: {received} of {n} after {timeout:.0f} s")
        tx = conn.transaction()
        try:
            msgs = q.receive_many(max_batch, timeout=1.0, tx=tx)
        except MQError as exc:
            tx.abort()
            if exc.hresult == HResult.MQ_ERROR_IO_TIMEOUT:
                continue
            raise
        got = time.monotonic_ns()
        tx.commit()
        done = time.monotonic_ns()
        for m in msgs:
            seq = order.see(m.body)
            if 0 <= seq < n:
                stamps[seq] = done
                received_at[seq] = got
        received += len(msgs)
    conn.close()
    return {"stamps": stamps, "received": received, "out_of_order": order.bad, "received_at": received_at}


class OpenmsmqSystem:
    """Two ``openmsmq serve`` processes (A, B) for every rate of the run."""

    name = "openmsmq A->B"

    def __init__(self) -> None:
        self.work = Path(tempfile.mkdtemp(prefix="openmsmq-bench-latency-"))
        self.a_dir, self.b_dir = self.work / "a", self.work / "b"
        self.procs: list[transfer.Proc] = []

    def start(self, rates: list[int]) -> None:
        from openmsmq.qm import QueueManager

        with QueueManager(self.b_dir) as qb:
            for rate in rates:
                qb.create_queue(f"private$\\latency-{rate}", transactional=True)
        port = transfer.free_port()
        self.procs.append(
            transfer.serve("serve-b", self.work, self.b_dir, transfer.B, port, "none", metrics=True)
        )
        self.procs.append(
            transfer.serve("serve-a", self.work, self.a_dir, transfer.A, port, "none", metrics=True)
        )

    def run(self, rate: int, n: int, body_size: int, max_batch: int, timeout: float) -> tuple[dict, dict]:
        kwargs = dict(
            a_dir=str(self.a_dir), b_dir=str(self.b_dir), rate=rate, n=n, body_size=body_size,
            max_batch=max_batch, timeout=timeout, queue=f"private$\\latency-{rate}",
            dest=f"DIRECT=TCP:{transfer.B}\\PRIVATE$\\latency-{rate}",
        )  # fmt: skip
        before = {qm: stages.scrape(d) for qm, d in (("A", self.a_dir), ("B", self.b_dir))}
        prod, cons = peers._run_pipeline(_openmsmq_producer, _openmsmq_consumer, kwargs, timeout, None)
        for p in self.procs:
            p.check()
        cons["stages"] = {
            qm: stages.delta(before[qm], stages.scrape(d)) for qm, d in (("A", self.a_dir), ("B", self.b_dir))
        }
        return prod, cons

    def stop(self) -> None:
        for p in self.procs:
            p.stop()
        shutil.rmtree(self.work, ignore_errors=True)


# --------------------------------------------------------------------------- RabbitMQ


def _rabbit_producer(
    ready: Callable[[], None], go: Any, *, port: int, queue: str, rate: float, n: int,
    body_size: int, max_batch: int, timeout: float, **_: Any,
) -> dict[str, Any]:  # fmt: skip
    """Publish on schedule; publisher confirms arrive asynchronously."""
    import pika
    from pika.spec import Basic

    props = pika.BasicProperties(delivery_mode=2)
    stamps = _stamps(n)
    sched = Schedule(rate, n)
    st = {"upto": 0, "nacked": 0}
    chan: list[Any] = []

    def tick() -> None:
        now = time.monotonic_ns()
        i, j = sched.take(now, max_batch)
        ch = chan[0]
        for k in range(i, j):
            ch.basic_publish("", queue, _body(k, body_size), props)
        if sched.sent < sched.n:
            ch.connection.ioloop.call_later(sched.wait_ns(time.monotonic_ns()) / 1e9, tick)

    def on_confirm(frame: Any) -> None:
        now = time.monotonic_ns()
        m = frame.method
        if isinstance(m, Basic.Nack):
            st["nacked"] += 1
        tag = m.delivery_tag  # tags are 1..n in publish order
        if m.multiple:
            for k in range(st["upto"], tag):
                if not stamps[k]:
                    stamps[k] = now
        elif not stamps[tag - 1]:
            stamps[tag - 1] = now
        while st["upto"] < n and stamps[st["upto"]]:
            st["upto"] += 1
        if st["upto"] >= n:
            chan[0].connection.close()

    def on_confirm_mode(_frame: Any) -> None:
        ready()
        if not go.wait(timeout):
            raise TimeoutError("no start signal")
        sched.start()
        tick()

    def on_channel(ch: Any) -> None:
        chan.append(ch)
        ch.confirm_delivery(on_confirm, callback=on_confirm_mode)

    conn = pika.SelectConnection(
        pika.ConnectionParameters(host="127.0.0.1", port=port),
        on_open_callback=lambda c: c.channel(on_open_callback=on_channel),
        on_open_error_callback=lambda c, err: c.ioloop.stop(),
        on_close_callback=lambda c, reason: c.ioloop.stop(),
    )
    conn.ioloop.call_later(timeout, conn.ioloop.stop)
    conn.ioloop.start()
    if st["upto"] < n:
        raise RuntimeError(f"producer stopped early: {st['upto']} of {n} confirmed")
    if st["nacked"]:
        raise RuntimeError(f"broker nacked {st['nacked']} confirms")
    return {"stamps": stamps, **sched.report()}


def _rabbit_consumer(
    ready: Callable[[], None], go: Any, *, port: int, queue: str, n: int, body_size: int,
    timeout: float, **_: Any,
) -> dict[str, Any]:  # fmt: skip
    """Consume with manual acks, one ``basic_ack`` per message; stamped after the ack."""
    import pika

    stamps = _stamps(n)
    order = _Order(body_size)
    st = {"received": 0, "redelivered": 0}

    def on_message(ch: Any, method: Any, _props: Any, body: bytes) -> None:
        seq = order.see(body)
        st["redelivered"] += bool(method.redelivered)
        ch.basic_ack(method.delivery_tag)
        if 0 <= seq < n:
            stamps[seq] = time.monotonic_ns()
        st["received"] += 1
        if st["received"] == n:
            ch.connection.close()

    def on_channel(ch: Any) -> None:
        ch.basic_qos(
            prefetch_count=1000,
            callback=lambda _f: ch.basic_consume(
                queue, on_message, auto_ack=False, callback=lambda _f2: ready()
            ),
        )

    conn = pika.SelectConnection(
        pika.ConnectionParameters(host="127.0.0.1", port=port),
        on_open_callback=lambda c: c.channel(on_open_callback=on_channel),
        on_open_error_callback=lambda c, err: c.ioloop.stop(),
        on_close_callback=lambda c, reason: c.ioloop.stop(),
    )
    conn.ioloop.call_later(timeout, conn.ioloop.stop)
    conn.ioloop.start()
    if st["received"] < n:
        raise RuntimeError(f"consumer stopped early: {st['received']} of {n} received")
    return {"stamps": stamps, "received": st["received"], "out_of_order": order.bad + st["redelivered"]}


class RabbitSystem:
    """A private RabbitMQ node; a fresh quorum queue per rate."""

    name = "RabbitMQ quorum queue"

    def __init__(self) -> None:
        self.server: setup.RabbitMQServer | None = None

    def start(self, rates: list[int]) -> None:
        setup.ensure_debian_packages(["rabbitmq-server"])
        setup.ensure_python_clients()
        self.server = setup.RabbitMQServer(None, "none", setup._print)
        self.server.start(180.0)
        version = setup.debian_version("rabbitmq-server").split(":")[-1].rsplit("-", 1)[0]
        self.name = f"RabbitMQ {version} quorum queue"

    def run(self, rate: int, n: int, body_size: int, max_batch: int, timeout: float) -> tuple[dict, dict]:
        import pika

        assert self.server is not None
        params = pika.ConnectionParameters(host="127.0.0.1", port=self.server.port)
        queue = f"latency-{rate}"
        conn = pika.BlockingConnection(params)
        conn.channel().queue_declare(queue, durable=True, arguments={"x-queue-type": "quorum"})
        conn.close()
        kwargs = dict(port=self.server.port, queue=queue, rate=rate, n=n, body_size=body_size,
                      max_batch=max_batch, timeout=timeout)  # fmt: skip
        prod, cons = peers._run_pipeline(_rabbit_producer, _rabbit_consumer, kwargs, timeout, None)
        conn = pika.BlockingConnection(params)
        ch = conn.channel()
        left = ch.queue_declare(queue, passive=True).method.message_count
        ch.queue_delete(queue)
        conn.close()
        cons["left"] = left
        return prod, cons

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server.cleanup()


# --------------------------------------------------------------------------- Redis Streams

GROUP = "latency"


def _redis_producer(
    ready: Callable[[], None], go: Any, *, port: int, stream: str, rate: float, n: int,
    body_size: int, max_batch: int, timeout: float, **_: Any,
) -> dict[str, Any]:  # fmt: skip
    import redis

    r = redis.Redis(host="127.0.0.1", port=port, protocol=2, socket_timeout=timeout)
    r.ping()
    stamps = _stamps(n)
    sched = Schedule(rate, n)
    ready()
    if not go.wait(timeout):
        raise TimeoutError("no start signal")

    def send(i: int, j: int) -> None:
        pipe = r.pipeline(transaction=False)
        for k in range(i, j):
            pipe.xadd(stream, {"b": _body(k, body_size)})
        pipe.execute()

    _closed_loop(sched, max_batch, send, stamps)
    return {"stamps": stamps, **sched.report()}


def _redis_consumer(
    ready: Callable[[], None], go: Any, *, port: int, stream: str, n: int, body_size: int,
    max_batch: int, timeout: float, **_: Any,
) -> dict[str, Any]:  # fmt: skip
    import redis

    r = redis.Redis(host="127.0.0.1", port=port, protocol=2, socket_timeout=timeout)
    r.ping()
    stamps = _stamps(n)
    order = _Order(body_size)
    received = 0
    ready()
    deadline = time.monotonic() + timeout
    while received < n:
        if time.monotonic() > deadline:
            raise TimeoutError(f"consumer: {received} of {n} after {timeout:.0f} s")
        resp = r.xreadgroup(GROUP, "c1", {stream: ">"}, count=max_batch, block=1000)
        ids, seqs = [], []
        for _stream, entries in resp or []:
            for entry_id, fields in entries:
                seqs.append(order.see(fields[b"b"]))
                ids.append(entry_id)
        if not ids:
            continue
        r.xack(stream, GROUP, *ids)  # the reply comes after the AOF fsync (appendfsync always)
        done = time.monotonic_ns()
        for seq in seqs:
            if 0 <= seq < n:
                stamps[seq] = done
        received += len(ids)
    return {"stamps": stamps, "received": received, "out_of_order": order.bad}


class RedisSystem:
    """A private redis-server (AOF, appendfsync always); a fresh stream per rate."""

    name = "Redis Streams (appendfsync always)"

    def __init__(self) -> None:
        self.server: setup.RedisServer | None = None

    def start(self, rates: list[int]) -> None:
        setup.ensure_debian_packages(["redis-server"])
        setup.ensure_python_clients()
        self.server = setup.RedisServer(None, "none", setup._print)
        self.server.start(30.0)
        self.name = f"Redis {peers.server_version(self.server)} Streams (appendfsync always)"

    def run(self, rate: int, n: int, body_size: int, max_batch: int, timeout: float) -> tuple[dict, dict]:
        import redis

        assert self.server is not None
        stream = f"latency-{rate}"
        r = redis.Redis(host="127.0.0.1", port=self.server.port, protocol=2)
        r.xgroup_create(stream, GROUP, id="0", mkstream=True)
        kwargs = dict(port=self.server.port, stream=stream, rate=rate, n=n, body_size=body_size,
                      max_batch=max_batch, timeout=timeout)  # fmt: skip
        try:
            prod, cons = peers._run_pipeline(_redis_producer, _redis_consumer, kwargs, timeout, None)
            cons["left"] = int(r.xpending(stream, GROUP)["pending"])
            if r.xlen(stream) != n:
                cons["out_of_order"] += abs(r.xlen(stream) - n)
        finally:
            r.delete(stream)
            r.close()
        return prod, cons

    def stop(self) -> None:
        if self.server is not None:
            self.server.stop()
            self.server.cleanup()


# --------------------------------------------------------------------------- figures


@dataclass
class Figures:
    """One system at one rate."""

    system: str
    rate: int
    recorded: int
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    p999_ms: float = 0.0
    max_ms: float = 0.0
    before_confirm: int = 0
    late: int = 0
    max_late_ms: float = 0.0
    achieved: float = 0.0
    problems: list[str] = field(default_factory=list)
    #: The consumer's side split in two: (until its receive returned, its commit), each as
    #: (median, p99) in ms; and the serve processes' stage histograms (_stages.py).
    split: tuple[tuple[float, float], tuple[float, float]] | None = None
    stages: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return not self.problems


def figures(system: str, rate: int, n: int, warm: int, prod: dict[str, Any], cons: dict[str, Any]) -> Figures:
    """Check the run (every message once, in order, nothing left) and, if it passed, build
    the histogram of consumer stamp - producer stamp over the messages after the warm-up."""
    f = Figures(system, rate, n - warm, late=prod["late"], max_late_ms=prod["max_late_ms"])
    sent, got = prod["stamps"], cons["stamps"]
    missing = sum(1 for k in range(n) if not got[k] or not sent[k])
    if cons["received"] != n or cons["out_of_order"] or missing or cons.get("left"):
        f.problems.append(
            f"CHECK FAILED: received {cons['received']} of {n}, {cons['out_of_order']} out of order,"
            f" duplicated or redelivered, {missing} without both stamps, {cons.get('left', 0)} left"
        )
        return f
    from hdrh.histogram import HdrHistogram

    hist = HdrHistogram(1, 120_000_000, 3)  # µs
    for k in range(warm, n):
        us = (got[k] - sent[k]) // 1000
        if us < 1:
            f.before_confirm += us < 0
            us = 1
        hist.record_value(us)
    f.p50_ms = hist.get_value_at_percentile(50) / 1000
    f.p99_ms = hist.get_value_at_percentile(99) / 1000
    f.p999_ms = hist.get_value_at_percentile(99.9) / 1000
    f.max_ms = hist.get_max_value() / 1000
    recv = cons.get("received_at")
    if recv is not None:
        until, commit = HdrHistogram(1, 120_000_000, 3), HdrHistogram(1, 120_000_000, 3)
        for k in range(warm, n):
            until.record_value(max(1, (recv[k] - sent[k]) // 1000))
            commit.record_value(max(1, (got[k] - recv[k]) // 1000))
        f.split = tuple(  # type: ignore[assignment]
            (h.get_value_at_percentile(50) / 1000, h.get_value_at_percentile(99) / 1000)
            for h in (until, commit)
        )
    f.stages = cons.get("stages")
    span = (max(got[warm:n]) - min(sent[warm:n])) / 1e9
    f.achieved = (n - warm) / span if span > 0 else 0.0
    return f


def format_figures(f: Figures) -> str:
    if not f.ok:
        return f"  {f.system:<44} {f.rate:>7,}/s  no figure: {'; '.join(f.problems)}"
    extra = ""
    if f.before_confirm:
        extra = f"; {f.before_confirm:,} acked before the confirm arrived (counted as 0)"
    out = (
        f"  {f.system:<44} {f.rate:>7,}/s  median {f.p50_ms:7.2f} ms  p99 {f.p99_ms:7.2f} ms"
        f"  p99.9 {f.p999_ms:7.2f} ms  max {f.max_ms:8.2f} ms"
        f"  ({f.recorded:,} recorded, {f.achieved:,.0f} msgs/s through;"
        f" {f.late:,} sent >1 ms behind schedule, at most {f.max_late_ms:.1f} ms{extra})"
    )
    if f.split is not None:
        (u50, u99), (c50, c99) = f.split
        out += (
            f"\n    split: confirm returned -> consumer's receive returned: median {u50:.2f} ms,"
            f" p99 {u99:.2f} ms; its commit: median {c50:.2f} ms, p99 {c99:.2f} ms"
        )
    if f.stages:
        out += "\n" + stages.format_stages(f.stages)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--rates", default="1000,10000,30000", help="offered loads, messages/s, comma-separated")
    ap.add_argument("--duration", type=float, default=30.0, help="seconds recorded per rate and system")
    ap.add_argument("--warmup", type=float, default=2.0, help="seconds sent first and not recorded")
    ap.add_argument("--body-size", type=int, default=256)
    ap.add_argument("--max-batch", type=int, default=1000, help="most messages per send or receive call")
    ap.add_argument("--peers", default="rabbitmq,redis", help="comma-separated: rabbitmq, redis")
    ap.add_argument("--no-peers", action="store_true", help="openmsmq alone")
    ap.add_argument(
        "--timeout", type=float, default=0.0, help="seconds per run (default: 3x its length + 60)"
    )
    args = ap.parse_args(argv)
    if args.body_size < 8:
        ap.error("--body-size must be at least 8 (the body carries the sequence number)")
    rates = [int(r) for r in args.rates.split(",") if r.strip()]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    command = " ".join([COMMAND, *map(shlex.quote, sys.argv[1:] if argv is None else argv)])
    print(f"# {command}")
    print(peers.machine_header(), flush=True)
    systems: list[Any] = [OpenmsmqSystem()]
    if not args.no_peers:
        known = {"rabbitmq": RabbitSystem, "redis": RedisSystem}
        for name in (p.strip() for p in args.peers.split(",") if p.strip()):
            if name not in known:
                ap.error(f"unknown peer {name!r} (rabbitmq, redis)")
            systems.append(known[name]())
    started: list[Any] = []
    try:
        for s in systems:
            try:
                s.start(rates)
            except Exception as exc:
                print(f"# REFUSED: {s.name} could not start ({type(exc).__name__}: {str(exc).strip()[:800]});"
                      " nothing measured", flush=True)  # fmt: skip
                return 2
            finally:
                started.append(s)
        print(
            "# latency: producer's durable confirm returned -> consumer's acknowledgement (commit)"
            f" returned; {args.warmup:g} s warm-up not recorded, then {args.duration:g} s recorded per rate",
            flush=True,
        )
        failed = False
        for rate in rates:
            n = int(rate * (args.warmup + args.duration))
            warm = int(rate * args.warmup)
            timeout = args.timeout or 3 * (args.warmup + args.duration) + 60
            rows = []
            for s in systems:
                try:
                    prod, cons = s.run(rate, n, args.body_size, args.max_batch, timeout)
                    f = figures(s.name, rate, n, warm, prod, cons)
                except TimeoutError as exc:
                    failure = f"DID NOT KEEP UP with the offered load ({exc})"
                    f = Figures(s.name, rate, 0, problems=[failure])
                except Exception as exc:
                    failure = f"RUN FAILED: {type(exc).__name__}: {str(exc)[:500]}"
                    f = Figures(s.name, rate, 0, problems=[failure])
                failed |= not f.ok
                rows.append(f)
                print(format_figures(f), flush=True)
            ours = rows[0]
            for peer in rows[1:]:
                if ours.ok and peer.ok:
                    ratio = ours.p99_ms / peer.p99_ms
                    print(f"  # at {rate:,}/s p99 openmsmq / {peer.system.split()[0]}: {ratio:.2f}")
        print(f"# load after: {setup.load_average()}")
        return 1 if failed else 0
    finally:
        for s in reversed(started):
            with contextlib.suppress(Exception):
                s.stop()


if __name__ == "__main__":
    sys.exit(main())
