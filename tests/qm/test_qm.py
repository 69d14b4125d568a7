"""QueueManager: queues, send/receive/peek, transactions, cursors, lookups, expiry, errors."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from openmsmq.errors import HResult, IOTimeoutError, MQError, QueueNotFoundError, TransactionUsageError
from openmsmq.qm import CursorAction, LookupAction, MessageRecord, QueueManager, QueueType, RemovedMessage
from tests.clock import Clock


@pytest.fixture(params=[True, False], ids=["threaded", "sync"])
def qm(request: pytest.FixtureRequest, tmp_path: Path):
    manager = QueueManager(tmp_path / "qm", threaded=request.param, clock=Clock(), computer_name="host1")
    yield manager
    manager.close()


def code(info: pytest.ExceptionInfo[MQError]) -> HResult:
    return info.value.hresult


def body(ms: list[MessageRecord]) -> list[bytes]:
    return [m.body for m in ms]


# ---- queues ---------------------------------------------------------------------------------


def test_opening_a_known_outgoing_queue_writes_nothing(qm: QueueManager) -> None:
    """The outgoing queue of a remote format name is created by its first Open Queue
    (MS-MQDMPR 3.1.7.1.5 step 4); later opens (one per commit that raises an
    acknowledgment or a FinalAck) find it without a store write, which would wait for the
    store's writer ahead of the commit itself. A deleted one is created again."""
    dest = "DIRECT=TCP:192.0.2.7\\private$\\admin"
    first = qm.open_queue(dest)
    ops = qm.store.stats.ops
    again = qm.open_queue(" direct=tcp:192.0.2.7\\PRIVATE$\\Admin ")
    assert qm.store.stats.ops == ops
    assert again.state is first.state
    assert again.state.record.queue_type == QueueType.OUTGOING
    qm.delete_queue(first)
    third = qm.open_queue(dest)
    assert qm.store.stats.ops > ops
    assert first.state.deleted and third.state is not first.state and not third.state.deleted
    assert [q.queue_id for q in qm.list_queues(include_system=True) if q.name == third.state.record.name] == [
        third.state.record.queue_id
    ]


def test_guid_persists_and_system_queues_exist(tmp_path: Path) -> None:
    with QueueManager(tmp_path / "d") as qm:
        guid = qm.guid
        names = {q.name for q in qm.list_queues(include_system=True)}
    assert {"system$;deadletter", "system$;deadxact", "system$;journal", "private$\\order_queue$"} <= names
    with QueueManager(tmp_path / "d") as qm:
        assert qm.guid == guid
        order = qm.get_queue("private$\\order_queue$")
        assert order.private_number == 4
        assert order.queue_type == QueueType.SYSTEM
        assert qm.get_queue("system$;deadxact").transactional


def test_create_list_get_set_delete(qm: QueueManager) -> None:
    rec = qm.create_queue("private$\\Orders", transactional=True, label="o", journal=True)
    assert rec.name == "private$\\orders"
    assert rec.display_name == "private$\\Orders"
    assert rec.transactional and rec.journal and rec.private_number >= 0x10
    assert [q.name for q in qm.list_queues()] == ["private$\\orders"]
    # case-insensitive, with or without the computer part
    assert qm.get_queue(".\\PRIVATE$\\ORDERS").queue_id == rec.queue_id
    assert qm.get_queue("host1\\private$\\orders").queue_id == rec.queue_id
    assert qm.get_queue("DIRECT=OS:host1\\private$\\orders").queue_id == rec.queue_id
    assert qm.get_queue(f"PRIVATE={qm.guid}\\{rec.private_number:08x}").queue_id == rec.queue_id
    assert qm.get_queue("private$\\orders;journal").queue_type == QueueType.JOURNAL
    changed = qm.set_queue_properties("private$\\orders", label="new", quota_kb=10)
    assert (changed.label, changed.quota_kb) == ("new", 10)
    with pytest.raises(MQError) as info:
        qm.set_queue_properties("private$\\orders", transactional=False)
    assert code(info) == HResult.MQ_ERROR_PROPERTY_NOTALLOWED
    qm.delete_queue("private$\\orders")
    assert qm.list_queues() == []
    with pytest.raises(QueueNotFoundError):
        qm.get_queue("private$\\orders;journal")


