"""Readiness and liveness beside the metrics: ``GET /ready`` and ``GET /live`` on the
metrics endpoint's address, for systemd, Docker and Kubernetes probes.

``/live`` answers 200 while the process serves: its event loop runs callbacks (a loop
stuck in a blocking call does not answer within :data:`LOOP_TIMEOUT`: 503, and an
orchestrator restarts the process). ``/ready`` answers 200 once the queue manager's store
is open and answers a read and every listener (MS-MQQB, remote read) is bound, until the
graceful stop begins; else 503 with the reasons, one per line, so that a load balancer
sends no client to a queue manager that cannot serve it. Anything else is the Prometheus
exposition (``/metrics``).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from openmsmq.errors import OpenMSMQError

__all__ = ["LOOP_TIMEOUT", "Health", "queue_manager_health", "serve_http", "with_health"]

#: Seconds the event loop has to run the liveness probe's callback.
LOOP_TIMEOUT = 5.0

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class Health:
    """What ``/ready`` and ``/live`` report. ``checks`` return None when all is well, else
    why not; :meth:`listening` / :meth:`stopping` mark the service's life."""

    def __init__(self) -> None:
        self._checks: list[Callable[[], str | None]] = []
        self._live: Callable[[], str | None] = lambda: None
        self._listening = False
        self._stopping = False

    def add_check(self, check: Callable[[], str | None]) -> None:
        """A readiness condition (None: met; else the reason it is not)."""
        self._checks.append(check)

    def watch_loop(self, call_soon_threadsafe: Callable[..., Any], timeout: float = LOOP_TIMEOUT) -> None:
        """Liveness: the event loop whose ``call_soon_threadsafe`` is given runs a callback
        within ``timeout`` seconds."""

        def live() -> str | None:
            ran = threading.Event()
            try:
                call_soon_threadsafe(ran.set)
            except RuntimeError:  # the loop is closed
                return "the event loop is closed"
            if ran.wait(timeout):
                return None
            return f"the event loop did not run a callback within {timeout:g} s"

        self._live = live

    def listening(self) -> None:
        """Every listener is bound: ready from now on (while the checks pass)."""
        self._listening = True

    def stopping(self) -> None:
        """The graceful stop began: not ready any more."""
        self._stopping = True

    def ready(self) -> list[str]:
        """Why the service is not ready (empty: it is)."""
        if self._stopping:
            return ["stopping"]
        reasons = [] if self._listening else ["the listeners are not bound yet"]
        for check in self._checks:
            try:
                reason = check()
            except Exception as exc:  # a failing check is a reason, never a crashed probe
                reason = f"{type(exc).__name__}: {exc}"
            if reason:
                reasons.append(reason)
        return reasons

    def live(self) -> list[str]:
        """Why the process is not alive (empty: it is)."""
        reason = self._live()
        return [reason] if reason else []


def queue_manager_health(
    read_store: Callable[[], object], call_soon_threadsafe: Callable[..., Any]
) -> Health:
    """The health of ``openmsmq serve``: ready while ``read_store`` (a read of the queue
    manager's store) succeeds and the listeners are bound (:meth:`Health.listening`); live
    while the event loop of ``call_soon_threadsafe`` runs callbacks."""

    def store() -> str | None:
        try:
            read_store()
        except OpenMSMQError as exc:
            return f"store: {exc}"
        return None

    health = Health()
    health.add_check(store)
    health.watch_loop(call_soon_threadsafe)
    return health


def with_health(metrics_app: WsgiApp, health: Health) -> WsgiApp:
    """``metrics_app`` with ``/ready`` and ``/live`` (plain text, 200 or 503) in front."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path not in ("/ready", "/live"):
            return metrics_app(environ, start_response)
        reasons = health.ready() if path == "/ready" else health.live()
        body = ("\n".join(reasons) if reasons else ("ready" if path == "/ready" else "live")) + "\n"
        status = "503 Service Unavailable" if reasons else "200 OK"
        data = body.encode("utf-8", errors="replace")
        headers = [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(data)))]
        headers.append(("Cache-Control", "no-store"))
        start_response(status, headers)
        return [] if environ.get("REQUEST_METHOD") == "HEAD" else [data]

    return app


class _Quiet(WSGIRequestHandler):
    """No access log on stderr (probes come every few seconds)."""

    def log_message(self, format: str, *args: Any) -> None:
        return


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _Server6(_Server):
    address_family = socket.AF_INET6


def serve_http(app: WsgiApp, address: str, port: int) -> tuple[WSGIServer, threading.Thread]:
    """Serve ``app`` on ``address:port`` (port 0: any free one) from a daemon thread.
    Raises OSError when the address cannot be bound."""
    server_class = _Server6 if ":" in address else _Server
    httpd = make_server(address, port, app, server_class, handler_class=_Quiet)
    thread = threading.Thread(target=httpd.serve_forever, name="openmsmq-metrics", daemon=True)
    thread.start()
    return httpd, thread
