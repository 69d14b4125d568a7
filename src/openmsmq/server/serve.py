"""Run a queue manager with its services until told to stop (``openmsmq serve``): the
queue manager and its transfer (:func:`~openmsmq.server.node.open_node`), metrics, the
remote-read gRPC service, the web console and the MS-MQQB listener, with the process
tuning (cyclic GC, open-file limit) and ``runtime.json``."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from openmsmq.config import Config, LoadedConfig, config_document, config_keys
from openmsmq.console import ConsoleServer, start_console, transfer_hooks
from openmsmq.errors import ConfigError, quoted
from openmsmq.net.mqqb import MQQBNode
from openmsmq.observability.health import queue_manager_health
from openmsmq.observability.metrics import Metrics, default_metrics, start_metrics_from_config
from openmsmq.qm.manager import QueueManager
from openmsmq.qm.names import DEADLETTER
from openmsmq.qm.store_choice import StoreChoice
from openmsmq.remote.server import start_remote_server
from openmsmq.remote.status import TransferSnapshot, snapshot_of
from openmsmq.runtime import SERVE_LOCK, read_runtime, remove_runtime, take_serve_lock, write_runtime
from openmsmq.server.node import open_node
from openmsmq.server.options import net_config, store_options, transfer_config
from openmsmq.store.backend import StoreBackend
from openmsmq.transfer.engine import Transfer
from openmsmq.transfer.sequences import SequenceReset
from openmsmq.wire.ids import TxSequenceId

__all__ = [
    "GC_THRESHOLDS",
    "Term",
    "lock_data_dir",
    "loop_factory",
    "outgoing_control",
    "postgresql_store",
    "run",
    "sequence_resetter",
    "serve",
    "transfer_snapshot",
    "tune_gc",
]

log = logging.getLogger("openmsmq.serve")
#: Every configuration key: the sources of a configuration given without them.
_DOTTED = tuple(k.dotted for k in config_keys())

#: Cyclic-GC thresholds while serving (CPython's defaults are 700, 10, 10). A sender
#: retains a position object per message until its OrderAck (hundreds of thousands in
#: flight) and both sides allocate a few short-lived values per message, so with the
#: defaults the collector runs a young collection every few hundred allocations and
#: re-traverses the retained window often, a sizeable share of the transfer's CPU
#: (gc.callbacks shows it). Reference counting frees all of these values; the collector
#: is only for rare cycles, so it can run far less often.
GC_THRESHOLDS = (50_000, 50, 100)


def tune_gc() -> None:
    """Move what exists at start-up out of the collector's sight and raise its thresholds."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


def transfer_snapshot(
    transfer: Transfer, loop: asyncio.AbstractEventLoop, info: dict[str, Any], timeout: float = 5.0
) -> Callable[[], TransferSnapshot]:
    """A thread-safe provider of ``transfer``'s live status for the remote-read ``Status``
    rpc: the snapshot is taken on ``loop`` (the transfer is not thread-safe), with the
    offset from the loop's clock to the wall clock and the services of ``info``
    (runtime.json)."""

    async def on_loop() -> TransferSnapshot:
        return snapshot_of(transfer, time.time() - loop.time(), info, ("mqqb", "remote", "metrics"))

    def provider() -> TransferSnapshot:
        return asyncio.run_coroutine_threadsafe(on_loop(), loop).result(timeout)

    return provider


def sequence_resetter(
    transfer: Transfer, loop: asyncio.AbstractEventLoop, timeout: float = 5.0
) -> Callable[[uuid.UUID, str, int, int], tuple[tuple[int, int], tuple[int, int]]]:
    """A thread-safe resetter of ``transfer``'s incoming sequences for the remote-read
    ``ResetIncomingSequence`` rpc (``openmsmq sequence reset``): run on ``loop``, where the
    transfer lives. (TxSequenceID, number) ``(0, 0)`` forgets the sequence's state."""

    async def on_loop(source: uuid.UUID, destination: str, sid: int, number: int) -> SequenceReset:
        position = (TxSequenceId.from_int(sid), number)
        return transfer.reset_incoming_sequence(source, destination, position, loop.time())

    def reset(
        source: uuid.UUID, destination: str, sid: int, number: int
    ) -> tuple[tuple[int, int], tuple[int, int]]:
        job = asyncio.run_coroutine_threadsafe(on_loop(source, destination, sid, number), loop)
        done = job.result(timeout)
        return (done.before[0].value, done.before[1]), (done.after[0].value, done.after[1])

    return reset