def test_queue_errors(qm: QueueManager) -> None:
    qm.create_queue("private$\\a")
    with pytest.raises(MQError) as info:
        qm.create_queue("PRIVATE$\\A")
    assert code(info) == HResult.MQ_ERROR_QUEUE_EXISTS
    with pytest.raises(QueueNotFoundError):
        qm.send("private$\\missing", MessageRecord())
    with pytest.raises(QueueNotFoundError):
        qm.receive("private$\\missing")
    for bad in ("private$\\", "private$\\a,b", "public_queue", "private$\\" + "x" * 125):
        with pytest.raises(MQError) as info:
            qm.create_queue(bad)
        assert code(info) == HResult.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME
    with pytest.raises(MQError) as info:
        qm.delete_queue("system$;deadletter")
    assert code(info) == HResult.MQ_ERROR_ACCESS_DENIED
    with pytest.raises(MQError) as info:
        qm.send("system$;deadletter", MessageRecord())
    assert code(info) == HResult.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION


# ---- send / receive / peek ------------------------------------------------------------------


def test_send_receive_order_and_attributes(qm: QueueManager) -> None:
    qm.create_queue("private$\\q")
    sent = [
        qm.send(
            "private$\\q",
            MessageRecord(body=b"low", priority=1, label="L", app_specific=5, correlation_id=b"c" * 20),
        ),
        qm.send("private$\\q", MessageRecord(body=b"high", priority=6)),
        qm.send("private$\\q", MessageRecord(body=b"low2", priority=1)),
    ]
    ids = [m.lookup_id for m in sent]
    assert ids == sorted(ids) and len(set(ids)) == 3
    assert sent[0].id_lineage == qm.guid and sent[0].id_uniquifier > 0
    assert sent[0].sent_time == 1_000_000 and sent[0].source_machine == qm.guid
    assert qm.peek("private$\\q").body == b"high"
    got = qm.receive("private$\\q")
    assert got.body == b"high"
    nxt = qm.receive("private$\\q")
    assert (nxt.body, nxt.label, nxt.app_specific, nxt.correlation_id) == (b"low", "L", 5, b"c" * 20)
    assert nxt.lookup_id == ids[0]
    assert qm.receive("private$\\q").body == b"low2"
    with pytest.raises(IOTimeoutError):
        qm.receive("private$\\q", timeout=0)
    assert qm.get_queue("private$\\q").msg_count == 0


def test_send_many_receive_many(qm: QueueManager) -> None:
    qm.create_queue("private$\\t", transactional=True)
    with qm.begin() as tx:
        qm.send_many("private$\\t", [MessageRecord(body=bytes([i])) for i in range(100)], tx)
    assert qm.get_queue("private$\\t").msg_count == 100
    with qm.begin() as tx:
        got = qm.receive_many("private$\\t", 60, tx=tx)
    assert body(got) == [bytes([i]) for i in range(60)]
    tx = qm.begin()
    assert len(qm.receive_many("private$\\t", 60, tx=tx)) == 40
    tx.abort()
    assert qm.get_queue("private$\\t").msg_count == 40


def test_send_many_returns_each_uniquifier_also_across_the_u32_wrap(qm: QueueManager) -> None:
    """send_many returns the Identifier uniquifiers of what it stored, in order, also when
    the run wraps from 0xFFFFFFFF to 1 (never 0), and a batch with an expiring message
    stores each message's own expiry path."""
    qm.create_queue("private$\\u")
    first = qm.send_many("private$\\u", [MessageRecord(body=b"a"), MessageRecord(body=b"b")])
    assert first[1] == first[0] + 1
    # The store never hands out a block across the wrap; force one in memory.
    qm.sender._uniq_next, qm.sender._uniq_end = 0xFFFFFFFE, 0xFFFFFFFE + 100
    msgs = [MessageRecord(body=bytes([i]), time_to_be_received=5000 * i or 0xFFFFFFFF) for i in range(4)]
    got = qm.send_many("private$\\u", msgs)
    assert got == [0xFFFFFFFE, 0xFFFFFFFF, 1, 2]
    stored = qm.peek_range("private$\\u", 0)
    assert [m.id_uniquifier for m in stored] == [*first, *got]
    assert [m.body for m in stored[2:]] == [bytes([i]) for i in range(4)]


