"""Secrets stay out of errors and logs: ``--qm 'grpc://host?token=...'`` printed the token in
its error. One helper (:func:`openmsmq.redact.redact`) masks them in every error the command
line prints, in the client's own errors and in every log line."""

from __future__ import annotations

import io
import json
import logging
import subprocess
import sys

import pytest
from click.testing import CliRunner

from openmsmq.cli.main import cli
from openmsmq.client import connect
from openmsmq.client.grpc_transport import GrpcTransport
from openmsmq.errors import OpenMSMQError
from openmsmq.observability.logging import configure_logging, log_event
from openmsmq.redact import redact

SECRET = "S3cr3tT0ken-4711"


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("'grpc://mq1:2105?token=S3cr3t&tls=1': refused", "'grpc://mq1:2105?token=***&tls=1': refused"),
        ("authorization: Bearer abc.def-1", "authorization: Bearer ***"),
        ("grpc://ops:pw0rd@mq1:2105", "grpc://ops:***@mq1:2105"),
        ('{"token": "abc", "n": 1}', '{"token": "***", "n": 1}'),
        ("OPENMSMQ_REMOTE_TOKEN=zzz and password = hunter2", "OPENMSMQ_REMOTE_TOKEN=*** and password = ***"),
        ("remote.tokens_file = /etc/openmsmq/tokens", "remote.tokens_file = /etc/openmsmq/tokens"),
        ("grpc://127.0.0.1:2105 listening", "grpc://127.0.0.1:2105 listening"),
        ("missing or unknown bearer token", "missing or unknown bearer token"),
    ],
)
def test_redact_masks_secret_values_and_keeps_the_rest(text: str, want: str) -> None:
    assert redact(text) == want


@pytest.mark.parametrize(
    "target",
    [f"grpc://localhost?token={SECRET}", f"http://127.0.0.1:1?token={SECRET}", f"grpc://ops:{SECRET}@h"],
)
def test_the_command_line_never_prints_the_token_of_its_target(target: str) -> None:
    for extra in ([], ["--json"]):
        result = CliRunner().invoke(cli, ["--qm", target, *extra, "queue", "list"])
        assert result.exit_code == 1, result.output
        assert SECRET not in result.output
        assert "***" in result.output  # it still says which target, masked


def test_the_real_command_line_process_too() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "openmsmq", "--qm", f"grpc://localhost?token={SECRET}", "queue", "list"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 1
    assert SECRET not in result.stderr + result.stdout
    assert "token=***" in result.stderr


def test_client_errors_and_its_target_carry_no_secret() -> None:
    for target in (f"http://h?token={SECRET}", f"grpc://h?token={SECRET}"):
        with pytest.raises(OpenMSMQError) as err:
            connect(target)
        assert SECRET not in str(err.value)
    with pytest.raises(OpenMSMQError) as err:
        GrpcTransport(f"grpc://127.0.0.1:1?token={SECRET}", connect_timeout=0.05)
    assert SECRET not in str(err.value)


@pytest.mark.parametrize("fmt", ["kv", "json"])
def test_every_log_line_is_redacted(fmt: str) -> None:
    stream = io.StringIO()
    handler = configure_logging("debug", fmt, stream, logger="openmsmq.test_redact")
    log = logging.getLogger("openmsmq.test_redact")
    try:
        log_event(log, "connecting", target=f"grpc://mq1:2105?token={SECRET}")
        log.warning("retrying %s", f"grpc://mq1:2105?tls=1&token={SECRET}")
        try:
            raise RuntimeError(f"metadata authorization: Bearer {SECRET}")
        except RuntimeError:
            log.exception("call failed")
    finally:
        log.removeHandler(handler)
    text = stream.getvalue()
    assert SECRET not in text
    assert text.count("***") >= 3  # the target twice, the header (in the message and its source line)
    if fmt == "json":
        assert all(json.loads(line) for line in text.splitlines())
