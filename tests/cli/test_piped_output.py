"""Tables and ``status --watch`` written to a pipe (a real one: a subprocess's stdout):
no cell cut to 80 columns, every frame of a watch written."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from openmsmq.client import SINGLE_MESSAGE, connect

FAR = "DIRECT=TCP:127.0.0.42\\PRIVATE$\\a_queue_with_a_long_name_for_the_columns"


def _piped(data: Path, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    done = subprocess.run(
        [sys.executable, "-m", "openmsmq", "--qm", str(data), *args],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout


def _qm(tmp_path: Path) -> Path:
    data = tmp_path / "qm"
    with connect(str(data)) as conn, conn.open_queue(FAR) as q:
        q.send(b"x", tx=SINGLE_MESSAGE)
    return data


def test_status_piped_shows_every_column_uncut(tmp_path: Path) -> None:
    out = _piped(_qm(tmp_path), "status")
    assert FAR.casefold() in out  # the destination in full
    for header in ("destination", "next hop", "in flight", "TxSequenceID", "rejected"):
        assert header in out, header
    assert "…" not in out
    assert "\x1b[" not in out  # no terminal controls into a pipe
    listed = _piped(_qm(tmp_path / "b"), "queue", "list", "--all")
    assert FAR.casefold() in listed.casefold()


def test_status_watch_piped_writes_every_frame(tmp_path: Path) -> None:
    out = _piped(_qm(tmp_path), "status", "--watch", "0.1", "--count", "3")
    assert out.count("--- ") == 3
    assert out.count("outgoing queues") == 3
    assert out.count(FAR.casefold()) == 3
