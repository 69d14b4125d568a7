"""The transfer codec's fast conversions equal the reference construction, field by field.

``packet_from_message`` must build exactly what ``UserMessage.build`` builds from the
stored message, and ``message_from_packet`` exactly the ``Message(**fields)`` of the
decoded packet; both also round-trip through the wire bytes.
"""

from __future__ import annotations

import dataclasses
import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openmsmq.errors import LocalProtocolError
from openmsmq.store.packet_rows import row_encoder
from openmsmq.store.records import INFINITE, MessageRecord, message_from_row, message_to_row
from openmsmq.store.rows import outgoing_fields, row_expire_at
from openmsmq.transfer.codec import (
    arrival_rows,
    message_from_packet,
    packet_from_message,
)
from openmsmq.wire.headers import TransactionHeader
from openmsmq.wire.ids import NULL_GUID, TxSequenceId
from openmsmq.wire.packets import UserMessage, decode_packet
from openmsmq.wire.userheader import DirectQueueFormatName, PrivateQueueFormatName, PrivateQueueFormatNameId

WIRE_DEST = "TCP:127.0.0.2\\PRIVATE$\\orders"
SOURCE = uuid.UUID("6f1c3b0e-9a52-4c1d-8d0e-1f2a3b4c5d6e")

u32 = st.integers(0, 0xFFFFFFFF)
guids = st.one_of(st.just(NULL_GUID), st.uuids())


@st.composite
def stored_messages(draw: st.DrawFn) -> MessageRecord:
    transactional = draw(st.booleans())
    number = draw(st.integers(1, 0xFFFFFFFF)) if transactional else 0
    return MessageRecord(
        body=draw(st.binary(max_size=300)),
        label=draw(st.text(max_size=20)),
        priority=draw(st.integers(0, 7)),
        message_class=draw(st.integers(0, 0xFFFF)),
        body_type=draw(u32),
        correlation_id=draw(st.one_of(st.binary(min_size=20, max_size=20), st.just(b""))),
        app_specific=draw(u32),
        delivery=draw(st.integers(0, 1)),
        time_to_reach_queue=draw(u32),
        time_to_be_received=draw(u32),
        ack_flags=draw(st.integers(0, 0xFF)),
        positive_journaling=draw(st.booleans()),
        negative_journaling=draw(st.booleans()),
        hop_count=draw(st.integers(0, 0x1F)),
        final_ack_required=draw(st.booleans()),
        lookup_id=draw(st.integers(1, 1 << 40)),
        id_lineage=draw(guids),
        id_uniquifier=draw(st.integers(0, 1 << 40)),
        sent_time=draw(st.integers(0, 1 << 33)),
        destination_qm=draw(guids),
        transactional=transactional,
        tx_sequence_id=draw(st.integers(0, (1 << 64) - 1)) if transactional else 0,
        tx_sequence_number=number,
        # PreviousTxSequenceNumber is at most 0xFFFFFFFE on the wire (MS-MQMQ 2.2.20.5).
        tx_previous_sequence_number=draw(st.integers(0, min(number, 0xFFFFFFFE))) if transactional else 0,
        first_in_transaction=draw(st.booleans()),
        last_in_transaction=draw(st.booleans()),
    )


def reference_packet(
    m: MessageRecord, destination: str, source_qm: uuid.UUID, previous: int | None
) -> UserMessage:
    """What the transfer built before the fast path: UserMessage.build from the fields."""
    transaction = None
    if m.transactional and m.tx_sequence_number:
        prev = m.tx_previous_sequence_number if previous is None else previous
        transaction = TransactionHeader(
            TxSequenceId.from_int(m.tx_sequence_id),
            m.tx_sequence_number,
            prev,
            TransactionHeader.make_flags(
                final_ack=m.final_ack_required, first=m.first_in_transaction, last=m.last_in_transaction
            ),
        )
    return UserMessage.build(
        source_qm=m.id_lineage if m.id_lineage != NULL_GUID else source_qm,
        message_id=m.id_uniquifier & 0xFFFFFFFF,
        destination_queue=DirectQueueFormatName(destination),
        body=m.body,
        sent_time=m.sent_time & 0xFFFFFFFF,
        destination_qm=m.destination_qm,
        label=m.label or None,
        message_class=m.message_class,
        priority=0 if transaction is not None else m.priority,
        delivery_mode=1 if transaction is not None else m.delivery,
        ack_requests=m.ack_flags,
        hop_count=m.hop_count,
        time_to_reach_queue=m.time_to_reach_queue,
        time_to_be_received=m.time_to_be_received,
        correlation_id=m.correlation_id if len(m.correlation_id) == 20 else bytes(20),
        application_tag=m.app_specific,
        body_type=m.body_type,
        transaction=transaction,
        negative_journaling=m.negative_journaling,
        positive_journaling=m.positive_journaling,
    )


