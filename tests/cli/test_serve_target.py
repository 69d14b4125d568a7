"""``openmsmq --qm DIR serve`` serves DIR — the queue manager the other commands name with
the same ``--qm`` — and a remote ``--qm grpc://...`` is refused by ``serve``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from click.testing import CliRunner

from openmsmq.cli.main import cli


def _serve(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    cmd = [
        sys.executable,
        "-m",
        "openmsmq",
        *args,
        "--listen",
        "127.0.0.1",
        "--port",
        "0",
        "--no-remote",
        "--no-metrics",
    ]
    return subprocess.Popen(
        cmd, cwd=cwd, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )


def _wait_for(path: Path, proc: subprocess.Popen[bytes]) -> None:
    for _ in range(600):  # bounded: 60 s
        if path.exists() or proc.poll() is not None:
            break
        time.sleep(0.1)
    assert path.exists(), proc.stderr.read().decode() if proc.poll() is not None and proc.stderr else ""


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0


def test_global_qm_names_the_served_data_directory(tmp_path: Path) -> None:
    qm = tmp_path / "qa"
    proc = _serve(["--qm", str(qm), "serve"], cwd=tmp_path)
    try:
        _wait_for(qm / "runtime.json", proc)
        assert not (tmp_path / "data").exists(), "served ./data instead of --qm"
    finally:
        _stop(proc)


def test_openmsmq_qm_in_the_environment_and_data_dir_flag(tmp_path: Path) -> None:
    from_env = tmp_path / "from-env"
    proc = _serve(["serve"], cwd=tmp_path, env={"OPENMSMQ_QM": str(from_env)})
    try:
        _wait_for(from_env / "runtime.json", proc)
    finally:
        _stop(proc)
    # --data-dir of serve wins over the global --qm.
    flag = tmp_path / "flag"
    proc = _serve(["--qm", str(tmp_path / "ignored"), "serve", "--data-dir", str(flag)], cwd=tmp_path)
    try:
        _wait_for(flag / "runtime.json", proc)
        assert not (tmp_path / "ignored").exists()
    finally:
        _stop(proc)


def test_a_remote_qm_cannot_be_served() -> None:
    result = CliRunner().invoke(cli, ["--qm", "grpc://127.0.0.1:2105", "serve"])
    assert result.exit_code == 2
    assert "--qm" in result.output and "remote queue manager" in result.output
