"""A node of a highly available queue manager: ``openmsmq serve`` with
``store.backend = "postgresql"`` (docs/ha.md).

Every node of the QM runs this with the same configuration (same DSN, same listen
address). The lease (:mod:`openmsmq.ha.lease`, driven by :class:`~openmsmq.ha.driver.LeaseDriver`
with the statements of :mod:`openmsmq.store.lease`) elects the active one:

* a **standby** runs only its metrics endpoint (``/live`` answers, ``/ready`` says why it
  is not ready) and reads the lease;
* the **active** runs one term of :func:`openmsmq.server.serve.serve`: the QM over the store
  fenced with its epoch (every write transaction checks it), its sequences restored from
  the store, the MS-MQQB listener and connectors, the remote-read service, the console.
  If the address is still held (a frozen former active on the same host) it retries the
  bind while it holds the lease;
* losing the lease (not renewed in time, taken over, a fenced write) stops the term at
  once: remote-read sessions and pending receives are aborted (their messages return to
  their queues, for the next active), the listeners close, the store closes; the node is
  a standby again.

Before it does anything, a node compares the settings every node must share
(:data:`SHARED_SETTINGS`) with those of the node holding the lease, and refuses to start
(naming the setting, writing nothing) when they differ.
"""

from __future__ import annotations

import asyncio
import errno
import functools
import logging
import os
import signal
import socket
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from psycopg import conninfo

from openmsmq.config import Config, HaConfig, LoadedConfig, config_document, config_keys
from openmsmq.datadir import private_dir
from openmsmq.errors import ConfigError
from openmsmq.ha.driver import LeaseDriver, LeaseStatus
from openmsmq.ha.lease import LeaseConfig, LeaseCore
from openmsmq.net.mqqb import MQQBNode
from openmsmq.observability.health import Health
from openmsmq.observability.metrics import Metrics, default_metrics, start_metrics_from_config
from openmsmq.qm.manager import QueueManager
from openmsmq.runtime import remove_runtime, write_runtime
from openmsmq.server.options import store_options
from openmsmq.server.serve import Term, lock_data_dir, serve
from openmsmq.store.backend import StoreBackend
from openmsmq.store.lease import PgLease, describe_holder, holder_settings
from openmsmq.store.pg.db import PgStore
from openmsmq.store.queues import init_qm_state

__all__ = ["SHARED_SETTINGS", "HaServing", "lease_config", "serve_ha", "shared_settings"]

log = logging.getLogger("openmsmq.ha")
_DOTTED = tuple(k.dotted for k in config_keys())

#: Settings every node of one queue manager must have alike: its name in format names and
#: the address its peers send to.
SHARED_SETTINGS = ("qm.name", "mqqb.listen_address", "mqqb.port")
#: While the address is held by another process (a frozen former active on this host),
#: the bind is tried again this often, as long as the lease is held.
BIND_RETRY = 0.5


def lease_config(ha: HaConfig) -> LeaseConfig:
    """The lease core's timing from ``[ha]``: the active stops a quarter of the lease
    before it can expire; a request may take a third of it (at most 1 s)."""
    d = ha.lease_duration
    return LeaseConfig(
        duration=d,
        renew_interval=ha.renew_interval,
        margin=d / 4,
        poll_interval=ha.poll_interval,
        retry_interval=min(ha.poll_interval, ha.renew_interval),
        request_timeout=min(1.0, d / 3),
    )


def shared_settings(config: Config) -> dict[str, str]:
    """The values of :data:`SHARED_SETTINGS` (as holder settings: no blanks)."""
    values = {
        "qm.name": (config.qm.name or socket.gethostname()).casefold(),
        "mqqb.listen_address": config.mqqb.listen_address,
        "mqqb.port": str(config.mqqb.port),
    }
    return {k: (v.replace(" ", "_") or "-") for k, v in values.items()}


def check_settings(mine: dict[str, str], holder: str | None) -> None:
    """ConfigError naming the first shared setting in which this node differs from the
    node that holds (or last held) the lease."""
    theirs = holder_settings(holder)
    for key in SHARED_SETTINGS:
        if key in theirs and theirs[key] != mine.get(key):
            node = (holder or "").split(" ", 1)[0]
            raise ConfigError(
                key,
                f"this node has {mine.get(key)!r}, the node holding the lease ({node}) has"
                f" {theirs[key]!r}: every node of the queue manager must share it; nothing was written",
            )


