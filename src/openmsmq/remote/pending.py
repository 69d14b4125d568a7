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

from openmsmq.errors import HResult, LimitError

__all__ = [
    "ENTRY_OVERHEAD",
    "MAX_PENDING_BYTES",
    "MAX_TOTAL_PENDING_BYTES",
    "SEND_OVERHEAD",
    "PendingBudget",
    "PendingRequestEntry",
    "PendingRequestTable",
    "TxState",
]

#: Memory a pending receive holds besides its message's size (the locked Message, the
#: QM's PendingReceive, the entry, the table's keys), counted against its session's
#: ``max_pending_bytes``: an estimate from tracemalloc over many pending receives of
#: 256-byte messages, rounded.
ENTRY_OVERHEAD = 1536
#: Memory a send buffered in an open remote transaction holds besides its message's size
#: (its row and Send record until the commit; tracemalloc of sends of 256-byte messages).
SEND_OVERHEAD = 512
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


class PendingBudget:
    """What client sessions hold in the server's memory for work they started and have not
    ended, and its two bounds: ``max_pending_bytes`` per session, ``max_total_pending_bytes``
    for all of them (``remote.*`` keys of the same names).

    Two kinds of work count: the messages locked by pending receives (``table.held_bytes``,
    each message's size plus :data:`ENTRY_OVERHEAD`), and the sends buffered in transactions
    still open (each message's size plus :data:`SEND_OVERHEAD`: a transaction keeps them
    until its commit, so a client that sends and never commits held them for good). An
    owner (a session) has a ``pending_bytes`` int; a transaction a ``held_bytes`` int. Not
    thread-safe by itself: the owner serialises calls, as for the table.
    """

    def __init__(
        self, table: PendingRequestTable, max_pending_bytes: int, max_total_pending_bytes: int
    ) -> None:
        self.table = table
        self.max_pending_bytes = max_pending_bytes
        self.max_total_pending_bytes = max_total_pending_bytes
        #: Bytes of the sends buffered in open transactions, all sessions together.
        self.tx_bytes = 0

    @property
    def held(self) -> int:
        """What all sessions hold: pending receives and buffered sends."""
        return self.table.held_bytes + self.tx_bytes

    def room(self, owner: Any) -> int:
        """Bytes ``owner`` may still take: within its own bound and the server's."""
        own: int = self.max_pending_bytes - owner.pending_bytes
        return min(own, self.max_total_pending_bytes - self.held)

    def check_start(self, owner: Any) -> None:
        """Before a receive that locks messages: :class:`LimitError` (MQ_ERROR_INSUFFICIENT_RESOURCES)
        when ``owner`` or the server is at its bound. A client that never ends its receives
        kept the locked messages in memory until the cleanup timer; many sessions, each
        within its own bound, held the server's memory the same way."""
        if owner.pending_bytes >= self.max_pending_bytes:
            raise LimitError(
                HResult.MQ_ERROR_INSUFFICIENT_RESOURCES,
                f"this session holds {owner.pending_bytes:,} bytes in receives and transactional sends"
                f" it has not ended (remote.max_pending_bytes = {self.max_pending_bytes:,}): end some first",
                limit="remote.max_pending_bytes",
            )
        if self.held >= self.max_total_pending_bytes:
            raise self._total_error()

    def hold_sends(self, owner: Any, tx: Any, nbytes: int) -> None:
        """Count ``nbytes`` of sends buffered in ``owner``'s open transaction ``tx``, or raise
        :class:`LimitError` (MQ_ERROR_INSUFFICIENT_RESOURCES) when they do not fit (nothing
        is counted then)."""
        if owner.pending_bytes + nbytes > self.max_pending_bytes:
            raise LimitError(
                HResult.MQ_ERROR_INSUFFICIENT_RESOURCES,
                f"this session holds {owner.pending_bytes:,} bytes in receives and transactional sends"
                f" it has not ended; {nbytes:,} more would pass remote.max_pending_bytes ="
                f" {self.max_pending_bytes:,}: commit or abort the transaction first",
                limit="remote.max_pending_bytes",
            )
        if self.held + nbytes > self.max_total_pending_bytes:
            raise self._total_error()
        owner.pending_bytes += nbytes
        tx.held_bytes += nbytes
        self.tx_bytes += nbytes

    def release_sends(self, owner: Any, tx: Any, nbytes: int | None = None) -> None:
        """Stop counting ``nbytes`` (None: all) of ``tx``'s buffered sends: it ended, or the
        send that held them failed."""
        n = tx.held_bytes if nbytes is None else min(nbytes, tx.held_bytes)
        tx.held_bytes -= n
        owner.pending_bytes -= n
        self.tx_bytes -= n

    def _total_error(self) -> LimitError:
        return LimitError(
            HResult.MQ_ERROR_INSUFFICIENT_RESOURCES,
            f"the server holds {self.held:,} bytes in receives and transactional sends its sessions"
            f" have not ended (remote.max_total_pending_bytes = {self.max_total_pending_bytes:,}):"
            " retry once some are ended",
            limit="remote.max_total_pending_bytes",
        )
