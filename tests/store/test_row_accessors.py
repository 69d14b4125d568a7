"""store/rows.py reads a stored row's sequence columns and props fields as the message
the row holds says they are."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from openmsmq.store import rows
from openmsmq.store.records import INFINITE, MessageRecord, message_to_row

U32 = st.integers(min_value=0, max_value=0xFFFFFFFF)


@given(
    ttrq=st.one_of(st.just(INFINITE), U32),
    ttbr=st.one_of(st.just(INFINITE), U32),
    sent=st.integers(min_value=0, max_value=2**40),
    uniquifier=st.integers(min_value=1, max_value=0xFFFFFFFF),
    sequence_id=st.integers(min_value=1, max_value=2**64 - 1),
    number=st.integers(min_value=1, max_value=0xFFFFFFFF),
    journaling=st.sampled_from([(False, False), (True, False), (False, True)]),
    final_ack=st.booleans(),
    label=st.text(max_size=5),
)
def test_accessors_read_what_the_message_says(
    ttrq: int,
    ttbr: int,
    sent: int,
    uniquifier: int,
    sequence_id: int,
    number: int,
    journaling: tuple[bool, bool],
    final_ack: bool,
    label: str,
) -> None:
    m = MessageRecord(
        body=b"x",
        label=label,
        transactional=True,
        time_to_reach_queue=ttrq,
        time_to_be_received=ttbr,
        positive_journaling=journaling[0],
        negative_journaling=journaling[1],
        final_ack_required=final_ack,
        tx_sequence_id=sequence_id,
        tx_sequence_number=number,
        tx_previous_sequence_number=number - 1,
        lookup_id=77,
        id_lineage=uuid.uuid4(),
        id_uniquifier=uniquifier,
        sent_time=sent,
        destination_queue="q",
    )
    row = tuple(message_to_row(m))
    expected_expiry = None if min(ttrq, ttbr) == INFINITE else sent + min(ttrq, ttbr)
    assert rows.row_expire_at(row) == expected_expiry
    fields = rows.outgoing_fields(row)
    assert fields[:6] == (77, sequence_id, number, number - 1, uniquifier, any(journaling) or final_ack)
    assert fields[6] == sent + min(ttrq, ttbr)
