"""RemoteReadCore without gRPC: seed 001 step by step, cleanup timers on a fake clock,
sessions, share modes, the parameter validity matrix."""

from __future__ import annotations

import threading

import pytest

from openmsmq.errors import HResult, MQError
from openmsmq.qm import MessageRecord, QueueManager
from openmsmq.remote.auth import Permission, Principal
from openmsmq.remote.codes import NACK_RECEIVE_REJECTED, SINGLE_MESSAGE_UOW, AccessMode, Action, RemoteAck
from openmsmq.remote.core import RemoteReadCore, RemoteSession
from tests.clock import Clock

from .conftest import PLAINQ, TXQ, bodies, fill

ACK, NACK = RemoteAck.RR_ACK, RemoteAck.RR_NACK
UOW = bytes(range(16))


@pytest.fixture
def s(core: RemoteReadCore) -> RemoteSession:
    return core.open_session(Principal("test"))


def code(exc: pytest.ExceptionInfo[MQError]) -> HResult:
    return HResult(exc.value.hresult)


def available(qm: QueueManager, queue: str) -> list[bytes]:
    """Bodies a receiver could take now (not locked)."""
    out: list[bytes] = []
    h = qm.open_queue(queue)
    c = qm.create_cursor(h)
    try:
        while True:
            try:
                out.append(qm.peek(h, cursor=c, action=1 if out else 0).body)  # type: ignore[arg-type]
            except MQError:
                return out
    finally:
        qm.close_cursor(c)


def filled(
    core: RemoteReadCore, s: RemoteSession, qm: QueueManager, queue: str, messages: list[bytes]
) -> int:
    """``messages`` in ``queue`` and a RECEIVE handle of ``s`` on it."""
    fill(qm, queue, messages)
    return core.open_queue(s, queue, AccessMode.RECEIVE)


def start_in_tx(
    core: RemoteReadCore,
    s: RemoteSession,
    qm: QueueManager,
    messages: list[bytes] | None = None,
    request_id: int = 1,
) -> tuple[int, int, MessageRecord]:
    """The set-up of most seed 001 steps: ``messages`` (one ``b"a"``) in TXQ, a RECEIVE
    handle on it, transaction UOW begun and a receive ``request_id`` of the first message
    started in it. Returns the handle, the request id and the message."""
    h = filled(core, s, qm, TXQ, [b"a"] if messages is None else messages)
    core.begin(s, UOW)
    [(rid, m)] = core.receives.start_receive(s, h, request_id=request_id, uow=UOW)
    return h, rid, m


# ---- seed 001: R_EndTransactionalReceive, every step ----------------------------------------


def test_step1_no_pending_entry_for_handle_is_invalid_handle(core: RemoteReadCore, s: RemoteSession) -> None:
    h = core.open_queue(s, TXQ, AccessMode.RECEIVE)
    assert core.receives.end_receive(s, h, [1], ACK) == [HResult.MQ_ERROR_INVALID_HANDLE]
    assert core.receives.end_receive(s, 9999, [1], ACK) == [HResult.MQ_ERROR_INVALID_HANDLE]


def test_step2_unknown_request_id_is_invalid_parameter_and_entry_kept(
    core: RemoteReadCore, s: RemoteSession, qm: QueueManager
) -> None:
    h, rid, _m = start_in_tx(core, s, qm, request_id=7)
    assert core.receives.end_receive(s, h, [8], ACK) == [HResult.MQ_ERROR_INVALID_PARAMETER]
    assert core.pending_count == 1
    assert core.receives.end_receive(s, h, [rid], ACK) == [HResult.MQ_OK]
    # removed: a second end finds no entry for the handle at all
    assert core.receives.end_receive(s, h, [rid], ACK) == [HResult.MQ_ERROR_INVALID_HANDLE]


def test_step2_cancels_the_cleanup_timer(
    core: RemoteReadCore, s: RemoteSession, qm: QueueManager, clock: Clock
) -> None:
    h, _, _ = start_in_tx(core, s, qm)
    assert core.next_deadline() == pytest.approx(clock.now + 10.0)
    assert core.receives.end_receive(s, h, [1], ACK) == [HResult.MQ_OK]
    clock.now += 100
    s.last_seen = clock.now
    assert core.run_timers() == 0  # no timer left to fire
    core.commit(s, UOW)
    assert bodies(qm, TXQ) == []


