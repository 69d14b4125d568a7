"""The service end to end through GrpcTransport: MS-MQRR semantics, typed errors, auth, TLS."""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from openmsmq.client import SINGLE_MESSAGE, Access, Ack, ReadAction, ShareMode, TransactionId, outgoing
from openmsmq.client import connect as api_connect
from openmsmq.client.grpc_transport import GrpcTransport
from openmsmq.errors import AccessDeniedError, HResult, MessageNotFoundError, MQError, StorageError
from openmsmq.qm import QueueManager
from openmsmq.remote.auth import parse_tokens
from openmsmq.remote.server import RemoteServer

from .conftest import PLAINQ, TXQ, bodies, fill

Connect = Callable[..., GrpcTransport]
RW = Access.RECEIVE | Access.SEND


def hr(exc: pytest.ExceptionInfo[MQError]) -> HResult:
    return HResult(exc.value.hresult)


# ---- R_EndTransactionalReceive over the network ---------------------------------------------


def test_nack_then_receive_again_returns_the_same_message(qm: QueueManager, connect: Connect) -> None:
    fill(qm, TXQ, [b"a", b"b"])
    t = connect()
    h = t.open_queue(TXQ, Access.RECEIVE)
    tx = t.begin()
    first = t.start_receive(h, tx=tx)
    t.end_receive(h, first.request_id, Ack.NACK)
    again = t.start_receive(h, tx=tx)
    assert again.message.message_id == first.message.message_id
    assert again.message.body == b"a"
    t.end_receive(h, again.request_id, Ack.ACK)
    t.commit(tx)
    assert bodies(qm, TXQ) == [b"b"]


def test_ack_then_abort_returns_it_and_ack_then_commit_removes_it_once(
    qm: QueueManager, connect: Connect
) -> None:
    fill(qm, TXQ, [b"a"])
    t = connect()
    h = t.open_queue(TXQ, Access.RECEIVE)
    tx = t.begin()
    p = t.start_receive(h, tx=tx)
    t.end_receive(h, p.request_id, Ack.ACK)
    assert bodies(qm, TXQ) == [b"a"]  # not before commit
    t.abort(tx)
    tx2 = t.begin()
    p2 = t.start_receive(h, tx=tx2)
    assert p2.message.message_id == p.message.message_id
    t.end_receive(h, p2.request_id, Ack.ACK)
    t.commit(tx2)
    assert bodies(qm, TXQ) == []
    with pytest.raises(MQError) as e:
        t.commit(tx2)
    assert hr(e) == HResult.MQ_ERROR_TRANSACTION_SEQUENCE
    with pytest.raises(MQError) as e:
        t.read(h, timeout=0)
    assert hr(e) == HResult.MQ_ERROR_IO_TIMEOUT


def test_seed_001_error_steps_reach_the_client_typed(qm: QueueManager, connect: Connect) -> None:
    fill(qm, TXQ, [b"a", b"b"])
    t = connect()
    h = t.open_queue(TXQ, Access.RECEIVE)
    # step 1: no PendingRequestEntry for the handle
    with pytest.raises(MQError) as e:
        t.end_receive(h, 1, Ack.ACK)
    assert hr(e) == HResult.MQ_ERROR_INVALID_HANDLE
    tx = t.begin()
    p = t.start_receive(h, tx=tx)
    # step 2: {handle, request id} unknown
    with pytest.raises(MQError) as e:
        t.end_receive(h, p.request_id + 1000, Ack.ACK)
    assert hr(e) == HResult.MQ_ERROR_INVALID_PARAMETER
    # step 6: the message left with its committed transaction
    t.commit(tx)
    with pytest.raises(MessageNotFoundError):
        t.end_receive(h, p.request_id, Ack.ACK)
    assert bodies(qm, TXQ) == [b"b"]


