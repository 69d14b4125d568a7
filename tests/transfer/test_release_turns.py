"""A release at A runs in turns of ``release_chunk`` messages, one store transaction each,
and the next turn is handed out only after the commits queued during the previous one
committed: an application's send waits for one turn at most (docs/transfer.md, "How a
message travels", step 6, and "Release at A").

The order is shown by the order of events, never by time: each store operation records
how many batches had committed before its own (``Store.stats.batches``), so two
operations that shared a transaction record the same number.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from openmsmq.qm.options import StoreOptions
from openmsmq.store import outgoing
from openmsmq.store.writes import WriteContext
from openmsmq.transfer.state import ReleaseBatch

from .harness import Net, bodies_in, outgoing_count, send_tx

DEST_B = "DIRECT=TCP:127.0.0.2\\PRIVATE$\\orders"
Q = "private$\\orders"
#: Bound (s) of every wait for another thread; reached only when the test fails.
WAIT = 30.0


@pytest.fixture(params=["sqlite", "postgresql"])
def store_options(request: pytest.FixtureRequest) -> StoreOptions | None:
    """A's store: SQLite, or PostgreSQL (a real server, tests/pgserver.py)."""
    if request.param == "sqlite":
        return None
    return StoreOptions(backend="postgresql", dsn=request.getfixturevalue("pg_dsn"))


def test_a_commit_queued_behind_a_release_turn_commits_before_the_next_turn(
    net: Net, monkeypatch: pytest.MonkeyPatch, store_options: StoreOptions | None
) -> None:
    """Turn 1 holds A's store writer; an application's commit is queued behind it; turn 1
    commits: the commit runs in a transaction of its own after turn 1 and before turn 2.
    The driver runs the next turn as soon as the transfer hands it out, the fastest a
    driver can."""
    a = net.add("127.0.0.1", release_chunk=3, threaded=True, store_options=store_options)
    b = net.add("127.0.0.2")
    b.qm.create_queue(Q, transactional=True)
    send_tx(a.qm, DEST_B, [b"%d" % i for i in range(6)])  # one sequence, numbers 1..6
    net.settle()  # B stored them; its OrderAck waits for OrderAckTimeout
    a.hold_store = True  # A's store work is run by the driver thread below
    net.advance(0.6)  # B's OrderAck for all six reaches A
    assert bodies_in(b.qm, Q) == [b"%d" % i for i in range(6)]
    assert [type(w) for w in a.held] == [ReleaseBatch]  # the first turn only: 1..3
    store = a.qm.store
    #: (what ran in the store, batches committed before the transaction it ran in).
    events: list[tuple[str, int]] = []
    turn_held, go = threading.Event(), threading.Event()
    real_release = outgoing.release_outgoing_counted

    def release_turn(queue_id: int, up_to: int, *args: Any, **kw: Any) -> Callable[[WriteContext], Any]:
        op = real_release(queue_id, up_to, *args, **kw)

        def turn(ctx: WriteContext) -> Any:
            events.append((f"turn through {up_to}", store.stats.batches))
            if up_to == 3:  # the first turn holds the store's writer until ``go``
                turn_held.set()
                if not go.wait(WAIT):
                    raise AssertionError("the test never let the first turn go on")
            return op(ctx)

        return turn

    monkeypatch.setattr(outgoing, "release_outgoing_counted", release_turn)

    # The application's commit is queued through Store.submit, which returns once the
    # operation is queued: the test knows it waits behind the turn before letting the
    # turn go on.
    queued = threading.Event()
    real_write = store.write

    def write(fn: Callable[[WriteContext], Any]) -> Any:
        if threading.current_thread() is not app_thread:
            return real_write(fn)

        def commit(ctx: WriteContext) -> Any:
            events.append(("application's commit", store.stats.batches))
            return fn(ctx)

        future = store.submit(commit)
        queued.set()
        return future.result(WAIT)

    monkeypatch.setattr(store, "write", write)

    def drive() -> None:
        # As net/mqqb.py's driver: run a work item, report it done, take the next one.
        work = a.held.pop()
        while work is not None:
            a.transfer.store_work_done(work, a.transfer.run_store_work(work), net.clock.now)
            work = a.transfer.next_store_work()

    errors: list[BaseException] = []

    def guarded(fn: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # reported by the test's thread
                errors.append(exc)

        return run

    driver = threading.Thread(target=guarded(drive), name="store-work")
    app_thread = threading.Thread(
        target=guarded(lambda: send_tx(a.qm, DEST_B, [b"sent meanwhile"])), name="application"
    )
    driver.start()
    try:
        assert turn_held.wait(WAIT)
        app_thread.start()
        assert queued.wait(WAIT)  # queued behind the turn that holds the writer
    finally:
        go.set()
        driver.join(WAIT)
        if app_thread.ident is not None:  # started
            app_thread.join(WAIT)
    assert not driver.is_alive() and not app_thread.is_alive() and not errors
    assert [what for what, _ in events] == ["turn through 3", "application's commit", "turn through 6"]
    first, commit, second = (n for _, n in events)
    # Each in its own transaction, in that order: the commit did not wait for the second turn.
    assert first < commit < second
    assert outgoing_count(a.qm) == 1  # the six released; the message sent meanwhile waits
