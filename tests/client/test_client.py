"""Sync client API over the in-process transport: every operation, errors, transactions."""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from pathlib import Path

import pytest

import openmsmq
from openmsmq.client import (
    SINGLE_MESSAGE,
    Access,
    Ack,
    AckRequest,
    Connection,
    Message,
    ReadAction,
    Seek,
    ShareMode,
    TransactionId,
    connect,
)
from openmsmq.client.inproc import InProcessTransport
from openmsmq.errors import (
    AccessDeniedError,
    ConfigError,
    HResult,
    IOTimeoutError,
    MessageNotFoundError,
    MQError,
    QueueNotFoundError,
    TransactionUsageError,
)
from openmsmq.qm import QueueManager

Q = "private$\\plain"
TQ = "private$\\orders"


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[Connection]:
    with connect(tmp_path / "data") as c:
        c.create_queue(Q)
        c.create_queue(TQ, transactional=True, label="orders")
        yield c


def texts(ms: list[Message]) -> list[str]:
    return [m.text for m in ms]


def test_connect_targets(tmp_path: Path) -> None:
    with openmsmq.connect(f"file://{tmp_path / 'd'}") as c:
        assert isinstance(c.transport, InProcessTransport)
        c.create_queue(Q)
    # the same directory as a plain path sees the queue
    with openmsmq.connect(tmp_path / "d") as c:
        assert [q.path for q in c.list_queues()] == [Q]
    with pytest.raises(ConfigError):
        connect("ftp://x/y")
    # the network transport reports a server nobody runs as an unreachable machine
    from openmsmq.client.grpc_transport import GrpcTransport

    with pytest.raises(MQError) as err:
        GrpcTransport("grpc://127.0.0.1:1", connect_timeout=0.5)
    assert err.value.hresult == HResult.MQ_ERROR_REMOTE_MACHINE_NOT_AVAILABLE


def test_connections_share_one_queue_manager(tmp_path: Path) -> None:
    a = connect(tmp_path / "d")
    b = connect(str(tmp_path / "d"))
    assert isinstance(a.transport, InProcessTransport) and isinstance(b.transport, InProcessTransport)
    assert a.transport.qm is b.transport.qm
    a.close()
    b.create_queue(Q)  # still open after the first connection closed
    b.close()


def test_external_queue_manager_is_not_closed(tmp_path: Path) -> None:
    with QueueManager(tmp_path / "d") as qm:
        with connect(InProcessTransport(qm=qm)) as c:
            c.create_queue(Q)
        assert qm.get_queue(Q).msg_count == 0  # qm still usable


def test_send_receive_message_view(conn: Connection) -> None:
    q = conn.open_queue(Q)
    r = q.send(
        "héllo",
        label="greet",
        priority=5,
        correlation_id=b"\x01" * 20,
        app_specific=7,
        ack=AckRequest.POS_RECEIVE,
        admin_queue="private$\\admin",
        response_queue="private$\\resp",
    )
    assert r.lookup_id > 0 and r.message_id.startswith("{") and r.message_id.endswith("}\\1")
    m = q.peek(timeout=0)
    assert m.lookup_id == r.lookup_id and m.message_id == r.message_id
    assert m.text == "héllo" and m.body == "héllo".encode()
    assert m.label == "greet" and m.priority == 5 and m.app_specific == 7
    assert m.correlation_id == b"\x01" * 20
    assert m.class_name == "NORMAL" and m.message_class == 0
    assert m.ack == AckRequest.POS_RECEIVE
    assert m.admin_queue == "private$\\admin" and m.response_queue == "private$\\resp"
    assert m.queue == Q and not m.transactional
    assert m.sent_at is not None and m.arrived_at is not None
    assert m.to_dict()["body"] == "héllo"
    assert pickle.loads(pickle.dumps(m)) == m
    got = q.receive(timeout=0)
    assert got == m
    with pytest.raises(IOTimeoutError) as e:
        q.receive(timeout=0.01)
    assert e.value.hresult == HResult.MQ_ERROR_IO_TIMEOUT


