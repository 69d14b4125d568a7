"""``openmsmq --qm DIR config show`` shows that queue manager's configuration: the one its
running ``serve`` loaded (file, environment, flags), or, stopped, what ``serve`` over DIR
would load; each value with where it came from."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

from click.testing import CliRunner, Result

from openmsmq.cli.main import cli
from openmsmq.qm import QueueManager
from tests.serve_proc import A, ServeProcess, free_port


def invoke(*args: str, env: dict[str, str | None] | None = None) -> Result:
    base: dict[str, str | None] = {k: None for k in os.environ if k.startswith("OPENMSMQ_")}
    return CliRunner().invoke(cli, list(args), env={**base, **(env or {})})


def test_a_stopped_queue_manager_shows_what_serve_over_it_would_load(tmp_path: Path) -> None:
    data = str(tmp_path / "qm-a")
    QueueManager(data).close()
    shown = invoke("--qm", data, "config", "show", "--json", env={"OPENMSMQ_MQQB_PORT": "1802"})
    assert shown.exit_code == 0, shown.output
    doc = json.loads(shown.stdout)
    assert doc["config"]["qm"]["data_dir"] == data
    assert doc["sources"]["qm.data_dir"] == "flag:--qm"
    assert doc["config"]["mqqb"]["port"] == 1802
    assert doc["sources"]["mqqb.port"] == "env:OPENMSMQ_MQQB_PORT"
    assert doc["queue_manager"] == {"data_dir": data, "running": False, "pid": None}
    text = invoke("config", "show", env={"OPENMSMQ_QM": data})
    assert text.exit_code == 0, text.output
    assert text.stdout.splitlines()[0] == (
        f"# the queue manager at {data} is not running: the configuration 'openmsmq serve'"
        " would start it with here"
    )
    assert f'data_dir = "{data}"  # env:OPENMSMQ_QM' in text.stdout
    assert tomllib.loads(text.stdout)["qm"]["data_dir"] == data


def test_a_mistyped_qm_is_an_error(tmp_path: Path) -> None:
    typo = str(tmp_path / "qm-typo")
    result = invoke("--qm", typo, "config", "show")
    assert result.exit_code == 1
    assert f"no queue manager at '{typo}'" in result.stderr
    assert not Path(typo).exists()
    remote = invoke("--qm", "grpc://127.0.0.1:2105", "config", "show")
    assert remote.exit_code == 2 and "give --qm its data directory" in remote.stderr


def test_a_running_queue_manager_shows_the_configuration_it_loaded(tmp_path: Path) -> None:
    data = tmp_path / "qm-a"
    conf = tmp_path / "qm.toml"
    conf.write_text('[store]\nqm_quota = "1GiB"\n[log]\nformat = "json"\n')
    port = free_port(A)
    serve = ServeProcess(
        data, A, port, tmp_path / "serve.log", "--config", str(conf),
        env={"OPENMSMQ_PROTOCOL_ORDER_ACK_TIMEOUT": "0.25"},
    )  # fmt: skip
    try:
        serve.start("runtime")
        assert serve.proc is not None
        # This process has none of the server's environment, file or flags.
        shown = invoke("--qm", str(data), "config", "show", "--json")
        assert shown.exit_code == 0, shown.output
        doc = json.loads(shown.stdout)
        assert doc["queue_manager"] == {"data_dir": str(data), "running": True, "pid": serve.proc.pid}
        assert doc["file"] == str(conf)
        assert doc["config"]["mqqb"]["port"] == port
        assert doc["sources"]["mqqb.port"] == "flag:--port"
        assert doc["config"]["mqqb"]["listen_address"] == A
        assert doc["sources"]["mqqb.listen_address"] == "flag:--listen"
        assert doc["sources"]["remote.listen_address"] == "flag:--listen"  # follows --listen
        assert doc["sources"]["qm.data_dir"] == "flag:--data-dir"
        assert doc["config"]["protocol"]["order_ack_timeout"] == 0.25
        assert doc["sources"]["protocol.order_ack_timeout"] == "env:OPENMSMQ_PROTOCOL_ORDER_ACK_TIMEOUT"
        assert doc["config"]["store"]["qm_quota"] == 1 << 30
        assert doc["sources"]["store.qm_quota"] == f"file:{conf}"
        assert doc["sources"]["protocol.window_size"] == "default"
        text = invoke("--qm", str(data), "config", "show")
        assert text.exit_code == 0, text.output
        assert text.stdout.splitlines()[0] == (
            f"# the queue manager at {data}, running (pid {serve.proc.pid})"
        )
        assert f"port = {port}  # flag:--port" in text.stdout
        assert f'format = "json"  # file:{conf}' in text.stdout
        other = invoke("--qm", str(data), "config", "show", "--config", str(conf))
        assert other.exit_code == 2 and "running with its own configuration" in other.stderr
    finally:
        serve.close()
