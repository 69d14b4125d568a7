"""The MetricsSink calls of the hot paths, as :class:`Metrics` counts them."""

from __future__ import annotations

from pathlib import Path

from openmsmq.observability.metrics import Metrics
from openmsmq.observability.sink import NULL_METRICS, MetricsSink, NullMetrics
from openmsmq.protocol.events import CloseReason, Role
from openmsmq.protocol.incoming import RejectReason
from openmsmq.qm.manager import QueueManager
from openmsmq.store.records import MessageRecord
from openmsmq.wire.constants import MessageClass


def _v(m: Metrics, name: str, **labels: str) -> float:
    got = m.registry.get_sample_value(name, labels)
    return 0.0 if got is None else got


def test_null_and_prometheus_sinks_have_the_same_methods() -> None:
    sink: MetricsSink = Metrics()  # type-checked: Metrics is a MetricsSink
    assert isinstance(NULL_METRICS, NullMetrics)
    public = {n for n in dir(NullMetrics) if not n.startswith("_")}
    assert public <= set(dir(sink))


def test_first_transmissions_resends_and_order_ack_round_trip() -> None:
    m = Metrics()
    m.count_transmitted(7, [10, 11, 12], 100.0, False)
    m.count_transmitted(7, [13, 14], 100.5, False)
    assert _v(m, "openmsmq_messages_transmitted_total") == 5
    # A session opened again: the protocol resends 10..14 and sends 15, 16 for the first time.
    m.count_transmitted(7, [10, 11, 12, 13, 14, 15, 16], 102.0, True)
    assert _v(m, "openmsmq_messages_transmitted_total") == 7
    assert _v(m, "openmsmq_message_resends_total") == 5
    # An OrderAck through 12: round trip from the first transmission of 10 (t=100).
    m.count_released(7, 3, 12, 101.0)
    assert _v(m, "openmsmq_messages_acknowledged_total") == 3
    assert _v(m, "openmsmq_order_ack_round_trip_seconds_count") == 1
    assert _v(m, "openmsmq_order_ack_round_trip_seconds_sum") == 1.0
    # Through 14: the oldest released (13) went out at t=100.5.
    m.count_released(7, 2, 14, 103.0)
    assert _v(m, "openmsmq_order_ack_round_trip_seconds_sum") == 1.0 + 2.5
    # Through 16: first sent at t=102.
    m.count_released(7, 2, 16, 103.5)
    assert _v(m, "openmsmq_order_ack_round_trip_seconds_sum") == 1.0 + 2.5 + 1.5
    assert _v(m, "openmsmq_order_ack_round_trip_seconds_count") == 3
    # Released without a first transmission this process saw: counted, no round trip.
    m.count_released(8, 4, 40, 104.0)
    assert _v(m, "openmsmq_messages_acknowledged_total") == 11
    assert _v(m, "openmsmq_order_ack_round_trip_seconds_count") == 3


def test_other_counts() -> None:
    m = Metrics()
    m.count_committed(3, 0)
    m.count_committed(0, 2)
    m.count_accepted(4)
    m.count_forwarded(1)
    m.count_rejected(RejectReason.DUPLICATE)
    m.count_rejected(RejectReason.DUPLICATE)
    m.count_dead_lettered([MessageClass.NACK_RECEIVE_TIMEOUT, MessageClass.NACK_RECEIVE_TIMEOUT, 0xC001])
    m.session_opened(Role.INITIATOR)
    m.session_closed(Role.INITIATOR, CloseReason.IDLE)
    m.observe_commit(8, 0.001)
    m.reading_paused(True)
    m.reading_paused(False)
    m.reading_paused(True)
    assert _v(m, "openmsmq_mqqb_reading_paused") == 1
    assert _v(m, "openmsmq_mqqb_reading_pauses_total") == 2
    assert _v(m, "openmsmq_messages_sent_total") == 3
    assert _v(m, "openmsmq_messages_received_total") == 2
    assert _v(m, "openmsmq_messages_accepted_total") == 4
    assert _v(m, "openmsmq_messages_forwarded_total") == 1
    assert _v(m, "openmsmq_messages_rejected_total", reason="duplicate") == 2
    assert _v(m, "openmsmq_messages_dead_lettered_total", **{"class": "NACK_RECEIVE_TIMEOUT"}) == 2
    assert _v(m, "openmsmq_sessions_opened_total", role="initiator") == 1
    assert _v(m, "openmsmq_sessions", role="initiator") == 0
    assert _v(m, "openmsmq_sessions_closed_total", reason="idle") == 1
    assert _v(m, "openmsmq_store_commit_batch_operations_sum") == 8


def test_queue_manager_counts_commits_and_expiry(tmp_path: Path) -> None:
    m = Metrics()
    with QueueManager(tmp_path, metrics=m) as qm:
        qm.create_queue("private$\\q", transactional=True)
        with qm.begin() as tx:
            qm.send_many("private$\\q", [MessageRecord(body=b"x")] * 5, tx)
        with qm.begin() as tx:
            assert len(qm.receive_many("private$\\q", 2, tx=tx)) == 2
        qm.create_queue("private$\\plain")
        qm.send("private$\\plain", MessageRecord(body=b"old", time_to_be_received=1))
        assert qm.expire(qm.clock() + 10) == 1
        commits = qm.store.stats.batches
    assert _v(m, "openmsmq_messages_sent_total") == 6
    assert _v(m, "openmsmq_messages_received_total") == 2
    assert _v(m, "openmsmq_messages_dead_lettered_total", **{"class": "NACK_RECEIVE_TIMEOUT"}) == 1
    assert _v(m, "openmsmq_store_commit_duration_seconds_count") == commits