def fenced_dsn(dsn: str, lease_duration: float) -> str:
    """``dsn`` whose sessions end a transaction left idle for half a lease: a node frozen in
    the middle of a write transaction holds the lease row FOR SHARE, and a takeover waits
    for that lock; PostgreSQL then ends the session instead of waiting for the node."""
    params = conninfo.conninfo_to_dict(dsn)
    ms = max(1000, int(lease_duration * 500))
    extra = f"-c idle_in_transaction_session_timeout={ms}"
    params["options"] = f"{params['options']} {extra}" if params.get("options") else extra
    return conninfo.make_conninfo("", **params)


def _identify(dsn: str) -> uuid.UUID:
    """The QM GUID of the database; the first node of a new database creates it."""
    store = PgStore(dsn, threaded=False)
    try:
        if store.qm_guid is not None:
            return store.qm_guid
        return store.write(init_qm_state(uuid.uuid4(), int(time.time())))
    finally:
        store.close()


def _address_in_use(exc: BaseException) -> bool:
    cause = exc.__cause__
    return isinstance(exc, ConfigError) and isinstance(cause, OSError) and cause.errno == errno.EADDRINUSE


class HaServing:
    """The serving part of a node: one :func:`serve` term per epoch held."""

    def __init__(
        self,
        config: Config,
        qm_guid: uuid.UUID,
        metrics: Metrics,
        *,
        ready: Callable[[MQQBNode, QueueManager], None] | None = None,
        loaded: LoadedConfig | None = None,
    ) -> None:
        self.config = config
        self.qm_guid = qm_guid
        self.metrics = metrics
        self.ready = ready
        self.loaded = loaded
        self.driver: LeaseDriver | None = None
        #: The node's metrics endpoint (for the runtime document).
        self.metrics_url: str | None = None
        #: A term serves (its listeners are bound).
        self.serving = False
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None

    def ha_info(self) -> dict[str, Any]:
        """The node's role for runtime.json and ``openmsmq status``."""
        st = self.driver.status if self.driver is not None else None
        return _ha_info(st)

    def _open_store(self, epoch: int) -> StoreBackend:
        opts = store_options(self.config)
        store = PgStore(
            fenced_dsn(self.config.store.dsn, self.config.ha.lease_duration),
            fencing_epoch=epoch,
            expected_guid=self.qm_guid,
            max_batch_ops=opts.max_batch_ops,
            qm_quota=opts.qm_quota_bytes,
        )
        return store

    def _holds(self, epoch: int) -> bool:
        d = self.driver
        return d is not None and d.active and d.status.epoch == epoch

    async def start_serving(self, epoch: int) -> None:
        loop = asyncio.get_running_loop()
        while True:
            stop = self._stop = asyncio.Event()
            started: asyncio.Future[None] = loop.create_future()

            def on_ready(node: MQQBNode, qm: QueueManager, started: asyncio.Future[None] = started) -> None:
                if not started.done():
                    started.set_result(None)
                if self.ready is not None:
                    self.ready(node, qm)

            term = Term(lambda: self._open_store(epoch), stop, self.metrics, self.ha_info, self.metrics_url)
            task = self._task = asyncio.create_task(
                serve(self.config, ready=on_ready, loaded=self.loaded, term=term)
            )
            await asyncio.wait([started, task], return_when=asyncio.FIRST_COMPLETED)
            if started.done():
                self.serving = True
                log.info("serving queue manager %s with lease epoch %d", self.qm_guid, epoch)
                task.add_done_callback(functools.partial(self._term_ended, stop, epoch))
                return
            self._task = None
            exc = task.exception()
            if exc is not None and _address_in_use(exc) and self._holds(epoch):
                log.warning("%s; trying again in %g s (a former active may still hold it)", exc, BIND_RETRY)
                await asyncio.sleep(BIND_RETRY)
                if self._holds(epoch):
                    continue
            raise exc if exc is not None else RuntimeError("serve ended before it was ready")

    def _term_ended(self, stop: asyncio.Event, epoch: int, task: asyncio.Task[None]) -> None:
        """A term that ends without being told to (its serve failed) gives the lease up:
        holding it without serving would keep every other node out."""
        if stop.is_set() or self.driver is None:
            return
        self.serving = False
        exc = None if task.cancelled() else task.exception()
        log.error("the term of epoch %d ended by itself: %s", epoch, exc)
        self.driver.give_up(epoch, f"serving ended: {exc}")

    async def stop_serving(self, epoch: int, reason: str) -> None:
        self.serving = False
        if self._stop is not None:
            self._stop.set()
        task, self._task = self._task, None
        if task is not None:
            try:
                await task
            except Exception as exc:
                log.warning("the term of epoch %d ended with %s: %s", epoch, type(exc).__name__, exc)
        log.info("stopped serving (epoch %d): %s", epoch, reason)


