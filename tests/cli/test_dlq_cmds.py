"""``openmsmq dlq``: messages really dead-lettered (TimeToBeReceived expiry with an injected
clock), listed with their reason, shown, requeued exactly once, purged."""

from __future__ import annotations

import json
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from openmsmq.cli.main import cli
from openmsmq.qm import MessageRecord, QueueManager

ORDERS = "private$\\orders"
PLAIN = "private$\\plain"
OTHER = "private$\\other"
FAR = "DIRECT=TCP:192.0.2.7\\private$\\far"
T0 = 1_000_000.0


def dead_letter_some(data: Path) -> None:
    """Two transactional and one plain message expire in their queues (NackReceiveTimeout),
    one transactional message expires in transit (NackReachQueueTimeout)."""
    now = [T0]
    with QueueManager(data, clock=lambda: now[0]) as qm:
        qm.create_queue(ORDERS, transactional=True)
        qm.create_queue(OTHER, transactional=True)
        qm.create_queue(PLAIN)
        with qm.begin() as tx:
            for body in (b"x1", b"x2"):
                qm.send(
                    ORDERS,
                    MessageRecord(body=body, label="order", app_specific=7, time_to_be_received=3600),
                    tx,
                )
            qm.send(FAR, MessageRecord(body=b"far", time_to_reach_queue=5), tx)
        qm.send(PLAIN, MessageRecord(body=b"p1", label="plain", time_to_be_received=3600))
        qm.send(PLAIN, MessageRecord(body=b"keep"))
        now[0] = T0 + 3601
        assert qm.expire(now[0]) == 4


@pytest.fixture
def run(tmp_path: Path):
    data = tmp_path / "data"
    dead_letter_some(data)
    runner = CliRunner()

    def invoke(*args: str, code: int = 0, input: str | None = None) -> Result:
        # A wide terminal so that rich does not shorten the columns of human output.
        result = runner.invoke(cli, ["--qm", str(data), *args], input=input, env={"COLUMNS": "250"})
        assert result.exit_code == code, (result.output, result.exception)
        return result

    return invoke


def doc(result: Result) -> Any:
    return json.loads(result.stdout)


def bodies(run, queue: str) -> list[str]:
    return [m["body"] for m in doc(run("peek", queue, "--count", "100", "--json"))["messages"]]


def letters(run, *args: str) -> list[dict[str, Any]]:
    return doc(run("dlq", "list", "--json", *args))["dead_letters"]


def test_list_shows_reason_destination_ids_and_age(run) -> None:
    before = int(time.time())
    rows = letters(run)
    after = int(time.time())
    assert sorted((r["dlq"], r["body"], r["reason"], r["destination"]) for r in rows) == [
        ("non-xact", "p1", "NACK_RECEIVE_TIMEOUT", PLAIN),
        ("xact", "far", "NACK_REACH_QUEUE_TIMEOUT", FAR),
        ("xact", "x1", "NACK_RECEIVE_TIMEOUT", ORDERS),
        ("xact", "x2", "NACK_RECEIVE_TIMEOUT", ORDERS),
    ]
    assert [r["dlq"] for r in rows] == ["xact", "xact", "xact", "non-xact"]
    (first,) = [r for r in rows if r["body"] == "x1"]
    assert first["dlq_queue"] == "system$;deadxact" and first["class_name"] == "NACK_RECEIVE_TIMEOUT"
    assert first["lookup_id"] > 0 and first["message_id"].startswith("{")
    # The age is counted from SentTime to the moment of listing (0 within the same second).
    sent = first["sent_time"]
    assert isinstance(sent, int) and sent > 0
    assert before - sent <= first["age_seconds"] <= after - sent
    assert "TimeToBeReceived" in first["reason_text"]
    assert [r["body"] for r in letters(run, "--non-xact")] == ["p1"]
    assert len(letters(run, "--xact")) == 3
    limited = doc(run("dlq", "list", "--limit", "1", "--json"))
    assert limited["count"] == 1 and limited["truncated"] is True
    text = run("dlq", "list").output
    assert "NACK_REACH_QUEUE_TIMEOUT" in text and FAR in text and "non-xact" in text


def test_show_by_lookup_id_and_message_id(run) -> None:
    row = letters(run, "--non-xact")[0]
    by_lookup = doc(run("dlq", "show", str(row["lookup_id"]), "--json"))["dead_letter"]
    assert by_lookup["body"] == "p1" and by_lookup["dlq"] == "non-xact"
    by_id = doc(run("dlq", "show", row["message_id"], "--json"))["dead_letter"]
    assert by_id["lookup_id"] == row["lookup_id"]
    assert "NACK_RECEIVE_TIMEOUT (0xC002)" in run("dlq", "show", str(row["lookup_id"])).output
    missing = run("dlq", "show", "999999", "--xact", code=1)
    assert "MQ_ERROR_MESSAGE_NOT_FOUND" in missing.stderr
    run("dlq", "show", str(row["lookup_id"]), "--xact", code=1)  # it is in the other queue


