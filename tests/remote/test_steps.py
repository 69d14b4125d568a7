"""The step stream and the consumer loop's fast path (openmsmq.client.grpc_steps,
openmsmq.remote.steps): one round trip per transaction for ``begin; receive one; commit``,
with the semantics of the unary calls (``?steps=0``) kept: an abort puts the message
back in order, a vanished client gets nothing lost, a message taken ahead and not asked
for goes back, permissions and limits are checked before work, errors are typed."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import openmsmq
from openmsmq.client import Access, Ack, Connection, aio
from openmsmq.client.grpc_transport import GrpcTransport, error_from_rpc
from openmsmq.errors import HResult, IOTimeoutError, MQError
from openmsmq.observability.metrics import Metrics
from openmsmq.qm import QueueManager
from openmsmq.remote import openmsmq_remote_pb2 as pb
from openmsmq.remote import openmsmq_remote_pb2_grpc as pb_grpc
from openmsmq.remote import server as server_module
from openmsmq.remote.auth import parse_tokens
from openmsmq.remote.codes import SESSION_KEY
from openmsmq.remote.limits import RemoteLimits
from openmsmq.remote.server import RemoteServer
from openmsmq.remote.steps import MAX_STEP_OPS

from .conftest import TXQ, bodies, fill
from .steps_helpers import Calls, Connect, consumer, numbered, receiver

CHILD = Path(__file__).with_name("steps_client.py")


# ---- one round trip per transaction ------------------------------------------------------------


def test_the_sync_consumer_loop_is_one_round_trip_per_transaction(
    qm: QueueManager, server: RemoteServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(qm, TXQ, numbered(21))
    calls = Calls(monkeypatch)
    with calls.connected(server.target) as conn:
        q = conn.open_queue(TXQ, Access.RECEIVE)
        got = []
        for _ in range(21):
            with conn.transaction() as tx:
                got.append(q.receive(timeout=5, tx=tx).body)
        assert got == numbered(21)
        # The first transaction reads and commits; every commit carries the next receive.
        assert calls.counts["stream read"] == 1
        assert calls.counts["stream commit+read"] == 21
        assert calls.round_trips() == 22
    assert bodies(qm, TXQ) == []


def test_the_asyncio_consumer_loop_is_one_round_trip_per_transaction(
    qm: QueueManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(qm, TXQ, numbered(21))
    calls = Calls(monkeypatch)
    # The server's own cleanup timer (the fixture's 0.3 s would leave a message started
    # ahead 75 ms for the next receive: grpc_steps gives it back sooner than the timer).
    server = RemoteServer(qm, port=0).start()

    async def main() -> list[bytes]:
        conn = await aio.connect(server.target)
        calls.watch(conn.transport)  # type: ignore[arg-type]
        q = await conn.open_queue(TXQ, Access.RECEIVE)
        got = []
        for _ in range(21):
            async with conn.transaction() as tx:
                got.append((await q.receive(timeout=5, tx=tx)).body)
        await conn.close()
        return got

    try:
        assert asyncio.run(main()) == numbered(21)
    finally:
        server.stop(grace=0.2)
    # R_StartTransactionalReceive, then its RR_ACK, the commit and the next start together.
    assert calls.counts["stream start_receive"] == 1
    assert calls.counts["stream end_receive+commit+start_receive"] == 21
    assert calls.round_trips() == 22
    assert bodies(qm, TXQ) == []


def test_unary_calls_stay_available_and_are_two_round_trips(
    qm: QueueManager, server: RemoteServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    fill(qm, TXQ, numbered(5))
    calls = Calls(monkeypatch)
    with calls.connected(server.target + "?steps=0") as conn:
        q = conn.open_queue(TXQ, Access.RECEIVE)
        for _ in range(5):
            with conn.transaction() as tx:
                q.receive(timeout=5, tx=tx)
    assert dict(calls.counts) == {"unary Read": 5, "unary Commit": 5}


# ---- the same semantics as the unary calls -----------------------------------------------------

OPS = ["loop", "abort", "peek", "two_phase", "nack", "many", "send", "mixed", "info", "close_reopen"]


def _apply(conn: Connection, q: Any, queue: str, op: str, k: int) -> object:
    """One step of a consumer; returns what the application sees (bodies or an HRESULT)."""
    try:
        if op == "loop":
            with conn.transaction() as tx:
                return q.receive(timeout=0, tx=tx).body
        if op == "abort":
            tx = conn.transaction()
            body = q.receive(timeout=0, tx=tx).body
            tx.abort()
            return body
        if op == "peek":
            return q.peek(timeout=0).body
        if op == "two_phase":
            with conn.transaction() as tx:
                p = q.start_receive(timeout=0, tx=tx)
                q.end_receive(p, Ack.ACK)
                return p.message.body
        if op == "nack":
            with conn.transaction() as tx:
                p = q.start_receive(timeout=0, tx=tx)
                q.end_receive(p, Ack.NACK)
                return p.message.body
        if op == "many":
            with conn.transaction() as tx:
                return [m.body for m in q.receive_many(2, timeout=0, tx=tx)]
        if op == "send":
            s = conn.open_queue(queue, Access.SEND)
            with conn.transaction() as tx:
                s.send(f"new{k}".encode(), tx=tx)
            s.close()
            return None
        if op == "mixed":
            s = conn.open_queue(queue, Access.SEND)
            with conn.transaction() as tx:
                body = q.receive(timeout=0, tx=tx).body
                s.send(b"re-" + body, tx=tx)
            s.close()
            return body
        if op == "info":
            return conn.queue_info(queue).message_count
        q.close()
        return None
    except MQError as exc:
        return int(exc.hresult)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(script=st.lists(st.sampled_from(OPS), min_size=1, max_size=14))
def test_the_step_stream_and_the_unary_calls_agree(
    qm: QueueManager, server: RemoteServer, script: list[str]
) -> None:
    seen: list[list[object]] = []
    left: list[list[bytes]] = []
    for n, query in enumerate(("?steps=0", "")):
        queue = f"private$\\eq-{os.urandom(4).hex()}-{n}"
        qm.create_queue(queue, transactional=True)
        fill(qm, queue, numbered(6))
        with openmsmq.connect(server.target + query) as conn:
            q = conn.open_queue(queue, Access.RECEIVE)
            out = []
            for k, op in enumerate(script):
                out.append(_apply(conn, q, queue, op, k))
                if op == "close_reopen":
                    q = conn.open_queue(queue, Access.RECEIVE)
            seen.append(out)
        left.append(bodies(qm, queue))
    assert seen[0] == seen[1]
    assert left[0] == left[1]


ASYNC_SCRIPT = ["loop", "loop", "abort", "loop", "peek", "nack", "loop", "many", "loop", "abort", "loop"]


async def _apply_async(conn: aio.AsyncConnection, q: aio.AsyncQueue, op: str) -> object:
    try:
        if op == "peek":
            return (await q.peek(timeout=0)).body
        if op == "many":
            async with conn.transaction() as tx:
                return [m.body for m in await q.receive_many(2, timeout=0, tx=tx)]
        tx = await conn.transaction().begin()
        if op == "nack":
            p = await q.start_receive(timeout=0, tx=tx)
            await q.end_receive(p, Ack.NACK)
            await tx.commit()
            return p.message.body
        body = (await q.receive(timeout=0, tx=tx)).body
        await (tx.abort() if op == "abort" else tx.commit())
        return body
    except MQError as exc:
        return int(exc.hresult)


def test_the_asyncio_client_sees_the_same_on_both_paths(qm: QueueManager, server: RemoteServer) -> None:
    async def run(query: str, queue: str) -> list[object]:
        conn = await aio.connect(server.target + query)
        q = await conn.open_queue(queue, Access.RECEIVE)
        out = [await _apply_async(conn, q, op) for op in ASYNC_SCRIPT]
        await conn.close()
        return out

    seen, left = [], []
    for n, query in enumerate(("?steps=0", "")):
        queue = f"private$\\aio-{n}"
        qm.create_queue(queue, transactional=True)
        fill(qm, queue, numbered(8))
        seen.append(asyncio.run(run(query, queue)))
        left.append(bodies(qm, queue))
    assert seen[0] == seen[1]
    assert seen[0][:4] == [b"m000", b"m001", b"m002", b"m002"]  # the abort put m002 back
    assert left[0] == left[1]


def test_an_abort_puts_the_claimed_message_back_in_order(qm: QueueManager, connect: Connect) -> None:
    conn, q = consumer(qm, connect, [b"a", b"b", b"c"])
    with conn.transaction() as tx:
        assert q.receive(timeout=5, tx=tx).body == b"a"  # the commit takes b ahead
    tx = conn.transaction()
    assert q.receive(timeout=5, tx=tx).body == b"b"
    tx.abort()
    assert bodies(qm, TXQ) == [b"b", b"c"]
    for expected in (b"b", b"c"):
        with conn.transaction() as tx:
            assert q.receive(timeout=5, tx=tx).body == expected
    assert bodies(qm, TXQ) == []
    for end in ("commit", "abort"):  # a transaction ends once, as on the unary path
        with pytest.raises(MQError) as err:
            getattr(tx, end)()
        assert err.value.hresult == HResult.MQ_ERROR_TRANSACTION_SEQUENCE


def test_a_message_taken_ahead_is_given_back_before_anything_else(qm: QueueManager, connect: Connect) -> None:
    conn, q = consumer(qm, connect, [b"a", b"b", b"c"])
    with conn.transaction() as tx:
        q.receive(timeout=5, tx=tx)  # b is now taken ahead
    seen = q.peek(timeout=0)
    assert seen.body == b"b"  # the application sees the queue as it is
    assert seen.abort_count == 0  # given back, not aborted: no consumer failed on it
    other, oq = receiver(connect)
    with other.transaction() as tx:
        got = oq.receive(timeout=0, tx=tx)
        assert (got.body, got.abort_count) == (b"b", 0)


def test_a_message_taken_ahead_and_not_asked_for_goes_back_by_itself(
    qm: QueueManager, connect: Connect
) -> None:
    conn, q = consumer(qm, connect, [b"a", b"b"])
    with conn.transaction() as tx:
        q.receive(timeout=5, tx=tx)  # b taken ahead; this consumer then stops consuming
    other, oq = receiver(connect)
    with other.transaction() as tx:
        got = oq.receive(timeout=10, tx=tx)  # within grpc_steps.HOLD
        assert (got.body, got.abort_count) == (b"b", 0)
    assert bodies(qm, TXQ) == []


@pytest.mark.parametrize("kind", ["read", "start"])
def test_closing_the_connection_gives_back_the_message_taken_ahead_uncounted(
    qm: QueueManager, connect: Connect, kind: str
) -> None:
    fill(qm, TXQ, [b"a", b"b", b"c"])
    t = connect()
    h = t.open_queue(TXQ, Access.RECEIVE)
    tx = t.begin()
    if kind == "read":
        assert [m.body for m in t.read(h, tx=tx, max_count=1)] == [b"a"]
    else:  # the two-phase receive the asyncio client uses
        (p,) = t.start_receive_many(h, 1, tx=tx)
        t.end_receive_many(h, [p.request_id], Ack.ACK)
    t.commit(tx)  # b is now taken ahead, the application never saw it
    t.close()
    assert bodies(qm, TXQ) == [b"b", b"c"]  # back in place, in order
    other, oq = receiver(connect)
    for expected in (b"b", b"c"):
        with other.transaction() as otx:
            got = oq.receive(timeout=5, tx=otx)
            # Given back, not aborted: no consumer failed on it (poison handling counts
            # aborts), and nothing was delivered twice.
            assert (got.body, got.abort_count) == (expected, 0)
    assert bodies(qm, TXQ) == []


def test_a_claimed_message_of_a_closed_connection_counts_its_abort(
    qm: QueueManager, connect: Connect
) -> None:
    conn, q = consumer(qm, connect, [b"a", b"b"])
    with conn.transaction() as tx:
        q.receive(timeout=5, tx=tx)
    tx = conn.transaction()
    assert q.receive(timeout=5, tx=tx).body == b"b"  # the application has it now
    conn.close()  # its transaction never ended: the session's rundown aborts it
    other, oq = receiver(connect)
    with other.transaction() as otx:
        got = oq.receive(timeout=5, tx=otx)
        assert (got.body, got.abort_count) == (b"b", 1)


@pytest.mark.parametrize("mode", ["claim", "ahead", "batch-claim", "batch-ahead"])
def test_a_sigkilled_consumer_loses_nothing(qm: QueueManager, mode: str) -> None:
    everything = numbered(10)
    fill(qm, TXQ, everything)
    batch = 2 if mode.startswith("batch-") else 0  # the child's receive_many(2), or receive
    done = 4 if batch else 3
    with RemoteServer(qm, port=0, session_timeout=2.0) as srv:
        srv.start()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        child = subprocess.Popen(
            [sys.executable, str(CHILD), srv.target, TXQ, mode], stdout=subprocess.PIPE, text=True, env=env
        )
        try:
            assert child.stdout is not None
            committed_line = child.stdout.readline()
            holding = child.stdout.readline()
            assert committed_line.startswith("COMMITTED "), committed_line
            assert holding.startswith("HOLDING "), holding
            committed = [b.encode() for b in json.loads(committed_line.split(" ", 1)[1])]
            assert committed == everything[:done]
            # What the last commit took ahead (or the application claimed since) is
            # locked by the child's transaction.
            first = qm.peek(TXQ, timeout=0)
            assert first is not None and first.body == everything[done + (batch or 1)]
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(10)
        with openmsmq.connect(srv.target) as conn:
            q = conn.open_queue(TXQ, Access.RECEIVE)
            got: list[bytes] = []
            for _ in range(50):  # bounded; the rundown gives the held messages back
                try:
                    with conn.transaction() as tx:
                        got.extend(m.body for m in q.receive_many(batch or 1, timeout=1, tx=tx))
                except IOTimeoutError:
                    if len(got) >= 10 - done:
                        break
    assert got == everything[done:]  # nothing lost, nothing twice, in order
    assert bodies(qm, TXQ) == []


def test_two_threads_sharing_a_connection_receive_every_message_once(
    qm: QueueManager, connect: Connect
) -> None:
    fill(qm, TXQ, numbered(200))
    conn = Connection(connect())
    got: list[list[bytes]] = [[], []]

    def consume(i: int) -> None:
        q = conn.open_queue(TXQ, Access.RECEIVE)
        for _ in range(400):  # bounded
            try:
                with conn.transaction() as tx:
                    got[i].append(q.receive(timeout=0.5, tx=tx).body)
            except IOTimeoutError:
                return

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    everything = got[0] + got[1]
    assert sorted(everything) == numbered(200) and len(set(everything)) == 200
    assert bodies(qm, TXQ) == []


# ---- RR_ACKs held back for the commit -------------------------------------------------------------


def test_a_held_back_ack_that_fails_fails_the_commit_and_the_message_stays(qm: QueueManager) -> None:
    fill(qm, TXQ, [b"a"])
    with RemoteServer(qm, port=0, cleanup_timeout=300.0, session_timeout=3600.0) as srv:
        srv.start()
        t = GrpcTransport(srv.target)
        try:
            h = t.open_queue(TXQ, Access.RECEIVE)
            tx = t.begin()
            (p,) = t.start_receive_many(h, 1, tx=tx)
            assert t.end_receive_many(h, [p.request_id], Ack.ACK, True) == [0]  # held back
            # The Pending Request Cleanup Timer fires before the commit: the message is
            # put back (MS-MQRR 3.1.5), so the RR_ACK fails (seed 001 step 1: the handle
            # has no pending entry) and the commit must not run.
            srv.core.run_timers(srv.core.clock() + 400.0)
            with pytest.raises(MQError) as err:
                t.commit(tx)
            assert err.value.hresult == HResult.MQ_ERROR_INVALID_HANDLE
            assert bodies(qm, TXQ) == [b"a"]
            tx = t.begin()
            assert [m.body for m in t.read(h, tx=tx)] == [b"a"]
            t.commit(tx)
        finally:
            t.close()
    assert bodies(qm, TXQ) == []


def test_processing_longer_than_the_cleanup_timer_still_commits(
    qm: QueueManager, server: RemoteServer, connect: Connect
) -> None:
    """The fixture's cleanup timer is 0.3 s: the held-back RR_ACK goes out before it."""
    fill(qm, TXQ, [b"a", b"b"])
    t = connect()
    h = t.open_queue(TXQ, Access.RECEIVE)
    for expected in (b"a", b"b"):
        tx = t.begin()
        (p,) = t.start_receive_many(h, 1, tx=tx)
        assert p.message.body == expected
        t.end_receive_many(h, [p.request_id], Ack.ACK, True)
        threading.Event().wait(1.0)  # processing; the timer would have fired meanwhile
        t.commit(tx)
    assert bodies(qm, TXQ) == []