def test_send_returns_the_stored_message_with_bytes_fields(qm: QueueManager) -> None:
    """The Message send returns (decoded from the row not read back yet, whose props are a
    bytearray) equals the stored one, with bytes fields, and is hashable."""
    qm.create_queue("private$\\x")
    m = MessageRecord(body=b"b", label="l", extension=b"ext", sender_id=b"sid", admin_queue="private$\\a")
    sent = qm.send("private$\\x", m)
    assert type(sent.extension) is bytes and type(sent.sender_id) is bytes
    hash(sent)
    (stored,) = qm.peek_range("private$\\x", 0)
    assert sent == stored


def test_send_by_name_after_delete_and_recreate_goes_to_the_new_queue(qm: QueueManager) -> None:
    """A send remembers the local names it resolved; a deleted queue is not sent to under
    its old state, and one created again under the name gets the next sends."""
    qm.create_queue("private$\\r")
    qm.send("private$\\r", MessageRecord(body=b"1"))
    qm.delete_queue("private$\\r")
    with pytest.raises(QueueNotFoundError):
        qm.send("private$\\r", MessageRecord(body=b"2"))
    qm.create_queue("private$\\r")
    qm.send("private$\\r", MessageRecord(body=b"3"))
    assert qm.get_queue("private$\\r").msg_count == 1
    assert body(qm.peek_range("private$\\r", 0)) == [b"3"]


def test_transaction_usage_errors(qm: QueueManager) -> None:
    qm.create_queue("private$\\tx", transactional=True)
    qm.create_queue("private$\\plain")
    with pytest.raises(TransactionUsageError):
        qm.send("private$\\tx", MessageRecord())
    tx = qm.begin()
    with pytest.raises(TransactionUsageError):
        qm.send("private$\\plain", MessageRecord(), tx)
    with pytest.raises(TransactionUsageError):
        qm.receive("private$\\plain", tx=tx)
    tx.abort()


def test_commit_and_abort_of_ended_transaction(qm: QueueManager) -> None:
    qm.create_queue("private$\\tx", transactional=True)
    tx = qm.begin()
    qm.send("private$\\tx", MessageRecord(), tx)
    tx.commit()
    for op in (tx.commit, tx.abort):
        with pytest.raises(MQError) as info:
            op()
        assert code(info) == HResult.MQ_ERROR_TRANSACTION_SEQUENCE
    with pytest.raises(MQError) as info:
        qm.send("private$\\tx", MessageRecord(), tx)
    assert code(info) == HResult.MQ_ERROR_TRANSACTION_SEQUENCE


def test_transactional_send_visible_only_after_commit(qm: QueueManager) -> None:
    qm.create_queue("private$\\tx", transactional=True)
    tx = qm.begin()
    m = qm.send("private$\\tx", MessageRecord(body=b"a", priority=7), tx)
    qm.send("private$\\tx", MessageRecord(body=b"b"), tx)
    assert m.lookup_id == 0 and m.priority == 0 and m.transactional
    with pytest.raises(IOTimeoutError):
        qm.peek("private$\\tx")
    lookup_ids = tx.commit()
    stored = qm.peek_range("private$\\tx")
    assert [s.lookup_id for s in stored] == lookup_ids
    assert [(s.first_in_transaction, s.last_in_transaction) for s in stored] == [(True, False), (False, True)]
    rx = qm.begin()
    got = qm.receive("private$\\tx", tx=rx)
    assert got.body == b"a" and got.first_in_transaction
    rx.abort()
    aborted = qm.begin()
    qm.send("private$\\tx", MessageRecord(body=b"never"), aborted)
    aborted.abort()
    assert body(qm.peek_range("private$\\tx")) == [b"a", b"b"]


def test_transactional_receive_locks_until_commit_or_abort(qm: QueueManager) -> None:
    qm.create_queue("private$\\tx", transactional=True)
    with qm.begin() as tx:
        qm.send_many("private$\\tx", [MessageRecord(body=b"1"), MessageRecord(body=b"2")], tx)
    t1 = qm.begin()
    assert qm.receive("private$\\tx", tx=t1).body == b"1"
    t2 = qm.begin()
    assert qm.receive("private$\\tx", tx=t2).body == b"2"  # 1 is invisible to others
    t1.abort()  # 1 goes back at its place
    assert qm.peek("private$\\tx").body == b"1"
    t2.commit()
    t3 = qm.begin()
    assert qm.receive("private$\\tx", tx=t3).body == b"1"
    with pytest.raises(IOTimeoutError):
        qm.receive("private$\\tx", tx=t3, timeout=0)
    t3.commit()
    assert qm.get_queue("private$\\tx").msg_count == 0


