"""``/ready`` and ``/live`` beside ``/metrics``: on a real ``openmsmq serve`` (200 once the
store is open and the listeners are bound), and each reason for 503 on a real endpoint."""

from __future__ import annotations

import asyncio
import urllib.error
import urllib.request
from pathlib import Path

from openmsmq.client import connect
from openmsmq.observability.health import Health, queue_manager_health
from openmsmq.observability.metrics import default_metrics, start_metrics_server
from openmsmq.qm import QueueManager
from openmsmq.runtime import live_runtime
from tests.serve_proc import A, ServeProcess, free_port


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_ready_and_live_on_a_running_serve(tmp_path: Path) -> None:
    data = tmp_path / "qm"
    connect(str(data)).close()
    serve = ServeProcess(data, A, free_port(A), tmp_path / "serve.log")
    try:
        serve.start("runtime")
        info = live_runtime(data)
        assert info is not None
        base = str(info["metrics"]).removesuffix("/metrics")
        assert _get(base + "/ready") == (200, "ready\n")
        assert _get(base + "/live") == (200, "live\n")
        status, metrics = _get(base + "/metrics")
        assert status == 200 and "openmsmq" in metrics
    finally:
        serve.close()


def test_each_reason_for_not_ready_and_not_live(tmp_path: Path) -> None:
    qm = QueueManager(tmp_path / "qm")
    idle = asyncio.new_event_loop()  # never run: its callbacks never happen
    health = queue_manager_health(lambda: qm.get_queue("system$;deadletter"), idle.call_soon_threadsafe)
    health.watch_loop(idle.call_soon_threadsafe, timeout=0.2)
    server = start_metrics_server(default_metrics(), "127.0.0.1", 0, health)
    base = f"http://127.0.0.1:{server.port}"
    try:
        assert _get(base + "/ready") == (503, "the listeners are not bound yet\n")
        health.listening()
        assert _get(base + "/ready") == (200, "ready\n")
        assert _get(base + "/live") == (503, "the event loop did not run a callback within 0.2 s\n")
        qm.close()
        status, body = _get(base + "/ready")
        assert status == 503 and body.startswith("store: MQ_ERROR_SERVICE_NOT_AVAILABLE")
        health.stopping()
        assert _get(base + "/ready") == (503, "stopping\n")
    finally:
        server.stop()
        idle.close()
        qm.close()


def test_live_answers_while_the_loop_runs() -> None:
    async def main() -> None:
        health = Health()
        health.watch_loop(asyncio.get_running_loop().call_soon_threadsafe)
        health.listening()
        server = start_metrics_server(default_metrics(), "127.0.0.1", 0, health)
        try:
            got = await asyncio.to_thread(_get, f"http://127.0.0.1:{server.port}/live")
            assert got == (200, "live\n")
        finally:
            server.stop()

    asyncio.run(main())
