"""The packed message form: every field survives, and both reply forms give equal messages."""

from __future__ import annotations

import uuid
from dataclasses import replace

import pytest

from openmsmq.client import grpc_transport as gt
from openmsmq.client.message import Message as ClientMessage
from openmsmq.client.types import AckRequest, Delivery
from openmsmq.errors import MQError
from openmsmq.qm import MessageRecord, QueueManager
from openmsmq.remote import openmsmq_remote_pb2 as pb
from openmsmq.remote import range_calls
from openmsmq.remote.auth import ALLOW_ALL
from openmsmq.remote.packed import decode_messages, encode_messages, encode_rows
from openmsmq.remote.server import message_to_pb, read_reply
from openmsmq.store.records import message_from_row, message_to_row

from .conftest import PLAINQ, TXQ, fill

LINEAGE = uuid.UUID("12345678-9abc-def0-1234-56789abcdef0")
SOURCE = uuid.UUID("0fedcba9-8765-4321-0fed-cba987654321")


def rich(i: int) -> MessageRecord:
    """A message with no field at its default."""
    return MessageRecord(
        body=bytes([i]) * (100 + i), label=f"étiquette {i}", priority=5, message_class=0xC004,
        body_type=8, correlation_id=bytes(range(20)), app_specific=0xFFFFFFFF, delivery=1,
        time_to_reach_queue=77, time_to_be_received=88, ack_flags=0x0F, positive_journaling=True,
        negative_journaling=True, admin_queue="DIRECT=OS:a\\private$\\admin",
        response_queue="DIRECT=OS:b\\private$\\resp", extension=b"\x01\x02", lookup_id=(1 << 63) + i,
        id_lineage=LINEAGE, id_uniquifier=4_000_000_000 + i, sent_time=1_700_000_000,
        arrived_time=1_700_000_001, destination_queue="private$\\dést", source_machine=SOURCE,
        transactional=True, tx_sequence_id=(1 << 64) - 1, tx_sequence_number=0xFFFFFFFE,
        first_in_transaction=i == 0, last_in_transaction=i == 2,
    )  # fmt: skip


def test_packed_and_repeated_replies_give_equal_client_messages() -> None:
    msgs = [rich(i) for i in range(3)] + [MessageRecord(body=b"")]
    packed = gt._messages(read_reply(msgs, 1))
    repeated = gt._messages(read_reply(msgs, 0))  # what a server without packing sends
    assert packed == repeated
    assert all(type(m) is ClientMessage for m in packed)
    m = packed[1]
    assert m.body == bytes([1]) * 101 and m.label == "étiquette 1" and m.lookup_id == (1 << 63) + 1
    assert m.message_id == f"{{{LINEAGE}}}\\{4_000_000_001}"
    assert m.source_machine == f"{{{SOURCE}}}"
    assert (m.priority, m.message_class, m.body_type, m.app_specific) == (5, 0xC004, 8, 0xFFFFFFFF)
    assert m.correlation_id == bytes(range(20)) and m.extension == b"\x01\x02"
    assert m.delivery is Delivery.RECOVERABLE and m.ack == AckRequest(0x0F)
    assert (m.time_to_reach_queue, m.time_to_be_received) == (77, 88)
    assert (m.sent_time, m.arrived_time) == (1_700_000_000, 1_700_000_001)
    assert (
        m.queue == "private$\\dést" and m.admin_queue.endswith("admin") and m.response_queue.endswith("resp")
    )
    assert m.journal and m.dead_letter and m.transactional
    assert (m.tx_sequence_id, m.tx_sequence_number) == ((1 << 64) - 1, 0xFFFFFFFE)
    assert packed[0].first_in_transaction and not packed[0].last_in_transaction
    assert packed[2].last_in_transaction and not packed[1].first_in_transaction
    assert packed[3].body == b"" and packed[3].label == "" and not packed[3].transactional
    # The fast constructor builds objects equal to (and hashing like) the dataclass's own.
    assert ClientMessage(**{f: getattr(m, f) for f in ClientMessage.__dataclass_fields__}) == m


def test_request_ids_travel_in_both_forms() -> None:
    msgs = [rich(i) for i in range(3)]
    for form in (0, 1):
        got = gt._pending(read_reply(msgs, form, [7, 8, 9]))
        assert [p.request_id for p in got] == [7, 8, 9]
        assert [p.message.lookup_id for p in got] == [m.lookup_id for m in msgs]
    assert [r[13] for r in decode_messages(encode_messages(msgs))] == [0, 0, 0]


def test_empty_and_malformed_blobs() -> None:
    assert list(decode_messages(b"")) == []
    blob = encode_messages([rich(0)])
    with pytest.raises(MQError):
        list(decode_messages(blob[:-1]))  # a field cut short
    with pytest.raises(MQError):
        list(decode_messages(blob[:10]))  # a header cut short
    assert gt._messages(pb.ReadReply()) == []


def test_message_to_pb_is_still_served_for_old_clients() -> None:
    reply = read_reply([rich(0)], 0)
    assert reply.packed == b"" and reply.messages[0] == message_to_pb(rich(0))


def _variants() -> list[MessageRecord]:
    """Messages covering every field of a stored row, each variable-length field alone."""
    base = [rich(i) for i in range(3)]
    return [
        *base,
        MessageRecord(body=b""),
        replace(base[0], label="", admin_queue="", response_queue="", extension=b""),
        replace(base[0], label="l", admin_queue="", response_queue="", extension=b""),
        replace(base[0], label="", admin_queue="a", response_queue="", extension=b""),
        replace(base[0], label="", admin_queue="", response_queue="r", extension=b""),
        replace(base[0], label="", admin_queue="", response_queue="", extension=b"e"),
        replace(base[1], sender_id=b"sid", hop_count=3, tracing=True, final_ack_required=True),
        replace(base[1], destination_qm=SOURCE, positive_journaling=False, transactional=False),
        replace(base[2], tx_sequence_id=5, ack_flags=0x1FF, first_in_transaction=True),
    ]


def test_encode_rows_equals_encode_messages_of_the_decoded_rows() -> None:
    """The server's PeekRange encodes stored rows directly; byte for byte what the
    Message path gives."""
    rows = [tuple(message_to_row(m)) for m in _variants()]
    assert encode_rows(rows) == encode_messages([message_from_row(r) for r in rows])
    assert encode_rows([]) == b""


def test_peek_range_packed_equals_the_message_path(qm: QueueManager) -> None:
    """Through a real store: both queue kinds, bounded and open ranges, a limit that cuts."""
    fill(qm, TXQ, [bytes([i]) * i for i in range(30)])
    qm.send_many(PLAINQ, [replace(rich(i), lookup_id=0, priority=i % 8) for i in range(20)])
    for queue in (TXQ, PLAINQ):
        ids = [m.lookup_id for m in qm.peek_range(queue, 0, 1000)]
        for after, through, limit in (
            (0, None, 1000),
            (ids[3], ids[-5], 1000),
            (ids[1], None, 7),
            (ids[-1], None, 5),
        ):
            want = encode_messages(range_calls.peek_range(qm, ALLOW_ALL, queue, after, through, limit))
            assert range_calls.peek_range_packed(qm, ALLOW_ALL, queue, after, through, limit) == want