def test_requeue_puts_each_message_back_exactly_once(run) -> None:
    xact = sorted(
        (r for r in letters(run, "--xact") if r["destination"] == ORDERS), key=lambda r: r["lookup_id"]
    )
    out = doc(run("dlq", "requeue", *(str(r["lookup_id"]) for r in reversed(xact)), "--json"))
    assert out["failed"] == []
    assert [(r["lookup_id"], r["to"]) for r in out["requeued"]] == [(r["lookup_id"], ORDERS) for r in xact]
    assert all(r["new_message_id"] != r["message_id"] for r in out["requeued"])
    assert bodies(run, ORDERS) == ["x1", "x2"]
    back = doc(run("peek", ORDERS, "--count", "10", "--json"))["messages"]
    assert {(m["label"], m["app_specific"], m["class_name"], m["transactional"]) for m in back} == {
        ("order", 7, "NORMAL", True)
    }
    assert {m["message_id"] for m in back} == {r["new_message_id"] for r in out["requeued"]}
    assert [r["body"] for r in letters(run, "--xact")] == ["far"]
    # Requeueing the same IDs again finds nothing: no duplicates.
    run("dlq", "requeue", str(xact[0]["lookup_id"]), code=1)
    assert Counter(bodies(run, ORDERS)) == {"x1": 1, "x2": 1}

    plain = doc(run("dlq", "requeue", "--all", "--non-xact", "--json"))
    assert [r["to"] for r in plain["requeued"]] == [PLAIN] and plain["failed"] == []
    assert Counter(bodies(run, PLAIN)) == {"keep": 1, "p1": 1}
    assert letters(run, "--non-xact") == []
    # received normally afterwards
    got = doc(run("receive", ORDERS, "--count", "5", "--transactional", "--json"))["messages"]
    assert [m["body"] for m in got] == ["x1", "x2"]


def test_requeue_to_another_queue_and_without_expiry(run) -> None:
    out = doc(run("dlq", "requeue", "--all", "--xact", "--to", OTHER, "--no-expiry", "--json"))
    assert len(out["requeued"]) == 3 and out["failed"] == []
    moved = doc(run("peek", OTHER, "--count", "10", "--json"))["messages"]
    assert Counter(m["body"] for m in moved) == {"x1": 1, "x2": 1, "far": 1}
    assert {m["time_to_be_received"] for m in moved} == {0xFFFFFFFF}
    assert bodies(run, ORDERS) == [] and letters(run, "--xact") == []


def _stored(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The dead letters without ``age_seconds``, which moves with the clock between calls."""
    return [{k: v for k, v in r.items() if k != "age_seconds"} for r in rows]


def test_failed_requeue_leaves_messages_in_the_dead_letter_queue(run) -> None:
    before = _stored(letters(run))
    # Transactional messages cannot go to a non-transactional queue: the send fails, the
    # transaction aborts and the receives from DEADXACT are undone.
    out = doc(run("dlq", "requeue", "--all", "--xact", "--to", PLAIN, "--json", code=1))
    assert out["requeued"] == [] and len(out["failed"]) == 3
    assert all("MQ_ERROR_TRANSACTION_USAGE" in f["error"] for f in out["failed"])
    # A plain message cannot go to a transactional queue; an unknown queue fails too.
    out = doc(run("dlq", "requeue", "--all", "--non-xact", "--to", ORDERS, "--json", code=1))
    assert len(out["failed"]) == 1 and out["requeued"] == []
    result = run("dlq", "requeue", "--all", "--to", "private$\\nope", code=1)
    assert "MQ_ERROR_QUEUE_NOT_FOUND" in result.stderr
    assert _stored(letters(run)) == before
    assert bodies(run, PLAIN) == ["keep"] and bodies(run, ORDERS) == []
    run("dlq", "requeue", code=2)  # neither IDs nor --all
    run("dlq", "requeue", "1", "--all", code=2)


def test_purge(run) -> None:
    first = letters(run, "--xact")[0]
    assert doc(run("dlq", "purge", str(first["lookup_id"]), "--json"))["purged"] == {"xact": 1, "non-xact": 0}
    assert len(letters(run)) == 3
    run("dlq", "purge", "--non-xact", input="y\n", code=2)  # no terminal to ask, no --yes: nothing deleted
    assert len(letters(run)) == 3
    assert doc(run("dlq", "purge", "--non-xact", "--yes", "--json"))["purged"] == {"non-xact": 1}
    assert "purged 2 dead letter(s)" in run("dlq", "purge", "--yes").output
    assert letters(run) == []
    assert bodies(run, PLAIN) == ["keep"]


def test_over_remote_read(tmp_path: Path) -> None:
    """The commands work against a running QM through its remote-read service (grpc://)."""
    from openmsmq.remote.server import RemoteServer

    data = tmp_path / "data"
    dead_letter_some(data)
    with QueueManager(data) as qm:
        server = RemoteServer(qm, port=0).start()
        try:
            runner = CliRunner()
            listed = runner.invoke(cli, ["--qm", server.target, "dlq", "list", "--json"])
            assert listed.exit_code == 0, listed.output
            assert len(json.loads(listed.stdout)["dead_letters"]) == 4
            moved = runner.invoke(cli, ["--qm", server.target, "dlq", "requeue", "--all", "--json"])
            assert moved.exit_code == 0, moved.output
            assert len(json.loads(moved.stdout)["requeued"]) == 4
        finally:
            server.stop(grace=0.2)
        assert [m.body for m in qm.peek_range(ORDERS)] == [b"x1", b"x2"]
        assert Counter(m.body for m in qm.peek_range(PLAIN)) == {b"keep": 1, b"p1": 1}
        assert qm.peek_range("system$;deadxact") == [] and qm.peek_range("system$;deadletter") == []
