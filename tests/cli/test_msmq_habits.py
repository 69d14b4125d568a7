"""The CLI as MSMQ users type it: ``FormatName:``, "did you mean", receive and peek by
MessageId / CorrelationId."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from openmsmq.cli.main import cli
from openmsmq.client import Access, connect
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


def _bodies(data: str, queue: str = Q) -> list[bytes]:
    with connect(data, create=False) as conn, conn.open_queue(queue, Access.PEEK) as q:
        return [m.body for m in q.peek_many(10_000, 0)] if q.info().message_count else []


def test_send_lines_one_message_per_line(data: str) -> None:
    run(data, "queue", "create", Q, "--transactional")
    text = "".join(f"line {i}\n" for i in range(600)) + "crlf\r\n\nlast"
    sent = json.loads(run(data, "send", Q, "--lines", "--transactional", "--json", input=text).stdout)
    assert sent["sent"] == 603
    assert _bodies(data) == [f"line {i}".encode() for i in range(600)] + [b"crlf", b"", b"last"]


def test_send_lines_stops_at_a_line_that_is_not_utf8_naming_it(data: str, tmp_path: Path) -> None:
    run(data, "queue", "create", Q, "--transactional")
    good = b"".join(f"g{i}\n".encode() for i in range(300))
    runner = CliRunner()
    result = runner.invoke(
        cli, ["--qm", data, "send", Q, "--lines", "--transactional"], input=good + b"bad \xff\nafter\n"
    )
    assert result.exit_code == 1, result.output
    assert "line 301 of stdin is not UTF-8 (byte 0xff at column 5)" in result.stderr
    assert "the 300 line(s) before it were sent" in result.stderr
    assert _bodies(data) == [f"g{i}".encode() for i in range(300)]  # nothing of it or after


def test_send_file_per_message_and_missing_file(data: str, tmp_path: Path) -> None:
    run(data, "queue", "create", Q)
    (tmp_path / "a.bin").write_bytes(b"\x00\x01binary")
    (tmp_path / "b.txt").write_bytes(b"text")
    run(data, "send", Q, "--file", str(tmp_path / "a.bin"), "--file", str(tmp_path / "b.txt"))
    assert _bodies(data) == [b"\x00\x01binary", b"text"]
    missing = run(data, "send", Q, "--file", str(tmp_path / "nope.txt"), code=2)
    assert "nope.txt" in missing.output and "No such file" in missing.output
    assert len(_bodies(data)) == 2
    assert "give one of BODY, --file, --lines" in run(data, "send", Q, "x", "--lines", code=2).output
    assert "No such option '--nope'" in run(data, "send", Q, "x", "--nope", code=2).output


def test_receive_and_peek_output_formats(data: str) -> None:
    run(data, "queue", "create", Q)
    run(data, "send", Q, "--lines", input="one\ntwo\nthree\nfour\n")
    assert run(data, "peek", Q, "--count", "2", "--body-only").stdout == "one\ntwo\n"
    lines = run(data, "peek", Q, "--count", "3", "--format", "json").stdout.splitlines()
    assert [json.loads(line)["body"] for line in lines] == ["one", "two", "three"]
    assert run(data, "receive", Q, "--format", "raw").stdout == "one\n"
    got = run(data, "receive", Q, "--count", "5", "--format", "json").stdout.splitlines()
    assert [json.loads(line)["body"] for line in got] == ["two", "three", "four"]
    assert (
        "--body-only is --format raw"
        in run(data, "peek", Q, "--body-only", "--format", "json", code=2).output
    )


def test_queue_create_exist_ok(data: str) -> None:
    run(data, "queue", "create", Q, "--transactional")
    again = run(data, "queue", "create", Q, code=1)
    assert "MQ_ERROR_QUEUE_EXISTS" in again.stderr
    kept = run(data, "queue", "create", Q, "--exist-ok", "--json")
    assert json.loads(kept.stdout)["created"]["transactional"] is True  # the existing queue, as it is
    assert json.loads(kept.stdout)["existed"] is True
    assert "exists and is transactional; it is left as it is" in kept.stderr
    same = run(data, "queue", "create", Q, "--exist-ok", "--transactional")
    assert "exists private$\\orders" in same.stdout and not same.stderr