def test_an_in_process_receive_sends_the_administration_acknowledgment(conn: Connection) -> None:
    # With the queue manager stopped the client opens the store itself; a receive still
    # raises the acknowledgment the message asked for (MS-MQQB 3.1.7.2.1), as under serve.
    conn.create_queue("private$\\admin")
    q = conn.open_queue(Q)
    r = q.send(b"x", ack=AckRequest.POS_RECEIVE, admin_queue="private$\\admin")
    q.receive(timeout=0)
    (ack,) = conn.open_queue("private$\\admin").peek_many(10)
    assert ack.class_name == "ACK_RECEIVE"
    # CorrelationId: the received message's Identifier (QM GUID, then its uniquifier).
    assert ack.correlation_id[16:] == int(r.message_id.rsplit("\\", 1)[1]).to_bytes(4, "little")


def test_priority_order_and_batches(conn: Connection) -> None:
    q = conn.open_queue(Q)
    receipts = q.send_many([b"a", b"b", "c"])
    assert len({r.message_id for r in receipts}) == 3
    q.send(b"urgent", priority=7)
    assert texts(q.peek_many(10)) == ["urgent", "a", "b", "c"]
    assert texts(q.receive_many(2, timeout=0)) == ["urgent", "a"]
    assert texts(q.receive_many(10, timeout=0)) == ["b", "c"]
    with pytest.raises(IOTimeoutError):
        q.receive_many(10, timeout=0)


def test_iter_receive_batches(conn: Connection) -> None:
    q = conn.open_queue(Q)
    q.send_many([str(i) for i in range(25)])
    got = [m.text for m in q.iter_receive(batch=10, timeout=0)]
    assert got == [str(i) for i in range(25)]
    assert q.info().message_count == 0


def test_unknown_property_and_bad_values(conn: Connection) -> None:
    q = conn.open_queue(Q)
    with pytest.raises(MQError) as e:
        q.send(b"x", colour="red")
    assert e.value.hresult == HResult.MQ_ERROR_ILLEGAL_PROPID
    with pytest.raises(MQError) as e:
        q.send(b"x", correlation_id=bytes(21))
    assert e.value.hresult == HResult.MQ_ERROR_ILLEGAL_PROPERTY_SIZE
    with pytest.raises(MQError) as e:
        q.send(b"x", priority=9)
    assert e.value.hresult == HResult.MQ_ERROR_ILLEGAL_PROPERTY_VALUE


def test_transaction_commit_and_abort(conn: Connection) -> None:
    q = conn.open_queue(TQ)
    with conn.transaction() as tx:
        q.send(b"1", tx=tx)
        q.send_many([b"2", b"3"], tx=tx)
        assert q.info().message_count == 0  # not visible before commit
    assert tx.state == "committed"
    msgs = q.peek_many(10)
    assert texts(msgs) == ["1", "2", "3"]
    assert msgs[0].first_in_transaction and msgs[-1].last_in_transaction and msgs[0].transactional
    tx2 = conn.transaction()
    assert texts(q.receive_many(2, timeout=0, tx=tx2)) == ["1", "2"]
    q.send(b"4", tx=tx2)
    tx2.abort()
    assert texts(q.peek_many(10)) == ["1", "2", "3"]  # received ones back in place, send dropped
    with pytest.raises(MQError) as e:
        tx2.commit()
    assert e.value.hresult == HResult.MQ_ERROR_TRANSACTION_SEQUENCE


def test_transaction_context_aborts_on_exception(conn: Connection) -> None:
    q = conn.open_queue(TQ)
    q.send(b"keep", tx=SINGLE_MESSAGE)

    class Boom(Exception):
        pass

    with pytest.raises(Boom), conn.transaction() as tx:
        assert q.receive(timeout=0, tx=tx).text == "keep"
        q.send(b"dropped", tx=tx)
        raise Boom
    assert tx.state == "aborted"
    assert texts(q.peek_many(10)) == ["keep"]


def test_transaction_usage_errors(conn: Connection) -> None:
    plain, txq = conn.open_queue(Q), conn.open_queue(TQ)
    with pytest.raises(TransactionUsageError):
        txq.send(b"x")  # transactional queue needs a transaction
    with conn.transaction() as tx:
        with pytest.raises(TransactionUsageError):
            plain.send(b"x", tx=tx)
        with pytest.raises(TransactionUsageError):
            plain.receive(timeout=0, tx=tx)
    txq.send(b"x", tx=SINGLE_MESSAGE)
    with conn.transaction() as tx, pytest.raises(TransactionUsageError):
        conn.transport.read(txq.handle, ReadAction.PEEK_CURRENT, tx=tx.id)


