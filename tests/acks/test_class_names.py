"""One name per message class everywhere a person or a program reads it: the MS-MQMQ
2.2.18.1.6 constant without its MQMSG_CLASS_ prefix (NACK_BAD_DST_Q for 0x8000), in the
log, the dead-letter listing (JSON and text), the metrics label and the docs."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from openmsmq.cli.main import cli
from openmsmq.client import connect
from openmsmq.client.dead_letters import iter_dead_letters
from openmsmq.client.inproc import InProcessTransport
from openmsmq.observability.metrics import Metrics
from openmsmq.qm import QueueManager, names
from openmsmq.store.records import MessageRecord
from openmsmq.wire.constants import MessageClass
from tests.acks.nodes import acked_node
from tests.transfer.harness import Net

ROOT = Path(__file__).resolve().parents[2]

#: MESSAGE_CLASS_VALUES as MS-MQMQ 2.2.18.1.6 lists them.
SPEC = {
    "MQMSG_CLASS_NORMAL": 0x0000,
    "MQMSG_CLASS_REPORT": 0x0001,
    "MQMSG_CLASS_ACK_REACH_QUEUE": 0x0002,
    "MQMSG_CLASS_ORDER_ACK": 0x00FF,
    "MQMSG_CLASS_ACK_RECEIVE": 0x4000,
    "MQMSG_CLASS_NACK_BAD_DST_Q": 0x8000,
    "MQMSG_CLASS_NACK_DELETED": 0x8001,
    "MQMSG_CLASS_NACK_REACH_QUEUE_TIMEOUT": 0x8002,
    "MQMSG_CLASS_NACK_Q_EXCEED_QUOTA": 0x8003,
    "MQMSG_CLASS_NACK_ACCESS_DENIED": 0x8004,
    "MQMSG_CLASS_NACK_HOP_COUNT_EXCEEDED": 0x8005,
    "MQMSG_CLASS_NACK_BAD_SIGNATURE": 0x8006,
    "MQMSG_CLASS_NACK_BAD_ENCRYPTION": 0x8007,
    "MQMSG_CLASS_NACK_NOT_TRANSACTIONAL_Q": 0x8009,
    "MQMSG_CLASS_NACK_NOT_TRANSACTIONAL_MSG": 0x800A,
    "MQMSG_CLASS_NACK_UNSUPPORTED_CRYPTO_PROVIDER": 0x800B,
    "MQMSG_CLASS_NACK_Q_DELETED": 0xC000,
    "MQMSG_CLASS_NACK_Q_PURGED": 0xC001,
    "MQMSG_CLASS_NACK_RECEIVE_TIMEOUT": 0xC002,
    "MQMSG_CLASS_NACK_RECEIVE_REJECTED": 0xC004,
}


@pytest.mark.parametrize(("constant", "value"), sorted(SPEC.items()))
def test_the_name_is_the_spec_constant_without_its_prefix(constant: str, value: int) -> None:
    from openmsmq.wire.constants import describe_message_class, message_class_name

    name = constant.removeprefix("MQMSG_CLASS_")
    assert message_class_name(value) == name
    assert describe_message_class(value) == f"{name} (0x{value:04X})"


def test_every_class_of_the_enumeration_is_in_the_spec_list() -> None:
    from openmsmq.wire.constants import describe_message_class, message_class_name

    assert {"MQMSG_CLASS_" + c.name: int(c) for c in MessageClass} == SPEC
    assert message_class_name(0x0123) == describe_message_class(0x0123) == "0x0123"  # application-defined


def test_a_rejected_message_has_the_same_name_in_the_log_the_dead_letters_and_the_metrics(
    net: Net, caplog: pytest.LogCaptureFixture
) -> None:
    a = acked_node(net, "127.0.0.1")
    b = acked_node(net, "127.0.0.2")
    b.qm.metrics = b.qm.store.metrics = metrics = Metrics()
    with a.qm.begin() as tx:  # no such queue at B, sent with --dead-letter
        a.qm.send(
            "DIRECT=TCP:127.0.0.2\\private$\\nosuch",
            MessageRecord(body=b"lost?", negative_journaling=True),
            tx,
        )
    with caplog.at_level(logging.INFO):
        net.run_until_quiet()
    # B's log
    [line] = [r.getMessage() for r in caplog.records if "refused on receipt" in r.getMessage()]
    assert line.endswith("refused on receipt: NACK_BAD_DST_Q (0x8000)")
    # B's metrics
    value = metrics.registry.get_sample_value
    assert value("openmsmq_messages_rejected_on_arrival_total", {"class": "NACK_BAD_DST_Q"}) == 1
    # A's transactional dead-letter queue, as `dlq list --json` and the client show it
    [dead] = a.qm.peek_range(names.DEADXACT, 0, 10)
    assert dead.message_class == MessageClass.NACK_BAD_DST_Q
    with connect(InProcessTransport(qm=a.qm)) as conn:
        [letter] = iter_dead_letters(conn, ["xact"])
        row = letter.to_dict(now=0)
    assert row["reason"] == row["class_name"] == "NACK_BAD_DST_Q"
    assert row["class"] == 0x8000


def test_dlq_show_puts_the_value_beside_the_name(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    runner = CliRunner()

    def run(*args: str) -> str:
        result = runner.invoke(cli, ["--qm", data, *args], env={"COLUMNS": "200"})
        assert result.exit_code == 0, (result.output, result.exception)
        return result.output

    QueueManager(data).close()
    far = "DIRECT=TCP:192.0.2.7\\private$\\far"
    run("send", far, "gone", "--transactional", "--dead-letter")
    run("queue", "purge", far, "--yes")
    listed = run("dlq", "list")
    assert "NACK_DELETED" in listed and "NackDeleted" not in listed
    lookup_id = re.search(r"xact\s+(\d+)", listed)
    assert lookup_id is not None
    assert "NACK_DELETED (0x8001):" in run("dlq", "show", lookup_id.group(1))


def test_the_docs_use_the_one_name() -> None:
    """docs/ and the README name classes as MS-MQMQ does; the MS-MQDMPR spellings
    (NackBadDestQueue, AckReceive, ...) and made-up ones (NackBadDstQ) appear only where a
    line cites MS-MQDMPR or a seed's table (docs/conformance.md maps the seeds' text)."""
    camel = re.compile(r"\b(?:Nack[A-Z][A-Za-z]+|AckReceive|AckReachQueue)\b")
    found = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        if path.name == "conformance.md":
            continue
        for n, line in enumerate(path.read_text().splitlines(), 1):
            if camel.search(line) and "MS-MQDMPR" not in line:
                found.append(f"{path.name}:{n}: {line.strip()}")
    assert found == []
