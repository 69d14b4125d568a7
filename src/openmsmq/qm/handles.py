"""Queue-manager-side objects callers hold: queue handles, cursors, seek actions.

Split from :mod:`openmsmq.qm.manager`, which re-exports them.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from enum import IntEnum

from openmsmq.store.records import QueueRecord

__all__ = ["CursorAction", "LookupAction", "QueueHandle"]


class LookupAction(IntEnum):
    """MessageSeekAction for reads by LookupIdentifier (MS-MQDMPR 3.1.1.17, MS-MQRR MQ_LOOKUP_*)."""

    #: SeekFirst: the first available message (LookupIdentifier ignored).
    FIRST = 0
    #: SeekLast: the last available message (LookupIdentifier ignored).
    LAST = 1
    #: SeekCurrent: exactly the message with this LookupIdentifier.
    CURRENT = 2
    #: SeekNext: the first available message after it in queue order.
    NEXT = 3
    #: SeekPrevious: the last available message before it in queue order.
    PREVIOUS = 4


class CursorAction(IntEnum):
    """Cursor actions of MS-MQRR R_StartReceive (MQ_ACTION_PEEK_CURRENT / PEEK_NEXT)."""

    #: The message at the cursor (a new cursor moves to the first message).
    CURRENT = 0
    #: Advance the cursor, then read.
    NEXT = 1


class _QueueState:
    """In-memory state of one queue: its record, lock set, waiters. Never per message on disk."""

    __slots__ = ("cond", "deleted", "locked", "purge_pending", "record")

    def __init__(self, record: QueueRecord) -> None:
        self.record = record
        self.cond = threading.Condition(threading.Lock())
        #: LookupIdentifiers locked by a transaction, a two-phase read or an in-flight delete.
        self.locked: set[int] = set()
        #: Locked messages whose queue was purged: deleted when their lock ends (PurgePending).
        self.purge_pending: set[int] = set()
        self.deleted = False


@dataclass(frozen=True, eq=False)
class QueueHandle:
    """An opened queue (OpenQueueDescriptor, MS-MQDMPR 3.1.1.16). Operations through a
    handle whose queue was deleted fail with MQ_ERROR_QUEUE_DELETED."""

    _state: _QueueState
    format_name: str

    @property
    def record(self) -> QueueRecord:
        """The queue's current properties."""
        return self._state.record


@dataclass(eq=False)
class _Cursor:
    queue: _QueueState
    key: int | None = None
