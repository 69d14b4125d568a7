"""Named reads of a stored message row (:data:`openmsmq.store.records.ROW_COLUMNS`
order) for code outside the store that works on rows without building a
:class:`~openmsmq.store.records.MessageRecord`: the transfer's sender side reads the sequence
columns, the Identifier uniquifier, SentTime and the expiry fields here instead of
unpacking the ``props`` layout (:mod:`openmsmq.store.props`) itself."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from openmsmq.store.props import HEAD
from openmsmq.store.records import COL

__all__ = [
    "LOOKUP_ID",
    "PREVIOUS_TX_SEQUENCE_NUMBER",
    "PROPS",
    "SIZE",
    "TRANSACTIONAL",
    "TX_SEQUENCE_ID",
    "TX_SEQUENCE_NUMBER",
    "outgoing_fields",
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
    ttrq, ttbr, bits, uniquifier, sent = props_times(row[PROPS])
    sequence_id = row[TX_SEQUENCE_ID]
    return (
        row[LOOKUP_ID],
        sequence_id + _U64 if sequence_id < 0 else sequence_id,
        row[TX_SEQUENCE_NUMBER],
        row[PREVIOUS_TX_SEQUENCE_NUMBER],
        uniquifier,
        bits & 0xB != 0,  # FA (8), JN (2), JP (1)
        sent + (ttrq if ttrq < ttbr else ttbr),  # both INFINITE: far beyond any clock
    )
