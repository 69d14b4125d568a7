"""The live-backup commands of docs/operations.md ("Backup"), run as written against a
running ``openmsmq serve`` that is committing transactions, then the documented restore:
the copy opens as a store holding exactly a prefix of whole committed transactions, at
least those committed before the backup started.

The commands are taken from the document (paths substituted), so the test breaks when the
document drifts.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import openmsmq
from openmsmq.qm.manager import QueueManager
from openmsmq.runtime import live_runtime

ROOT = Path(__file__).resolve().parents[2]
Q = "private$\\backups"
PER_TX = 50

pytestmark = pytest.mark.slow


def backup_commands(text: str) -> list[str]:
    """The shell commands of the fenced blocks in the Backup section (continuations joined)."""
    section = text.split("\n## Backup\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```\n(.*?)```", section, re.S)
    return [re.sub(r"\\\n\s*", "", b).strip() for b in blocks]


def test_live_backup_commands_and_restore(tmp_path: Path) -> None:
    commands = backup_commands((ROOT / "docs" / "operations.md").read_text())
    assert len(commands) == 2 and commands[0].startswith("sqlite3 ") and commands[1].startswith("python3 ")
    if shutil.which("sqlite3") is None:
        pytest.skip("the sqlite3 tool is not installed")
    data = tmp_path / "qm"
    log = tmp_path / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "openmsmq.cli.serve", "--data-dir", str(data), "--listen", "127.0.0.1",
             "--port", "0", "--remote-port", "0", "--metrics-port", "0"],
            stdout=out, stderr=out,
        )  # fmt: skip
    committed = [0]
    stop = threading.Event()
    errors: list[BaseException] = []

    def send() -> None:
        try:
            with openmsmq.connect(data) as conn:
                q = conn.open_queue(Q)
                for t in range(10_000):  # bounded; stopped by the event long before
                    if stop.is_set():
                        return
                    with conn.transaction() as tx:
                        q.send_many([f"{t}-{i}".encode() for i in range(PER_TX)], tx=tx)
                    committed[0] += PER_TX
        except BaseException as exc:  # reported below
            errors.append(exc)

    try:
        deadline = time.monotonic() + 30
        while live_runtime(data) is None:
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.05)
        with openmsmq.connect(data) as conn:
            conn.create_queue(Q, transactional=True)
        sender = threading.Thread(target=send)
        sender.start()
        copies = []
        for n, command in enumerate(commands):
            while committed[0] < (n + 1) * 10 * PER_TX and sender.is_alive():
                time.sleep(0.01)  # bounded: the sender stops after 10,000 transactions
            before = committed[0]
            backup_dir = tmp_path / f"backup-{n}"
            backup_dir.mkdir()
            cmd = command.replace("/var/lib/openmsmq", str(data)).replace("/backup/", f"{backup_dir}/")
            result = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=60)
            assert result.returncode == 0, (cmd, result.stderr)
            (target,) = backup_dir.iterdir()
            copies.append((target, before))
        stop.set()
        sender.join(60)
        assert not errors, errors
    finally:
        stop.set()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0

    for target, before in copies:
        # Restore as documented: a data directory whose openmsmq.db is the backup.
        restored = tmp_path / f"restored-{target.stem}"
        restored.mkdir()
        shutil.copy(target, restored / "openmsmq.db")
        with QueueManager(restored) as qm:
            bodies = [m.body.decode() for m in qm.peek_range(Q, 0, 1_000_000)]
        assert len(bodies) >= before  # everything committed before the backup started
        assert len(bodies) % PER_TX == 0  # whole transactions only
        assert bodies == [f"{t}-{i}" for t in range(len(bodies) // PER_TX) for i in range(PER_TX)]