def test_end_receive_methods_over_the_network(qm: QueueManager, connect: Connect) -> None:
    """EndReceive names R_EndReceive or R_EndTransactionalReceive; the client's queue ends
    each pending receive with the method that matches how it started."""
    fill(qm, PLAINQ, [b"p"])
    t = connect()
    h = t.open_queue(PLAINQ, Access.RECEIVE)
    p = t.start_receive(h)
    assert not p.transactional
    with pytest.raises(MQError) as e:
        t.end_receive(h, p.request_id, Ack.ACK, transactional=True)
    assert hr(e) == HResult.MQ_ERROR_TRANSACTION_USAGE
    assert bodies(qm, PLAINQ) == [b"p"]
    t.end_receive(h, p.request_id, Ack.ACK, transactional=False)
    assert bodies(qm, PLAINQ) == []
    fill(qm, TXQ, [b"t"])
    with api_connect(t) as conn, conn.open_queue(TXQ, Access.RECEIVE) as q:
        with conn.transaction() as tx:
            pending = q.start_receive(timeout=5, tx=tx)
            assert pending.transactional
            q.end_receive(pending)  # R_EndTransactionalReceive: removed at commit
            assert bodies(qm, TXQ) == [b"t"]
        assert bodies(qm, TXQ) == []


def test_batched_two_phase_receive_with_per_message_ack_and_nack(qm: QueueManager, connect: Connect) -> None:
    fill(qm, TXQ, [bytes([i]) for i in range(10)])
    t = connect()
    h = t.open_queue(TXQ, Access.RECEIVE)
    tx = t.begin()
    got = t.start_receive_many(h, 10, tx=tx)
    assert [p.message.body for p in got] == [bytes([i]) for i in range(10)]
    ids = [p.request_id for p in got]
    assert t.end_receive_many(h, ids[::2], Ack.ACK) == [0] * 5
    # The handle's last entry goes with the fifth NACK: 999999 then fails step 1, not step 2.
    statuses = t.end_receive_many(h, [*ids[1::2], 999_999], Ack.NACK)
    assert statuses == [0] * 5 + [HResult.MQ_ERROR_INVALID_HANDLE]
    t.commit(tx)
    assert bodies(qm, TXQ) == [bytes([i]) for i in range(1, 10, 2)]


def test_cleanup_timer_returns_an_unacknowledged_message(qm: QueueManager, connect: Connect) -> None:
    fill(qm, PLAINQ, [b"a"])
    t = connect()
    h = t.open_queue(PLAINQ, Access.RECEIVE)
    p = t.start_receive(h)
    # Nothing else is available until the 0.3 s cleanup timer puts it back.
    again = t.read(h, timeout=10)
    assert again[0].message_id == p.message.message_id
    with pytest.raises(MQError) as e:
        t.end_receive(h, p.request_id, Ack.ACK)
    assert hr(e) == HResult.MQ_ERROR_INVALID_HANDLE
    assert bodies(qm, PLAINQ) == []


def test_closing_the_client_aborts_its_transaction(
    qm: QueueManager, connect: Connect, server: RemoteServer
) -> None:
    fill(qm, TXQ, [b"a", b"b"])
    t = connect()
    h = t.open_queue(TXQ, Access.RECEIVE)
    tx = t.begin()
    t.read(h, tx=tx)
    t.start_receive(h, tx=tx)
    t.close()
    assert server.core.session_count == 0
    t2 = connect()
    h2 = t2.open_queue(TXQ, Access.RECEIVE)
    assert [m.body for m in t2.read(h2, tx=SINGLE_MESSAGE, max_count=5)] == [b"a", b"b"]


def test_connection_api_over_grpc(qm: QueueManager, connect: Connect) -> None:
    with api_connect(connect()) as conn:
        conn.create_queue("private$\\api", transactional=True)
        q = conn.open_queue("private$\\api", RW)
        with conn.transaction() as tx:
            q.send_many([b"x", b"y", b"z"], tx=tx)
        with conn.transaction() as tx, q.receiving(timeout=1, tx=tx) as m:
            assert m.body == b"x"
        assert [m.body for m in q.peek_many(5)] == [b"y", b"z"]
        assert [x.path for x in conn.list_queues()].count("private$\\api") == 1
        assert q.info().message_count == 2
        with q.cursor() as c:
            assert c.peek_current().body == b"y"
            assert c.peek_next().body == b"z"
        assert q.purge() == 2


