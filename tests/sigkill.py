"""The SIGKILL step of the crash tests: run a driver child until its log shows enough
progress, then kill it at once (SIGKILL)."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path


def run_and_kill(
    driver: Path, args: list[str], progress: Callable[[], int], want: int, *, pause: float = 0.0
) -> None:
    """Start ``python driver *args``; once ``progress()`` reaches ``want`` (or after 30 s),
    wait ``pause`` seconds and SIGKILL it. Fails if the child exited by itself."""
    proc = subprocess.Popen(
        [sys.executable, str(driver), *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and proc.poll() is None:
        if progress() >= want:
            break
        time.sleep(0.002)
    time.sleep(pause)
    proc.kill()
    _, err = proc.communicate()
    assert proc.returncode == -9, f"driver exited by itself: {err.decode()[-2000:]}"
