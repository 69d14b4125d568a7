"""The CLI as MSMQ users type it: ``FormatName:``, "did you mean", receive and peek by
MessageId / CorrelationId."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from openmsmq.cli.main import cli
from openmsmq.client import connect
from openmsmq.client.selection import object_id

Q = "private$\\orders"


@pytest.fixture
def data(tmp_path: Path) -> str:
    d = str(tmp_path / "data")
    assert CliRunner().invoke(cli, ["init", d]).exit_code == 0
    return d


def run(data: str, *args: str, code: int = 0, input: str | None = None) -> Result:
    result = CliRunner().invoke(cli, ["--qm", data, *args], input=input)
    assert result.exit_code == code, (result.output, result.exception)
    return result


def test_formatname_prefix_and_did_you_mean(data: str) -> None:
    run(data, "queue", "create", Q)
    run(data, "send", "FormatName:DIRECT=OS:.\\private$\\orders", "hi")
    assert json.loads(run(data, "queue", "show", Q, "--json").stdout)["queue"]["message_count"] == 1
    for typed in ("orders", "private\\orders"):
        bad = run(data, "send", typed, "hi", code=1)
        assert "did you mean 'private$\\orders'?" in bad.stderr
        assert f"'{typed}'" in bad.stderr
    missing = run(data, "receive", "private\\nothere", code=1)
    assert "did you mean 'private$\\nothere'?" in missing.stderr


def test_receive_and_peek_by_id_and_correlation_id(data: str) -> None:
    run(data, "queue", "create", Q, "--transactional")
    with connect(data, create=False) as conn, conn.open_queue(Q) as q, conn.transaction() as tx:
        receipts = q.send_many([b"a", b"b", b"c"], tx=tx)
        q.send(b"reply", tx=tx, correlation_id=object_id(receipts[0].message_id, "id"))
    peeked = json.loads(run(data, "peek", Q, "--id", receipts[1].message_id, "--json").stdout)
    assert [m["body"] for m in peeked["messages"]] == ["b"]
    got = json.loads(
        run(data, "receive", Q, "--id", receipts[1].message_id, "--transactional", "--json").stdout
    )
    assert [m["body"] for m in got["messages"]] == ["b"]
    gone = run(data, "receive", Q, "--id", receipts[1].message_id, code=1)
    assert "MQ_ERROR_MESSAGE_NOT_FOUND" in gone.stderr
    corr = json.loads(
        run(
            data, "receive", Q, "--correlation-id", receipts[0].message_id, "--transactional", "--json"
        ).stdout
    )
    assert [m["body"] for m in corr["messages"]] == ["reply"]
    rest = json.loads(run(data, "peek", Q, "--count", "10", "--json").stdout)
    assert [m["body"] for m in rest["messages"]] == ["a", "c"]
    both = run(
        data, "peek", Q, "--id", receipts[0].message_id, "--correlation-id", receipts[0].message_id, code=2
    )
    assert "not both" in both.output
    bad = run(data, "peek", Q, "--id", "nonsense", code=1)
    assert "'nonsense'" in bad.stderr