def test_create_queue_with_allowed_senders_over_grpc(qm: QueueManager, connect: Connect) -> None:
    guid = "0F0E0D0C-0B0A-0908-0706-050403020100"
    with api_connect(connect()) as conn:
        info = conn.create_queue("private$\\restricted", transactional=True, allowed_senders=[guid])
        assert info.allowed_senders == (guid.lower(),)
        assert conn.queue_info("private$\\restricted").allowed_senders == (guid.lower(),)
        with pytest.raises(MQError) as exc:
            conn.create_queue("private$\\bad", allowed_senders=["not-a-guid"])
        assert hr(exc) == HResult.MQ_ERROR_ILLEGAL_PROPERTY_VALUE
        assert "not-a-guid" in str(exc.value)
        assert conn.create_queue("private$\\open").allowed_senders == ()
    assert qm.get_queue("private$\\restricted").allowed_senders == guid.lower()


# ---- bad input: typed errors, and the server goes on serving --------------------------------


def test_bad_input_gets_the_spec_hresult_and_others_are_served(qm: QueueManager, connect: Connect) -> None:
    fill(qm, PLAINQ, [b"keep"])
    bad, good = connect(), connect()
    h = bad.open_queue(PLAINQ, RW)
    cases: list[tuple[Callable[[], object], HResult | None]] = [
        (lambda: bad.read(12345), HResult.MQ_ERROR_INVALID_HANDLE),
        (lambda: bad.end_receive(12345, 1, Ack.ACK), HResult.MQ_ERROR_INVALID_HANDLE),
        (
            lambda: bad.read(h, ReadAction.LOOKUP_PEEK_CURRENT, lookup_id=987654321),
            HResult.MQ_ERROR_MESSAGE_NOT_FOUND,
        ),
        (lambda: bad.read(h, 0x7777, timeout=0), HResult.MQ_ERROR_INVALID_PARAMETER),  # type: ignore[arg-type]
        (lambda: bad.read(h, ReadAction.PEEK_NEXT), HResult.MQ_ERROR_INVALID_PARAMETER),
        (lambda: bad.read(h, ReadAction.RECEIVE, cursor=55), HResult.STATUS_INVALID_HANDLE),
        (lambda: bad.read(h, ReadAction.RECEIVE, lookup_id=3), HResult.MQ_ERROR_INVALID_PARAMETER),
        (
            lambda: bad.read(h, ReadAction.LOOKUP_RECEIVE_NEXT, lookup_id=1, timeout=5),
            HResult.MQ_ERROR_INVALID_PARAMETER,
        ),
        (lambda: bad.end_receive(h, 1, 7), HResult.MQ_ERROR_INVALID_PARAMETER),  # type: ignore[arg-type]
        (lambda: bad.cancel_receive(h, 4242), HResult.STATUS_NOT_FOUND),
        (lambda: bad.close_cursor(h, 4242), HResult.MQ_ERROR_INVALID_HANDLE),
        (lambda: bad.commit(TransactionId()), HResult.MQ_ERROR_TRANSACTION_SEQUENCE),
        (lambda: bad.open_queue("private$\\missing", Access.RECEIVE), HResult.MQ_ERROR_QUEUE_NOT_FOUND),
        (lambda: bad.open_queue("not a queue name \\\\", Access.RECEIVE), None),
        (lambda: bad.open_queue(PLAINQ, Access(0x40)), HResult.MQ_ERROR_INVALID_PARAMETER),
        (
            lambda: bad.send(h, [outgoing(b"x" * (4 * 1024 * 1024 + 1))]),
            HResult.MQ_ERROR_INSUFFICIENT_RESOURCES,
        ),
        (lambda: bad.send(h, [outgoing(b"x", priority=9)]), HResult.MQ_ERROR_ILLEGAL_PROPERTY_VALUE),
        (
            lambda: bad.send(h, [outgoing(b"x", correlation_id=b"y" * 21)]),
            HResult.MQ_ERROR_ILLEGAL_PROPERTY_SIZE,
        ),
        (lambda: bad.send(h, [outgoing(b"x")], tx=SINGLE_MESSAGE), HResult.MQ_ERROR_TRANSACTION_USAGE),
        (lambda: bad.set_ack_class(bad.begin(), 1, 0xC004), HResult.MQ_ERROR_TRANSACTION_USAGE),
    ]
    for call, expected in cases:
        with pytest.raises(MQError) as e:
            call()
        if expected is not None:
            assert hr(e) == expected, (expected.name, e.value)
        # Another client is served normally after every bad call.
        gh = good.open_queue(PLAINQ, Access.PEEK)
        assert good.read(gh, ReadAction.PEEK_CURRENT)[0].body == b"keep"
        good.close_queue(gh)
    with pytest.raises(StorageError):  # typed: INSUFFICIENT_RESOURCES is a StorageError
        bad.send(h, [outgoing(b"x" * (4 * 1024 * 1024 + 1))])
    assert bodies(qm, PLAINQ) == [b"keep"]


