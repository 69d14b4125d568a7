"""Subqueues and Move Message on a local queue manager: names, reads of a subqueue, moves
both ways (alone and inside a transaction), AbortCount / MoveCount, and every bad input
refused with a typed error and nothing changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from openmsmq.errors import HResult, MQError
from openmsmq.qm import MessageRecord, QueueManager, QueueType
from openmsmq.qm.options import StoreOptions
from tests.clock import Clock

Q = "private$\\orders"


@pytest.fixture(params=["threaded", "sync", "postgresql"])
def qm(request: pytest.FixtureRequest, tmp_path: Path):
    options = None
    if request.param == "postgresql":  # moves and counts run the same statements there
        options = StoreOptions(backend="postgresql", dsn=request.getfixturevalue("pg_dsn"))
    manager = QueueManager(
        tmp_path / "qm",
        threaded=request.param != "sync",
        clock=Clock(),
        computer_name="host1",
        store_options=options,
    )
    manager.create_queue(Q, transactional=True)
    yield manager
    manager.close()


def _send(qm: QueueManager, *bodies: bytes, queue: str = Q) -> list[int]:
    with qm.begin() as tx:
        qm.send_many(queue, [MessageRecord(body=b, label=b.decode()) for b in bodies], tx)
    return [m.lookup_id for m in qm.peek_range(queue)][-len(bodies) :]


def _bodies(qm: QueueManager, queue: str) -> list[bytes]:
    return [m.body for m in qm.peek_range(queue)]


def _code(info: pytest.ExceptionInfo[MQError]) -> HResult:
    return info.value.hresult


def test_move_creates_subqueue_and_keeps_identity(qm: QueueManager) -> None:
    a, b, c = _send(qm, b"a", b"b", b"c")
    before = qm.peek_by_lookup_id(Q, b)
    with pytest.raises(MQError) as err:
        qm.peek(Q + ";poison")
    assert _code(err) == HResult.MQ_ERROR_QUEUE_NOT_FOUND  # no subqueue before the first move
    new = qm.move_message(Q, b, "poison")
    assert new > c  # a new LookupIdentifier, above every one the QM handed out
    assert _bodies(qm, Q) == [b"a", b"c"]
    assert _bodies(qm, Q + ";poison") == [b"b"]
    moved = qm.peek(".\\private$\\Orders;Poison")  # path name, any case
    assert moved.lookup_id == new
    assert (moved.id_lineage, moved.id_uniquifier, moved.label, moved.sent_time) == (
        before.id_lineage,
        before.id_uniquifier,
        before.label,
        before.sent_time,
    )
    assert (moved.abort_count, moved.move_count) == (0, 1)
    sub = qm.get_queue("DIRECT=OS:host1\\private$\\orders;poison")
    assert sub.queue_type == QueueType.SUBQUEUE and sub.msg_count == 1 and sub.transactional
    assert qm.get_queue(Q).msg_count == 2
    assert [r.name for r in qm.subqueues(Q)] == [Q + ";poison"]
    # And back: MoveCount 2, at the tail of the queue (its new LookupIdentifier).
    back = qm.move_message(Q + ";poison", new, Q)
    assert _bodies(qm, Q) == [b"a", b"c", b"b"]
    assert qm.peek_by_lookup_id(Q, back).move_count == 2
    assert qm.get_queue(Q + ";poison").msg_count == 0
    del a


def test_subqueue_is_readable_receivable_purgeable(qm: QueueManager) -> None:
    ids = _send(qm, b"1", b"2", b"3", b"4")
    for lid in ids:
        qm.move_message(Q, lid, ";retry")
    sub = Q + ";retry"
    assert qm.peek(sub).body == b"1"
    with qm.begin() as tx:  # transactional receive from the subqueue
        assert qm.receive(sub, tx=tx).body == b"1"
    tx = qm.begin()
    assert qm.receive(sub, tx=tx).body == b"2"
    tx.abort()
    assert _bodies(qm, sub) == [b"2", b"3", b"4"]
    assert qm.peek(sub).abort_count == 1
    assert qm.purge_queue(sub) == 3
    assert _bodies(qm, sub) == [] and _bodies(qm, Q) == []


def test_move_between_subqueues_and_in_transaction(qm: QueueManager) -> None:
    a, b = _send(qm, b"a", b"b")
    ra = qm.move_message(Q, a, "retry")
    tx = qm.begin()
    assert qm.move_message(Q + ";retry", ra, "poison", tx) == 0
    # Locked by the transaction until it ends: not receivable, not movable by others.
    assert _bodies(qm, Q + ";retry") == [b"a"]
    with pytest.raises(MQError) as err:
        qm.move_message(Q + ";retry", ra, "other")
    assert _code(err) == HResult.MQ_ERROR_MESSAGE_LOCKED_UNDER_TRANSACTION
    tx.abort()  # nothing moved; the abort of a move is no aborted receive
    assert _bodies(qm, Q + ";retry") == [b"a"]
    assert qm.peek(Q + ";retry").abort_count == 0
    with qm.begin() as tx:
        qm.move_message(Q + ";retry", ra, ";poison", tx)
        # A message this transaction received is moved instead of received.
        got = qm.receive(Q, tx=tx)
        assert got.lookup_id == b
        qm.move_message(Q, b, "poison", tx)
    assert _bodies(qm, Q + ";poison") == [b"a", b"b"]
    assert [m.move_count for m in qm.peek_range(Q + ";poison")] == [2, 1]
    assert _bodies(qm, Q) == [] and _bodies(qm, Q + ";retry") == []


def test_abort_count_is_durable(tmp_path: Path) -> None:
    with QueueManager(tmp_path / "d", clock=Clock()) as qm:
        qm.create_queue(Q, transactional=True)
        (lid,) = _send(qm, b"x")
        for _ in range(3):
            tx = qm.begin()
            qm.receive(Q, tx=tx)
            tx.abort()
        assert qm.peek(Q).abort_count == 3
    with QueueManager(tmp_path / "d", clock=Clock()) as qm:
        m = qm.peek(Q)
        assert (m.lookup_id, m.abort_count, m.move_count) == (lid, 3, 0)
        with qm.begin() as tx:  # a committed receive is no abort
            qm.receive(Q, tx=tx)


def test_send_to_subqueue_is_refused(qm: QueueManager) -> None:
    (lid,) = _send(qm, b"x")
    qm.move_message(Q, lid, "poison")
    for name in (Q + ";poison", Q + ";never", "DIRECT=TCP:10.9.9.9\\private$\\orders;poison"):
        with pytest.raises(MQError) as err, qm.begin() as tx:
            qm.send(name, MessageRecord(body=b"y"), tx)
        assert _code(err) == HResult.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION
        assert "subqueue" in str(err.value)
    assert _bodies(qm, Q + ";poison") == [b"x"]
    assert not [q for q in qm.list_queues(include_system=True) if q.queue_type == QueueType.OUTGOING]


def test_bad_moves_change_nothing(qm: QueueManager) -> None:
    qm.create_queue("private$\\other", transactional=True)
    qm.create_queue("private$\\plain")
    (lid,) = _send(qm, b"x")
    (other,) = _send(qm, b"o", queue="private$\\other")
    cases = [
        ((Q, lid, "private$\\other"), HResult.MQ_ERROR_ILLEGAL_OPERATION),  # unrelated queue
        ((Q, lid, "private$\\other;poison"), HResult.MQ_ERROR_ILLEGAL_OPERATION),
        ((Q, lid, "DIRECT=TCP:10.1.1.1\\private$\\orders;poison"), HResult.MQ_ERROR_ILLEGAL_OPERATION),
        ((Q, lid, Q), HResult.MQ_ERROR_ILLEGAL_OPERATION),  # already there
        ((Q, lid, "journal"), HResult.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME),
        ((Q, lid, "x" * 33), HResult.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME),
        ((Q, lid, "a b"), HResult.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME),
        ((Q, other, "poison"), HResult.MQ_ERROR_MESSAGE_NOT_FOUND),  # another queue's message
        ((Q, 999_999, "poison"), HResult.MQ_ERROR_MESSAGE_NOT_FOUND),
        ((Q, -1, "poison"), HResult.MQ_ERROR_INVALID_PARAMETER),
        ((Q + ";nosuch", lid, Q), HResult.MQ_ERROR_QUEUE_NOT_FOUND),  # unknown subqueue
        (("system$;deadxact", lid, "poison"), HResult.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION),
    ]
    for args, want in cases:
        with pytest.raises(MQError) as err:
            qm.move_message(*args)
        assert _code(err) == want, (args, err.value)
    with pytest.raises(MQError) as err:
        qm.create_queue(Q + ";poison", transactional=True)
    assert _code(err) == HResult.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME
    # A message another transaction received.
    tx = qm.begin()
    qm.receive(Q, tx=tx)
    with pytest.raises(MQError) as err:
        qm.move_message(Q, lid, "poison")
    assert _code(err) == HResult.MQ_ERROR_MESSAGE_LOCKED_UNDER_TRANSACTION
    tx.abort()
    # Nothing changed but the abort count of that receive; no subqueue exists.
    assert _bodies(qm, Q) == [b"x"] and _bodies(qm, "private$\\other") == [b"o"]
    assert qm.subqueues(Q) == [] or [r.msg_count for r in qm.subqueues(Q)] == [0] * len(qm.subqueues(Q))
    assert qm.peek(Q).move_count == 0


def test_delete_queue_deletes_subqueues(qm: QueueManager) -> None:
    (lid,) = _send(qm, b"x")
    qm.move_message(Q, lid, "poison")
    qm.delete_queue(Q)
    with pytest.raises(MQError) as err:
        qm.peek(Q + ";poison")
    assert _code(err) == HResult.MQ_ERROR_QUEUE_NOT_FOUND
    qm.create_queue(Q, transactional=True)
    assert qm.subqueues(Q) == []


def test_a_message_arriving_for_a_subqueue_is_refused(qm: QueueManager) -> None:
    """MS-MQQB: the rules of receipt refuse a destination that is no private queue, so a
    subqueue named by a peer gets NACK_BAD_DST_Q (MS-MQQB 3.1.5.8.2)."""
    from openmsmq.transfer.arrival import refusal_class
    from openmsmq.wire.constants import MessageClass

    (lid,) = _send(qm, b"x")
    qm.move_message(Q, lid, "poison")
    sub, main = qm.get_queue(Q + ";poison"), qm.get_queue(Q)
    assert refusal_class(main, qm.guid, True, 0, 0xFFFFFFFF, 0) is None
    assert refusal_class(sub, qm.guid, True, 0, 0xFFFFFFFF, 0) == MessageClass.NACK_BAD_DST_Q