def test_a_receive_started_ahead_is_not_handed_out_after_its_cleanup_timer(
    qm: QueueManager, server: RemoteServer
) -> None:
    """The fixture's cleanup timer is 0.3 s: a message started ahead and asked for later
    has gone back; the receive takes it afresh and the commit succeeds."""
    fill(qm, TXQ, [b"a", b"b", b"c"])

    async def main() -> list[bytes]:
        conn = await aio.connect(server.target)
        q = await conn.open_queue(TXQ, Access.RECEIVE)
        got = []
        for _ in range(3):
            async with conn.transaction() as tx:
                got.append((await q.receive(timeout=5, tx=tx)).body)
            await asyncio.sleep(0.8)  # the application does something else meanwhile
        await conn.close()
        return got

    assert asyncio.run(main()) == [b"a", b"b", b"c"]
    assert bodies(qm, TXQ) == []


# ---- permissions, limits, typed errors -----------------------------------------------------------

TOKENS = """
reader-token-1  *=all
peeker-token-2  private$\\tx=peek
"""


@pytest.fixture
def metrics() -> Metrics:
    return Metrics()


@pytest.fixture
def guarded(qm: QueueManager, metrics: Metrics) -> Iterator[RemoteServer]:
    limits = RemoteLimits(max_batch_messages=10)
    srv = RemoteServer(qm, port=0, tokens=parse_tokens(TOKENS), limits=limits, metrics=metrics)
    srv.start()
    try:
        yield srv
    finally:
        srv.stop(grace=0.2)


