"""The asyncio lease driver (openmsmq.ha.driver) with the real lease statements on a real
PostgreSQL server: two nodes of one queue manager in one event loop, each with a small
serving node that records what the driver asks of it and writes through a fenced store."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest

from openmsmq.errors import FencedError
from openmsmq.ha.driver import LeaseDriver
from openmsmq.ha.lease import LeaseConfig, LeaseCore
from openmsmq.store import queues
from openmsmq.store.lease import PgLease
from openmsmq.store.pg.db import PgStore

GUID = uuid.UUID("0a7e57ed-2222-4b4b-8c8c-0123456789ab")
FAST = LeaseConfig(duration=1.0, renew_interval=0.15, margin=0.3, poll_interval=0.1, retry_interval=0.1,
                   request_timeout=0.5)  # fmt: skip


class RecordingNode:
    """Opens a store fenced with the epoch on start, closes it on stop; records both."""

    def __init__(self, dsn: str, name: str) -> None:
        self.dsn = dsn
        self.name = name
        self.events: list[tuple[str, int]] = []
        self.store: PgStore | None = None
        self.fail_start = False

    async def start_serving(self, epoch: int) -> None:
        if self.fail_start:
            raise OSError("address already in use")
        self.store = PgStore(self.dsn, threaded=False, fencing_epoch=epoch, expected_guid=GUID)
        self.events.append(("start", epoch))

    async def stop_serving(self, epoch: int, reason: str) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None
        self.events.append(("stop", epoch))

    def write(self) -> None:
        assert self.store is not None
        self.store.write(
            lambda ctx: ctx.conn.execute("UPDATE qm_state SET sequential_id = sequential_id + 1")
        )


@pytest.fixture
def dsn(pg_dsn: str) -> Iterator[str]:
    s = PgStore(pg_dsn, threaded=False)
    s.write(queues.init_qm_state(GUID, 1000))
    s.close()
    yield pg_dsn


async def _until(pred: object, limit: float = 15.0) -> None:
    deadline = time.monotonic() + limit
    while not pred():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


def _driver(dsn: str, name: str) -> tuple[LeaseDriver, RecordingNode]:
    node = RecordingNode(dsn, name)
    return LeaseDriver(LeaseCore(FAST, name), PgLease(dsn, GUID, statement_timeout=0.5), node), node


Running = tuple[LeaseDriver, RecordingNode, asyncio.Task[None]]


async def _active_then_standby(dsn: str) -> tuple[Running, Running]:
    """Node "a" runs until it serves with epoch 1; then node "b" runs too."""
    a, na = _driver(dsn, "a")
    b, nb = _driver(dsn, "b")
    ta = asyncio.create_task(a.run())
    await _until(lambda: na.events == [("start", 1)])
    tb = asyncio.create_task(b.run())
    return (a, na, ta), (b, nb, tb)


async def _shutdown(driver: LeaseDriver, task: asyncio.Task[None]) -> None:
    """Shut ``driver`` down and wait for its run to end."""
    driver.shutdown()
    await asyncio.wait_for(task, 10)


def test_one_serves_the_other_takes_over_when_it_dies(dsn: str) -> None:
    async def go() -> None:
        (a, na, ta), (b, nb, tb) = await _active_then_standby(dsn)
        await asyncio.sleep(FAST.duration * 2)  # several renewals: b stays a standby
        assert nb.events == [] and b.status.role == "standby" and b.status.epoch == 1
        assert a.status.role == "active" and a.active
        na.write()
        # a dies without a word (its task and its connection go, its store is left open)
        ta.cancel()
        await asyncio.gather(ta, return_exceptions=True)
        died = time.monotonic()
        await _until(lambda: nb.events == [("start", 2)])
        took = time.monotonic() - died
        assert took >= FAST.duration - FAST.margin - FAST.renew_interval  # not before a's lease could expire
        nb.write()
        with pytest.raises(FencedError):
            na.write()  # the dead active's store, still open, commits nothing
        assert na.store is not None
        na.store.close()
        await _shutdown(b, tb)
        assert nb.events == [("start", 2), ("stop", 2)]

    asyncio.run(go())


def test_a_graceful_shutdown_hands_over_at_once(dsn: str) -> None:
    async def go() -> None:
        (a, na, ta), (b, nb, tb) = await _active_then_standby(dsn)
        await asyncio.sleep(0.3)
        await _shutdown(a, ta)
        assert na.events == [("start", 1), ("stop", 1)]
        row = await PgLease(dsn, GUID).read()
        assert row.holder in (None, "b")
        await _until(lambda: nb.events == [("start", 2)], limit=FAST.duration)  # released: no expiry wait
        await _shutdown(b, tb)

    asyncio.run(go())


def test_a_fenced_write_steps_the_node_down(dsn: str) -> None:
    async def go() -> None:
        a, na = _driver(dsn, "a")
        ta = asyncio.create_task(a.run())
        await _until(lambda: na.events == [("start", 1)])
        # Another process takes the lease by force (as after a pause of this one).
        other = PgLease(dsn, GUID)
        await other.release(1, "a")
        assert await other.acquire(1, 2, "intruder", 30.0) is None
        with pytest.raises(FencedError) as err:
            na.write()
        a.fenced(err.value.epoch)
        await _until(lambda: na.events == [("start", 1), ("stop", 1)])
        assert a.status.last_step_down is not None
        await _until(lambda: a.status.role == "standby")
        await _shutdown(a, ta)
        await other.close()

    asyncio.run(go())


def test_a_node_that_cannot_start_releases_the_lease_for_the_other(dsn: str) -> None:
    async def go() -> None:
        a, na = _driver(dsn, "a")
        na.fail_start = True
        b, nb = _driver(dsn, "b")
        ta = asyncio.create_task(a.run())
        await _until(lambda: a.status.last_step_down is not None)
        assert "address already in use" in (a.status.last_step_down or "")
        na.fail_start = False  # keep it from taking the lease back before b polls
        await _shutdown(a, ta)
        tb = asyncio.create_task(b.run())
        await _until(lambda: bool(nb.events), limit=FAST.duration)
        assert nb.events[0][0] == "start" and nb.events[0][1] >= 2
        await _shutdown(b, tb)

    asyncio.run(go())


def test_a_node_whose_serving_ended_by_itself_gives_the_lease_up(dsn: str) -> None:
    async def go() -> None:
        (a, na, ta), (b, nb, tb) = await _active_then_standby(dsn)
        await asyncio.sleep(0.3)
        a.give_up(1, "serving ended: boom")
        await _until(lambda: na.events == [("start", 1), ("stop", 1)])
        assert a.status.last_step_down == "serving ended: boom"
        await _until(lambda: nb.events == [("start", 2)], limit=FAST.duration)  # released, not expired
        for d, t in ((a, ta), (b, tb)):
            await _shutdown(d, t)

    asyncio.run(go())
