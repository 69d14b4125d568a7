"""A second ``openmsmq serve`` over a data directory already served is refused.

Before, it started: two processes transferred the same outgoing queues and took
LookupIdentifiers from reservations of their own in one store.
"""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from openmsmq.runtime import SERVE_LOCK


def _serve(data: Path, address: str) -> list[str]:
    return [sys.executable, "-m", "openmsmq.cli.serve", "--data-dir", str(data), "--listen", address,
            "--port", "0", "--remote-port", "0", "--no-metrics"]  # fmt: skip


def test_a_second_serve_of_one_data_directory_is_refused(tmp_path: Path) -> None:
    data = tmp_path / "qm"
    out = subprocess.PIPE
    first = subprocess.Popen(_serve(data, "127.0.0.1"), stdout=out, stderr=subprocess.STDOUT, text=True)
    assert first.stdout is not None
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = first.stdout.readline()
            if not line or "serving" in line:
                break
        second = subprocess.run(_serve(data, "127.0.0.2"), capture_output=True, text=True, timeout=60)
        assert second.returncode == 1, second.stderr
        assert f"qm.data_dir: {data} is served by another openmsmq serve (pid {first.pid})" in second.stderr
        assert "Traceback" not in second.stderr
        assert first.poll() is None  # the first one serves on
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=60)
    assert first.returncode == 0
    # Its lock went with it: the directory can be served again.
    fd = os.open(data / SERVE_LOCK, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)
