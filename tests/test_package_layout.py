"""Where the packages' boundaries are: the queue manager needs nothing of the transfer,
``net/`` holds the asyncio socket drivers only, and ``serve`` is assembled in ``server/``."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import openmsmq.net
import openmsmq.server


def _modules_loaded_by(module: str) -> set[str]:
    code = f"import sys, {module}; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=60)
    return {m for m in out.stdout.split() if m.startswith("openmsmq")}


def test_the_queue_manager_imports_nothing_of_the_transfer() -> None:
    loaded = _modules_loaded_by("openmsmq.qm")
    assert "openmsmq.qm.manager" in loaded
    assert sorted(m for m in loaded if "transfer" in m or m.startswith("openmsmq.protocol")) == []


def test_net_holds_the_socket_drivers_and_server_the_composition_root() -> None:
    assert {m.name for m in pkgutil.iter_modules(openmsmq.net.__path__)} == {"mqqb", "tls"}
    modules = {m.name for m in pkgutil.iter_modules(openmsmq.server.__path__)}
    assert modules == {"ha", "node", "options", "serve"}


def test_the_in_process_client_opens_no_asyncio_server() -> None:
    """The in-process client opens its queue manager through ``server.node`` without the
    services ``serve`` assembles (console, gRPC service, MS-MQQB driver)."""
    loaded = _modules_loaded_by("openmsmq.client.inproc")
    assert "openmsmq.server.node" in loaded
    assert (
        sorted(
            m for m in loaded if m.startswith(("openmsmq.server.serve", "openmsmq.net", "openmsmq.console"))
        )
        == []
    )