def test_step4_descriptor_gone_is_a_failure_and_nothing_more(
    core: RemoteReadCore, s: RemoteSession, qm: QueueManager
) -> None:
    """Seed 001 step 4: "If not found, return a failure HRESULT, and perform no further
    actions": the message stays where its transaction holds it; abort puts it back."""
    h, _, _ = start_in_tx(core, s, qm)
    # A close racing with the end: the descriptor is gone, the entry still there.
    s.handles[h].closed = True
    assert core.receives.end_receive(s, h, [1], ACK, transactional=True) == [HResult.MQ_ERROR_INVALID_HANDLE]
    assert available(qm, TXQ) == []  # not put back
    core.abort(s, UOW)
    assert available(qm, TXQ) == [b"a"]


def test_step4_descriptor_gone_of_a_receive_outside_a_transaction_puts_it_back(
    core: RemoteReadCore, s: RemoteSession, qm: QueueManager
) -> None:
    # R_EndReceive: no transaction would ever end that lock, so the message goes back.
    h = filled(core, s, qm, PLAINQ, [b"a"])
    core.receives.start_receive(s, h, request_id=1)
    assert available(qm, PLAINQ) == []
    s.handles[h].closed = True
    assert core.receives.end_receive(s, h, [1], ACK, transactional=False) == [HResult.MQ_ERROR_INVALID_HANDLE]
    assert available(qm, PLAINQ) == [b"a"]


def test_end_receive_and_end_transactional_receive_are_distinct(
    core: RemoteReadCore, s: RemoteSession, qm: QueueManager
) -> None:
    """R_EndReceive (iTransactional False) removes an acknowledged message now;
    R_EndTransactionalReceive (iTransactional True) leaves it to the commit. The method
    that does not match how a receive started is MQ_ERROR_TRANSACTION_USAGE and the
    receive stays pending for the right one."""
    fill(qm, PLAINQ, [b"p"])
    fill(qm, TXQ, [b"t"])
    hp = core.open_queue(s, PLAINQ, AccessMode.RECEIVE)
    ht = core.open_queue(s, TXQ, AccessMode.RECEIVE)
    core.receives.start_receive(s, hp, request_id=1)
    core.begin(s, UOW)
    core.receives.start_receive(s, ht, request_id=1, uow=UOW)
    # the transactional end of a receive outside a transaction: refused, nothing deleted
    assert core.receives.end_receive(s, hp, [1], ACK, transactional=True) == [
        HResult.MQ_ERROR_TRANSACTION_USAGE
    ]
    assert bodies(qm, PLAINQ) == [b"p"] and core.pending_count == 2
    # the plain end of a transaction's receive: refused, not deleted before the commit
    assert core.receives.end_receive(s, ht, [1], ACK, transactional=False) == [
        HResult.MQ_ERROR_TRANSACTION_USAGE
    ]
    assert bodies(qm, TXQ) == [b"t"] and core.pending_count == 2
    assert core.receives.end_receive(s, hp, [1], ACK, transactional=False) == [HResult.MQ_OK]
    assert bodies(qm, PLAINQ) == []  # R_EndReceive: removed now
    assert core.receives.end_receive(s, ht, [1], ACK, transactional=True) == [HResult.MQ_OK]
    assert bodies(qm, TXQ) == [b"t"]  # R_EndTransactionalReceive: at commit
    core.commit(s, UOW)
    assert bodies(qm, TXQ) == []


def test_step6_message_gone_is_message_not_found(
    core: RemoteReadCore, s: RemoteSession, qm: QueueManager
) -> None:
    h = filled(core, s, qm, TXQ, [b"a"])
    core.receives.start_receive(s, h, request_id=1, uow=UOW)  # creates the transaction (3.1.4.13 step 6)
    core.commit(s, UOW)  # the locked message leaves with the transaction
    assert core.receives.end_receive(s, h, [1], ACK) == [HResult.MQ_ERROR_MESSAGE_NOT_FOUND]
    assert bodies(qm, TXQ) == []


def test_step7_ack_removes_only_at_commit(core: RemoteReadCore, s: RemoteSession, qm: QueueManager) -> None:
    h, rid, m = start_in_tx(core, s, qm, [b"a", b"b"])
    assert m.body == b"a"
    assert core.receives.end_receive(s, h, [rid], ACK) == [HResult.MQ_OK]
    assert bodies(qm, TXQ) == [b"a", b"b"]  # "MUST NOT remove the packet" yet
    assert available(qm, TXQ) == [b"b"]
    core.commit(s, UOW)
    assert bodies(qm, TXQ) == [b"b"]


