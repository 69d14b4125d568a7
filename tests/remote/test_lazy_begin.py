"""GrpcTransport.begin() costs no round trip: the first call carrying the transaction
creates it on the server (MS-MQRR 3.1.4.13 step 6); the semantics stay those of an
explicit begin."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from openmsmq.client import Access, Ack, outgoing
from openmsmq.client.grpc_transport import GrpcTransport
from openmsmq.errors import HResult, MQError
from openmsmq.qm import QueueManager
from openmsmq.remote.server import RemoteServer

from .conftest import TXQ, bodies, fill

Connect = Callable[..., GrpcTransport]


def server_txs(server: RemoteServer, t: GrpcTransport) -> int:
    return len(server.core.session(t.session_id).txs)


def test_begin_is_local_until_a_call_carries_it(
    qm: QueueManager, server: RemoteServer, connect: Connect
) -> None:
    fill(qm, TXQ, [b"a", b"b"])
    t = connect(prefetch=False)  # a commit begins no next transaction ahead (test_steps.py)
    h = t.open_queue(TXQ, Access.RECEIVE)
    tx = t.begin()
    assert server_txs(server, t) == 0
    assert [m.body for m in t.read(h, tx=tx)] == [b"a"]
    assert server_txs(server, t) == 1
    t.commit(tx)
    assert server_txs(server, t) == 0
    assert bodies(qm, TXQ) == [b"b"]
    with pytest.raises(MQError) as e:
        t.commit(tx)
    assert e.value.hresult == HResult.MQ_ERROR_TRANSACTION_SEQUENCE


def test_unused_transaction_commits_and_aborts_once(qm: QueueManager, connect: Connect) -> None:
    t = connect()
    for end in (t.commit, t.abort):
        tx = t.begin()
        end(tx)
        for again in (t.commit, t.abort):
            with pytest.raises(MQError) as e:
                again(tx)
            assert e.value.hresult == HResult.MQ_ERROR_TRANSACTION_SEQUENCE


def test_send_creates_it_and_abort_drops_the_send(qm: QueueManager, connect: Connect) -> None:
    t = connect()
    h = t.open_queue(TXQ, Access.SEND)
    tx = t.begin()
    t.send(h, [outgoing(b"dropped")], tx=tx)
    t.abort(tx)
    tx2 = t.begin()
    t.send(h, [outgoing(b"kept")], tx=tx2)
    assert bodies(qm, TXQ) == []
    t.commit(tx2)
    assert bodies(qm, TXQ) == [b"kept"]


def test_a_failed_first_call_leaves_a_usable_transaction(
    qm: QueueManager, server: RemoteServer, connect: Connect
) -> None:
    t = connect()
    h = t.open_queue(TXQ, Access.RECEIVE)
    # Fails after the server created the transaction (nothing to receive) ...
    tx = t.begin()
    with pytest.raises(MQError) as e:
        t.read(h, tx=tx, timeout=0)
    assert e.value.hresult == HResult.MQ_ERROR_IO_TIMEOUT
    # ... or before (unknown handle): either way the server has it afterwards.
    tx2 = t.begin()
    with pytest.raises(MQError) as e:
        t.read(4242, tx=tx2)
    assert e.value.hresult == HResult.MQ_ERROR_INVALID_HANDLE
    assert server_txs(server, t) == 2
    fill(qm, TXQ, [b"a", b"b"])
    p = t.start_receive(h, tx=tx)
    t.end_receive(h, p.request_id, Ack.ACK)
    assert [m.body for m in t.read(h, tx=tx2)] == [b"b"]
    t.abort(tx2)
    t.commit(tx)
    assert bodies(qm, TXQ) == [b"b"]


def test_ack_class_in_an_unused_transaction_is_a_usage_error(connect: Connect) -> None:
    t = connect()
    tx = t.begin()
    with pytest.raises(MQError) as e:
        t.set_ack_class(tx, 1, 0xC004)
    assert e.value.hresult == HResult.MQ_ERROR_TRANSACTION_USAGE
    t.commit(tx)
