"""Read-ahead of head receives (``QueueState.prefetch``, ``ReadsMixin._head_select``).

A receive of one message from a transactional private queue reads the next few
messages too and hands them to the next receives without reading the head again. Every
other lock, release, purge or delete on the queue drops what was read ahead; these
tests put each of them between two receives and check that every message is still
received exactly once, in order, and that nothing removed or expired comes back.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from openmsmq.errors import HResult, IOTimeoutError, MQError
from openmsmq.qm import LookupAction, MessageRecord, QueueManager, Transaction, reader
from openmsmq.store import reads as store_reads
from tests.clock import Clock

TX = "private$\\tx"


@pytest.fixture(params=[True, False], ids=["threaded", "sync"])
def qm(request: pytest.FixtureRequest, tmp_path: Path):
    manager = QueueManager(tmp_path / "qm", threaded=request.param, clock=Clock(), computer_name="host1")
    manager.create_queue(TX, transactional=True)
    yield manager
    manager.close()


def fill(qm: QueueManager, n: int, start: int = 0, **props: Any) -> list[bytes]:
    bodies = [b"m%03d" % i for i in range(start, start + n)]
    with qm.begin() as tx:
        qm.send_many(TX, [MessageRecord(body=b, **props) for b in bodies], tx)
    return bodies


def receive_one(qm: QueueManager) -> bytes:
    with qm.begin() as tx:
        return qm.receive(TX, tx=tx).body


def drain(qm: QueueManager) -> list[bytes]:
    out = []
    while True:
        try:
            out.append(receive_one(qm))
        except IOTimeoutError:
            return out


def state(qm: QueueManager) -> Any:
    return qm.queues.resolve(TX)


@pytest.fixture
def head_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The LIMIT of every head read the store runs from now on."""
    limits: list[int] = []
    real = store_reads.fetch_available

    def counting(*a: Any, **k: Any) -> Any:
        limits.append(k["limit"])
        return real(*a, **k)

    monkeypatch.setattr(store_reads, "fetch_available", counting)
    return limits


def test_one_head_read_serves_several_receives(qm: QueueManager, head_reads: list[int]) -> None:
    bodies = fill(qm, 2 * (reader.PREFETCH + 1))
    assert [receive_one(qm) for _ in bodies] == bodies
    assert head_reads == [1 + reader.PREFETCH] * 2
    assert state(qm).prefetch is None
    assert qm.get_queue(TX).msg_count == 0


def test_abort_puts_the_message_back_before_the_read_ahead(qm: QueueManager) -> None:
    bodies = fill(qm, 5)
    tx = qm.begin()
    assert qm.receive(TX, tx=tx).body == bodies[0]
    assert state(qm).prefetch is not None
    tx.abort()
    assert state(qm).prefetch is None
    assert drain(qm) == bodies


def test_receive_by_lookup_id_of_a_message_read_ahead(qm: QueueManager) -> None:
    bodies = fill(qm, 6)
    ids = [m.lookup_id for m in qm.peek_many(TX, 10)]
    assert receive_one(qm) == bodies[0]
    tx = qm.begin()
    assert qm.receive_by_lookup_id(TX, ids[2], tx=tx).body == bodies[2]
    assert state(qm).prefetch is None  # another lock drops the read-ahead
    assert receive_one(qm) == bodies[1]
    assert receive_one(qm) == bodies[3]  # the locked one is skipped
    tx.commit()
    assert drain(qm) == bodies[4:]


def test_lookup_receive_committed_before_the_next_head_receive(qm: QueueManager) -> None:
    bodies = fill(qm, 5)
    ids = [m.lookup_id for m in qm.peek_many(TX, 10)]
    assert receive_one(qm) == bodies[0]
    with qm.begin() as tx:
        qm.receive_by_lookup_id(TX, ids[1], LookupAction.CURRENT, tx=tx)
    # Its row is gone and its lock dropped: it must not come back from the read-ahead.
    assert drain(qm) == bodies[2:]


def test_cursor_receive_between_head_receives(qm: QueueManager) -> None:
    bodies = fill(qm, 5)
    assert receive_one(qm) == bodies[0]
    cursor = qm.create_cursor(TX)
    try:
        with qm.begin() as tx:
            assert qm.receive(TX, tx=tx, cursor=cursor).body == bodies[1]
    finally:
        qm.close_cursor(cursor)
    assert drain(qm) == bodies[2:]


def test_purge_drops_the_read_ahead(qm: QueueManager) -> None:
    bodies = fill(qm, 5)
    assert receive_one(qm) == bodies[0]
    assert qm.purge_queue(TX) == 4
    later = fill(qm, 2, start=100)
    assert drain(qm) == later


def test_remove_through_drops_the_read_ahead(qm: QueueManager) -> None:
    bodies = fill(qm, 6)
    ids = [m.lookup_id for m in qm.peek_many(TX, 10)]
    assert receive_one(qm) == bodies[0]
    assert qm.remove_through({TX: ids[3]}) == 3
    assert drain(qm) == bodies[4:]


def test_two_phase_nack_puts_the_message_back(qm: QueueManager) -> None:
    bodies = fill(qm, 4)
    pending = qm.dequeue_begin(TX)
    assert pending.message.body == bodies[0]
    second = qm.dequeue_begin(TX)  # from the read-ahead
    assert second.message.body == bodies[1]
    qm.dequeue_end(pending, delete=False)
    qm.dequeue_end(second, delete=True)
    assert drain(qm) == [bodies[0], *bodies[2:]]