def _raw_steps(
    srv: RemoteServer, metadata: tuple[tuple[str, str], ...], ops: list[pb.StepOp]
) -> pb.StepReply:
    with grpc.insecure_channel(f"127.0.0.1:{srv.port}") as ch:
        stub = pb_grpc.RemoteReadStub(ch)  # type: ignore[no-untyped-call]
        replies = stub.Steps(iter([pb.StepRequest(ops=ops)]), metadata=metadata)
        reply: pb.StepReply = next(replies)
        return reply


def test_a_session_is_used_only_by_its_own_token(qm: QueueManager, guarded: RemoteServer) -> None:
    fill(qm, TXQ, [b"a"])
    owner = GrpcTransport(guarded.target + "?token=reader-token-1")
    try:
        h = owner.open_queue(TXQ, Access.RECEIVE)
        read = pb.StepOp(read=pb.ReadRequest(handle=h, max_count=1, transaction=os.urandom(16)))
        md = (("authorization", "Bearer peeker-token-2"), (SESSION_KEY, owner.session_id))
        with pytest.raises(grpc.RpcError) as err:
            _raw_steps(guarded, md, [read])  # the stream is refused at its opening
        assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert error_from_rpc(err.value).hresult == HResult.MQ_ERROR_ACCESS_DENIED
        with pytest.raises(grpc.RpcError) as err:
            _raw_steps(guarded, ((SESSION_KEY, owner.session_id),), [read])
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert error_from_rpc(err.value).hresult == HResult.MQ_ERROR_ACCESS_DENIED
    finally:
        owner.close()
    assert bodies(qm, TXQ) == [b"a"]