def test_single_message_receipt_has_lookup_id(conn: Connection) -> None:
    q = conn.open_queue(TQ)
    r1, r2 = q.send_many([b"a", b"b"], tx=SINGLE_MESSAGE)
    assert 0 < r1.lookup_id < r2.lookup_id
    assert q.receive(timeout=0, tx=SINGLE_MESSAGE).lookup_id == r1.lookup_id


def test_cursor_browse_and_receive(conn: Connection) -> None:
    q = conn.open_queue(Q)
    q.send_many([b"a", b"b", b"c", b"d"])
    with q.cursor() as c:
        assert c.peek_current().text == "a"
        assert c.peek_current().text == "a"
        assert c.peek_next().text == "b"
        assert c.receive_current().text == "b"
        assert c.peek_current().text == "c"
        assert texts(c.peek_many(10)) == ["c", "d"]
        with pytest.raises(IOTimeoutError):
            c.peek_next(timeout=0.01)
    with q.cursor() as c2:
        assert [m.text for m in c2] == ["a", "c", "d"]
    with pytest.raises(MQError) as e:
        conn.transport.read(q.handle, ReadAction.PEEK_NEXT)
    assert e.value.hresult == HResult.MQ_ERROR_ILLEGAL_CURSOR_ACTION
    with pytest.raises(MQError) as e:
        conn.transport.close_cursor(q.handle, 999)
    assert e.value.hresult == HResult.MQ_ERROR_INVALID_HANDLE


def test_lookup_actions(conn: Connection) -> None:
    q = conn.open_queue(Q)
    ids = [r.lookup_id for r in (q.send(b) for b in (b"a", b"b", b"c"))]
    a, b, c = ids
    assert q.peek_by_lookup_id(b).text == "b"
    assert q.peek_by_lookup_id(b, Seek.NEXT).text == "c"
    assert q.peek_by_lookup_id(b, Seek.PREV).text == "a"
    assert q.peek_by_lookup_id(0, Seek.FIRST).text == "a"
    assert q.peek_by_lookup_id(0, Seek.LAST).text == "c"
    with pytest.raises(MessageNotFoundError):
        q.peek_by_lookup_id(c, Seek.NEXT)
    assert q.receive_by_lookup_id(b).text == "b"
    with pytest.raises(MessageNotFoundError):
        q.peek_by_lookup_id(b)
    assert q.receive_by_lookup_id(a, Seek.NEXT).text == "c"
    assert q.receive_by_lookup_id(0, Seek.LAST).text == "a"
    with pytest.raises(MQError) as e:
        conn.transport.read(q.handle, ReadAction.LOOKUP_PEEK_CURRENT, lookup_id=1, max_count=2)
    assert e.value.hresult == HResult.MQ_ERROR_INVALID_PARAMETER


def test_lookup_receive_in_transaction(conn: Connection) -> None:
    q = conn.open_queue(TQ)
    (r,) = q.send_many([b"x"], tx=SINGLE_MESSAGE)
    with conn.transaction() as tx:
        assert q.receive_by_lookup_id(r.lookup_id, tx=tx).text == "x"
        tx.abort()
    assert q.peek_by_lookup_id(r.lookup_id).text == "x"


def test_two_phase_receive_ack_nack(conn: Connection) -> None:
    q = conn.open_queue(Q)
    q.send_many([b"a", b"b"])
    p = q.start_receive(timeout=0)
    assert p.message.text == "a"
    assert q.peek(timeout=0).text == "b"  # the locked one is not visible
    q.end_receive(p, Ack.NACK)
    assert q.peek(timeout=0).text == "a"
    p = q.start_receive(timeout=0)
    q.end_receive(p, Ack.ACK)
    assert texts(q.peek_many(10)) == ["b"]
    with pytest.raises(MQError) as e:
        q.end_receive(p)
    assert e.value.hresult == HResult.MQ_ERROR_INVALID_HANDLE  # nothing pending on the handle


