"""Names and lookups as System.Messaging users write them: ``FormatName:``, "did you mean",
the default access of a remote format name, receive by MessageId and by CorrelationId."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from openmsmq.client import SINGLE_MESSAGE, Access, aio, connect
from openmsmq.client.selection import did_you_mean, object_id, queue_name
from openmsmq.errors import HResult, MessageNotFoundError, MQError, QueueNotFoundError

Q = "private$\\orders"
REMOTE = "DIRECT=TCP:127.0.0.42\\PRIVATE$\\orders"


def test_formatname_prefix_is_dropped_in_every_spelling(tmp_path: Path) -> None:
    with connect(tmp_path / "d") as conn:
        conn.create_queue(Q)
        for spelling in (
            "FormatName:DIRECT=OS:.\\private$\\orders",
            "formatname:DIRECT=OS:.\\private$\\orders",
        ):
            with conn.open_queue(spelling) as q:
                q.send(b"x")
                assert q.name == "DIRECT=OS:.\\private$\\orders"
        assert conn.queue_info("FORMATNAME:DIRECT=OS:.\\private$\\orders").message_count == 2
        assert queue_name("  FormatName:PRIVATE=abc\\1") == "PRIVATE=abc\\1"
        assert queue_name(Q) == Q


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        ("orders", "private$\\orders"),
        ("private\\orders", "private$\\orders"),
        (".\\private\\o", ".\\private$\\o"),
    ],
)
def test_did_you_mean_names_the_private_queue_as_typed(tmp_path: Path, typed: str, meant: str) -> None:
    assert did_you_mean(typed) == meant
    with connect(tmp_path / "d") as conn:
        conn.create_queue(Q)
        with pytest.raises(MQError) as err:
            conn.open_queue(typed)
        assert f"did you mean '{meant}'?" in str(err.value)
        assert "\\\\" not in str(err.value)  # backslashes as typed, pasteable
        with pytest.raises(MQError) as err2:
            conn.queue_info(typed)
        assert f"did you mean '{meant}'?" in str(err2.value)


def test_no_hint_for_names_that_are_right_or_other(tmp_path: Path) -> None:
    assert did_you_mean("private$\\orders") is None
    assert did_you_mean(REMOTE) is None
    with connect(tmp_path / "d") as conn, pytest.raises(QueueNotFoundError) as err:
        conn.open_queue("private$\\nothere")
    assert "did you mean" not in str(err.value)


def test_remote_format_name_opens_for_send_with_the_default_access(tmp_path: Path) -> None:
    with connect(tmp_path / "d") as conn:
        with conn.open_queue(REMOTE) as q:
            assert q.access == Access.SEND
            q.send(b"hello", tx=SINGLE_MESSAGE)
        assert conn.queue_info(REMOTE).kind == "outgoing"
        assert conn.queue_info(REMOTE).message_count == 1
        conn.create_queue(Q)
        with conn.open_queue(Q) as local:
            assert local.access == Access.SEND | Access.RECEIVE
        # an explicit access is kept: reading a remote queue needs its QM's remote read
        with pytest.raises(MQError) as err:
            conn.open_queue(REMOTE, Access.RECEIVE)
        assert err.value.hresult == HResult.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION


def test_receive_by_message_id_and_correlation_id(tmp_path: Path) -> None:
    with connect(tmp_path / "d") as conn:
        conn.create_queue(Q, transactional=True)
        with conn.open_queue(Q) as q:
            receipts = q.send_many([f"m{i}".encode() for i in range(600)], tx=SINGLE_MESSAGE)
            target = receipts[450]
            corr = object_id(receipts[10].message_id, "id")
            q.send(b"reply", tx=SINGLE_MESSAGE, correlation_id=corr)
            assert q.peek_by_id(target.message_id).body == b"m450"
            assert q.peek_by_id(target.message_id.upper().strip("{").replace("}", "")).body == b"m450"
            with conn.transaction() as tx:
                assert q.receive_by_id(target.message_id, tx).body == b"m450"
            with pytest.raises(MessageNotFoundError):
                q.receive_by_id(target.message_id)  # gone now
            assert q.peek_by_correlation_id(receipts[10].message_id).body == b"reply"
            with conn.transaction() as tx:
                assert q.receive_by_correlation_id(corr, tx).body == b"reply"
            with pytest.raises(MessageNotFoundError):
                q.peek_by_correlation_id(corr)
            assert q.info().message_count == 599
            with pytest.raises(MQError) as err:
                q.receive_by_id("not-an-id")
            assert err.value.hresult == HResult.MQ_ERROR_INVALID_PARAMETER
            assert "'not-an-id'" in str(err.value)


def test_async_by_id_formatname_and_default_access(tmp_path: Path) -> None:
    async def main() -> None:
        async with await aio.connect(tmp_path / "d") as conn:
            await conn.create_queue(Q)
            q = await conn.open_queue("FormatName:DIRECT=OS:.\\" + Q)
            receipts = await q.send_many([b"a", b"b", b"c"])
            corr = object_id(receipts[0].message_id, "id")
            await q.send(b"r", correlation_id=corr)
            assert (await q.peek_by_id(receipts[1].message_id)).body == b"b"
            assert (await q.receive_by_id(receipts[1].message_id)).body == b"b"
            with pytest.raises(MessageNotFoundError):
                await q.receive_by_id(receipts[1].message_id)
            assert (await q.receive_by_correlation_id(receipts[0].message_id)).body == b"r"
            with pytest.raises(MessageNotFoundError):
                await q.peek_by_correlation_id(corr)
            assert [m.body for m in await q.peek_many(10)] == [b"a", b"c"]
            await q.close()
            remote = await conn.open_queue(REMOTE)
            assert remote.access == Access.SEND
            await remote.close()
            with pytest.raises(MQError) as err:
                await conn.open_queue("orders")
            assert "did you mean 'private$\\orders'?" in str(err.value)

    asyncio.run(main())
