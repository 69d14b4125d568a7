"""The SQLite store: one writer with group commit, WAL readers, error mapping.

Writes are *operations*: short functions ``op(ctx) -> result`` over a
:class:`WriteContext`. In threaded mode a writer thread runs the batches;
it drains every queued operation, runs them all inside ONE ``BEGIN IMMEDIATE …
COMMIT`` (each inside its own SAVEPOINT, so one failing operation does not abort the
others) and completes each caller's future only after the COMMIT — with
``synchronous=FULL`` in WAL mode, that is after the fsync. Concurrent commits thus
share one fsync (group commit, DESIGN invariant 2). A lone committer calling
:meth:`Store.write` on an idle store runs its batch of one in its own thread instead,
under the same lock, with the same durability (see :meth:`Store.write`).

In synchronous mode (``threaded=False``) there is no thread: :meth:`Store.submit`
runs the operation as a batch of one in the caller's thread, so a deterministic
simulator can drive the store.

Reads run on per-thread read-only connections (WAL readers never block the writer).
"""

from __future__ import annotations

import contextlib
import os
import queue
import sqlite3
import threading
import time
from _thread import allocate_lock as _allocate_lock
from _thread import get_ident as _get_ident
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from openmsmq.errors import HResult, MQError, StorageError
from openmsmq.observability.sink import NULL_METRICS, MetricsSink
from openmsmq.store.schema import APPLICATION_ID, migrate

__all__ = ["LOOKUP_ID_BLOCK", "Store", "StoreStats", "WriteContext", "storage_error"]

T = TypeVar("T")

_SQLITE_HEADER = b"SQLite format 3\x00"
_SQLITE_FULL = 13
#: LookupIdentifiers reserved per persisted SequentialID update (a restart skips the rest).
LOOKUP_ID_BLOCK = 65536