def test_batch_receive_after_a_single_one(qm: QueueManager) -> None:
    bodies = fill(qm, 6)
    assert receive_one(qm) == bodies[0]
    with qm.begin() as tx:
        assert [m.body for m in qm.receive_many(TX, 3, tx=tx)] == bodies[1:4]
    assert drain(qm) == bodies[4:]


def test_an_expiring_message_is_never_read_ahead(qm: QueueManager) -> None:
    clock = qm.clock
    assert isinstance(clock, Clock)
    first = fill(qm, 3)
    fill(qm, 1, start=50, time_to_be_received=5)  # expires at SentTime + 5 s
    last = fill(qm, 2, start=60)
    assert receive_one(qm) == first[0]
    kept = state(qm).prefetch
    assert kept is not None and [m.body for _, m in reversed(kept)] == first[1:]
    clock.now += 10  # the expiring message's TimeToBeReceived ran out
    assert drain(qm) == first[1:] + last
    with pytest.raises(IOTimeoutError):  # the expired one is not available either
        qm.peek_many(TX, 10)
    assert qm.expire(clock.now) == 1 and qm.get_queue(TX).msg_count == 0


def test_delete_queue_with_a_read_ahead(qm: QueueManager) -> None:
    fill(qm, 4)
    receive_one(qm)
    qm.delete_queue(TX)
    with pytest.raises(MQError) as err:
        receive_one(qm)
    assert err.value.hresult in (HResult.MQ_ERROR_QUEUE_NOT_FOUND, HResult.MQ_ERROR_QUEUE_DELETED)


def test_large_bodies_are_not_kept_beyond_the_budget(qm: QueueManager) -> None:
    big = bytes(reader.PREFETCH_BYTES // 2 + 1)
    with qm.begin() as tx:
        qm.send_many(TX, [MessageRecord(body=big) for _ in range(4)], tx)
    receive_one(qm)
    kept = state(qm).prefetch
    assert kept is not None and len(kept) == 1
    assert len(drain(qm)) == 3


def test_no_read_ahead_after_large_or_expiring_messages(qm: QueueManager, head_reads: list[int]) -> None:
    """The read-ahead is sized by the message found: a large body or one that can expire
    makes the next head read fetch one row only, not rows it could not keep."""
    with qm.begin() as tx:
        qm.send_many(TX, [MessageRecord(body=bytes(reader.PREFETCH_BYTES + 1)) for _ in range(3)], tx)
    fill(qm, 3, time_to_be_received=3600)
    small = fill(qm, 9, start=10)
    head_reads.clear()
    got = drain(qm)
    assert len(got) == 3 + 3 + 9 and got[6:] == small
    # The 1st read (a large message) reads ahead, as a queue's first read does, but keeps
    # nothing; the next two large ones, the three expiring ones and the first small one
    # after them read one row each; that small message turns the read-ahead on again.
    ahead = 1 + reader.PREFETCH
    assert head_reads[:8] == [ahead, 1, 1, 1, 1, 1, 1, ahead]


def test_concurrent_receivers_with_aborts_and_lookup_receives(tmp_path: Path) -> None:
    """Exactly once under contention: head receivers (some aborting), a thread taking
    messages by LookupIdentifier, and purges of nothing-locked prefixes racing them."""
    total = 600
    with QueueManager(tmp_path / "qm") as qm:
        qm.create_queue(TX, transactional=True)
        bodies = fill(qm, total)
        ids = [m.lookup_id for m in qm.peek_many(TX, total)]
        got: list[bytes] = []
        lock = threading.Lock()
        errors: list[BaseException] = []
        stop = threading.Event()

        def receiver(
            take: Callable[[Transaction, random.Random], MessageRecord], aborts: float, seed: int
        ) -> None:
            """Take messages in transactions until stopped, aborting a share of them."""
            rnd = random.Random(seed)
            try:
                while not stop.is_set():
                    tx = qm.begin()
                    try:
                        m = take(tx, rnd)
                    except MQError:  # none there (a timeout) or not that one
                        tx.abort()
                        continue
                    if rnd.random() < aborts:
                        tx.abort()
                        continue
                    tx.commit()
                    with lock:
                        got.append(m.body)
            except BaseException as exc:  # reported below
                errors.append(exc)

        def head(tx: Transaction, _rnd: random.Random) -> MessageRecord:
            return qm.receive(TX, tx=tx, timeout=0.05)

        def by_lookup_id(tx: Transaction, rnd: random.Random) -> MessageRecord:
            return qm.receive_by_lookup_id(TX, rnd.choice(ids), tx=tx)

        threads = [threading.Thread(target=receiver, args=(head, 0.2, i)) for i in range(6)]
        threads.append(threading.Thread(target=receiver, args=(by_lookup_id, 0.0, 99)))
        for t in threads:
            t.start()
        for _ in range(2000):
            with lock:
                if len(got) >= total:
                    break
            stop.wait(0.01)
        stop.set()
        for t in threads:
            t.join(30)
        assert not errors
        assert sorted(got) == sorted(bodies)  # every message once, none twice
        assert qm.get_queue(TX).msg_count == 0
