"""Acknowledgments raised by real removals on one queue manager (MS-MQQB 3.1.7.2).

A message sent with an administration queue and acknowledgment requests gets the right
acknowledgment message in that queue when it is received (AckReceive), purged
(NackQueuePurged), its queue deleted (NackQueueDeleted), its TimeToBeReceived expires
(NackReceiveTimeout) or it is rejected in a transactional receive (NackReceiveRejected) —
each through the QM's own operation, with :func:`attach_acknowledgments` listening.
A FinalAck (3.1.7.2.2) goes to the sender's order queue for an accepted incoming
transactional message when the session is known.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from openmsmq.errors import IOTimeoutError
from openmsmq.qm import IncomingSequenceState, MessageRecord, QueueManager, QueueType
from openmsmq.transfer.ack_admin import AcknowledgmentListener, attach_acknowledgments
from openmsmq.transfer.acknowledgments import AckSession
from openmsmq.wire.constants import AckRequest
from openmsmq.wire.ids import ObjectId
from tests.clock import Clock

ADMIN = "DIRECT=OS:host1\\private$\\admin"
PR = AckRequest.POS_RECEIVE
NR = AckRequest.NEG_RECEIVE
FULL = PR | NR
REMOTE_QM = uuid.UUID("aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee")


Env = tuple[QueueManager, Clock, AcknowledgmentListener]


@pytest.fixture(params=[False, True], ids=["sync", "threaded"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Env]:
    clock = Clock()
    qm = QueueManager(tmp_path / "qm", computer_name="host1", clock=clock, threaded=request.param)
    qm.create_queue("private$\\orders")
    qm.create_queue("private$\\txorders", transactional=True)
    qm.create_queue("private$\\admin")
    listener = attach_acknowledgments(qm)
    yield qm, clock, listener
    qm.close()


def send(qm: QueueManager, queue: str, ack_flags: int, **fields: object) -> MessageRecord:
    message = MessageRecord(
        body=b"original body", label="lbl", admin_queue=ADMIN, ack_flags=ack_flags, **fields
    )  # type: ignore[arg-type]
    if queue.endswith("txorders"):
        with qm.begin() as tx:
            stored = qm.send(queue, message, tx)
        return stored
    return qm.send(queue, message)


def admin_messages(qm: QueueManager) -> list[MessageRecord]:
    out = []
    for _ in range(100):  # bounded
        try:
            out.append(qm.receive("private$\\admin", timeout=0))
        except IOTimeoutError:
            break
    return out


def check_ack(ack: MessageRecord, original: MessageRecord, cls: int, *, with_body: bool) -> None:
    assert ack.message_class == cls
    # CorrelationIdentifier = the original Identifier (OBJECTID: QM GUID + uniquifier).
    assert ObjectId.decode(ack.correlation_id) == ObjectId(original.id_lineage, original.id_uniquifier)
    assert ack.response_queue.casefold() == original.destination_queue.casefold()
    assert ack.delivery == original.delivery
    assert ack.ack_flags == 0 and ack.time_to_reach_queue == ack.time_to_be_received == 0xFFFFFFFF
    assert not ack.positive_journaling and not ack.negative_journaling
    assert ack.body == (b"original body" if with_body else b"")


def test_received_gives_ack_receive(env: Env) -> None:
    qm, _, listener = env
    original = send(qm, "private$\\orders", PR)
    assert qm.receive("private$\\orders").body == b"original body"
    acks = admin_messages(qm)
    assert len(acks) == 1
    check_ack(acks[0], original, 0x4000, with_body=False)
    assert original.id_lineage == qm.guid
    assert listener.sent == 1 and listener.discarded == 0


def test_purged_gives_nack_queue_purged(env: Env) -> None:
    qm, _, _ = env
    original = send(qm, "private$\\orders", NR)
    assert qm.purge_queue("private$\\orders") == 1
    [ack] = admin_messages(qm)
    check_ack(ack, original, 0xC001, with_body=True)


def test_queue_deleted_gives_nack_queue_deleted(env: Env) -> None:
    qm, _, _ = env
    original = send(qm, "private$\\orders", FULL, delivery=1)
    qm.delete_queue("private$\\orders")
    [ack] = admin_messages(qm)
    check_ack(ack, original, 0xC000, with_body=True)
    assert ack.delivery == 1  # recoverable original, recoverable acknowledgment (3.1.7.2.1)


def test_time_to_be_received_expiry_gives_nack_receive_timeout(env: Env) -> None:
    qm, clock, _ = env
    original = send(qm, "private$\\orders", NR, time_to_be_received=10)
    clock.now += 11
    assert qm.expire(clock.now) == 1
    [ack] = admin_messages(qm)
    check_ack(ack, original, 0xC002, with_body=True)
    assert qm.get_queue("system$;deadletter").msg_count == 1


def test_rejected_transactional_receive_gives_nack_receive_rejected(env: Env) -> None:
    qm, _, _ = env
    original = send(qm, "private$\\txorders", FULL)
    with qm.begin() as tx:
        got = qm.receive("private$\\txorders", tx=tx)
        tx.set_dequeue_reason(got.lookup_id, 0xC004)
    [ack] = admin_messages(qm)
    check_ack(ack, original, 0xC004, with_body=True)
    assert ack.delivery == 1  # transactional messages are recoverable


def test_aborted_transactional_receive_gives_nothing(env: Env) -> None:
    qm, _, _ = env
    send(qm, "private$\\txorders", FULL)
    tx = qm.begin()
    qm.receive("private$\\txorders", tx=tx)
    tx.abort()
    assert admin_messages(qm) == []
    assert qm.get_queue("private$\\txorders").msg_count == 1


@pytest.mark.parametrize(
    ("flags", "situation", "expected"),
    [
        (NR, "receive", []),  # negative only: a receive raises nothing
        (PR, "purge", []),  # positive only: a purge raises nothing
        (0, "receive", []),  # nothing requested
        (FULL, "receive", [0x4000]),
        (FULL, "purge", [0xC001]),
    ],
)
def test_requests_select_the_acknowledgments(
    env: Env, flags: int, situation: str, expected: list[int]
) -> None:
    qm, _, _ = env
    send(qm, "private$\\orders", flags)
    if situation == "receive":
        qm.receive("private$\\orders")
    else:
        qm.purge_queue("private$\\orders")
    assert [a.message_class for a in admin_messages(qm)] == expected


def test_many_removals_make_one_batch(env: Env) -> None:
    qm, _, listener = env
    originals = [send(qm, "private$\\orders", PR) for _ in range(20)]
    got = qm.receive_many("private$\\orders", 20)
    assert len(got) == 20
    acks = admin_messages(qm)
    assert sorted(ObjectId.decode(a.correlation_id).uniquifier for a in acks) == sorted(
        o.id_uniquifier for o in originals
    )
    assert listener.sent == 20


def test_missing_admin_queue_discards(env: Env) -> None:
    qm, _, listener = env
    message = MessageRecord(body=b"x", admin_queue="DIRECT=OS:host1\\private$\\nosuch", ack_flags=PR)
    qm.send("private$\\orders", message)
    qm.receive("private$\\orders")
    assert listener.discarded == 1 and listener.sent == 0


# ---- FinalAck (3.1.7.2.2) for an incoming transactional message ------------------------------


def test_final_ack_to_the_sender_order_queue(tmp_path: Path) -> None:
    qm = QueueManager(tmp_path / "qm", computer_name="host1", threaded=False)
    try:
        qm.create_queue("private$\\txorders", transactional=True)
        sessions = {REMOTE_QM: AckSession(True, "192.0.2.10", REMOTE_QM)}
        listener = AcknowledgmentListener(qm, session_of=lambda m: sessions.get(m.source_machine))
        qm.add_removal_listener(listener)
        seq_id = (0x5E000002 << 32) | 9
        incoming = MessageRecord(
            body=b"from afar",
            transactional=True,
            priority=0,
            delivery=1,
            id_lineage=REMOTE_QM,
            id_uniquifier=77,
            source_machine=REMOTE_QM,
            destination_queue="DIRECT=TCP:127.0.0.1\\private$\\txorders",
            tx_sequence_id=seq_id,
            tx_sequence_number=3,
            tx_previous_sequence_number=2,
            final_ack_required=True,
            sent_time=999_000,
        )
        state = IncomingSequenceState(REMOTE_QM, incoming.destination_queue, None, seq_id, 3, 0, 0.0)
        qm.sequence_store().accept_incoming("private$\\txorders", [incoming], state)
        with qm.begin() as tx:
            qm.receive("private$\\txorders", tx=tx)
        destination = "DIRECT=TCP:192.0.2.10\\PRIVATE$\\order_queue$"
        [out] = [q for q in qm.list_queues(include_system=True) if q.queue_type == QueueType.OUTGOING]
        assert out.destination_format_name == destination.casefold() and out.msg_count == 1
        final = qm.peek(qm.open_queue(destination))
        assert final.message_class == 0x4000 and final.label == "QM Ordering Ack"
        ordinal, timestamp, number, previous = struct.unpack_from("<IIII", final.body)
        assert (ordinal, timestamp, number, previous) == (9, 0x5E000002, 3, 2)
        assert uuid.UUID(bytes_le=final.body[16:32]) == REMOTE_QM
        assert struct.unpack_from("<I", final.body, 32)[0] == 77
        assert listener.sent == 1
    finally:
        qm.close()


def test_final_ack_not_sent_without_a_session(env: Env) -> None:
    qm, _, listener = env
    send(qm, "private$\\txorders", 0, final_ack_required=True, positive_journaling=True)
    with qm.begin() as tx:
        qm.receive("private$\\txorders", tx=tx)
    assert listener.sent == 0 and listener.discarded == 0
    assert not [q for q in qm.list_queues(include_system=True) if q.queue_type == QueueType.OUTGOING]


def test_removal_from_an_outgoing_queue_raises_no_receive_acknowledgment(env: Env) -> None:
    """A message leaving an OutgoingQueue (the transfer deletes what the peer acknowledged)
    was not removed from a final destination queue (3.1.7.2): no admin ack."""
    qm, _, listener = env
    remote = "DIRECT=TCP:192.0.2.10\\private$\\orders"
    qm.send(remote, MessageRecord(body=b"x", admin_queue=ADMIN, ack_flags=FULL))
    qm.receive(qm.open_queue(remote))
    assert admin_messages(qm) == []
    assert listener.sent == listener.discarded == 0
