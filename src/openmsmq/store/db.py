"""The SQLite store: one writer at a time with group commit, WAL readers, error mapping.

Writes are *operations*: short functions ``op(ctx) -> result`` over a
:class:`WriteContext`. In threaded mode one *batch leader* at a time takes every
queued operation, runs them all inside ONE ``BEGIN IMMEDIATE … COMMIT`` (each inside
its own SAVEPOINT, so one failing operation does not abort the others) and completes
each caller's operation only after the COMMIT — with ``synchronous=FULL`` in WAL mode,
that is after the fsync. Concurrent commits thus share one fsync (group commit, DESIGN
invariant 2). The leader is a caller of :meth:`Store.write` (leader/follower: the
caller that finds no batch running leads, callers arriving meanwhile wait and the
first of them leads the next batch), or the writer thread when only :meth:`Store.submit`
callers wait.

In synchronous mode (``threaded=False``) there is no thread: :meth:`Store.submit`
runs the operation as a batch of one in the caller's thread, so a deterministic
simulator can drive the store.

Reads run on per-thread read-only connections (WAL readers never block the writer).

This module decides who leads a batch and which operations it takes; running the batch
in one transaction (savepoints, restarts, the LookupIdentifier reservation) is
:class:`~openmsmq.store.batches.BatchRunner`'s.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from _thread import allocate_lock as _allocate_lock
from _thread import get_ident as _get_ident
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from openmsmq.datadir import check_private, private_file
from openmsmq.errors import HResult, MQError, StorageError
from openmsmq.observability.sink import MetricsSink
from openmsmq.store.batches import BUSY_SLICE_MS, BatchRunner
from openmsmq.store.schema import APPLICATION_ID, SCHEMA_VERSION, migrate
from openmsmq.store.space import RESERVE_FILE, SpaceGuard, SpaceReserve
from openmsmq.store.writes import (
    Returns,
    StoreStats,
    WriteContext,
    WriteOp,
    is_busy,
    report_failure,
    storage_error,
)

__all__ = ["Store"]

T = TypeVar("T")

_SQLITE_HEADER = b"SQLite format 3\x00"
#: The SQLite synchronous modes a store accepts (store.synchronous).
_SYNCHRONOUS = ("FULL", "EXTRA", "NORMAL", "OFF")


#: Batches run without waiting after a wait that brought nobody.
_WAIT_BACKOFF = 16
#: Consecutive batches of one operation after which the store counts as used by a lone
#: committer (Store.read_idle).
_LONE_BATCHES = 4


def _nothing(ctx: WriteContext) -> None:
    """A write operation that writes nothing (:meth:`Store.wait_for_queued`)."""


class Store:
    """An openmsmq store file.

    ``Store(path)`` opens (creating if needed) the database, refuses a foreign,
    garbage or corrupted file with :class:`~openmsmq.errors.StorageError`, applies
    migrations and, when ``threaded`` (the default), starts the writer thread.
    ``disk_reserve``: bytes of disk held back for removals on a full disk
    (:mod:`openmsmq.store.space`; None: keep the reserve file that is there, create none).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        threaded: bool = True,
        integrity_check: bool = True,
        cache_kib: int = 16384,
        max_commit_wait: float = 0.002,
        inline_commit: bool = True,
        synchronous: str = "FULL",
        max_batch_ops: int = 1024,
        qm_quota: int | None = None,
        disk_reserve: int | None = None,
    ) -> None:
        if synchronous not in _SYNCHRONOUS:
            raise ValueError(f"synchronous must be one of {', '.join(_SYNCHRONOUS)}")
        #: ``PRAGMA synchronous`` of the write connection: FULL / EXTRA make every commit
        #: durable when it returns (invariant 2); NORMAL / OFF do not.
        self.synchronous = synchronous
        #: Most operations one batch (one COMMIT, one fsync) takes; the rest wait for the
        #: next batch, in order (store.group_commit_max_batch).
        self.max_batch_ops = max(1, max_batch_ops)
        self.path = Path(path)
        self.threaded = threaded
        self.stats = StoreStats()
        #: Longest time (s) a batch leader waits for committers of the previous batch.
        self.max_commit_wait = max_commit_wait
        #: Callers of :meth:`write` lead batches in their own threads (leader/follower);
        #: False hands every batch to the writer thread.
        self.inline_commit = inline_commit
        self._cache_kib = cache_kib
        self._closed = False
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        #: Held by whoever runs a batch: the batch leader (a caller of :meth:`write` or
        #: the writer thread) or (``threaded=False``) the submitting caller.
        self._sync_lock = threading.Lock()
        #: Guards the group-commit state below (held for a few lines, never across SQL).
        self._lf_lock = threading.Lock()
        #: Operations submitted and not taken into a batch yet, in submission order.
        self._pending: list[WriteOp] = []
        #: True while some thread holds the batch leader's role (running batches, or
        #: handed the role and not started yet); False only when ``_pending`` is empty.
        self._leading = False
        #: Threads the leader waits for (those of the previous batch not arrived yet) and
        #: the lock the last of them releases; None when no leader waits.
        self._awaited: set[int] | None = None
        self._arrived: Any = None
        #: Threads whose operations were in the last batch, and how soon threads come back.
        self._last_threads: set[int] = set()
        self._returns = Returns()
        #: Batches still to run without waiting (after a wait that brought nobody).
        self._backoff = 0
        #: The main thread (KeyboardInterrupt lands there): it leads only a batch of its
        #: own operation and is never handed the role (see :meth:`write`).
        self._main_ident = threading.main_thread().ident
        #: Released to hand the leader's role to the writer thread.
        self._wake = _allocate_lock()
        self._wake.acquire()
        self._stopping = False
        self._check_header()
        # Created 0600 before SQLite opens it: SQLite gives the -wal and -shm files the
        # database's mode, and the umask would leave all three readable by every user.
        private_file(self.path)
        check_private(self.path.parent, (self.path.name, self.path.name + "-wal", self.path.name + "-shm"))
        #: Low-space mode and the space reserve (openmsmq.store.space).
        self.space = SpaceGuard(SpaceReserve(self.path.with_name(RESERVE_FILE), disk_reserve))
        self.space.open()
        try:
            self._conn = self._connect()
        except sqlite3.Error as exc:
            raise self._corrupt(f"cannot open: {exc}") from exc
        try:
            self._open_checks(integrity_check)
            migrate(self._conn)
            row = self._conn.execute("SELECT sequential_id FROM qm_state").fetchone()
        except sqlite3.Error as exc:
            self._conn.close()
            raise self._corrupt(str(exc)) from exc
        except BaseException:
            self._conn.close()
            raise
        #: Runs each batch in one transaction; owns the LookupIdentifier counter.
        self._batches = BatchRunner(
            self._conn, self.path, self.space, self.stats, int(row[0]) if row else 0, qm_quota
        )
        self._conn.execute(f"PRAGMA busy_timeout={BUSY_SLICE_MS}")  # see batches.LOCK_WAIT
        self._thread: threading.Thread | None = None
        if threaded:
            self._thread = threading.Thread(
                target=self._writer_loop, name="openmsmq-store-writer", daemon=True
            )
            self._thread.start()

    @property
    def qm_quota(self) -> int | None:
        """QueueManagerQuota (bytes; None: none): an enqueue that would take all queues
        together past it fails (MS-MQDMPR 3.1.7.1.9 status 2; store.qm_quota)."""
        return self._batches.qm_quota

    @qm_quota.setter
    def qm_quota(self, value: int | None) -> None:
        self._batches.qm_quota = value

    @property
    def metrics(self) -> MetricsSink:
        """Where the writer reports each group commit (``observe_commit``); no-op by default."""
        return self._batches.metrics

    @metrics.setter
    def metrics(self, sink: MetricsSink) -> None:
        self._batches.metrics = sink

    @property
    def lock_wait(self) -> float:
        """Seconds a write waits for another connection's write lock
        (:data:`~openmsmq.store.batches.LOCK_WAIT`)."""
        return self._batches.lock_wait

    @lock_wait.setter
    def lock_wait(self, seconds: float) -> None:
        self._batches.lock_wait = seconds

    # ---- opening ---------------------------------------------------------------------

    def _corrupt(self, what: str) -> StorageError:
        err = MQError(HResult.MQ_ERROR_MESSAGE_STORAGE_FAILED, f"store {self.path}: {what}")
        assert isinstance(err, StorageError)
        return err

    def _check_header(self) -> None:
        try:
            with open(self.path, "rb") as f:
                head = f.read(len(_SQLITE_HEADER))
        except FileNotFoundError:
            return
        except OSError as exc:
            raise self._corrupt(f"cannot read: {exc}") from exc
        if head and head != _SQLITE_HEADER:
            raise self._corrupt("not an openmsmq store: the file is not an SQLite database")

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30.0)
        mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            conn.close()
            raise self._corrupt(f"cannot switch to WAL mode (got {mode!r})")
        conn.execute(f"PRAGMA synchronous={self.synchronous}")  # one of _SYNCHRONOUS
        conn.execute(f"PRAGMA cache_size=-{int(self._cache_kib)}")
        # Debian's SQLite is built with SECURE_DELETE (secure_delete=1 by default): every
        # page a DELETE frees is overwritten with zeros and written to the WAL. FAST
        # (SQLite's own default build is 0) still zeroes deleted cells on the pages a
        # DELETE writes anyway, but leaves freed pages as they are until reused: a large
        # release writes about half the WAL and its COMMIT takes much less CPU
        # (docs/store.md).
        conn.execute("PRAGMA secure_delete=FAST")
        return conn

    def _open_checks(self, integrity_check: bool) -> None:
        conn = self._conn
        app_id = int(conn.execute("PRAGMA application_id").fetchone()[0])
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        tables = conn.execute("SELECT count(*) FROM sqlite_master").fetchone()[0]
        if app_id != APPLICATION_ID and (version != 0 or tables != 0):
            raise self._corrupt(
                f"not an openmsmq store: SQLite database of another application (application_id={app_id:#x})"
            )
        if version > SCHEMA_VERSION:
            # Its rows may be in a layout this version cannot read (schema 6 changed props):
            # refuse before anything reads or writes them.
            raise self._corrupt(
                f"written by a newer openmsmq (store schema {version}; this version reads up to"
                f" {SCHEMA_VERSION}): open it with that version or a later one; nothing was changed"
            )
        if integrity_check:
            rows = [r[0] for r in conn.execute("PRAGMA quick_check(20)").fetchall()]
            if rows != ["ok"]:
                raise self._corrupt("corrupted (PRAGMA quick_check): " + "; ".join(map(str, rows)))

    # ---- writes ----------------------------------------------------------------------

    def submit(self, fn: Callable[[WriteContext], T]) -> Future[T]:
        """Queue a write operation; the future completes once it is durable (or failed).

        In threaded mode the operation joins the next batch (the writer thread runs it
        when no caller of :meth:`write` is leading); in synchronous mode it runs now, in
        the caller's thread.
        """
        future: Future[T] = Future()
        op = WriteOp(fn, future)
        if not self.threaded:
            if self._closed:
                raise self._closed_error()
            with self._sync_lock:
                self._batches.run_batch([op])
            return future
        with self._lf_lock:
            if self._closed:
                raise self._closed_error()
            wake = self._queue_op(op)
        if wake is not None:
            wake.release()
        return future

    def _closed_error(self) -> MQError:
        return MQError(HResult.MQ_ERROR_SERVICE_NOT_AVAILABLE, f"store {self.path} is closed")

    def _queue_op(self, op: WriteOp) -> Any:
        """(under ``_lf_lock``) Append ``op`` to the pending operations; return the lock to
        release afterwards: the leader's if ``op`` was the last thread it waited for, the
        writer's if no one leads (it becomes the leader), else None."""
        self._pending.append(op)
        awaited = self._awaited
        if awaited is not None and op.thread in awaited:
            awaited.discard(op.thread)
            if not awaited:
                self._awaited = None
                return self._arrived
            return None
        if self._leading:
            return None
        self._leading = True
        return self._wake

    def write(self, fn: Callable[[WriteContext], T]) -> T:
        """Run a write operation and wait until it is durable; return its result.

        Leader/follower group commit: a caller that finds no batch running becomes the
        batch leader and runs the batch in its own thread (the same ``BEGIN IMMEDIATE
        ... COMMIT`` under the same lock for every leader); callers arriving meanwhile
        queue their operations and sleep on a bare lock. After its COMMIT (durable) the
        leader completes the batch's operations, hands the role to the first queued
        caller (which wakes and runs everything queued by then as the next batch, its
        own operation included) and returns. So no operation goes through a separate
        writer thread unless only :meth:`submit` callers are queued (or
        ``inline_commit=False``), and a lone committer never waits for a wake-up.
        Order is kept: batches run one at a time, in submission order. The main thread
        leads only a batch of its own operation and is never handed the role, so a
        KeyboardInterrupt cannot strand other callers' operations.
        """
        if not self.threaded:
            op = WriteOp(fn)
            if self._closed:
                raise self._closed_error()
            with self._sync_lock:
                self._batches.run_batch([op])
            return op.wait()  # type: ignore[no-any-return]
        op = WriteOp(fn)
        with self._lf_lock:
            if self._closed:
                raise self._closed_error()
            if self._leading and self._awaited is None:  # _queue_op's usual case, inline
                self._pending.append(op)
                wake = None
                lead = False
            elif self._leading or not self.inline_commit:
                wake = self._queue_op(op)
                lead = False
            else:
                self._leading = True
                lead = True
        if not lead:
            if wake is not None:
                wake.release()
            op.done.acquire()
            if not op.lead:
                if op.ok:
                    return op.value  # type: ignore[no-any-return]
                raise op.value
            batch: list[WriteOp] = []  # promoted: op is pending and joins this batch
        else:
            batch = [op]
        self._lead(batch, writer=False)
        # op completed in this thread's batch (finish released its lock).
        if op.ok:
            return op.value  # type: ignore[no-any-return]
        raise op.value

    def write_many(self, fns: Sequence[Callable[[WriteContext], Any]]) -> list[Future[Any]]:
        """Submit several operations at once (they usually share one COMMIT)."""
        return [self.submit(fn) for fn in fns]

    def write_each(self, fns: Sequence[Callable[[WriteContext], Any]]) -> list[Any]:
        """Run independent operations and wait until they are durable: one is written by
        this thread (:meth:`write`), several are submitted together (:meth:`write_many`)
        so that they share a COMMIT, each in its own savepoint. One item per operation:
        its result, or the :class:`MQError` it failed with (one failing leaves the
        others; any other exception propagates)."""
        if len(fns) == 1:
            try:
                return [self.write(fns[0])]
            except MQError as exc:
                return [exc]
        out: list[Any] = []
        for future in self.write_many(fns):
            try:
                out.append(future.result())
            except MQError as exc:
                out.append(exc)
        return out

    def wait_for_queued(self) -> None:
        """Return once every write operation queued or running when it was called has
        committed (or failed); at once when none is.

        For a caller whose next write must not share a transaction with the operations
        queued before it: a write queued just after a COMMIT joins the next batch when it
        comes before that batch's leader took the queued operations, and they then wait
        for its work too. A release turn calls it so that the commits queued behind one
        turn commit before the next turn runs (docs/transfer.md, "Release at A")."""
        if not self.threaded:
            return  # every operation ran in its caller's thread
        with self._lf_lock:
            if not self._leading:  # nothing queued (queued operations keep a leader)
                return
        self.write(_nothing)

    def _writer_loop(self) -> None:
        """The writer thread: leads when handed the role (only :meth:`submit` callers
        queued, or ``inline_commit=False``), running batches until none is pending."""
        while True:
            self._wake.acquire()
            if self._stopping:
                return
            self._lead([], writer=True)

    def _lead(self, batch: list[WriteOp], *, writer: bool) -> None:
        """Run batches as the leader; ``batch`` holds what the role was taken with.

        Takes every pending operation into the batch; then, if the previous batch was
        shared by several threads and some of them (released by its COMMIT) have not
        submitted again yet, waits for them a short bounded time — at most
        ``max_commit_wait`` and at most half the last COMMIT's duration — on a lock the
        last of them releases, so steady concurrent committers share one fsync instead
        of alternating between two half-full ones; not for a thread that came back later
        than that the last time (:class:`~openmsmq.store.writes.Returns`): waiting for
        it would only delay the batch and the delivery it makes durable. A wait that
        brings nobody (say one client hopping between pool threads) turns waiting off for
        the next ``_WAIT_BACKOFF`` batches. After the batch a caller hands the role on
        (:meth:`_hand_off`) and returns; the writer thread keeps leading until nothing is
        pending.
        """
        main = not writer and _get_ident() == self._main_ident
        while True:
            try:
                threads = {batch[0].thread} if main else self._gather(batch)
                with self._sync_lock:
                    try:
                        self._batches.run_and_observe(batch)
                    except BaseException:
                        self._batches.after_interrupted()
                        raise
            except BaseException:
                self._hand_off()
                raise
            self._last_threads = threads
            self._returns.committed(threads, self._batches.last_commit_end)
            if writer:
                with self._lf_lock:
                    if self._pending:
                        batch = []
                        continue
                    self._leading = False
                return
            self._hand_off()
            return

    def _gather(self, batch: list[WriteOp]) -> set[int]:
        """Move every pending operation into ``batch``, waiting (bounded) for the threads
        of the previous batch (see :meth:`_lead`); return the threads in the batch."""
        cap = self.max_batch_ops
        with self._lf_lock:
            if self._pending:
                self._take_pending(batch, cap)
            threads = {o.thread for o in batch}
            self._returns.taken(batch, min(self.max_commit_wait, self._batches.last_commit_seconds / 2))
            missing = self._last_threads - threads - self._returns.slow
            arrived = None
            if self._backoff:
                self._backoff -= 1
            elif (
                missing
                and len(self._last_threads) > 1
                and self.max_commit_wait > 0
                and not self._closed
                and not self._pending
            ):
                # Only after a batch that several committers shared: they commit
                # concurrently and may split into alternating half-batches. The thread of
                # a lone committer's batch is not blocked on this one, so waiting for it
                # would only delay this batch (and the delivery it makes durable).
                # (A batch that left operations pending is full: no wait for more.)
                arrived = self._arrived = _allocate_lock()
                arrived.acquire()
                self._awaited = missing
                self.stats.commit_waits += 1
        if arrived is not None:
            timeout = min(self.max_commit_wait, self._batches.last_commit_seconds / 2)
            if timeout > 0:
                arrived.acquire(timeout=timeout)
            with self._lf_lock:
                self._awaited = None
                before = len(batch)
                self._take_pending(batch, cap)
                came = batch[before:]
            if came:
                threads.update(o.thread for o in came)
            else:  # nobody came: waiting does not pay now
                self._backoff = _WAIT_BACKOFF
        return threads

    def _take_pending(self, batch: list[WriteOp], cap: int) -> None:
        """(under ``_lf_lock``) Move pending operations, oldest first, into ``batch`` up to
        ``cap`` operations in it; the rest stay pending for the next batch."""
        room = cap - len(batch)
        if len(self._pending) <= room:
            batch += self._pending
            self._pending = []
        elif room > 0:
            batch += self._pending[:room]
            del self._pending[:room]

    def _hand_off(self) -> None:
        """Give up the leader's role: to the first queued caller of :meth:`write` (not the
        main thread), else to the writer thread; or drop it when nothing is pending."""
        with self._lf_lock:
            if not self._pending:
                self._leading = False
                return
            nxt = None
            if self.inline_commit:
                main = self._main_ident
                for o in self._pending:
                    if o.future is None and o.thread != main:
                        nxt = o
                        break
            if nxt is not None:
                nxt.lead = True
                wake = nxt.done
            else:
                wake = self._wake
        wake.release()

    def set_size_limit(self, max_bytes: int | None) -> None:
        """Cap the database size (``PRAGMA max_page_count``); ``None`` lifts the cap.

        Writes that would grow the file past it fail with MQ_ERROR_INSUFFICIENT_RESOURCES
        exactly as on a full disk.
        """

        def op(ctx: WriteContext) -> None:
            page = int(ctx.conn.execute("PRAGMA page_size").fetchone()[0])
            pages = 0xFFFFFFFE if max_bytes is None else max(1, max_bytes // page)
            ctx.conn.execute(f"PRAGMA max_page_count = {int(pages)}")

        self.write(op)

    # ---- reads -----------------------------------------------------------------------

    def reader(self) -> sqlite3.Connection:
        """This thread's read-only connection (created on first use)."""
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            if self._closed:
                raise MQError(HResult.MQ_ERROR_SERVICE_NOT_AVAILABLE, f"store {self.path} is closed")
            conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30.0)
            conn.execute("PRAGMA query_only=1")
            conn.execute("PRAGMA cache_size=-8192")
            self._local.conn = conn
            with self._readers_lock:
                self._readers.append(conn)
        return conn

    def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn`` on this thread's read connection, mapping SQLite errors."""
        try:
            return fn(self.reader())
        except sqlite3.Error as exc:
            report_failure(exc, self.path, 1, "read")
            raise storage_error(exc, self.path) from exc

    def read_idle(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """:meth:`read`, run on the write connection instead when the store is idle and
        used by a lone committer (callers of :meth:`write` lead their own batches, the
        last ``_LONE_BATCHES`` batches held one operation each, nobody holds the leader's
        role and the batch lock is free): under that lock, so no transaction is open on
        the connection and it sees what is committed, as a new read connection's snapshot
        would. A caller that becomes leader meanwhile waits for the read to end. ``fn``
        must return only values, never a live cursor.

        In WAL mode a connection discards its whole page cache at the start of a read
        when another connection has committed since its last one; the writer's cache
        holds the pages its own commits wrote. A head read after each commit otherwise
        re-reads every page it touches (``pread64`` calls per commit, as strace shows,
        fall by more than half with this; docs/store.md). Anything else (concurrent committers, a
        running batch) reads on this thread's read connection, as :meth:`read`.
        """
        if (
            self.inline_commit
            and self.threaded
            and self._batches.lone_batches >= _LONE_BATCHES
            and not self._closed
            and self._sync_lock.acquire(blocking=False)
        ):
            try:
                with self._lf_lock:
                    idle = not self._leading
                if idle and not self._closed and not self._conn.in_transaction:
                    try:
                        return fn(self._conn)
                    except sqlite3.Error as exc:
                        # The write connection waits only BUSY_SLICE_MS for a lock
                        # (another process recovering the WAL, say): the read connection
                        # waits as long as any read.
                        if not is_busy(exc):
                            raise storage_error(exc, self.path) from exc
            finally:
                self._sync_lock.release()
        return self.read(fn)

    # ---- lifecycle -------------------------------------------------------------------

    def close(self) -> None:
        """Close the store after every accepted operation completed; refuse new ones."""
        with self._lf_lock:
            if self._closed:
                return
            self._closed = True
        if self._thread is not None:
            # Every operation accepted before _closed was set completes first: wait until
            # no leader is left (then nothing is pending), and keep the role.
            while True:
                with self._lf_lock:
                    if not self._leading:
                        self._leading = True
                        break
                time.sleep(0.001)
            self._stopping = True
            self._wake.release()
            self._thread.join()
        with self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
        # (No batch can run now: close holds the leader's role.)
        with self._sync_lock:
            self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
