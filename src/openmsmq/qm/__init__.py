"""The queue manager: queues, messages, local transactions, cursors, expiry.

Start with :class:`QueueManager`; messages are :class:`~openmsmq.store.records.MessageRecord`
values; :class:`Transaction` comes from :meth:`QueueManager.begin`.
"""

from openmsmq.qm.manager import CancelToken, CursorAction, LookupAction, QueueHandle, QueueManager
from openmsmq.qm.options import StoreOptions
from openmsmq.qm.transaction import PendingReceive, Transaction, TransactionState
from openmsmq.store.ops import RemovedMessage
from openmsmq.store.ranges import LookupRange, QueueStats
from openmsmq.store.records import (
    INFINITE,
    MAX_MESSAGE_BYTES,
    IncomingSequenceState,
    MessageRecord,
    QueueRecord,
    QueueType,
)

__all__ = [
    "INFINITE",
    "MAX_MESSAGE_BYTES",
    "CancelToken",
    "CursorAction",
    "IncomingSequenceState",
    "LookupAction",
    "LookupRange",
    "MessageRecord",
    "PendingReceive",
    "QueueHandle",
    "QueueManager",
    "QueueRecord",
    "QueueStats",
    "QueueType",
    "RemovedMessage",
    "StoreOptions",
    "Transaction",
    "TransactionState",
]
