"""The compact ``props`` layout (openmsmq.store.props): every combination of what its
flags leave out comes back as it was sent, through every reader of the layout."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from openmsmq.remote.packed import encode_messages, encode_rows
from openmsmq.store import props as layout
from openmsmq.store.records import MessageRecord, keyed_messages, message_from_row, message_to_row
from tests.store.support import props_as_v5

_NULL = uuid.UUID(int=0)
_QMS = [uuid.UUID(int=1), uuid.UUID("8c2a2b57-d3e2-4c1a-9df1-6a3c8b35a0e1"), _NULL]
_guids = st.sampled_from(_QMS)
_text = st.sampled_from(["", "l", "étiquette", "DIRECT=OS:h\\private$\\q"])
_blob = st.sampled_from([b"", b"\x00", b"ext" * 40])


@st.composite
def messages(draw: st.DrawFn) -> MessageRecord:
    """Messages whose GUIDs are equal, distinct or null, with or without a
    CorrelationId and each rare string."""
    return MessageRecord(
        body=draw(st.binary(max_size=40)),
        label=draw(_text),
        priority=draw(st.integers(0, 7)),
        correlation_id=draw(st.sampled_from([bytes(20), bytes(range(20)), b"\x00" * 19 + b"\x01"])),
        app_specific=draw(st.integers(0, 0xFFFFFFFF)),
        ack_flags=draw(st.integers(0, 0xFF)),
        time_to_reach_queue=draw(st.sampled_from([0, 7, 0xFFFFFFFF])),
        time_to_be_received=draw(st.sampled_from([0, 9, 0xFFFFFFFF])),
        positive_journaling=draw(st.booleans()),
        final_ack_required=draw(st.booleans()),
        admin_queue=draw(_text),
        response_queue=draw(_text),
        extension=draw(_blob),
        sender_id=draw(_blob),
        hop_count=draw(st.integers(0, 0xFFFF)),
        lookup_id=draw(st.integers(1, (1 << 56) - 1)),
        id_lineage=draw(_guids),
        id_uniquifier=draw(st.integers(0, 0xFFFFFFFF)),
        sent_time=draw(st.integers(0, 1 << 40)),
        destination_queue=draw(_text),
        destination_qm=draw(_guids),
        source_machine=draw(_guids),
        transactional=draw(st.booleans()),
    )


@settings(max_examples=300, deadline=None)
@given(messages())
def test_every_reader_gives_back_the_message(m: MessageRecord) -> None:
    row = message_to_row(m)
    assert message_from_row(row) == m
    # As SQLite returns it: bytes, not the bytearray message_to_row builds.
    stored = [*row[:11], bytes(row[11]), bytes(row[12])]
    assert message_from_row(stored) == m
    order_key = ((7 - m.priority) << 56) | m.lookup_id
    class_flags = (m.message_class << 3) | (m.transactional << 2)
    keyed = (order_key, class_flags, *stored[4:7], stored[8], stored[11], stored[12])
    assert keyed_messages([keyed]) == [(order_key, m)]
    assert encode_rows([stored]) == encode_messages([m])


@settings(max_examples=300, deadline=None)
@given(messages())
def test_the_schema_6_migration_gives_the_rows_this_layout_writes(m: MessageRecord) -> None:
    props = bytes(message_to_row(m)[11])
    assert layout.convert_v5(props_as_v5(props)) == props


@given(messages())
def test_only_what_differs_from_the_usual_value_is_stored(m: MessageRecord) -> None:
    props = message_to_row(m)[11]
    g = props[layout.GFLAGS_AT]
    rare = bool(m.label or m.admin_queue or m.response_queue or m.extension or m.sender_id)
    assert bool(g & layout.DEST_QM) == (m.destination_qm != _NULL)
    assert bool(g & layout.SOURCE) == (m.source_machine != m.id_lineage)
    assert bool(g & layout.CORRELATION) == (m.correlation_id != bytes(20))
    assert bool(g & layout.RARE) == rare
    strings = [m.label, m.admin_queue, m.response_queue, m.destination_queue]
    size = layout.STRINGS_AT[g] + sum(len(s.encode()) for s in strings) + len(m.extension) + len(m.sender_id)
    assert len(props) == size


def test_a_local_send_takes_55_bytes_and_its_destination() -> None:
    qm = uuid.uuid4()
    m = MessageRecord(body=bytes(256), id_lineage=qm, source_machine=qm, destination_queue="private$\\q")
    assert len(message_to_row(m)[11]) == 55 + len("private$\\q")