def test_context_manager_aborts_on_exception(qm: QueueManager) -> None:
    qm.create_queue("private$\\tx", transactional=True)
    with qm.begin() as tx:
        qm.send("private$\\tx", MessageRecord(body=b"x"), tx)
    with pytest.raises(RuntimeError), qm.begin() as tx:
        qm.receive("private$\\tx", tx=tx)
        raise RuntimeError("boom")
    assert qm.peek("private$\\tx").body == b"x"


def test_journal_gets_committed_receives(qm: QueueManager) -> None:
    qm.create_queue("private$\\j", transactional=True, journal=True)
    with qm.begin() as tx:
        qm.send_many("private$\\j", [MessageRecord(body=b"a"), MessageRecord(body=b"b")], tx)
    with qm.begin() as tx:
        qm.receive("private$\\j", tx=tx)
    aborted = qm.begin()
    qm.receive("private$\\j", tx=aborted)
    aborted.abort()
    assert body(qm.peek_range("private$\\j;journal")) == [b"a"]
    assert qm.get_queue("private$\\j;journal").msg_count == 1


def test_quota_and_oversized_messages(qm: QueueManager) -> None:
    qm.create_queue("private$\\small", quota_kb=1)
    qm.send("private$\\small", MessageRecord(body=bytes(800)))
    with pytest.raises(MQError) as info:
        qm.send("private$\\small", MessageRecord(body=bytes(800)))
    assert code(info) == HResult.MQ_ERROR_INSUFFICIENT_RESOURCES
    qm.create_queue("private$\\big")
    with pytest.raises(MQError) as info:
        qm.send("private$\\big", MessageRecord(body=bytes(4 * 1024 * 1024 + 1)))
    assert code(info) == HResult.MQ_ERROR_INSUFFICIENT_RESOURCES
    qm.send("private$\\big", MessageRecord(body=bytes(4 * 1024 * 1024)))


def test_receive_wait_is_woken_by_send(qm: QueueManager) -> None:
    if not qm.store.threaded:
        pytest.skip("waiting needs the writer thread")
    qm.create_queue("private$\\w")
    got: list[MessageRecord] = []
    started = threading.Event()

    def waiter() -> None:
        started.set()
        got.append(qm.receive("private$\\w", timeout=30))

    t = threading.Thread(target=waiter)
    t.start()
    started.wait()
    qm.send("private$\\w", MessageRecord(body=b"wake"))
    t.join(30)
    assert body(got) == [b"wake"]


def test_receive_timeout(qm: QueueManager) -> None:
    qm.create_queue("private$\\w")
    with pytest.raises(IOTimeoutError) as info:
        qm.receive("private$\\w", timeout=0.01)
    assert code(info) == HResult.MQ_ERROR_IO_TIMEOUT


def test_deleted_queue_through_handle_and_waiter(qm: QueueManager) -> None:
    qm.create_queue("private$\\gone")
    handle = qm.open_queue("private$\\gone")
    errors: list[BaseException] = []
    started = threading.Event()

    def waiter() -> None:
        started.set()
        try:
            qm.receive(handle, timeout=30)
        except MQError as exc:
            errors.append(exc)

    t = threading.Thread(target=waiter)
    if qm.store.threaded:
        t.start()
        started.wait()
    qm.delete_queue("private$\\gone")
    if qm.store.threaded:
        t.join(30)
        assert [e.hresult for e in errors] == [HResult.MQ_ERROR_QUEUE_DELETED]  # type: ignore[attr-defined]
    with pytest.raises(MQError) as info:
        qm.receive(handle)
    assert code(info) == HResult.MQ_ERROR_QUEUE_DELETED
    with pytest.raises(QueueNotFoundError):
        qm.receive("private$\\gone")


def test_purge_with_locked_message_pending(qm: QueueManager) -> None:
    events: list[RemovedMessage] = []
    qm.add_removal_listener(events.extend)
    qm.create_queue("private$\\p", transactional=True)
    with qm.begin() as tx:
        qm.send_many(
            "private$\\p",
            [MessageRecord(body=b"1", ack_flags=1), MessageRecord(body=b"2"), MessageRecord(body=b"3")],
            tx,
        )
    locked = qm.begin()
    qm.receive("private$\\p", tx=locked)
    assert qm.purge_queue("private$\\p") == 2
    locked.abort()  # PurgePending: deleted instead of coming back
    assert qm.peek_range("private$\\p") == []
    assert qm.get_queue("private$\\p").msg_count == 0
    assert [(e.message.body, e.reason) for e in events] == [(b"1", 0xC001)]


