"""``queue purge`` (like ``dlq purge``) asks before deleting: a person at a terminal
answers; without a terminal on stdin and without ``--yes`` nothing is deleted (usage
error, exit status 2)."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from openmsmq.cli.main import cli
from openmsmq.qm import QueueManager

P = "private$\\orders"


def _cli(data: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "openmsmq", "--qm", str(data), *args],
        input=input, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "data"
    runner = CliRunner()
    QueueManager(path).close()
    assert runner.invoke(cli, ["--qm", str(path), "queue", "create", P]).exit_code == 0
    assert runner.invoke(cli, ["--qm", str(path), "send", P, "x", "--count", "3"]).exit_code == 0
    return path


def _count(data: Path) -> int:
    shown = CliRunner().invoke(cli, ["--qm", str(data), "queue", "show", P, "--json"])
    return int(json.loads(shown.stdout)["queue"]["message_count"])


def _at_a_terminal(data: Path, answer: bytes, *args: str) -> tuple[int, str]:
    """Run ``queue purge P`` with stdin on a pseudo-terminal that types ``answer``."""
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "openmsmq", "--qm", str(data), "queue", "purge", P, *args],
            stdin=follower, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        os.write(leader, answer)
        out, err = proc.communicate(timeout=60)
    finally:
        os.close(leader)
        os.close(follower)
    return proc.returncode, (out + err).decode()


def test_without_a_terminal_and_without_yes_nothing_is_deleted(data: Path) -> None:
    piped = _cli(data, "queue", "purge", P, input="y\n")  # an answer no one gave
    assert piped.returncode == 2
    assert f"delete every message of {P}: stdin is not a terminal" in piped.stderr
    assert "--yes" in piped.stderr
    closed = subprocess.run(
        [sys.executable, "-m", "openmsmq", "--qm", str(data), "queue", "purge", P],
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert closed.returncode == 2
    assert _count(data) == 3
    assert json.loads(_cli(data, "queue", "purge", P, "--yes", "--json").stdout) == {"queue": P, "purged": 3}


def test_a_person_at_a_terminal_is_asked(data: Path) -> None:
    code, text = _at_a_terminal(data, b"n\n")
    assert code == 1
    assert f"delete every message of {P}? [y/N]" in text
    assert f"not confirmed: delete every message of {P} was not done" in text
    assert _count(data) == 3
    code, text = _at_a_terminal(data, b"y\n")
    assert code == 0, text
    assert f"purged 3 message(s) from {P}" in text
    assert _count(data) == 0


def test_dlq_purge_asks_the_same_way(data: Path) -> None:
    piped = _cli(data, "dlq", "purge", input="y\n")
    assert piped.returncode == 2 and "stdin is not a terminal" in piped.stderr
    assert _cli(data, "dlq", "purge", "--yes").returncode == 0
