"""The lease statements (openmsmq.store.lease) on a real PostgreSQL server, and how they
meet the store's fence: a takeover makes every later write of the former active fail."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Iterator

import pytest

from openmsmq.errors import FencedError, StorageError
from openmsmq.store import queues
from openmsmq.store.lease import PgLease, describe_holder
from openmsmq.store.pg.db import PgStore
from openmsmq.store.records import QueueType
from tests.pgserver import PgServer

GUID = uuid.UUID("6b1c0d0e-1111-4a4a-9b9b-0123456789ab")


@pytest.fixture
def store(pg_dsn: str) -> Iterator[PgStore]:
    """The QM's store (its schema holds qm_lease)."""
    s = PgStore(pg_dsn, threaded=False)
    s.write(queues.init_qm_state(GUID, 1000))
    yield s
    s.close()


def _create(name: str) -> object:
    return queues.create_queue(
        name=name, display_name=name, queue_type=QueueType.PRIVATE, transactional=True, label="",
        quota_kb=0, journal_quota_kb=0, journal=False, now=1000,
    )  # fmt: skip


def _run(coro: object) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


def test_a_new_qm_has_a_free_lease_at_epoch_zero(store: PgStore) -> None:
    async def go() -> None:
        lease = PgLease(store.dsn, GUID)
        row = await lease.read()
        assert (row.epoch, row.holder) == (0, None) and row.remaining <= 0 and row.since is None
        await lease.close()

    _run(go())


def test_takeover_is_a_compare_and_set_and_renewal_needs_the_lease(store: PgStore) -> None:
    async def go() -> None:
        a, b = PgLease(store.dsn, GUID), PgLease(store.dsn, GUID)
        assert await a.acquire(0, 1, "a", 30.0) is None
        # b saw epoch 0 too: its takeover finds epoch 1 and a holder, and is refused.
        seen = await b.acquire(0, 1, "b", 30.0)
        assert seen is not None and (seen.epoch, seen.holder) == (1, "a") and 29 < seen.remaining <= 30
        seen = await b.acquire(1, 2, "b", 30.0)  # right epoch, but the lease is not free
        assert seen is not None and seen.holder == "a"
        assert await a.renew(1, "a", 30.0) is None
        refused = await b.renew(1, "b", 30.0)
        assert refused is not None and refused.holder == "a"
        assert await b.release(1, "b") is False
        assert await a.release(1, "a") is True
        row = await b.read()
        assert row.holder is None and row.remaining <= 0
        assert await b.acquire(1, 2, "b", 30.0) is None
        refused = await a.renew(1, "a", 30.0)
        assert refused is not None and (refused.epoch, refused.holder) == (2, "b")
        await a.close()
        await b.close()

    _run(go())


def test_an_expired_lease_can_be_taken_and_no_longer_renewed(store: PgStore) -> None:
    async def go() -> None:
        a, b = PgLease(store.dsn, GUID), PgLease(store.dsn, GUID)
        assert await a.acquire(0, 1, "a", 0.2) is None
        seen = await b.read()
        assert seen.holder == "a" and seen.remaining > 0
        deadline = time.monotonic() + 10
        while (await b.read()).remaining > 0:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        # expired and not taken: a renewal is refused all the same (the holder stopped at its
        # deadline already), and the takeover succeeds
        refused = await a.renew(1, "a", 30.0)
        assert refused is not None and refused.remaining <= 0
        assert await b.acquire(1, 2, "b", 30.0) is None
        await a.close()
        await b.close()

    _run(go())


def test_after_a_takeover_the_former_active_commits_nothing(store: PgStore) -> None:
    async def go() -> None:
        a, b = PgLease(store.dsn, GUID), PgLease(store.dsn, GUID)
        assert await a.acquire(0, 1, "a", 0.3) is None
        active = PgStore(store.dsn, threaded=False, fencing_epoch=1)
        active.write(_create("private$\\before"))  # type: ignore[arg-type]
        deadline = time.monotonic() + 10
        while await b.acquire(1, 2, "b", 30.0) is not None:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        with pytest.raises(FencedError) as err:
            active.write(_create("private$\\after"))  # type: ignore[arg-type]
        assert err.value.epoch == 1 and err.value.found == 2
        active.close()
        names = store.read(lambda conn: [r[0] for r in conn.execute("SELECT name FROM queues")])
        assert any("before" in n for n in names) and not any("after" in n for n in names)
        await a.close()
        await b.close()

    _run(go())


def test_a_stopped_server_fails_the_request_and_the_next_one_reconnects(pg_server: PgServer) -> None:
    dsn = pg_server.new_database()
    s = PgStore(dsn, threaded=False)
    s.write(queues.init_qm_state(GUID, 1000))
    s.close()

    async def go() -> None:
        lease = PgLease(dsn, GUID, statement_timeout=1.0, connect_timeout=1.0)
        assert await lease.acquire(0, 1, "a", 30.0) is None
        pg_server.stop_immediate()
        try:
            with pytest.raises(StorageError, match="lease of"):
                await lease.renew(1, "a", 30.0)
            with pytest.raises(StorageError):
                await lease.read()
        finally:
            pg_server.restart()
        assert await lease.renew(1, "a", 30.0) is None  # reconnected; the row survived
        await lease.close()

    _run(go())
    pg_server.drop_database(dsn)


def test_holder_names_are_unique_per_process_start() -> None:
    assert describe_holder("n", 1) != describe_holder("n", 1)
    assert describe_holder("node-a", 42).startswith("node-a:42:")
