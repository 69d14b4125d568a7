"""Each step stream runs its requests in a thread of its own (openmsmq.remote.stream_worker),
up to the server's ``stream_workers``; streams beyond it use the shared worker pools. The
thread ends with its stream, a waiting receive in it stops when its client goes, and the
consumer loop keeps its semantics either way."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from openmsmq.client.grpc_transport import GrpcTransport
from openmsmq.errors import MQError
from openmsmq.qm import QueueManager
from openmsmq.remote import steps
from openmsmq.remote.server import RemoteServer

from .conftest import TXQ, bodies, fill

Connect = Callable[..., GrpcTransport]

#: Python calls the service may make per transaction of the consumer loop (commit + the
#: next receive in one step request), in its event loop and worker threads. Each request
#: handed to the shared pools (``run_in_executor``) took about a third more than in the
#: stream's own thread, and the standard event loop runs in Python what uvloop (the
#: default where it can be imported) runs in C: the budget holds neither.
SERVER_CALL_BUDGET = 150


@pytest.fixture
def ran_in(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The name of the server thread that ran each step request."""
    names: list[str] = []
    real = steps.run_steps

    def recorded(*args: Any) -> Any:
        names.append(threading.current_thread().name)
        return real(*args)

    monkeypatch.setattr(steps, "run_steps", recorded)
    return names


