"""What a store write operation sees and how it waits: :class:`WriteContext`, the queued
operation of :class:`~openmsmq.store.db.Store` (``WriteOp``), the writer's counters
(:class:`StoreStats`) and the mapping of SQLite errors to MSMQ ones (:func:`storage_error`).
"""

from __future__ import annotations

import logging
import os
import sqlite3
from _thread import allocate_lock as _allocate_lock
from _thread import get_ident as _get_ident
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass
from time import monotonic as _monotonic
from typing import Any

from openmsmq.errors import HResult, MQError
from openmsmq.observability.repeats import RepeatedEvents

__all__ = ["Returns", "StoreStats", "WriteContext", "is_full", "report_failure", "storage_error"]

_SQLITE_BUSY = 5
_SQLITE_FULL = 13


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


def is_full(exc: BaseException) -> bool:
    """SQLITE_FULL: the disk (or the database's size limit) is full."""
    return (
        isinstance(exc, sqlite3.Error) and (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF == _SQLITE_FULL
    )


#: Store failures come in bursts (every operation of a full disk): the first of each kind
#: is logged at once, the rest summed up.
_failures = RepeatedEvents(logging.getLogger("openmsmq.store"))


def report_failure(exc: BaseException, path: str | os.PathLike[str], ops: int, what: str = "write") -> None:
    """Log a failed store ``what`` (``write`` / ``read``) of ``ops`` operations with its
    cause (the SQLite error and its name); other exceptions (a quota, a deleted queue) are
    the operations' own answers, not store failures."""
    if not isinstance(exc, sqlite3.Error):
        return
    name = getattr(exc, "sqlite_errorname", "") or type(exc).__name__
    _failures.log(
        (what, name), logging.ERROR, "store %s failed in %s: %s (%s); %d operation(s) failed",
        what, path, exc, name, ops,
    )  # fmt: skip


def is_busy(exc: sqlite3.Error) -> bool:
    """SQLITE_BUSY: another connection holds the lock."""
    return (getattr(exc, "sqlite_errorcode", 0) or 0) & 0xFF == _SQLITE_BUSY


@dataclass
class StoreStats:
    """Counters of the writer: ``batches`` = COMMITs (fsyncs), ``ops`` = operations committed,
    ``round_trips`` = statements the writer sent to a database server (None: an embedded
    store, SQLite, has none), ``commit_waits`` = batches whose leader waited for the
    previous batch's committers, ``held_seconds`` / ``longest_hold`` = how long batches
    held the writer."""

    batches: int = 0
    ops: int = 0
    failed_ops: int = 0
    round_trips: int | None = None
    commit_waits: int = 0
    #: Seconds the writer was held by batches (BEGIN to COMMIT, fsync included), in total
    #: and the longest one: what a commit queued behind a batch waits for, at most.
    held_seconds: float = 0.0
    longest_hold: float = 0.0
    #: The last LookupIdentifier handed out by a committed batch of this writer: it moves
    #: with every commit of this process that stored a message (a change mark that costs
    #: no statement; commits of other processes on the same store are not in it).
    committed_lookup_id: int = 0

    def observe_hold(self, seconds: float) -> None:
        """A batch held the writer for ``seconds``."""
        self.held_seconds += seconds
        if seconds > self.longest_hold:
            self.longest_hold = seconds

    @property
    def ops_per_batch(self) -> float:
        """Average number of operations that shared one COMMIT (one fsync)."""
        return self.ops / self.batches if self.batches else 0.0


class WriteContext:
    """What a write operation sees: the write connection and the LookupIdentifier counter.

    Only the writer creates it; operations must use parameterised SQL on ``conn``.
    """

    def __init__(
        self,
        conn: sqlite3.Connection,
        sequential_id: int,
        qm_quota: int | None = None,
        low_space: bool = False,
    ) -> None:
        self.conn = conn
        self._sequential_id = sequential_id
        #: QueueManagerQuota in bytes (None: none): what all queues may hold together.
        self.qm_quota = qm_quota
        #: The disk is full and the space reserve spent (:mod:`openmsmq.store.space`):
        #: operations that add messages are refused, removals go on.
        self.low_space = low_space

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


class WriteOp:
    """A queued operation and how its caller learns the outcome.

    :meth:`Store.write` waits on ``done``, a bare lock held from creation and released
    by :meth:`finish`: one C-level acquire to block and one release to wake, instead of a
    ``Future`` (a ``Condition`` with an ``RLock`` and a waiter lock per wait, about 30
    Python calls per commit). :meth:`Store.submit` callers get a ``future`` instead.
    """

    __slots__ = ("done", "fn", "future", "lead", "ok", "queued", "thread", "value")

    def __init__(self, fn: Callable[[WriteContext], Any], future: Future[Any] | None = None) -> None:
        self.fn = fn
        self.future = future
        self.ok = False
        self.value: Any = None
        #: Set (before ``done`` is released) when the waiting caller is to run the next
        #: batch itself: it was promoted to batch leader (see :meth:`Store.write`).
        self.lead = False
        self.done: Any = None
        if future is None:
            self.done = _allocate_lock()
            self.done.acquire()
        #: Submitting thread: a batch leader waits briefly for the threads of the
        #: previous batch (see Store._lead).
        self.thread = _get_ident()
        #: When it was queued (monotonic s): its commit's wait is observed per batch.
        self.queued = _monotonic()

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


class Returns:
    """How soon each thread that commits comes back: a batch leader waits for the previous
    batch's committers only if they come back within its wait (Store._lead).

    :meth:`committed` records when the batch that held a thread's operation committed;
    :meth:`taken` measures, from the first operation of each thread in the next batch,
    whether the thread came back within ``bound`` seconds; :attr:`slow` holds those that
    did not (a remote consumer committing again only after a round trip elsewhere, the
    transfer's next accept batch from another pool thread). Used under the store's
    group-commit lock."""

    #: Threads remembered (more: all forgotten, threads come and go).
    LIMIT = 1024

    def __init__(self) -> None:
        self._finished: dict[int, float] = {}
        self.slow: set[int] = set()

    def committed(self, threads: set[int], end: float) -> None:
        """The batch of ``threads`` committed at ``end`` (monotonic s)."""
        finished = self._finished
        if len(finished) > self.LIMIT:
            finished.clear()
            self.slow.clear()
        for thread in threads:
            finished[thread] = end

    def taken(self, batch: list[WriteOp], bound: float) -> None:
        """``batch`` was gathered: note which threads came back later than ``bound``."""
        finished = self._finished
        if not finished:
            return
        slow = self.slow
        for op in batch:
            last = finished.pop(op.thread, None)  # the thread's first operation only
            if last is not None:
                if op.queued - last > bound:
                    slow.add(op.thread)
                else:
                    slow.discard(op.thread)
