"""The two-phase receive of the remote-read service: MS-MQRR's PendingRequestTable in use.

:class:`TwoPhaseReceives` runs R_StartReceive / R_StartTransactionalReceive (a message
locked under a PendingRequestEntry with its Pending Request Cleanup Timer),
R_EndReceive / R_EndTransactionalReceive (the entry ended: message deleted or put back)
and R_CancelReceive, and puts back the message of an entry removed otherwise (a timer,
a closed handle, an ended session). The sessions, handles and transactions it works on
are :class:`~openmsmq.remote.core.RemoteReadCore`'s, which builds it and hands it its
lock, table and maps; the gRPC service calls it as ``core.receives``.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Protocol

from openmsmq.errors import HResult, MQError
from openmsmq.qm import MessageRecord, PendingReceive, QueueManager
from openmsmq.remote.codes import SINGLE_MESSAGE_UOW, Action, RemoteAck
from openmsmq.remote.limits import RemoteLimits
from openmsmq.remote.pending import ENTRY_OVERHEAD, PendingBudget, PendingRequestEntry, PendingRequestTable
from openmsmq.remote.read_calls import REPLY_BYTES, begin_one, check_read, wait_sliced
from openmsmq.remote.session import (
    OpenQueueDescriptor,
    RemoteSession,
    RemoteTransaction,
    Waiter,
    timeout_seconds,
)

__all__ = ["ReadCore", "TwoPhaseReceives"]


class ReadCore(Protocol):
    """What the two-phase receives use of :class:`~openmsmq.remote.core.RemoteReadCore`
    (a protocol, so that this module does not import the core that builds it)."""

    qm: QueueManager
    limits: RemoteLimits
    cleanup_timeout: float
    clock: Callable[[], float]

    def check_session(self, s: RemoteSession) -> None: ...

    def descriptor(self, s: RemoteSession, handle: int) -> OpenQueueDescriptor: ...

    def transaction(self, s: RemoteSession, uow: bytes, *, create: bool) -> RemoteTransaction: ...

    def waiting(
        self, s: RemoteSession, handle: int, request_id: int, cancel: threading.Event | None
    ) -> AbstractContextManager[Waiter]: ...

    # The peeks of a start (no uow: a peek takes nothing into a transaction).
    def read(
        self, s: RemoteSession, handle: int, action: int, *, lookup_id: int, cursor: int, timeout_ms: int,
        max_count: int, request_id: int, cancel: threading.Event | None,
    ) -> list[MessageRecord]: ...  # fmt: skip


class TwoPhaseReceives:
    """The two-phase receives of one :class:`~openmsmq.remote.core.RemoteReadCore` (``core``).

    ``lock`` guards ``table`` (the PendingRequestTable), ``handles`` (every open
    OpenQueueDescriptor by handle) and ``waiters`` (calls that wait, by {handle, request
    id}): the core's, shared with it.
    """

    def __init__(
        self,
        core: ReadCore,
        lock: threading.RLock,
        table: PendingRequestTable,
        budget: PendingBudget,
        handles: dict[int, OpenQueueDescriptor],
        waiters: dict[tuple[int, int], Waiter],
    ) -> None:
        self._core = core
        self._lock = lock
        self._table = table
        self._budget = budget
        self._handles = handles
        self._waiters = waiters

    def start_receive(
        self,
        s: RemoteSession,
        handle: int,
        action: int = Action.RECEIVE,
        *,
        request_id: int,
        lookup_id: int = 0,
        cursor: int = 0,
        timeout_ms: int = 0,
        uow: bytes = b"",
        max_count: int = 1,
        cancel: threading.Event | None = None,
    ) -> list[tuple[int, MessageRecord]]:
        """R_StartReceive (MS-MQRR 3.1.4.7) / R_StartTransactionalReceive (3.1.4.13), batched.

        Receive actions lock up to ``max_count`` messages, the i-th under the
        PendingRequestEntry {handle, request_id + i} with its cleanup timer; returns
        (request id, message) pairs. Peek actions behave as
        :meth:`RemoteReadCore.read <openmsmq.remote.core.RemoteReadCore.read>` (request id 0).
        """
        self._core.limits.messages(max_count, "max_count")
        d = self._core.descriptor(s, handle)
        act = check_read(d, action, lookup_id, cursor, timeout_ms, uow, max_count)
        if act.is_peek:
            msgs = self._core.read(
                s, handle, act, lookup_id=lookup_id, cursor=cursor, timeout_ms=timeout_ms,
                max_count=max_count, request_id=request_id, cancel=cancel,
            )  # fmt: skip
            return [(0, m) for m in msgs]
        if not 1 <= request_id <= 0xFFFFFFFF - (max_count - 1):
            raise MQError(HResult.MQ_ERROR_INVALID_PARAMETER, "dwRequestId must be 1..0xFFFFFFFF per message")
        if uow == SINGLE_MESSAGE_UOW:
            raise MQError(HResult.MQ_ERROR_TRANSACTION_USAGE, "a two-phase receive needs a real transaction")
        tx = self._core.transaction(s, uow, create=True) if uow else None
        with self._lock:
            # Over the handle's pending entries (bounded by the pending budgets), not over
            # the request ids asked for.
            taken = self._table.first_pending(handle, request_id, request_id + max_count)
            if taken is not None:
                raise MQError(HResult.MQ_ERROR_INVALID_PARAMETER, f"request {taken} is pending")
            self._budget.check_start(s)
        timeout = timeout_seconds(timeout_ms)
        out: list[tuple[int, MessageRecord]] = []
        t = tx.txn if tx else None
        with self._core.waiting(s, handle, request_id, cancel) as w:
            used = 0  # reply bytes so far (REPLY_BYTES)
            for i in range(max_count):
                rid = request_id + i
                if used >= REPLY_BYTES or self._budget.room(s) <= 0:
                    break
                if i == 1 and act == Action.RECEIVE and not cursor:
                    # The rest of the batch from the head: one select and one lock; its
                    # bodies within the reply's bytes and the pending budgets.
                    room = self._budget.room(s)
                    limit = max(1, min(REPLY_BYTES - used, room))
                    out += self._begin_rest(d, handle, rid, max_count - 1, tx, w.event, limit)
                    break
                entry = PendingRequestEntry(
                    rid, handle, self._core.clock(), tx=tx.state if tx else None, owner=s
                )
                with self._lock:
                    added = not d.closed and self._table.add(entry)
                if not added:
                    if i == 0:
                        raise MQError(HResult.MQ_ERROR_INVALID_HANDLE, f"queue handle {handle} was closed")
                    break
                try:
                    if i == 0:
                        p = wait_sliced(
                            w, timeout, lambda x: begin_one(self._core.qm, d, act, lookup_id, cursor, t, x)
                        )
                    else:
                        p = begin_one(self._core.qm, d, act, lookup_id, cursor, t, 0.0)
                except MQError:
                    with self._lock:
                        if self._table.get(handle, rid) is entry:
                            self._table.remove(handle, rid)
                    if i == 0:
                        raise
                    break
                with self._lock:
                    mine = self._table.get(handle, rid) is entry and not w.event.is_set()
                    if mine:
                        self._table.hold(entry, p, p.lookup_id, p.message.size)
                        # Safe reading of 3.1.2.2: the timer runs from the lock, not from the
                        # request's arrival, so a long wait does not eat the client's time.
                        self._table.start_timer(entry, self._core.clock() + self._core.cleanup_timeout)
                if not mine:
                    # Cancelled, closed or ended while we were locking: put it straight back.
                    with self._lock:
                        if self._table.get(handle, rid) is entry:
                            self._table.remove(handle, rid)
                    with contextlib.suppress(MQError):
                        self._core.qm.dequeue_end(p, delete=False)
                    if i == 0:
                        raise MQError(HResult.MQ_ERROR_OPERATION_CANCELLED, "the receive was cancelled")
                    break
                out.append((rid, p.message))
                used += len(p.message.body)
        return out

    def _begin_rest(
        self,
        d: OpenQueueDescriptor,
        handle: int,
        first_rid: int,
        n: int,
        tx: RemoteTransaction | None,
        cancelled: threading.Event,
        max_bytes: int,
    ) -> list[tuple[int, MessageRecord]]:
        """The rest of a batched R_StartReceive from the head: up to ``n`` (and up to
        ``max_bytes`` of bodies, one message at least)
        PendingRequestEntries from ``first_rid``, then Dequeue Message Begin for all of
        them at once (:meth:`QueueManager.dequeue_begin_many`: one select and one lock;
        it was a peek of the batch and one lock by LookupIdentifier each). Stops short,
        without error, when the queue has fewer messages, the handle was closed or the
        request was cancelled; a message locked for an entry no longer ours is put back."""
        entries: list[PendingRequestEntry] = []
        with self._lock:
            # No more entries than the pending budgets can hold messages: each message
            # counts at least ENTRY_OVERHEAD, so the rest could never be locked.
            n = min(n, max(1, self._budget.room(d.session) // ENTRY_OVERHEAD))
            for k in range(n):
                entry = PendingRequestEntry(
                    first_rid + k, handle, self._core.clock(), tx=tx.state if tx else None, owner=d.session
                )
                if d.closed or not self._table.add(entry):
                    break
                entries.append(entry)
        if not entries:
            return []
        try:
            got = self._core.qm.dequeue_begin_many(
                d.qm_handle, len(entries), tx=tx.txn if tx else None, timeout=0.0, max_bytes=max_bytes
            )
        except MQError:
            got = []
        out: list[tuple[int, MessageRecord]] = []
        back: list[PendingReceive] = []
        with self._lock:
            stop = False
            for j, entry in enumerate(entries):
                p = got[j] if j < len(got) else None
                stop = stop or p is None or cancelled.is_set()
                if p is not None and not stop:
                    # The session's budget counts each message's size plus the entry's
                    # overhead (max_bytes bounded the bodies only): past it, put back.
                    stop = p.message.size + ENTRY_OVERHEAD > self._budget.room(d.session)
                mine = not stop and self._table.get(handle, entry.request_id) is entry
                if mine and p is not None:
                    self._table.hold(entry, p, p.lookup_id, p.message.size)
                    self._table.start_timer(entry, self._core.clock() + self._core.cleanup_timeout)
                    out.append((entry.request_id, p.message))
                    continue
                # Cancelled, closed, ended or no message: drop the entry, put its message back.
                stop = True
                if self._table.get(handle, entry.request_id) is entry:
                    self._table.remove(handle, entry.request_id)
                if p is not None:
                    back.append(p)
        for p in back:
            with contextlib.suppress(MQError):
                self._core.qm.dequeue_end(p, delete=False)
        return out

    def put_back(self, entry: PendingRequestEntry) -> None:
        """Dequeue Message End(iDeleteMessage = false) for a removed entry (cleanup timer,
        close, rundown): the message becomes available again. Nothing to do while the
        request still waits (the waiter notices) or after its transaction ended."""
        if entry.receive is None or (entry.tx is not None and entry.tx.outcome is not None):
            return
        with contextlib.suppress(MQError):
            if entry.tx is not None:  # a transactional receive nobody ended: aborted (AbortCount)
                self._core.qm.abort_receive(entry.receive)
            else:
                self._core.qm.dequeue_end(entry.receive, delete=False)

    def end_receive(
        self,
        s: RemoteSession,
        handle: int,
        request_ids: Sequence[int],
        ack: int,
        transactional: bool | None = None,
    ) -> list[int]:
        """R_EndReceive (MS-MQRR 3.1.4.9, ``transactional`` False) or
        R_EndTransactionalReceive (3.1.4.15, seed 001, ``transactional`` True), batched:
        the steps for each request id in order; returns one HRESULT each.

        The two differ in Dequeue Message End's iTransactional (False / True). Ending a
        receive with the other method than the one that matches how it started (in a
        transaction or not) is MQ_ERROR_TRANSACTION_USAGE, before step 2, so the entry
        stays for the right call: R_EndReceive would delete a message of a transaction at
        once, and R_EndTransactionalReceive would leave a message no transaction holds
        locked for good (docs/conformance.md, seed 001). ``transactional`` None (clients
        from before the distinction) ends each receive the way it started."""
        if ack not in (RemoteAck.RR_ACK, RemoteAck.RR_NACK):
            raise MQError(HResult.MQ_ERROR_INVALID_PARAMETER, f"dwAck {ack:#x} (range 1..2)")
        if request_ids:
            self._core.limits.messages(len(request_ids), "request ids")
        delete = ack == RemoteAck.RR_ACK
        return [self._end_one(s, handle, rid, delete, transactional) for rid in request_ids]

    def _end_one(
        self, s: RemoteSession, handle: int, request_id: int, delete: bool, transactional: bool | None
    ) -> int:
        with self._lock:
            self._core.check_session(s)
            d = self._handles.get(handle)
            # Step 1: the handle has no PendingRequestEntry (a handle of another session
            # has none for this caller).
            if (d is not None and d.session is not s) or not self._table.has_handle(handle):
                return HResult.MQ_ERROR_INVALID_HANDLE
            # Step 2: look up {handle, request id}; remove it and cancel its timer.
            entry = self._table.get(handle, request_id)
            if entry is None:
                return HResult.MQ_ERROR_INVALID_PARAMETER
            if transactional is not None and transactional != (entry.tx is not None):
                return HResult.MQ_ERROR_TRANSACTION_USAGE
            self._table.remove(handle, request_id)
            outcome = entry.tx.outcome if entry.tx is not None else None
        # Steps 3-4: the OpenQueueDescriptor (gone only when a close raced with this call).
        # Seed 001: "If not found, return a failure HRESULT, and perform no further
        # actions": a message of a transaction stays in it (commit removes it, abort puts
        # it back). R_EndReceive's lock has no transaction to end it: that message is
        # put back, as the close would have done had it seen the entry.
        if d is None or d.closed:
            if entry.tx is None:
                self.put_back(entry)
            return HResult.MQ_ERROR_INVALID_HANDLE
        # Steps 5-6: the message with the entry's LookupIdentifier. A locked message can
        # only leave the queue through its transaction or with its queue.
        if entry.receive is None or outcome == "committed":
            return HResult.MQ_ERROR_MESSAGE_NOT_FOUND
        if outcome == "aborted":
            # Abort made it available again (maybe locked by another reader since):
            # Dequeue Message End on a position that is not ours.
            return HResult.MQ_ERROR_TRANSACTION_SEQUENCE
        # Step 7: Dequeue Message End(iDeleteMessage = dwAck == RR_ACK, iTransactional =
        # whether it is a transaction's: the entry says, and a mismatch was refused above).
        try:
            self._core.qm.dequeue_end(entry.receive, delete=delete)
        except MQError as exc:
            return int(exc.hresult)
        return HResult.MQ_OK

    def cancel_receive(self, s: RemoteSession, handle: int, request_id: int) -> None:
        """R_CancelReceive (MS-MQRR 3.1.4.8): the waiting receive {handle, request id} ends
        with MQ_ERROR_OPERATION_CANCELLED; STATUS_NOT_FOUND if none is waiting."""
        self._core.descriptor(s, handle)
        with self._lock:
            w = self._waiters.get((handle, request_id))
            if w is None or w.session is not s:
                raise MQError(HResult.STATUS_NOT_FOUND, f"no waiting receive {request_id} on handle {handle}")
            w.event.set()
            entry = self._table.remove(handle, request_id)
        if entry is not None:
            self.put_back(entry)