def test_step7_ack_then_abort_puts_it_back(core: RemoteReadCore, s: RemoteSession, qm: QueueManager) -> None:
    h, _, _ = start_in_tx(core, s, qm)
    assert core.receives.end_receive(s, h, [1], ACK) == [HResult.MQ_OK]
    core.abort(s, UOW)
    assert available(qm, TXQ) == [b"a"]


def test_step7_nack_makes_it_available_now_and_commit_keeps_it(
    core: RemoteReadCore, s: RemoteSession, qm: QueueManager
) -> None:
    h, _, first = start_in_tx(core, s, qm)
    assert core.receives.end_receive(s, h, [1], NACK) == [HResult.MQ_OK]
    assert available(qm, TXQ) == [b"a"]  # safe reading of RR_NACK (remote-read.md §10.1)
    [(_, again)] = core.receives.start_receive(s, h, request_id=2, uow=UOW)
    assert again.lookup_id == first.lookup_id
    core.receives.end_receive(s, h, [2], NACK)
    core.commit(s, UOW)
    assert bodies(qm, TXQ) == [b"a"]


def test_end_after_abort_is_transaction_sequence(
    core: RemoteReadCore, s: RemoteSession, qm: QueueManager
) -> None:
    h, _, _ = start_in_tx(core, s, qm)
    core.abort(s, UOW)
    # Someone else takes the message; our late NACK must not release their lock.
    other = core.open_session(Principal("other"))
    oh = core.open_queue(other, TXQ, AccessMode.RECEIVE)
    core.receives.start_receive(other, oh, request_id=1, uow=b"\x01" * 16)
    assert core.receives.end_receive(s, h, [1], NACK) == [HResult.MQ_ERROR_TRANSACTION_SEQUENCE]
    assert available(qm, TXQ) == []


def test_dwack_out_of_range(core: RemoteReadCore, s: RemoteSession) -> None:
    h = core.open_queue(s, TXQ, AccessMode.RECEIVE)
    for bad in (0, 3):
        with pytest.raises(MQError) as e:
            core.receives.end_receive(s, h, [1], bad)
        assert code(e) == HResult.MQ_ERROR_INVALID_PARAMETER


# ---- Pending Request Cleanup Timer ----------------------------------------------------------


def test_cleanup_timer_puts_abandoned_messages_back(
    core: RemoteReadCore, s: RemoteSession, qm: QueueManager, clock: Clock
) -> None:
    h = filled(core, s, qm, PLAINQ, [b"a", b"b", b"c"])
    got = core.receives.start_receive(s, h, request_id=10, max_count=2)
    assert [(rid, m.body) for rid, m in got] == [(10, b"a"), (11, b"b")]
    clock.now += 9.9
    s.last_seen = clock.now
    assert core.run_timers() == 0
    assert available(qm, PLAINQ) == [b"c"]
    clock.now += 0.2
    s.last_seen = clock.now
    assert core.run_timers() == 2
    assert available(qm, PLAINQ) == [b"a", b"b", b"c"]
    # The entries are gone: step 1 of R_EndReceive.
    assert core.receives.end_receive(s, h, [10], ACK) == [HResult.MQ_ERROR_INVALID_HANDLE]


def test_cleanup_timer_in_a_transaction_takes_the_message_out_of_it(
    core: RemoteReadCore, s: RemoteSession, qm: QueueManager, clock: Clock
) -> None:
    start_in_tx(core, s, qm)
    clock.now += 11
    s.last_seen = clock.now
    assert core.run_timers() == 1
    core.commit(s, UOW)
    assert bodies(qm, TXQ) == [b"a"]


# ---- sessions ---------------------------------------------------------------------------


