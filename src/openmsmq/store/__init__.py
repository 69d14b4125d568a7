"""Durable SQLite store of openmsmq: schema, group commit, recovery.

The only package that runs SQL. :class:`Store` owns the file (writer thread with
group commit, WAL readers); :mod:`openmsmq.store.writes` holds what its write
operations see; :mod:`openmsmq.store.ops` builds the message write operations,
:mod:`openmsmq.store.outgoing` those of outgoing queues' transactional sequences
(release on OrderAck, FinalAcks), :mod:`openmsmq.store.queues` the QM-state and queue
ones; :mod:`openmsmq.store.reads` holds the read queries; :mod:`openmsmq.store.records`
the values.
"""

from openmsmq.store.db import Store
from openmsmq.store.records import (
    INFINITE,
    MAX_MESSAGE_BYTES,
    IncomingSequenceState,
    MessageRecord,
    OutgoingSequenceState,
    QueueRecord,
    QueueType,
)
from openmsmq.store.writes import StoreStats, WriteContext, storage_error

__all__ = [
    "INFINITE",
    "MAX_MESSAGE_BYTES",
    "IncomingSequenceState",
    "MessageRecord",
    "OutgoingSequenceState",
    "QueueRecord",
    "QueueType",
    "Store",
    "StoreStats",
    "WriteContext",
    "storage_error",
]
