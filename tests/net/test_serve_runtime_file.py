"""``openmsmq serve`` starts even when ``runtime.json`` cannot be written.

On a full disk the QM must start to send out what fills its disk, and writing that small
file was the first thing to fail: serve exited with a traceback (ENOSPC in
``write_runtime``). Here ``runtime.tmp`` is a directory, so the write fails the same way.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from openmsmq.runtime import RUNTIME_FILE, write_runtime


def test_write_runtime_reports_a_failure_and_keeps_the_old_file(tmp_path: Path) -> None:
    assert write_runtime(tmp_path, {"pid": 1}) is True
    before = (tmp_path / RUNTIME_FILE).read_text()
    (tmp_path / "runtime.tmp").mkdir()  # the temporary file cannot be written
    assert write_runtime(tmp_path, {"pid": 2}) is False
    assert (tmp_path / RUNTIME_FILE).read_text() == before


def test_serve_starts_and_stops_cleanly_without_its_runtime_file(tmp_path: Path) -> None:
    data = tmp_path / "qm"
    (data / "runtime.tmp").mkdir(parents=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "openmsmq.cli.serve", "--data-dir", str(data), "--listen", "127.0.0.1",
         "--port", "0", "--remote-port", "0", "--no-metrics"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if "serving" in line:
            break
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    text = "".join(lines) + out
    assert proc.returncode == 0, text
    assert "cannot write" in text and "runtime.json" in text
    assert any("serving" in line for line in lines), text
    assert "Traceback" not in text
