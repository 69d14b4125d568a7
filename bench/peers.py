"""Peer benchmarks: what a user would pick instead of openmsmq, doing the same work.

    .venv/bin/python bench/peers.py [--messages 100000] [--body-size 256] [--peers rabbitmq,redis]
                                    [--repeat 3] [--fsyncs auto|perf|strace|none]
                                    [--timeout 600] [--disk-flushes N]

Each peer moves ``--messages`` durable messages of ``--body-size`` bytes from one producer
process to one consumer process running at the same time (a pipeline), and the figure is
end to end: from the producer's first publish to the consumer's last acknowledgement.

* RabbitMQ (Debian's rabbitmq-server, one node): a durable quorum queue, persistent
  messages (delivery_mode 2), publisher confirms handled asynchronously with a window of
  unconfirmed messages, one consumer with manual acks, a prefetch and ``multiple=True``
  acks every ``ack_every`` messages (pika ``SelectConnection`` on both sides).
* Redis Streams (Debian's redis-server, ``appendonly yes``, ``appendfsync always``, no
  RDB): XADD pipelined in batches; one consumer-group reader doing XREADGROUP COUNT N
  and XACK of the batch it read, pipelined with its next XREADGROUP. Acknowledged entries
  stay in the stream (XACK only clears the pending list), as Redis's documented
  consumer-group pattern has it.

Each server is a private instance started by this script (installed with apt-get first
if missing) on free ports of 127.0.0.1 with its own data directory, and stopped
afterwards. fsyncs are counted per server process tree with kernel counters (``perf
stat`` on the fsync/fdatasync/syncfs tracepoints; strace as a fallback; see
``bench/_peer_setup.py``); the machine's raw write+fsync rate is measured beside them.

``bench/transfer.py`` imports :func:`run_rabbitmq`, :func:`run_redis`,
:func:`machine_header` and :func:`format_result` to print openmsmq beside these peers.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import queue
import shlex
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _peer_setup as setup

COMMAND = ".venv/bin/python bench/peers.py"


@dataclass(frozen=True)
class PeerResult:
    """One peer's end-to-end figure.

    ``fsyncs`` counts the fsync/fdatasync/syncfs calls of the peer's server process tree
    that started inside the measured window (None when they could not be counted).
    """

    name: str
    messages: int
    body_size: int
    msgs_per_s: float
    seconds: float
    fsyncs: int | None
    fsyncs_per_msg: float | None
    notes: str
    #: CPU seconds (user + system) of the server's processes per message, all runs.
    cpu_per_msg: float | None = None


def _body(seq: int, size: int) -> bytes:
    """A message body: its sequence number (8 bytes, big-endian), then zero padding."""
    return seq.to_bytes(8, "big") + bytes(size - 8)


# --------------------------------------------------------------------------- pipeline driver

Worker = Callable[..., dict[str, Any]]


def _worker_main(role: str, fn: Worker, results: Any, go: Any, kwargs: dict[str, Any]) -> None:
    try:
        out = fn(lambda: results.put(("ready", role, None)), go, **kwargs)
        results.put(("done", role, out))
    except BaseException:
        results.put(("error", role, traceback.format_exc()))


def _run_pipeline(
    producer: Worker,
    consumer: Worker,
    kwargs: dict[str, Any],
    timeout: float,
    counter: setup.FsyncCounter | None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Run producer and consumer in two processes; start both at once; return their reports.

    ``counter``'s window opens just before the start signal and closes as soon as both
    reports are in.
    """
    ctx = multiprocessing.get_context("fork")
    results = ctx.Queue()
    go = ctx.Event()
    procs = {
        role: ctx.Process(target=_worker_main, args=(role, fn, results, go, kwargs), daemon=True)
        for role, fn in (("producer", producer), ("consumer", consumer))
    }
    for p in procs.values():
        p.start()
    reports: dict[str, dict[str, Any]] = {}
    ready: set[str] = set()
    deadline = time.monotonic() + timeout
    try:
        while len(reports) < 2:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"run did not finish within {timeout:.0f} s (done: {sorted(reports)})")
            try:
                kind, role, payload = results.get(timeout=min(left, 1.0))
            except queue.Empty:
                dead = [r for r, p in procs.items() if r not in reports and not p.is_alive() and p.exitcode]
                if dead:
                    raise RuntimeError(
                        f"{dead[0]} process died with exit code {procs[dead[0]].exitcode}"
                    ) from None
                continue
            if kind == "error":
                raise RuntimeError(f"{role} failed:\n{payload}")
            if kind == "ready":
                ready.add(role)
                if len(ready) == 2:
                    if counter is not None:
                        counter.begin()
                    go.set()
            else:
                reports[role] = payload
        if counter is not None:
            counter.end()
        return reports["producer"], reports["consumer"]
    finally:
        for p in procs.values():
            p.join(timeout=5)
            if p.is_alive():
                p.terminate()
                p.join(timeout=5)


