"""``openmsmq sequence list`` / ``reset``: against a running QM (live rejections, reset
through the remote-read service) and against a stopped one (the stored state)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from openmsmq.cli.main import cli
from openmsmq.cli.sequence_cmds import parse_position
from openmsmq.qm.manager import QueueManager
from openmsmq.wire.ids import TxSequenceId
from tests.net.peer_socket import SocketPeer
from tests.serve_proc import B, ServeProcess, free_port

Q = "private$\\orders"
SENDER = "127.0.0.3"


def _run(data: Path, *args: str, input: str | None = None) -> Any:
    return CliRunner().invoke(cli, ["--qm", str(data), "sequence", *args], input=input)


def _rows(data: Path) -> list[dict[str, Any]]:
    result = _run(data, "list", "--json")
    assert result.exit_code == 0, (result.output, result.exception)
    rows: list[dict[str, Any]] = json.loads(result.stdout)
    return rows


def _bodies(data: Path) -> list[bytes]:
    with QueueManager(data, integrity_check=False) as qm:
        return [m.body for m in qm.peek_range(Q, 0, 100)]


def test_parse_position() -> None:
    assert parse_position("0x6ab13f6800000001:42") == (0x6AB13F6800000001, 42)
    assert parse_position("7:0") == (7, 0)
    for bad in ("", "12", "x:1", "0:1", "1:-1", f"{1 << 64}:1"):
        with pytest.raises(click.BadParameter):
            parse_position(bad)


def test_list_and_reset_a_stuck_sequence_of_a_running_qm_then_of_a_stopped_one(tmp_path: Path) -> None:
    data = tmp_path / "b"
    with QueueManager(data) as qm:
        qm.create_queue(Q, transactional=True)
    port = free_port(B, SENDER)
    serve = ServeProcess(data, B, port, tmp_path / "b.log")
    serve.start("runtime")
    try:
        sender = SocketPeer(B, port, SENDER)  # a sender speaking for itself
        sid = TxSequenceId.from_int((int(time.time()) << 32) | 1)
        sender.send(sender.transactional(Q, b"1", sid, 1, 0), settle=1.0)
        for _ in range(3):  # its store lost messages 2..4: it sends 5 after 4, again and again
            sender.send(sender.transactional(Q, b"5", sid, 5, 4))
        deadline = time.monotonic() + 20
        rows = _rows(data)
        while not (rows and rows[0]["last_reject_reason"]) and time.monotonic() < deadline:
            time.sleep(0.1)
            rows = _rows(data)
        [row] = rows
        assert row["source_qm"] == str(sender.guid) and row["last_reject_reason"] == "GAP"
        assert (row["tx_sequence_id"], row["tx_sequence_number"]) == (sid.value, 1)
        last = (row["last_reject_tx_sequence_id"], row["last_reject_number"], row["last_reject_previous"])
        assert last == (sid.value, 5, 4)
        human = _run(data, "list")
        assert human.exit_code == 0 and "GAP" in human.output, human.output
        # Asked, the operator says no: nothing changes.
        declined = _run(data, "reset", row["source_qm"], row["destination"], input="n\n")
        assert declined.exit_code == 1 and "Reset it?" in declined.output, declined.output
        assert "number 4" in declined.output and "GAP" in declined.output
        assert _rows(data)[0]["tx_sequence_number"] == 1
        done = _run(data, "reset", row["source_qm"], row["destination"], "--yes")
        assert done.exit_code == 0, (done.output, done.exception)
        assert _rows(data)[0]["tx_sequence_number"] == 4
        sender.send(sender.transactional(Q, b"5", sid, 5, 4), settle=1.0)  # now accepted
        deadline = time.monotonic() + 20
        while _rows(data)[0]["tx_sequence_number"] != 5 and time.monotonic() < deadline:
            time.sleep(0.1)
        sender.close()
    finally:
        code = serve.stop()
        serve.close()
    assert code == 0
    assert _bodies(data) == [b"1", b"5"]
    # Stopped: the stored state, set explicitly or forgotten.
    [row] = _rows(data)
    assert row["tx_sequence_number"] == 5 and row["last_reject_reason"] is None
    no_default = _run(data, "reset", row["source_qm"], row["destination"], "--yes")
    assert no_default.exit_code == 2 and "--to" in no_default.output
    moved = _run(data, "reset", row["source_qm"], row["destination"], "--to", f"{sid.value:#x}:9", "--yes")
    assert moved.exit_code == 0, moved.output
    assert _rows(data)[0]["tx_sequence_number"] == 9
    gone = _run(data, "reset", row["source_qm"], row["destination"], "--forget", "--yes")
    assert gone.exit_code == 0, gone.output
    assert _rows(data) == []
    unknown = _run(data, "reset", row["source_qm"], row["destination"], "--forget", "--yes")
    assert unknown.exit_code == 1 and "no incoming sequence" in unknown.output
