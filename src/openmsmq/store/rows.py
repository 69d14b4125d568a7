"""Named reads of a stored message row (:data:`openmsmq.store.records.ROW_COLUMNS`
order) for code outside the store that works on rows without building a
:class:`~openmsmq.store.records.MessageRecord`: the transfer's sender side reads the sequence
columns, the Identifier uniquifier, SentTime and the expiry fields here instead of
unpacking the ``props`` layout (:mod:`openmsmq.store.props`) itself, and the remote-read
service's packed form takes every field of a row from :func:`message_fields`."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Any

from openmsmq.store import props as layout
from openmsmq.store.props import HEAD
from openmsmq.store.records import ABORT_SHIFT, COL

__all__ = [
    "LOOKUP_ID",
    "PREVIOUS_TX_SEQUENCE_NUMBER",
    "PROPS",
    "SIZE",
    "TRANSACTIONAL",
    "TX_SEQUENCE_ID",
    "TX_SEQUENCE_NUMBER",
    "any_counted",
    "message_fields",
    "outgoing_fields",
    "outgoing_fields_of",
    "props_times",
    "row_expire_at",
]

#: Column positions in a stored row.
LOOKUP_ID = COL["lookup_id"]
TX_SEQUENCE_ID = COL["tx_sequence_id"]
TX_SEQUENCE_NUMBER = COL["tx_sequence_number"]
PREVIOUS_TX_SEQUENCE_NUMBER = COL["tx_previous_sequence_number"]
PROPS = COL["props"]
TRANSACTIONAL = COL["transactional"]
SIZE = COL["size"]
_TX_FLAGS = COL["tx_flags"]

# The head of props (HEAD: BodyType, AppSpecific, DeliveryGuarantee, TimeToReachQueue,
# TimeToBeReceived, ack flags, bits, hop count, uniquifier, SentTime, ...): the fields
# below at their offsets, skipping the others.
assert HEAD.format.startswith("<IIBIIIBHIq")
#: ``props_times(props)`` -> (TimeToReachQueue, TimeToBeReceived, bits: JP 1, JN 2,
#: trace 4, FinalAckRequired 8; Identifier uniquifier, SentTime).
props_times = struct.Struct("<9xII4xBxxIq").unpack_from
_EXPIRY = slice(9, 17)
#: TimeToReachQueue and TimeToBeReceived both INFINITE: a message that never expires.
_NEVER_EXPIRES = b"\xff" * 8
_U64 = 1 << 64


def any_counted(rows: Sequence[Sequence[Any]]) -> bool:
    """Whether a row of ``rows`` carries an AbortCount or a MoveCount (both kept in
    ``tx_flags`` above its two transaction bits)."""
    return any(row[_TX_FLAGS] >> ABORT_SHIFT for row in rows)


def row_expire_at(row: Sequence[Any]) -> int | None:
    """When a stored message expires (s since 1970): SentTime plus the shorter of
    TimeToReachQueue and TimeToBeReceived; None when it never does."""
    props = row[PROPS]
    if props[_EXPIRY] == _NEVER_EXPIRES:
        return None
    ttrq, ttbr, _bits, _uniquifier, sent = props_times(props)
    return int(sent + min(ttrq, ttbr))  # INFINITE is the largest value: the other one wins


def outgoing_fields(row: Sequence[Any]) -> tuple[int, int, int, int, int, bool, int]:
    """(LookupIdentifier, TxSequenceID as its u64, TxSequenceNumber,
    PreviousTxSequenceNumber, Identifier uniquifier, FinalAck wanted (FA, JP or JN),
    expiry: :func:`row_expire_at`, or a time beyond any clock when it never expires) of
    a stored transactional row, in one unpack of its props."""
    return outgoing_fields_of((row,))[0]


def outgoing_fields_of(rows: Iterable[Sequence[Any]]) -> list[tuple[int, int, int, int, int, bool, int]]:
    """:func:`outgoing_fields` of each of ``rows`` (stored transactional rows), in one call
    (a comprehension: one unpack per row, no call to add each tuple)."""
    return [
        (
            row[LOOKUP_ID],
            sequence_id + _U64 if sequence_id < 0 else sequence_id,
            row[TX_SEQUENCE_NUMBER],
            row[PREVIOUS_TX_SEQUENCE_NUMBER],
            uniquifier,
            bits & 0xB != 0,  # FA (8), JN (2), JP (1)
            sent + (ttrq if ttrq < ttbr else ttbr),  # both INFINITE: far beyond any clock
        )
        for row in rows
        for (ttrq, ttbr, bits, uniquifier, sent), sequence_id in (
            (props_times(row[PROPS]), row[TX_SEQUENCE_ID]),
        )
    ]


def message_fields(rows: Sequence[Sequence[Any]]) -> list[tuple[Any, ...]]:
    """Every field of the messages of stored ``rows``, without building a
    :class:`~openmsmq.store.records.MessageRecord`: per row, in this order,

    LookupIdentifier, Identifier uniquifier, Class, Priority, AppSpecific, BodyType,
    DeliveryGuarantee, SentTime, ArrivedTime, TimeToReachQueue, TimeToBeReceived,
    acknowledgment flags, journal bits (1 PositiveJournaling, 2 NegativeJournaling),
    transactional, transaction bits (1 FirstInTransaction, 2 LastInTransaction),
    TxSequenceID as its u64, TxSequenceNumber, Identifier lineage and source QM GUID
    (16 bytes each, RFC 4122 order), Body, Label, CorrelationId (20 bytes), destination,
    admin and response queue, Extension: strings as their stored UTF-8 bytes.

    One call for all the rows (a batched read returns hundreds): each row is one unpack
    of its props and slices; the GUID blocks of a run of rows from one sender are split
    once."""
    unpack_head = HEAD.unpack_from
    unpack_rare = layout.RARE_LENGTHS.unpack_from
    lengths_at, guids_end, strings_at = layout.LENGTHS_AT, layout.GUIDS_END, layout.STRINGS_AT
    gflags_at, rare, correlation = layout.GFLAGS_AT, layout.RARE, layout.CORRELATION
    zero_correlation, split_guids = layout.ZERO_CORRELATION, layout.split_guids
    guids: dict[bytes, tuple[bytes, bytes, bytes]] = {}
    out: list[tuple[Any, ...]] = []
    append = out.append
    for row in rows:
        (
            lookup_id, priority, cls, transactional, seq_id, seq_no, _prev, tx_flags, arrived, _a, _s,
            props, body,
        ) = row  # fmt: skip
        (
            body_type, app_specific, delivery, ttrq, ttbr, ack_flags, bits, _hop, uniquifier, sent,
            n_dest, g,
        ) = unpack_head(props)  # fmt: skip
        n_label = n_admin = n_resp = n_ext = 0
        if g & rare:
            n_label, n_admin, n_resp, n_ext, _n_sender = unpack_rare(props, lengths_at[g & 7])
        end = guids_end[g & 3]
        key = bytes(props[gflags_at:end])
        lineage, _dest_qm, source = guids.get(key) or guids.setdefault(key, split_guids(key))
        corr = bytes(props[end : end + 20]) if g & correlation else zero_correlation
        # props' strings: label, admin, response, destination, extension, sender_id.
        at = strings_at[g & 15]
        i = at + n_label
        j = i + n_admin
        k = j + n_resp
        m = k + n_dest
        append((
            lookup_id, uniquifier, cls, priority, app_specific, body_type, delivery, sent, arrived,
            ttrq, ttbr, ack_flags, bits & 3, transactional, tx_flags & 3,
            seq_id + _U64 if seq_id < 0 else seq_id, seq_no, lineage, source,
            body, props[at:i], corr, props[k:m], props[i:j], props[j:k], props[m : m + n_ext],
        ))  # fmt: skip
    return out
