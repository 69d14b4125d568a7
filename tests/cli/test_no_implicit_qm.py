"""A mistyped --qm never creates a queue manager: client commands refuse a directory that
holds none, naming it as typed; creating one is explicit (``openmsmq init``, ``serve``);
``send`` warns when the queue manager that holds the outgoing queue is not running."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from openmsmq.cli.main import cli
from openmsmq.client import connect
from openmsmq.errors import HResult, MQError
from openmsmq.qm import QueueManager

P = "private$\\orders"
FAR = "DIRECT=TCP:192.0.2.7\\PRIVATE$\\orders"

#: Every client command, as a user would type it after --qm.
CLIENT_COMMANDS = [
    ["queue", "list"],
    ["queue", "create", P],
    ["queue", "show", P],
    ["queue", "purge", P, "--yes"],
    ["queue", "delete", P],
    ["send", FAR, "hello", "--transactional"],
    ["send", P, "hello"],
    ["receive", P],
    ["peek", P],
    ["status"],
    ["dlq", "list"],
    ["dlq", "purge", "--yes"],
]


def holds_queue_manager(path: Path) -> bool:
    return (path / "openmsmq.db").is_file()


def invoke(*args: str, env: dict[str, str | None] | None = None) -> Result:
    base: dict[str, str | None] = {k: None for k in os.environ if k.startswith("OPENMSMQ_")}
    return CliRunner().invoke(cli, list(args), env={**base, **(env or {})})


@pytest.mark.parametrize("command", CLIENT_COMMANDS, ids=lambda c: " ".join(c[:2]))
def test_a_mistyped_qm_is_an_error_naming_it_and_creates_nothing(tmp_path: Path, command: list[str]) -> None:
    QueueManager(tmp_path / "qm-a").close()  # the one meant
    typo = str(tmp_path / "qm-aa") + "/"  # as a shell completion leaves it
    result = invoke("--qm", typo, *command)
    assert result.exit_code == 1, result.output
    assert f"no queue manager at '{typo}' (the directory does not exist)" in result.stderr
    assert f"openmsmq init {typo}" in result.stderr
    assert not (tmp_path / "qm-aa").exists()
    assert "sent" not in result.stdout


def test_an_empty_directory_is_not_a_queue_manager(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = invoke("--qm", str(empty), "send", FAR, "hello", "--transactional")
    assert result.exit_code == 1
    assert f"no queue manager at '{empty}' (it has no openmsmq.db)" in result.stderr
    assert list(empty.iterdir()) == []


def test_queue_list_in_an_empty_working_directory_creates_no_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = invoke("queue", "list")  # --qm defaults to ./data
    assert result.exit_code == 1
    assert "no queue manager at './data'" in result.stderr
    assert list(tmp_path.iterdir()) == []
    as_json = invoke("--json", "queue", "list")
    assert json.loads(as_json.stdout)["error"]["name"] == "MQ_ERROR_SERVICE_NOT_AVAILABLE"
    assert list(tmp_path.iterdir()) == []


def test_init_creates_a_queue_manager_once(tmp_path: Path) -> None:
    data = tmp_path / "qm-a"
    made = invoke("init", str(data), "--json")
    assert made.exit_code == 0, made.output
    doc = json.loads(made.stdout)
    assert doc["created"] == str(data) and holds_queue_manager(data)
    again = invoke("init", str(data))
    assert again.exit_code == 1
    assert again.stderr.strip() == f"error: '{data}' already holds a queue manager; nothing was changed"
    with QueueManager(data) as qm:  # the identity init gave it, unchanged
        assert str(qm.guid) == doc["qm_guid"]
    assert invoke("--qm", str(data), "queue", "create", P).exit_code == 0
    # init without DIR uses --qm; without either it is a usage error
    assert invoke("--qm", str(tmp_path / "qm-b"), "init").exit_code == 0
    assert holds_queue_manager(tmp_path / "qm-b")
    assert invoke("init").exit_code == 2
    assert invoke("--qm", "grpc://127.0.0.1:1", "init").exit_code == 2


def test_send_warns_when_the_queue_manager_holding_the_outgoing_queue_is_not_running(tmp_path: Path) -> None:
    data = str(tmp_path / "qm-a")
    assert invoke("init", data).exit_code == 0
    assert invoke("--qm", data, "queue", "create", P).exit_code == 0
    far = invoke("--qm", data, "send", FAR, "hello", "--transactional")
    assert far.exit_code == 0
    assert far.stdout == f"sent 1 message(s) to {FAR}\n"
    assert far.stderr == (
        f"warning: the queue manager at '{data}' is not running: the message(s) wait in its"
        f" outgoing queue to '{FAR}' until 'openmsmq serve' runs over it\n"
    )
    local = invoke("--qm", data, "send", P, "hello")
    assert local.exit_code == 0 and local.stderr == ""


def test_send_does_not_warn_through_a_running_queue_manager(tmp_path: Path) -> None:
    from openmsmq.remote.server import RemoteServer

    with QueueManager(tmp_path / "data") as qm:
        server = RemoteServer(qm, port=0).start()
        try:
            result = invoke("--qm", server.target, "send", FAR, "hello", "--transactional")
        finally:
            server.stop(grace=0.2)
        assert result.exit_code == 0, result.output
        assert result.stderr == ""
        assert qm.get_queue(FAR).msg_count == 1


def test_the_library_creates_only_when_asked(tmp_path: Path) -> None:
    with pytest.raises(MQError) as caught:
        connect(str(tmp_path / "nope"), create=False)
    assert caught.value.hresult == HResult.MQ_ERROR_SERVICE_NOT_AVAILABLE
    assert not (tmp_path / "nope").exists()
    with connect(str(tmp_path / "new")) as conn:  # the library default: a new QM
        assert conn.list_queues() == []
    assert holds_queue_manager(tmp_path / "new")
    with connect(str(tmp_path / "new"), create=False) as conn:
        assert conn.list_queues() == []