def test_session_close_aborts_transactions_and_releases_everything(
    core: RemoteReadCore, s: RemoteSession, qm: QueueManager
) -> None:
    fill(qm, TXQ, [b"a", b"b", b"c"])
    h = core.open_queue(s, TXQ, AccessMode.RECEIVE | AccessMode.SEND)
    core.begin(s, UOW)
    core.receives.start_receive(s, h, request_id=1, uow=UOW)
    core.receives.end_receive(s, h, [1], ACK)  # ACKed, in the transaction
    core.receives.start_receive(s, h, request_id=2, uow=UOW)  # pending
    core.read(s, h, uow=UOW)  # plain receive in the transaction
    core.send(s, h, [MessageRecord(body=b"new")], UOW)
    assert available(qm, TXQ) == []
    core.close_session(s)
    assert available(qm, TXQ) == [b"a", b"b", b"c"]
    assert core.pending_count == 0
    with pytest.raises(MQError) as e:
        core.session(s.id)
    assert code(e) == HResult.MQ_ERROR_STALE_HANDLE


def test_idle_session_times_out(
    core: RemoteReadCore, s: RemoteSession, qm: QueueManager, clock: Clock
) -> None:
    h = filled(core, s, qm, PLAINQ, [b"a"])
    core.receives.start_receive(s, h, request_id=1)
    clock.now += 30
    core.touch(s)
    clock.now += 31
    assert core.run_timers() == 1  # the entry's 10 s cleanup timer, not the session
    assert core.session_count == 1
    clock.now += 30
    core.run_timers()
    assert core.session_count == 0
    assert available(qm, PLAINQ) == [b"a"]


def test_handles_belong_to_their_session(core: RemoteReadCore, s: RemoteSession, qm: QueueManager) -> None:
    h = filled(core, s, qm, PLAINQ, [b"a"])
    core.receives.start_receive(s, h, request_id=1)
    other = core.open_session(Principal("other"))
    with pytest.raises(MQError) as e:
        core.read(other, h)
    assert code(e) == HResult.MQ_ERROR_INVALID_HANDLE
    assert core.receives.end_receive(other, h, [1], ACK) == [HResult.MQ_ERROR_INVALID_HANDLE]
    with pytest.raises(MQError) as e:
        core.commit(other, UOW)
    assert code(e) == HResult.MQ_ERROR_TRANSACTION_SEQUENCE


# ---- OpenQueueDescriptors -------------------------------------------------------------------


def test_share_modes(core: RemoteReadCore, s: RemoteSession) -> None:
    core.open_queue(s, PLAINQ, AccessMode.RECEIVE, 1)  # MQ_DENY_SHARE
    for access, share in ((AccessMode.RECEIVE, 0), (AccessMode.PEEK, 1), (AccessMode.RECEIVE, 1)):
        with pytest.raises(MQError) as e:
            core.open_queue(s, PLAINQ, access, share)
        assert code(e) == HResult.MQ_ERROR_SHARING_VIOLATION
    core.open_queue(s, PLAINQ, AccessMode.PEEK)  # peeking stays allowed
    core.open_queue(s, PLAINQ, AccessMode.SEND)


def test_close_queue_puts_pending_back_and_frees_the_share(
    core: RemoteReadCore, s: RemoteSession, qm: QueueManager
) -> None:
    fill(qm, PLAINQ, [b"a"])
    h = core.open_queue(s, PLAINQ, AccessMode.RECEIVE, 1)
    core.receives.start_receive(s, h, request_id=1)
    core.close_queue(s, h)
    assert available(qm, PLAINQ) == [b"a"]
    core.open_queue(s, PLAINQ, AccessMode.RECEIVE, 1)
    with pytest.raises(MQError) as e:
        core.close_queue(s, h)
    assert code(e) == HResult.MQ_ERROR_INVALID_HANDLE


def test_open_queue_parameters_and_permissions(core: RemoteReadCore, qm: QueueManager) -> None:
    reader = core.open_session(Principal("r", (("private$\\plain", Permission.PEEK),)))
    for access, share, hr in (
        (0, 0, HResult.MQ_ERROR_INVALID_PARAMETER),
        (0x40, 0, HResult.MQ_ERROR_INVALID_PARAMETER),
        (AccessMode.PEEK, 2, HResult.MQ_ERROR_INVALID_PARAMETER),
        (AccessMode.SEND, 1, HResult.MQ_ERROR_UNSUPPORTED_ACCESS_MODE),
        (AccessMode.RECEIVE, 0, HResult.MQ_ERROR_ACCESS_DENIED),
    ):
        with pytest.raises(MQError) as e:
            core.open_queue(reader, PLAINQ, access, share)
        assert code(e) == hr, (access, share)
    with pytest.raises(MQError) as e:
        core.open_queue(reader, TXQ, AccessMode.PEEK)
    assert code(e) == HResult.MQ_ERROR_ACCESS_DENIED
    # Permissions are checked first: a name the caller has no right on is denied whether
    # or not the queue exists (nothing to learn about other queues), one it may open and
    # that does not exist is not found.
    with pytest.raises(MQError) as e:
        core.open_queue(reader, "private$\\nope", AccessMode.PEEK)
    assert code(e) == HResult.MQ_ERROR_ACCESS_DENIED
    finder = core.open_session(Principal("f", (("private$\\nope", Permission.PEEK),)))
    with pytest.raises(MQError) as e:
        core.open_queue(finder, "private$\\nope", AccessMode.PEEK)
    assert code(e) == HResult.MQ_ERROR_QUEUE_NOT_FOUND
    assert core.open_queue(reader, PLAINQ, AccessMode.PEEK) > 0


