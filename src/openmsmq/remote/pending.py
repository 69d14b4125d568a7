"""The PendingRequestTable of MS-MQRR 3.1.1.3 and its Pending Request Cleanup Timers (3.1.2.2).

A plain data structure (no queue manager, no clock): entries keyed by
{QueueContextHandle, RequestId}, one deadline per entry kept in a heap with lazy
deletion, so adding, ending and expiring an entry are O(log n). The caller passes
``now`` and does what an expired entry needs (put its message back).
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ENTRY_OVERHEAD",
    "MAX_PENDING_BYTES",
    "MAX_TOTAL_PENDING_BYTES",
    "PendingRequestEntry",
    "PendingRequestTable",
    "TxState",
]

#: Memory a pending receive holds besides its message's size (the locked Message, the
#: QM's PendingReceive, the entry, the table's keys), counted against its session's
#: ``max_pending_bytes``. tracemalloc over 20,000 pending receives of 256-byte messages
#: (batches of 500 from the head, 2026-11-26): 1,716 bytes each, 1,460 beyond the body.
ENTRY_OVERHEAD = 1536
#: Defaults of what one session / all sessions may hold in pending receives
#: (``remote.max_pending_bytes`` / ``remote.max_total_pending_bytes``).
MAX_PENDING_BYTES = 128 * 1024 * 1024
MAX_TOTAL_PENDING_BYTES = 512 * 1024 * 1024


@dataclass(eq=False)
class TxState:
    """Outcome of the transaction a pending receive joined: ``None`` while active,
    ``"committed"`` or ``"aborted"`` once ended (shared by all its entries)."""

    outcome: str | None = None


@dataclass(eq=False)
class PendingRequestEntry:
    """PendingRequestEntry (MS-MQRR 3.1.1.2): one two-phase receive of one queue handle.

    ``lookup_id`` is 0 until Dequeue Message Begin has locked a message; ``receive`` is
    then the queue manager's :class:`~openmsmq.qm.PendingReceive`. ``tx`` is set for a
    transactional receive (R_StartTransactionalReceive).
    """

    request_id: int
    handle: int
    #: TimeStamp: when the request arrived (the table's clock).
    timestamp: float
    lookup_id: int = 0
    receive: Any = None
    tx: TxState | None = None
    #: The session the entry counts against (anything with a ``pending_bytes`` int).
    owner: Any = None
    #: What the entry adds to ``owner.pending_bytes`` (set by :meth:`PendingRequestTable.hold`).
    nbytes: int = 0
    #: Deadline of the Pending Request Cleanup Timer (None = not running).
    deadline: float | None = None
    _timer_seq: int = field(default=0, repr=False)

    @property
    def key(self) -> tuple[int, int]:
        """The table key {QueueContextHandle, RequestId}."""
        return (self.handle, self.request_id)


class PendingRequestTable:
    """PendingRequestTable (MS-MQRR 3.1.1.3) with one cleanup timer per entry.

    Not thread-safe by itself: the owner serialises calls.
    """

    def __init__(self) -> None:
        self._entries: dict[tuple[int, int], PendingRequestEntry] = {}
        self._by_handle: dict[int, set[int]] = {}
        self._heap: list[tuple[float, int, tuple[int, int]]] = []
        self._seq = itertools.count(1)
        #: What every held entry counts (the sum of the owners' ``pending_bytes``): the
        #: server-wide bound's measure.
        self.held_bytes = 0

    def __len__(self) -> int:
        return len(self._entries)

    def has_handle(self, handle: int) -> bool:
        """True when the handle has at least one entry (R_End*Receive step 1)."""
        return bool(self._by_handle.get(handle))

    def get(self, handle: int, request_id: int) -> PendingRequestEntry | None:
        """The entry for {handle, request_id}, if any."""
        return self._entries.get((handle, request_id))

    def first_pending(self, handle: int, start: int, stop: int) -> int | None:
        """The lowest request id in ``[start, stop)`` with an entry of ``handle``, or None.
        Walks the handle's entries, not the range (which a client chooses)."""
        ids = self._by_handle.get(handle)
        if not ids:
            return None
        return min((rid for rid in ids if start <= rid < stop), default=None)

    def add(self, entry: PendingRequestEntry) -> bool:
        """Add an entry; False when {handle, request_id} is already pending."""
        if entry.key in self._entries:
            return False
        self._entries[entry.key] = entry
        self._by_handle.setdefault(entry.handle, set()).add(entry.request_id)
        return True

    def hold(self, entry: PendingRequestEntry, receive: Any, lookup_id: int, size: int) -> None:
        """The entry's message is locked: keep ``receive`` and count ``size`` plus
        :data:`ENTRY_OVERHEAD` against its owner until the entry is removed."""
        entry.receive, entry.lookup_id = receive, lookup_id
        entry.nbytes = size + ENTRY_OVERHEAD
        self.held_bytes += entry.nbytes
        if entry.owner is not None:
            entry.owner.pending_bytes += entry.nbytes

    def start_timer(self, entry: PendingRequestEntry, deadline: float) -> None:
        """(Re)start the entry's Pending Request Cleanup Timer."""
        entry._timer_seq = next(self._seq)
        entry.deadline = deadline
        heapq.heappush(self._heap, (deadline, entry._timer_seq, entry.key))

    def remove(self, handle: int, request_id: int) -> PendingRequestEntry | None:
        """Remove an entry and cancel its timer; None if there was none."""
        entry = self._entries.pop((handle, request_id), None)
        if entry is None:
            return None
        ids = self._by_handle.get(handle)
        if ids is not None:
            ids.discard(request_id)
            if not ids:
                del self._by_handle[handle]
        entry.deadline = None  # the heap item is now stale: skipped when popped
        if entry.nbytes:
            self.held_bytes -= entry.nbytes
            if entry.owner is not None:
                entry.owner.pending_bytes -= entry.nbytes
            entry.nbytes = 0
        return entry

    def remove_handle(self, handle: int) -> list[PendingRequestEntry]:
        """Remove every entry of a handle (R_CloseQueue, rundown)."""
        ids = sorted(self._by_handle.get(handle, ()))
        out = [self.remove(handle, rid) for rid in ids]
        return [e for e in out if e is not None]

    def next_deadline(self) -> float | None:
        """Earliest running timer, or None."""
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def pop_expired(self, now: float) -> list[PendingRequestEntry]:
        """Remove and return the entries whose cleanup timer expired at ``now``."""
        out: list[PendingRequestEntry] = []
        while self._heap:
            self._drop_stale()
            if not self._heap or self._heap[0][0] > now:
                break
            _deadline, _seq, (handle, rid) = heapq.heappop(self._heap)
            entry = self.remove(handle, rid)
            if entry is not None:
                out.append(entry)
        return out

    def _drop_stale(self) -> None:
        heap = self._heap
        while heap:
            deadline, seq, key = heap[0]
            entry = self._entries.get(key)
            if entry is not None and entry._timer_seq == seq and entry.deadline == deadline:
                return
            heapq.heappop(heap)