def reference_message(p: UserMessage, destination: str) -> MessageRecord:
    """What the receiver stored before the fast path: Message(**fields of the packet)."""
    tx = p.transaction
    return MessageRecord(
        body=p.body,
        label=p.label,
        priority=p.priority,
        message_class=p.message_class,
        body_type=p.properties.body_type,
        correlation_id=p.properties.correlation_id,
        app_specific=p.properties.application_tag,
        delivery=p.delivery_mode,
        time_to_reach_queue=p.time_to_reach_queue,
        time_to_be_received=p.time_to_be_received,
        ack_flags=p.ack_requests,
        positive_journaling=p.user.positive_journaling,
        negative_journaling=p.user.negative_journaling,
        tracing=p.tracing,
        hop_count=p.hop_count,
        final_ack_required=bool(tx and tx.final_ack_required),
        id_lineage=p.source_qm,
        id_uniquifier=p.user.message_id,
        sent_time=p.sent_time,
        destination_queue=destination,
        destination_qm=p.destination_qm,
        source_machine=p.source_qm,
        transactional=tx is not None,
        tx_sequence_id=tx.tx_sequence_id.value if tx else 0,
        tx_sequence_number=tx.tx_sequence_number if tx else 0,
        tx_previous_sequence_number=tx.previous_tx_sequence_number if tx else 0,
        first_in_transaction=bool(tx and tx.first_in_transaction),
        last_in_transaction=bool(tx and tx.last_in_transaction),
    )


@settings(max_examples=300, deadline=None)
@given(stored_messages(), st.one_of(st.none(), u32), st.booleans())
def test_packet_from_message_equals_build(m: MessageRecord, previous: int | None, shared_name: bool) -> None:
    dest = DirectQueueFormatName(WIRE_DEST) if shared_name else WIRE_DEST
    fast = packet_from_message(m, dest, SOURCE, previous)
    ref = reference_packet(m, WIRE_DEST, SOURCE, previous)
    assert fast == ref
    assert fast.encode() == ref.encode()


@settings(max_examples=300, deadline=None)
@given(stored_messages())
def test_message_from_packet_equals_reference(m: MessageRecord) -> None:
    packet = reference_packet(m, WIRE_DEST, SOURCE, None)
    decoded = decode_packet(packet.encode())
    assert isinstance(decoded, UserMessage)
    for p in (packet, decoded):
        got = message_from_packet(p, "DIRECT=" + WIRE_DEST)
        assert got == reference_message(p, "DIRECT=" + WIRE_DEST)


@settings(max_examples=300, deadline=None)
@given(st.lists(stored_messages(), min_size=1, max_size=4), st.booleans())
def test_arrival_rows_equal_message_to_row(ms: list[MessageRecord], no_label: bool) -> None:
    """The rows built straight from packets are the rows of the stored Message."""
    if no_label:  # the fast path's shape (most generated messages carry a label)
        ms = [dataclasses.replace(m, label="") for m in ms]
    packets = [reference_packet(m, WIRE_DEST, SOURCE, None) for m in ms]
    decoded = [decode_packet(p.encode()) for p in packets]
    dest = "DIRECT=" + WIRE_DEST
    for ps in (packets, decoded):
        want = [message_to_row(message_from_packet(p, dest)) for p in ps]  # type: ignore[arg-type]
        assert arrival_rows(ps, dest) == want  # type: ignore[arg-type]


