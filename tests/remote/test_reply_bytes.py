"""A batched remote read returns fewer messages than asked once their bodies reach
REPLY_BYTES (one message at least), on every batched path: receive from the head,
through a cursor, peek, the two-phase receive and the range peeks (the Spark source's
pages).

Before, a receive of 600 messages of 4 MB removed all 600 from the queue and then failed
to serialize its 2.4 GB reply ("Failed to serialize proto"): the messages were lost, and
the server held 7 GB. The bound here is lowered to 40 KB so that small messages show it.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from openmsmq.client import Access, Ack, ReadAction
from openmsmq.client.grpc_transport import GrpcTransport
from openmsmq.qm import QueueManager
from openmsmq.remote import core, range_calls, read_calls, receives
from openmsmq.remote.packed import decode_messages

from .conftest import PLAINQ, TXQ, bodies, fill

Connect = Callable[..., GrpcTransport]
BODY = 10_000
BOUND = 40_000  # the fourth message reaches it


@pytest.fixture(autouse=True)
def _small_replies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(core, "REPLY_BYTES", BOUND)
    monkeypatch.setattr(read_calls, "REPLY_BYTES", BOUND)
    monkeypatch.setattr(receives, "REPLY_BYTES", BOUND)
    monkeypatch.setattr(range_calls, "REPLY_BYTES", BOUND)


def _messages(n: int) -> list[bytes]:
    return [b"%04d" % i + bytes(BODY - 4) for i in range(n)]


def test_a_batched_receive_stops_at_the_reply_bound_and_loses_nothing(
    qm: QueueManager, connect: Connect
) -> None:
    fill(qm, PLAINQ, _messages(10))
    t = connect()
    h = t.open_queue(PLAINQ, Access.RECEIVE)
    got: list[bytes] = []
    sizes = []
    while len(got) < 10:
        batch = t.read(h, ReadAction.RECEIVE, max_count=100)
        sizes.append(len(batch))
        got += [m.body for m in batch]
    assert sizes == [4, 4, 2]
    assert got == _messages(10)  # every message once, in order
    assert bodies(qm, PLAINQ) == []


def test_a_large_first_message_still_comes_alone(qm: QueueManager, connect: Connect) -> None:
    fill(qm, PLAINQ, [bytes(3 * BOUND), b"small"])
    t = connect()
    h = t.open_queue(PLAINQ, Access.RECEIVE)
    assert [len(m.body) for m in t.read(h, ReadAction.RECEIVE, max_count=100)] == [3 * BOUND]
    assert [m.body for m in t.read(h, ReadAction.RECEIVE, max_count=100)] == [b"small"]


def test_batched_peeks_and_cursor_receives_stop_at_the_bound(qm: QueueManager, connect: Connect) -> None:
    fill(qm, PLAINQ, _messages(10))
    t = connect()
    h = t.open_queue(PLAINQ, Access.RECEIVE)
    assert len(t.read(h, ReadAction.PEEK_CURRENT, max_count=100)) == 4
    cursor = t.create_cursor(h)
    batch = t.read(h, ReadAction.RECEIVE, cursor=cursor, max_count=100)
    assert [m.body for m in batch] == _messages(4)
    assert bodies(qm, PLAINQ) == _messages(10)[4:]


def test_a_batched_two_phase_receive_stops_at_the_bound(qm: QueueManager, connect: Connect) -> None:
    fill(qm, TXQ, _messages(10))
    t = connect()
    h = t.open_queue(TXQ, Access.RECEIVE)
    tx = t.begin()
    got = t.start_receive_many(h, 100, tx=tx)
    assert [p.message.body for p in got] == _messages(4)
    assert t.end_receive_many(h, [p.request_id for p in got], Ack.ACK) == [0] * 4
    t.commit(tx)
    assert bodies(qm, TXQ) == _messages(10)[4:]


def test_range_peeks_stop_at_the_bound_and_the_next_page_goes_on(qm: QueueManager, connect: Connect) -> None:
    fill(qm, TXQ, _messages(10))
    t = connect()
    first = t.peek_range(TXQ, 0, None, 1000)
    assert [m.body for m in first] == _messages(4)
    rest = t.peek_range(TXQ, first[-1].lookup_id, None, 1000)
    assert [m.body for m in rest] == _messages(8)[4:]
    packed = t.peek_range_packed(TXQ, 0, None, 1000)
    assert packed is not None and len(list(decode_messages(packed))) == 4
    assert bodies(qm, TXQ) == _messages(10)  # nothing removed
