"""``queue set`` and ``outgoing suspend|resume``: on a stopped queue manager (in this
process) and through a running one (its remote-read service, new rpcs)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from openmsmq.cli.main import cli
from openmsmq.client import INFINITE, SINGLE_MESSAGE, Connection, aio, connect
from openmsmq.errors import HResult, MQError
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


def test_the_asyncio_client_administers_a_running_queue_manager(served: Path) -> None:
    far = f"DIRECT=TCP:{B}\\private$\\far"

    async def main() -> None:
        async with await aio.connect(str(served)) as conn:
            await conn.create_queue(Q)
            got = await conn.set_queue_properties(Q, label="async", quota_kb=32)
            assert (got.label, got.quota_kb) == ("async", 32)
            with pytest.raises(MQError, match="did you mean"):
                await conn.set_queue_properties("orders", label="x")
            q = await conn.open_queue(far)
            await q.send(b"x", tx=SINGLE_MESSAGE)
            assert (await conn.suspend_outgoing(far)).kind == "outgoing"
            assert _state(served, far) == "suspended"
            await conn.resume_outgoing(far)
            assert _state(served, far) != "suspended"

    asyncio.run(main())


def test_the_asyncio_client_purges_an_outgoing_queue_of_a_stopped_queue_manager(tmp_path: Path) -> None:
    far = f"DIRECT=TCP:{B}\\private$\\far"

    async def main() -> None:
        async with await aio.connect(tmp_path / "qm") as conn:
            q = await conn.open_queue(far)
            await q.send_many([b"1", b"2"], tx=SINGLE_MESSAGE)
            assert await conn.purge_outgoing(far) == 2
            with pytest.raises(MQError) as stopped:
                await conn.suspend_outgoing(far)
            assert stopped.value.hresult == HResult.MQ_ERROR_SERVICE_NOT_AVAILABLE

    asyncio.run(main())


def test_every_connection_method_has_an_asyncio_counterpart() -> None:
    sync = {n for n, v in vars(Connection).items() if not n.startswith("_") and callable(v)}
    asynchronous = {n for n, v in vars(aio.AsyncConnection).items() if not n.startswith("_") and callable(v)}
    assert sorted(sync - asynchronous) == []
