"""A PurgePending mark set while an abort releases the message is honoured."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from openmsmq.qm import MessageRecord, QueueManager

TX = "private$\\tx"


class _MarkOnFirstEnter:
    """Stands in for a queue's condition: the first time it is entered it runs
    ``action`` (another thread's work, made to land at exactly that point), then
    behaves as the real condition."""

    def __init__(self, real: Any, action: Any) -> None:
        self._real = real
        self._action = action

    def __enter__(self) -> Any:
        action, self._action = self._action, None
        if action is not None:
            action()
        return self._real.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        return self._real.__exit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


@pytest.mark.parametrize("threaded", [True, False], ids=["threaded", "sync"])
def test_mark_set_during_the_abort_deletes_the_message(tmp_path: Path, threaded: bool) -> None:
    qm = QueueManager(tmp_path / "qm", threaded=threaded)
    try:
        qm.create_queue(TX, transactional=True)
        with qm.begin() as tx:
            qm.send_many(TX, [MessageRecord(body=b) for b in (b"a", b"b", b"c")], tx)
        held = qm.begin()
        first = qm.receive(TX, tx=held)
        qs = qm.queues.resolve(TX)
        real = qs.cond
        returned: list[int] = []
        # remove_through finds the first message locked by ``held`` and marks it
        # PurgePending; it lands after the abort looked at the marks, before the unlock.
        qs.cond = _MarkOnFirstEnter(real, lambda: returned.append(qm.remove_through({TX: first.lookup_id})))
        try:
            held.abort()
        finally:
            qs.cond = real
        assert returned == [0]  # nothing removed by the call itself: the message was locked
        left = [m.body for m in qm.peek_range(TX, 0, 10)]
        assert left == [b"b", b"c"]  # the abort deleted it, as the mark asks
        rec = qm.get_queue(TX)
        assert (rec.msg_count, qs.locked, qs.purge_pending) == (2, set(), set())
        with qm.begin() as tx:
            assert [m.body for m in qm.receive_many(TX, 10, tx=tx)] == [b"b", b"c"]
    finally:
        qm.close()
