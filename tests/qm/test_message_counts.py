"""Per-queue counters of messages in and out (QueueManager.message_counts): what the
console turns into each queue's rates and the metrics expose as
``openmsmq_queue_messages_in_total`` / ``_out_total``. Counted once a commit is durable,
per queue; an aborted transaction counts nothing."""

from __future__ import annotations

from pathlib import Path

import pytest

from openmsmq.observability.metrics import Metrics
from openmsmq.qm.manager import QueueManager
from openmsmq.store.records import MessageRecord

TX = "private$\\orders"
PLAIN = "private$\\plain"
REMOTE = "DIRECT=TCP:192.0.2.9\\private$\\far"


@pytest.fixture
def qm(tmp_path: Path):
    manager = QueueManager(tmp_path / "qm", threaded=False, computer_name="host1")
    manager.create_queue(TX, transactional=True)
    manager.create_queue(PLAIN, transactional=False)
    yield manager
    manager.close()


def test_sends_receives_moves_and_releases_are_counted_per_queue(qm: QueueManager) -> None:
    assert qm.message_counts()[TX] == (0, 0)
    qm.send_many(PLAIN, [MessageRecord(body=b"p%d" % i) for i in range(3)])  # no transaction
    with qm.begin() as tx:
        qm.send_many(TX, [MessageRecord(body=b"a"), MessageRecord(body=b"b")], tx)
        qm.send(TX, MessageRecord(body=b"c"), tx)
    tx = qm.begin()
    qm.send(TX, MessageRecord(body=b"never"), tx)
    tx.abort()  # nothing committed: nothing counted
    counts = qm.message_counts()
    assert counts[TX] == (3, 0) and counts[PLAIN] == (3, 0)

    with qm.begin() as tx:
        qm.receive_many(TX, 2, tx=tx, timeout=0)
    qm.receive(PLAIN, timeout=0)  # outside a transaction
    tx = qm.begin()
    qm.receive(TX, tx=tx, timeout=0)
    tx.abort()  # back in the queue: not out
    counts = qm.message_counts()
    assert counts[TX] == (3, 2) and counts[PLAIN] == (3, 1)

    lookup_id = qm.peek(TX, timeout=0).lookup_id
    qm.move_message(TX, lookup_id, "poison")
    counts = qm.message_counts()
    assert counts[TX] == (3, 3) and counts[TX + ";poison"] == (1, 0)

    with qm.begin() as tx:
        qm.send_many(REMOTE, [MessageRecord(body=b"1"), MessageRecord(body=b"2")], tx)
    out = qm.open_queue(REMOTE)
    name = out.record.display_name
    assert qm.message_counts()[name] == (2, 0)
    qm.sequence_store().release_outgoing(out, 1, return_ids=False)  # the transfer's path
    assert qm.message_counts()[name] == (2, 1)
    qm.sequence_store().release_outgoing(out, 2)
    assert qm.message_counts()[name] == (2, 2)


def test_range_removal_and_idempotent_send_are_counted(qm: QueueManager) -> None:
    got = qm.send_idempotent(PLAIN, [MessageRecord(body=b"x"), MessageRecord(body=b"y")], ["i1", "i2"])
    again = qm.send_idempotent(PLAIN, [MessageRecord(body=b"x")], ["i1"])  # already accepted
    assert again == [None]
    assert qm.message_counts()[PLAIN] == (2, 0)
    assert qm.remove_through({PLAIN: max(i for i in got if i is not None)}) == 2
    assert qm.message_counts()[PLAIN] == (2, 2)


def test_the_metrics_expose_the_counters_with_the_queue_label(qm: QueueManager) -> None:
    metrics = Metrics()
    collector = metrics.attach_queue_manager(qm)
    try:
        qm.send_many(PLAIN, [MessageRecord(body=b"m")] * 4)
        qm.receive(PLAIN, timeout=0)
        text = metrics.exposition().decode()
        assert 'openmsmq_queue_messages_in_total{queue="private$\\\\plain"} 4.0' in text
        assert 'openmsmq_queue_messages_out_total{queue="private$\\\\plain"} 1.0' in text
        assert 'openmsmq_queue_messages_in_total{queue="private$\\\\orders"} 0.0' in text
    finally:
        metrics.detach(collector)