# ---- cursors and lookup ---------------------------------------------------------------------


def test_cursor_peek_and_receive(qm: QueueManager) -> None:
    qm.create_queue("private$\\c")
    qm.send_many("private$\\c", [MessageRecord(body=bytes([i]), priority=3) for i in range(4)])
    cur = qm.create_cursor("private$\\c")
    assert qm.peek("private$\\c", cursor=cur).body == b"\x00"
    assert qm.peek("private$\\c", cursor=cur, action=CursorAction.NEXT).body == b"\x01"
    assert qm.peek("private$\\c", cursor=cur).body == b"\x01"
    assert qm.receive("private$\\c", cursor=cur).body == b"\x01"
    assert qm.peek("private$\\c", cursor=cur).body == b"\x02"  # the cursor moved past the removed one
    assert qm.peek("private$\\c", cursor=cur, action=CursorAction.NEXT).body == b"\x03"
    with pytest.raises(IOTimeoutError):
        qm.peek("private$\\c", cursor=cur, action=CursorAction.NEXT)
    qm.close_cursor(cur)
    with pytest.raises(MQError) as info:
        qm.peek("private$\\c", cursor=cur)
    assert code(info) == HResult.MQ_ERROR_INVALID_HANDLE
    with pytest.raises(MQError) as info:
        qm.close_cursor(cur)
    assert code(info) == HResult.MQ_ERROR_INVALID_HANDLE


def test_lookup_actions(qm: QueueManager) -> None:
    qm.create_queue("private$\\l", transactional=True)
    with qm.begin() as tx:
        qm.send_many("private$\\l", [MessageRecord(body=bytes([i])) for i in range(5)], tx)
    ids = [m.lookup_id for m in qm.peek_range("private$\\l")]
    q = "private$\\l"
    assert qm.peek_by_lookup_id(q, 0, LookupAction.FIRST).lookup_id == ids[0]
    assert qm.peek_by_lookup_id(q, 0, LookupAction.LAST).lookup_id == ids[4]
    assert qm.peek_by_lookup_id(q, ids[2]).lookup_id == ids[2]
    assert qm.peek_by_lookup_id(q, ids[2], LookupAction.NEXT).lookup_id == ids[3]
    assert qm.peek_by_lookup_id(q, ids[2], LookupAction.PREVIOUS).lookup_id == ids[1]
    with pytest.raises(MQError) as info:
        qm.peek_by_lookup_id(q, ids[4], LookupAction.NEXT)
    assert code(info) == HResult.MQ_ERROR_MESSAGE_NOT_FOUND
    with pytest.raises(MQError) as info:
        qm.peek_by_lookup_id(q, 999_999)
    assert code(info) == HResult.MQ_ERROR_MESSAGE_NOT_FOUND
    tx = qm.begin()
    assert qm.receive_by_lookup_id(q, ids[3], tx=tx).lookup_id == ids[3]
    with pytest.raises(TransactionUsageError):  # locked: MS-MQDMPR 3.1.7.3.3
        qm.peek_by_lookup_id(q, ids[3])
    assert qm.peek_by_lookup_id(q, ids[2], LookupAction.NEXT).lookup_id == ids[4]  # skips the locked one
    assert qm.receive_by_lookup_id(q, ids[4], LookupAction.PREVIOUS, tx=tx).lookup_id == ids[2]
    tx.commit()
    assert [m.lookup_id for m in qm.peek_range(q)] == [ids[0], ids[1], ids[4]]


# ---- two-phase receive ----------------------------------------------------------------------


def test_dequeue_begin_end_outside_transaction(qm: QueueManager) -> None:
    qm.create_queue("private$\\r")
    qm.send_many("private$\\r", [MessageRecord(body=b"a"), MessageRecord(body=b"b")])
    pending = qm.dequeue_begin("private$\\r")
    assert pending.message.body == b"a"
    assert qm.peek("private$\\r").body == b"b"  # locked: invisible
    qm.dequeue_end(pending, delete=False)  # RR_NACK: back in place
    assert qm.peek("private$\\r").body == b"a"
    with pytest.raises(MQError) as info:
        qm.dequeue_end(pending, delete=True)
    assert code(info) == HResult.MQ_ERROR_TRANSACTION_SEQUENCE
    pending = qm.dequeue_begin("private$\\r")
    qm.dequeue_end(pending, delete=True)  # RR_ACK: gone
    assert body(qm.peek_range("private$\\r")) == [b"b"]


