"""QueueManager additions: send_many_ids, peek_many, cancellation, idempotent send,
LookupIdentifier ranges (watermark, nth, peek_range with an upper bound, remove_through),
queue_stats."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from openmsmq.errors import HResult, IOTimeoutError, MessageNotFoundError, MQError
from openmsmq.qm import CancelToken, CursorAction, LookupRange, MessageRecord, QueueManager, RemovedMessage
from tests.clock import Clock


@pytest.fixture(params=[True, False], ids=["threaded", "sync"])
def qm(request: pytest.FixtureRequest, tmp_path: Path):
    manager = QueueManager(tmp_path / "qm", threaded=request.param, clock=Clock(), computer_name="host1")
    yield manager
    manager.close()


@pytest.fixture
def tqm(tmp_path: Path):
    manager = QueueManager(tmp_path / "tqm", clock=Clock(), computer_name="host1")
    yield manager
    manager.close()


def bodies(ms: list[MessageRecord]) -> list[bytes]:
    return [m.body for m in ms]


# ---- client asks -----------------------------------------------------------------------------


def test_send_many_ids_pairs(qm: QueueManager) -> None:
    qm.create_queue("private$\\p")
    pairs = qm.send_many_ids("private$\\p", [MessageRecord(body=b"a"), MessageRecord(body=b"b")])
    stored = qm.peek_range("private$\\p")
    assert pairs == [(m.id_uniquifier, m.lookup_id) for m in stored]
    assert all(u and lid for u, lid in pairs)
    qm.create_queue("private$\\t", transactional=True)
    tx = qm.begin()
    inside = qm.send_many_ids("private$\\t", [MessageRecord(body=b"x")], tx)
    assert inside[0][1] == 0 and inside[0][0] > pairs[-1][0]
    assert tx.commit() == [qm.peek("private$\\t").lookup_id]


def test_peek_many_queue_order_skips_locked_and_pages_with_cursor(qm: QueueManager) -> None:
    qm.create_queue("private$\\pm", transactional=True)
    qm.create_queue("private$\\prio")
    with qm.begin() as tx:
        qm.send_many("private$\\pm", [MessageRecord(body=bytes([i])) for i in range(10)], tx)
    tx = qm.begin()
    locked = qm.receive("private$\\pm", tx=tx)
    assert bodies(qm.peek_many("private$\\pm", 3)) == [b"\x01", b"\x02", b"\x03"]
    cur = qm.create_cursor("private$\\pm")
    first = qm.peek_many("", 4, cursor=cur)
    rest = qm.peek_many("", 100, cursor=cur, action=CursorAction.NEXT)
    assert bodies(first) + bodies(rest) == [bytes([i]) for i in range(1, 10)]
    with pytest.raises(IOTimeoutError):
        qm.peek_many("", 1, cursor=cur, action=CursorAction.NEXT)
    tx.abort()
    assert qm.peek_many("private$\\pm", 1)[0].lookup_id == locked.lookup_id
    assert qm.get_queue("private$\\pm").msg_count == 10  # peeks removed nothing
    for p in (1, 6, 3, 6):
        qm.send("private$\\prio", MessageRecord(body=bytes([p]), priority=p))
    assert bodies(qm.peek_many("private$\\prio", 10)) == [b"\x06", b"\x06", b"\x03", b"\x01"]
    qm.create_queue("private$\\empty")
    with pytest.raises(IOTimeoutError):
        qm.peek_many("private$\\empty", 5)


def test_cancel_token_wakes_a_waiting_read(tqm: QueueManager) -> None:
    tqm.create_queue("private$\\c", transactional=True)
    token = CancelToken()
    errors: list[BaseException] = []
    started = threading.Event()

    def waiter() -> None:
        started.set()
        try:
            tqm.receive("private$\\c", tx=tqm.begin(), timeout=None, cancel=token)
        except MQError as exc:
            errors.append(exc)

    t = threading.Thread(target=waiter)
    t.start()
    assert started.wait(10)
    # Let the waiter reach its wait; cancel() must wake it wherever it is.
    t.join(0.2)
    token.cancel()
    t.join(10)
    assert not t.is_alive()
    assert [e.hresult for e in errors if isinstance(e, MQError)] == [HResult.MQ_ERROR_OPERATION_CANCELLED]
    assert not token._conds  # the waiter deregistered
    # a cancelled token fails later reads at once; other reads are unaffected
    with pytest.raises(MQError) as info:
        tqm.peek("private$\\c", timeout=None, cancel=token)
    assert info.value.hresult == HResult.MQ_ERROR_OPERATION_CANCELLED
    with tqm.begin() as tx:
        tqm.send("private$\\c", MessageRecord(body=b"m"), tx)
    assert tqm.receive("private$\\c", tx=tqm.begin(), timeout=5, cancel=CancelToken()).body == b"m"


def test_cancelled_token_in_sync_mode(qm: QueueManager) -> None:
    qm.create_queue("private$\\cs")
    token = CancelToken()
    token.cancel()
    qm.send("private$\\cs", MessageRecord(body=b"1"))
    with pytest.raises(MQError) as info:
        qm.dequeue_begin("private$\\cs", cancel=token)
    assert info.value.hresult == HResult.MQ_ERROR_OPERATION_CANCELLED
    assert qm.receive("private$\\cs").body == b"1"  # nothing was locked


# ---- idempotent send ------------------------------------------------------------------------


def test_send_idempotent_skips_known_identities(qm: QueueManager) -> None:
    qm.create_queue("private$\\i", transactional=True)
    msgs = [MessageRecord(body=bytes([i])) for i in range(4)]
    got = qm.send_idempotent("private$\\i", msgs, ["a", "b", "a", "c"])
    assert got[0] and got[1] and got[3] and got[2] is None
    again = qm.send_idempotent("private$\\i", [*msgs[:2], MessageRecord(body=b"new")], ["a", "b", "d"])
    assert again[:2] == [None, None] and again[2] is not None
    stored = qm.peek_range("private$\\i")
    assert bodies(stored) == [b"\x00", b"\x01", b"\x03", b"new"]
    # one transaction: First/LastInTransaction on the first and last inserted message
    assert stored[0].first_in_transaction and stored[2].last_in_transaction
    assert stored[0].transactional and stored[0].priority == 0
    # identities are per queue
    qm.create_queue("private$\\j")
    assert qm.send_idempotent("private$\\j", [MessageRecord(body=b"j")], ["a"])[0] is not None
    for bad in (["x" * 256], [""]):
        with pytest.raises(MQError) as info:
            qm.send_idempotent("private$\\j", [MessageRecord()], bad)
        assert info.value.hresult == HResult.MQ_ERROR_ILLEGAL_PROPERTY_VALUE
    with pytest.raises(MQError):
        qm.send_idempotent("DIRECT=TCP:192.0.2.1\\private$\\far", [MessageRecord()], ["z"])


def test_identities_expire_after_retention_and_go_with_the_queue(tmp_path: Path) -> None:
    clock = Clock(1000.0)
    with QueueManager(tmp_path / "r", clock=clock, identity_retention=100) as qm:
        qm.create_queue("private$\\r")
        assert qm.send_idempotent("private$\\r", [MessageRecord()], ["k"])[0] is not None
        clock.now = 1050.0
        assert qm.send_idempotent("private$\\r", [MessageRecord()], ["k"]) == [None]
        assert qm.prune_identities() == 0
        clock.now = 1101.0
        assert qm.prune_identities() == 1
        assert qm.send_idempotent("private$\\r", [MessageRecord()], ["k"])[0] is not None
        qm.delete_queue("private$\\r")
        qm.create_queue("private$\\r")
        assert qm.send_idempotent("private$\\r", [MessageRecord()], ["k"])[0] is not None


def test_concurrent_idempotent_sends_store_each_identity_once(tqm: QueueManager) -> None:
    tqm.create_queue("private$\\cc", transactional=True)
    idents = [f"task-7/row-{i}" for i in range(50)]
    results: list[list[int | None]] = []
    lock = threading.Lock()

    def attempt() -> None:
        got = tqm.send_idempotent("private$\\cc", [MessageRecord(body=s.encode()) for s in idents], idents)
        with lock:
            results.append(got)

    threads = [threading.Thread(target=attempt) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(results) == 6
    assert sum(1 for r in results for x in r if x is not None) == 50
    assert sorted(bodies(tqm.peek_range("private$\\cc"))) == sorted(s.encode() for s in idents)


# ---- LookupIdentifier ranges ------------------------------------------------------------------


def test_lookup_range_nth_and_peek_range_through(qm: QueueManager) -> None:
    qm.create_queue("private$\\s")
    assert qm.lookup_range("private$\\s") is None
    ids = [
        qm.send("private$\\s", MessageRecord(body=bytes([p]), priority=p)).lookup_id for p in (1, 7, 0, 4, 2)
    ]
    assert qm.lookup_range("private$\\s") == LookupRange(ids[0], ids[-1], 5)
    assert qm.lookup_range("private$\\s", after=ids[0], through=ids[3]) == LookupRange(ids[1], ids[3], 3)
    assert qm.lookup_range("private$\\s", after=ids[-1]) is None
    assert [qm.nth_lookup_id("private$\\s", 0, n) for n in range(1, 6)] == ids
    assert qm.nth_lookup_id("private$\\s", ids[1], 2) == ids[3]
    with pytest.raises(MessageNotFoundError):
        qm.nth_lookup_id("private$\\s", ids[1], 4)
    with pytest.raises(MessageNotFoundError):
        qm.nth_lookup_id("private$\\s", 0, 3, through=ids[1])
    # LookupIdentifier order across priorities, bounded above, paged by ``after``
    page = qm.peek_range("private$\\s", ids[0], limit=2, through=ids[3])
    assert [m.lookup_id for m in page] == ids[1:3]
    assert [m.lookup_id for m in qm.peek_range("private$\\s", ids[2], through=ids[3])] == [ids[3]]
    qm.create_queue("private$\\tx", transactional=True)
    with qm.begin() as tx:
        qm.send_many("private$\\tx", [MessageRecord(body=bytes([i])) for i in range(5)], tx)
    r = qm.lookup_range("private$\\tx")
    assert r is not None and r.count == 5
    assert qm.nth_lookup_id("private$\\tx", r.first, 4) == r.last
    both = qm.lookup_ranges(["private$\\s", "private$\\tx"])
    assert both["private$\\tx"] == r and both["private$\\s"] == LookupRange(ids[0], ids[-1], 5)


def test_watermark_is_stable_for_moves_into_journal(qm: QueueManager) -> None:
    qm.create_queue("private$\\w", transactional=True, journal=True)
    with qm.begin() as tx:
        qm.send_many("private$\\w", [MessageRecord(body=b"1"), MessageRecord(body=b"2")], tx)
    tx = qm.begin()
    qm.receive("private$\\w", tx=tx)  # locked, moves to the journal at commit
    with qm.begin() as tx2:
        qm.send("private$\\w", MessageRecord(body=b"3"), tx2)
    mark = qm.lookup_range("private$\\w;journal")
    assert mark is None
    tx.commit()
    journal = qm.lookup_range("private$\\w;journal")
    queue = qm.lookup_range("private$\\w")
    assert journal is not None and queue is not None
    # the moved message got a new LookupIdentifier above everything seen before
    assert journal.first > queue.last
    assert bodies(qm.peek_range("private$\\w;journal")) == [b"1"]


def test_remove_through_many_queues_idempotent_and_locked_pending(qm: QueueManager) -> None:
    events: list[RemovedMessage] = []
    qm.add_removal_listener(events.extend)
    qm.create_queue("private$\\a", transactional=True)
    qm.create_queue("private$\\b")
    with qm.begin() as tx:
        qm.send_many("private$\\a", [MessageRecord(body=bytes([i])) for i in range(6)], tx)
    b_ids = [
        qm.send("private$\\b", MessageRecord(body=bytes([i]), ack_flags=i % 2)).lookup_id for i in range(4)
    ]
    a = qm.lookup_range("private$\\a")
    assert a is not None
    tx = qm.begin()
    held = qm.receive("private$\\a", tx=tx)  # locked by another transaction
    removed = qm.remove_through({"private$\\a": a.first + 3, "private$\\b": b_ids[1]})
    assert removed == 3 + 2
    assert qm.remove_through({"private$\\a": a.first + 3, "private$\\b": b_ids[1]}) == 0
    assert qm.get_queue("private$\\a").msg_count == 3
    assert [e.message.body for e in events] == [b"\x01"]
    assert events[0].reason == 0x4000
    tx.abort()  # PurgePending: the held message is deleted when its lock ends
    assert held.lookup_id not in [m.lookup_id for m in qm.peek_range("private$\\a")]
    assert bodies(qm.peek_range("private$\\a")) == [b"\x04", b"\x05"]
    assert bodies(qm.peek_range("private$\\b")) == [b"\x02", b"\x03"]
    assert qm.get_queue("private$\\b").msg_count == 2


def test_queue_stats(qm: QueueManager) -> None:
    clock = qm.clock
    assert isinstance(clock, Clock)
    qm.create_queue("private$\\st")
    qm.send("private$\\st", MessageRecord(body=b"12345", priority=2))
    clock.now += 10
    qm.send("private$\\st", MessageRecord(body=b"123", priority=6))
    stats = {s.name: s for s in qm.queue_stats()}
    s = stats["private$\\st"]
    assert (s.message_count, s.total_bytes, s.oldest_arrived_time) == (2, 8, 1_000_000)
    assert stats["system$;deadletter"].oldest_arrived_time is None
    name, count, nbytes, oldest = s  # a plain tuple too
    assert (name, count, nbytes, oldest) == tuple(s)
