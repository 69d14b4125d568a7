"""A backlog larger than one poll's slice is loaded slice after slice without waiting for
the poll interval (the node re-polls at once while Transfer.poll reports more)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from openmsmq.net import MQQBNode, NetConfig
from openmsmq.qm.manager import QueueManager
from openmsmq.store.records import MessageRecord
from openmsmq.transfer.engine import Transfer, TransferConfig

from .test_mqqb import DEST_B, A, B, Q, _free_port, _outgoing, _wait_for


def test_backlog_is_loaded_in_slices_without_waiting_for_the_poll_interval(tmp_path: Path) -> None:
    async def main() -> None:
        port = _free_port()
        qa = QueueManager(tmp_path / "a", integrity_check=False)
        qb = QueueManager(tmp_path / "b", integrity_check=False)
        qb.create_queue(Q, transactional=True)
        for t in range(4):
            tx = qa.begin()
            qa.send_many(DEST_B, [MessageRecord(body=f"{t}-{i}".encode()) for i in range(250)], tx)
            tx.commit()
        loop = asyncio.get_running_loop()

        # One poll at start, the next only after an hour: everything past the first
        # slice of 50 can only come from the immediate re-polls.
        def net(host: str) -> NetConfig:
            return NetConfig(host=host, port=port, backoff_min=0.05, backoff_max=0.2, poll_interval=3600.0)

        cfg_a = TransferConfig(local_addresses=(A,), batch_size=20, load_per_poll=50)
        node_a = MQQBNode(Transfer(qa, cfg_a, loop.time()), net(A))
        node_b = MQQBNode(Transfer(qb, TransferConfig(local_addresses=(B,)), loop.time()), net(B))
        await node_b.start()
        await node_a.start()
        try:
            await _wait_for(lambda: qb.get_queue(Q).msg_count == 1000)
            # The OrderAck (Order Ack Send Timer, 0.5 s) releases everything at A.
            await _wait_for(lambda: _outgoing(qa) == 0)
        finally:
            await node_a.stop()
            await node_b.stop()
        got = [m.body.decode() for m in qb.peek_range(Q, 0, 2000)]
        assert got == [f"{t}-{i}" for t in range(4) for i in range(250)]
        qa.close()
        qb.close()

    asyncio.run(main())
