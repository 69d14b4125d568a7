"""Large messages keep both queue managers' memory bounded (real sockets, 127.0.0.1/.2).

The sender holds at most ``TransferConfig.queued_bytes`` of messages per session (loaded,
encoded, sent and not yet session-acknowledged), also when it resends everything
unacknowledged after a reconnect; the receiver stops reading once more than
``TransferConfig.unstored_bytes`` of received messages wait for its store, and reads
again when they are stored (TCP flow control holds the sender meanwhile). Before, 300
messages of 4 MB took 1.7 GB at the sender and 1.4 GB at the receiver, and a resend read
back every unacknowledged message at once.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from openmsmq.net import MQQBNode, NetConfig
from openmsmq.qm.manager import QueueManager
from openmsmq.store.records import MessageRecord
from openmsmq.transfer.engine import Transfer, TransferConfig
from tests.net.test_mqqb import DEST_B, Q, _count, _free_port, _outgoing, _run, _wait_for

A, B = "127.0.0.1", "127.0.0.2"
SIZE = 256 * 1024
BOUND = 1024 * 1024  # four messages
COUNT = 40


class _Node:
    """A queue manager and its MQQBNode with byte bounds of BOUND."""

    def __init__(self, root: Path, address: str, port: int) -> None:
        self.qm = QueueManager(root / address, integrity_check=False)
        self.address, self.port = address, port
        self.node: MQQBNode | None = None

    async def start(self) -> _Node:
        cfg = TransferConfig(local_addresses=(self.address,), queued_bytes=BOUND, unstored_bytes=BOUND)
        transfer = Transfer(self.qm, cfg, asyncio.get_running_loop().time())
        net = NetConfig(
            host=self.address, port=self.port, backoff_min=0.05, backoff_max=0.2, poll_interval=0.02
        )
        self.node = MQQBNode(transfer, net)
        await self.node.start()
        return self

    async def stop(self) -> None:
        assert self.node is not None
        await self.node.stop()


def _watch_sender(node: MQQBNode, seen: dict[str, int]) -> None:
    """Record the most bytes the sender's sessions held and the most rows read at once."""
    t = node.transfer.sender.transmitter
    chunk, reload = t.transmit_chunk, t.reload

    def transmit_chunk(out: Any, conn: Any, messages: Any, resend: bool, now: float) -> None:
        chunk(out, conn, messages, resend, now)
        held = conn.session.unacked_bytes + conn.session.backlog * SIZE
        seen["held"] = max(seen["held"], held)

    def reload_rows(out: Any, handles: list[int]) -> Any:
        seen["reload"] = max(seen["reload"], len(handles))
        return reload(out, handles)

    t.transmit_chunk = transmit_chunk  # type: ignore[method-assign]
    t.reload = reload_rows  # type: ignore[method-assign]


def _watch_receiver(node: MQQBNode, seen: dict[str, int]) -> None:
    """Record the most received bytes that waited for the store and the pauses."""
    t = node.transfer
    feed, pause = t.data_received, node.pause_reading

    def data_received(cid: int, data: bytes, now: float) -> None:
        feed(cid, data, now)
        seen["unstored"] = max(seen["unstored"], t.unstored_bytes)

    def pause_reading() -> None:
        seen["pauses"] += 1
        pause()

    t.data_received = data_received  # type: ignore[method-assign]
    node.pause_reading = pause_reading  # type: ignore[method-assign]


@pytest.mark.parametrize("restart_receiver", [False, True])
def test_large_messages_move_with_bounded_memory_on_both_sides(
    tmp_path: Path, restart_receiver: bool
) -> None:
    port = _free_port()
    sender: dict[str, int] = {"held": 0, "reload": 0}
    receiver: dict[str, int] = {"unstored": 0, "pauses": 0}

    async def main() -> None:
        b = _Node(tmp_path, B, port)
        b.qm.create_queue(Q, transactional=True)
        a = _Node(tmp_path, A, port)
        for i in range(COUNT):
            with a.qm.begin() as tx:
                a.qm.send(DEST_B, MessageRecord(body=b"%04d" % i + bytes(SIZE - 4)), tx)
        await b.start()
        assert b.node is not None
        _watch_receiver(b.node, receiver)
        await a.start()
        assert a.node is not None
        _watch_sender(a.node, sender)
        if restart_receiver:
            # B goes away with messages sent and not OrderAck'ed: A resends all of them
            # to the new B, read back a part at a time.
            await _wait_for(lambda: _count(b.qm) >= COUNT // 4)
            await b.stop()
            b.qm.close()
            b = _Node(tmp_path, B, port)
            await b.start()
            assert b.node is not None
            _watch_receiver(b.node, receiver)
        await _wait_for(lambda: _count(b.qm) == COUNT and _outgoing(a.qm) == 0, timeout=60)
        got = [int(m.body[:4]) for m in b.qm.peek_range(Q, 0, COUNT + 1)]
        assert got == list(range(COUNT))  # exactly once, in order
        await a.stop()
        await b.stop()
        a.qm.close()
        b.qm.close()

    _run(main())
    # One message more than the bound at most (the bound is checked before each one).
    assert 0 < sender["held"] <= BOUND + SIZE
    assert sender["reload"] <= BOUND // SIZE + 1
    assert receiver["pauses"] > 0  # the store was slower than the socket at times
    assert receiver["unstored"] <= BOUND + 2 * SIZE
