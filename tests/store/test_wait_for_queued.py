"""``wait_for_queued()`` on both backends: it returns once every write queued or running
when it was called has committed, and at once, without a transaction, when none is (a
release turn calls it after each turn, docs/transfer.md step 6)."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from openmsmq.store import queues
from openmsmq.store.writes import WriteContext
from tests.store.conftest import Opener

#: Bound (s) of every wait for another thread; reached only when the test fails.
WAIT = 30.0


@pytest.mark.parametrize("before", ["running", "queued"])
def test_wait_for_queued_returns_after_the_writes_queued_before_it(
    open_store: Opener, monkeypatch: pytest.MonkeyPatch, before: str
) -> None:
    """``before``: what the wait comes after: a batch that is running (nothing queued),
    or a write queued behind it."""
    store = open_store()
    held, go = threading.Event(), threading.Event()
    try:
        store.write(queues.init_qm_state(uuid.uuid4(), 1000))
        batches = store.stats.batches
        store.wait_for_queued()  # nothing queued: at once, no transaction
        assert store.stats.batches == batches

        def hold(ctx: WriteContext) -> None:
            held.set()
            if not go.wait(WAIT):
                raise AssertionError("the test never let the batch go on")

        first = store.submit(hold)
        assert held.wait(WAIT)  # a batch holds the writer
        # The write to wait for: the running batch's, or one queued behind it.
        queued = first if before == "running" else store.submit(lambda ctx: None)

        # The waiting thread signals once it queued its own wait (or returned): only then
        # does the held batch go on, so a wait_for_queued that returned at once would see
        # ``queued`` not done.
        decided = threading.Event()
        seen: list[bool] = []
        real_write = store.write

        def write(fn: Callable[[WriteContext], Any]) -> Any:
            if threading.current_thread() is waiter:
                decided.set()
            return real_write(fn)

        monkeypatch.setattr(store, "write", write)

        def wait() -> None:
            store.wait_for_queued()
            seen.append(queued.done())
            decided.set()

        waiter = threading.Thread(target=wait, name="waiter")
        waiter.start()
        assert decided.wait(WAIT)
        go.set()
        waiter.join(WAIT)
        assert not waiter.is_alive()
        assert seen == [True]
        first.result(WAIT)
        queued.result(WAIT)
    finally:
        go.set()
        store.close()