def outgoing_control(
    transfer: Transfer, loop: asyncio.AbstractEventLoop, timeout: float = 5.0
) -> Callable[[str, bool], None]:
    """A thread-safe suspend (True) / resume (False) of ``transfer``'s outgoing queues for
    the remote-read ``SetOutgoingState`` rpc (``openmsmq outgoing suspend|resume``)."""

    async def on_loop(format_name: str, suspended: bool) -> None:
        if suspended:
            transfer.suspend_outgoing(format_name)
        else:
            transfer.resume_outgoing(format_name)

    def control(format_name: str, suspended: bool) -> None:
        asyncio.run_coroutine_threadsafe(on_loop(format_name, suspended), loop).result(timeout)

    return control


@dataclass
class Term:
    """One term of the active node of a highly available queue manager
    (:mod:`openmsmq.server.ha`): :func:`serve` runs the QM over ``open_store()`` (the
    PostgreSQL store fenced with the lease's epoch) until ``stop`` is set, with the
    process's ``metrics`` (whose endpoint the HA node runs in every role) and ``ha_info``
    in its runtime document."""

    open_store: Callable[[], StoreBackend]
    stop: asyncio.Event
    metrics: Metrics
    ha_info: Callable[[], dict[str, Any]]
    #: The URL of the node's metrics endpoint (None: off).
    metrics_url: str | None = None


def postgresql_store(config: Config) -> str | None:
    """The DSN of the PostgreSQL store the QM of ``config`` opens (its configuration, or the
    store its data directory names), or None for SQLite."""
    choice = StoreChoice(Path(config.qm.data_dir), store_options(config))
    return choice.dsn if choice.backend == "postgresql" else None


def lock_data_dir(data_dir: Path) -> int | None:
    """Take the exclusive lock of ``data_dir`` for this process's lifetime (the descriptor
    is returned; closing it releases the lock, as the process's end does). A second
    ``serve`` over the same store would transfer the same outgoing queues: refused with
    a :class:`ConfigError` naming ``qm.data_dir``. A lock file that cannot be created
    (a read-only or full file system) is logged, and serving goes on without it."""
    try:
        fd = take_serve_lock(data_dir)
    except OSError as exc:
        log.warning("cannot open %s (%s): serving without the lock that keeps a second serve out",
                    data_dir / SERVE_LOCK, exc.strerror or exc)  # fmt: skip
        return None
    if fd is None:
        info = read_runtime(data_dir) or {}
        who = f" (pid {info['pid']})" if isinstance(info.get("pid"), int) else ""
        raise ConfigError("qm.data_dir", f"{data_dir} is served by another openmsmq serve{who}") from None
    return fd


@contextlib.contextmanager
def _listening(key: str, address: str, port: int) -> Iterator[None]:
    """Turn a failure to bind ``address:port`` into a :class:`ConfigError` naming ``key``
    (``openmsmq serve`` prints it and exits with status 1 instead of a traceback)."""
    try:
        yield
    except OSError as exc:
        raise ConfigError(key, f"cannot listen on {address}:{port}: {exc.strerror or exc}") from exc


