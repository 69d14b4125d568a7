"""The PostgreSQL store: one PostgreSQL transaction per group commit, fenced writes,
commits whose outcome is known even when the connection drops, reconnection with back-off.

:class:`PgStore` has the interface of the SQLite :class:`~openmsmq.store.db.Store`
(:class:`openmsmq.store.backend.StoreBackend`): write operations ``op(ctx)`` over a
:class:`~openmsmq.store.writes.WriteContext`, reads ``fn(conn)``. The operations are the
SQLite store's own (:mod:`openmsmq.store.pg.dialect` runs their statements here).

Group commit. Callers queue operations; the writer thread takes everything queued (at
most ``max_batch_ops``) and runs it as ONE transaction: a head statement, the
operations (each under a SAVEPOINT when there are several, so one failing leaves the
others; runs of mergeable operations such as local transactions' CommitWork as one
multi-row INSERT / DELETE: :class:`~openmsmq.store.savepoints.SavepointRunner`, shared
with the SQLite store), then COMMIT. Operations arriving while a batch runs form
the next batch, so N concurrent committers share one round trip of COMMIT and one WAL
flush. Every caller learns its outcome after the COMMIT returned.

The head statement locks the ``qm_state`` row (``FOR UPDATE``: writers of other
processes on the same database take turns, as SQLite's write lock makes them), reads the
persisted SequentialID (LookupIdentifiers continue above any other writer's reservation)
and the transaction's id (``pg_current_xact_id``), and, when fenced, locks the lease.

Fencing (the contract with the HA layer, :mod:`openmsmq.ha`): the store takes an
optional fencing epoch (``fencing_epoch``, settable at any time with :meth:`fence`).
While it is set, every write transaction first locks the QM's ``qm_lease`` row ``FOR
SHARE`` (in the head statement, before any operation runs; the row's ``qm_guid`` is the
GUID of ``qm_state`` as text, ``str(uuid.UUID)``) and compares its epoch: a missing row
(or no QM state yet) or another epoch fails the whole batch with
:class:`~openmsmq.errors.FencedError` and commits nothing. A takeover updates the row
(``UPDATE qm_lease SET epoch = epoch + 1 ...``), which waits for every fenced
transaction holding the share lock and makes every later one see the new epoch: after a
takeover commits, the former active can commit nothing. The HA layer owns acquiring and
renewing the lease; the store owns the check.

A lost connection. Before COMMIT: nothing is committed; the batch is run again once on a
new connection, then failed with :class:`~openmsmq.errors.StorageError`. During COMMIT
the outcome is unknown to the client: the store reconnects and asks the server
(``pg_xact_status`` of the transaction's id); committed, the callers get their
results; aborted or unknown (the server unreachable for ``reconnect_wait``), they get
:class:`~openmsmq.errors.StorageError`: nothing is reported committed that did not
commit. Later operations reconnect with back-off (``reconnect_wait`` at most each).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

import psycopg
from psycopg import conninfo

from openmsmq.errors import ConfigError, FencedError, HResult, MQError, StorageError
from openmsmq.observability.sink import NULL_METRICS, MetricsSink
from openmsmq.store.pg.dialect import PgConnection, configure
from openmsmq.store.pg.schema import PG_SCHEMA_VERSION, ForeignDatabase, SchemaTooNew, migrate
from openmsmq.store.savepoints import Again, Dropped, SavepointRunner
from openmsmq.store.writes import StoreStats, WriteContext

__all__ = ["DSN_KEY", "PgStore", "describe_dsn"]

T = TypeVar("T")
log = logging.getLogger("openmsmq.store")

#: The setting that names the database (in every error about it).
DSN_KEY = "store.dsn"
#: LookupIdentifiers reserved per persisted SequentialID update (as the SQLite store).
LOOKUP_ID_BLOCK = 65536
#: Back-off between connection attempts: from _BACKOFF_MIN doubling to _BACKOFF_MAX.
_BACKOFF_MIN = 0.05
_BACKOFF_MAX = 1.0
#: Idle read connections kept for reuse.
_POOL_MAX = 16


def describe_dsn(dsn: str) -> str:
    """Where ``dsn`` points, without its secrets: ``user@host:port/dbname``."""
    try:
        parts = conninfo.conninfo_to_dict(dsn)
    except psycopg.Error:
        return "an unparsable DSN"
    host = str(parts.get("host") or parts.get("hostaddr") or "localhost")
    port = str(parts.get("port") or 5432)
    user = str(parts.get("user") or "")
    db = str(parts.get("dbname") or user or "")
    return f"{user + '@' if user else ''}{host}:{port}/{db}"


class _Op:
    """A queued operation: its callable and how its caller learns the outcome."""

    __slots__ = ("done", "fn", "future", "ok", "value")

    def __init__(self, fn: Callable[[WriteContext], Any], future: Future[Any] | None = None) -> None:
        self.fn = fn
        self.future = future
        self.ok = False
        self.value: Any = None
        self.done: threading.Lock | None = None
        if future is None:
            self.done = threading.Lock()
            self.done.acquire()

    def finish(self, ok: bool, value: Any) -> None:
        if self.future is not None:
            if ok:
                self.future.set_result(value)
            else:
                self.future.set_exception(value)
            return
        self.ok, self.value = ok, value
        assert self.done is not None
        self.done.release()

    def wait(self) -> Any:
        assert self.done is not None
        self.done.acquire()
        if self.ok:
            return self.value
        raise self.value


class _Lost(Exception):
    """The connection was lost inside a batch, before its COMMIT was sent."""


def _nothing(ctx: WriteContext) -> None:
    """A write operation that writes nothing (:meth:`PgStore.wait_for_queued`)."""


def _check_lost(conn: PgConnection, exc: BaseException) -> None:
    """Inside a batch: a lost connection ends the attempt (the batch runs again once on a
    new connection); any other failure is the operation's own."""
    if conn.broken:
        raise _Lost(str(exc)) from exc


