"""``queue export`` / ``queue import``: every property, body and the order survive a trip
through the file to another queue manager; a truncated or foreign file imports nothing."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from openmsmq.cli.main import cli
from openmsmq.client import SINGLE_MESSAGE, Access, AckRequest, Delivery, connect

Q = "private$\\orders"
TQ = "private$\\tx"


def run(data: Path, *args: str, code: int = 0) -> str:
    result = CliRunner().invoke(cli, ["--qm", str(data), *args])
    assert result.exit_code == code, (result.output, result.exception)
    return result.stdout if code == 0 else result.stderr


def _props(data: Path, queue: str) -> list[tuple[object, ...]]:
    with connect(str(data), create=False) as conn, conn.open_queue(queue, Access.PEEK) as q:
        msgs = q.peek_many(10_000, 0) if q.info().message_count else []
    return [
        (m.body, m.label, m.priority, m.correlation_id, m.app_specific, m.body_type, m.delivery,
         m.ack, m.admin_queue, m.response_queue, m.journal, m.extension)
        for m in msgs
    ]  # fmt: skip


def test_export_then_import_into_another_queue_manager(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        run(tmp_path, "init", str(d))
        run(d, "queue", "create", Q)
        run(d, "queue", "create", TQ, "--transactional")
    with connect(str(a), create=False) as conn:
        with conn.open_queue(Q) as q:
            q.send(b"\x00\xffbinary", label="bin", priority=6, app_specific=7, body_type=17)
            q.send("text", correlation_id=bytes(range(20)), response_queue=TQ, delivery=Delivery.RECOVERABLE)
            q.send_many([f"m{i}" for i in range(600)], label="bulk")
        with conn.open_queue(TQ) as t:
            t.send_many([b"t1", b"t2"], tx=SINGLE_MESSAGE, admin_queue=Q, ack=AckRequest.POS_ARRIVAL)
    for queue, name in ((Q, "q.jsonl"), (TQ, "t.jsonl")):
        assert "exported" in run(a, "queue", "export", queue, str(tmp_path / name))
        assert f"imported {len(_props(a, queue))} message(s)" in run(
            b, "queue", "import", queue, str(tmp_path / name)
        )
        assert _props(b, queue) == _props(a, queue)  # every property, body and the order
    assert len(_props(a, Q)) == 602  # export removed nothing
    lines = (tmp_path / "q.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["format"] == "openmsmq-queue-export"
    assert json.loads(lines[-1]) == {"end": True, "count": 602}
    again = run(a, "queue", "export", Q, str(tmp_path / "q.jsonl"), code=1)
    assert "exists already" in again


def test_truncated_or_foreign_file_imports_nothing(tmp_path: Path) -> None:
    a = tmp_path / "a"
    run(tmp_path, "init", str(a))
    run(a, "queue", "create", Q)
    with connect(str(a), create=False) as conn, conn.open_queue(Q) as q:
        q.send_many([b"x", b"y", b"z"])
    export = tmp_path / "q.jsonl"
    run(a, "queue", "export", Q, str(export))
    run(a, "queue", "create", "private$\\copy")
    cut = tmp_path / "cut.jsonl"
    cut.write_text("\n".join(export.read_text().splitlines()[:-1]) + "\n")
    assert "ends without its trailer" in run(a, "queue", "import", "private$\\copy", str(cut), code=1)
    foreign = tmp_path / "foreign.jsonl"
    foreign.write_text('{"hello": 1}\n')
    assert "is not a queue export" in run(a, "queue", "import", "private$\\copy", str(foreign), code=1)
    bad = tmp_path / "bad.jsonl"
    lines = export.read_text().splitlines()
    bad.write_text("\n".join([lines[0], lines[1], '{"body": "zz"}', *lines[3:]]) + "\n")
    assert "line 3" in run(a, "queue", "import", "private$\\copy", str(bad), code=1)
    assert _props(a, "private$\\copy") == []
    missing = CliRunner().invoke(cli, ["--qm", str(a), "queue", "import", Q, str(tmp_path / "none.jsonl")])
    assert missing.exit_code == 2 and "does not exist" in missing.output
