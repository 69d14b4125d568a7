"""Queue and sequence records of the store: a row of ``queues`` (:class:`QueueRecord`)
and the persisted outgoing / incoming transactional sequence state. Split from
:mod:`openmsmq.store.records`, which re-exports every name."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, fields
from enum import IntEnum
from operator import attrgetter
from typing import Any

from openmsmq.wire.fast import fast_init

__all__ = [
    "QUEUE_COLUMNS",
    "IncomingSequenceState",
    "OutgoingSequenceState",
    "QueueRecord",
    "QueueType",
    "queue_from_row",
    "sender_allowed",
    "with_queue_id",
]


class QueueType(IntEnum):
    """Queue.QueueType (MS-MQDMPR 3.1.1.2) plus the kinds this QM keeps apart."""

    #: Private queue created by an application (``private$\\name``).
    PRIVATE = 1
    #: System queue: dead-letter, transactional dead-letter, computer journal, order queue.
    SYSTEM = 2
    #: Journal of one queue (``private$\\name;journal``).
    JOURNAL = 3
    #: OutgoingQueue (MS-MQDMPR 3.1.1.3): messages in transit to one destination format name.
    OUTGOING = 4
    #: Subqueue of a private queue (``private$\\name;subqueue``, openmsmq.wire.subqueues):
    #: ``parent_queue_id`` is the queue's.
    SUBQUEUE = 5


@dataclass(frozen=True, slots=True)
class QueueRecord:
    """One row of ``queues``: a Queue of MS-MQDMPR 3.1.1.2 (or an OutgoingQueue, 3.1.1.3)."""

    queue_id: int
    #: Canonical (lower-case) name, e.g. ``private$\\orders``; the key of name lookups.
    name: str
    #: The name as the creator spelled it.
    display_name: str
    queue_type: QueueType
    #: PrivateQueueNumber (wire PrivateQueueIdentifier); 0 when not a private queue.
    private_number: int
    transactional: bool
    label: str
    #: Queue.Quota in KB (INFINITE = no limit).
    quota_kb: int
    journal_quota_kb: int
    #: Queue.Journaling: copy received messages to the journal queue.
    journal: bool
    journal_queue_id: int | None
    parent_queue_id: int | None
    base_priority: int
    authenticate: bool
    privacy_level: int
    created_time: int
    modify_time: int
    #: DestinationFormatName of an outgoing queue, else None.
    destination_format_name: str | None
    msg_count: int
    total_bytes: int
    #: Source QM GUIDs (canonical lower-case strings, comma-separated) allowed to send into
    #: this queue over MS-MQQB; '' = every sender. See :func:`sender_allowed`.
    allowed_senders: str = ""
    #: The queue's retry policy in its stored form (openmsmq.retry_policy.RetryPolicy
    #: .encode); '' = none: an aborted message stays in the queue.
    retry_policy: str = ""


def sender_allowed(queue: QueueRecord, source_qm: uuid.UUID) -> bool:
    """The queue's write-access check for an arriving message (MS-MQQB 3.1.5.8.3: the
    sender must have write access, else MQMSG_CLASS_NACK_ACCESS_DENIED). The sender is
    the message's SourceQueueManager; an empty allowlist admits every sender."""
    allowed = queue.allowed_senders
    return not allowed or str(source_qm) in allowed.split(",")


# Built once per queue read (a receiving QM reads its queue's row per stored batch): the
# generated __init__ stores each of the ~20 fields through object.__setattr__.
QueueRecord.__init__ = fast_init(QueueRecord)  # type: ignore[method-assign]

QUEUE_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(QueueRecord))


def queue_from_row(row: tuple[Any, ...]) -> QueueRecord:
    """Build a :class:`QueueRecord` from a ``SELECT`` of :data:`QUEUE_COLUMNS`."""
    v = list(row)
    v[3] = QueueType(v[3])
    v[5] = bool(v[5])
    v[9] = bool(v[9])
    v[13] = bool(v[13])
    return QueueRecord(*v)


@dataclass(frozen=True, slots=True)
class OutgoingSequenceState:
    """Persisted OutgoingTxSequenceID / OutgoingTxSequenceNumber of one outgoing queue.

    MS-MQQB 3.1.1.3.1 (MUST persist). ``tx_sequence_id`` is the u64
    ``(TimeStamp << 32) | Ordinal``; ``next_tx_sequence_number`` is the number the next
    committed transactional message gets.
    """

    queue_id: int
    tx_sequence_id: int
    next_tx_sequence_number: int


@dataclass(frozen=True, slots=True)
class IncomingSequenceState:
    """IncomingTransactionalTransferInfo (MS-MQDMPR 3.1.1.5) with the MS-MQQB
    IncomingTxSequenceID / IncomingTxSequenceNumber / TxMessageRejectCount it mirrors.

    Keyed by (sender QM GUID, destination format name), as the protocol layer's
    SequenceKey is.
    """

    sender_qm: uuid.UUID
    destination: str
    queue_id: int | None
    tx_sequence_id: int
    tx_sequence_number: int
    reject_count: int
    #: IncomingTransactionalTransferInfo.LastAccessTime: wall-clock UTC seconds (0.0 =
    #: unknown; rows from before it was wall-clock read as 0.0, see reads.WALL_CLOCK_FLOOR).
    last_access_time: float
    #: RemoteQMAddress of the session the sequence arrived on (the previous hop's address),
    #: kept so that a FinalAck raised later (a receive days after arrival) finds the
    #: sender's order queue (MS-MQQB 3.1.7.17; protocol.md §5.4 "(inferred)").
    sender_address: str = ""
    #: DirectFormatSession: the previous hop was the sender QM itself (its order queue is
    #: ``DIRECT=TCP:<sender_address>\\PRIVATE$\\order_queue$``), else ``PRIVATE=<guid>\\00000004``.
    direct_format_session: bool = False


IncomingSequenceState.__init__ = fast_init(IncomingSequenceState)  # type: ignore[method-assign]
_INCOMING_FIELDS = [f.name for f in fields(IncomingSequenceState)]
_incoming_values = attrgetter(*_INCOMING_FIELDS)
_QUEUE_ID_AT = _INCOMING_FIELDS.index("queue_id")


def with_queue_id(state: IncomingSequenceState, queue_id: int | None) -> IncomingSequenceState:
    """``dataclasses.replace(state, queue_id=queue_id)`` without replace's introspection of
    the fields on every call (it runs once per stored batch of a receiving QM)."""
    values = list(_incoming_values(state))
    values[_QUEUE_ID_AT] = queue_id
    return IncomingSequenceState(*values)
