"""A FinalAck and an admin NACK over real sockets: two queue managers with their MS-MQQB
nodes on 127.0.0.1 and 127.0.0.2 (as ``serve()`` runs them, listener attached with
``Transfer.ack_session_for``); the receiving application rejects the message."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

from openmsmq.net import MQQBNode, NetConfig
from openmsmq.qm import names
from openmsmq.qm.manager import QueueManager
from openmsmq.store.records import MessageRecord
from openmsmq.transfer.ack_admin import attach_acknowledgments
from openmsmq.transfer.engine import Transfer, TransferConfig
from openmsmq.wire.constants import AckRequest, MessageClass
from openmsmq.wire.ids import ObjectId
from tests.serve_proc import A, B, free_port


async def _start(root: Path, address: str, port: int) -> tuple[QueueManager, MQQBNode]:
    qm = QueueManager(root / address, integrity_check=False)
    transfer = Transfer(qm, TransferConfig(local_addresses=(address,)), asyncio.get_running_loop().time())
    attach_acknowledgments(qm, session_of=transfer.ack_session_for)
    node = MQQBNode(
        transfer, NetConfig(host=address, port=port, backoff_min=0.05, backoff_max=0.2, poll_interval=0.02)
    )
    await node.start()
    return qm, node


async def _wait_for(pred: Callable[[], bool], timeout: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not pred():
        if loop.time() > end:
            raise AssertionError("timed out")
        await asyncio.sleep(0.02)


def test_rejected_receive_acknowledged_over_sockets(tmp_path: Path) -> None:
    async def main() -> None:
        port = free_port()
        qa, na = await _start(tmp_path, A, port)
        qb, nb = await _start(tmp_path, B, port)
        try:
            qa.create_queue("private$\\admin")
            qb.create_queue("private$\\orders", transactional=True)
            m = MessageRecord(
                body=b"o",
                admin_queue=f"DIRECT=TCP:{A}\\private$\\admin",
                ack_flags=AckRequest.NEG_RECEIVE,
                negative_journaling=True,
            )
            with qa.begin() as tx:
                sent = qa.send(f"DIRECT=TCP:{B}\\private$\\orders", m, tx)
            await _wait_for(lambda: qb.get_queue("private$\\orders").msg_count == 1)
            await _wait_for(lambda: qa.get_queue(names.AWAITING_FINAL_ACK).msg_count == 1)

            def reject() -> None:
                with qb.begin() as tx:
                    got = qb.receive("private$\\orders", tx=tx)
                    tx.set_dequeue_reason(got.lookup_id, MessageClass.NACK_RECEIVE_REJECTED)

            await asyncio.to_thread(reject)
            await _wait_for(lambda: qa.get_queue(names.DEADXACT).msg_count == 1)
            await _wait_for(lambda: qa.get_queue("private$\\admin").msg_count == 1)
            [ack] = qa.peek_range("private$\\admin", 0, 10)
            assert ack.message_class == MessageClass.NACK_RECEIVE_REJECTED
            assert ack.correlation_id == ObjectId(qa.guid, sent.id_uniquifier).encode()
            [dead] = qa.peek_range(names.DEADXACT, 0, 10)
            assert dead.id_uniquifier == sent.id_uniquifier
            assert dead.message_class == MessageClass.NACK_RECEIVE_REJECTED
            assert qa.get_queue(names.AWAITING_FINAL_ACK).msg_count == 0
        finally:
            await na.stop()
            await nb.stop()
            qa.close()
            qb.close()

    asyncio.run(asyncio.wait_for(main(), 60))