def test_arrival_rows_bind_small_bodies_as_bytearray() -> None:
    """As message_to_row: a body up to the copy limit goes into the row as a bytearray,
    which sqlite3 binds without its adapter lookup (a received body is bytes)."""
    from openmsmq.store.records import BODY_COPY_MAX

    bodies = [b"", bytes(256), bytes(BODY_COPY_MAX), bytes(BODY_COPY_MAX + 1)]
    ms = [
        MessageRecord(body=b, transactional=True, tx_sequence_id=(7 << 32) | 1, tx_sequence_number=i + 1)
        for i, b in enumerate(bodies)
    ]
    decoded = [decode_packet(reference_packet(m, WIRE_DEST, SOURCE, None).encode()) for m in ms]
    rows = arrival_rows(decoded, "DIRECT=" + WIRE_DEST)  # type: ignore[arg-type]
    assert [type(r[12]) for r in rows] == [bytearray, bytearray, bytearray, bytes]
    assert [bytes(r[12]) for r in rows] == bodies


def test_out_of_range_fields_raise_local_protocol_error() -> None:
    for bad in (MessageRecord(priority=8), MessageRecord(hop_count=0x20), MessageRecord(delivery=4)):
        with pytest.raises(LocalProtocolError):
            packet_from_message(bad, WIRE_DEST, SOURCE)


@st.composite
def stored_rows(draw: st.DrawFn) -> MessageRecord:
    """A stored message as the transfer reads it back, including rare shapes: admin and
    response queues (direct or not), extension, sender id, hop counts beyond the wire's
    five bits, u32 limits, non-ASCII labels."""
    m = draw(stored_messages())
    return MessageRecord(
        **{
            **{f: getattr(m, f) for f in MessageRecord.__dataclass_fields__},
            "admin_queue": draw(
                st.sampled_from(["", "DIRECT=TCP:10.0.0.1\\PRIVATE$\\admin", "PRIVATE=x\\1"])
            ),
            "response_queue": draw(st.sampled_from(["", "", "DIRECT=OS:h\\PRIVATE$\\r"])),
            "extension": draw(st.sampled_from([b"", b"ext"])),
            "sender_id": draw(st.sampled_from([b"", b"sid"])),
            "hop_count": draw(st.sampled_from([m.hop_count, 0x1F, 0x20, 0xFFFF])),
            "label": draw(st.sampled_from([m.label, "", "\u00e9t\u00e9 \U0001f600", "x" * 249])),
            "destination_queue": "DIRECT=" + WIRE_DEST,
            # What a store row can hold: a 20-byte CorrelationId, a u32 uniquifier.
            "correlation_id": m.correlation_id if len(m.correlation_id) == 20 else bytes(20),
            "id_uniquifier": m.id_uniquifier & 0xFFFFFFFF,
        }
    )


@settings(max_examples=500, deadline=None)
@given(stored_rows(), st.one_of(st.none(), u32), st.booleans())
def test_row_encoder_equals_packet_from_message(
    m: MessageRecord, previous: int | None, as_bytes: bool
) -> None:
    """The bytes straight from a row are the reference conversion's bytes; a row the
    encoder declines (None) is one the reference path must convert or refuse itself."""
    row = message_to_row(m)
    if as_bytes:  # as read back from SQLite (message_to_row gives a bytearray)
        row[11] = bytes(row[11])
    stored = message_from_row(row)
    dest = DirectQueueFormatName(WIRE_DEST)
    prev = stored.tx_previous_sequence_number if previous is None else previous
    got = row_encoder(dest, SOURCE)(tuple(row), prev)
    try:
        want: bytes | None = packet_from_message(stored, dest, SOURCE, prev).encode()
    except (LocalProtocolError, struct.error):
        want = None
    if got is None:
        usual = m.transactional and m.tx_sequence_number and not (m.admin_queue or m.response_queue)
        assert not usual or m.hop_count > 0x1F or want is None
    else:
        assert got == want
        assert stored.transactional and stored.tx_sequence_number
    if stored.transactional and stored.tx_sequence_number:
        lid, sid, number, previous_number, uniquifier, final, expiry = outgoing_fields(tuple(row))
        at = row_expire_at(row)
        assert expiry == (stored.sent_time + INFINITE if at is None else at)
        assert (lid, sid, number, previous_number) == (
            stored.lookup_id, stored.tx_sequence_id, stored.tx_sequence_number,
            stored.tx_previous_sequence_number,
        )  # fmt: skip
        assert uniquifier == stored.id_uniquifier & 0xFFFFFFFF
        wants = stored.final_ack_required or stored.positive_journaling or stored.negative_journaling
        assert final == wants


