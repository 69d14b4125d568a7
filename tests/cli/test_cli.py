"""The openmsmq command through click's CliRunner: each command, --json output, error exits."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from openmsmq.cli.main import cli
from openmsmq.runtime import take_serve_lock

Q = "private$\\orders"
P = "private$\\plain"


@pytest.fixture
def run(tmp_path: Path):
    runner = CliRunner()
    data = str(tmp_path / "data")
    assert runner.invoke(cli, ["init", data]).exit_code == 0  # commands never create a QM

    def invoke(*args: str, input: bytes | str | None = None, code: int = 0) -> Result:
        result = runner.invoke(cli, ["--qm", data, *args], input=input)
        assert result.exit_code == code, (result.output, result.exception)
        return result

    return invoke


def doc(result: Result) -> Any:
    return json.loads(result.stdout)


def test_queue_commands(run) -> None:
    created = doc(
        run("queue", "create", Q, "--transactional", "--quota", "100", "--journal", "--label", "o", "--json")
    )
    assert created["created"]["path"] == Q
    assert created["created"]["transactional"] and created["created"]["journal"]
    assert created["created"]["quota_kb"] == 100 and created["created"]["label"] == "o"
    assert "created" in run("queue", "create", P).output
    listed = doc(run("--json", "queue", "list"))
    assert sorted(q["path"] for q in listed["queues"]) == sorted([Q, P])
    assert set(listed["queues"][0]) >= {
        "path",
        "kind",
        "transactional",
        "message_count",
        "total_bytes",
        "label",
    }
    every = doc(run("queue", "list", "--all", "--json"))
    assert any(q["kind"] == "system" for q in every["queues"])
    assert Q in run("queue", "list").output
    shown = doc(run("queue", "show", Q, "--json"))["queue"]
    assert shown["message_count"] == 0 and shown["kind"] == "private"
    assert "transactional" in run("queue", "show", Q).output
    assert doc(run("queue", "delete", P, "--json")) == {"deleted": P}
    assert [q["path"] for q in doc(run("queue", "list", "--json"))["queues"]] == [Q]


def test_send_peek_receive(run, tmp_path: Path) -> None:
    run("queue", "create", P)
    sent = doc(run("send", P, "hello", "--label", "greet", "--count", "3", "--json"))
    assert sent["sent"] == 3 and len({m["message_id"] for m in sent["messages"]}) == 3
    body = tmp_path / "b.bin"
    body.write_bytes(b"\xff\x00raw")
    run("send", P, "--file", str(body))
    run("send", P, input="from stdin")
    peeked = doc(run("peek", P, "--count", "10", "--json"))
    assert peeked["count"] == 5
    first = peeked["messages"][0]
    assert first["body"] == "hello" and first["label"] == "greet" and first["class_name"] == "NORMAL"
    assert peeked["messages"][3]["body"] is None and peeked["messages"][3]["body_hex"] == "ff00726177"
    assert peeked["messages"][4]["body"] == "from stdin"
    assert "hello" in run("peek", P).output
    got = doc(run("receive", P, "--count", "2", "--json"))
    assert [m["body"] for m in got["messages"]] == ["hello", "hello"]
    got = doc(run("receive", P, "--count", "10", "--json"))
    assert got["count"] == 3
    assert "(no messages)" in run("peek", P).output
    assert doc(run("peek", P, "--json")) == {"queue": P, "count": 0, "messages": []}


def test_transactional_send_and_receive(run) -> None:
    run("queue", "create", Q, "--transactional")
    failed = run("send", Q, "x", code=1)
    assert "MQ_ERROR_TRANSACTION_USAGE (0xC00E0050)" in failed.stderr
    run("send", Q, "x", "--count", "2", "--transactional")
    got = doc(run("receive", Q, "--transactional", "--count", "5", "--json"))
    assert [m["transactional"] for m in got["messages"]] == [True, True]
    assert "hello" not in run("receive", Q, "--transactional", code=1).stdout


def test_a_transactional_send_asks_for_negative_source_journaling_by_default(run) -> None:
    """``send --transactional`` sets dead_letter (UserHeader.JN) unless --no-dead-letter:
    a transactional message that is not delivered comes back to the sender's
    transactional dead-letter queue instead of vanishing; a plain send does not."""
    run("queue", "create", Q, "--transactional")
    run("queue", "create", P)
    run("send", Q, "default", "--transactional")
    run("send", Q, "without", "--transactional", "--no-dead-letter")
    run("send", P, "plain")
    run("send", P, "asked", "--dead-letter")
    got = doc(run("peek", Q, "--count", "5", "--json"))["messages"]
    assert [(m["body"], m["dead_letter"]) for m in got] == [("default", True), ("without", False)]
    got = doc(run("peek", P, "--count", "5", "--json"))["messages"]
    assert [(m["body"], m["dead_letter"]) for m in got] == [("plain", False), ("asked", True)]
    assert "Default: on with --transactional" in run("send", "--help").output


def test_purge(run) -> None:
    run("queue", "create", P)
    run("send", P, "a", "--count", "4")
    assert doc(run("queue", "purge", P, "--yes", "--json")) == {"queue": P, "purged": 4}
    assert "purged 0" in run("queue", "purge", P, "--yes").output


def test_purge_of_an_outgoing_queue_with_the_queue_manager_stopped(run, tmp_path: Path) -> None:
    far = "DIRECT=TCP:192.0.2.7\\private$\\far"
    run("send", far, "kept", "--count", "2", "--transactional", "--dead-letter")
    run("send", far, "gone", "--transactional", "--no-dead-letter")
    listed = doc(run("queue", "list", "--all", "--json"))["queues"]
    assert [q["message_count"] for q in listed if q["kind"] == "outgoing"] == [3]
    fd = take_serve_lock(tmp_path / "data")  # as a running serve holds it
    assert fd is not None
    try:
        refused = run("queue", "purge", far, "--yes", code=1)
    finally:
        os.close(fd)
    assert "served by a running openmsmq serve" in refused.stderr
    assert doc(run("queue", "purge", far, "--yes", "--json")) == {"queue": far, "outgoing": True, "purged": 3}
    listed = doc(run("queue", "list", "--all", "--json"))["queues"]
    assert [q["message_count"] for q in listed if q["kind"] == "outgoing"] == [0]
    dead = doc(run("dlq", "list", "--json"))["dead_letters"]
    assert [(d["body"], d["reason"]) for d in dead] == [("kept", "NACK_DELETED")] * 2
    assert (
        "MQ_ERROR_QUEUE_NOT_FOUND"
        in run("queue", "purge", "DIRECT=TCP:192.0.2.7\\private$\\none", "--yes", code=1).stderr
    )


def test_purge_of_an_outgoing_queue_over_remote_read_says_to_stop_the_queue_manager(tmp_path: Path) -> None:
    from openmsmq.qm import MessageRecord, QueueManager
    from openmsmq.remote.server import RemoteServer

    far = "DIRECT=TCP:192.0.2.7\\private$\\far"
    with QueueManager(tmp_path / "data") as qm:
        qm.send(far, MessageRecord(body=b"x"))
        server = RemoteServer(qm, port=0).start()
        try:
            result = CliRunner().invoke(cli, ["--qm", server.target, "queue", "purge", far, "--yes"])
        finally:
            server.stop(grace=0.2)
        assert result.exit_code == 1
        assert "needs the queue manager stopped" in result.stderr
        assert qm.get_queue(far).msg_count == 1


def test_errors_are_one_clean_line(run) -> None:
    result = run("queue", "show", "private$\\nope", code=1)
    assert result.stderr.strip().splitlines() == [
        "error: MQ_ERROR_QUEUE_NOT_FOUND (0xC00E0003): no queue 'private$\\nope'"
    ]
    assert "Traceback" not in result.output
    result = run("--json", "receive", "private$\\nope", code=1)
    err = doc(result)["error"]
    assert err["name"] == "MQ_ERROR_QUEUE_NOT_FOUND" and err["hresult"] == 0xC00E0003
    assert err["hresult_hex"] == "0xC00E0003"
    run("queue", "create", P)
    timeout = run("receive", P, "--timeout", "0.01", code=1)
    assert "MQ_ERROR_IO_TIMEOUT" in timeout.stderr
    exists = run("queue", "create", P, code=1)
    assert "MQ_ERROR_QUEUE_EXISTS" in exists.stderr
    bad = run("queue", "create", "orders", code=1)
    assert "MQ_ERROR_ILLEGAL_QUEUE_PATHNAME" in bad.stderr
    assert run("send", P, "a", "--file", "-", code=2).exit_code == 2  # usage error (click)


def test_queue_create_with_allowed_senders(run) -> None:
    a, b = "0f0e0d0c-0b0a-0908-0706-050403020100", "{00112233-4455-6677-8899-AABBCCDDEEFF}"
    made = doc(
        run("queue", "create", Q, "--transactional", "--allow-sender", a, "--allow-sender", b, "--json")
    )
    assert made["created"]["allowed_senders"] == ["00112233-4455-6677-8899-aabbccddeeff", a]
    shown = run("queue", "show", Q).output
    assert "00112233-4455-6677-8899-aabbccddeeff" in shown and a in shown
    run("queue", "create", P)
    assert "every QM" in run("queue", "show", P).output
    bad = run("queue", "create", "private$\\x", "--allow-sender", "qm-a", code=1)
    assert "MQ_ERROR_ILLEGAL_PROPERTY_VALUE" in bad.stderr and "'qm-a'" in bad.stderr


def test_target_from_environment(tmp_path: Path) -> None:
    runner = CliRunner()
    env = {"OPENMSMQ_QM": str(tmp_path / "envdata")}
    assert runner.invoke(cli, ["init"], env=env).exit_code == 0  # init DIR defaults to OPENMSMQ_QM
    assert runner.invoke(cli, ["queue", "create", P], env=env).exit_code == 0
    result = runner.invoke(cli, ["queue", "list", "--json"], env=env)
    assert [q["path"] for q in json.loads(result.stdout)["queues"]] == [P]
    bad = runner.invoke(cli, ["--qm", "ftp://x", "queue", "list"])
    assert bad.exit_code == 1 and "configuration target" in bad.stderr