def test_purge_needs_receive_access(core: RemoteReadCore, s: RemoteSession, qm: QueueManager) -> None:
    fill(qm, PLAINQ, [b"a", b"b"])
    peeker = core.open_queue(s, PLAINQ, AccessMode.PEEK)
    with pytest.raises(MQError) as e:
        core.purge(s, peeker)
    assert code(e) == HResult.STATUS_ACCESS_DENIED
    assert core.purge(s, core.open_queue(s, PLAINQ, AccessMode.RECEIVE)) == 2


# ---- R_StartReceive parameter validity matrix (remote-read.md §3) ----------------------------


@pytest.mark.parametrize(
    ("action", "lookup_id", "cursor", "timeout_ms", "uow", "n", "expected"),
    [
        (0x12345678, 0, 0, 0, b"", 1, HResult.MQ_ERROR_INVALID_PARAMETER),  # unknown action
        (Action.RECEIVE, 5, 0, 0, b"", 1, HResult.MQ_ERROR_INVALID_PARAMETER),  # LookupId without lookup
        (Action.PEEK_NEXT, 0, 0, 0, b"", 1, HResult.MQ_ERROR_INVALID_PARAMETER),  # PEEK_NEXT without cursor
        (Action.LOOKUP_PEEK_CURRENT, 0, 0, 0, b"", 1, HResult.MQ_ERROR_INVALID_PARAMETER),  # no LookupId
        (Action.LOOKUP_RECEIVE_PREV, 1, 0, 100, b"", 1, HResult.MQ_ERROR_INVALID_PARAMETER),  # timeout
        (Action.LOOKUP_RECEIVE_NEXT, 1, 1, 0, b"", 1, HResult.MQ_ERROR_INVALID_PARAMETER),  # cursor
        (Action.LOOKUP_PEEK_NEXT, 1, 0, 0, b"", 2, HResult.MQ_ERROR_INVALID_PARAMETER),  # batch
        (Action.RECEIVE, 0, 0, 0, b"", 0, HResult.MQ_ERROR_INVALID_PARAMETER),  # max_count 0
        (Action.RECEIVE, 0, 77, 0, b"", 1, HResult.STATUS_INVALID_HANDLE),  # unknown cursor
        (Action.PEEK_CURRENT, 0, 0, 0, UOW, 1, HResult.MQ_ERROR_TRANSACTION_USAGE),  # peek in tx
        (Action.LOOKUP_PEEK_CURRENT, 1, 0, 0, UOW, 1, HResult.MQ_ERROR_TRANSACTION_USAGE),
        (Action.RECEIVE, 0, 0, 0, b"\x01\x02", 1, HResult.MQ_ERROR_INVALID_PARAMETER),  # bad XACTUOW
    ],
)
def test_validity_matrix(
    core: RemoteReadCore,
    s: RemoteSession,
    qm: QueueManager,
    action: int,
    lookup_id: int,
    cursor: int,
    timeout_ms: int,
    uow: bytes,
    n: int,
    expected: HResult,
) -> None:
    h = filled(core, s, qm, TXQ, [b"a"])
    for call in (core.read, core.receives.start_receive):
        with pytest.raises(MQError) as e:
            call(
                s, h, action, lookup_id=lookup_id, cursor=cursor, timeout_ms=timeout_ms, uow=uow,
                max_count=n, request_id=1,
            )  # fmt: skip
        assert code(e) == expected, call.__name__
    assert available(qm, TXQ) == [b"a"]