def test_dequeue_begin_end_in_transaction(qm: QueueManager) -> None:
    qm.create_queue("private$\\r", transactional=True)
    with qm.begin() as tx:
        qm.send_many("private$\\r", [MessageRecord(body=b"a"), MessageRecord(body=b"b")], tx)
    tx = qm.begin()
    p1 = qm.dequeue_begin("private$\\r", tx=tx)
    p2 = qm.dequeue_begin("private$\\r", tx=tx)
    qm.dequeue_end(p1, delete=True)  # ACK: removal waits for commit
    assert body(qm.peek_range("private$\\r")) == [b"a", b"b"]
    qm.dequeue_end(p2, delete=False)  # NACK: available again at once
    assert qm.peek("private$\\r").body == b"b"
    tx.set_dequeue_reason(p1.lookup_id, 0xC004)
    with pytest.raises(TransactionUsageError):
        tx.set_dequeue_reason(p2.lookup_id, 0xC004)
    events: list[RemovedMessage] = []
    qm.add_removal_listener(events.extend)
    tx.commit()
    assert body(qm.peek_range("private$\\r")) == [b"b"]
    assert events == []  # no acknowledgment asked for


# ---- expiry ---------------------------------------------------------------------------------


def test_expiry_moves_to_dead_letter_queues(tmp_path: Path) -> None:
    clock = Clock(5000.0)
    with QueueManager(tmp_path / "e", clock=clock) as qm:
        qm.create_queue("private$\\x", transactional=True)
        qm.create_queue("private$\\n")
        with qm.begin() as tx:
            qm.send("private$\\x", MessageRecord(body=b"tx", time_to_be_received=10), tx)
        qm.send("private$\\n", MessageRecord(body=b"plain", time_to_be_received=10))
        qm.send("private$\\n", MessageRecord(body=b"forever"))
        out = qm.open_queue("DIRECT=TCP:192.0.2.7\\private$\\far")
        with qm.begin() as tx:
            qm.send(out, MessageRecord(body=b"transit", time_to_reach_queue=5), tx)
        clock.now = 5011.0
        # expired messages are skipped on receive even before expire() runs
        assert qm.receive("private$\\n").body == b"forever"
        with pytest.raises(IOTimeoutError):
            qm.receive("private$\\x", tx=qm.begin())
        assert qm.expire(clock.now) == 3
        dead = {(m.body, m.message_class) for m in qm.peek_range("system$;deadletter")}
        dead_x = {(m.body, m.message_class) for m in qm.peek_range("system$;deadxact")}
        assert dead == {(b"plain", 0xC002)}
        assert dead_x == {(b"tx", 0xC002), (b"transit", 0x8002)}
        assert qm.expire(clock.now + 100) == 0


