"""ReceiptCheck (the rules of receipt run per received message, MS-MQQB 3.1.5.8) follows
its queue through deletion and re-creation while it remembers the previous message's
DestinationQueue: it always answers as :func:`refusal_class` on the queue's current record."""

from __future__ import annotations

import uuid
from pathlib import Path

from openmsmq.qm.manager import QueueManager
from openmsmq.store.records import MessageRecord
from openmsmq.transfer.arrival import ReceiptCheck, refusal_class
from openmsmq.transfer.codec import packet_from_message
from openmsmq.transfer.state import WallClock
from openmsmq.wire.constants import MessageClass
from openmsmq.wire.ids import TxSequenceId
from openmsmq.wire.packets import UserMessage
from openmsmq.wire.userheader import DirectQueueFormatName

SENDER = uuid.UUID("6f1c3b0e-9a52-4c1d-8d0e-1f2a3b4c5d6e")
NOW = 1_700_000_100


def _packet(dest: DirectQueueFormatName, qm: QueueManager, number: int) -> UserMessage:
    m = MessageRecord(
        body=b"x", transactional=True, tx_sequence_id=TxSequenceId(1_700_000_000, 1).value,
        tx_sequence_number=number, tx_previous_sequence_number=number - 1, sent_time=NOW,
        id_lineage=SENDER, source_machine=SENDER, id_uniquifier=number, destination_qm=qm.guid,
    )  # fmt: skip
    return packet_from_message(m, dest, SENDER)


def _reference(qm: QueueManager, name: str, p: UserMessage) -> int | None:
    handle = qm.find_queue(name)
    record = None if handle is None else handle.record
    return refusal_class(record, SENDER, True, p.user.sent_time, p.time_to_reach_queue, NOW)


def test_receipt_check_follows_deletion_and_recreation(tmp_path: Path) -> None:
    qm = QueueManager(tmp_path / "qm", threaded=False, integrity_check=False)
    try:
        name = "private$\\orders"
        qm.create_queue(name, transactional=True)
        check = ReceiptCheck(qm, WallClock(0.0))
        # One DestinationQueue object for the whole run, as the decoder shares it.
        dest = DirectQueueFormatName("TCP:127.0.0.2\\PRIVATE$\\orders")
        seen: list[int | None] = []
        number = 0

        def receive() -> None:
            nonlocal number
            number += 1
            p = _packet(dest, qm, number)
            got = check.refusal_class(p, NOW)
            assert got == _reference(qm, name, p)
            seen.append(got)

        receive()
        receive()
        qm.delete_queue(name)
        receive()
        receive()
        qm.create_queue(name, transactional=False)
        receive()
        qm.delete_queue(name)
        qm.create_queue(name, transactional=True)
        receive()
        # An equal name in a new object (another session's decoder) finds the same queue.
        dest = DirectQueueFormatName("TCP:127.0.0.2\\PRIVATE$\\orders")
        receive()
        assert seen == [
            None, None,
            MessageClass.NACK_BAD_DST_Q, MessageClass.NACK_BAD_DST_Q,
            MessageClass.NACK_NOT_TRANSACTIONAL_Q,
            None, None,
        ]  # fmt: skip
    finally:
        qm.close()
