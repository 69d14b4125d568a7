"""Queue-manager-side objects callers hold: queue handles, cursors, seek actions.

Split from :mod:`openmsmq.qm.manager`, which re-exports them.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Collection
from dataclasses import dataclass
from enum import IntEnum

from openmsmq.store.records import MessageRecord, QueueRecord

__all__ = ["CancelToken", "Cursor", "CursorAction", "LookupAction", "QueueHandle", "QueueState"]

#: Messages a head receive of one message reads beyond it from a transactional private
#: queue, kept for the next receives (:attr:`QueueState.prefetch`): with many threads
#: receiving one message per transaction, each read of the head (under the queue's
#: condition, on a read connection whose cache the commits between reads invalidate) is
#: costly, and the others wait for the condition meanwhile; with 31 only one receive in
#: 32 reads the head (docs/store.md, "Lazy unlock and read-ahead").
PREFETCH = 31
#: Bytes of bodies kept read ahead per queue at most.
PREFETCH_BYTES = 64 * 1024


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


class QueueState:
    """In-memory state of one queue: its record, lock set, waiters. Never per message on disk."""

    __slots__ = (
        "ahead",
        "cond",
        "deleted",
        "head_key",
        "locked",
        "messages_in",
        "messages_out",
        "notified",
        "prefetch",
        "purge_pending",
        "readers",
        "record",
        "removed",
    )

    def __init__(self, record: QueueRecord) -> None:
        self.record = record
        self.cond = threading.Condition(threading.Lock())
        #: LookupIdentifiers locked by a transaction, a two-phase read or an in-flight delete.
        self.locked: set[int] = set()
        #: Locked messages whose queue was purged: deleted when their lock ends (PurgePending).
        self.purge_pending: set[int] = set()
        self.deleted = False
        #: Reads between their first select and their return (``Reader._take``,
        #: changed under ``cond``): a commit notifies ``cond`` only when one is there.
        self.readers = 0
        #: When a commit last woke reads waiting here and none of them has taken a message
        #: since (time.monotonic; None: no such wake-up); under ``cond``. The
        #: ``stored_to_reader`` stage (observability.sink.STAGES).
        self.notified: float | None = None
        #: LookupIdentifiers of locked messages that were durably removed (a committed
        #: receive or expiry), whose locks :meth:`settle` has not dropped yet. Appended
        #: without ``cond``; see :meth:`QueueManager._unlock_ids`.
        self.removed: collections.deque[Collection[int]] = collections.deque()
        #: The head hint: an order_key before which every message of its priority band
        #: is locked or expired (``Reader._head_select``); None: read from the head.
        #: Under ``cond``.
        self.head_key: int | None = None
        #: The next available messages after the head hint, read ahead by a head receive
        #: of one message (``Reader._head_select``), last first; None when there are
        #: none. Neither locked nor removed: any other lock, release, purge or delete on
        #: the queue drops them (:meth:`drop_prefetch`). Under ``cond``.
        self.prefetch: list[tuple[int, MessageRecord]] | None = None
        #: How many messages the next head read of one message reads ahead (set from
        #: the message it found: none for one that can expire or a large one).
        self.ahead = PREFETCH
        #: Messages that entered the queue (sent, arrived from a peer, moved or
        #: dead-lettered into it) and left it (received, released by an OrderAck, moved
        #: out) since the queue manager opened: added once per commit per queue, after the
        #: store made the commit durable, for the console's rates and the metrics. An
        #: ``int +=`` on a slot keeps CPython's GIL from its read to its write (no Python
        #: call, no eval-breaker check between them), so concurrent commits lose no count.
        self.messages_in = 0
        self.messages_out = 0

    def drop_prefetch(self) -> None:
        """Forget the messages read ahead (with ``cond`` held): a lock taken by another
        read, a release or a removal may have changed what lies after the head hint."""
        self.prefetch = None

    def reset_head(self) -> None:
        """Forget the head hint and the read-ahead (with ``cond`` held): messages became
        available again, so the next head read starts at the head."""
        self.head_key = None
        self.prefetch = None

    def settle(self) -> None:
        """Drop the locks (and PurgePending marks) of :attr:`removed` messages. Called with
        ``cond`` held, before ``locked`` or ``purge_pending`` is read."""
        removed = self.removed
        while removed:
            ids = removed.popleft()
            self.locked.difference_update(ids)
            if self.purge_pending:
                self.purge_pending.difference_update(ids)


@dataclass(frozen=True, eq=False)
class QueueHandle:
    """An opened queue (OpenQueueDescriptor, MS-MQDMPR 3.1.1.16). Operations through a
    handle whose queue was deleted fail with MQ_ERROR_QUEUE_DELETED."""

    #: The in-memory state of the queue (shared by every handle of it).
    state: QueueState
    format_name: str

    @property
    def record(self) -> QueueRecord:
        """The queue's current properties."""
        return self.state.record

    @property
    def deleted(self) -> bool:
        """The queue was deleted since the handle was opened."""
        return self.state.deleted


class CancelToken:
    """Cancels waiting reads (MS-MQRR R_CancelReceive; closing a handle with reads pending).

    Pass it as ``cancel=`` to any waiting QueueManager read; :meth:`cancel` makes every
    read waiting with it (now or later) fail with MQ_ERROR_OPERATION_CANCELLED at once.
    A read that already returned a message is not affected. One token may serve many
    reads (e.g. every read of one remote-read handle). Thread-safe.
    """

    __slots__ = ("_conds", "_lock", "cancelled")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        #: True once :meth:`cancel` was called.
        self.cancelled = False
        self._conds: dict[threading.Condition, int] = {}

    def cancel(self) -> None:
        """Cancel: wake every read waiting with this token; later reads fail at once."""
        with self._lock:
            self.cancelled = True
            conds = list(self._conds)
        for cond in conds:
            # The waiter holds the condition from its check of ``cancelled`` until it
            # waits, so this notify cannot fall between the two.
            with cond:
                cond.notify_all()

    def enter(self, cond: threading.Condition) -> None:
        """A read starts waiting on ``cond``: :meth:`cancel` wakes it."""
        with self._lock:
            self._conds[cond] = self._conds.get(cond, 0) + 1

    def leave(self, cond: threading.Condition) -> None:
        """The read that :meth:`enter` registered is done waiting on ``cond``."""
        with self._lock:
            n = self._conds.get(cond, 0) - 1
            if n > 0:
                self._conds[cond] = n
            else:
                self._conds.pop(cond, None)


@dataclass(eq=False)
class Cursor:
    queue: QueueState
    key: int | None = None
