"""One group-commit batch of the SQLite store, run in one transaction.

:class:`BatchRunner` runs what a batch leader of :class:`~openmsmq.store.db.Store` (or,
in synchronous mode, the submitting caller) took: every operation in ONE ``BEGIN
IMMEDIATE … COMMIT`` (inside it each in its own SAVEPOINT and runs of mergeable
operations as one, by :class:`~openmsmq.store.savepoints.SavepointRunner`, which the
PostgreSQL store shares), and completes each operation only after the COMMIT. It owns
what a batch changes: the LookupIdentifier counter and its persisted reservation
(``qm_state.sequential_id``, reserved in blocks of :data:`LOOKUP_ID_BLOCK`), the wait for
another connection's write lock, the restart on SQLITE_FULL (low-space mode,
:mod:`openmsmq.store.space`) and on a transaction SQLite rolled back, and the timing the
leader bounds its wait with. Who leads a batch and which operations it takes is
:mod:`openmsmq.store.db`'s.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from openmsmq.observability.sink import NULL_METRICS, MetricsSink
from openmsmq.store.savepoints import Again, SavepointRunner
from openmsmq.store.space import SpaceGuard
from openmsmq.store.writes import StoreStats, WriteContext, WriteOp, is_busy, report_failure, storage_error

__all__ = ["BUSY_SLICE_MS", "LOCK_WAIT", "LOOKUP_ID_BLOCK", "BatchRunner"]

#: LookupIdentifiers reserved per persisted SequentialID update (a restart skips the rest).
LOOKUP_ID_BLOCK = 65536
#: Seconds a write waits for the write lock that another connection to the file holds
#: (another process on the same data directory) before it fails (SQLITE_BUSY).
LOCK_WAIT = 30.0
#: SQLite's own busy handler sleeps ever longer between tries (up to 100 ms). A process
#: releasing a large OrderAck'ed range commits chunk after chunk with well under a
#: millisecond between them, so a writer on that schedule waited for all of them. After
#: opening, the writer connection's busy timeout is BUSY_SLICE_MS and BEGIN IMMEDIATE is
#: tried again every _LOCK_POLL seconds until LOCK_WAIT.
BUSY_SLICE_MS = 2
_LOCK_POLL = 0.0005


def _rollback(conn: sqlite3.Connection) -> None:
    """Roll the open transaction of ``conn`` back, quietly."""
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


class BatchRunner:
    """Runs batches of write operations on the store's write connection ``conn``.

    ``sequential_id``: the persisted SequentialID read at opening (an upper bound of
    every LookupIdentifier handed out: a restart continues above it). The caller holds
    the store's batch lock around :meth:`run_batch` / :meth:`run_and_observe`.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        path: str | os.PathLike[str],
        space: SpaceGuard,
        stats: StoreStats,
        sequential_id: int,
        qm_quota: int | None,
    ) -> None:
        self._conn = conn
        self.path = Path(path)
        self.space = space
        self.stats = stats
        #: QueueManagerQuota (bytes; None: none), handed to every operation's context.
        self.qm_quota = qm_quota
        #: Where each group commit is reported (``observe_commit``); no-op by default.
        self.metrics: MetricsSink = NULL_METRICS
        #: Seconds a write waits for another connection's write lock (LOCK_WAIT).
        self.lock_wait = LOCK_WAIT
        # The persisted SequentialID bounds every LookupIdentifier handed out (reserved
        # in blocks): identifiers stay strictly increasing and are never reused, and
        # most commits skip the UPDATE.
        self._sequential_id = sequential_id
        self._reserved = sequential_id
        #: How long the last timed batch held the writer, and when it ended (monotonic s):
        #: the leader's wait bound (Store._gather) and the threads' return times.
        self.last_commit_seconds = 0.0
        self.last_commit_end = 0.0
        #: Consecutive timed batches that held one operation (Store.read_idle).
        self.lone_batches = 0
        # Savepoints, merged runs and the restart after a failure that dropped the
        # transaction; the first SQLITE_FULL runs the batch again in low-space mode.
        self._ops: SavepointRunner[WriteOp] = SavepointRunner(
            sqlite3.Error, _rollback, spend=space.spend, bare_lone_run=True
        )

    def after_interrupted(self) -> None:
        """An exception escaped a batch run in a caller's thread (KeyboardInterrupt reaches
        the main thread, maybe just after COMMIT returned and before the LookupIdentifier
        counter moved): roll back what is still open and continue numbering above the
        persisted reservation, which bounds every identifier a COMMIT could have made
        durable (gaps are allowed, reuse never: invariant 5)."""
        self._rollback()
        with contextlib.suppress(sqlite3.Error):
            row = self._conn.execute("SELECT sequential_id FROM qm_state").fetchone()
            if row is not None:
                self._sequential_id = self._reserved = max(self._sequential_id, int(row[0]))

    def run_and_observe(self, batch: list[WriteOp]) -> None:
        """:meth:`run_batch` timed: the duration feeds the leader's wait bound and metrics."""
        started = time.monotonic()
        queued = batch[0].queued  # the oldest operation (batches keep submission order)
        self.run_batch(batch)
        self.last_commit_end = time.monotonic()
        self.last_commit_seconds = self.last_commit_end - started
        self.stats.observe_hold(self.last_commit_seconds)
        self.lone_batches = self.lone_batches + 1 if len(batch) == 1 else 0
        self.metrics.observe_commit(len(batch), self.last_commit_seconds)
        self.metrics.observe_stage("store_queue_wait", started - queued)

    def run_batch(self, batch: list[WriteOp]) -> None:
        """Run ``batch`` in one transaction; complete every future after COMMIT.

        SQLite may roll back the whole transaction on SQLITE_FULL / SQLITE_IOERR; then
        the failing operation is failed alone and the rest of the batch is run again
        from the start (bounded: each restart removes one operation).
        """
        conn = self._conn
        pending = list(batch)
        merge = True
        space = self.space
        space.recover(conn)
        while pending:
            results: list[tuple[WriteOp, bool, Any]] = []
            try:
                self._begin(conn)
                self._take_over_reservation(conn)
            except sqlite3.Error as exc:
                if self._again_after(exc, pending):
                    continue
                return
            ctx = WriteContext(conn, self._sequential_id, self.qm_quota, space.low)
            ended = self._ops.run(ctx, pending, results, merge=merge)
            if isinstance(ended, Again):  # low-space mode, or SQLite dropped a merged run
                merge = merge and ended.merge
                continue
            if ended is not None:
                # SQLite rolled the whole transaction back: fail this op, rerun the others.
                self.stats.failed_ops += 1
                report_failure(ended.error, self.path, 1)
                ended.op.finish(False, storage_error(ended.error, self.path))
                pending = [o for o in pending if o is not ended.op]
                continue
            try:
                reserved = self._reserved
                if ctx.sequential_id > reserved:
                    reserved = ctx.sequential_id + LOOKUP_ID_BLOCK
                    conn.execute("UPDATE qm_state SET sequential_id = ? WHERE id = 1", (reserved,))
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                if self._again_after(exc, pending):
                    continue
                return
            self._sequential_id = ctx.sequential_id
            self._reserved = reserved
            self.stats.committed_lookup_id = ctx.sequential_id
            self.stats.batches += 1
            done = 0
            for op, ok, value in results:
                if not ok:
                    self.stats.failed_ops += 1
                    report_failure(value, self.path, 1)
                    op.finish(False, storage_error(value, self.path))
                elif op.future is None:  # WriteOp.finish for a caller of write(), inline
                    op.ok = True
                    op.value = value
                    op.done.release()
                    done += 1
                else:
                    op.finish(True, value)
                    done += 1
            self.stats.ops += done
            return

    def _begin(self, conn: sqlite3.Connection) -> None:
        """``BEGIN IMMEDIATE``: while another connection holds the write lock, try again
        every ``_LOCK_POLL`` seconds (SQLite's busy handler waits ``_BUSY_SLICE_MS`` per
        try), for ``lock_wait`` seconds at most; then SQLITE_BUSY propagates."""
        try:
            conn.execute("BEGIN IMMEDIATE")
            return
        except sqlite3.OperationalError as exc:
            if not is_busy(exc):
                raise
        deadline = time.monotonic() + self.lock_wait
        while True:
            time.sleep(_LOCK_POLL)
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if not is_busy(exc) or time.monotonic() >= deadline:
                    raise

    def _take_over_reservation(self, conn: sqlite3.Connection) -> None:
        """Inside the write transaction: when another connection to this file (another
        process on the same data directory: an application, the CLI) reserved
        LookupIdentifiers since this one last did, continue above its reservation.

        Each connection hands out identifiers from a block it reserved in
        ``qm_state.sequential_id``. Two connections working from their own blocks gave
        the same identifiers (the second commit failed on the primary key) or
        identifiers out of commit order, while readers that move past the highest
        identifier they saw (outgoing queues, remote and Spark readers) rely on later
        commits getting higher ones. One read of a one-row table per batch."""
        row = conn.execute("SELECT sequential_id FROM qm_state WHERE id = 1").fetchone()
        if row is not None and int(row[0]) != self._reserved:
            self._sequential_id = max(self._sequential_id, int(row[0]))
            self._reserved = self._sequential_id  # the commit reserves a new block

    def _rollback(self) -> None:
        _rollback(self._conn)

    def _again_after(self, exc: sqlite3.Error, pending: list[WriteOp]) -> bool:
        """After ``exc`` outside the operations (BEGIN, the reservation, COMMIT): roll
        back; True when the batch is to run again (the first SQLITE_FULL switches to
        low-space mode), else every pending operation fails with ``exc``."""
        self._rollback()
        if self.space.spend(exc):
            return True
        self._fail_all(pending, exc)
        return False

    def _fail_all(self, ops: list[WriteOp], exc: BaseException) -> None:
        report_failure(exc, self.path, len(ops))
        err = storage_error(exc, self.path)
        for op in ops:
            self.stats.failed_ops += 1
            op.finish(False, err)