def test_sharing_violation_across_clients(connect: Connect) -> None:
    a, b = connect(), connect()
    ha = a.open_queue(PLAINQ, Access.RECEIVE, ShareMode.DENY_RECEIVE)
    with pytest.raises(MQError) as e:
        b.open_queue(PLAINQ, Access.RECEIVE)
    assert hr(e) == HResult.MQ_ERROR_SHARING_VIOLATION
    a.close_queue(ha)
    b.open_queue(PLAINQ, Access.RECEIVE)


def test_waiting_receives_do_not_block_other_calls(qm: QueueManager) -> None:
    with RemoteServer(qm, port=0, workers=2, wait_workers=64) as srv:
        srv.start()
        waiter = GrpcTransport(srv.target)
        other = GrpcTransport(srv.target)
        try:
            wh = waiter.open_queue(TXQ, Access.RECEIVE)
            got: list[bytes] = []
            threads = [
                threading.Thread(target=lambda: got.extend(m.body for m in waiter.read(wh, timeout=None)))
                for _ in range(12)
            ]
            for th in threads:
                th.start()
            # 12 receives wait forever on TXQ; with 2 short-call workers the rest still flows.
            oh = other.open_queue(PLAINQ, RW)
            for i in range(20):
                other.send(oh, [outgoing(b"%d" % i)])
                assert other.read(oh)[0].body == b"%d" % i
            fill(qm, TXQ, [b"w%d" % i for i in range(12)])
            for th in threads:
                th.join(10)
            assert sorted(got) == sorted(b"w%d" % i for i in range(12))
        finally:
            waiter.close()
            other.close()


def test_cancel_receive_over_the_network(connect: Connect) -> None:
    t = connect()
    h = t.open_queue(PLAINQ, Access.RECEIVE)
    errors: list[MQError] = []
    rid = t._request_ids(1) + 1  # the id the next start_receive will use

    def wait() -> None:
        try:
            t.start_receive(h, timeout=None)
        except MQError as exc:
            errors.append(exc)

    th = threading.Thread(target=wait)
    th.start()
    for _ in range(500):
        try:
            t.cancel_receive(h, rid)
            break
        except MQError as exc:
            assert exc.hresult == HResult.STATUS_NOT_FOUND
            threading.Event().wait(0.01)
    th.join(10)
    assert [e.hresult for e in errors] == [HResult.MQ_ERROR_OPERATION_CANCELLED]


# ---- reachability, authentication, TLS ------------------------------------------------------


def test_unreachable_server_is_remote_machine_not_available() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(MQError) as e:
        GrpcTransport(f"grpc://127.0.0.1:{port}", connect_timeout=0.5)
    assert hr(e) == HResult.MQ_ERROR_REMOTE_MACHINE_NOT_AVAILABLE


def test_server_gone_mid_session_is_remote_machine_not_available(qm: QueueManager) -> None:
    srv = RemoteServer(qm, port=0).start()
    t = GrpcTransport(srv.target)
    h = t.open_queue(PLAINQ, Access.RECEIVE)
    srv.stop(grace=0)
    try:
        with pytest.raises(MQError) as e:
            t.read(h)
        assert hr(e) == HResult.MQ_ERROR_REMOTE_MACHINE_NOT_AVAILABLE
    finally:
        t.close()


TOKENS = """
# admin may do anything
admin-token-0001  *=all
reader-token-0002 private$\\plain=peek
"""


