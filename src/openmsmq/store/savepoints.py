"""The operations of one group-commit batch, run inside the batch's open transaction.

Both stores run a batch of write operations as ONE transaction (the SQLite store's
:class:`~openmsmq.store.batches.BatchRunner`, the PostgreSQL store's
:class:`~openmsmq.store.pg.db.PgStore`), and run the operations inside it the same way,
which :class:`SavepointRunner` owns:

* Runs of mergeable operations (the callable's type has a ``merge`` staticmethod, e.g.
  CommitWork) go first, each run as one operation under the savepoint ``merged``. A run
  whose merged form fails is rolled back to it and its operations run one by one with
  the others, so only the culprit fails.
* With several operations in the batch each runs under the savepoint ``op``: one that
  fails is rolled back to it and fails alone, the others go on. A lone operation needs
  none: if it fails, the (one-operation) transaction is rolled back.
* When the transaction is gone after a failure (the database rolled it back, or the
  rollback to the savepoint failed), the attempt ends: the caller fails that operation
  alone and runs the others again in a new transaction (each such restart removes one
  operation, so this ends). When it went inside a merged run, the caller runs the batch
  again unmerged.

What begins and commits the transaction, and what a failure means beyond that, is each
backend's, through the runner's hooks: SQLite runs the batch again in low-space mode on
its first SQLITE_FULL (``spend``, :mod:`openmsmq.store.space`); PostgreSQL ends the
attempt when the connection is lost (``check`` raises), so that the batch runs again on a
new connection.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import repeat
from typing import Any, Generic, Protocol, TypeVar

from openmsmq.store.writes import WriteContext

__all__ = ["AGAIN", "AGAIN_UNMERGED", "Again", "Dropped", "Queued", "SavepointRunner"]


class Queued(Protocol):
    """A queued write operation: its callable (the store's ``WriteOp``)."""

    @property
    def fn(self) -> Callable[[WriteContext], Any]: ...


OpT = TypeVar("OpT", bound=Queued)


@dataclass(frozen=True, slots=True)
class Dropped(Generic[OpT]):
    """The transaction is gone after ``op`` failed with ``error``: fail ``op`` alone and
    run the others again in a new transaction."""

    op: OpT
    error: BaseException


@dataclass(frozen=True, slots=True)
class Again:
    """The transaction is rolled back with no operation to blame: run the whole batch
    again (``merge``: with its runs of mergeable operations merged)."""

    merge: bool


#: The backend's ``spend`` asked for the batch to run again (SQLite's low-space mode).
AGAIN = Again(merge=True)
#: The transaction was gone inside a merged run: run the batch again, unmerged.
AGAIN_UNMERGED = Again(merge=False)


class SavepointRunner(Generic[OpT]):
    """Runs a batch's operations inside its open transaction (see the module docstring).

    ``db_error``: the exception class of the database driver (a failed ``ROLLBACK TO``).
    ``rollback(conn)``: roll the whole transaction back, quietly. ``check(conn, exc)``:
    called first with every exception raised inside the transaction (an operation, a
    merged run, a savepoint statement); it raises to end the attempt (PostgreSQL: a lost
    connection). ``spend(exc)``: called with an operation's exception; True when the whole
    batch is to run again (SQLite: the disk is full and the space reserve was given
    back). ``bare_lone_run``: when one merged run is the whole batch, run it without a
    savepoint (the transaction is its savepoint; if it fails the batch runs again
    unmerged).
    """

    def __init__(
        self,
        db_error: type[Exception],
        rollback: Callable[[Any], None],
        *,
        check: Callable[[Any, BaseException], None] | None = None,
        spend: Callable[[BaseException], bool] | None = None,
        bare_lone_run: bool = False,
    ) -> None:
        self.db_error = db_error
        self.rollback = rollback
        self.check = check
        self.spend = spend
        self.bare_lone_run = bare_lone_run

    def run(
        self,
        ctx: WriteContext,
        pending: list[OpT],
        results: list[tuple[OpT, bool, Any]],
        *,
        merge: bool = True,
    ) -> Dropped[OpT] | Again | None:
        """Run ``pending`` (in order, runs of mergeable ones first when ``merge``) on
        ``ctx.conn``, appending ``(op, ok, result or exception)`` to ``results``. None when
        every operation ran (failed ones rolled back to their savepoints, the transaction
        still open for the COMMIT); else what the caller is to do (``results`` is then to
        be dropped)."""
        todo = pending
        if merge and len(pending) > 1:
            rest = self._merge_runs(ctx, pending, results)
            if rest is None:
                return AGAIN_UNMERGED
            todo = rest
        conn = ctx.conn
        check = self.check
        # A lone operation needs no savepoint: if it fails, the whole (one-operation)
        # transaction is rolled back.
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
                if check is not None:
                    check(conn, exc)
                if self.spend is not None and self.spend(exc):
                    self.rollback(conn)
                    return AGAIN
                if not savepoints:
                    self.rollback(conn)
                elif conn.in_transaction:
                    try:
                        conn.execute("ROLLBACK TO op")
                        conn.execute("RELEASE op")
                    except self.db_error as exc2:
                        if check is not None:
                            check(conn, exc2)
                        self.rollback(conn)
                if not conn.in_transaction:
                    return Dropped(op, exc)
                results.append((op, False, exc))
        return None

    def _merge_runs(
        self, ctx: WriteContext, pending: list[OpT], results: list[tuple[OpT, bool, Any]]
    ) -> list[OpT] | None:
        """Run each run of mergeable operations as one operation under a savepoint (one
        multi-row INSERT and DELETE for a group of local transactions' commits).

        Returns the operations still to run one by one: all of a run whose merged form
        failed (so the failing one fails alone), and every non-mergeable operation; None
        when the transaction is gone (the batch is to run again unmerged)."""
        rest: list[OpT] = []
        runs: dict[type, list[OpT]] = {}
        for op in pending:
            if hasattr(op.fn, "merge"):
                runs.setdefault(type(op.fn), []).append(op)
            else:
                rest.append(op)
        conn = ctx.conn
        alone = self.bare_lone_run and len(runs) == 1 and not rest
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
            except Exception as exc:
                if self.check is not None:
                    self.check(conn, exc)
                if alone:
                    self.rollback(conn)
                if not conn.in_transaction:
                    del results[:]
                    return None
                conn.execute("ROLLBACK TO merged")
                conn.execute("RELEASE merged")
                rest.extend(run)
                continue
            if len(values) != len(run):
                raise ValueError(f"{kind.__name__}.merge returned {len(values)} results for {len(run)}")
            results.extend(zip(run, repeat(True), values))  # no Python step per operation
        return rest
