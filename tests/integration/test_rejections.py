"""Transactional messages B rejects, seen from A: two ``openmsmq serve`` processes (A on
127.0.0.1, B on 127.0.0.2); the application uses the CLI as a user does.

``openmsmq send --transactional`` asks for negative source journaling by default
(docs/acknowledgments.md, "Transactional sends"), so each message B rejects comes back
to A's transactional dead-letter queue with the class of its negative FinalAck (MS-MQQB
3.1.5.7), and ``openmsmq status --json`` on A counts them per destination by class.
Non-transactional messages sent with ``--dead-letter`` and rejected at B land in B's
dead-letter queue (the QM that could not deliver them).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from openmsmq.cli.main import cli
from openmsmq.qm.manager import QueueManager
from tests.serve_proc import A, B, ServeProcess, free_port, outgoing_count, queue_count

pytestmark = pytest.mark.slow

#: B's queues and the class each makes B reject A's transactional message with.
REJECTED = {
    "nosuch": "NACK_BAD_DST_Q",  # no such queue (MS-MQQB 3.1.5.8.2)
    "plain": "NACK_NOT_TRANSACTIONAL_Q",  # a non-transactional queue (3.1.5.8.2)
    "guarded": "NACK_ACCESS_DENIED",  # admits another QM only (3.1.5.8.3)
    "small": "NACK_Q_EXCEED_QUOTA",  # 1 KB quota, a 2 KB message (3.1.5.8.8)
}
CLASS_VALUES = {
    "NACK_BAD_DST_Q": 0x8000,
    "NACK_NOT_TRANSACTIONAL_Q": 0x8009,
    "NACK_ACCESS_DENIED": 0x8004,
    "NACK_Q_EXCEED_QUOTA": 0x8003,
    "NACK_NOT_TRANSACTIONAL_MSG": 0x800A,
}


def _dest(queue: str) -> str:
    return f"DIRECT=TCP:{B}\\private$\\{queue}"


def _wait(pred: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def test_each_rejection_class_lands_in_the_senders_dead_letter_queue_and_in_status(tmp_path: Path) -> None:
    port = free_port()
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    with QueueManager(b_dir) as qb:
        qb.create_queue("private$\\plain")
        qb.create_queue("private$\\guarded", transactional=True, allowed_senders=[str(uuid.uuid4())])
        qb.create_queue("private$\\small", transactional=True, quota_kb=1)
        qb.create_queue("private$\\orders", transactional=True)
    with QueueManager(a_dir):
        pass
    a = ServeProcess(a_dir, A, port, tmp_path / "a.log")
    b = ServeProcess(b_dir, B, port, tmp_path / "b.log")
    runner = CliRunner()

    def run(qm: Path, *args: str) -> Any:
        result = runner.invoke(cli, ["--qm", str(qm), *args])
        assert result.exit_code == 0, (result.output, result.exception)
        return json.loads(result.stdout) if "--json" in args else result.stdout

    big = tmp_path / "big.bin"
    big.write_bytes(b"x" * 2048)
    try:
        b.start(ready="runtime")
        a.start(ready="runtime")
        for queue in REJECTED:
            body = ["--file", str(big)] if queue == "small" else [f"to {queue}"]
            run(a_dir, "send", _dest(queue), *body, "--transactional")
        # delivered: no dead letter, nothing counted
        run(a_dir, "send", _dest("orders"), "fine", "--transactional")
        # non-transactional, --dead-letter, into a transactional queue: B's dead-letter queue
        run(a_dir, "send", _dest("orders"), "not in a transaction", "--dead-letter")
        _wait(lambda: queue_count(a_dir, "system$;deadxact") == len(REJECTED), "A's DEADXACT")
        _wait(lambda: queue_count(b_dir, "system$;deadletter") == 1, "B's DEADLETTER")
        _wait(lambda: outgoing_count(a_dir) == 0, "A's outgoing queues to drain")

        dead = run(a_dir, "dlq", "list", "--json")["dead_letters"]
        assert sorted((d["destination"].lower(), d["class"]) for d in dead) == sorted(
            (_dest(q).lower(), CLASS_VALUES[name]) for q, name in REJECTED.items()
        )
        assert all(d["dlq"] == "xact" for d in dead)

        status = run(a_dir, "status", "--json")
        rejected = {o["format_name"].lower(): o["rejected"] for o in status["outgoing"]}
        for queue, name in REJECTED.items():
            assert rejected[_dest(queue).lower()] == {name: 1}
        assert rejected[_dest("orders").lower()] == {}
        assert status["dead_letter"]["xact"] == len(REJECTED)
        wide = runner.invoke(cli, ["--qm", str(a_dir), "status"], env={"COLUMNS": "400"})
        assert "NACK_Q_EXCEED_QUOTA 1" in wide.stdout

        b_dead = run(b_dir, "dlq", "list", "--json")["dead_letters"]
        assert [(d["dlq"], d["body"], d["class"]) for d in b_dead] == [
            ("non-xact", "not in a transaction", CLASS_VALUES["NACK_NOT_TRANSACTIONAL_MSG"])
        ]
        got = run(b_dir, "receive", "private$\\orders", "--transactional", "--json")
        assert [m["body"] for m in got["messages"]] == ["fine"]
    finally:
        for p in (a, b):
            p.close()