def test_tokens_and_per_queue_permissions(qm: QueueManager) -> None:
    fill(qm, PLAINQ, [b"a"])
    with RemoteServer(qm, port=0, tokens=parse_tokens(TOKENS)) as srv:
        srv.start()
        for token in (None, "wrong-token-123"):
            with pytest.raises(AccessDeniedError):
                GrpcTransport(srv.target, token=token)
        reader = GrpcTransport(f"{srv.target}?token=reader-token-0002")
        admin = GrpcTransport(srv.target, token="admin-token-0001")
        try:
            h = reader.open_queue(PLAINQ, Access.PEEK)
            assert reader.read(h, ReadAction.PEEK_CURRENT)[0].body == b"a"
            for call in (
                lambda: reader.open_queue(PLAINQ, Access.RECEIVE),
                lambda: reader.open_queue(PLAINQ, Access.SEND),
                lambda: reader.open_queue(TXQ, Access.PEEK),
                lambda: reader.create_queue("private$\\mine"),
                lambda: reader.delete_queue(PLAINQ),
                lambda: reader.queue_info(TXQ),
            ):
                with pytest.raises(AccessDeniedError):
                    call()
            assert [q.path for q in reader.list_queues()] == ["private$\\plain"]
            # A session id is useless with another principal's token.
            stolen = GrpcTransport(srv.target, token="admin-token-0001")
            stolen._md = (
                ("authorization", "Bearer reader-token-0002"),
                ("openmsmq-session", stolen.session_id),
            )
            with pytest.raises(AccessDeniedError):
                stolen.queue_info(PLAINQ)
            stolen.close()
            admin.create_queue("private$\\made")
            ah = admin.open_queue(PLAINQ, Access.RECEIVE)
            assert admin.read(ah)[0].body == b"a"
        finally:
            reader.close()
            admin.close()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_tls(qm: QueueManager, tmp_path: Path) -> None:
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=openmsmq.test", "-addext", "subjectAltName=DNS:openmsmq.test"],
        check=True, capture_output=True,
    )  # fmt: skip
    fill(qm, PLAINQ, [b"secret"])
    with RemoteServer(qm, port=0, tls=(cert.read_bytes(), key.read_bytes())) as srv:
        srv.start()
        t = GrpcTransport(f"{srv.target}?ca={cert}&server_name=openmsmq.test")
        try:
            h = t.open_queue(PLAINQ, Access.RECEIVE)
            assert t.read(h)[0].body == b"secret"
        finally:
            t.close()
        with pytest.raises(MQError) as e:  # plaintext client against a TLS server
            GrpcTransport(srv.target, connect_timeout=0.5)
        assert hr(e) == HResult.MQ_ERROR_REMOTE_MACHINE_NOT_AVAILABLE


def test_connect_by_url(server: RemoteServer) -> None:
    with api_connect(server.target) as conn:
        assert isinstance(conn.transport, GrpcTransport)
        q = conn.open_queue(PLAINQ, RW)
        q.send(b"via url")
        assert q.receive(timeout=1).body == b"via url"


def test_client_that_stops_pinging_loses_its_session(qm: QueueManager) -> None:
    # Deterministic: the session timeout is driven with a literal ``now`` (the server's own
    # timer loop never reaches 600 s during the test), and the test waits on conditions
    # with bounded loops, never on wall-clock time.
    fill(qm, TXQ, [b"a"])
    with RemoteServer(qm, port=0, session_timeout=600.0) as srv:
        srv.start()
        t = GrpcTransport(srv.target, ping_interval=3600)
        try:
            h = t.open_queue(TXQ, Access.RECEIVE)
            tx = t.begin()
            assert [m.body for m in t.read(h, tx=tx)] == [b"a"]
            session = srv.core.session(t.session_id)
            with ThreadPoolExecutor(1) as pool:
                waiting = pool.submit(t.read, h, timeout=30)  # waits on the empty queue
                for _ in range(1000):  # bounded: until the server holds the waiting read
                    if session.waiters or waiting.done():
                        break
                    threading.Event().wait(0.01)
                assert session.waiters, "the read never started waiting"
                # No ping for longer than the session timeout: the timer ends the session.
                assert srv.core.run_timers(now=session.last_seen + 601.0) == 1
                with pytest.raises(MQError) as e:
                    waiting.result(timeout=30)
                assert hr(e) == HResult.MQ_ERROR_OPERATION_CANCELLED
            with pytest.raises(MQError) as e:
                t.read(h)
            assert hr(e) == HResult.MQ_ERROR_STALE_HANDLE
        finally:
            t.close()
    assert bodies(qm, TXQ) == [b"a"]
    h2 = qm.open_queue(TXQ)
    assert qm.receive(h2).body == b"a"  # the aborted transaction put it back