def test_row_encoder_usual_row_is_encoded() -> None:
    """The transfer's usual row (no admin / response queue) never takes the general path."""
    m = MessageRecord(body=b"x" * 256, label="l", transactional=True, tx_sequence_id=5 << 32 | 1,
                tx_sequence_number=9, tx_previous_sequence_number=8, id_uniquifier=77,
                destination_queue="DIRECT=" + WIRE_DEST)  # fmt: skip
    dest = DirectQueueFormatName(WIRE_DEST)
    got = row_encoder(dest, SOURCE)(tuple(message_to_row(m)), 8)
    assert got is not None
    assert got == packet_from_message(m, dest, SOURCE, 8).encode()


# ------------------------------------------------- admin and response queues (AQ / RQ)

ADMIN_QM = uuid.UUID("0b7e6f4a-2c1d-4e5f-8a9b-0c1d2e3f4a5b")
DEST_QM = uuid.UUID("5d4c3b2a-1f0e-4d9c-8b7a-695847362514")


@pytest.mark.parametrize(
    ("admin", "response", "admin_text", "response_text"),
    [
        (PrivateQueueFormatNameId(0x12, 0x2), None, f"PRIVATE={SOURCE}\\00000012", ""),
        (PrivateQueueFormatNameId(0x12, 0x3), None, f"PRIVATE={DEST_QM}\\00000012", ""),
        (PrivateQueueFormatName(ADMIN_QM, 0x1A), None, f"PRIVATE={ADMIN_QM}\\0000001a", ""),
        (
            PrivateQueueFormatName(ADMIN_QM, 0x1A),
            PrivateQueueFormatNameId(0x7, 0x4),  # RQ 0x4: on the admin queue's QM
            f"PRIVATE={ADMIN_QM}\\0000001a",
            f"PRIVATE={ADMIN_QM}\\00000007",
        ),
        (
            DirectQueueFormatName("TCP:10.0.0.1\\private$\\admin"),
            PrivateQueueFormatNameId(0x7, 0x2),
            "DIRECT=TCP:10.0.0.1\\private$\\admin",
            f"PRIVATE={SOURCE}\\00000007",
        ),
    ],
)
def test_received_admin_and_response_queues_become_format_names(
    admin: object, response: object, admin_text: str, response_text: str
) -> None:
    """Every AQ / RQ form of MS-MQMQ 2.2.19.2 that names a private queue is kept as the
    ``PRIVATE=<guid>\\<number>`` format name of that queue (before, only direct names
    were kept and the others dropped: their acknowledgments were lost)."""
    p = UserMessage.build(
        source_qm=SOURCE,
        message_id=1,
        destination_queue=DirectQueueFormatName(WIRE_DEST),
        destination_qm=DEST_QM,
        body=b"x",
        sent_time=1,
        admin_queue=admin,  # type: ignore[arg-type]
        response_queue=response,  # type: ignore[arg-type]
    )
    m = message_from_packet(decode_packet(p.encode()), "DIRECT=" + WIRE_DEST)  # type: ignore[arg-type]
    assert (m.admin_queue, m.response_queue) == (admin_text, response_text)


def test_private_admin_and_response_names_are_sent_as_private_queue_format_names() -> None:
    admin, response = f"PRIVATE={ADMIN_QM}\\0000001a", f"PRIVATE={SOURCE}\\00000007"
    m = MessageRecord(body=b"x", admin_queue=admin, response_queue=response, id_uniquifier=3, lookup_id=1)
    decoded = decode_packet(packet_from_message(m, WIRE_DEST, SOURCE).encode())
    assert isinstance(decoded, UserMessage)
    assert decoded.user.admin_queue == PrivateQueueFormatName(ADMIN_QM, 0x1A)
    assert decoded.user.response_queue == PrivateQueueFormatName(SOURCE, 0x7)
    back = message_from_packet(decoded, "DIRECT=" + WIRE_DEST)
    assert (back.admin_queue, back.response_queue) == (admin, response)
