"""LookupIdentifier-range calls of the Transport, on both transports (in-process and gRPC)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from openmsmq.client import Access, OutgoingMessage, Transport
from openmsmq.client.grpc_transport import GrpcTransport
from openmsmq.client.inproc import InProcessTransport
from openmsmq.client.types import LookupRange, RangeQuery
from openmsmq.errors import HResult, MessageNotFoundError, MQError, QueueNotFoundError
from openmsmq.qm import QueueManager
from openmsmq.remote.server import RemoteServer

TXQ = "private$\\orders"
PLAIN = "private$\\plain"


@pytest.fixture(params=["inproc", "grpc"])
def transport(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Transport]:
    with QueueManager(tmp_path / "qm") as qm:
        qm.create_queue(TXQ, transactional=True)
        qm.create_queue(PLAIN)
        if request.param == "inproc":
            t: Transport = InProcessTransport(qm=qm)
            yield t
            t.close()
            return
        srv = RemoteServer(qm, port=0, session_timeout=5.0).start()
        g = GrpcTransport(srv.target)
        try:
            yield g
        finally:
            g.close()
            srv.stop(grace=0.2)


def send(t: Transport, queue: str, bodies: list[bytes]) -> None:
    h = t.open_queue(queue, Access.SEND)
    tx = t.begin() if queue == TXQ else None
    t.send(h, [OutgoingMessage(body=b) for b in bodies], tx)
    if tx is not None:
        t.commit(tx)
    t.close_queue(h)


def ids(t: Transport, queue: str) -> list[int]:
    return [m.lookup_id for m in t.peek_range(queue, 0, None, 100_000)]


def test_ranges_watermark_nth_and_peek(transport: Transport) -> None:
    t = transport
    assert t.lookup_ranges([RangeQuery(TXQ), RangeQuery(PLAIN)]) == [None, None]
    send(t, TXQ, [b"a", b"b", b"c"])
    send(t, PLAIN, [b"p"])
    send(t, TXQ, [b"d"])
    a = ids(t, TXQ)
    (p,) = ids(t, PLAIN)
    assert len(a) == 4 and a == sorted(a) and a[2] < p < a[3]
    whole = t.lookup_ranges([RangeQuery(TXQ), RangeQuery(PLAIN)])
    assert whole == [LookupRange(a[0], a[3], 4), LookupRange(p, p, 1)]
    assert t.lookup_ranges([RangeQuery(TXQ, a[1]), RangeQuery(TXQ, 0, a[1])]) == [
        LookupRange(a[2], a[3], 2),
        LookupRange(a[0], a[1], 2),
    ]
    assert t.lookup_ranges([RangeQuery(TXQ, a[3])]) == [None]
    assert t.nth_lookup_id(TXQ, 0, 3) == a[2]
    assert t.nth_lookup_id(TXQ, a[0], 1) == a[1]
    with pytest.raises(MessageNotFoundError):
        t.nth_lookup_id(TXQ, a[0], 4)
    with pytest.raises(MessageNotFoundError):
        t.nth_lookup_id(TXQ, 0, 3, through=a[1])
    page = t.peek_range(TXQ, a[0], a[3], 2)
    assert [m.body for m in page] == [b"b", b"c"]
    assert page[0].transactional and page[0].tx_sequence_id == 0  # a local send has no sequence
    assert [m.body for m in t.peek_range(TXQ, a[2], None, 10)] == [b"d"]
    assert ids(t, TXQ) == a  # peek removed nothing
    with pytest.raises(QueueNotFoundError):
        t.lookup_ranges([RangeQuery(TXQ), RangeQuery("private$\\nope")])
    with pytest.raises(MQError) as err:
        t.peek_range(TXQ, 0, None, 0)
    assert err.value.hresult == HResult.MQ_ERROR_INVALID_PARAMETER


def test_remove_through_one_transaction_idempotent(transport: Transport) -> None:
    t = transport
    send(t, TXQ, [b"1", b"2", b"3"])
    send(t, PLAIN, [b"4"])
    a, p = ids(t, TXQ), ids(t, PLAIN)
    assert t.remove_through({TXQ: a[1], PLAIN: p[0]}) == 3
    assert ids(t, TXQ) == a[2:] and ids(t, PLAIN) == []
    assert t.remove_through({TXQ: a[1], PLAIN: p[0]}) == 0
    with pytest.raises(QueueNotFoundError):
        t.remove_through({TXQ: a[2], "private$\\nope": 1})
    assert ids(t, TXQ) == a[2:]  # the failed call removed nothing


def test_send_idempotent_skips_accepted_identities(transport: Transport) -> None:
    t = transport
    msgs = [OutgoingMessage(body=b"m%d" % i, label="L", app_specific=i) for i in range(3)]
    first = t.send_idempotent(TXQ, msgs[:2], ["id0", "id1"])
    assert all(isinstance(x, int) and x > 0 for x in first)
    again = t.send_idempotent(TXQ, msgs, ["id0", "id1", "id2"])
    assert again[:2] == [None, None] and again[2] is not None
    assert t.send_idempotent(TXQ, msgs, ["id0", "id1", "id2"]) == [None, None, None]
    got = t.peek_range(TXQ, 0, None, 10)
    assert [(m.body, m.label, m.app_specific) for m in got] == [(b"m%d" % i, "L", i) for i in range(3)]
    assert t.send_idempotent(PLAIN, msgs[:1], ["id0"])[0] is not None  # identities are per queue
    assert t.send_idempotent(TXQ, [], []) == []
    with pytest.raises(MQError):
        t.send_idempotent(TXQ, msgs[:1], [""])


def test_ranges_report_stored_bytes_on_request(transport: Transport) -> None:
    t = transport
    send(t, TXQ, [b"a" * 10, b"b" * 20, b"c" * 30])
    first, _, third = ids(t, TXQ)
    whole, tail = t.lookup_ranges([RangeQuery(TXQ), RangeQuery(TXQ, first, None)], with_bytes=True)
    assert whole is not None and tail is not None
    assert whole.count == 3 and tail.count == 2
    assert whole.bytes is not None and tail.bytes is not None
    assert whole.bytes - tail.bytes >= 10 and tail.bytes >= 50  # stored size: the body and more
    (only_count,) = t.lookup_ranges([RangeQuery(TXQ)])
    assert only_count is not None and only_count.bytes is None  # not asked for: not computed
    assert t.lookup_ranges([RangeQuery(TXQ, third, None)], with_bytes=True) == [None]
