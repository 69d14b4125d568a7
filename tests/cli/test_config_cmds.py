"""``openmsmq config show``: effective values with their sources, JSON, errors naming the key."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

from click.testing import CliRunner

from openmsmq.cli.main import cli
from openmsmq.config import Config, load_config


def invoke(*args: str, env: dict[str, str | None] | None = None):
    # CliRunner's env overlays os.environ; strip any OPENMSMQ_* the test run may carry.
    base: dict[str, str | None] = {k: None for k in os.environ if k.startswith("OPENMSMQ_")}
    return CliRunner().invoke(cli, list(args), env={**base, **(env or {})})


def test_defaults_render_as_toml_with_sources() -> None:
    result = invoke("config", "show")
    assert result.exit_code == 0, result.output
    assert "[mqqb]" in result.output
    assert "port = 1801  # default" in result.output
    assert tomllib.loads(result.output)["metrics"]["port"] == 9181


def test_file_and_env_sources_and_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "qm.toml"
    path.write_text('[mqqb]\nport = 1802\n[log]\nformat = "json"\n[store]\nqm_quota = "1GiB"\n')
    result = invoke("config", "show", "--config", str(path), env={"OPENMSMQ_METRICS_PORT": "9300"})
    assert result.exit_code == 0, result.output
    out = result.output
    assert f"port = 1802  # file:{path}" in out
    assert "port = 9300  # env:OPENMSMQ_METRICS_PORT" in out
    assert f'format = "json"  # file:{path}' in out
    # The output is itself a configuration file giving the same configuration.
    again = tmp_path / "again.toml"
    again.write_text(out)
    assert load_config(again).config == load_config(path, {"OPENMSMQ_METRICS_PORT": "9300"}).config


def test_json_document(tmp_path: Path) -> None:
    path = tmp_path / "qm.toml"
    path.write_text('[mqqb.routes]\n"10.0.0.5" = "10.0.0.1:1801"\n[remote]\ntls_cert = ""\n')
    result = invoke("config", "show", "--config", str(path), "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["file"] == str(path)
    assert doc["config"]["mqqb"]["port"] == 1801
    assert doc["config"]["mqqb"]["routes"] == {"10.0.0.5": "10.0.0.1:1801"}
    assert doc["config"]["mqqb"]["allowed_peers"] == ["127.0.0.0/8", "::1/128"]
    assert doc["config"]["qm"]["data_dir"] == str(Config().qm.data_dir)
    assert doc["config"]["store"]["qm_quota"] == "unlimited"
    assert doc["config"]["remote"]["tls_cert"] is None
    assert doc["sources"]["mqqb.routes"] == f"file:{path}"
    assert doc["sources"]["remote.tls_cert"] == f"file:{path}"
    assert doc["sources"]["mqqb.port"] == "default"
    # the global flag works too
    assert json.loads(invoke("--json", "config", "show").output)["file"] is None


def test_bad_values_exit_nonzero_naming_the_key(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[mqqb]\nport = 70000\n")
    result = invoke("config", "show", "--config", str(path))
    assert result.exit_code == 1
    assert "mqqb.port" in result.stderr and "70000" in result.stderr
    result = invoke("config", "show", env={"OPENMSMQ_LOG_LEVEL": "loud"})
    assert result.exit_code == 1 and "log.level" in result.stderr
    result = invoke("--json", "config", "show", env={"OPENMSMQ_MQQB_PROT": "1"})
    assert result.exit_code == 1
    assert json.loads(result.stdout)["error"]["key"] == "mqqb.prot"
    missing = invoke("config", "show", "--config", str(tmp_path / "nope.toml"))
    assert missing.exit_code == 1 and "cannot read" in missing.stderr