def test_permissions_are_those_of_the_handle(qm: QueueManager, guarded: RemoteServer) -> None:
    fill(qm, TXQ, [b"a"])
    t = GrpcTransport(guarded.target + "?token=peeker-token-2")
    try:
        with pytest.raises(MQError) as err:
            t.open_queue(TXQ, Access.RECEIVE)
        assert err.value.hresult == HResult.MQ_ERROR_ACCESS_DENIED
        h = t.open_queue(TXQ, Access.PEEK)
        tx = t.begin()
        with pytest.raises(MQError) as err:
            t.read(h, tx=tx)  # over the step stream: a receive on a peek handle
        assert err.value.hresult == HResult.MQ_ERROR_ACCESS_DENIED
    finally:
        t.close()
    assert bodies(qm, TXQ) == [b"a"]


def test_limits_are_checked_before_any_op_runs(
    qm: QueueManager, guarded: RemoteServer, metrics: Metrics, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="openmsmq.remote")
    fill(qm, TXQ, numbered(20))
    t = GrpcTransport(guarded.target + "?token=reader-token-1")
    try:
        h = t.open_queue(TXQ, Access.RECEIVE)
        tx = t.begin()
        with pytest.raises(MQError) as err:
            t.read(h, tx=tx, max_count=11)  # remote.max_batch_messages is 10 here
        assert err.value.hresult == HResult.MQ_ERROR_INVALID_PARAMETER
        assert "remote.max_batch_messages" in str(err.value)
        refused = metrics.registry.get_sample_value(
            "openmsmq_refusals_total", {"rule": "remote.max_batch_messages"}
        )
        assert refused == 1  # counted and logged as the unary call's refusal is
        assert any("refused Read" in r.getMessage() for r in caplog.records)
        uow = os.urandom(16)
        ops = [pb.StepOp(read=pb.ReadRequest(handle=h, max_count=1, transaction=uow))] * (MAX_STEP_OPS + 1)
        md = (("authorization", "Bearer reader-token-1"), (SESSION_KEY, t.session_id))
        reply = _raw_steps(guarded, md, ops)
        assert [r.hresult for r in reply.results] == [HResult.MQ_ERROR_INVALID_PARAMETER]
        assert len(bodies(qm, TXQ)) == 20
        assert guarded.core.session(t.session_id).txs.get(uow) is None  # nothing ran
    finally:
        t.close()