def test_transactional_receive_on_plain_queue_is_transaction_usage(
    core: RemoteReadCore, s: RemoteSession
) -> None:
    h = core.open_queue(s, PLAINQ, AccessMode.RECEIVE)
    with pytest.raises(MQError) as e:
        core.receives.start_receive(s, h, request_id=1, uow=UOW)
    assert code(e) == HResult.MQ_ERROR_TRANSACTION_USAGE


def test_peek_handle_cannot_receive(core: RemoteReadCore, s: RemoteSession, qm: QueueManager) -> None:
    fill(qm, PLAINQ, [b"a"])
    h = core.open_queue(s, PLAINQ, AccessMode.PEEK)
    assert [m.body for m in core.read(s, h, Action.PEEK_CURRENT)] == [b"a"]
    with pytest.raises(MQError) as e:
        core.read(s, h, Action.RECEIVE)
    assert code(e) == HResult.MQ_ERROR_ACCESS_DENIED


def test_lookup_actions(core: RemoteReadCore, s: RemoteSession, qm: QueueManager) -> None:
    h = filled(core, s, qm, PLAINQ, [b"a", b"b", b"c"])
    ids = [m.lookup_id for m in qm.peek_range(PLAINQ)]
    assert core.read(s, h, Action.LOOKUP_PEEK_NEXT, lookup_id=ids[0])[0].body == b"b"
    assert core.read(s, h, Action.LOOKUP_PEEK_PREV, lookup_id=ids[2])[0].body == b"b"
    assert core.read(s, h, Action.LOOKUP_PEEK_LAST)[0].body == b"c"
    [(rid, m)] = core.receives.start_receive(
        s, h, Action.LOOKUP_RECEIVE_CURRENT, lookup_id=ids[1], request_id=5
    )
    assert (rid, m.body) == (5, b"b")  # a lookup receive gets an entry too (§10.4)
    assert core.receives.end_receive(s, h, [5], ACK) == [HResult.MQ_OK]
    with pytest.raises(MQError) as e:
        core.read(s, h, Action.LOOKUP_RECEIVE_CURRENT, lookup_id=ids[1])
    assert code(e) == HResult.MQ_ERROR_MESSAGE_NOT_FOUND
    with pytest.raises(MQError) as e:
        core.read(s, h, Action.LOOKUP_PEEK_CURRENT, lookup_id=10**12)
    assert code(e) == HResult.MQ_ERROR_MESSAGE_NOT_FOUND
    assert [m.body for m in core.read(s, h, Action.LOOKUP_RECEIVE_FIRST)] == [b"a"]


def test_cursor_reads_and_two_phase_at_cursor(
    core: RemoteReadCore, s: RemoteSession, qm: QueueManager
) -> None:
    h = filled(core, s, qm, PLAINQ, [b"a", b"b", b"c", b"d"])
    c = core.create_cursor(s, h)
    assert core.read(s, h, Action.PEEK_CURRENT, cursor=c)[0].body == b"a"
    assert core.read(s, h, Action.PEEK_NEXT, cursor=c)[0].body == b"b"
    [(_, m)] = core.receives.start_receive(s, h, cursor=c, request_id=1)
    assert m.body == b"b"
    assert [x.body for x in core.read(s, h, Action.PEEK_CURRENT, cursor=c, max_count=5)] == [b"c", b"d"]
    core.close_cursor(s, h, c)
    with pytest.raises(MQError) as e:
        core.close_cursor(s, h, c)
    assert code(e) == HResult.MQ_ERROR_INVALID_HANDLE


def test_duplicate_request_id_is_invalid_parameter(
    core: RemoteReadCore, s: RemoteSession, qm: QueueManager
) -> None:
    h = filled(core, s, qm, PLAINQ, [b"a", b"b"])
    core.receives.start_receive(s, h, request_id=1)
    with pytest.raises(MQError) as e:
        core.receives.start_receive(s, h, request_id=1)
    assert code(e) == HResult.MQ_ERROR_INVALID_PARAMETER
    with pytest.raises(MQError) as e:
        core.receives.start_receive(s, h, request_id=0)
    assert code(e) == HResult.MQ_ERROR_INVALID_PARAMETER
    assert available(qm, PLAINQ) == [b"b"]