def _ha_info(st: LeaseStatus | None) -> dict[str, Any]:
    if st is None:
        return {"role": "standby", "epoch": None, "since": None, "holder": None, "last_step_down": None}
    return {
        "role": st.role,
        "epoch": st.epoch,
        "since": st.since,
        "holder": st.holder.split(" ", 1)[0],
        "last_step_down": st.last_step_down,
    }


async def serve_ha(
    config: Config,
    *,
    ready: Callable[[MQQBNode, QueueManager], None] | None = None,
    loaded: LoadedConfig | None = None,
) -> None:
    """Run one node of the QM on PostgreSQL until SIGTERM / SIGINT (see the module docstring).
    A stop while active steps down and releases the lease: a standby takes over at once."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()

    def on_signal(sig: signal.Signals) -> None:
        if stop.is_set():
            log.warning("%s: already stopping", sig.name)
            return
        log.info("%s: stopping", sig.name)
        stop.set()

    data_dir = private_dir(config.qm.data_dir)
    lock = lock_data_dir(Path(data_dir))
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)
    metrics_server = None
    lease: PgLease | None = None
    try:
        guid = await loop.run_in_executor(None, _identify, config.store.dsn)
        lcfg = lease_config(config.ha)
        lease = PgLease(config.store.dsn, guid, statement_timeout=lcfg.request_timeout)
        mine = shared_settings(config)
        check_settings(mine, (await lease.read()).holder)
        metrics = default_metrics()
        serving = HaServing(config, guid, metrics, ready=ready, loaded=loaded)
        core = LeaseCore(lcfg, describe_holder(socket.gethostname(), os.getpid(), mine))
        driver = LeaseDriver(core, lease, serving)
        serving.driver = driver
        health = Health()
        health.watch_loop(loop.call_soon_threadsafe)

        def role_check() -> str | None:
            if serving.serving and driver.active:
                return None
            st = driver.status
            return f"{st.role} node of queue manager {guid} (lease epoch {st.epoch}): not serving"

        health.add_check(role_check)
        try:
            metrics_server = start_metrics_from_config(config.metrics, metrics, health)
        except OSError as exc:
            raise ConfigError(
                "metrics.port",
                f"cannot listen on {config.metrics.listen_address}:{config.metrics.port}: {exc}",
            ) from exc
        health.listening()
        serving.metrics_url = metrics_server.url if metrics_server is not None else None
        document = config_document(loaded or LoadedConfig(config, dict.fromkeys(_DOTTED, "caller")))

        def standby_runtime(_status: LeaseStatus | None = None) -> None:
            if serving.serving:
                return  # the term's own runtime document is in place
            write_runtime(data_dir, {
                "pid": os.getpid(), "qm_guid": str(guid), "mqqb": None, "remote": None,
                "metrics": metrics_server.url if metrics_server is not None else None,
                "config": document, "ha": serving.ha_info(),
            })  # fmt: skip

        driver.on_change.append(standby_runtime)
        standby_runtime()
        log.info("node of queue manager %s: standby, waiting for the lease (%s)", guid, core.holder)
        run = asyncio.create_task(driver.run())
        stopping = asyncio.create_task(stop.wait())
        await asyncio.wait([run, stopping], return_when=asyncio.FIRST_COMPLETED)
        driver.shutdown()
        await run
        stopping.cancel()
    finally:
        if lease is not None:
            await lease.close()
        if metrics_server is not None:
            metrics_server.stop()
        remove_runtime(data_dir)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        if lock is not None:
            os.close(lock)
    log.info("stopped")
