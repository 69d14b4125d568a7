"""Poison messages end to end through the client library, locally (in-process) and over
remote read (gRPC): a consumer fails on chosen messages; for each receive_error_handling
value the test checks the order in which the other messages were processed (the queue
keeps flowing), each message's counts, and where every message ends."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from openmsmq.client import Access, AckRequest, outgoing
from openmsmq.client.connection import Connection
from openmsmq.client.grpc_transport import GrpcTransport
from openmsmq.client.inproc import InProcessTransport
from openmsmq.client.message import Message
from openmsmq.errors import HResult, MQError, PoisonMessageError
from openmsmq.qm import MessageRecord as Message_
from openmsmq.qm import QueueManager
from openmsmq.qm.poison import NACK_RECEIVE_REJECTED
from openmsmq.remote.server import RemoteServer
from openmsmq.retry_policy import RetryPolicy
from openmsmq.transfer.ack_admin import attach_acknowledgments
from openmsmq.wire.ids import ObjectId
from tests.clock import Clock

Q = "private$\\orders"
ADMIN = "private$\\admin"
BAD = {b"m1", b"m4"}
ALL = [f"m{i}".encode() for i in range(6)]
DELAY = 30.0


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def qm(tmp_path: Path, clock: Clock) -> Iterator[QueueManager]:
    with QueueManager(tmp_path / "qm", clock=clock) as manager:
        attach_acknowledgments(manager)
        manager.create_queue(ADMIN)
        yield manager


@pytest.fixture(params=["local", "remote"])
def conn(request: pytest.FixtureRequest, qm: QueueManager) -> Iterator[Connection]:
    if request.param == "local":
        with Connection(InProcessTransport(qm=qm)) as c:
            yield c
        return
    with RemoteServer(qm, port=0, cleanup_timeout=0.3, session_timeout=5.0) as srv:
        srv.start()
        with Connection(GrpcTransport(srv.target)) as c:
            yield c


def _fill(conn: Connection) -> None:
    with conn.open_queue(Q, Access.SEND) as q, conn.transaction() as tx:
        for body in ALL:
            props = {"ack": AckRequest.NEG_RECEIVE, "admin_queue": ADMIN} if body == b"m1" else {}
            q.send(outgoing(body, label=body.decode(), **props), tx=tx)


def _bodies(qm: QueueManager, queue: str) -> list[bytes]:
    try:
        return [m.body for m in qm.peek_range(queue)]
    except MQError as exc:  # a subqueue nothing was moved into does not exist
        assert exc.hresult == HResult.MQ_ERROR_QUEUE_NOT_FOUND
        return []


def _run(conn: Connection, processed: list[bytes]) -> None:
    def handler(m: Message) -> None:
        if m.body in BAD:
            raise ValueError(f"cannot handle {m.body!r}")
        processed.append(m.body)

    with conn.open_queue(Q, Access.RECEIVE) as q:
        q.consume(handler, timeout=0)


@pytest.mark.parametrize("handling", ["move", "reject", "drop", "fault"])
def test_each_receive_error_handling(
    conn: Connection, qm: QueueManager, clock: Clock, handling: str, caplog: pytest.LogCaptureFixture
) -> None:
    policy = RetryPolicy(receive_retry_count=1, max_retry_cycles=1, retry_cycle_delay=DELAY,
                         receive_error_handling=handling)  # type: ignore[arg-type]  # fmt: skip
    info = conn.create_queue(Q, transactional=True, retry_policy=policy)
    assert info.retry_policy == policy.encode() == f"1,1,30,{handling}"
    _fill(conn)
    processed: list[bytes] = []
    # First cycle: two aborts each (receive_retry_count + 1), then ;retry; the others flow.
    _run(conn, processed)
    assert processed == [b"m0", b"m2", b"m3", b"m5"]
    assert _bodies(qm, Q) == []
    assert _bodies(qm, Q + ";retry") == [b"m1", b"m4"]
    assert [(m.abort_count, m.move_count) for m in qm.peek_range(Q + ";retry")] == [(0, 1), (0, 1)]
    # Not due yet: nothing returns.
    clock.now += DELAY - 1
    assert qm.return_due() == 0
    clock.now += 1
    assert qm.return_due() == 2
    assert _bodies(qm, Q) == [b"m1", b"m4"] and _bodies(qm, Q + ";retry") == []
    assert [m.move_count for m in qm.peek_range(Q)] == [2, 2]
    # Second (last) cycle: two more aborts each, then the final handling.
    if handling == "fault":
        with pytest.raises(PoisonMessageError) as err:
            _run(conn, processed)
        assert err.value.lookup_id == qm.peek(Q).lookup_id
        # The message stays at the head; every later consumer stops on it.
        assert _bodies(qm, Q) == [b"m1", b"m4"]
        assert qm.peek(Q).abort_count >= 2 and qm.peek(Q).move_count == 2
        with pytest.raises(PoisonMessageError):
            _run(conn, processed)
        assert processed == [b"m0", b"m2", b"m3", b"m5"]
        return
    with caplog.at_level(logging.INFO, logger="openmsmq.poison"):
        _run(conn, processed)
    assert processed == [b"m0", b"m2", b"m3", b"m5"]
    assert _bodies(qm, Q) == [] and _bodies(qm, Q + ";retry") == []
    if handling == "move":
        assert _bodies(qm, Q + ";poison") == [b"m1", b"m4"]
        assert [(m.abort_count, m.move_count) for m in qm.peek_range(Q + ";poison")] == [(0, 3), (0, 3)]
        assert _bodies(qm, "system$;deadxact") == []
    elif handling == "reject":
        assert _bodies(qm, Q + ";poison") == []
        dead = qm.peek_range("system$;deadxact")
        assert [m.body for m in dead] == [b"m1", b"m4"]
        assert {m.message_class for m in dead} == {NACK_RECEIVE_REJECTED}
        # m1 asked for a negative receive acknowledgment: it is in the admin queue.
        acks = qm.peek_range(ADMIN)
        assert [a.message_class for a in acks] == [NACK_RECEIVE_REJECTED]
        about = ObjectId.decode(acks[0].correlation_id)
        assert (about.lineage, about.uniquifier) == (dead[0].id_lineage, dead[0].id_uniquifier)
    else:  # drop
        for queue in (Q + ";poison", "system$;deadxact", ADMIN):
            assert _bodies(qm, queue) == []
        assert sum("dropped" in r.getMessage() for r in caplog.records) == 2


def test_consumer_policy_overrides_a_queue_without_one(
    conn: Connection, qm: QueueManager, clock: Clock
) -> None:
    """The client library's own policy: the queue has none, the consumer applies WCF's
    rule before it hands a message over (a move in the receive's transaction)."""
    conn.create_queue(Q, transactional=True)
    _fill(conn)
    policy = RetryPolicy(receive_retry_count=0, max_retry_cycles=1, retry_cycle_delay=DELAY)
    processed: list[bytes] = []

    def handler(m: Message) -> None:
        if m.body in BAD:
            raise ValueError("bad")
        processed.append(m.body)

    with conn.open_queue(Q, Access.RECEIVE) as q:
        stats = q.consume(handler, policy=policy, max_messages=20, timeout=0)
        assert processed == [b"m0", b"m2", b"m3", b"m5"]
        assert (stats.processed, stats.aborted, stats.retried) == (4, 2, 2)
        assert _bodies(qm, Q + ";retry") == [b"m1", b"m4"]
        clock.now += DELAY
        assert qm.return_due() == 2
        stats = q.consume(handler, policy=policy, max_messages=20, timeout=0)
        assert (stats.aborted, stats.poisoned) == (2, 2)
    assert _bodies(qm, Q + ";poison") == [b"m1", b"m4"] and _bodies(qm, Q) == []


def test_move_and_counts_through_the_client(conn: Connection, qm: QueueManager) -> None:
    conn.create_queue(Q, transactional=True)
    _fill(conn)
    with conn.open_queue(Q, Access.RECEIVE) as q:
        with conn.transaction() as tx:
            m = q.receive(timeout=0, tx=tx)
            tx.abort()
        got = q.peek(timeout=0)
        assert (got.body, got.abort_count, got.move_count) == (b"m0", 1, 0)
        new = q.move(got.lookup_id, "poison")
        assert new > m.lookup_id
        # Back, inside a transaction.
        with conn.transaction() as tx, conn.open_queue(Q + ";poison", Access.RECEIVE) as p:
            moved = p.peek(timeout=0)
            assert (moved.lookup_id, moved.abort_count, moved.move_count) == (new, 0, 1)
            assert moved.to_dict()["move_count"] == 1
            assert p.move(new, Q, tx=tx) == 0
        assert [b.body for b in q.peek_many(10)][-1] == b"m0"
        with pytest.raises(MQError) as err:
            q.move(new, "nope;x")
        assert err.value.hresult == HResult.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME
    # Nothing is sent to a subqueue: refused when it is opened for sending.
    with pytest.raises(MQError) as err:
        conn.open_queue(Q + ";poison", Access.SEND)
    assert err.value.hresult == HResult.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION


def test_status_and_metrics_count_poison_and_retry(tmp_path: Path, clock: Clock) -> None:
    from prometheus_client import generate_latest

    from openmsmq.observability.metrics import Metrics, QueueManagerCollector
    from openmsmq.remote.status import collect_status

    metrics = Metrics()
    with QueueManager(tmp_path / "m", clock=clock, metrics=metrics) as qm:
        policy = RetryPolicy(receive_retry_count=0, max_retry_cycles=1, retry_cycle_delay=DELAY)
        qm.create_queue(Q, transactional=True, retry_policy=policy)
        with qm.begin() as tx:
            qm.send_many(Q, [Message_(body=b) for b in (b"a", b"b", b"c")], tx)
        for _ in range(2):  # a: to ;retry; b: to ;retry, back, then to ;poison
            tx = qm.begin()
            qm.receive(Q, tx=tx)
            tx.abort()
        clock.now += DELAY
        qm.return_due()
        while qm.peek(Q).body != b"b":
            with qm.begin() as tx:
                qm.receive(Q, tx=tx)
        tx = qm.begin()
        qm.receive(Q, tx=tx)
        tx.abort()
        status = {q.name: (q.kind, q.message_count) for q in collect_status(qm, clock.now).queues}
        assert status[Q + ";poison"] == ("subqueue", 1)
        assert status[Q + ";retry"] == ("subqueue", 0)
        collector = QueueManagerCollector.for_queue_manager(qm)
        metrics.registry.register(collector)
        text = generate_latest(metrics.registry).decode()
        collector.close()
    assert 'openmsmq_queue_messages{kind="subqueue",queue="private$\\\\orders;poison"} 1.0' in text
    assert 'openmsmq_poison_messages_total{disposition="retry",queue="private$\\\\orders"} 2.0' in text
    assert 'openmsmq_poison_messages_total{disposition="poison",queue="private$\\\\orders"} 1.0' in text
