"""The locks of durably removed messages are dropped without waiting for the queue's
condition (QueueManager._unlock_ids, QueueState.settle).

A committing receive whose queue condition is held by another thread leaves its ids in
``qs.removed``; whoever holds the condition next drops them before reading ``locked``.
A stale lock must never change what a read, a purge or ``remove_through`` does.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from openmsmq.errors import HResult, MQError
from openmsmq.qm import MessageRecord, QueueManager

TX = "private$\\tx"


def _commit_while_condition_held(qm: QueueManager, count: int) -> list[int]:
    """Receive ``count`` messages in one transaction; commit it on another thread while
    this one holds the queue's condition. Returns their LookupIdentifiers."""
    qs = qm.queues.resolve(TX)
    tx = qm.begin()
    got = qm.receive_many(TX, count, tx=tx)
    done = threading.Event()

    def commit() -> None:
        tx.commit()
        done.set()

    with qs.cond:
        worker = threading.Thread(target=commit)
        worker.start()
        # The commit does not wait for the condition: it returns while it is held.
        assert done.wait(30)
        worker.join(30)
        ids = [m.lookup_id for m in got]
        assert set(ids) <= qs.locked  # not dropped yet: the condition was busy
        assert list(qs.removed) == [ids]
    return ids


@pytest.mark.parametrize("threaded", [True, False], ids=["threaded", "sync"])
def test_uncontended_commit_drops_the_locks_at_once(tmp_path: Path, threaded: bool) -> None:
    with QueueManager(tmp_path / "qm", threaded=threaded) as qm:
        qm.create_queue(TX, transactional=True)
        with qm.begin() as tx:
            qm.send_many(TX, [MessageRecord(body=b"%d" % i) for i in range(3)], tx)
        with qm.begin() as tx:
            qm.receive_many(TX, 2, tx=tx)
        qs = qm.queues.resolve(TX)
        assert qs.locked == set() and not qs.removed


def test_stale_locks_are_dropped_by_the_next_read(tmp_path: Path) -> None:
    with QueueManager(tmp_path / "qm") as qm:
        qm.create_queue(TX, transactional=True)
        with qm.begin() as tx:
            qm.send_many(TX, [MessageRecord(body=b"%d" % i) for i in range(5)], tx)
        ids = _commit_while_condition_held(qm, 2)
        qs = qm.queues.resolve(TX)
        # A removed message is not found by LookupIdentifier (not reported as locked).
        with pytest.raises(MQError) as err:
            qm.receive_by_lookup_id(TX, ids[0])
        assert err.value.hresult == HResult.MQ_ERROR_MESSAGE_NOT_FOUND
        assert qs.locked == set() and not qs.removed
        assert [m.body for m in qm.peek_many(TX, 10)] == [b"2", b"3", b"4"]


def test_purge_after_a_stale_lock_marks_nothing(tmp_path: Path) -> None:
    with QueueManager(tmp_path / "qm") as qm:
        qm.create_queue(TX, transactional=True)
        with qm.begin() as tx:
            qm.send_many(TX, [MessageRecord(body=b"%d" % i) for i in range(4)], tx)
        _commit_while_condition_held(qm, 1)
        assert qm.purge_queue(TX) == 3
        qs = qm.queues.resolve(TX)
        assert qs.locked == set() and qs.purge_pending == set()
        assert qm.get_queue(TX).msg_count == 0


def test_remove_through_after_a_stale_lock_takes_the_fast_path(tmp_path: Path) -> None:
    with QueueManager(tmp_path / "qm") as qm:
        qm.create_queue(TX, transactional=True)
        with qm.begin() as tx:
            qm.send_many(TX, [MessageRecord(body=b"%d" % i) for i in range(6)], tx)
        last = qm.peek_many(TX, 10)[-1].lookup_id
        ids = _commit_while_condition_held(qm, 2)
        qs = qm.queues.resolve(TX)
        assert set(ids) <= qs.locked  # stale until remove_through settles them
        spans: list[int] = []
        real = qm.ranges._remove_through

        def spy(targets, fast=True):  # type: ignore[no-untyped-def]
            spans.append(fast)
            return real(targets, fast=fast)

        qm.ranges._remove_through = spy  # type: ignore[method-assign]
        assert qm.remove_through({TX: last}) == 4
        # The stale locks lay inside the span: settled first, they do not force the
        # per-message path (which would mark them PurgePending).
        assert spans == [True]
        assert qs.locked == set() and qs.purge_pending == set()
        assert ids[-1] < last


def test_many_receivers_leave_no_lock_behind(tmp_path: Path) -> None:
    total, workers = 400, 8
    with QueueManager(tmp_path / "qm") as qm:
        qm.create_queue(TX, transactional=True)
        with qm.begin() as tx:
            qm.send_many(TX, [MessageRecord(body=b"%d" % i) for i in range(total)], tx)
        received: list[bytes] = []
        lock = threading.Lock()

        def receiver() -> None:
            for _ in range(total // workers):
                with qm.begin() as tx:
                    body = qm.receive(TX, tx=tx, timeout=30).body
                with lock:
                    received.append(body)

        threads = [threading.Thread(target=receiver) for _ in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert sorted(received) == sorted(b"%d" % i for i in range(total))
        qs = qm.queues.resolve(TX)
        with qs.cond:
            qs.settle()
        assert qs.locked == set() and qs.purge_pending == set()
        assert qm.get_queue(TX).msg_count == 0
