"""The step stream beyond single receives: a commit of a transaction that received a batch
(``receive_many``) carries the next batch, and sends travel on the stream, with the
semantics of the unary calls kept (docs/remote.md, "The step stream and the consumer
loop")."""

from __future__ import annotations

from typing import Any

import pytest

import openmsmq
from openmsmq.client import SINGLE_MESSAGE, Access, Connection
from openmsmq.client.grpc_transport import GrpcTransport
from openmsmq.errors import HResult, MQError
from openmsmq.qm import QueueManager
from openmsmq.remote import openmsmq_remote_pb2 as pb
from openmsmq.remote import steps
from openmsmq.remote.codes import UNKNOWN_STEP_OP
from openmsmq.remote.limits import RemoteLimits
from openmsmq.remote.server import RemoteServer

from .conftest import PLAINQ, TXQ, bodies, fill
from .steps_helpers import Calls, Connect, numbered, receiver

# ---- a commit carries the next batch -------------------------------------------------------------


def _consumer(
    qm: QueueManager, connect: Connect, monkeypatch: pytest.MonkeyPatch, n: int
) -> tuple[Calls, GrpcTransport, Connection]:
    """``n`` messages in TXQ and a connection whose calls are counted."""
    fill(qm, TXQ, numbered(n))
    calls = Calls(monkeypatch)
    t = connect()
    calls.watch(t)
    return calls, t, Connection(t)


