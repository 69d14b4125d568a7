"""``remote.max_pending_bytes``: what one session may hold in receives it started and has
not ended. A client that starts batched receives in a loop and never ends them held every
locked message in the server's memory until the cleanup timer (5 minutes): the whole queue,
for a queue of a million messages over a gigabyte."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from openmsmq.errors import HResult, LimitError, MQError
from openmsmq.qm import MessageRecord, QueueManager
from openmsmq.remote.auth import Principal
from openmsmq.remote.codes import AccessMode, RemoteAck
from openmsmq.remote.core import RemoteReadCore
from openmsmq.remote.pending import ENTRY_OVERHEAD, SEND_OVERHEAD
from tests.clock import Clock

from .conftest import PLAINQ, TXQ, bodies, fill

BODY = 1000
#: Room for 10 pending 1,000-byte messages.
BUDGET = 10 * (BODY + ENTRY_OVERHEAD)


@pytest.fixture
def core(qm: QueueManager, clock: Clock) -> Iterator[RemoteReadCore]:
    c = RemoteReadCore(qm, cleanup_timeout=10.0, session_timeout=60.0, max_pending_bytes=BUDGET, clock=clock)
    yield c
    c.close()


def _fill(qm: QueueManager, queue: str, n: int) -> list[bytes]:
    msgs = [b"%04d" % i + bytes(BODY - 4) for i in range(n)]
    fill(qm, queue, msgs)
    return msgs


def test_a_session_holds_at_most_its_budget_and_gets_insufficient_resources_beyond(
    core: RemoteReadCore, qm: QueueManager
) -> None:
    msgs = _fill(qm, PLAINQ, 40)
    s = core.open_session(Principal("a"))
    h = core.open_queue(s, PLAINQ, AccessMode.RECEIVE)
    got = core.receives.start_receive(s, h, request_id=1, max_count=25)  # the batch stops at the budget
    assert [m.body for _, m in got] == msgs[:10]
    assert s.pending_bytes == BUDGET
    with pytest.raises(MQError) as err:
        core.receives.start_receive(s, h, request_id=100, max_count=5)
    assert err.value.hresult == HResult.MQ_ERROR_INSUFFICIENT_RESOURCES
    assert "remote.max_pending_bytes" in str(err.value)
    # Another session has a budget of its own.
    other = core.open_session(Principal("b"))
    h2 = core.open_queue(other, PLAINQ, AccessMode.RECEIVE)
    assert [m.body for _, m in core.receives.start_receive(other, h2, request_id=1, max_count=3)] == msgs[
        10:13
    ]
    # Ending receives gives the budget back; nothing was lost or taken twice.
    assert core.receives.end_receive(s, h, [1, 2, 3, 4], RemoteAck.RR_ACK) == [0] * 4
    assert s.pending_bytes == 6 * (BODY + ENTRY_OVERHEAD)
    got = core.receives.start_receive(s, h, request_id=100, max_count=10)
    assert [m.body for _, m in got] == msgs[13:17]
    assert core.receives.end_receive(other, h2, [1, 2, 3], RemoteAck.RR_NACK) == [0] * 3
    assert bodies(qm, PLAINQ) == msgs[4:]


def test_the_budget_comes_back_by_the_cleanup_timer_close_and_transaction_end(
    core: RemoteReadCore, qm: QueueManager, clock: Clock
) -> None:
    _fill(qm, TXQ, 30)
    s = core.open_session(Principal("a"))
    h = core.open_queue(s, TXQ, AccessMode.RECEIVE)
    uow = bytes(range(16))
    assert len(core.receives.start_receive(s, h, request_id=1, uow=uow, max_count=10)) == 10
    core.abort(s, uow)  # the messages go back; their entries stay until ended or expired
    clock.now += 10.5
    s.last_seen = clock.now
    core.run_timers()
    assert s.pending_bytes == 0 and core.pending_count == 0
    assert len(core.receives.start_receive(s, h, request_id=20, uow=bytes(range(1, 17)), max_count=10)) == 10
    core.close_queue(s, h)
    assert s.pending_bytes == 0
    h = core.open_queue(s, TXQ, AccessMode.RECEIVE)
    assert len(core.receives.start_receive(s, h, request_id=1, uow=bytes(16), max_count=10)) == 10
    core.close_session(s)
    assert s.pending_bytes == 0 and core.pending_count == 0
    assert len(bodies(qm, TXQ)) == 30


def test_over_grpc_the_client_gets_the_typed_error_and_goes_on_after_ending(qm: QueueManager) -> None:
    from openmsmq.client import Access, Ack
    from openmsmq.client.grpc_transport import GrpcTransport
    from openmsmq.remote.server import RemoteServer

    msgs = _fill(qm, PLAINQ, 12)
    with RemoteServer(qm, port=0, max_pending_bytes=BUDGET) as srv:
        srv.start()
        t = GrpcTransport(srv.target)
        try:
            h = t.open_queue(PLAINQ, Access.RECEIVE)
            got = t.start_receive_many(h, 12)
            assert [p.message.body for p in got] == msgs[:10]
            with pytest.raises(MQError) as err:
                t.start_receive_many(h, 2)
            assert err.value.hresult == HResult.MQ_ERROR_INSUFFICIENT_RESOURCES
            assert t.end_receive_many(h, [p.request_id for p in got], Ack.ACK) == [0] * 10
            assert [p.message.body for p in t.start_receive_many(h, 2)] == msgs[10:]
        finally:
            t.close()


def test_all_sessions_together_hold_at_most_the_server_s_budget(qm: QueueManager, clock: Clock) -> None:
    """Each session within its own bound, together they stop at
    ``remote.max_total_pending_bytes``: a client that opens session after session no
    longer holds the whole queue in the server's memory. Ending receives in one session
    makes room for the others."""
    msgs = _fill(qm, PLAINQ, 40)
    core = RemoteReadCore(
        qm, cleanup_timeout=10.0, session_timeout=60.0, max_pending_bytes=BUDGET,
        max_total_pending_bytes=2 * BUDGET + BODY, clock=clock,
    )  # fmt: skip
    try:
        sessions = [core.open_session(Principal(name)) for name in "abc"]
        handles = [core.open_queue(s, PLAINQ, AccessMode.RECEIVE) for s in sessions]
        a, b, c = sessions
        assert len(core.receives.start_receive(a, handles[0], request_id=1, max_count=10)) == 10
        assert len(core.receives.start_receive(b, handles[1], request_id=1, max_count=10)) == 10
        # 1,000 bytes of room: the batch takes one message (as a session's own bound, a
        # start that finds room takes at least one) and stops.
        got = core.receives.start_receive(c, handles[2], request_id=1, max_count=5)
        assert [m.body for _, m in got] == msgs[20:21]
        with pytest.raises(MQError) as err:
            core.receives.start_receive(c, handles[2], request_id=10, max_count=5)
        assert err.value.hresult == HResult.MQ_ERROR_INSUFFICIENT_RESOURCES
        assert "remote.max_total_pending_bytes" in str(err.value)
        assert c.pending_bytes == BODY + ENTRY_OVERHEAD  # within its own bound
        assert core.receives.end_receive(a, handles[0], [1, 2, 3], RemoteAck.RR_ACK) == [0] * 3
        got = core.receives.start_receive(c, handles[2], request_id=20, max_count=5)
        # Three ended receives (3 x 2,536) less what c took beyond the bound (1,536): two more.
        assert [m.body for _, m in got] == msgs[21:23]
        assert a.pending_bytes + b.pending_bytes + c.pending_bytes == 20 * (BODY + ENTRY_OVERHEAD)
        for s in sessions:
            core.close_session(s)
        assert bodies(qm, PLAINQ) == msgs[3:]  # the ended three are gone, the rest back
    finally:
        core.close()


# ---- sends buffered in an open remote transaction -------------------------------------------
# A client that sent into a transaction and never committed held every message in the
# server's memory (160 MiB sent, never committed: +268 MB), counted by neither bound.

SEND_COST = BODY + SEND_OVERHEAD


def test_sends_in_an_open_transaction_count_against_the_session_budget(
    core: RemoteReadCore, qm: QueueManager
) -> None:
    s = core.open_session(Principal("hoarder"))
    h = core.open_queue(s, TXQ, AccessMode.SEND | AccessMode.RECEIVE)
    uow = bytes(range(16))
    fits = BUDGET // SEND_COST
    core.send(s, h, [MessageRecord(body=bytes(BODY))] * fits, uow)
    assert s.pending_bytes == fits * SEND_COST
    with pytest.raises(LimitError) as err:
        core.send(s, h, [MessageRecord(body=bytes(BODY))] * 2, uow)
    assert err.value.hresult == HResult.MQ_ERROR_INSUFFICIENT_RESOURCES
    assert err.value.limit == "remote.max_pending_bytes"
    assert "commit or abort" in str(err.value)
    assert s.pending_bytes == fits * SEND_COST  # the refused send took nothing
    # The held sends leave room for one more message only: a batched receive the session
    # starts takes one (a start that finds room takes at least one), then none.
    _fill(qm, TXQ, 5)
    assert len(core.receives.start_receive(s, h, request_id=1, uow=bytes(16), max_count=5)) == 1
    with pytest.raises(LimitError):
        core.receives.start_receive(s, h, request_id=10, uow=bytes(16), max_count=1)
    core.abort(s, bytes(16))
    assert core.receives.end_receive(s, h, [1], RemoteAck.RR_NACK) == [HResult.MQ_ERROR_TRANSACTION_SEQUENCE]
    # Committing gives the budget back and stores what was accepted, once.
    core.commit(s, uow)
    assert s.pending_bytes == 0 and core.budget.tx_bytes == 0
    assert len(bodies(qm, TXQ)) == fits + 5


def test_the_send_budget_comes_back_at_abort_and_at_session_end(
    core: RemoteReadCore, qm: QueueManager
) -> None:
    s = core.open_session(Principal("a"))
    h = core.open_queue(s, TXQ, AccessMode.SEND)
    core.send(s, h, [MessageRecord(body=bytes(BODY))] * 3, b"\x01" * 16)
    assert s.pending_bytes == 3 * SEND_COST and core.budget.tx_bytes == 3 * SEND_COST
    core.abort(s, b"\x01" * 16)
    assert s.pending_bytes == 0 and core.budget.tx_bytes == 0
    core.send(s, h, [MessageRecord(body=bytes(BODY))] * 3, b"\x02" * 16)
    core.close_session(s)  # the client vanished: its transaction is aborted
    assert core.budget.tx_bytes == 0
    assert bodies(qm, TXQ) == []


def test_sends_of_all_sessions_stop_at_the_server_budget(qm: QueueManager, clock: Clock) -> None:
    core = RemoteReadCore(
        qm, max_pending_bytes=BUDGET, max_total_pending_bytes=BUDGET + BUDGET // 2, clock=clock
    )
    try:
        a, b = core.open_session(Principal("a")), core.open_session(Principal("b"))
        ha, hb = (core.open_queue(x, TXQ, AccessMode.SEND) for x in (a, b))
        core.send(a, ha, [MessageRecord(body=bytes(BODY))] * (BUDGET // SEND_COST), b"\x01" * 16)
        with pytest.raises(LimitError) as err:
            core.send(b, hb, [MessageRecord(body=bytes(BODY))] * (BUDGET // SEND_COST), b"\x02" * 16)
        assert err.value.limit == "remote.max_total_pending_bytes"
        core.commit(a, b"\x01" * 16)
        core.send(b, hb, [MessageRecord(body=bytes(BODY))] * (BUDGET // SEND_COST), b"\x02" * 16)
        core.commit(b, b"\x02" * 16)
        assert len(bodies(qm, TXQ)) == 2 * (BUDGET // SEND_COST)
    finally:
        core.close()


def test_over_grpc_a_send_beyond_the_budget_fails_typed_and_others_are_served(qm: QueueManager) -> None:
    from openmsmq.client import Access, outgoing
    from openmsmq.client.grpc_transport import GrpcTransport
    from openmsmq.remote.server import RemoteServer

    with RemoteServer(qm, port=0, max_pending_bytes=BUDGET) as srv:
        srv.start()
        hoarder, other = GrpcTransport(srv.target), GrpcTransport(srv.target)
        try:
            h = hoarder.open_queue(TXQ, Access.SEND)
            tx = hoarder.begin()
            with pytest.raises(MQError) as err:
                for _ in range(100):  # never committed
                    hoarder.send(h, [outgoing(bytes(BODY))], tx=tx)
            assert err.value.hresult == HResult.MQ_ERROR_INSUFFICIENT_RESOURCES
            assert "remote.max_pending_bytes" in str(err.value)
            oh = other.open_queue(TXQ, Access.SEND)
            otx = other.begin()
            other.send(oh, [outgoing(b"served")], tx=otx)
            other.commit(otx)
            assert bodies(qm, TXQ) == [b"served"]
            hoarder.abort(tx)
            tx = hoarder.begin()
            hoarder.send(h, [outgoing(b"after")], tx=tx)
            hoarder.commit(tx)
            assert bodies(qm, TXQ) == [b"served", b"after"]
        finally:
            hoarder.close()
            other.close()
