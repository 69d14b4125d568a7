"""Async client API: same surface, batching in one hop, cancellation puts messages back."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from openmsmq.client import SINGLE_MESSAGE, Access, Ack, Seek, aio
from openmsmq.errors import HResult, IOTimeoutError, MQError, QueueNotFoundError

Q = "private$\\plain"
TQ = "private$\\orders"


async def _setup(path: Path) -> aio.AsyncConnection:
    conn = await aio.connect(path)
    await conn.create_queue(Q)
    await conn.create_queue(TQ, transactional=True)
    return conn


def test_async_send_receive_batches(tmp_path: Path) -> None:
    async def main() -> None:
        async with await _setup(tmp_path / "d") as conn:
            q = await conn.open_queue(Q)
            r = await q.send("one", label="l")
            assert r.lookup_id > 0
            await q.send_many([b"two", b"three", b"four"])
            assert (await q.peek(timeout=0)).text == "one"
            assert [m.text for m in await q.peek_many(10)] == ["one", "two", "three", "four"]
            m = await q.receive(timeout=0)
            assert m.text == "one" and m.label == "l"
            assert [m.text for m in await q.receive_many(2, timeout=0)] == ["two", "three"]
            assert [m.text async for m in q.iter_receive(batch=10, timeout=0)] == ["four"]
            with pytest.raises(IOTimeoutError):
                await q.receive(timeout=0.01)
            with pytest.raises(IOTimeoutError):
                await q.receive_many(5, timeout=0.01)
            with pytest.raises(QueueNotFoundError):
                await conn.open_queue("private$\\missing")
            assert {i.path for i in await conn.list_queues()} == {Q, TQ}

    asyncio.run(main())


def test_async_transactions(tmp_path: Path) -> None:
    async def main() -> None:
        async with await _setup(tmp_path / "d") as conn:
            q = await conn.open_queue(TQ)
            async with conn.transaction() as tx:
                await q.send_many([b"a", b"b"], tx=tx)
            assert tx.state == "committed"
            with pytest.raises(RuntimeError):
                async with conn.transaction() as tx2:
                    assert (await q.receive(timeout=0, tx=tx2)).text == "a"
                    assert [m.text for m in await q.receive_many(5, timeout=0, tx=tx2)] == ["b"]
                    raise RuntimeError
            assert tx2.state == "aborted"
            assert [m.text for m in await q.peek_many(10)] == ["a", "b"]
            with pytest.raises(MQError) as e:
                await tx2.commit()
            assert e.value.hresult == HResult.MQ_ERROR_TRANSACTION_SEQUENCE

    asyncio.run(main())


def test_async_cursor_lookup_two_phase_purge(tmp_path: Path) -> None:
    async def main() -> None:
        async with await _setup(tmp_path / "d") as conn:
            q = await conn.open_queue(Q)
            ids = [(await q.send(b)).lookup_id for b in (b"a", b"b", b"c")]
            async with await q.cursor() as c:
                assert (await c.peek_current()).text == "a"
                assert (await c.peek_next()).text == "b"
                assert (await c.receive_current()).text == "b"
                assert [m.text for m in await c.peek_many(5)] == ["c"]
            assert (await q.peek_by_lookup_id(ids[0], Seek.NEXT)).text == "c"
            assert (await q.receive_by_lookup_id(ids[2])).text == "c"
            p = await q.start_receive(timeout=0)
            assert p.message.text == "a"
            await q.end_receive(p, Ack.NACK)
            assert (await q.info()).message_count == 1
            assert await q.purge() == 1
            await q.close()

    asyncio.run(main())


def test_cancelled_receive_puts_the_message_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aio, "WAIT_SLICE", 0.05)

    async def main() -> None:
        async with await _setup(tmp_path / "d") as conn:
            q = await conn.open_queue(TQ)
            # a waiter with no message is cancelled cleanly
            task = asyncio.create_task(q.receive())
            await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            await q.send(b"precious", tx=SINGLE_MESSAGE)
            # whatever a cancelled receive locked comes back: the next receive gets it
            for _ in range(20):
                task = asyncio.create_task(q.receive(timeout=5))
                await asyncio.sleep(0)
                task.cancel()
                try:
                    m = await task
                except asyncio.CancelledError:
                    continue
                assert m.text == "precious"
                await q.send(b"precious", tx=SINGLE_MESSAGE)
            got = await q.receive(timeout=5)
            assert got.text == "precious"
            with pytest.raises(IOTimeoutError):
                await q.receive(timeout=0)

    asyncio.run(main())


def test_async_wait_is_woken_by_send(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(aio, "WAIT_SLICE", 0.05)

    async def main() -> None:
        async with await _setup(tmp_path / "d") as conn:
            q = await conn.open_queue(Q)
            waiter = asyncio.create_task(q.receive_many(10, timeout=30))
            await asyncio.sleep(0)
            await q.send_many([b"x", b"y"])
            assert [m.text for m in await waiter] == ["x", "y"]

    asyncio.run(main())


def test_async_sends_in_a_transaction_ask_for_negative_source_journaling_by_default(tmp_path: Path) -> None:
    async def main() -> None:
        async with await _setup(tmp_path / "d") as conn:
            q = await conn.open_queue(TQ)
            async with conn.transaction() as tx:
                await q.send(b"one", tx=tx)
                await q.send_many([b"two"], tx=tx, dead_letter=False)
            p = await conn.open_queue(Q)
            await p.send(b"plain")
            assert [(m.text, m.dead_letter) for m in await q.peek_many(5)] == [("one", True), ("two", False)]
            assert [(m.text, m.dead_letter) for m in await p.peek_many(5)] == [("plain", False)]

    asyncio.run(main())


def test_async_reject_and_move(tmp_path: Path) -> None:
    """The handle's calls the asyncio API runs as the blocking Queue's in a worker thread:
    reject in a transaction, and a move to a subqueue and back inside a transaction."""

    async def main() -> None:
        async with await _setup(tmp_path / "d") as conn:
            q = await conn.open_queue(TQ)
            await q.send_many([b"bad", b"m"], tx=SINGLE_MESSAGE)
            async with conn.transaction() as tx:
                m = await q.receive(timeout=0, tx=tx)
                await q.reject(m, tx)
            assert m.text == "bad" and (await q.info()).message_count == 1
            got = await q.peek(timeout=0)
            new = await q.move(got.lookup_id, "poison")
            assert new > got.lookup_id and (await q.info()).message_count == 0
            p = await conn.open_queue(TQ + ";poison", Access.RECEIVE)
            async with conn.transaction() as tx:
                assert await p.move(new, TQ, tx=tx) == 0
            back = await q.peek(timeout=0)
            assert (back.text, back.move_count) == ("m", 2)
            await p.close()
            await q.close()

    asyncio.run(main())