def test_a_backlog_of_expired_messages_drains_at_once_in_short_transactions(tmp_path: Path) -> None:
    """expire_due (the expiry thread's pass): 5,000 expired messages move in passes of
    2,000 (three store transactions, so other writers get in between) in one call, not one
    pass per interval of the thread."""
    from openmsmq.qm import dead_letters

    clock = Clock(5000.0)
    with QueueManager(tmp_path / "e", clock=clock) as qm:
        qm.create_queue("private$\\x", transactional=True)
        for _ in range(5):
            with qm.begin() as tx:
                qm.send_many("private$\\x", [MessageRecord(body=b"m", time_to_be_received=10)] * 1000, tx)
        clock.now = 5011.0
        batches = qm.store.stats.batches
        assert qm.expire_due(clock.now) == 5000
        assert qm.store.stats.batches - batches == 3 == -(-5000 // dead_letters.EXPIRY_PASS)
        assert qm.get_queue("private$\\x").msg_count == 0
        assert qm.get_queue("system$;deadxact").msg_count == 5000
        assert qm.expire_due(clock.now) == 0


# ---- outgoing queues (issue 4 seams) --------------------------------------------------------


def test_send_to_remote_goes_to_outgoing_queue_with_sequence(qm: QueueManager) -> None:
    dest = "DIRECT=TCP:192.0.2.9\\private$\\orders"
    with qm.begin() as tx:
        qm.send_many(dest, [MessageRecord(body=b"1"), MessageRecord(body=b"2")], tx)
    out = qm.open_queue(dest)
    assert out.record.queue_type == QueueType.OUTGOING
    msgs = qm.peek_range(out)
    assert [(m.tx_sequence_number, m.tx_previous_sequence_number) for m in msgs] == [(1, 0), (2, 1)]
    assert msgs[0].destination_queue == dest
    state = qm.outgoing_sequence(out)
    assert state.next_tx_sequence_number == 3
    removed, state = qm.sequence_store().release_outgoing(out, 2)
    assert len(removed) == 2 and state.next_tx_sequence_number == 1


def test_a_purge_runs_in_passes_and_keeps_the_counters_exact(
    qm: QueueManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A purge deletes a pass of messages per store transaction (one transaction for a
    long queue would hold every other commit); the queue's counters move by
    each pass, and a message locked meanwhile is PurgePending as with one pass."""
    from openmsmq.qm import admin

    monkeypatch.setattr(admin, "_PURGE_PASS", 10)
    q = "private$\\big"
    qm.create_queue(q, transactional=True)
    with qm.begin() as tx:
        qm.send_many(q, [MessageRecord(body=b"x" * (i + 1)) for i in range(25)], tx)
    held = qm.begin()
    locked = qm.receive(q, tx=held)
    batches = qm.store.stats.batches
    assert qm.purge_queue(q) == 24
    assert qm.store.stats.batches - batches == 3  # 10 + 10 + 4
    info = qm.get_queue(q)
    assert (info.msg_count, info.total_bytes) == (1, len(locked.body))  # the locked one
    held.abort()  # PurgePending: deleted when its lock ends, not put back
    info = qm.get_queue(q)
    assert (info.msg_count, info.total_bytes) == (0, 0)
    assert qm.peek_range(q) == []


def test_sends_to_a_remote_name_open_its_outgoing_queue_once(qm: QueueManager) -> None:
    """The outgoing queue of a remote name is made sure of at the first send only: each
    later send is its one store batch (two batches per send halved the commits per
    second of 1-message transactions to a remote queue). A queue deleted meanwhile is
    made again at the next send."""
    dest = "DIRECT=TCP:192.0.2.9\\private$\\orders"
    qm.send(dest, MessageRecord(body=b"0"))
    batches = qm.store.stats.batches
    for i in range(1, 11):
        with qm.begin() as tx:
            qm.send(dest, MessageRecord(body=b"%d" % i), tx)
    assert qm.store.stats.batches - batches == 10
    assert [m.body for m in qm.peek_range(qm.open_queue(dest))] == [b"%d" % i for i in range(11)]
    qm.delete_queue(dest)
    qm.send(dest, MessageRecord(body=b"again"))
    assert [m.body for m in qm.peek_range(qm.open_queue(dest))] == [b"again"]


def test_first_and_last_in_transaction_across_send_calls_and_queues(qm: QueueManager) -> None:
    qm.create_queue("private$\\fa", transactional=True)
    qm.create_queue("private$\\fb", transactional=True)
    with qm.begin() as tx:
        qm.send_many("private$\\fa", [MessageRecord(body=b"a1")], tx)
        qm.send_many("private$\\fb", [], tx)
        qm.send_many("private$\\fb", [MessageRecord(body=b"b1"), MessageRecord(body=b"b2")], tx)
        qm.send_many("private$\\fa", [MessageRecord(body=b"a2"), MessageRecord(body=b"a3")], tx)
        assert tx.send_count == 5
    flags = {
        m.body: (m.first_in_transaction, m.last_in_transaction)
        for q in ("private$\\fa", "private$\\fb")
        for m in qm.peek_range(q)
    }
    assert flags == {
        b"a1": (True, False),
        b"b1": (False, False),
        b"b2": (False, False),
        b"a2": (False, False),
        b"a3": (False, True),
    }
    with qm.begin() as tx:
        sent = qm.send("private$\\fa", MessageRecord(body=b"lone"), tx)
    assert not sent.first_in_transaction and not sent.last_in_transaction  # as sent, not as committed
    lone = qm.peek_range("private$\\fa")[-1]
    assert lone.body == b"lone" and lone.first_in_transaction and lone.last_in_transaction
