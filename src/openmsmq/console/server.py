"""The console's HTTP(S) listener on serve's event loop (uvicorn), and its assembly.

``serve`` builds a :class:`ConsoleServer` with :func:`start_console` and stops it with
:meth:`ConsoleServer.stop`. The listening socket is bound here (so that a port in use is a
:class:`OSError` the caller turns into a configuration error, and port 0 gives the real
port at once), then handed to uvicorn, which serves it on the running loop; uvicorn's own
signal handling is left out (serve owns SIGTERM and SIGINT).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import uvicorn

from openmsmq.config import Config
from openmsmq.console.actions import Actions
from openmsmq.console.app import ConsoleApp
from openmsmq.console.backend import Backend, TransferHooks
from openmsmq.console.live import STANDALONE, Sampler
from openmsmq.console.pages import Pages, config_rows
from openmsmq.console.sessions import Sessions
from openmsmq.observability.metrics import Metrics
from openmsmq.qm.manager import QueueManager
from openmsmq.remote.auth import load_tokens
from openmsmq.remote.status import TransferSnapshot, outgoing_state, snapshot_of
from openmsmq.transfer.engine import Transfer

__all__ = ["ENDPOINTS", "ConsoleServer", "start_console", "transfer_hooks"]

#: The services of runtime.json the console names as endpoints.
ENDPOINTS = ("mqqb", "remote", "metrics", "console")

log = logging.getLogger("openmsmq.console")


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: serve's loop already handles SIGTERM / SIGINT."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


class ConsoleServer:
    """A running console: its socket, uvicorn server, sampler and backend."""

    def __init__(self, web: ConsoleApp, sock: socket.socket, config: uvicorn.Config, scheme: str) -> None:
        self.web = web
        self.sock = sock
        host, port = sock.getsockname()[:2]
        self.url = f"{scheme}://{host if ':' not in host else f'[{host}]'}:{port}"
        self._server = _Server(config)
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Serve on the running loop; returns once the listener accepts."""
        self.web.sampler.start()
        self._task = asyncio.get_running_loop().create_task(self._server.serve(sockets=[self.sock]))
        for _ in range(500):  # bounded: 5 s
            if self._server.started or self._task.done():
                break
            await asyncio.sleep(0.01)
        if self._task.done():
            self._task.result()  # raises what stopped it
        log.info("web console on %s", self.url)

    async def stop(self) -> None:
        """Stop accepting, end the live streams, close the connections (a second at most
        for requests in progress)."""
        await self.web.sampler.stop()
        self._server.should_exit = True
        if self._task is not None:
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(self._task, 5.0)
        self.web.backend.close()
        with contextlib.suppress(OSError):
            self.sock.close()


def transfer_hooks(
    transfer: Transfer, loop: asyncio.AbstractEventLoop, info: Mapping[str, Any]
) -> TransferHooks:
    """What the console asks of ``transfer``, called on ``loop`` (where the transfer lives);
    ``info``: serve's runtime.json (pid, endpoints)."""

    def snapshot() -> TransferSnapshot:
        return snapshot_of(transfer, time.time() - loop.time(), info, ENDPOINTS)

    return TransferHooks(
        snapshot, transfer.session_status, transfer.suspend_outgoing, transfer.resume_outgoing
    )


def start_console(
    qm: QueueManager,
    config: Config,
    metrics: Metrics,
    hooks: TransferHooks | None,
    config_doc: Mapping[str, Any],
    role: Callable[[], dict[str, Any]] | None = None,
) -> ConsoleServer:
    """Assemble the console of ``config.console`` (not started: :meth:`ConsoleServer.start`);
    ``config_doc``: the effective configuration and its sources (``config show --json``);
    ``role``: the node's role in a highly available pair (``role``, ``epoch``, ``since``,
    as in runtime.json's ``ha``), None for a standalone queue manager.
    Binds its socket: :class:`OSError` when the address is taken. Reads
    ``remote.tokens_file`` (:class:`~openmsmq.errors.ConfigError` when unreadable)."""
    c = config.console
    tokens = load_tokens(config.remote.tokens_file) if config.remote.tokens_file is not None else None
    backend = Backend(qm, hooks)

    def outgoing_states() -> dict[str, str]:
        if hooks is None:
            return {}
        return {o.format_name: outgoing_state(o) for o in hooks.snapshot().outgoing}

    sampler = Sampler(qm, metrics, outgoing_states, role=role or (lambda: dict(STANDALONE)))
    secure = c.tls_cert is not None
    web = ConsoleApp(backend, sampler, Sessions(tokens, c.session_timeout), secure=secure)
    values = {f"{s}.{k}": v for s, keys in config_doc.get("config", {}).items() for k, v in keys.items()}
    identity = {"GUID": str(qm.guid), "computer name": qm.computer_name, "data directory": str(qm.data_dir),
                "configuration file": str(config_doc.get("file") or "-")}  # fmt: skip
    Pages(web, config_rows(values, config_doc.get("sources", {})), identity, str(config.qm.data_dir))
    Actions(web)
    family = socket.AF_INET6 if ":" in c.listen_address else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((c.listen_address, c.port))
        sock.listen(128)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    uv = uvicorn.Config(
        web.app, log_config=None, access_log=False, lifespan="off", proxy_headers=False,
        ssl_certfile=str(c.tls_cert) if c.tls_cert else None,
        ssl_keyfile=str(c.tls_key) if c.tls_key else None,
        timeout_graceful_shutdown=1, server_header=False,
    )  # fmt: skip
    if tokens is None:
        log.warning(
            "web console on %s:%d without tokens: every local user may read, receive, purge and"
            " delete queues through it; set remote.tokens_file (docs/console.md)",
            c.listen_address, sock.getsockname()[1],
        )  # fmt: skip
    return ConsoleServer(web, sock, uv, "https" if secure else "http")
