"""Shared fixtures of the Spark tests: ONE ``openmsmq serve`` process and ONE local
SparkSession for the whole run (pyspark is imported only when a test asks for it).

Each test creates its own queues (:func:`new_queues`), so tests share the QM safely.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import openmsmq
from openmsmq.client import Access, Connection, OutgoingMessage
from openmsmq.runtime import live_runtime


def java_available() -> bool:
    home = os.environ.get("JAVA_HOME")
    return shutil.which("java") is not None or bool(
        home and os.path.exists(os.path.join(home, "bin", "java"))
    )


def start_serve(data_dir: Path, log: Path, remote_port: int = 0) -> subprocess.Popen[bytes]:
    """Start ``openmsmq serve`` on 127.0.0.1 (free ports) and wait for its runtime.json."""
    data_dir.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "openmsmq.cli.serve", "--data-dir", str(data_dir),
             "--listen", "127.0.0.1", "--port", "0", "--remote-port", str(remote_port),
             "--metrics-port", "0", "--log-level", "warning"],
            stdout=out, stderr=out,
        )  # fmt: skip
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-3000:]
        info = live_runtime(data_dir)
        if info is not None and info.get("pid") == proc.pid:
            return proc
        time.sleep(0.05)
    proc.kill()
    raise AssertionError("serve did not publish runtime.json: " + log.read_text()[-3000:])


def stop_serve(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM (graceful), then SIGKILL if it does not stop within 20 s."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


@dataclass
class QM:
    """The shared queue manager: its data directory, remote endpoint and a client."""

    data_dir: Path
    endpoint: str
    conn: Connection

    def new_queues(self, *names: str, transactional: bool = True) -> list[str]:
        """Create queues with unique names (``private$\\<name>-<random>``)."""
        tag = uuid.uuid4().hex[:8]
        made = []
        for name in names:
            path = f"private$\\{name}-{tag}"
            self.conn.create_queue(path, transactional=transactional)
            made.append(path)
        return made

    def send(self, queue: str, bodies: list[bytes]) -> list[int]:
        """Send ``bodies`` in one transaction; returns their LookupIdentifiers."""
        q = self.conn.open_queue(queue, Access.SEND)
        try:
            tx = self.conn.transaction()
            q.send_many([OutgoingMessage(body=b) for b in bodies], tx=tx)
            tx.commit()
        finally:
            q.close()
        return self.lookup_ids(queue)[-len(bodies) :] if bodies else []

    def messages(self, queue: str) -> list[Any]:
        """Every message of ``queue`` in LookupIdentifier order (peeked)."""
        out: list[Any] = []
        after = 0
        for _ in range(10_000):
            page = self.conn.transport.peek_range(queue, after, None, 10_000)
            out.extend(page)
            if len(page) < 10_000:
                break
            after = page[-1].lookup_id
        return out

    def lookup_ids(self, queue: str) -> list[int]:
        """LookupIdentifiers of ``queue``, ascending."""
        return [m.lookup_id for m in self.messages(queue)]

    def bodies(self, queue: str) -> list[bytes]:
        """Bodies of ``queue`` in LookupIdentifier order."""
        return [m.body for m in self.messages(queue)]


@pytest.fixture(scope="session")
def qm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[QM]:
    """ONE ``openmsmq serve`` for every Spark test (127.0.0.1, free ports)."""
    root = tmp_path_factory.mktemp("spark-qm")
    proc = start_serve(root / "data", root / "serve.log")
    info = live_runtime(root / "data")
    assert info is not None
    conn = openmsmq.connect(str(info["remote"]))
    try:
        yield QM(root / "data", str(info["remote"]), conn)
    finally:
        conn.close()
        stop_serve(proc)


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A ``local[2,2]`` session (2 cores, a failed task is retried once), UI off, quiet logs."""
    if not java_available():
        pytest.skip("Java is not installed (java not on PATH and no JAVA_HOME): Spark tests need a JVM")
    from openmsmq.spark import launcher_path, register

    # Executors' Python workers must run the interpreter that has openmsmq and pyarrow;
    # through the launcher, as users are told to (docs/spark.md, "Query start").
    os.environ["PYSPARK_PYTHON"] = launcher_path()
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    # This host's name may resolve to loopback, and Spark would then bind to the first
    # other interface it finds: keep every Spark socket on loopback.
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2,2]")
        .appName("openmsmq-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=ERROR")
        .config("spark.sql.streaming.pollingDelay", "10ms")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.host", "127.0.0.1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    yield session
    session.stop()