def test_the_batch_consumer_loop_is_one_round_trip_per_transaction(
    qm: QueueManager, server: RemoteServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(qm, TXQ, numbered(35))
    calls = Calls(monkeypatch)
    with calls.connected(server.target) as conn:
        q = conn.open_queue(TXQ, Access.RECEIVE)
        got: list[bytes] = []
        batches = []
        for _ in range(4):
            with conn.transaction() as tx:
                batch = q.receive_many(10, timeout=5, tx=tx)
                batches.append(len(batch))
                got.extend(m.body for m in batch)
        assert got == numbered(35)  # each once, in order
        assert batches == [10, 10, 10, 5]
        # The first transaction reads and commits; each commit carries the next batch
        # (the last one finds the queue empty and takes nothing).
        assert dict(calls.counts) == {"stream read": 1, "stream commit+read": 4}
    assert bodies(qm, TXQ) == []


def test_a_different_receive_gives_the_batch_back_uncounted_and_in_order(
    qm: QueueManager, connect: Connect, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls, _t, conn = _consumer(qm, connect, monkeypatch, 7)
    q = conn.open_queue(TXQ, Access.RECEIVE)
    with conn.transaction() as tx:
        assert [m.body for m in q.receive_many(3, timeout=5, tx=tx)] == numbered(3)
    assert calls.counts["stream commit+read"] == 1  # m003..m005 are taken ahead now
    # A batch of another size is another receive: the batch taken ahead goes back first.
    with conn.transaction() as tx:
        got = q.receive_many(2, timeout=5, tx=tx)
        assert [(m.body, m.abort_count) for m in got] == [(b"m003", 0), (b"m004", 0)]
    assert calls.counts["stream give_back"] == 1
    assert calls.counts["stream commit+read"] == 2  # m005 and m006 are taken ahead now
    conn.close()  # gives them back
    other, oq = receiver(connect)
    with other.transaction() as otx:
        rest = oq.receive_many(10, timeout=5, tx=otx)
    assert [(m.body, m.abort_count) for m in rest] == [(b"m005", 0), (b"m006", 0)]
    assert bodies(qm, TXQ) == []


def test_closing_gives_back_the_batch_taken_ahead_uncounted(
    qm: QueueManager, connect: Connect, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls, t, _conn = _consumer(qm, connect, monkeypatch, 6)
    h = t.open_queue(TXQ, Access.RECEIVE)
    tx = t.begin()
    assert [m.body for m in t.read(h, tx=tx, max_count=2)] == numbered(2)
    t.commit(tx)  # m002 and m003 taken ahead: the application never saw them
    assert calls.counts["stream commit+read"] == 1
    t.close()
    assert bodies(qm, TXQ) == numbered(6)[2:]  # back in place, in order
    other, oq = receiver(connect)
    with other.transaction() as otx:
        got = oq.receive_many(10, timeout=5, tx=otx)
    # Given back, not aborted: their AbortCount is unchanged, nothing delivered twice.
    assert [(m.body, m.abort_count) for m in got] == [(b, 0) for b in numbered(6)[2:]]
    assert bodies(qm, TXQ) == []


def test_an_abort_of_a_claimed_batch_counts_and_keeps_the_order(
    qm: QueueManager, connect: Connect, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls, _t, conn = _consumer(qm, connect, monkeypatch, 5)
    q = conn.open_queue(TXQ, Access.RECEIVE)
    with conn.transaction() as tx:
        q.receive_many(2, timeout=5, tx=tx)
    tx = conn.transaction()
    assert [m.body for m in q.receive_many(2, timeout=5, tx=tx)] == [b"m002", b"m003"]  # claimed
    assert calls.counts["stream commit+read"] == 1 and calls.round_trips() == 2
    tx.abort()  # the application saw them: a failed attempt each
    with conn.transaction() as tx:
        got = q.receive_many(10, timeout=5, tx=tx)
    assert [(m.body, m.abort_count) for m in got] == [(b"m002", 1), (b"m003", 1), (b"m004", 0)]
    assert bodies(qm, TXQ) == []


# ---- sends on the stream -------------------------------------------------------------------------


def test_sends_travel_on_the_step_stream(
    qm: QueueManager, server: RemoteServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = Calls(monkeypatch)
    with calls.connected(server.target) as conn:
        s = conn.open_queue(TXQ, Access.SEND)
        r = s.send(b"one", tx=SINGLE_MESSAGE)
        assert r.lookup_id and bodies(qm, TXQ) == [b"one"]  # in the queue when send returns
        s.send_many([b"two", b"three"], tx=SINGLE_MESSAGE)
        with conn.transaction() as tx:
            s.send_many([b"four", b"five"], tx=tx)
            assert bodies(qm, TXQ) == [b"one", b"two", b"three"]  # not before its commit
        tx = conn.transaction()
        s.send(b"dropped", tx=tx)
        tx.abort()
        p = conn.open_queue(PLAINQ, Access.SEND)
        p.send(b"plain")
    assert bodies(qm, TXQ) == [b"one", b"two", b"three", b"four", b"five"]
    assert bodies(qm, PLAINQ) == [b"plain"]
    assert calls.counts["unary Send"] == 0
    assert calls.counts["stream send"] == 5  # the sends; commits and aborts of their own
    assert calls.counts["stream commit"] == 1 and calls.counts["stream abort"] == 1


def _send_error(conn: Connection, case: str) -> tuple[type, int]:
    try:
        if case == "no transaction to a transactional queue":
            conn.open_queue(TXQ, Access.SEND).send(b"x")
        elif case == "a transaction to a plain queue":
            with conn.transaction() as tx:
                conn.open_queue(PLAINQ, Access.SEND).send(b"x", tx=tx)
        elif case == "a handle opened to receive":
            conn.open_queue(TXQ, Access.RECEIVE).send(b"x", tx=SINGLE_MESSAGE)
        elif case == "a closed handle":
            q = conn.open_queue(TXQ, Access.SEND)
            handle = q.handle
            conn.transport.close_queue(handle)
            q.send(b"x", tx=SINGLE_MESSAGE)
        else:  # more messages than remote.max_batch_messages
            conn.open_queue(TXQ, Access.SEND).send_many([b"x"] * 3, tx=SINGLE_MESSAGE)
    except MQError as exc:
        return type(exc), int(exc.hresult)
    raise AssertionError(f"{case}: no error")


SEND_ERRORS = [
    "no transaction to a transactional queue",
    "a transaction to a plain queue",
    "a handle opened to receive",
    "a closed handle",
    "too many messages",
]


@pytest.mark.parametrize("case", SEND_ERRORS)
def test_a_send_on_the_stream_fails_as_the_unary_send(
    qm: QueueManager, monkeypatch: pytest.MonkeyPatch, case: str
) -> None:
    calls = Calls(monkeypatch)
    with RemoteServer(qm, port=0, limits=RemoteLimits(max_batch_messages=2)) as srv:
        srv.start()
        with openmsmq.connect(srv.target + "?steps=0") as unary:
            expected = _send_error(unary, case)
        with calls.connected(srv.target) as conn:
            assert _send_error(conn, case) == expected
            assert calls.counts["unary Send"] == 0 and calls.counts["stream send"] == 1
            # The stream goes on after the failed op.
            conn.open_queue(TXQ, Access.SEND).send(b"after", tx=SINGLE_MESSAGE)
    assert expected[1] != 0
    assert bodies(qm, TXQ) == [b"after"] and bodies(qm, PLAINQ) == []


def test_a_server_without_sends_on_the_stream_gets_the_unary_send(
    qm: QueueManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = steps._run_op

    def older(core: Any, s: Any, op: pb.StepOp, cancel: Any) -> pb.StepResult:
        if op.WhichOneof("op") == "send":  # what a server predating the op answers
            raise MQError(HResult.MQ_ERROR_INVALID_PARAMETER, UNKNOWN_STEP_OP)
        return original(core, s, op, cancel)

    monkeypatch.setattr(steps, "_run_op", older)
    calls = Calls(monkeypatch)
    with RemoteServer(qm, port=0) as srv:
        srv.start()
        with calls.connected(srv.target) as conn:
            s = conn.open_queue(TXQ, Access.SEND)
            for body in (b"a", b"b"):
                s.send(body, tx=SINGLE_MESSAGE)
    assert bodies(qm, TXQ) == [b"a", b"b"]  # each once
    # The first send learns it on the stream, which ran nothing; then unary only.
    assert calls.counts["stream send"] == 1 and calls.counts["unary Send"] == 2
