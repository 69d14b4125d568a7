"""What a command loads: ``openmsmq send`` and ``status`` on a data directory import the
queue manager and their own command module, not the MS-MQQB transfer stack, the other
commands, the protobuf classes or OpenSSL's hashes (start-up time, docs/cli.md)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

#: Modules a local send or status must not load.
NOT_LOADED = (
    "openmsmq.transfer.engine",
    "openmsmq.protocol.session",
    "openmsmq.server.serve",
    "openmsmq.cli.serve",
    "openmsmq.cli.dlq_cmds",
    "openmsmq.cli.backup_cmds",
    "openmsmq.remote.openmsmq_remote_pb2",
    "grpc",
    "hmac",
    "rich.progress",
)


def _imported(*argv: str) -> set[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "openmsmq", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


@pytest.fixture
def qm_dir(tmp_path: Path) -> str:
    data = str(tmp_path / "qm")
    for argv in (["init", data], ["--qm", data, "queue", "create", "private$\\orders"]):
        subprocess.run(
            [sys.executable, "-m", "openmsmq", *argv], check=True, capture_output=True, timeout=120
        )
    return data


@pytest.mark.parametrize("command", [["send", "private$\\orders", "hello"], ["status"]])
def test_a_local_command_loads_only_what_it_uses(qm_dir: str, command: list[str]) -> None:
    loaded = _imported("--qm", qm_dir, *command)
    assert "openmsmq.qm.manager" in loaded  # the check sees the imports at all
    assert sorted(m for m in NOT_LOADED if m in loaded) == []


def test_help_still_lists_every_command() -> None:
    from openmsmq.cli.main import COMMANDS

    out = subprocess.run(
        [sys.executable, "-m", "openmsmq", "--help"], capture_output=True, text=True, timeout=120, check=True
    ).stdout
    listed = {line.split()[0] for line in out.split("Commands:", 1)[1].splitlines() if line.strip()}
    assert listed == set(COMMANDS)
