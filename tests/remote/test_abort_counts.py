"""Every aborted transactional receive of the remote-read service counts in AbortCount:
an Abort call, a session that ends (a client that disappears), and the pending-request
cleanup timer; R_MoveMessage moves through a handle with RECEIVE access only."""

from __future__ import annotations

import pytest

from openmsmq.errors import HResult, MQError
from openmsmq.qm import QueueManager
from openmsmq.remote.auth import Principal
from openmsmq.remote.codes import AccessMode
from openmsmq.remote.core import RemoteReadCore
from tests.clock import Clock

from .conftest import TXQ, fill

UOW = bytes(range(16))


def _counts(qm: QueueManager) -> list[tuple[bytes, int, int]]:
    return [(m.body, m.abort_count, m.move_count) for m in qm.peek_range(TXQ)]


def test_abort_session_end_and_cleanup_timer_each_count(
    core: RemoteReadCore, qm: QueueManager, clock: Clock
) -> None:
    fill(qm, TXQ, [b"a"])
    s = core.open_session(Principal("t"))
    h = core.open_queue(s, TXQ, AccessMode.RECEIVE)
    core.begin(s, UOW)
    core.read(s, h, uow=UOW)
    core.abort(s, UOW)
    assert _counts(qm) == [(b"a", 1, 0)]
    # The pending-request cleanup timer: a transactional receive nobody ended.
    core.begin(s, b"\x01" * 16)
    core.receives.start_receive(s, h, request_id=1, uow=b"\x01" * 16)
    clock.now += 11
    s.last_seen = clock.now
    assert core.run_timers() == 1
    assert _counts(qm) == [(b"a", 2, 0)]
    core.commit(s, b"\x01" * 16)  # nothing left in it
    # A client that disappears: its session ends, its transaction aborts.
    other = core.open_session(Principal("gone"))
    h2 = core.open_queue(other, TXQ, AccessMode.RECEIVE)
    core.begin(other, b"\x02" * 16)
    core.read(other, h2, uow=b"\x02" * 16)
    core.close_session(other)
    assert _counts(qm) == [(b"a", 3, 0)]


def test_move_needs_receive_access_and_counts(core: RemoteReadCore, qm: QueueManager) -> None:
    fill(qm, TXQ, [b"a"])
    s = core.open_session(Principal("t"))
    lid = qm.peek(TXQ).lookup_id
    peek = core.open_queue(s, TXQ, AccessMode.PEEK)
    with pytest.raises(MQError) as err:
        core.move(s, peek, b"", lid, "poison")
    assert err.value.hresult == HResult.STATUS_ACCESS_DENIED
    h = core.open_queue(s, TXQ, AccessMode.RECEIVE)
    core.begin(s, UOW)
    assert core.move(s, h, UOW, lid, "poison") == 0
    core.commit(s, UOW)
    (moved,) = qm.peek_range(TXQ + ";poison")
    assert (moved.body, moved.move_count) == (b"a", 1)
    with pytest.raises(MQError) as err:
        core.open_queue(s, TXQ + ";poison", AccessMode.SEND)
    assert err.value.hresult == HResult.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION
