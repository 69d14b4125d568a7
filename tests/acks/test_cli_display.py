"""Acknowledgments as the CLI and the client API show them: class name and the identity
of the acknowledged message (its CorrelationIdentifier, MS-MQQB 3.1.7.15)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from openmsmq.cli.main import cli
from openmsmq.client.message import Message as ClientMessage
from openmsmq.qm.manager import QueueManager
from openmsmq.transfer.ack_admin import attach_acknowledgments
from openmsmq.wire.ids import ObjectId

ADMIN = "private$\\admin"
ORDERS = "private$\\orders"


def test_receive_admin_queue_shows_class_and_original_identity(tmp_path: Path) -> None:
    data = tmp_path / "data"
    runner = CliRunner()
    for args in (["init"], ["queue", "create", ADMIN], ["queue", "create", ORDERS]):
        assert runner.invoke(cli, ["--qm", str(data), *args]).exit_code == 0
    sent = runner.invoke(
        cli,
        [
            "--qm",
            str(data),
            "send",
            ORDERS,
            "hello",
            "--admin-queue",
            f".\\{ADMIN}",
            "--ack",
            "full",
            "--json",
        ],
    )
    assert sent.exit_code == 0, sent.output
    original_id = json.loads(sent.output)["messages"][0]["message_id"]
    with QueueManager(data, threaded=False) as qm:  # the purge raises NACK_Q_PURGED
        attach_acknowledgments(qm)
        assert qm.purge_queue(ORDERS) == 1
    out = runner.invoke(cli, ["--qm", str(data), "receive", "--admin-queue", ADMIN, "--json"])
    assert out.exit_code == 0, out.output
    [ack] = json.loads(out.output)["messages"]
    assert ack["class_name"] == "NACK_Q_PURGED"
    assert ack["acknowledges"] == original_id
    assert ack["body"] == "hello"
    # Table form: the class name and the acknowledged message's identity are printed.
    with QueueManager(data, threaded=False) as qm:
        attach_acknowledgments(qm)
        runner.invoke(
            cli, ["--qm", str(data), "send", ORDERS, "again", "--admin-queue", f".\\{ADMIN}", "--ack", "full"]
        )
        assert qm.purge_queue(ORDERS) == 1
    table = runner.invoke(cli, ["--qm", str(data), "receive", "--admin-queue", ADMIN], env={"COLUMNS": "300"})
    assert table.exit_code == 0, table.output
    assert "NACK_Q_PURGED" in table.output and "acknowledges" in table.output
    assert "\\" in table.output  # the {GUID}\\uniquifier of the acknowledged message


def test_receive_needs_a_queue_or_an_admin_queue(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--qm", str(tmp_path / "d"), "receive"])
    assert result.exit_code != 0 and "--admin-queue" in result.output


def test_client_message_acknowledged_message_id() -> None:
    guid = ObjectId.decode(bytes(range(20)))
    ack = ClientMessage(b"", "", 1, "x", message_class=0x8000, correlation_id=guid.encode())
    assert ack.is_acknowledgment and ack.class_name == "NACK_BAD_DST_Q"
    assert ack.acknowledged_message_id == str(guid)
    normal = ClientMessage(b"", "", 1, "x", correlation_id=guid.encode())
    assert not normal.is_acknowledgment and normal.acknowledged_message_id is None
    assert ClientMessage(b"", "", 1, "x", message_class=0x0002).is_acknowledgment
    assert ClientMessage(b"", "", 1, "x", message_class=0x4000).is_acknowledgment
