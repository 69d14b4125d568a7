"""The head hint: head reads skip the queue's locked prefix, and lose nothing by it."""

from __future__ import annotations

from pathlib import Path

import pytest

from openmsmq.errors import HResult, IOTimeoutError, MQError
from openmsmq.qm import MessageRecord, QueueManager
from tests.clock import Clock


@pytest.fixture(params=[True, False], ids=["threaded", "sync"])
def qm(request: pytest.FixtureRequest, tmp_path: Path):
    manager = QueueManager(tmp_path / "qm", threaded=request.param, clock=Clock(), computer_name="host1")
    manager.create_queue("private$\\tx", transactional=True)
    manager.create_queue("private$\\q")
    yield manager
    manager.close()


def fill(qm: QueueManager, n: int) -> list[bytes]:
    bodies = [i.to_bytes(4, "big") for i in range(n)]
    with qm.begin() as tx:
        qm.send_many("private$\\tx", [MessageRecord(body=b) for b in bodies], tx)
    return bodies


def test_concurrent_transactions_get_disjoint_batches_in_order(qm: QueueManager) -> None:
    bodies = fill(qm, 40)
    txs = [qm.begin() for _ in range(4)]
    got = [[m.body for m in qm.receive_many("private$\\tx", 10, tx=t)] for t in txs]
    assert got == [bodies[i * 10 : i * 10 + 10] for i in range(4)]
    with pytest.raises(IOTimeoutError):
        qm.peek("private$\\tx")
    txs[0].commit()
    txs[2].commit()
    txs[1].abort()  # back in place, ahead of the hint
    assert qm.peek("private$\\tx").body == bodies[10]
    again = qm.begin()
    assert [m.body for m in qm.receive_many("private$\\tx", 15, tx=again)] == bodies[10:20]
    txs[3].abort()
    assert [m.body for m in qm.receive_many("private$\\tx", 15, tx=again)] == bodies[30:40]
    again.commit()
    with pytest.raises(IOTimeoutError):
        qm.peek("private$\\tx")


def test_messages_sent_after_the_hint_are_found(qm: QueueManager) -> None:
    bodies = fill(qm, 5)
    held = qm.begin()
    assert [m.body for m in qm.receive_many("private$\\tx", 5, tx=held)] == bodies
    more = fill(qm, 3)
    with qm.begin() as tx:
        assert [m.body for m in qm.receive_many("private$\\tx", 10, tx=tx)] == more
    held.abort()
    assert [m.body for m in qm.receive_many("private$\\tx", 10)] == bodies


def test_higher_priority_sent_after_the_hint_comes_first(qm: QueueManager) -> None:
    q = "private$\\q"
    qm.send_many(q, [MessageRecord(body=b"p3-%d" % i, priority=3) for i in range(4)])
    first = qm.dequeue_begin(q)  # locks the head: the hint moves past it
    assert first.message.body == b"p3-0"
    qm.send(q, MessageRecord(body=b"p7", priority=7))
    qm.send(q, MessageRecord(body=b"p0", priority=0))
    assert [m.body for m in qm.peek_many(q, 10)] == [b"p7", b"p3-1", b"p3-2", b"p3-3", b"p0"]
    assert [m.body for m in qm.receive_many(q, 2)] == [b"p7", b"p3-1"]
    qm.dequeue_end(first, delete=False)  # NACK: available again, at its place
    assert [m.body for m in qm.receive_many(q, 10)] == [b"p3-0", b"p3-2", b"p3-3", b"p0"]


def test_failed_transactional_commit_puts_messages_back_before_the_hint(
    qm: QueueManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    bodies = fill(qm, 6)
    tx = qm.begin()
    assert len(qm.receive_many("private$\\tx", 3, tx=tx)) == 3

    def boom(*_a: object, **_k: object) -> None:
        raise OSError("disk on fire")

    monkeypatch.setattr(qm.store, "write", boom)
    with pytest.raises(OSError):
        tx.commit()
    monkeypatch.undo()
    assert [m.body for m in qm.receive_many("private$\\tx", 10)] == bodies


def test_dequeue_begin_many_locks_a_batch_in_one_call(qm: QueueManager) -> None:
    bodies = fill(qm, 6)
    tx = qm.begin()
    first = qm.dequeue_begin_many("private$\\tx", 4, tx=tx)
    assert [p.message.body for p in first] == bodies[:4]
    rest = qm.dequeue_begin_many("private$\\tx", 4)  # another reader: only what is left
    assert [p.message.body for p in rest] == bodies[4:]
    with pytest.raises(IOTimeoutError):
        qm.dequeue_begin_many("private$\\tx", 4)
    qm.dequeue_end(first[1], delete=False)  # out of the transaction, back in place
    qm.dequeue_end(rest[0], delete=True)
    qm.dequeue_end(rest[1], delete=False)
    tx.commit()
    assert [m.body for m in qm.receive_many("private$\\tx", 10)] == [bodies[1], bodies[5]]


def test_failed_remove_through_leaves_its_messages_readable(qm: QueueManager) -> None:
    """A receive that runs while remove_through holds its range moves the hint past it;
    when the removal's commit then fails, the range must be found again from the head."""
    bodies = fill(qm, 10)
    first = qm.peek("private$\\tx").lookup_id
    real_write = qm.store.write
    during: list[bytes] = []

    def failing_write(work, *args, **kwargs):  # type: ignore[no-untyped-def]
        qm.store.write = real_write  # the receive below commits normally
        with qm.begin() as tx:  # the 6th message: the first not held by remove_through
            during.append(qm.receive("private$\\tx", tx=tx).body)
        raise MQError(HResult.MQ_ERROR_INSUFFICIENT_RESOURCES, "simulated failed commit")

    qm.store.write = failing_write  # type: ignore[method-assign]
    with pytest.raises(MQError):
        qm.remove_through({"private$\\tx": first + 4})
    assert during == [bodies[5]]
    with qm.begin() as tx:
        got = [m.body for m in qm.receive_many("private$\\tx", 10, tx=tx)]
    assert got == bodies[:5] + bodies[6:]
