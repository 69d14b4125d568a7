"""Test support: ``openmsmq serve`` subprocesses on loopback addresses, and read-only
looks at a queue manager's store while it runs.

MS-MQQB peers listen on the same port, so QM A binds 127.0.0.1 and QM B 127.0.0.2 with
one port free on both (:func:`free_port`). Every wait here is bounded.
"""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Literal

from openmsmq.runtime import live_runtime

A, B = "127.0.0.1", "127.0.0.2"

#: Settings every test QM gets: OrderAcks at least every second (MaximumOrderAckDelay)
#: and quick reconnects, so that transfers drain within the tests' bounds.
TEST_ENV = {
    "OPENMSMQ_PROTOCOL_MAXIMUM_ORDER_ACK_DELAY": "1",
    "OPENMSMQ_MQQB_CONNECT_BACKOFF_MIN": "0.05",
    "OPENMSMQ_MQQB_CONNECT_BACKOFF_MAX": "0.5",
}


def free_port(*hosts: str) -> int:
    """A TCP port free on every one of ``hosts`` (default A and B); bounded tries."""
    hosts = hosts or (A, B)
    for _ in range(50):
        with socket.socket() as s:
            s.bind((hosts[0], 0))
            port = int(s.getsockname()[1])
        try:
            for host in hosts[1:]:
                with socket.socket() as s2:
                    s2.bind((host, port))
            return port
        except OSError:
            continue
    raise RuntimeError("no free port")


class ServeProcess:
    """One ``openmsmq serve`` subprocess that can be killed, stopped and started again.

    ``extra`` are more ``serve`` arguments; ``env`` overrides :data:`TEST_ENV`. The log
    file collects every start's output (appended, each start marked).
    """

    def __init__(
        self, data_dir: Path, address: str, port: int, log: Path, *extra: str,
        env: Mapping[str, str] | None = None,
    ) -> None:  # fmt: skip
        self.data_dir, self.address, self.port, self.log, self.extra = data_dir, address, port, log, extra
        self.env = {**TEST_ENV, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self, ready: Literal["listener", "runtime"] = "listener", timeout: float = 30.0) -> None:
        """Start and wait until ready: the MS-MQQB listener accepts (``listener``) or the
        process has published its ``runtime.json`` (``runtime``: every service is up)."""
        self.starts += 1
        with open(self.log, "ab") as out:
            out.write(f"---- start {self.starts}\n".encode())
            out.flush()
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "openmsmq.cli.serve", "--data-dir", str(self.data_dir),
                 "--listen", self.address, "--port", str(self.port),
                 "--remote-port", "0", "--metrics-port", "0", *self.extra],
                stdout=out, stderr=out, env=dict(os.environ, **self.env),
            )  # fmt: skip
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            if ready == "runtime":
                if live_runtime(self.data_dir) is not None:
                    return
            else:
                try:
                    with socket.create_connection((self.address, self.port), timeout=0.2):
                        return
                except OSError:
                    pass
            time.sleep(0.05)
        self.proc.kill()
        raise AssertionError(f"serve on {self.address} did not start: " + self.log.read_text()[-3000:])

    def kill(self) -> None:
        """SIGKILL, and reap it."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> int:
        """SIGTERM (the graceful stop); the exit status (bounded wait)."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(30)

    def close(self) -> None:
        """Kill it if it still runs (for ``finally`` blocks)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def read_only(data_dir: Path) -> sqlite3.Connection:
    """A read-only connection to a running QM's store (the test looks, never writes)."""
    return sqlite3.connect(f"file:{data_dir / 'openmsmq.db'}?mode=ro", uri=True, timeout=30)


def outgoing_count(data_dir: Path) -> int:
    """Messages in all outgoing queues of the QM in ``data_dir``."""
    with read_only(data_dir) as c:
        row = c.execute("SELECT coalesce(sum(msg_count), 0) FROM queues WHERE queue_type = 4").fetchone()
    return int(row[0])


def queue_count(data_dir: Path, name: str) -> int:
    """Messages in the local queue ``name`` (0 when it does not exist)."""
    with read_only(data_dir) as c:
        row = c.execute("SELECT msg_count FROM queues WHERE name = ?", (name,)).fetchone()
    return int(row[0]) if row else 0
