"""Shared set-up of the store tests."""

from __future__ import annotations

import sqlite3
import uuid

from openmsmq.store import INFINITE, QueueType, Store, queues
from openmsmq.store.records import MessageRecord, QueueRecord


def private_queue(
    store: Store, name: str = "private$\\q", *, transactional: bool = False, quota_kb: int = INFINITE,
    now: int = 1000,
) -> QueueRecord:  # fmt: skip
    """Create the private queue ``name`` (the store's QM state must exist)."""
    return store.write(
        queues.create_queue(
            name=name,
            display_name=name,
            queue_type=QueueType.PRIVATE,
            transactional=transactional,
            label="",
            quota_kb=quota_kb,
            journal_quota_kb=INFINITE,
            journal=False,
            now=now,
        )
    )


def every_attribute_message() -> MessageRecord:
    """A message with every attribute away from its default (row codec tests)."""
    return MessageRecord(
        body=b"\x00body",
        label="läbel",
        priority=6,
        message_class=0xC002,
        body_type=8,
        correlation_id=bytes(range(20)),
        app_specific=0xFFFFFFFF,
        delivery=1,
        time_to_reach_queue=7,
        time_to_be_received=9,
        ack_flags=0x0F,
        positive_journaling=True,
        negative_journaling=True,
        tracing=True,
        admin_queue="DIRECT=OS:h\\private$\\admin",
        response_queue="DIRECT=OS:h\\private$\\resp",
        extension=b"ext",
        sender_id=b"sid",
        hop_count=3,
        final_ack_required=True,
        lookup_id=42,
        id_lineage=uuid.uuid4(),
        id_uniquifier=0xFFFFFFFF,
        sent_time=1_700_000_000,
        arrived_time=1_700_000_001,
        destination_queue="DIRECT=TCP:10.0.0.1\\private$\\q",
        destination_qm=uuid.uuid4(),
        source_machine=uuid.uuid4(),
        transactional=True,
        tx_sequence_id=(1 << 63) | 7,
        tx_sequence_number=5,
        tx_previous_sequence_number=4,
        first_in_transaction=True,
        last_in_transaction=True,
    )


def props_as_v5(props: bytes) -> bytes:
    """A ``props`` of this layout written back in the layout of schemas 1-5 (the inverse
    of :func:`openmsmq.store.props.convert_v5`): tests that turn a store back into an old
    schema make its rows old too."""
    from openmsmq.store import props as layout

    *fixed, n_dest, g = layout.HEAD.unpack_from(props)
    end = layout.GUIDS_END[g & 3]
    lineage, dest_qm, source = layout.split_guids(bytes(props[layout.GFLAGS_AT : end]))
    corr = bytes(props[end : end + 20]) if g & layout.CORRELATION else layout.ZERO_CORRELATION
    rare = (0, 0, 0, 0, 0)
    if g & layout.RARE:
        rare = layout.RARE_LENGTHS.unpack_from(props, layout.LENGTHS_AT[g & 7])
    n_label, n_admin, n_response, n_ext, n_sender = rare
    lengths = (n_label, n_admin, n_response, n_dest, n_ext, n_sender)
    head = layout.HEAD_V5.pack(*fixed, lineage, dest_qm, source, corr, *lengths)
    return head + bytes(props[layout.STRINGS_AT[g & 15] :])


def make_rows_v5(conn: sqlite3.Connection) -> int:
    """Rewrite every message row's ``props`` in the layout of schemas 1-5; returns the rows."""
    rows = conn.execute("SELECT lookup_id, props FROM messages").fetchall()
    old = [(props_as_v5(props), lid) for lid, props in rows]
    conn.executemany("UPDATE messages SET props = ? WHERE lookup_id = ?", old)
    return len(rows)