def test_two_phase_in_transaction_and_close_rundown(conn: Connection) -> None:
    q = conn.open_queue(TQ)
    q.send_many([b"a", b"b"], tx=SINGLE_MESSAGE)
    with conn.transaction() as tx:
        p = q.start_receive(timeout=0, tx=tx)
        q.end_receive(p, Ack.ACK)  # removal decided by commit
    assert texts(q.peek_many(10)) == ["b"]
    other = conn.open_queue(TQ)
    other.start_receive(timeout=0)
    assert q.info().message_count == 1
    with pytest.raises(IOTimeoutError):
        q.peek(timeout=0)
    other.close()  # pending receive is NACKed on close
    assert q.peek(timeout=0).text == "b"


def test_receiving_context_manager(conn: Connection) -> None:
    q = conn.open_queue(Q)
    q.send(b"job")
    with pytest.raises(RuntimeError), q.receiving(timeout=0) as m:
        assert m.text == "job"
        raise RuntimeError("processing failed")
    with q.receiving(timeout=0) as m:
        assert m.text == "job"
    with pytest.raises(IOTimeoutError):
        q.peek(timeout=0)


def test_reject_in_transaction(conn: Connection) -> None:
    q = conn.open_queue(TQ)
    q.send(b"bad", tx=SINGLE_MESSAGE)
    with conn.transaction() as tx:
        m = q.receive(timeout=0, tx=tx)
        q.reject(m, tx)
    assert q.info().message_count == 0


def test_access_and_share_modes(conn: Connection) -> None:
    send_only = conn.open_queue(Q, Access.SEND)
    send_only.send(b"x")
    with pytest.raises(AccessDeniedError):
        send_only.receive(timeout=0)
    with pytest.raises(AccessDeniedError):
        send_only.purge()
    peek_only = conn.open_queue(Q, Access.PEEK)
    assert peek_only.peek(timeout=0).text == "x"
    with pytest.raises(AccessDeniedError):
        peek_only.receive(timeout=0)
    with pytest.raises(AccessDeniedError):
        peek_only.send(b"y")
    # a receiver exists (DENY_NONE + RECEIVE via the default access): deny-receive fails
    conn.open_queue(Q)
    with pytest.raises(MQError) as e:
        conn.open_queue(Q, Access.RECEIVE, ShareMode.DENY_RECEIVE)
    assert e.value.hresult == HResult.MQ_ERROR_SHARING_VIOLATION
    exclusive = conn.open_queue(TQ, Access.RECEIVE, ShareMode.DENY_RECEIVE)
    with pytest.raises(MQError) as e:
        conn.open_queue(TQ, Access.RECEIVE)
    assert e.value.hresult == HResult.MQ_ERROR_SHARING_VIOLATION
    conn.open_queue(TQ, Access.SEND).close()  # senders are not affected
    exclusive.close()
    conn.open_queue(TQ, Access.RECEIVE).close()
    with pytest.raises(MQError) as e:
        conn.open_queue(Q, Access.SEND, ShareMode.DENY_RECEIVE)
    assert e.value.hresult == HResult.MQ_ERROR_UNSUPPORTED_ACCESS_MODE


def test_purge_and_queue_admin(conn: Connection) -> None:
    q = conn.open_queue(Q)
    q.send_many([b"1", b"2", b"3"])
    assert q.purge() == 3
    assert q.info().message_count == 0
    info = conn.queue_info(TQ)
    assert info.transactional and info.label == "orders" and info.kind == "private"
    assert conn.create_queue(TQ, exist_ok=True).path == TQ
    with pytest.raises(MQError) as e:
        conn.create_queue(TQ)
    assert e.value.hresult == HResult.MQ_ERROR_QUEUE_EXISTS
    conn.delete_queue(TQ)
    assert [i.path for i in conn.list_queues()] == [Q]
    assert any(i.kind == "system" for i in conn.list_queues(include_system=True))


