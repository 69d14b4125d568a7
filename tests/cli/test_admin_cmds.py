"""``queue set`` and ``outgoing suspend|resume``: on a stopped queue manager (in this
process) and through a running one (its remote-read service, new rpcs)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from openmsmq.cli.main import cli
from openmsmq.client import INFINITE, SINGLE_MESSAGE, connect
from tests.serve_proc import A, B, ServeProcess, free_port

Q = "private$\\orders"


def run(data: Path | str, *args: str, code: int = 0) -> Result:
    result = CliRunner().invoke(cli, ["--qm", str(data), *args])
    assert result.exit_code == code, (result.output, result.exception)
    return result


def _queue(result: Result) -> dict[str, object]:
    doc: dict[str, object] = json.loads(result.stdout)["queue"]
    return doc


def test_queue_set_on_a_stopped_queue_manager(tmp_path: Path) -> None:
    data = tmp_path / "qm"
    run(tmp_path, "init", str(data))
    run(data, "queue", "create", Q, "--quota", "50")
    got = _queue(run(data, "queue", "set", Q, "--label", "new", "--journal", "--quota", "200", "--json"))
    assert (got["label"], got["journal"], got["quota_kb"]) == ("new", True, 200)
    got = _queue(run(data, "queue", "set", Q, "--quota", "unlimited", "--no-journal", "--json"))
    assert (got["label"], got["journal"], got["quota_kb"]) == ("new", False, INFINITE)
    guid = "6b29fc40-ca47-1067-b31d-00dd010662da"
    assert _queue(run(data, "queue", "set", Q, "--allow-sender", guid, "--json"))["allowed_senders"] == [guid]
    assert _queue(run(data, "queue", "set", Q, "--allow-every-sender", "--json"))["allowed_senders"] == []
    assert "nothing to set" in run(data, "queue", "set", Q, code=2).output
    assert "'lots' is neither" in run(data, "queue", "set", Q, "--quota", "lots", code=2).output
    assert (
        "did you mean 'private$\\orders'?"
        in run(data, "queue", "set", "orders", "--label", "x", code=1).stderr
    )
    system = run(data, "queue", "set", "system$;deadletter", "--label", "x", code=1)
    assert "is not a private queue" in system.stderr
    stopped = run(data, "outgoing", "suspend", "DIRECT=TCP:127.0.0.2\\private$\\q", code=1)
    assert "MQ_ERROR_SERVICE_NOT_AVAILABLE" in stopped.stderr and "openmsmq serve" in stopped.stderr


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Path]:
    data = tmp_path / "qm"
    connect(str(data)).close()
    serve = ServeProcess(data, A, free_port(A), tmp_path / "serve.log")
    try:
        serve.start("runtime")
        yield data
    finally:
        serve.close()


def _state(data: Path, destination: str) -> str:
    doc = json.loads(run(data, "status", "--json").stdout)
    (row,) = [o for o in doc["outgoing"] if o["format_name"].casefold() == destination.casefold()]
    state: str = row["state"]
    return state


def test_queue_set_and_outgoing_suspend_resume_on_a_running_queue_manager(served: Path) -> None:
    run(served, "queue", "create", Q)
    got = _queue(run(served, "queue", "set", Q, "--label", "live", "--quota", "64", "--json"))
    assert (got["label"], got["quota_kb"]) == ("live", 64)
    far = f"DIRECT=TCP:{B}\\private$\\far"  # no QM answers there: its queue retries
    with connect(str(served)) as conn, conn.open_queue(far) as q:
        q.send(b"x", tx=SINGLE_MESSAGE)
    done = json.loads(run(served, "outgoing", "suspend", "FormatName:" + far, "--json").stdout)
    assert done["suspended"] is True and done["queue"]["kind"] == "outgoing"
    assert _state(served, far) == "suspended"
    assert "resumed the outgoing queue" in run(served, "outgoing", "resume", far).stdout
    assert _state(served, far) != "suspended"
    local = run(served, "outgoing", "suspend", Q, code=1)
    assert "is not an outgoing queue" in local.stderr
    missing = run(served, "outgoing", "suspend", f"DIRECT=TCP:{B}\\private$\\never", code=1)
    assert "MQ_ERROR_QUEUE_NOT_FOUND" in missing.stderr
