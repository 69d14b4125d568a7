"""``openmsmq backup``: a consistent copy of a running queue manager's store, taken while
transactions commit, restores to a prefix of whole transactions holding at least those
committed before it began; a destination that exists is refused and left as it is."""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
from pathlib import Path

from click.testing import CliRunner

import openmsmq
from openmsmq.cli.main import cli
from openmsmq.qm.manager import QueueManager
from tests.serve_proc import A, ServeProcess, free_port

Q = "private$\\backups"
PER_TX = 50


def test_backup_of_a_running_queue_manager_while_it_commits(tmp_path: Path) -> None:
    data = tmp_path / "qm"
    openmsmq.connect(data).close()
    serve = ServeProcess(data, A, free_port(A), tmp_path / "serve.log")
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
        except BaseException as exc:
            errors.append(exc)

    copy = tmp_path / "backup" / "qm.db"
    copy.parent.mkdir()
    try:
        serve.start("runtime")
        with openmsmq.connect(data) as conn:
            conn.create_queue(Q, transactional=True)
        sender = threading.Thread(target=send)
        sender.start()
        while committed[0] < 10 * PER_TX and sender.is_alive():
            threading.Event().wait(0.01)  # bounded: the sender stops after 10,000 transactions
        before = committed[0]
        done = subprocess.run(
            [sys.executable, "-m", "openmsmq", "--qm", str(data), "backup", str(copy)],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert f"to {copy}" in done.stdout
        stop.set()
        sender.join(60)
        assert not errors, errors
    finally:
        stop.set()
        serve.close()
    assert not (copy.parent / "qm.db.partial").exists()
    restored = tmp_path / "restored"
    restored.mkdir()
    shutil.copy(copy, restored / "openmsmq.db")
    with QueueManager(restored) as qm:
        bodies = [m.body.decode() for m in qm.peek_range(Q, 0, 1_000_000)]
    assert len(bodies) >= before and len(bodies) % PER_TX == 0  # whole transactions, none lost
    assert bodies == [f"{t}-{i}" for t in range(len(bodies) // PER_TX) for i in range(PER_TX)]


def test_backup_refuses_an_existing_destination_and_a_remote_target(tmp_path: Path) -> None:
    data = tmp_path / "qm"
    runner = CliRunner()
    assert runner.invoke(cli, ["init", str(data)]).exit_code == 0
    taken = tmp_path / "taken.db"
    taken.write_bytes(b"keep me")
    result = runner.invoke(cli, ["--qm", str(data), "backup", str(taken)])
    assert result.exit_code == 1 and f"'{taken}'" in result.stderr and "exists already" in result.stderr
    assert taken.read_bytes() == b"keep me"
    remote = runner.invoke(cli, ["--qm", "grpc://127.0.0.1:1", "backup", str(tmp_path / "x.db")])
    assert remote.exit_code == 1 and "give --qm the data directory" in remote.stderr
    none = runner.invoke(cli, ["--qm", str(tmp_path / "nothing"), "backup", str(tmp_path / "y.db")])
    assert none.exit_code == 1 and "no queue manager at" in none.stderr
    ok = runner.invoke(cli, ["--qm", str(data), "backup", str(tmp_path / "z.db"), "--json"])
    assert ok.exit_code == 0 and (tmp_path / "z.db").stat().st_size > 0
