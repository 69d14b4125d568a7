"""The operations of a batch inside its transaction (``store/savepoints.py``), on a bare
SQLite connection: each under a savepoint, one failing fails alone, merged runs fall
back to one by one, and what the caller is told when the transaction is gone. Both
stores run their batches through it (their own tests: tests/store, tests/pg)."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from openmsmq.store.savepoints import AGAIN, AGAIN_UNMERGED, Dropped, SavepointRunner
from openmsmq.store.writes import WriteContext


class Op:
    """A queued operation (the stores' WriteOp has the same ``fn``)."""

    def __init__(self, fn: Callable[[WriteContext], Any]) -> None:
        self.fn = fn


class Insert:
    """A mergeable operation: inserts ``value``; the merged form inserts them all in one
    statement, and fails as a whole when one of them is negative (CHECK)."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __call__(self, ctx: WriteContext) -> int:
        ctx.conn.execute("INSERT INTO t (v) VALUES (?)", (self.value,))
        return self.value

    @staticmethod
    def merge(ops: list[Insert]) -> Callable[[WriteContext], list[int]]:
        def merged(ctx: WriteContext) -> list[int]:
            ctx.conn.execute(
                "INSERT INTO t (v) VALUES " + ", ".join("(?)" for _ in ops), [o.value for o in ops]
            )
            return [o.value for o in ops]

        return merged


def fail(ctx: WriteContext) -> None:
    ctx.conn.execute("INSERT INTO t (v) VALUES (-1)")  # violates the CHECK


@pytest.fixture
def conn() -> Iterator[sqlite3.Connection]:
    c = sqlite3.connect(":memory:", isolation_level=None)
    c.execute("CREATE TABLE t (v INTEGER NOT NULL CHECK (v >= 0))")
    yield c
    c.close()


def rollback(conn: sqlite3.Connection) -> None:
    if conn.in_transaction:
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")


def rows(conn: sqlite3.Connection) -> list[int]:
    return [r[0] for r in conn.execute("SELECT v FROM t ORDER BY rowid")]


def run(conn: sqlite3.Connection, runner: SavepointRunner[Op], ops: list[Op], **kw: Any) -> tuple[Any, list]:
    conn.execute("BEGIN")
    results: list[tuple[Op, bool, Any]] = []
    outcome = runner.run(WriteContext(conn, 0), ops, results, **kw)
    if conn.in_transaction:
        conn.execute("COMMIT")
    return outcome, [(ok, value if ok else type(value).__name__) for _, ok, value in results]


def test_one_failing_operation_among_several_fails_alone(conn: sqlite3.Connection) -> None:
    runner: SavepointRunner[Op] = SavepointRunner(sqlite3.Error, rollback)
    ops = [Op(Insert(1)), Op(fail), Op(lambda ctx: "plain")]
    outcome, results = run(conn, runner, ops, merge=False)
    assert outcome is None
    assert results == [(True, 1), (False, "IntegrityError"), (True, "plain")]
    assert rows(conn) == [1]


def test_a_lone_failing_operation_is_dropped_with_its_transaction(conn: sqlite3.Connection) -> None:
    runner: SavepointRunner[Op] = SavepointRunner(sqlite3.Error, rollback)
    op = Op(fail)
    outcome, _ = run(conn, runner, [op])
    assert isinstance(outcome, Dropped) and outcome.op is op
    assert isinstance(outcome.error, sqlite3.IntegrityError)
    assert not conn.in_transaction and rows(conn) == []


def test_a_failing_merged_run_runs_again_one_by_one(conn: sqlite3.Connection) -> None:
    runner: SavepointRunner[Op] = SavepointRunner(sqlite3.Error, rollback)
    ops = [Op(Insert(1)), Op(Insert(2)), Op(lambda ctx: "plain")]
    outcome, results = run(conn, runner, ops)
    assert outcome is None
    assert results == [(True, 1), (True, 2), (True, "plain")]  # merged: one statement
    assert rows(conn) == [1, 2]
    conn.execute("DELETE FROM t")
    ops = [Op(Insert(3)), Op(Insert(-4)), Op(Insert(5)), Op(lambda ctx: "plain")]
    outcome, results = run(conn, runner, ops)
    assert outcome is None
    # The merged form failed: rolled back to its savepoint, then each alone (after the rest).
    assert results == [(True, "plain"), (True, 3), (False, "IntegrityError"), (True, 5)]
    assert rows(conn) == [3, 5]


def test_a_lone_merged_run_without_savepoint_runs_again_unmerged(conn: sqlite3.Connection) -> None:
    runner: SavepointRunner[Op] = SavepointRunner(sqlite3.Error, rollback, bare_lone_run=True)
    outcome, results = run(conn, runner, [Op(Insert(1)), Op(Insert(-2))])
    assert outcome is AGAIN_UNMERGED and results == []
    assert not conn.in_transaction and rows(conn) == []


def test_spend_runs_the_whole_batch_again(conn: sqlite3.Connection) -> None:
    spent: list[BaseException] = []

    def spend(exc: BaseException) -> bool:
        spent.append(exc)
        return True

    runner: SavepointRunner[Op] = SavepointRunner(sqlite3.Error, rollback, spend=spend)
    outcome, _ = run(conn, runner, [Op(Insert(1)), Op(fail)], merge=False)
    assert outcome is AGAIN and len(spent) == 1
    assert not conn.in_transaction and rows(conn) == []


def test_check_ends_the_attempt_by_raising(conn: sqlite3.Connection) -> None:
    class Lost(Exception):
        pass

    def check(c: Any, exc: BaseException) -> None:
        assert c is conn
        raise Lost(str(exc)) from exc

    runner: SavepointRunner[Op] = SavepointRunner(sqlite3.Error, rollback, check=check)
    conn.execute("BEGIN")
    with pytest.raises(Lost):
        runner.run(WriteContext(conn, 0), [Op(Insert(1)), Op(fail)], [])
    rollback(conn)
    assert rows(conn) == []