def storage_error(exc: BaseException, path: str | os.PathLike[str]) -> BaseException:
    """Map an SQLite error to the MSMQ error the caller sees; pass others through.

    SQLITE_FULL (disk or size limit full) → MQ_ERROR_INSUFFICIENT_RESOURCES; every
    other SQLite failure (I/O error, corruption, …) → MQ_ERROR_MESSAGE_STORAGE_FAILED.
    """
    if isinstance(exc, sqlite3.Error):
        code = (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF
        if code == _SQLITE_FULL:
            return MQError(HResult.MQ_ERROR_INSUFFICIENT_RESOURCES, f"store {path} is full: {exc}")
        return MQError(HResult.MQ_ERROR_MESSAGE_STORAGE_FAILED, f"store {path}: {exc}")
    return exc


@dataclass
class StoreStats:
    """Counters of the writer: ``batches`` = COMMITs (fsyncs), ``ops`` = operations committed."""

    batches: int = 0
    ops: int = 0
    failed_ops: int = 0

    @property
    def ops_per_batch(self) -> float:
        """Average number of operations that shared one COMMIT (one fsync)."""
        return self.ops / self.batches if self.batches else 0.0


class WriteContext:
    """What a write operation sees: the write connection and the LookupIdentifier counter.

    Only the writer creates it; operations must use parameterised SQL on ``conn``.
    """

    def __init__(self, conn: sqlite3.Connection, sequential_id: int) -> None:
        self.conn = conn
        self._sequential_id = sequential_id

    @property
    def sequential_id(self) -> int:
        """QueueManager.SequentialID: the last LookupIdentifier handed out."""
        return self._sequential_id

    def alloc_lookup_ids(self, count: int) -> int:
        """Reserve ``count`` consecutive LookupIdentifiers; return the first.

        Identifiers taken by an operation that later fails are simply skipped (gaps are
        allowed, reuse is not: invariant 5). The counter is persisted with the batch.
        """
        first = self._sequential_id + 1
        self._sequential_id += count
        return first


class _Op:
    """A queued operation and how its caller learns the outcome.

    :meth:`Store.write` waits on ``done``, a bare lock held from creation and released
    by :meth:`finish`: one C-level acquire to block and one release to wake, instead of a
    ``Future`` (a ``Condition`` with an ``RLock`` and a waiter lock per wait, about 30
    Python calls per commit). :meth:`Store.submit` callers get a ``future`` instead.
    """

    __slots__ = ("done", "fn", "future", "ok", "thread", "value")

    def __init__(self, fn: Callable[[WriteContext], Any], future: Future[Any] | None = None) -> None:
        self.fn = fn
        self.future = future
        self.ok = False
        self.value: Any = None
        self.done: Any = None
        if future is None:
            self.done = _allocate_lock()
            self.done.acquire()
        #: Submitting thread: the writer waits briefly for the threads of the previous
        #: batch (see Store._writer_loop).
        self.thread = _get_ident()

    def finish(self, ok: bool, value: Any) -> None:
        """Complete the operation: its result (``ok``) or the exception to raise."""
        if self.future is not None:
            if ok:
                self.future.set_result(value)
            else:
                self.future.set_exception(value)
            return
        self.ok = ok
        self.value = value
        self.done.release()

    def wait(self) -> Any:
        """Block until :meth:`finish`; return the result or raise the exception."""
        self.done.acquire()
        if self.ok:
            return self.value
        raise self.value


_STOP = object()
#: Batches the writer commits without waiting after a wait that brought nobody.
_WAIT_BACKOFF = 16
#: Batches of one operation in a row after which an idle store lets the caller of
#: :meth:`Store.write` run its operation itself (a lone committer).
_LONE_BATCHES = 4


class Store:
    """An openmsmq store file.

    ``Store(path)`` opens (creating if needed) the database, refuses a foreign,
    garbage or corrupted file with :class:`~openmsmq.errors.StorageError`, applies
    migrations and, when ``threaded`` (the default), starts the writer thread.
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
    ) -> None:
        self.path = Path(path)
        self.threaded = threaded
        self.stats = StoreStats()
        #: Where the writer reports each group commit (``observe_commit``); no-op by default.
        self.metrics: MetricsSink = NULL_METRICS
        #: Longest time (s) the writer waits for committers of the previous batch.
        self.max_commit_wait = max_commit_wait
        #: A lone committer runs its batch in its own thread when the store is idle
        #: (:meth:`write`); False always hands operations to the writer thread.
        self.inline_commit = inline_commit
        self._last_commit_seconds = 0.0
        self._cache_kib = cache_kib
        self._closed = False
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        #: Held by whoever runs a batch: the writer thread, a caller of :meth:`write` that
        #: found the store idle, or (``threaded=False``) the submitting caller.
        self._sync_lock = threading.Lock()
        #: Operations handed to the writer thread and not completed yet (``_inflight_lock``).
        self._inflight = 0
        #: Batches of one operation in a row (writer or caller); see :meth:`write`.
        self._lone_batches = 0
        self._inflight_lock = threading.Lock()
        self._check_header()
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
        # The persisted SequentialID is an upper bound of every LookupIdentifier handed
        # out (reserved in blocks): a restart continues above it, so identifiers stay
        # strictly increasing and are never reused, and most commits skip the UPDATE.
        self._sequential_id = int(row[0]) if row else 0
        self._reserved = self._sequential_id
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        if threaded:
            self._thread = threading.Thread(
                target=self._writer_loop, name="openmsmq-store-writer", daemon=True
            )
            self._thread.start()

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
        conn.execute("PRAGMA synchronous=FULL")
        conn.execute(f"PRAGMA cache_size=-{int(self._cache_kib)}")
        # Debian's SQLite is built with SECURE_DELETE (secure_delete=1 by default): every
        # page a DELETE frees is overwritten with zeros and written to the WAL. FAST
        # (SQLite's own default build is 0) still zeroes deleted cells on the pages a
        # DELETE writes anyway, but leaves freed pages as they are until reused: A's
        # release of 100,000 retained 256-byte messages wrote 55 MB of WAL with 1, 29 MB
        # with FAST, and its COMMIT took 95 ms of CPU instead of 56 (docs/store.md).
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
        if integrity_check:
            rows = [r[0] for r in conn.execute("PRAGMA quick_check(20)").fetchall()]
            if rows != ["ok"]:
                raise self._corrupt("corrupted (PRAGMA quick_check): " + "; ".join(map(str, rows)))

    # ---- writes ----------------------------------------------------------------------

    def submit(self, fn: Callable[[WriteContext], T]) -> Future[T]:
        """Queue a write operation; the future completes once it is durable (or failed).

        In synchronous mode the operation runs now, in the caller's thread.
        """
        if self._closed:
            raise MQError(HResult.MQ_ERROR_SERVICE_NOT_AVAILABLE, f"store {self.path} is closed")
        future: Future[T] = Future()
        self._enqueue(_Op(fn, future))
        return future

    def _enqueue(self, op: _Op) -> None:
        if self.threaded:
            with self._inflight_lock:
                self._inflight += 1
            self._queue.put(op)
        else:
            with self._sync_lock:
                self._run_batch([op])

    def write(self, fn: Callable[[WriteContext], T]) -> T:
        """Run a write operation and wait until it is durable; return its result.

        When the store is idle (no batch running, nothing handed to the writer thread and
        not completed) and the last ``_LONE_BATCHES`` batches held one operation each (no
        concurrent committers: those are left to the writer's group commit, which a
        batch of one run here would split), the caller runs the operation as a batch of
        one itself instead of handing it to the writer thread and sleeping until
        it is woken: the same ``BEGIN IMMEDIATE ... COMMIT`` under the same lock the
        writer takes, returning after the COMMIT (durable), without the two thread
        switches. Order is kept: an operation runs here only when every earlier
        submitted one has completed.
        """
        if (
            self.inline_commit
            and self.threaded
            and self._lone_batches >= _LONE_BATCHES
            and not self._closed
            and self._sync_lock.acquire(blocking=False)
        ):
            try:
                with self._inflight_lock:
                    idle = self._inflight == 0
                if idle:
                    op = _Op(fn)
                    try:
                        self._run_and_observe([op])
                    except BaseException:
                        self._after_interrupted_batch()
                        raise
                    result: T = op.wait()
                    return result
            finally:
                self._sync_lock.release()
        if self._closed:
            raise MQError(HResult.MQ_ERROR_SERVICE_NOT_AVAILABLE, f"store {self.path} is closed")
        op = _Op(fn)
        self._enqueue(op)
        return op.wait()  # type: ignore[no-any-return]

    def write_many(self, fns: Sequence[Callable[[WriteContext], Any]]) -> list[Future[Any]]:
        """Submit several operations at once (they usually share one COMMIT)."""
        return [self.submit(fn) for fn in fns]

    def _writer_loop(self) -> None:
        """Group commit. Drain everything queued into one batch; then, if threads that
        were in the previous batch (and were just released by its COMMIT) have not
        submitted again yet, wait for them a short bounded time — at most
        ``max_commit_wait`` and at most the duration of the last COMMIT — so steady
        concurrent committers share one fsync instead of alternating between two
        half-full ones. A lone committer never waits (its thread is in the batch). When a
        wait brings no operation at all (say one client hopping between pool threads),
        the writer does not wait again for the next ``_WAIT_BACKOFF`` batches,
        so such a client pays at most one short wait in that many commits."""
        stop = False
        last_threads: set[int] = set()
        backoff = 0
        while not stop:
            first = self._queue.get()
            if first is _STOP:
                break
            batch = [first]
            stop = self._drain(batch)
            threads = {op.thread for op in batch}
            missing = len(last_threads - threads)
            if backoff:
                backoff -= 1
            elif missing and not stop and self.max_commit_wait > 0:
                size = len(batch)
                deadline = time.monotonic() + min(self.max_commit_wait, self._last_commit_seconds / 2)
                while missing > 0:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    try:
                        item = self._queue.get(timeout=remaining)
                    except queue.Empty:
                        break
                    if item is _STOP:
                        stop = True
                        break
                    batch.append(item)
                    if item.thread in last_threads and item.thread not in threads:
                        missing -= 1
                    threads.add(item.thread)
                if len(batch) == size:  # nothing at all came: waiting does not pay now
                    backoff = _WAIT_BACKOFF
                if not stop:
                    stop = self._drain(batch)
                    threads.update(op.thread for op in batch)
            with self._sync_lock:
                self._run_and_observe(batch)
            with self._inflight_lock:
                self._inflight -= len(batch)
            last_threads = threads

    def _after_interrupted_batch(self) -> None:
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

    def _run_and_observe(self, batch: list[_Op]) -> None:
        """:meth:`_run_batch` timed: the duration feeds the writer's wait bound and metrics."""
        started = time.monotonic()
        self._run_batch(batch)
        self._last_commit_seconds = time.monotonic() - started
        self._lone_batches = self._lone_batches + 1 if len(batch) == 1 else 0
        self.metrics.observe_commit(len(batch), self._last_commit_seconds)

    def _drain(self, batch: list[Any]) -> bool:
        """Move everything queued into ``batch``; True if the stop marker was met."""
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return False
            if item is _STOP:
                return True
            batch.append(item)

    def _run_batch(self, batch: list[_Op]) -> None:
        """Run ``batch`` in one transaction; complete every future after COMMIT.

        SQLite may roll back the whole transaction on SQLITE_FULL / SQLITE_IOERR; then
        the failing operation is failed alone and the rest of the batch is run again
        from the start (bounded: each restart removes one operation).
        """
        conn = self._conn
        pending = list(batch)
        merge = True
        while pending:
            ctx = WriteContext(conn, self._sequential_id)
            results: list[tuple[_Op, bool, Any]] = []
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                self._fail_all(pending, exc)
                return
            restart = False
            todo = self._merge_runs(ctx, pending, results) if merge else pending
            if todo is None:  # SQLite dropped the transaction inside a merged run
                merge = False
                continue
            # A lone operation needs no savepoint: if it fails, the whole (one-op)
            # transaction is rolled back below.
            savepoints = len(pending) > 1
            for op in todo:
                try:
                    if savepoints:
                        conn.execute("SAVEPOINT op")
                    value = op.fn(ctx)
                    if savepoints:
                        conn.execute("RELEASE op")
                    results.append((op, True, value))
                except BaseException as exc:
                    if not savepoints:
                        self._rollback()
                    elif conn.in_transaction:
                        try:
                            conn.execute("ROLLBACK TO op")
                            conn.execute("RELEASE op")
                        except sqlite3.Error:
                            self._rollback()
                    if not conn.in_transaction:
                        # The whole transaction is gone: fail this op, rerun the others.
                        self.stats.failed_ops += 1
                        op.finish(False, storage_error(exc, self.path))
                        pending = [o for o in pending if o is not op]
                        restart = True
                        break
                    results.append((op, False, exc))
            if restart:
                continue
            try:
                reserved = self._reserved
                if ctx.sequential_id > reserved:
                    reserved = ctx.sequential_id + LOOKUP_ID_BLOCK
                    conn.execute("UPDATE qm_state SET sequential_id = ? WHERE id = 1", (reserved,))
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                self._rollback()
                self._fail_all(pending, exc)
                return
            self._sequential_id = ctx.sequential_id
            self._reserved = reserved
            self.stats.batches += 1
            for op, ok, value in results:
                if ok:
                    self.stats.ops += 1
                    op.finish(True, value)
                else:
                    self.stats.failed_ops += 1
                    op.finish(False, storage_error(value, self.path))
            return

    def _merge_runs(
        self, ctx: WriteContext, pending: list[_Op], results: list[tuple[_Op, bool, Any]]
    ) -> list[_Op] | None:
        """Run runs of mergeable operations (those whose callable has a ``merge``
        staticmethod, e.g. CommitWork) as one operation each, under a savepoint.

        Returns the operations still to run one by one: all of a run whose merged form
        failed (so the failing one fails alone), and every non-mergeable operation; None
        when SQLite rolled the whole transaction back (the batch is rerun unmerged).
        """
        if len(pending) < 2:
            return pending
        rest: list[_Op] = []
        runs: dict[type, list[_Op]] = {}
        for op in pending:
            if hasattr(op.fn, "merge"):
                runs.setdefault(type(op.fn), []).append(op)
            else:
                rest.append(op)
        conn = ctx.conn
        # When one merged run is the whole batch its savepoint is the transaction itself.
        alone = len(runs) == 1 and not rest
        for kind, run in runs.items():
            if len(run) < 2:
                rest.extend(run)
                continue
            try:
                if not alone:
                    conn.execute("SAVEPOINT merged")
                values = kind.merge([o.fn for o in run])(ctx)  # type: ignore[attr-defined]
                if not alone:
                    conn.execute("RELEASE merged")
            except Exception:
                if alone:
                    self._rollback()
                if not conn.in_transaction:
                    del results[:]
                    return None
                conn.execute("ROLLBACK TO merged")
                conn.execute("RELEASE merged")
                rest.extend(run)
                continue
            results.extend((o, True, v) for o, v in zip(run, values, strict=True))
        return rest

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                self._conn.execute("ROLLBACK")

    def _fail_all(self, ops: list[_Op], exc: BaseException) -> None:
        err = storage_error(exc, self.path)
        for op in ops:
            self.stats.failed_ops += 1
            op.finish(False, err)

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
            raise storage_error(exc, self.path) from exc

    def read_idle(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """:meth:`read`, run on the write connection instead when the store is idle under
        the conditions of :meth:`write`'s commit in the caller's thread (a lone committer,
        no batch running, nothing handed to the writer thread and not completed): under
        the lock a batch takes, so no transaction is open on it and it sees what is
        committed, as a new read connection's snapshot would. ``fn`` must return only
        values, never a live cursor.

        In WAL mode a connection discards its whole page cache at the start of a read
        when another connection has committed since its last one; the writer's cache
        holds the pages its own commits wrote. A head read after each commit otherwise
        re-reads every page it touches: receiving 30,000 messages 100 per transaction
        (strace, 2026-11-25) made 29 ``pread64`` per commit with the read connection, 12
        with this (docs/store.md "Round 5"). Anything else (concurrent committers, a
        running batch) reads on this thread's read connection, as :meth:`read`.
        """
        if (
            self.inline_commit
            and self.threaded
            and self._lone_batches >= _LONE_BATCHES
            and not self._closed
            and self._sync_lock.acquire(blocking=False)
        ):
            try:
                with self._inflight_lock:
                    idle = self._inflight == 0
                if idle and not self._closed and not self._conn.in_transaction:
                    try:
                        return fn(self._conn)
                    except sqlite3.Error as exc:
                        raise storage_error(exc, self.path) from exc
            finally:
                self._sync_lock.release()
        return self.read(fn)

    # ---- lifecycle -------------------------------------------------------------------

    def close(self) -> None:
        """Stop the writer (after it finished every queued operation) and close files."""
        if self._closed:
            return
        self._closed = True
        if self._thread is not None:
            self._queue.put(_STOP)
            self._thread.join()
        with self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
        # A caller's inline batch (Store.write) that started before close finishes first.
        with self._sync_lock:
            self._conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
