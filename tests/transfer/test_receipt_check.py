"""ReceiptCheck (the rules of receipt run per received message, MS-MQQB 3.1.5.8) follows
its queue through deletion and re-creation while it remembers the previous message's
DestinationQueue: it always answers as :func:`refusal_class` on the queue's current record."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

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
NAME = "private$\\orders"


@pytest.fixture
def qm(tmp_path: Path) -> Iterator[QueueManager]:
    """A queue manager with the transactional queue NAME."""
    manager = QueueManager(tmp_path / "qm", threaded=False, integrity_check=False)
    try:
        manager.create_queue(NAME, transactional=True)
        yield manager
    finally:
        manager.close()


def _dest() -> DirectQueueFormatName:
    """A DestinationQueue naming NAME on this QM (a new object each call)."""
    return DirectQueueFormatName("TCP:127.0.0.2\\PRIVATE$\\orders")


def _packet(
    dest: DirectQueueFormatName, qm: QueueManager, number: int, sender: uuid.UUID = SENDER, sequence: int = 1
) -> UserMessage:
    """Message ``number`` of ``sender``'s transactional sequence ``sequence`` to ``dest``."""
    m = MessageRecord(
        body=b"x", transactional=True, tx_sequence_id=TxSequenceId(1_700_000_000, sequence).value,
        tx_sequence_number=number, tx_previous_sequence_number=number - 1, sent_time=NOW,
        id_lineage=sender, source_machine=sender, id_uniquifier=number, destination_qm=qm.guid,
    )  # fmt: skip
    return packet_from_message(m, dest, sender)


def _reference(qm: QueueManager, name: str, p: UserMessage) -> int | None:
    handle = qm.find_queue(name)
    record = None if handle is None else handle.record
    return refusal_class(record, SENDER, True, p.user.sent_time, p.time_to_reach_queue, NOW)


def test_receipt_check_follows_deletion_and_recreation(qm: QueueManager) -> None:
    name = NAME
    check = ReceiptCheck(qm, WallClock(0.0))
    # One DestinationQueue object for the whole run, as the decoder shares it.
    dest = _dest()
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
    dest = _dest()
    receive()
    assert seen == [
        None, None,
        MessageClass.NACK_BAD_DST_Q, MessageClass.NACK_BAD_DST_Q,
        MessageClass.NACK_NOT_TRANSACTIONAL_Q,
        None, None,
    ]  # fmt: skip


def test_a_verdict_remembered_for_a_queue_and_sender_still_follows_expiry_and_changes(
    qm: QueueManager,
) -> None:
    """The check remembers that a queue's record and a sender passed the rules, so that the
    next message of the stream is not asked again: a later message past its
    TimeToReachQueue, a changed queue (its allowlist), another sender are still refused,
    each exactly as :func:`refusal_class` refuses it."""
    name = NAME
    check = ReceiptCheck(qm, WallClock(0.0))
    dest = _dest()
    p1, p2 = _packet(dest, qm, 1), _packet(dest, qm, 2)
    assert check.refusal_class(p1, NOW) is None
    assert check.refusal_class(p2, NOW) is None
    # The same sender object and queue record, the message sent long ago.
    late = NOW + p2.time_to_reach_queue + 1
    assert check.refusal_class(p2, late) == MessageClass.NACK_REACH_QUEUE_TIMEOUT
    assert check.refusal_class(p2, NOW) is None
    # The queue changes: only another QM may send now.
    qm.set_queue_properties(name, allowed_senders=[uuid.UUID(int=7)])
    assert check.refusal_class(p2, NOW) == MessageClass.NACK_ACCESS_DENIED == _reference(qm, name, p2)
    qm.set_queue_properties(name, allowed_senders=[SENDER])
    assert check.refusal_class(p2, NOW) is None
    # Another sender on the same queue record.
    other = uuid.UUID(int=9)
    assert (
        check.refusal_class(_packet(dest, qm, 1, other, sequence=2), NOW) == MessageClass.NACK_ACCESS_DENIED
    )
    assert check.refusal_class(p2, NOW) is None