def test_single_message_transaction_is_not_two_phase(
    core: RemoteReadCore, s: RemoteSession, qm: QueueManager
) -> None:
    h = filled(core, s, qm, TXQ, [b"a"])
    with pytest.raises(MQError) as e:
        core.receives.start_receive(s, h, request_id=1, uow=SINGLE_MESSAGE_UOW)
    assert code(e) == HResult.MQ_ERROR_TRANSACTION_USAGE
    assert [m.body for m in core.read(s, h, uow=SINGLE_MESSAGE_UOW)] == [b"a"]
    assert bodies(qm, TXQ) == []


# ---- waiting and R_CancelReceive ------------------------------------------------------------


def test_cancel_receive_stops_a_waiting_receive(core: RemoteReadCore, s: RemoteSession) -> None:
    h = core.open_queue(s, PLAINQ, AccessMode.RECEIVE)
    errors: list[MQError] = []
    waiting = threading.Event()

    def wait() -> None:
        waiting.set()
        try:
            core.receives.start_receive(s, h, request_id=42, timeout_ms=0xFFFFFFFF)
        except MQError as exc:
            errors.append(exc)

    th = threading.Thread(target=wait)
    th.start()
    waiting.wait()
    for _ in range(200):  # until the waiter is registered
        try:
            core.receives.cancel_receive(s, h, 42)
            break
        except MQError as exc:
            assert exc.hresult == HResult.STATUS_NOT_FOUND
            threading.Event().wait(0.01)
    th.join(5)
    assert not th.is_alive()
    assert [e.hresult for e in errors] == [HResult.MQ_ERROR_OPERATION_CANCELLED]
    with pytest.raises(MQError) as e:
        core.receives.cancel_receive(s, h, 42)
    assert code(e) == HResult.STATUS_NOT_FOUND


def test_timeout_is_io_timeout(core: RemoteReadCore, s: RemoteSession) -> None:
    h = core.open_queue(s, PLAINQ, AccessMode.RECEIVE)
    with pytest.raises(MQError) as e:
        core.read(s, h, timeout_ms=30)
    assert code(e) == HResult.MQ_ERROR_IO_TIMEOUT


# ---- R_SetUserAcknowledgementClass ----------------------------------------------------------


def test_set_ack_class(core: RemoteReadCore, s: RemoteSession, qm: QueueManager) -> None:
    h, _, m = start_in_tx(core, s, qm)
    core.receives.end_receive(s, h, [1], ACK)
    with pytest.raises(MQError) as e:
        core.set_ack_class(s, h, UOW, m.lookup_id, 0x1234)
    assert code(e) == HResult.MQ_ERROR_INVALID_PARAMETER
    with pytest.raises(MQError) as e:
        core.set_ack_class(s, h, b"", m.lookup_id + 1, NACK_RECEIVE_REJECTED)
    assert code(e) == HResult.MQ_ERROR_TRANSACTION_USAGE
    with pytest.raises(MQError) as e:
        core.set_ack_class(s, 999, UOW, m.lookup_id, NACK_RECEIVE_REJECTED)
    assert code(e) == HResult.MQ_ERROR_INVALID_HANDLE
    core.set_ack_class(s, h, b"", m.lookup_id, NACK_RECEIVE_REJECTED)
    core.commit(s, UOW)
    assert bodies(qm, TXQ) == []


def test_batched_start_receive_skips_messages_another_reader_locked(
    core: RemoteReadCore, s: RemoteSession, qm: QueueManager
) -> None:
    fill(qm, TXQ, [b"1", b"2", b"3", b"4", b"5"])
    other = qm.begin()
    h_other = qm.open_queue(TXQ)
    second = qm.peek_range(TXQ, 0, 1_000_000)[1]
    qm.dequeue_begin(h_other, tx=other, lookup_id=second.lookup_id)  # "2" locked elsewhere
    h = core.open_queue(s, TXQ, AccessMode.RECEIVE)
    got = core.receives.start_receive(s, h, request_id=100, uow=UOW, max_count=10)
    assert [rid for rid, _ in got] == [100, 101, 102, 103]
    assert [m.body for _, m in got] == [b"1", b"3", b"4", b"5"]
    assert core.pending_count == 4
    assert core.receives.end_receive(s, h, [101], NACK) == [HResult.MQ_OK]  # "3" back
    assert core.receives.end_receive(s, h, [100, 102, 103], ACK) == [HResult.MQ_OK] * 3
    core.commit(s, UOW)
    other.abort()
    assert bodies(qm, TXQ) == [b"2", b"3"]