async def serve(
    config: Config,
    *,
    ready: Callable[[MQQBNode, QueueManager], None] | None = None,
    loaded: LoadedConfig | None = None,
    term: Term | None = None,
) -> None:
    """Open the QM over ``config.qm.data_dir`` and run its services until SIGTERM / SIGINT.

    ``term``: serve one term of a highly available QM instead (its store, its stop event;
    the HA node holds the data directory's lock, the signals and the metrics endpoint).

    Started in this order and stopped in reverse: the queue manager (store), the Prometheus
    endpoint (``[metrics]``), the remote-read gRPC service (``[remote]``), the MS-MQQB
    listener and connectors. While running, ``<data_dir>/runtime.json`` tells other
    programs (the CLI, scripts) where each service listens (:mod:`openmsmq.runtime`), and
    the effective configuration with where each value came from (``loaded``: the sources
    ``openmsmq serve`` found; without it every value is marked as given by the caller),
    which ``openmsmq --qm DIR config show`` prints.

    Graceful stop on SIGTERM / SIGINT (also one that arrives while starting):
    ``runtime.json`` is marked ``"state": "stopping"``; the remote-read service stops
    accepting calls, gives calls in progress a second and aborts its clients' open
    transactions (their messages go back to their queues); the MS-MQQB node stops
    accepting and reading, flushes its store work and closes its sessions
    (:meth:`MQQBNode.stop`); the metrics endpoint stops; the store is closed (every
    commit is durable already); ``runtime.json`` is removed. The process then exits
    with status 0. A second signal while stopping is logged and ignored.
    """
    loop = asyncio.get_running_loop()
    stop = term.stop if term is not None else asyncio.Event()
    if term is None and postgresql_store(config) is not None:
        # Two unfenced serves on one database would both write: a QM on PostgreSQL is
        # served under its lease (run() -> openmsmq.server.ha).
        raise ConfigError("store.backend", "a queue manager on PostgreSQL is served under its lease (run())")

    def on_signal(sig: signal.Signals) -> None:
        if stop.is_set():
            log.warning("%s: already stopping", sig.name)
            return
        log.info("%s: stopping", sig.name)
        stop.set()

    lock = None
    if term is None:
        lock = lock_data_dir(Path(config.qm.data_dir))  # before anything is opened or bound
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, on_signal, sig)
    metrics = term.metrics if term is not None else default_metrics()
    opened = open_node(
        config.qm.data_dir,
        transfer=transfer_config(config),
        now=loop.time(),
        computer_name=config.qm.name or None,
        expire_interval=1.0,
        metrics=metrics,
        store_options=store_options(config),
        store=term.open_store() if term is not None else None,
    )
    qm = opened.qm
    transfer = opened.transfer
    assert transfer is not None
    collector = metrics.attach_queue_manager(qm)
    health = queue_manager_health(lambda: qm.get_queue(DEADLETTER), loop.call_soon_threadsafe)
    metrics_server = None
    remote = None
    node: MQQBNode | None = None
    console: ConsoleServer | None = None
    try:
        if term is None:
            with _listening("metrics.port", config.metrics.listen_address, config.metrics.port):
                metrics_server = start_metrics_from_config(config.metrics, metrics, health)
        if config.remote.enabled:
            with _listening("remote.port", config.remote.listen_address, config.remote.port):
                remote = start_remote_server(
                    qm, config, metrics=metrics, event_loop=loop_factory(config.qm.event_loop)
                )
        tune_gc()
        m = config.mqqb
        node = MQQBNode(transfer, net_config(config))
        with _listening("mqqb.port" if not m.tls else "mqqb.port / mqqb.tls_port", m.listen_address, m.port):
            await node.start()
        host, port = node.address
        document = config_document(loaded or LoadedConfig(config, dict.fromkeys(_DOTTED, "caller")))
        info = {
            "pid": os.getpid(),
            "qm_guid": str(qm.guid),
            "mqqb": f"{host}:{port}",
            "remote": remote.target if remote is not None else None,
            "metrics": metrics_server.url
            if metrics_server is not None
            else term.metrics_url
            if term
            else None,
            "config": document,
        }
        if term is not None:
            info["ha"] = term.ha_info()
        if config.console.enabled:  # the web console (docs/console.md), on this loop
            with _listening("console.port", config.console.listen_address, config.console.port):
                console = start_console(
                    qm, config, metrics, transfer_hooks(transfer, loop, info), document,
                    term.ha_info if term is not None else None,
                )  # fmt: skip
            await console.start()
            info["console"] = console.url
        if not write_runtime(config.qm.data_dir, info):
            log.error(
                "cannot write %s/runtime.json (disk full?): serving anyway; programs given this"
                " data directory open its store directly until it is written",
                config.qm.data_dir,
            )
        if remote is not None:
            remote.status_provider = transfer_snapshot(transfer, loop, info)
            remote.sequence_resetter = sequence_resetter(transfer, loop)
            remote.outgoing_control = outgoing_control(transfer, loop)
        log.info(
            "queue manager %s serving %s: mqqb %s:%d, remote %s, metrics %s",
            qm.guid, config.qm.data_dir, host, port, info["remote"], info["metrics"],
        )  # fmt: skip
        health.listening()
        if ready is not None:
            ready(node, qm)
        await stop.wait()
        health.stopping()
        started = loop.time()
        write_runtime(config.qm.data_dir, {**info, "state": "stopping"})  # best effort
        if remote is not None:
            remote.status_provider = None  # the loop is about to wait in the stops below
            remote.sequence_resetter = None
            remote.outgoing_control = None
            # Stop accepting remote calls and abort the clients' transactions first, so
            # that no commit races the flush below (blocking: run off the loop).
            await loop.run_in_executor(None, remote.stop)
            remote = None
        if console is not None:
            await console.stop()
            console = None
        await node.stop()
        node = None
        log.info("stopped the services in %.2f s", loop.time() - started)
    finally:
        if console is not None:
            with contextlib.suppress(Exception):
                await console.stop()
        if node is not None:  # failed while starting or stopping
            with contextlib.suppress(Exception):
                await node.stop(flush_timeout=1.0)
        if remote is not None:
            remote.stop()
        if metrics_server is not None:
            metrics_server.stop()
        metrics.detach(collector)
        qm.close()
        remove_runtime(config.qm.data_dir)
        if term is None:
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.remove_signal_handler(sig)
        if lock is not None:
            os.close(lock)  # releases the lock
    log.info("stopped")


def loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """The event loop constructor ``qm.event_loop`` names: ``"uvloop"`` (libuv) or
    ``"asyncio"`` (the standard library's). uvloop that cannot be imported (a platform
    without its wheel) falls back to asyncio, logged as a warning: the QM still serves.

    The remote-read service runs a loop of the same kind in a thread of its own
    (:mod:`openmsmq.remote.server`)."""
    if name == "uvloop":
        try:
            import uvloop
        except ImportError as exc:
            log.warning("qm.event_loop = uvloop, but uvloop cannot be imported (%s): running asyncio", exc)
        else:
            return uvloop.new_event_loop
    elif name != "asyncio":
        raise ConfigError("qm.event_loop", f"unknown event loop {quoted(name)} (uvloop or asyncio)")
    return asyncio.new_event_loop


def run(
    config: Config,
    *,
    ready: Callable[[MQQBNode, QueueManager], None] | None = None,
    loaded: LoadedConfig | None = None,
) -> None:
    """Run :func:`serve` to its end on the event loop of ``config.qm.event_loop``; a QM on
    PostgreSQL runs as a node of a highly available QM (:func:`openmsmq.server.ha.serve_ha`)."""
    dsn = postgresql_store(config)
    with asyncio.Runner(loop_factory=loop_factory(config.qm.event_loop)) as runner:
        if dsn is not None:
            from openmsmq.server.ha import serve_ha

            ha_config = replace(config, store=replace(config.store, backend="postgresql", dsn=dsn))
            runner.run(serve_ha(ha_config, ready=ready, loaded=loaded))
        else:
            runner.run(serve(config, ready=ready, loaded=loaded))