def _until(check: Callable[[], bool], within: float = 10.0) -> bool:
    """Poll ``check`` (a bounded wait, not a timing assertion)."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        if check():
            return True
        time.sleep(0.02)
    return check()


def _consume(t: GrpcTransport, n: int) -> list[bytes]:
    h = t.open_queue(TXQ, access=1)  # type: ignore[arg-type]
    got = []
    for _ in range(n):
        tx = t.begin()
        got.append(t.read(h, timeout=5.0, tx=tx)[0].body)
        t.commit(tx)
    return got


def test_a_stream_runs_its_requests_in_one_thread_of_its_own(
    qm: QueueManager, server: RemoteServer, connect: Connect, ran_in: list[str]
) -> None:
    fill(qm, TXQ, [b"a", b"b", b"c", b"d"])
    t = connect()
    assert _consume(t, 4) == [b"a", b"b", b"c", b"d"]
    assert ran_in, "the loop went over the step stream"
    assert len(set(ran_in)) == 1 and ran_in[0].startswith("openmsmq-rr-stream-"), ran_in
    assert server.stream_workers.live == 1
    assert bodies(qm, TXQ) == []


def test_the_thread_ends_with_its_stream(qm: QueueManager, server: RemoteServer, connect: Connect) -> None:
    fill(qm, TXQ, [b"a", b"b"])
    t = connect()
    assert _consume(t, 1) == [b"a"]
    assert server.stream_workers.live == 1
    t.close()  # gives back b"b", taken ahead by the commit, then ends the stream
    assert _until(lambda: server.stream_workers.live == 0)
    assert bodies(qm, TXQ) == [b"b"]
    assert qm.peek_range(TXQ, 0, 10)[0].abort_count == 0  # given back uncounted


@pytest.fixture
def one_thread_server(qm: QueueManager) -> Iterator[RemoteServer]:
    srv = RemoteServer(qm, port=0, cleanup_timeout=0.3, session_timeout=5.0, stream_workers=1).start()
    try:
        yield srv
    finally:
        srv.stop(grace=0.2)


def test_streams_beyond_the_bound_use_the_worker_pools(
    qm: QueueManager, one_thread_server: RemoteServer, ran_in: list[str]
) -> None:
    fill(qm, TXQ, [f"m{i}".encode() for i in range(6)])
    first = GrpcTransport(one_thread_server.target, prefetch=False)
    second = GrpcTransport(one_thread_server.target, prefetch=False)
    try:
        got = _consume(first, 3)
        mark = len(ran_in)
        got += _consume(second, 3)
        assert sorted(got) == [f"m{i}".encode() for i in range(6)]
        assert {n.startswith("openmsmq-rr-stream-") for n in ran_in[:mark]} == {True}
        pools = ("openmsmq-rr_", "openmsmq-rr-wait_")
        assert {n.startswith(pools) for n in ran_in[mark:]} == {True}, ran_in[mark:]
        assert one_thread_server.stream_workers.live == 1
        assert one_thread_server.stream_workers.started == 1
    finally:
        first.close()
        second.close()
    assert _until(lambda: one_thread_server.stream_workers.live == 0)
    assert bodies(qm, TXQ) == []


def test_a_waiting_receive_stops_when_its_stream_is_cancelled(
    qm: QueueManager, server: RemoteServer, connect: Connect, ran_in: list[str]
) -> None:
    t = connect()
    h = t.open_queue(TXQ, access=1)  # type: ignore[arg-type]
    failed: list[BaseException] = []

    def wait() -> None:
        tx = t.begin()
        try:
            t.read(h, timeout=60.0, tx=tx)
        except MQError as exc:
            failed.append(exc)

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    assert _until(lambda: len(ran_in) == 1 and server.stream_workers.live == 1)
    t._steps.drop()  # the client cancels its stream (as a client that is gone)
    waiter.join(30.0)
    assert not waiter.is_alive() and failed
    # The wait inside the queue manager stops (the stream's cancellation) and the thread ends.
    assert _until(lambda: server.stream_workers.live == 0)
    fill(qm, TXQ, [b"later"])
    assert bodies(qm, TXQ) == [b"later"]


def test_commits_of_concurrent_clients_share_one_fsync(
    qm: QueueManager, server: RemoteServer, connect: Connect
) -> None:
    """Eight clients' commits, each in its stream's thread, arriving while the store is in
    a batch, go into the next batch together: one COMMIT (one fsync) for the eight."""
    fill(qm, TXQ, [f"m{i}".encode() for i in range(8)])
    clients = [connect() for _ in range(8)]
    txs = []
    for t in clients:
        h = t.open_queue(TXQ, access=1)  # type: ignore[arg-type]
        tx = t.begin()
        assert len(t.read(h, timeout=5.0, tx=tx)) == 1
        txs.append(tx)
    entered, release = threading.Event(), threading.Event()

    def hold(_ctx: Any) -> None:  # a store batch that lasts until the commits queue behind it
        entered.set()
        release.wait(30.0)

    holder = threading.Thread(target=qm.store.write, args=(hold,), daemon=True)
    holder.start()
    assert entered.wait(10.0)
    batches = qm.store.stats.batches
    pairs = zip(clients, txs, strict=True)
    committers = [threading.Thread(target=t.commit, args=(tx,), daemon=True) for t, tx in pairs]
    for c in committers:
        c.start()
    try:
        store: Any = qm.store  # the SQLite store's queue of operations behind the batch
        assert _until(lambda: len(store._pending) == 8)
    finally:
        release.set()
    for c in [holder, *committers]:
        c.join(30.0)
        assert not c.is_alive()
    assert qm.store.stats.batches - batches == 2  # the holder's batch, then one for the eight
    assert bodies(qm, TXQ) == []


def test_python_calls_per_transaction_of_the_consumer_loop_in_the_service(qm: QueueManager) -> None:
    """The interpreter's work per transaction in the service's threads (the event loop,
    the pools, the stream threads), counted, so the machine's load does not move it."""
    fill(qm, TXQ, [bytes(256)] * 300)
    count = [0]
    counting = [False]
    service: dict[int, bool] = {}

    def profile(_frame: Any, event: str, _arg: Any) -> None:
        if event != "call" or not counting[0]:
            return
        ident = threading.get_ident()
        mine = service.get(ident)
        if mine is None:
            name = threading.current_thread().name
            mine = service[ident] = name.startswith(("openmsmq-remote", "openmsmq-rr"))
        if mine:
            count[0] += 1

    threading.setprofile(profile)  # every thread started from here on: the service's included
    try:
        srv = RemoteServer(qm, port=0, cleanup_timeout=0.3, session_timeout=5.0).start()
        try:
            t = GrpcTransport(srv.target)
            try:
                h = t.open_queue(TXQ, access=1)  # type: ignore[arg-type]
                for i in range(250):  # 50 first: the stream open, a receive taken ahead
                    counting[0] = i >= 50
                    tx = t.begin()
                    assert len(t.read(h, timeout=5.0, tx=tx)) == 1
                    t.commit(tx)
                counting[0] = False
            finally:
                t.close()
        finally:
            srv.stop(grace=0.2)
    finally:
        threading.setprofile(None)
    per_transaction = count[0] / 200
    assert per_transaction <= SERVER_CALL_BUDGET, f"{per_transaction:.1f} Python calls per transaction"


def test_the_service_serves_on_the_standard_event_loop_too(qm: QueueManager, ran_in: list[str]) -> None:
    """``event_loop=asyncio.new_event_loop`` (``qm.event_loop = asyncio``, or no uvloop)."""
    fill(qm, TXQ, [b"a", b"b", b"c"])
    srv = RemoteServer(qm, port=0, event_loop=asyncio.new_event_loop).start()
    try:
        t = GrpcTransport(srv.target)
        try:
            assert _consume(t, 3) == [b"a", b"b", b"c"]
        finally:
            t.close()
        assert ran_in and {n.startswith("openmsmq-rr-stream-") for n in ran_in} == {True}
    finally:
        srv.stop(grace=0.2)
    assert bodies(qm, TXQ) == []
