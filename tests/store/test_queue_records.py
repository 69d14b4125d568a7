"""The queue and sequence records built without dataclass machinery per call equal what
the dataclass gives: :func:`with_queue_id` is ``dataclasses.replace(state, queue_id=...)``,
and the records' fast ``__init__`` builds the same frozen values as the generated one."""

from __future__ import annotations

import dataclasses
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from openmsmq.store.queue_records import IncomingSequenceState, QueueRecord, QueueType, with_queue_id
from openmsmq.store.records import with_queue_id as reexported

incoming_states = st.builds(
    IncomingSequenceState,
    sender_qm=st.uuids(),
    destination=st.text(max_size=20),
    queue_id=st.one_of(st.none(), st.integers(1, 1 << 40)),
    tx_sequence_id=st.integers(0, (1 << 64) - 1),
    tx_sequence_number=st.integers(0, 0xFFFFFFFF),
    reject_count=st.integers(0, 100),
    last_access_time=st.floats(0, 2e9),
    sender_address=st.text(max_size=10),
    direct_format_session=st.booleans(),
)


@settings(max_examples=200, deadline=None)
@given(incoming_states, st.one_of(st.none(), st.integers(1, 1 << 40)))
def test_with_queue_id_equals_replace(state: IncomingSequenceState, queue_id: int | None) -> None:
    got = with_queue_id(state, queue_id)
    assert got == dataclasses.replace(state, queue_id=queue_id)
    assert type(got) is IncomingSequenceState
    assert reexported is with_queue_id


def test_records_keep_dataclass_semantics() -> None:
    s = IncomingSequenceState(uuid.UUID(int=1), "private$\\q", None, 5, 6, 0, 1.5)
    assert (s.sender_address, s.direct_format_session) == ("", False)  # declared defaults
    assert s == IncomingSequenceState(
        sender_qm=uuid.UUID(int=1), destination="private$\\q", queue_id=None, tx_sequence_id=5,
        tx_sequence_number=6, reject_count=0, last_access_time=1.5,
    )  # fmt: skip
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.queue_id = 3  # type: ignore[misc]
    values = [f.name for f in dataclasses.fields(QueueRecord)]
    q = QueueRecord(
        1, "private$\\q", "private$\\Q", QueueType.PRIVATE, 7, True, "", -1, -1, False, None, None,
        0, False, 0, 0, 0, None, 0, 0,
    )  # fmt: skip
    assert [getattr(q, n) for n in values][-2:] == ["", ""]  # allowed_senders, retry_policy defaults
    assert hash(q) == hash(dataclasses.replace(q))
    with pytest.raises(dataclasses.FrozenInstanceError):
        q.quota_kb = 5  # type: ignore[misc]