def test_a_failed_op_ends_its_request_and_the_stream_goes_on(qm: QueueManager, connect: Connect) -> None:
    fill(qm, TXQ, [b"a"])
    t = connect()
    h = t.open_queue(TXQ, Access.RECEIVE)
    for _ in range(3):
        tx = t.begin()
        with pytest.raises(MQError) as err:
            t.read(h + 1000, tx=tx)
        assert err.value.hresult == HResult.MQ_ERROR_INVALID_HANDLE
        t.abort(tx)
    tx = t.begin()
    assert [m.body for m in t.read(h, tx=tx)] == [b"a"]
    t.commit(tx)


def test_a_server_without_the_step_stream_gets_unary_calls(
    qm: QueueManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def unimplemented(self: Any, request_iterator: Any, context: Any) -> None:
        await context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")

    monkeypatch.setattr(server_module._Servicer, "Steps", unimplemented)
    fill(qm, TXQ, numbered(4))
    calls = Calls(monkeypatch)
    with RemoteServer(qm, port=0) as srv:
        srv.start()
        with calls.connected(srv.target) as conn:
            q = conn.open_queue(TXQ, Access.RECEIVE)
            for expected in numbered(4):
                with conn.transaction() as tx:
                    assert q.receive(timeout=5, tx=tx).body == expected
    assert calls.counts["unary Read"] == 4 and calls.counts["unary Commit"] == 4
    assert bodies(qm, TXQ) == []
