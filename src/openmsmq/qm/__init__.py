"""The queue manager: queues, messages, local transactions, cursors, expiry.

Start with :class:`QueueManager`; messages are :class:`~openmsmq.store.records.Message`
values; :class:`Transaction` comes from :meth:`QueueManager.begin`.
"""

from openmsmq.qm.manager import CursorAction, LookupAction, QueueHandle, QueueManager
from openmsmq.qm.transaction import PendingReceive, Transaction, TransactionState
from openmsmq.store.ops import RemovedMessage
from openmsmq.store.records import (
    INFINITE,
    MAX_MESSAGE_BYTES,
    IncomingSequenceState,
    Message,
    QueueRecord,
    QueueType,
)

__all__ = [
    "INFINITE",
    "MAX_MESSAGE_BYTES",
    "CursorAction",
    "IncomingSequenceState",
    "LookupAction",
    "Message",
    "PendingReceive",
    "QueueHandle",
    "QueueManager",
    "QueueRecord",
    "QueueType",
    "RemovedMessage",
    "Transaction",
    "TransactionState",
]
