"""peek_outgoing_rows, the transfer's read of an outgoing queue: the priority-0 band read
plus a probe of the other bands gives the rows peek_range_rows gives, in LookupIdentifier
order, whether the queue holds transactional messages only or non-transactional ones of
any priority too."""

from __future__ import annotations

from pathlib import Path

import pytest

from openmsmq.qm import MessageRecord, QueueManager

DEST = "DIRECT=TCP:192.0.2.9\\private$\\orders"
_LAST = (1 << 56) - 1


def _reads(qm: QueueManager, limit: int) -> None:
    out = qm.open_queue(DEST)
    everything = [tuple(r) for r in qm.peek_range_rows(out, 0, 10_000, through=_LAST)]
    ids = [r[0] for r in everything]
    assert ids == sorted(ids)
    for after in [0, *ids]:
        want = [r for r in everything if r[0] > after][:limit]
        assert [tuple(r) for r in qm.peek_outgoing_rows(out, after, limit)] == want
    # A reader walking the queue a read at a time sees every row once, in order.
    got: list[int] = []
    after = 0
    while rows := qm.peek_outgoing_rows(out, after, limit):
        got += [r[0] for r in rows]
        after = rows[-1][0]
    assert got == ids


@pytest.mark.parametrize("limit", [1, 3, 64])
def test_transactional_only(tmp_path: Path, limit: int) -> None:
    with QueueManager(tmp_path / "qm") as qm:
        for k in range(4):
            with qm.begin() as tx:
                qm.send_many(DEST, [MessageRecord(body=b"%d" % i, label="l" * k) for i in range(5)], tx)
        _reads(qm, limit)


@pytest.mark.parametrize("limit", [1, 3, 64])
def test_mixed_priorities(tmp_path: Path, limit: int) -> None:
    with QueueManager(tmp_path / "qm") as qm:
        for k in range(3):
            with qm.begin() as tx:
                qm.send_many(DEST, [MessageRecord(body=b"t%d" % i) for i in range(3)], tx)
            # Non-transactional messages of several priorities between the transactions.
            qm.send_many(DEST, [MessageRecord(body=b"p", priority=p) for p in (7, 0, 3, 1)][k:])
        _reads(qm, limit)
