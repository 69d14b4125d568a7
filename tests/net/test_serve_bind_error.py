"""``openmsmq serve`` whose port is taken exits with status 1 and one line naming the key."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

from openmsmq.runtime import RUNTIME_FILE


def test_a_taken_port_is_a_configuration_error_naming_the_key(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [sys.executable, "-m", "openmsmq.cli.serve", "--data-dir", str(tmp_path / "qm"),
             "--listen", "127.0.0.1", "--port", "0", "--remote-port", "0", "--metrics-port", str(port)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert f"error: configuration metrics.port: cannot listen on 127.0.0.1:{port}" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "qm" / RUNTIME_FILE).exists()