class PgStore:
    """An openmsmq store in a PostgreSQL database (see the module docstring).

    ``PgStore(dsn)`` checks the DSN, connects, refuses a foreign database or a schema of
    a newer openmsmq, creates or migrates the schema and, when ``threaded``, starts the
    writer thread. ``expected_guid``: the QM this database must belong to (a database
    initialised by another QM is refused before anything is written). ``fencing_epoch``:
    see :meth:`fence`.
    """

    def __init__(
        self,
        dsn: str,
        *,
        threaded: bool = True,
        max_batch_ops: int = 1024,
        max_commit_wait: float = 0.002,
        qm_quota: int | None = None,
        expected_guid: uuid.UUID | None = None,
        fencing_epoch: int | None = None,
        connect_timeout: float = 10.0,
        reconnect_wait: float = 10.0,
    ) -> None:
        self.dsn = dsn
        #: Where the store is, for messages (no secret).
        self.path = describe_dsn(dsn)
        self.threaded = threaded
        self.max_batch_ops = max(1, max_batch_ops)
        #: Longest time (s) the writer waits for the committers of the previous batch to
        #: queue their next operations (store.group_commit_max_wait), so that steady
        #: concurrent committers keep sharing one transaction.
        self.max_commit_wait = max_commit_wait
        self.qm_quota = qm_quota
        self.stats = StoreStats()
        self.metrics: MetricsSink = NULL_METRICS
        self.connect_timeout = connect_timeout
        #: Longest time an operation waits for the database to come back before it fails.
        self.reconnect_wait = reconnect_wait
        self.stats.round_trips = 0
        #: Times the write connection was lost and opened again.
        self.reconnects = 0
        self._fencing_epoch = fencing_epoch
        self._closed = False
        self._lock = threading.Condition(threading.Lock())
        self._pending: list[_Op] = []
        self._stopping = False
        #: Operations of the last batch; True while the writer waits for as many.
        self._last_batch = 0
        #: The writer thread runs a batch it took from ``_pending``.
        self._running = False
        self._gathering = False
        self._sync_lock = threading.Lock()
        self._pool: list[PgConnection] = []
        self._pool_lock = threading.Lock()
        self._backoff = 0.0
        # Savepoints and merged runs inside a batch's transaction (as the SQLite store).
        self._ops: SavepointRunner[_Op] = SavepointRunner(psycopg.Error, self._rollback, check=_check_lost)
        self._check_dsn()
        self._conn: PgConnection | None = None
        conn = self._open_first()
        try:
            row = conn.raw.execute("SELECT qm_guid, sequential_id FROM qm_state WHERE id = 1").fetchone()
        except psycopg.Error as exc:
            conn.close()
            raise self._storage(f"cannot read the QM state: {exc}") from exc
        if row is not None and expected_guid is not None and bytes(row[0]) != expected_guid.bytes:
            conn.close()
            raise ConfigError(
                DSN_KEY,
                f"the database {self.path} belongs to the queue manager {uuid.UUID(bytes=bytes(row[0]))},"
                f" not to this one ({expected_guid}): point store.dsn at this QM's own database;"
                " nothing was written",
            )
        #: The QM GUID of the database (None until the QM state is created).
        self.qm_guid: uuid.UUID | None = uuid.UUID(bytes=bytes(row[0])) if row else None
        self._sequential_id = int(row[1]) if row else 0
        self._reserved = self._sequential_id
        self._conn = conn
        self._thread: threading.Thread | None = None
        if threaded:
            self._thread = threading.Thread(
                target=self._writer_loop, name="openmsmq-store-writer", daemon=True
            )
            self._thread.start()

    # ---- opening ---------------------------------------------------------------------

    def _storage(self, what: str) -> StorageError:
        err = MQError(HResult.MQ_ERROR_MESSAGE_STORAGE_FAILED, f"store {self.path} ({DSN_KEY}): {what}")
        assert isinstance(err, StorageError)
        return err

    def _check_dsn(self) -> None:
        try:
            conninfo.conninfo_to_dict(self.dsn)
        except psycopg.Error as exc:
            # psycopg's message may quote the DSN: say only what is wrong with its form.
            raise ConfigError(DSN_KEY, "not a PostgreSQL connection string (libpq key=value or URI)") from exc

    def _connect(self, *, reader: bool = False) -> PgConnection:
        raw = psycopg.connect(
            self.dsn,
            autocommit=True,
            connect_timeout=max(1, int(self.connect_timeout)),
            application_name="openmsmq",
        )
        configure(raw)
        return PgConnection(raw, reader=reader)

    def _open_first(self) -> PgConnection:
        try:
            conn = self._connect()
        except psycopg.Error as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(DSN_KEY, f"cannot connect to PostgreSQL at {self.path}: {reason}") from exc
        try:
            migrate(conn.raw)
        except SchemaTooNew as exc:
            conn.close()
            raise self._storage(
                f"written by a newer openmsmq (store schema {exc.found}; this version reads up to"
                f" {PG_SCHEMA_VERSION}): open it with that version or a later one; nothing was changed"
            ) from None
        except ForeignDatabase as exc:
            conn.close()
            raise ConfigError(
                DSN_KEY, f"the database {self.path} is not an openmsmq store ({exc}); nothing was written"
            ) from None
        except psycopg.Error as exc:
            conn.close()
            raise self._storage(f"cannot create the schema: {exc}") from exc
        return conn

    @property
    def round_trips(self) -> int:
        """Round trips of the writer (statements sent in committed batches), for the
        benchmarks, the tests and the metric ``openmsmq_store_round_trips_total``."""
        return self.stats.round_trips or 0

    # ---- fencing ---------------------------------------------------------------------

    @property
    def fencing_epoch(self) -> int | None:
        """The lease epoch every write transaction must find (None: not fenced)."""
        return self._fencing_epoch

    def fence(self, epoch: int | None) -> None:
        """Check the lease epoch ``epoch`` in every later write transaction (None: stop
        checking). The lease row is the one of the QM GUID stored in the database."""
        self._fencing_epoch = epoch

    # ---- writes ----------------------------------------------------------------------

    def _closed_error(self) -> MQError:
        return MQError(HResult.MQ_ERROR_SERVICE_NOT_AVAILABLE, f"store {self.path} is closed")

    def submit(self, fn: Callable[[WriteContext], T]) -> Future[T]:
        """Queue a write operation; the future completes once it is committed (or failed)."""
        future: Future[T] = Future()
        self._enqueue(_Op(fn, future))
        return future

    def write(self, fn: Callable[[WriteContext], T]) -> T:
        """Run a write operation and wait until it is committed; return its result."""
        op = _Op(fn)
        self._enqueue(op)
        return op.wait()  # type: ignore[no-any-return]

    def _enqueue(self, op: _Op) -> None:
        if not self.threaded:
            if self._closed:
                raise self._closed_error()
            with self._sync_lock:
                self._run_batch([op])
            return
        with self._lock:
            if self._closed:
                raise self._closed_error()
            self._pending.append(op)
            if len(self._pending) == 1 or self._gathering:
                self._lock.notify()

    def write_many(self, fns: Sequence[Callable[[WriteContext], Any]]) -> list[Future[Any]]:
        """Submit several operations at once (they usually share one COMMIT)."""
        return [self.submit(fn) for fn in fns]

    def wait_for_queued(self) -> None:
        """Return once every write operation queued or running when it was called has
        committed (or failed); at once when none is (as the SQLite store's
        :meth:`~openmsmq.store.db.Store.wait_for_queued`)."""
        if not self.threaded:
            return  # every operation ran in its caller's thread
        with self._lock:
            if not self._pending and not self._running:
                return
        self.write(_nothing)

    def write_each(self, fns: Sequence[Callable[[WriteContext], Any]]) -> list[Any]:
        """Run independent operations; one item per operation: its result, or the
        :class:`MQError` it failed with (any other exception propagates)."""
        out: list[Any] = []
        for future in self.write_many(fns):
            try:
                out.append(future.result())
            except MQError as exc:
                out.append(exc)
        return out

    def _writer_loop(self) -> None:
        while True:
            with self._lock:
                while not self._pending and not self._stopping:
                    self._lock.wait()
                if not self._pending:
                    return
                want = min(self._last_batch, self.max_batch_ops)
                if len(self._pending) < want and self.max_commit_wait > 0 and not self._stopping:
                    # The previous batch's committers are about to queue their next ones.
                    deadline = time.monotonic() + self.max_commit_wait
                    self._gathering = True
                    while len(self._pending) < want and not self._stopping:
                        left = deadline - time.monotonic()
                        if left <= 0:
                            break
                        self._lock.wait(left)
                    self._gathering = False
                batch = self._pending[: self.max_batch_ops]
                del self._pending[: len(batch)]
                self._last_batch = len(batch)
                self._running = True
            try:
                self._run_and_observe(batch)
            except BaseException as exc:  # never leave a caller waiting
                log.exception("store writer failed")
                for op in batch:
                    with contextlib.suppress(Exception):
                        op.finish(False, self._storage(f"writer failed: {exc}"))
            finally:
                with self._lock:
                    self._running = False

    def _run_and_observe(self, batch: list[_Op]) -> None:
        started = time.monotonic()
        self._run_batch(batch)
        seconds = time.monotonic() - started
        self.stats.observe_hold(seconds)
        self.metrics.observe_commit(len(batch), seconds)

    def _writer_connection(self) -> PgConnection:
        """The write connection, reconnecting (with back-off, ``reconnect_wait`` at most)
        when it was lost; StorageError when the database stays out of reach."""
        conn = self._conn
        if conn is not None and not conn.broken:
            return conn
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()
            self._conn = None
        deadline = time.monotonic() + self.reconnect_wait
        delay = max(self._backoff, _BACKOFF_MIN)
        while True:
            try:
                self._conn = self._connect()
                self._backoff = 0.0
                self.reconnects += 1
                log.warning("store %s: connected again", self.path)
                return self._conn
            except psycopg.Error as exc:
                if time.monotonic() + delay > deadline:
                    self._backoff = min(delay * 2, _BACKOFF_MAX)
                    raise self._storage(f"database unreachable: {exc}") from exc
                time.sleep(delay)
                delay = min(delay * 2, _BACKOFF_MAX)

    def _head(self, conn: PgConnection) -> tuple[int, str]:
        """BEGIN and the head statement, in one round trip: lock ``qm_state`` (and, fenced,
        the lease FOR SHARE); return the persisted SequentialID and the transaction's id.
        FencedError when the lease row is missing or holds another epoch."""
        epoch = self._fencing_epoch
        if epoch is None:
            row = conn.begin_with(
                "SELECT coalesce((SELECT sequential_id FROM qm_state WHERE id = 1 FOR UPDATE), 0),"
                " pg_current_xact_id()::text"
            )
            return int(row[0]), str(row[1])
        # The lease row is keyed by the QM GUID as text (str(uuid.UUID)), read from the QM
        # state in the same statement.
        row = conn.begin_with(
            "SELECT s.sequential_id, pg_current_xact_id()::text,"
            " (SELECT l.epoch FROM qm_lease l"
            "  WHERE l.qm_guid = encode(s.qm_guid, 'hex')::uuid::text FOR SHARE)"
            " FROM qm_state s WHERE s.id = 1 FOR UPDATE OF s"
        )
        if row is None:  # no QM state: no lease can name this QM
            row = (0, "", None)
        found = row[2]
        if found is None or int(found) != epoch:
            raise FencedError(
                HResult.MQ_ERROR_MESSAGE_STORAGE_FAILED,
                f"store {self.path}: fenced: this queue manager holds lease epoch {epoch}, the database"
                f" {'has no lease' if found is None else f'is at epoch {found}'}; nothing was committed",
                epoch=epoch,
                found=None if found is None else int(found),
            )
        return int(row[0]), str(row[1])

    def _run_batch(self, batch: list[_Op]) -> None:
        """Run ``batch`` in one transaction; complete every operation after COMMIT."""
        pending = list(batch)
        tries = 2  # a connection lost before COMMIT: once more on a new connection
        merge = True
        while pending:
            tries -= 1
            try:
                conn = self._writer_connection()
            except StorageError as exc:
                self._fail_all(pending, exc)
                return
            try:
                outcome = self._attempt(conn, pending, merge)
            except _Lost as lost:
                if tries > 0:
                    continue
                self._fail_all(pending, self._storage(f"connection lost: {lost}; nothing was committed"))
                return
            except FencedError as exc:
                self._rollback(conn)
                self._fail_all(pending, exc)
                return
            if outcome is None:
                return
            tries = 2
            if isinstance(outcome, Again):  # the transaction went inside a merged run
                merge = merge and outcome.merge
                continue
            # One operation made the transaction unusable: it failed alone, rerun the rest.
            pending = [o for o in pending if o is not outcome]

    def _attempt(self, conn: PgConnection, pending: list[_Op], merge: bool) -> _Op | Again | None:
        """One try of the batch. None when done (every operation finished); an operation
        whose failure aborted the transaction (it is failed; the caller reruns the others);
        Again when the batch is to run again (``merge``: with runs merged). Raises _Lost
        when the connection went before COMMIT, FencedError when fenced."""
        statements = conn.statements
        try:
            persisted, xid = self._head(conn)
        except psycopg.Error as exc:
            if conn.broken:
                raise _Lost(str(exc)) from exc
            self._rollback(conn)
            self._fail_all(pending, self._storage(str(exc)))
            return None
        if persisted != self._reserved:
            # Another connection reserved LookupIdentifiers since: continue above them.
            self._sequential_id = max(self._sequential_id, persisted)
            self._reserved = self._sequential_id
        ctx = WriteContext(conn, self._sequential_id, self.qm_quota)  # type: ignore[arg-type]
        results: list[tuple[_Op, bool, Any]] = []
        ended = self._ops.run(ctx, pending, results, merge=merge)
        if isinstance(ended, Dropped):
            self._finish_failed(ended.op, ended.error)
            return ended.op
        if ended is not None:
            return ended
        reserved = self._reserved
        try:
            if ctx.sequential_id > reserved:
                reserved = ctx.sequential_id + LOOKUP_ID_BLOCK
                conn.execute("UPDATE qm_state SET sequential_id = ? WHERE id = 1", (reserved,))
        except psycopg.Error as exc:
            if conn.broken:
                raise _Lost(str(exc)) from exc
            self._rollback(conn)
            self._fail_all(pending, self._storage(str(exc)))
            return None
        try:
            conn.execute("COMMIT")
        except psycopg.Error as exc:
            if not conn.broken:
                self._rollback(conn)
                self._fail_all(pending, self._storage(f"COMMIT failed: {exc}"))
                return None
            committed = self._resolve(xid)
            if committed is not True:
                why = "the database was unreachable" if committed is None else "it did not commit"
                self._fail_all(
                    pending, self._storage(f"connection lost during COMMIT ({exc}); resolved: {why}")
                )
                return None
            log.warning("store %s: connection lost during COMMIT; the transaction had committed", self.path)
        self.stats.round_trips = self.round_trips + conn.statements - statements
        self._sequential_id = ctx.sequential_id
        self._reserved = reserved
        self.stats.committed_lookup_id = ctx.sequential_id
        self.stats.batches += 1
        done = 0
        for op, ok, value in results:
            if ok:
                op.finish(True, value)
                done += 1
            else:
                self._finish_failed(op, value)
        self.stats.ops += done
        return None

    def _resolve(self, xid: str) -> bool | None:
        """After a connection lost during COMMIT: whether transaction ``xid`` committed
        (True / False), or None when the database stayed unreachable."""
        try:
            conn = self._writer_connection()
            row = conn.raw.execute("SELECT pg_xact_status(%s::xid8)", (xid,)).fetchone()
        except (psycopg.Error, StorageError):
            return None
        status = row[0] if row else None
        if status == "in progress":  # the server has not finished it: ask once more
            time.sleep(0.05)
            with contextlib.suppress(psycopg.Error):
                row = conn.raw.execute("SELECT pg_xact_status(%s::xid8)", (xid,)).fetchone()
                status = row[0] if row else None
        return True if status == "committed" else False if status == "aborted" else None

    def _rollback(self, conn: PgConnection) -> None:
        if not conn.broken and conn.in_transaction:
            with contextlib.suppress(psycopg.Error):
                conn.execute("ROLLBACK")

    def _finish_failed(self, op: _Op, exc: BaseException) -> None:
        self.stats.failed_ops += 1
        if isinstance(exc, psycopg.Error):
            exc = self._storage(str(exc))
        op.finish(False, exc)

    def _fail_all(self, ops: list[_Op], exc: BaseException) -> None:
        log.error("store %s: %d operation(s) failed: %s", self.path, len(ops), exc)
        for op in ops:
            self.stats.failed_ops += 1
            op.finish(False, exc)

    # ---- reads -----------------------------------------------------------------------

    def _take_reader(self) -> PgConnection:
        with self._pool_lock:
            if self._pool:
                return self._pool.pop()
        if self._closed:
            raise self._closed_error()
        try:
            return self._connect(reader=True)
        except psycopg.Error as exc:
            raise self._storage(f"database unreachable: {exc}") from exc

    def _give_back(self, conn: PgConnection) -> None:
        if conn.broken or conn.in_transaction:
            with contextlib.suppress(Exception):
                conn.close()
            return
        with self._pool_lock:
            if len(self._pool) < _POOL_MAX and not self._closed:
                self._pool.append(conn)
                return
        conn.close()

    def read(self, fn: Callable[[Any], T]) -> T:
        """Run ``fn`` on a read connection (autocommit: each statement sees what is
        committed; ``BEGIN`` in ``fn`` opens a snapshot). A connection lost on the way is
        replaced once; other database errors are StorageError."""
        for attempt in (1, 2):
            conn = self._take_reader()
            try:
                value = fn(conn)
            except psycopg.Error as exc:
                broken = conn.broken
                self._give_back(conn) if not broken else conn.close()
                if broken and attempt == 1:
                    continue
                raise self._storage(str(exc)) from exc
            except BaseException:
                self._give_back(conn)
                raise
            self._give_back(conn)
            return value
        raise AssertionError("unreachable")

    def read_idle(self, fn: Callable[[Any], T]) -> T:
        """:meth:`read` (the SQLite store's idle-writer shortcut has no use here)."""
        return self.read(fn)

    # ---- lifecycle -------------------------------------------------------------------

    def close(self) -> None:
        """Close after every accepted operation completed; refuse new ones."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._stopping = True
            self._lock.notify_all()
        if self._thread is not None:
            self._thread.join()
        with self._sync_lock:
            if self._conn is not None:
                with contextlib.suppress(Exception):
                    self._conn.close()
        with self._pool_lock:
            for conn in self._pool:
                with contextlib.suppress(Exception):
                    conn.close()
            self._pool.clear()

    def __enter__(self) -> PgStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
