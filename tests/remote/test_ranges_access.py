"""LookupIdentifier-range rpcs: token permissions per named queue, outgoing queues refused."""

from __future__ import annotations

import pytest

from openmsmq.client import Access, OutgoingMessage
from openmsmq.client.grpc_transport import GrpcTransport
from openmsmq.client.types import RangeQuery
from openmsmq.errors import AccessDeniedError, HResult, MQError
from openmsmq.qm import MessageRecord, QueueManager
from openmsmq.remote.auth import parse_tokens
from openmsmq.remote.server import RemoteServer

from .conftest import PLAINQ, TXQ, bodies, fill

TOKENS = """
admin-token-0001   *=all
peeker-token-0002  private$\\tx=peek
reader-token-0003  private$\\tx=receive
writer-token-0004  private$\\plain=send
"""


def test_each_call_needs_its_permission_on_every_queue(qm: QueueManager) -> None:
    fill(qm, TXQ, [b"a", b"b"])
    last = qm.lookup_range(TXQ)
    assert last is not None
    with RemoteServer(qm, port=0, tokens=parse_tokens(TOKENS)) as srv:
        srv.start()
        peeker = GrpcTransport(srv.target, token="peeker-token-0002")
        reader = GrpcTransport(srv.target, token="reader-token-0003")
        writer = GrpcTransport(srv.target, token="writer-token-0004")
        try:
            # peek access: ranges, nth, peek; not removal, not send.
            assert peeker.lookup_ranges([RangeQuery(TXQ)])[0] is not None
            assert peeker.nth_lookup_id(TXQ, 0, 2) == last.last
            assert [m.body for m in peeker.peek_range(TXQ, 0, None, 10)] == [b"a", b"b"]
            with pytest.raises(AccessDeniedError):
                peeker.remove_through({TXQ: last.last})
            with pytest.raises(AccessDeniedError):
                peeker.lookup_ranges([RangeQuery(TXQ), RangeQuery(PLAINQ)])  # one queue not allowed
            with pytest.raises(AccessDeniedError):
                peeker.send_idempotent(TXQ, [OutgoingMessage(body=b"x")], ["i"])
            # receive access implies peek and allows removal.
            assert len(reader.peek_range(TXQ, 0, None, 10)) == 2
            with pytest.raises(AccessDeniedError):
                reader.remove_through({TXQ: last.last, PLAINQ: 1})
            assert bodies(qm, TXQ) == [b"a", b"b"]  # checks come before any removal
            assert reader.remove_through({TXQ: last.last}) == 2
            # send access: the idempotent send, nothing else.
            assert writer.send_idempotent(PLAINQ, [OutgoingMessage(body=b"w")], ["w1"])[0] is not None
            with pytest.raises(AccessDeniedError):
                writer.peek_range(PLAINQ, 0, None, 10)
            with pytest.raises(AccessDeniedError):
                writer.send_idempotent(TXQ, [OutgoingMessage(body=b"w")], ["w1"])
            assert bodies(qm, PLAINQ) == [b"w"] and bodies(qm, TXQ) == []
        finally:
            for t in (peeker, reader, writer):
                t.close()


def test_outgoing_queues_cannot_be_read_or_removed(qm: QueueManager) -> None:
    remote = "DIRECT=TCP:192.0.2.1\\private$\\far"
    with qm.begin() as t:
        qm.send(remote, MessageRecord(body=b"out"), t)  # creates the outgoing queue
    with RemoteServer(qm, port=0) as srv:
        srv.start()
        g = GrpcTransport(srv.target)
        try:
            for call in (
                lambda: g.peek_range(remote, 0, None, 10),
                lambda: g.lookup_ranges([RangeQuery(remote)]),
                lambda: g.remove_through({remote: 10**6}),
                lambda: g.send_idempotent(remote, [OutgoingMessage(body=b"x")], ["i"]),
            ):
                with pytest.raises(MQError) as err:
                    call()
                assert err.value.hresult == HResult.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION
            h = g.open_queue(TXQ, Access.PEEK)  # the session is still usable
            g.close_queue(h)
        finally:
            g.close()