@dataclass(frozen=True)
class _Run:
    """One measured run of a peer."""

    seconds: float
    confirmed_after: float
    flushes: int | None
    problems: tuple[str, ...]


def _one_run(
    producer: Worker,
    consumer: Worker,
    kwargs: dict[str, Any],
    timeout: float,
    counter: setup.FsyncCounter | None,
) -> tuple[dict[str, Any], dict[str, Any], int | None]:
    """One pipeline run; also the machine's block-device flushes during it (or None)."""
    before = setup.device_flushes()
    prod, cons = _run_pipeline(producer, consumer, kwargs, timeout, counter)
    after = setup.device_flushes()
    flushes = None if before is None or after is None else after - before
    return prod, cons, flushes


def _checked(n: int, prod: dict[str, Any], cons: dict[str, Any], flushes: int | None, *extra: str) -> _Run:
    problems = list(extra)
    if cons["out_of_order"] or cons["received"] != n:
        problems.append(
            f"CHECK FAILED: received {cons['received']} of {n}, out of order {cons['out_of_order']}"
        )
    return _Run(cons["t_end"] - prod["t0"], prod["t_confirmed"] - prod["t0"], flushes, tuple(problems))


def _result(
    name: str,
    n: int,
    body_size: int,
    runs: list[_Run],
    server: setup._Server,
    notes: list[str],
    cpu: float | None = None,
) -> PeerResult:
    """Stop ``server`` (so the counter has its final figures), count fsyncs, build the result.

    The figure is the median run; fsyncs are those of all runs' windows, per run and per
    message.
    """
    server.stop()
    total = None if server.fsyncs is None else server.fsyncs.count()
    median = sorted(runs, key=lambda r: r.seconds)[len(runs) // 2]
    if len(runs) > 1:
        notes.append("runs: " + ", ".join(f"{n / r.seconds:,.0f}" for r in runs) + " msgs/s (median shown)")
    notes.append(f"producer had all {n:,} confirmed after {median.confirmed_after:.2f} s")
    flushes = [r.flushes for r in runs]
    if None not in flushes:
        per_run = sum(f for f in flushes if f is not None) / len(runs)
        notes.append(f"block-device flushes per run, whole machine: {per_run:,.0f}")
    notes.extend(p for r in runs for p in r.problems)
    if server.fsyncs is None:
        notes.append("fsyncs not counted")
    else:
        notes.append(f"fsyncs counted with {server.fsyncs.method}")
    return PeerResult(
        name=name,
        messages=n,
        body_size=body_size,
        msgs_per_s=n / median.seconds,
        seconds=median.seconds,
        fsyncs=None if total is None else round(total / len(runs)),
        fsyncs_per_msg=None if total is None else total / (n * len(runs)),
        notes="; ".join(notes),
        cpu_per_msg=None if cpu is None else cpu / (n * len(runs)),
    )


def _counter_binaries(fsyncs: str) -> list[str]:
    """What to install for the fsync counting method: the named tool; for 'auto', strace
    when neither perf nor strace is there."""
    if fsyncs in ("perf", "strace"):
        return [fsyncs]
    if fsyncs == "auto" and shutil.which("perf") is None:
        return ["strace"]
    return []


# --------------------------------------------------------------------------- RabbitMQ

QUEUE = "openmsmq-bench"


def _rabbit_producer(
    ready: Callable[[], None],
    go: Any,
    *,
    port: int,
    queue: str,
    n: int,
    body_size: int,
    window: int,
    prefetch: int,
    ack_every: int,
    timeout: float,
) -> dict[str, Any]:
    """Publish ``n`` persistent messages keeping at most ``window`` unconfirmed."""
    import pika
    from pika.spec import Basic

    props = pika.BasicProperties(delivery_mode=2)
    st: dict[str, Any] = {"published": 0, "upto": 0, "extra": set(), "nacked": 0}
    out: dict[str, Any] = {}
    chan: list[Any] = []

    def confirmed() -> int:
        return int(st["upto"]) + len(st["extra"])

    def top_up() -> None:
        ch = chan[0]
        target = min(n, confirmed() + window)
        i = st["published"]
        while i < target:
            ch.basic_publish("", queue, _body(i, body_size), props)
            i += 1
        st["published"] = i

    def on_confirm(frame: Any) -> None:
        m = frame.method
        tag = m.delivery_tag
        if isinstance(m, Basic.Nack):
            st["nacked"] += 1
        # Delivery tags are 1..n; confirms may be single or cumulative (multiple=True).
        if m.multiple:
            st["upto"] = max(st["upto"], tag)
            st["extra"] = {t for t in st["extra"] if t > st["upto"]}
        else:
            st["extra"].add(tag)
        while st["upto"] + 1 in st["extra"]:
            st["upto"] += 1
            st["extra"].discard(st["upto"])
        if confirmed() >= n:
            out["t_confirmed"] = time.monotonic()
            chan[0].connection.close()
        else:
            top_up()

    def on_confirm_mode(_frame: Any) -> None:
        ready()
        if not go.wait(timeout):
            raise TimeoutError("no start signal")
        out["t0"], out["t0_wall"] = time.monotonic(), time.time()
        top_up()

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
    if "t_confirmed" not in out:
        raise RuntimeError(f"producer stopped early: {confirmed()} of {n} confirmed")
    if st["nacked"]:
        raise RuntimeError(f"broker nacked {st['nacked']} confirms")
    return out


def _rabbit_consumer(
    ready: Callable[[], None],
    go: Any,
    *,
    port: int,
    queue: str,
    n: int,
    body_size: int,
    window: int,
    prefetch: int,
    ack_every: int,
    timeout: float,
) -> dict[str, Any]:
    """Consume ``n`` messages with manual acks (``multiple=True`` every ``ack_every``)."""
    import pika

    st = {"received": 0, "expected": 0, "out_of_order": 0, "redelivered": 0}
    out: dict[str, Any] = {}

    def on_message(ch: Any, method: Any, _props: Any, body: bytes) -> None:
        seq = int.from_bytes(body[:8], "big")
        if seq != st["expected"] or len(body) != body_size:
            st["out_of_order"] += 1
        st["expected"] = seq + 1
        st["redelivered"] += bool(method.redelivered)
        st["received"] += 1
        if st["received"] % ack_every == 0 or st["received"] == n:
            ch.basic_ack(method.delivery_tag, multiple=True)
        if st["received"] == n:
            out["t_end"], out["t_end_wall"] = time.monotonic(), time.time()
            ch.connection.close()

    def on_channel(ch: Any) -> None:
        ch.basic_qos(
            prefetch_count=prefetch,
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
    if "t_end" not in out:
        raise RuntimeError(f"consumer stopped early: {st['received']} of {n} received")
    return {**out, **st}


def run_rabbitmq(
    n_messages: int = 100_000,
    body_size: int = 256,
    *,
    window: int = 1000,
    prefetch: int = 1000,
    ack_every: int = 100,
    repeat: int = 3,
    fsyncs: str = "auto",
    timeout: float = 600.0,
    log: setup.Log = setup._print,
) -> PeerResult:
    """End-to-end msgs/s through a durable quorum queue on a private RabbitMQ node."""
    setup.ensure_debian_packages(["rabbitmq-server", *_counter_binaries(fsyncs)], log)
    # Imported only once ensure_python_clients has installed it where it was missing.
    setup.ensure_python_clients(log)
    import pika

    server = setup.RabbitMQServer(None, fsyncs, log)
    try:
        log(f"# starting RabbitMQ {setup.debian_version('rabbitmq-server')} on 127.0.0.1:{server.port}")
        server.start(180.0)
        params = pika.ConnectionParameters(host="127.0.0.1", port=server.port)
        kwargs = dict(
            port=server.port,
            n=n_messages,
            body_size=body_size,
            window=window,
            prefetch=prefetch,
            ack_every=ack_every,
            timeout=timeout,
        )
        runs = []
        cpu = 0.0
        for i in range(repeat):
            queue = f"{QUEUE}-{i}"
            conn = pika.BlockingConnection(params)
            conn.channel().queue_declare(queue, durable=True, arguments={"x-queue-type": "quorum"})
            conn.close()
            cpu0 = server.cpu_seconds()
            prod, cons, flushes = _one_run(
                _rabbit_producer, _rabbit_consumer, dict(kwargs, queue=queue), timeout, server.fsyncs
            )
            cpu += server.cpu_seconds() - cpu0
            conn = pika.BlockingConnection(params)
            ch = conn.channel()
            left = ch.queue_declare(queue, passive=True).method.message_count
            ch.queue_delete(queue)
            conn.close()
            extra = [f"{left} messages left in the queue"] if left else []
            if cons["redelivered"]:
                extra.append(f"{cons['redelivered']} redelivered")
            runs.append(_checked(n_messages, prod, cons, flushes, *extra))
        notes = [f"confirm window {window}, prefetch {prefetch}, ack multiple=True every {ack_every}"]
        version = setup.debian_version("rabbitmq-server").split(":")[-1].rsplit("-", 1)[0]
        name = f"RabbitMQ {version} quorum queue"
        return _result(name, n_messages, body_size, runs, server, notes, cpu)
    finally:
        server.stop()
        server.cleanup()


# --------------------------------------------------------------------------- Redis Streams

STREAM = "openmsmq-bench"
GROUP = "bench"


def _redis_producer(
    ready: Callable[[], None],
    go: Any,
    *,
    port: int,
    stream: str,
    n: int,
    body_size: int,
    batch: int,
    count: int,
    timeout: float,
) -> dict[str, Any]:
    """XADD ``n`` entries, ``batch`` per pipeline; a reply means the entry is in the fsynced AOF."""
    import redis

    r = redis.Redis(host="127.0.0.1", port=port, protocol=2, socket_timeout=timeout)
    r.ping()
    ready()
    if not go.wait(timeout):
        raise TimeoutError("no start signal")
    out: dict[str, Any] = {"t0": time.monotonic(), "t0_wall": time.time()}
    for start in range(0, n, batch):
        pipe = r.pipeline(transaction=False)
        for i in range(start, min(n, start + batch)):
            pipe.xadd(stream, {"b": _body(i, body_size)})
        pipe.execute()
    out["t_confirmed"] = time.monotonic()
    return out


def _redis_consumer(
    ready: Callable[[], None],
    go: Any,
    *,
    port: int,
    stream: str,
    n: int,
    body_size: int,
    batch: int,
    count: int,
    timeout: float,
) -> dict[str, Any]:
    """XREADGROUP COUNT ``count``; XACK each batch together with the next read."""
    import redis

    r = redis.Redis(host="127.0.0.1", port=port, protocol=2, socket_timeout=timeout)
    r.ping()
    ready()
    st = {"received": 0, "expected": 0, "out_of_order": 0}
    deadline = time.monotonic() + timeout
    to_ack: list[bytes] = []
    while st["received"] < n:
        if time.monotonic() > deadline:
            raise TimeoutError(f"consumer: {st['received']} of {n} after {timeout:.0f} s")
        if to_ack:
            pipe = r.pipeline(transaction=False)
            pipe.xack(stream, GROUP, *to_ack)
            pipe.xreadgroup(GROUP, "c1", {stream: ">"}, count=count, block=1000)
            _acked, resp = pipe.execute()
        else:
            resp = r.xreadgroup(GROUP, "c1", {stream: ">"}, count=count, block=1000)
        to_ack = []
        for _stream, entries in resp or []:
            for entry_id, fields in entries:
                body = fields[b"b"]
                seq = int.from_bytes(body[:8], "big")
                if seq != st["expected"] or len(body) != body_size:
                    st["out_of_order"] += 1
                st["expected"] = seq + 1
                st["received"] += 1
                to_ack.append(entry_id)
    r.xack(stream, GROUP, *to_ack)  # the reply comes after the AOF fsync (appendfsync always)
    return {"t_end": time.monotonic(), "t_end_wall": time.time(), **st}


def run_redis(
    n_messages: int = 100_000,
    body_size: int = 256,
    *,
    batch: int = 500,
    count: int = 1000,
    repeat: int = 3,
    fsyncs: str = "auto",
    timeout: float = 600.0,
    log: setup.Log = setup._print,
) -> PeerResult:
    """End-to-end msgs/s through one stream and consumer group on a private redis-server."""
    setup.ensure_debian_packages(["redis-server", *_counter_binaries(fsyncs)], log)
    # Imported only once ensure_python_clients has installed it where it was missing.
    setup.ensure_python_clients(log)
    import redis

    server = setup.RedisServer(None, fsyncs, log)
    try:
        log(f"# starting redis-server {setup.debian_version('redis-server')} on 127.0.0.1:{server.port}")
        server.start(30.0)
        r = redis.Redis(host="127.0.0.1", port=server.port, protocol=2)
        kwargs = dict(
            port=server.port, n=n_messages, body_size=body_size, batch=batch, count=count, timeout=timeout
        )
        runs = []
        cpu = 0.0
        for i in range(repeat):
            stream = f"{STREAM}-{i}"
            r.xgroup_create(stream, GROUP, id="0", mkstream=True)
            cpu0 = server.cpu_seconds()
            prod, cons, flushes = _one_run(
                _redis_producer, _redis_consumer, dict(kwargs, stream=stream), timeout, server.fsyncs
            )
            cpu += server.cpu_seconds() - cpu0
            pending = r.xpending(stream, GROUP)["pending"]
            length = r.xlen(stream)
            r.delete(stream)
            extra = [f"{pending} entries still pending"] if pending else []
            if length != n_messages:
                extra.append(f"stream held {length} entries, not {n_messages}")
            runs.append(_checked(n_messages, prod, cons, flushes, *extra))
        r.close()
        notes = [f"XADD {batch} per pipeline, XREADGROUP COUNT {count}, XACK of each batch read"]
        name = f"Redis {server_version(server)} Streams (AOF, appendfsync always)"
        return _result(name, n_messages, body_size, runs, server, notes, cpu)
    finally:
        server.stop()
        server.cleanup()


def server_version(server: setup.RedisServer) -> str:
    """The Redis version, from INFO (the Debian version string is longer)."""
    try:
        return server.version()
    except Exception:
        return setup.debian_version("redis-server")


# --------------------------------------------------------------------------- report


def raw_fsync_line(fsync_seconds: float = 2.0) -> str:
    """The raw write+fsync rate of the filesystem that holds the servers' data, as a line."""
    with tempfile.TemporaryDirectory(prefix="openmsmq-bench-fsync-") as d:
        rate = setup.raw_fsync_rate(Path(d), fsync_seconds)
    return (
        f"# raw write(256 B)+fsync on {tempfile.gettempdir()}: {rate:,.0f} fsyncs/s"
        f" ({fsync_seconds:.0f} s loop, one file, one thread)"
    )


def machine_header(fsync_seconds: float = 2.0) -> str:
    """Date, nproc, load, the slow-disk emulation if on, and the raw write+fsync rate
    (:func:`raw_fsync_line`)."""
    disk = setup.slow_disk_header()
    return (
        f"# {time.strftime('%Y-%m-%d %H:%M:%S %Z')}  nproc={os.cpu_count()}  load={setup.load_average()}\n"
        + (disk + "\n" if disk else "")
        + raw_fsync_line(fsync_seconds)
    )


def format_result(r: PeerResult) -> str:
    """One block of text: the figures, then the notes."""
    fs = "n/a" if r.fsyncs is None else f"{r.fsyncs:,} fsyncs = {r.fsyncs_per_msg:.4f} per message"
    cpu = (
        ""
        if r.cpu_per_msg is None
        else f"\n    CPU per message of the server (user+system): {r.cpu_per_msg * 1e6:.1f} us"
    )
    return (
        f"{r.name}: {r.msgs_per_s:,.0f} msgs/s"
        f"  ({r.messages:,} x {r.body_size} B in {r.seconds:.2f} s)  {fs}{cpu}\n"
        f"    {r.notes}"
    )


def main(argv: list[str] | None = None) -> int:
    """Run the peers named by ``--peers`` and print their figures with the command."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--body-size", type=int, default=256)
    ap.add_argument("--peers", default="rabbitmq,redis", help="comma-separated: rabbitmq, redis")
    ap.add_argument(
        "--fsyncs",
        choices=["auto", "perf", "strace", "none"],
        default="auto",
        help="how to count the servers' fsyncs (auto: perf stat counters, else strace)",
    )
    ap.add_argument("--repeat", type=int, default=3, help="runs per peer on one server (median shown)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds allowed per run")
    ap.add_argument("--disk-flushes", type=float, help=setup.DISK_FLUSHES_HELP)
    args = ap.parse_args(argv)
    if args.disk_flushes:
        setup.run_on_slow_disk(args.disk_flushes, argv)
    if args.body_size < 8:
        ap.error("--body-size must be at least 8 (the body carries its sequence number)")
    # SIGTERM unwinds like Ctrl-C, so every started server is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    command = " ".join([COMMAND, *map(shlex.quote, sys.argv[1:] if argv is None else argv)])
    print(f"# {command}")
    print(machine_header())
    runners: dict[str, Callable[..., PeerResult]] = {"rabbitmq": run_rabbitmq, "redis": run_redis}
    results = []
    try:
        for peer in args.peers.split(","):
            run = runners[peer.strip()]
            results.append(
                run(
                    args.messages,
                    args.body_size,
                    repeat=args.repeat,
                    fsyncs=args.fsyncs,
                    timeout=args.timeout,
                )
            )
            print(format_result(results[-1]), flush=True)
    except KeyboardInterrupt:
        print("# interrupted: the servers this run started have been stopped", file=sys.stderr)
        return 130
    if len(results) == 2:
        a, b = results
        print(f"# ratio {b.name.split()[0]} / {a.name.split()[0]}: {b.msgs_per_s / a.msgs_per_s:.2f}")
    print(f"# load after: {setup.load_average()}")
    print(raw_fsync_line() + " (after the runs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