def test_errors_propagate(conn: Connection) -> None:
    with pytest.raises(QueueNotFoundError) as nf:
        conn.open_queue("private$\\nope")
    assert nf.value.hresult == HResult.MQ_ERROR_QUEUE_NOT_FOUND
    with pytest.raises(MQError) as e:
        conn.open_queue("public$\\x")
    assert e.value.hresult == HResult.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME
    with pytest.raises(MQError) as e:
        conn.transport.read(12345)
    assert e.value.hresult == HResult.MQ_ERROR_INVALID_HANDLE
    with pytest.raises(MQError) as e:
        conn.transport.commit(TransactionId())
    assert e.value.hresult == HResult.MQ_ERROR_TRANSACTION_SEQUENCE
    err = pickle.loads(pickle.dumps(MQError(HResult.MQ_ERROR_QUEUE_NOT_FOUND, "x")))
    assert isinstance(err, QueueNotFoundError)


def test_remote_queue_is_send_only(conn: Connection) -> None:
    name = "DIRECT=TCP:10.9.9.9\\private$\\far"
    with pytest.raises(MQError) as e:
        conn.open_queue(name, Access.RECEIVE)
    assert e.value.hresult in (
        HResult.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION,
        HResult.MQ_ERROR_QUEUE_NOT_FOUND,
    )
    far = conn.open_queue(name, Access.SEND)
    far.send(b"x", tx=SINGLE_MESSAGE)
    outgoing = [i for i in conn.list_queues(include_system=True) if i.kind == "outgoing"]
    assert len(outgoing) == 1 and outgoing[0].message_count == 1


def test_closed_connection_aborts_open_transactions(tmp_path: Path) -> None:
    c = connect(tmp_path / "d")
    c.create_queue(TQ, transactional=True)
    q = c.open_queue(TQ)
    q.send(b"x", tx=SINGLE_MESSAGE)
    tx = c.transaction()
    q.receive(timeout=0, tx=tx)
    c2 = connect(tmp_path / "d")  # keeps the QM open across c.close()
    c.close()
    with pytest.raises(MQError) as e:
        q.peek(timeout=0)
    assert e.value.hresult == HResult.MQ_ERROR_SERVICE_NOT_AVAILABLE
    assert c2.open_queue(TQ).peek(timeout=0).text == "x"
    c2.close()


def test_blocking_receive_wakes_on_send(conn: Connection) -> None:
    import threading

    q = conn.open_queue(Q)
    got: list[str] = []
    t = threading.Thread(target=lambda: got.append(q.receive(timeout=30).text))
    t.start()
    conn.open_queue(Q, Access.SEND).send(b"wake")
    t.join(timeout=30)
    assert got == ["wake"]


def test_client_package_exports_resolve_lazily() -> None:
    # openmsmq.client imports its modules on first use (PEP 562): every exported name
    # resolves, to the object of the module that defines it.
    import openmsmq.client as client
    from openmsmq.client import connection, types
    from openmsmq.store.records import INFINITE as STORE_INFINITE

    assert {n for names in client._SUBMODULE_NAMES.values() for n in names} == set(client.__all__)
    for name in client.__all__:
        assert getattr(client, name) is not None, name
    assert client.connect is connection.connect
    assert client.INFINITE == types.INFINITE == STORE_INFINITE == 0xFFFFFFFF
    with pytest.raises(AttributeError):
        client.no_such_name  # noqa: B018


def test_a_send_in_a_transaction_asks_for_negative_source_journaling_by_default(conn: Connection) -> None:
    """``dead_letter`` left unset is on for a send in a transaction and off otherwise (the
    property is honoured either way when given)."""
    with conn.open_queue(TQ, Access.SEND | Access.PEEK) as q:
        with conn.transaction() as tx:
            q.send(b"default", tx=tx)
            q.send(b"off", tx=tx, dead_letter=False)
        q.send_many([b"single"], tx=SINGLE_MESSAGE)
        assert [(m.body, m.dead_letter) for m in q.peek_many(5)] == [
            (b"default", True),
            (b"off", False),
            (b"single", True),
        ]
    with conn.open_queue(Q, Access.SEND | Access.PEEK) as q:
        q.send(b"plain")
        q.send(b"on", dead_letter=True)
        assert [(m.body, m.dead_letter) for m in q.peek_many(5)] == [(b"plain", False), (b"on", True)]
