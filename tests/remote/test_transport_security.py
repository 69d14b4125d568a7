"""Tokens and TLS of the remote-read service: a listener off loopback with tokens and no TLS
is refused at start (the tokens would cross the network in clear) unless plaintext is asked
for by name, and ``remote.require_token`` refuses callers without a token on loopback too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from openmsmq.client.grpc_transport import GrpcTransport
from openmsmq.config import load_config
from openmsmq.errors import ConfigError, HResult, MQError
from openmsmq.qm import QueueManager
from openmsmq.remote.server import start_remote_server
from openmsmq.runtime import RUNTIME_FILE


def _tokens(tmp_path: Path) -> Path:
    path = tmp_path / "tokens"
    path.write_text("s3cret-token-for-ops\n")
    return path


def test_tokens_off_loopback_without_tls_are_refused_unless_plaintext_is_asked_for(tmp_path: Path) -> None:
    flags = {"remote.listen_address": "0.0.0.0", "remote.tokens_file": str(_tokens(tmp_path))}
    with pytest.raises(ConfigError) as err:
        load_config(None, {}, flags)
    assert err.value.key == "remote.tls_cert"
    assert "in clear" in err.value.message and "remote.allow_plaintext" in err.value.message
    assert load_config(None, {}, {**flags, "remote.allow_plaintext": True}).config.remote.allow_plaintext
    with_tls = {**flags, "remote.tls_cert": "/c.pem", "remote.tls_key": "/k.pem"}
    assert load_config(None, {}, with_tls).config.remote.tls_cert == Path("/c.pem")
    # On loopback nothing crosses a network: no TLS needed.
    assert load_config(None, {}, {"remote.tokens_file": str(_tokens(tmp_path))}).config


def test_serve_refuses_to_start_such_a_listener_and_says_why(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "OPENMSMQ_REMOTE_LISTEN_ADDRESS": "0.0.0.0",
        "OPENMSMQ_REMOTE_TOKENS_FILE": str(_tokens(tmp_path)),
    }
    result = subprocess.run(
        [sys.executable, "-m", "openmsmq.cli.serve", "--data-dir", str(tmp_path / "qm"),
         "--listen", "127.0.0.1", "--port", "0", "--remote-port", "0", "--metrics-port", "0"],
        capture_output=True, text=True, timeout=60, env=env,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    assert (
        "error: configuration remote.tls_cert: required when remote.listen_address (0.0.0.0)" in result.stderr
    )
    assert "in clear" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "qm" / RUNTIME_FILE).exists()


def test_require_token_needs_a_tokens_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(None, {"OPENMSMQ_REMOTE_REQUIRE_TOKEN": "true"}, {})
    assert err.value.key == "remote.tokens_file" and "remote.require_token" in err.value.message
    # Off by default: a single-user machine keeps the token-less loopback service.
    assert load_config(None, {}, {}).config.remote.require_token is False


def test_require_token_refuses_a_caller_without_one_on_loopback(tmp_path: Path) -> None:
    config = load_config(
        None,
        {},
        {"remote.require_token": True, "remote.tokens_file": str(_tokens(tmp_path)), "remote.port": 0},
    ).config
    with QueueManager(tmp_path / "qm") as qm:
        qm.create_queue("private$\\q")
        server = start_remote_server(qm, config)
        try:
            assert server.host == "127.0.0.1"
            for token in (None, "not-the-token"):
                with pytest.raises(MQError) as err:
                    GrpcTransport(server.target, token=token)
                assert err.value.hresult == HResult.MQ_ERROR_ACCESS_DENIED
            t = GrpcTransport(server.target, token="s3cret-token-for-ops")
            try:
                assert [q.path for q in t.list_queues()] == ["private$\\q"]
            finally:
                t.close()
        finally:
            server.stop(grace=0.2)
