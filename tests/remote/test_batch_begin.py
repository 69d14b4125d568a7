"""Batched R_StartReceive from the head: one Dequeue Message Begin for the rest of the batch."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from openmsmq.qm import QueueManager
from openmsmq.remote.auth import Principal
from openmsmq.remote.codes import AccessMode, RemoteAck
from openmsmq.remote.core import RemoteReadCore

from .conftest import PLAINQ, TXQ, bodies, fill


@pytest.fixture
def core(qm: QueueManager) -> Iterator[RemoteReadCore]:
    c = RemoteReadCore(qm, cleanup_timeout=10.0, session_timeout=60.0, clock=lambda: 1000.0)
    yield c
    c.close()


def test_batch_larger_than_the_queue_leaves_no_stray_entries(core: RemoteReadCore, qm: QueueManager) -> None:
    s = core.open_session(Principal("test"))
    fill(qm, PLAINQ, [b"a", b"b", b"c"])
    h = core.open_queue(s, PLAINQ, AccessMode.RECEIVE)
    got = core.receives.start_receive(s, h, request_id=7, max_count=50)
    assert [(rid, m.body) for rid, m in got] == [(7, b"a"), (8, b"b"), (9, b"c")]
    assert core.pending_count == 3
    assert core.receives.end_receive(s, h, [7, 8, 9], RemoteAck.RR_ACK) == [0, 0, 0]
    assert core.pending_count == 0
    assert bodies(qm, PLAINQ) == []
    # Request ids past the ones used are free again.
    fill(qm, PLAINQ, [b"d"])
    assert [rid for rid, _ in core.receives.start_receive(s, h, request_id=10, max_count=1)] == [10]


def test_two_sessions_take_disjoint_batches_and_abort_puts_them_back(
    core: RemoteReadCore, qm: QueueManager
) -> None:
    fill(qm, TXQ, [bytes([i]) for i in range(10)])
    s1, s2 = core.open_session(Principal("a")), core.open_session(Principal("b"))
    h1 = core.open_queue(s1, TXQ, AccessMode.RECEIVE)
    h2 = core.open_queue(s2, TXQ, AccessMode.RECEIVE)
    u1, u2 = bytes(range(16)), bytes(range(1, 17))
    g1 = core.receives.start_receive(s1, h1, request_id=1, uow=u1, max_count=4)
    g2 = core.receives.start_receive(s2, h2, request_id=1, uow=u2, max_count=4)
    assert [m.body for _, m in g1] == [bytes([i]) for i in range(4)]
    assert [m.body for _, m in g2] == [bytes([i]) for i in range(4, 8)]
    core.abort(s1, u1)
    assert core.receives.end_receive(s2, h2, [1, 2, 3, 4], RemoteAck.RR_ACK) == [0] * 4
    core.commit(s2, u2)
    assert bodies(qm, TXQ) == [bytes([i]) for i in (0, 1, 2, 3, 8, 9)]
