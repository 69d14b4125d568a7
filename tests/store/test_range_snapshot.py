"""Range reads of a queue with several priority bands read every band from ONE snapshot.

A non-transactional queue's LookupIdentifier range is up to eight index ranges, one per
priority band (store/ranges.py). A batch committed between two band reads could add a
message to a band already read and a higher LookupIdentifier to a band read later; a
reader that moves past the highest identifier it saw would then skip the first message
for good. Each test commits such a batch between the first and the second band read.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from openmsmq.qm import MessageRecord, QueueManager
from openmsmq.qm.options import StoreOptions
from openmsmq.store import ranges

QUEUE = ".\\private$\\mixed"


class _CommitBetweenBands:
    """A read connection that runs ``commit`` right after its first SELECT."""

    def __init__(self, conn: Any, commit: Callable[[], None]) -> None:
        self._conn = conn
        self._commit: Callable[[], None] | None = commit
        self.selects = 0

    @property
    def in_transaction(self) -> bool:
        return bool(self._conn.in_transaction)

    def execute(self, sql: str, params: Any = ()) -> Any:
        cursor = self._conn.execute(sql, params)
        if sql.lstrip().upper().startswith("SELECT"):
            self.selects += 1
            # Materialise this band before the commit, as a cursor stepped later might not.
            cursor = iter(cursor.fetchall())
            if self._commit is not None:
                commit, self._commit = self._commit, None
                commit()
        return _Rows(cursor)


class _Rows:
    def __init__(self, rows: Any) -> None:
        self._rows = rows

    def __iter__(self) -> Any:
        return iter(self._rows)

    def fetchone(self) -> Any:
        return next(iter(self._rows), None)

    def fetchall(self) -> list[Any]:
        return list(self._rows)


def _setup(qm: QueueManager) -> tuple[int, Callable[[], None]]:
    qm.create_queue(QUEUE, transactional=False)
    qm.send_many(QUEUE, [MessageRecord(body=b"p0-%d" % i, priority=0) for i in range(3)])

    def commit() -> None:
        # One batch: a priority-7 message (band read first) then a priority-0 one (band
        # read last), the second with the higher LookupIdentifier.
        qm.send_many(
            QUEUE, [MessageRecord(body=b"late-7", priority=7), MessageRecord(body=b"late-0", priority=0)]
        )

    queue_id = qm.queues.resolve(QUEUE).record.queue_id
    return queue_id, commit


def _between(
    qm: QueueManager, commit: Callable[[], None] | None, fn: Callable[[Any], Any]
) -> tuple[Any, Any]:
    """``fn`` on a read connection of the store that runs ``commit`` after its first
    SELECT; (its result, the wrapped connection)."""
    seen: list[_CommitBetweenBands] = []

    def run(conn: Any) -> Any:
        wrapped = _CommitBetweenBands(conn, commit) if commit is not None else conn
        seen.append(wrapped)
        return fn(wrapped)

    return qm.store.read(run), seen[0]


def _all_ids(qm: QueueManager, queue_id: int) -> list[int]:
    rows = qm.store.read(lambda c: ranges.fetch_rows_through(c, queue_id, False, 0, None, 100))
    return [r[0] for r in rows]


@pytest.mark.parametrize("threaded", [True, False])
def test_rows_read_has_no_gap(tmp_path: Path, threaded: bool, qm_store: StoreOptions) -> None:
    with QueueManager(tmp_path / "qm", threaded=threaded, store_options=qm_store) as qm:
        queue_id, commit = _setup(qm)
        rows, conn = _between(
            qm, commit, lambda c: ranges.fetch_rows_through(c, queue_id, False, 0, None, 100)
        )
        got = [r[0] for r in rows]
        assert conn.selects == 8
        every = _all_ids(qm, queue_id)
        assert len(every) == 5
        # Whatever the read returned, it holds every message up to its highest identifier.
        assert got == [i for i in every if i <= max(got)]
        assert len(got) == 3  # the snapshot predates the batch
        assert not qm.store.read(lambda c: c.in_transaction)


def test_lookup_range_and_nth_are_one_snapshot(tmp_path: Path, qm_store: StoreOptions) -> None:
    with QueueManager(tmp_path / "qm", store_options=qm_store) as qm:
        queue_id, commit = _setup(qm)
        got, _ = _between(qm, commit, lambda c: ranges.lookup_range(c, queue_id, False))
        assert got is not None and got.count == 3
        every = _all_ids(qm, queue_id)
        assert got.last == every[2]

        # A second batch of the same shape, committed during nth_lookup_id's band reads:
        # the first message after the last one is not there yet in the snapshot (without
        # one, the batch's priority-0 message would be found and its priority-7 one passed).
        nth, _ = _between(qm, commit, lambda c: ranges.nth_lookup_id(c, queue_id, False, every[-1], 1))
        assert nth is None
        after = _all_ids(qm, queue_id)
        assert len(after) == 7
        assert qm.store.read(lambda c: ranges.nth_lookup_id(c, queue_id, False, every[-1], 1)) == after[5]


def test_outgoing_rows_merge_is_one_snapshot(tmp_path: Path, qm_store: StoreOptions) -> None:
    with QueueManager(tmp_path / "qm", store_options=qm_store) as qm:
        queue_id, commit = _setup(qm)
        qm.send(QUEUE, MessageRecord(body=b"p3", priority=3))  # another band is in use: the merged read
        rows = qm.store.read(lambda c: ranges.fetch_outgoing_rows(c, queue_id, 0, 100))
        assert len(rows) == 4
        out, _ = _between(qm, commit, lambda c: ranges.fetch_outgoing_rows(c, queue_id, 0, 100))
        got = [r[0] for r in out]
        every = _all_ids(qm, queue_id)
        assert got == [i for i in every if i <= max(got)]
