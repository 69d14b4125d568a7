"""``openmsmq move`` and ``openmsmq poison list|show|return|purge``, and the retry policy
options of ``queue create`` / ``queue set``, on a data directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from openmsmq.cli.main import cli
from openmsmq.qm import QueueManager

Q = "private$\\orders"


@pytest.fixture
def run(tmp_path: Path):
    data = tmp_path / "data"
    QueueManager(data).close()
    runner = CliRunner()

    def invoke(*args: str, code: int = 0) -> Result:
        result = runner.invoke(cli, ["--qm", str(data), *args], env={"COLUMNS": "250"})
        assert result.exit_code == code, (result.output, result.exception)
        return result

    invoke.data = data  # type: ignore[attr-defined]
    return invoke


def doc(result: Result) -> Any:
    return json.loads(result.stdout)


def _peek(run, queue: str) -> list[dict[str, Any]]:
    out = run("peek", queue, "--count", "100", "--json")
    return doc(out)["messages"]


def test_policy_options_move_and_poison_commands(run) -> None:
    created = doc(run("queue", "create", Q, "--transactional", "--retry-count", "0", "--retry-cycles", "0",
                      "--on-poison", "move", "--json"))  # fmt: skip
    assert created["created"]["retry_policy"] == "0,0,1800,move"
    shown = run("queue", "show", Q).output
    assert "0 retries, 0 cycles of 1800s, then move" in shown
    assert (
        doc(run("queue", "set", Q, "--retry-delay", "5m", "--json"))["queue"]["retry_policy"]
        == "0,0,300,move"
    )
    run("send", Q, "a", "--transactional")
    run("send", Q, "b", "--transactional")
    with QueueManager(run.data) as qm:  # one aborted receive: policy 0,0 sends it to ;poison
        tx = qm.begin()
        assert qm.receive(Q, tx=tx).body == b"a"
        tx.abort()
    listed = doc(run("poison", "list", "--json"))["queues"]
    assert [(r["queue"], r["poison"], r["retry"]) for r in listed] == [(Q, 1, 0)]
    poisoned = listed[0]["messages"][0]
    assert (poisoned["body"], poisoned["abort_count"], poisoned["move_count"]) == ("a", 0, 1)
    lid = poisoned["lookup_id"]
    assert "aborts/moves" in run("peek", Q + ";poison").output
    assert doc(run("poison", "show", Q, str(lid), "--json"))["message"]["body"] == "a"
    back = doc(run("poison", "return", Q, "--all", "--json"))
    assert back["returned"] == [lid]
    assert [m["body"] for m in _peek(run, Q)] == ["b", "a"]
    new = _peek(run, Q)[1]["lookup_id"]
    moved = doc(run("move", Q, str(new), "--to", "poison", "--json"))
    assert moved["new_lookup_id"] > new
    assert doc(run("poison", "purge", Q, "--yes", "--json"))["purged"] == 1
    assert [m["body"] for m in _peek(run, Q)] == ["b"]
    assert doc(run("queue", "set", Q, "--no-retry-policy", "--json"))["queue"]["retry_policy"] == ""


def test_bad_input_is_refused_with_the_reason(run) -> None:
    run("queue", "create", Q, "--transactional")
    run("queue", "create", "private$\\plain")
    out = run("queue", "set", Q, "--retry-count", "-1", code=1).output
    assert "receive_retry_count" in out and "0..10000" in out
    out = run("queue", "set", Q, "--retry-delay", "soon", code=1).output
    assert "retry_cycle_delay" in out
    out = run("queue", "set", "private$\\plain", "--retry-count", "1", code=1).output
    assert "transactional" in out
    out = run("send", Q + ";poison", "x", "--transactional", code=1).output
    assert "subqueue" in out
    out = run("move", Q, "999", "--to", "journal", code=1).output
    assert "system suffix" in out
    out = run("move", Q, "999", "--to", "private$\\plain", code=1).output
    assert "own subqueues" in out
    assert doc(run("queue", "show", Q, "--json"))["queue"]["retry_policy"] == ""
    with QueueManager(run.data) as qm:
        assert qm.subqueues(Q) == []
