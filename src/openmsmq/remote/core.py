"""The MS-MQRR server state over a :class:`~openmsmq.qm.QueueManager`, independent of gRPC.

:class:`RemoteReadCore` holds what MS-MQRR 3.1.1 calls the server's abstract data
model: OpenQueueDescriptors (handles with access and share modes), cursors, the
PendingRequestTable with one Pending Request Cleanup Timer per entry (worked by the
two-phase receives, :class:`~openmsmq.remote.receives.TwoPhaseReceives`, ``core.receives``),
and the transactions created remotely — all owned by a client :class:`Session`. Ending a
session (its client vanished) closes its handles, puts its pending receives back and
aborts its transactions (invariant 7).

Every method is thread-safe and may block (waiting receives, commits): the gRPC
service calls them from worker threads. Waits are cut into short slices so that
R_CancelReceive, a closed handle or an ended session stop them promptly. Timers run
when the owner calls :meth:`RemoteReadCore.run_timers` (with ``now`` from the core's
clock, so tests can drive them). The read primitives that need none of this state
(parameter checks, the sliced wait, cursor batches) are in :mod:`openmsmq.remote.read_calls`.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from openmsmq.errors import HResult, MQError, quoted
from openmsmq.qm import (
    MessageRecord,
    QueueManager,
    QueueRecord,
    QueueType,
    Transaction,
)
from openmsmq.qm.sending import refuse_subqueue
from openmsmq.remote.auth import Permission, Principal
from openmsmq.remote.codes import (
    NACK_RECEIVE_REJECTED,
    SINGLE_MESSAGE_UOW,
    AccessMode,
    Action,
    ShareMode,
)
from openmsmq.remote.limits import RemoteLimits, check_name
from openmsmq.remote.pending import (
    MAX_PENDING_BYTES,
    MAX_TOTAL_PENDING_BYTES,
    SEND_OVERHEAD,
    PendingBudget,
    PendingRequestTable,
)
from openmsmq.remote.read_calls import REPLY_BYTES, SEEK, check_read, cursor_batch, wait_sliced
from openmsmq.remote.receives import TwoPhaseReceives
from openmsmq.remote.session import (
    OpenQueueDescriptor,
    RemoteSession,
    RemoteTransaction,
    Waiter,
    share_conflict,
    timeout_seconds,
)

__all__ = ["OpenQueueDescriptor", "RemoteReadCore", "RemoteSession"]

T = TypeVar("T")

#: Ended transaction ids a session remembers (so a stale id is not re-created).
_ENDED_MEMORY = 4096


def _err(code: HResult, message: str) -> MQError:
    return MQError(code, message)


class RemoteReadCore:
    """MS-MQRR server semantics over one QueueManager (see the module docstring).

    ``cleanup_timeout``: the Pending Request Cleanup Timer in seconds (MS-MQRR 3.1.2.2;
    Windows uses 5 minutes). ``session_timeout``: a session that has not been touched
    for this long is ended. ``max_pending_bytes``: what one session may hold in pending
    receives and in sends buffered in its open transactions
    (:class:`~openmsmq.remote.pending.PendingBudget`); ``max_total_pending_bytes``: what all
    sessions together may hold; a start or a send beyond either fails with
    MQ_ERROR_INSUFFICIENT_RESOURCES naming its key. ``limits``: the
    bounds of every count a call carries (:class:`~openmsmq.remote.limits.RemoteLimits`),
    checked before the call does any work. ``clock``: monotonic seconds for both timeouts.
    """

    def __init__(
        self,
        qm: QueueManager,
        *,
        cleanup_timeout: float = 300.0,
        session_timeout: float = 30.0,
        max_pending_bytes: int = MAX_PENDING_BYTES,
        max_total_pending_bytes: int = MAX_TOTAL_PENDING_BYTES,
        limits: RemoteLimits | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.qm = qm
        self.limits = limits or RemoteLimits()
        self.cleanup_timeout = cleanup_timeout
        self.session_timeout = session_timeout
        self.clock = clock
        self._lock = threading.RLock()
        self._sessions: dict[str, RemoteSession] = {}
        self._handles: dict[int, OpenQueueDescriptor] = {}
        self._opened: dict[int, list[OpenQueueDescriptor]] = {}
        self._table = PendingRequestTable()
        #: What sessions hold for receives and transactional sends they have not ended.
        self.budget = PendingBudget(self._table, max_pending_bytes, max_total_pending_bytes)
        self._waiters: dict[tuple[int, int], Waiter] = {}
        self._handle_ids = itertools.count(1)
        #: R_StartReceive / R_EndReceive / R_CancelReceive over the PendingRequestTable.
        self.receives = TwoPhaseReceives(
            self, self._lock, self._table, self.budget, self._handles, self._waiters
        )

    # ---- sessions ------------------------------------------------------------------------

    def open_session(self, principal: Principal) -> RemoteSession:
        """Start a session for an authenticated caller."""
        s = RemoteSession(uuid.uuid4().hex, principal, self.clock())
        with self._lock:
            self._sessions[s.id] = s
        return s

    def session(self, session_id: str, principal: Principal | None = None) -> RemoteSession:
        """The live session ``session_id`` (touched); MQ_ERROR_STALE_HANDLE if it ended,
        MQ_ERROR_ACCESS_DENIED if it belongs to another principal."""
        with self._lock:
            s = self._sessions.get(session_id)
            if s is None:
                raise _err(HResult.MQ_ERROR_STALE_HANDLE, "no such session (it ended or never existed)")
            if principal is not None and s.principal != principal:
                raise _err(HResult.MQ_ERROR_ACCESS_DENIED, "the session belongs to another caller")
            s.last_seen = self.clock()
            return s

    def touch(self, session: RemoteSession) -> None:
        """Record a keepalive of the session."""
        session.last_seen = self.clock()

    @property
    def session_count(self) -> int:
        """Live sessions."""
        return len(self._sessions)

    @property
    def pending_count(self) -> int:
        """Entries in the PendingRequestTable."""
        return len(self._table)

    def close_session(self, session: RemoteSession | str) -> None:
        """End a session: cancel its waits, close its handles (pending receives put back,
        MS-MQRR 3.1.6 rundown) and abort its transactions. Idempotent."""
        sid = session if isinstance(session, str) else session.id
        with self._lock:
            s = self._sessions.pop(sid, None)
            if s is None:
                return
            s.closed = True
            descs = list(s.handles.values())
            txs = list(s.txs.values())
            s.txs.clear()
            waiters = list(s.waiters)
        for w in waiters:
            w.event.set()
        for d in descs:
            self._close_descriptor(d)
        for tx in txs:
            with self._lock:
                tx.state.outcome = "aborted"
                self.budget.release_sends(s, tx)
            with contextlib.suppress(MQError):
                tx.txn.abort()

    def close(self) -> None:
        """End every session."""
        with self._lock:
            ids = list(self._sessions)
        for sid in ids:
            self.close_session(sid)

    # ---- timers --------------------------------------------------------------------------

    def next_deadline(self) -> float | None:
        """When :meth:`run_timers` next has work: a cleanup timer or a session timeout."""
        with self._lock:
            d = self._table.next_deadline()
            if self._sessions:
                oldest = min(s.last_seen for s in self._sessions.values()) + self.session_timeout
                d = oldest if d is None else min(d, oldest)
            return d

    def run_timers(self, now: float | None = None) -> int:
        """Fire expired Pending Request Cleanup Timers (MS-MQRR 3.1.5: the message becomes
        available again, the entry is removed) and end sessions idle past their timeout.
        Returns how many entries and sessions were ended."""
        now = self.clock() if now is None else now
        with self._lock:
            expired = self._table.pop_expired(now)
            stale = [s.id for s in self._sessions.values() if now - s.last_seen > self.session_timeout]
        for entry in expired:
            self.receives.put_back(entry)
        for sid in stale:
            self.close_session(sid)
        return len(expired) + len(stale)

    # ---- handles (R_OpenQueue, R_CloseQueue, R_CreateCursor, R_CloseCursor) ---------------

    def open_queue(self, s: RemoteSession, name: str, access: int, share: int = 0) -> int:
        """R_OpenQueue (MS-MQRR 3.1.4.2): a new queue handle of the session."""
        if not access or access & ~int(AccessMode.RECEIVE | AccessMode.SEND | AccessMode.PEEK):
            raise _err(HResult.MQ_ERROR_INVALID_PARAMETER, f"dwAccess {access:#x}")
        if share not in (ShareMode.DENY_NONE, ShareMode.DENY_SHARE):
            raise _err(HResult.MQ_ERROR_INVALID_PARAMETER, f"dwShareMode {share:#x}")
        mode, shm = AccessMode(access), ShareMode(share)
        if shm == ShareMode.DENY_SHARE and not mode.can_peek:
            raise _err(HResult.MQ_ERROR_UNSUPPORTED_ACCESS_MODE, "MQ_DENY_SHARE needs receive or peek access")
        needed = Permission.NONE
        if mode.can_receive:
            needed |= Permission.RECEIVE
        elif mode.can_peek:
            needed |= Permission.PEEK
        if mode & AccessMode.SEND:
            needed |= Permission.SEND
            refuse_subqueue(check_name(name))  # nothing is sent to a subqueue (refused at open)
        # Permissions first, on the canonical name, before anything is written: opening a
        # remote format name for send creates its outgoing queue, and the rules match
        # canonical names (``.\\PRIVATE$\\X`` is ``private$\\x``).
        self._need(s, self.qm.queue_key(check_name(name)), needed)
        if mode.can_peek:
            rec = self.qm.get_queue(name)  # reading never creates an outgoing queue
            if rec.queue_type == QueueType.OUTGOING:
                raise _err(
                    HResult.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION,
                    f"{quoted(name)} is not a queue of this QM",
                )
        qh = self.qm.open_queue(name)
        self._need(s, qh.record.name, needed)
        with self._lock:
            self.check_session(s)
            others = self._opened.setdefault(qh.record.queue_id, [])
            if any(share_conflict(o, mode, shm) for o in others):
                raise _err(
                    HResult.MQ_ERROR_SHARING_VIOLATION, f"queue {quoted(name)} is opened with MQ_DENY_SHARE"
                )
            d = OpenQueueDescriptor(next(self._handle_ids) & 0xFFFFFFFF or 1, s, qh, mode, shm)
            others.append(d)
            self._handles[d.handle] = d
            s.handles[d.handle] = d
        return d.handle

    def check_session(self, s: RemoteSession) -> None:
        """(under the core's lock) MQ_ERROR_STALE_HANDLE if ``s`` ended."""
        if s.closed:
            raise _err(HResult.MQ_ERROR_STALE_HANDLE, "the session ended")

    def descriptor(self, s: RemoteSession, handle: int) -> OpenQueueDescriptor:
        """The open queue handle ``handle`` of ``s``; MQ_ERROR_INVALID_HANDLE if none."""
        d = s.handles.get(handle)
        if d is None or d.closed:
            raise _err(HResult.MQ_ERROR_INVALID_HANDLE, f"no queue handle {handle}")
        return d

    def close_queue(self, s: RemoteSession, handle: int) -> None:
        """R_CloseQueue (MS-MQRR 3.1.4.3): waits cancelled, cursors closed, pending entries
        removed and their messages put back (the rundown of 3.1.6; inferred for 3.1.4.3)."""
        self._close_descriptor(self.descriptor(s, handle))

    def _close_descriptor(self, d: OpenQueueDescriptor) -> None:
        with self._lock:
            if d.closed:
                return
            d.closed = True
            self._handles.pop(d.handle, None)
            d.session.handles.pop(d.handle, None)
            others = self._opened.get(d.queue_id, [])
            if d in others:
                others.remove(d)
            entries = self._table.remove_handle(d.handle)
            waiters = [w for w in d.session.waiters if w.handle == d.handle]
            cursors = list(d.cursors)
            d.cursors.clear()
        for w in waiters:
            w.event.set()
        for entry in entries:
            self.receives.put_back(entry)
        for c in cursors:
            with contextlib.suppress(MQError):
                self.qm.close_cursor(c)

    def create_cursor(self, s: RemoteSession, handle: int) -> int:
        """R_CreateCursor (MS-MQRR 3.1.4.4)."""
        d = self.descriptor(s, handle)
        if not d.access.can_peek:
            raise _err(HResult.MQ_ERROR_ACCESS_DENIED, "a cursor needs receive or peek access")
        c = self.qm.create_cursor(d.qm_handle)
        with self._lock:
            d.cursors.add(c)
        return c

    def close_cursor(self, s: RemoteSession, handle: int, cursor: int) -> None:
        """R_CloseCursor (MS-MQRR 3.1.4.5); MQ_ERROR_INVALID_HANDLE if unknown."""
        d = self.descriptor(s, handle)
        with self._lock:
            if cursor not in d.cursors:
                raise _err(HResult.MQ_ERROR_INVALID_HANDLE, f"no cursor {cursor} on handle {handle}")
            d.cursors.discard(cursor)
        with contextlib.suppress(MQError):
            self.qm.close_cursor(cursor)

    def purge(self, s: RemoteSession, handle: int) -> int:
        """R_PurgeQueue (MS-MQRR 3.1.4.6): STATUS_ACCESS_DENIED without RECEIVE access."""
        d = self.descriptor(s, handle)
        if not d.access.can_receive:
            raise _err(HResult.STATUS_ACCESS_DENIED, "R_PurgeQueue needs RECEIVE_ACCESS")
        return self.qm.purge_queue(d.qm_handle)

    # ---- transactions --------------------------------------------------------------------

    def begin(self, s: RemoteSession, uow: bytes = b"") -> bytes:
        """R_QMEnlistRemoteTransaction (MS-MQRR 3.1.4.12) for a local transaction of this
        QM: create the transaction ``uow`` (16 bytes; empty = the server picks one)."""
        uow = uow or uuid.uuid4().bytes
        if len(uow) != 16 or uow == SINGLE_MESSAGE_UOW:
            raise _err(HResult.MQ_ERROR_INVALID_PARAMETER, "a transaction id is a 16-byte XACTUOW")
        with self._lock:
            self.check_session(s)
            if uow in s.txs or uow in s.ended_txs:
                raise _err(
                    HResult.MQ_ERROR_TRANSACTION_SEQUENCE, f"transaction {uuid.UUID(bytes=uow)} exists"
                )
            s.txs[uow] = RemoteTransaction(uow, self.qm.begin())
        return uow

    def transaction(self, s: RemoteSession, uow: bytes, *, create: bool) -> RemoteTransaction:
        """The open transaction ``uow`` of ``s``; ``create``: begin it if it is new
        (MQ_ERROR_TRANSACTION_SEQUENCE for one that ended, or any unknown one without)."""
        if len(uow) != 16:
            raise _err(HResult.MQ_ERROR_INVALID_PARAMETER, "a transaction id is a 16-byte XACTUOW")
        with self._lock:
            self.check_session(s)
            tx = s.txs.get(uow)
            if tx is not None:
                return tx
            if not create or uow in s.ended_txs:
                raise _err(
                    HResult.MQ_ERROR_TRANSACTION_SEQUENCE, f"no active transaction {uuid.UUID(bytes=uow)}"
                )
            # MS-MQRR 3.1.4.13 step 6: an unknown transaction is created (with the given
            # identifier — the spec's NULL identifier is a defect, remote-read.md §10.2).
            tx = s.txs[uow] = RemoteTransaction(uow, self.qm.begin())
            return tx

    def _end_tx(self, s: RemoteSession, uow: bytes, outcome: str) -> RemoteTransaction:
        with self._lock:
            tx = s.txs.pop(uow, None)
            if tx is None:
                raise _err(
                    HResult.MQ_ERROR_TRANSACTION_SEQUENCE, f"no active transaction {uuid.UUID(bytes=uow)}"
                )
            s.ended_txs[uow] = None
            while len(s.ended_txs) > _ENDED_MEMORY:
                s.ended_txs.popitem(last=False)
            # Set before the QM ends it: a concurrent R_EndTransactionalReceive must not
            # touch a message the transaction is deleting or releasing.
            tx.state.outcome = outcome
            self.budget.release_sends(s, tx)
        return tx

    def commit(self, s: RemoteSession, uow: bytes) -> list[int]:
        """Commit (durable on return); returns the LookupIdentifiers of the sent messages."""
        tx = self._end_tx(s, uow, "committed")
        try:
            return tx.txn.commit()
        except BaseException:
            tx.state.outcome = "aborted"
            raise

    def abort(self, s: RemoteSession, uow: bytes, *, counted: bool = True) -> None:
        """Abort: sends dropped, received messages back in place (``counted``: with their
        AbortCount one higher; False for a transaction the client began ahead and never
        handed to its application)."""
        self._end_tx(s, uow, "aborted").txn.abort(counted=counted)

    def _in_tx(self, s: RemoteSession, uow: bytes, fn: Callable[[Transaction | None], T]) -> T:
        """Run ``fn`` in no transaction, in ``uow`` (created if new), or in one of its own."""
        if not uow:
            return fn(None)
        if uow != SINGLE_MESSAGE_UOW:
            return fn(self.transaction(s, uow, create=True).txn)
        with self.qm.begin() as t:  # commit on success, abort on error
            return fn(t)

    # ---- sending -------------------------------------------------------------------------

    def send(
        self, s: RemoteSession, handle: int, messages: Sequence[MessageRecord], uow: bytes = b""
    ) -> list[tuple[int, int]]:
        """Send in one commit (no ``uow``), into transaction ``uow`` (created if new), or in
        a transaction of its own (:data:`SINGLE_MESSAGE_UOW`). Returns (uniquifier, LookupIdentifier)
        pairs; the LookupIdentifier is 0 until known (transaction, or a batch without one)."""
        if messages:
            self.limits.messages(len(messages), "messages")
        d = self.descriptor(s, handle)
        if not d.access & AccessMode.SEND:
            raise _err(HResult.MQ_ERROR_ACCESS_DENIED, f"handle {handle} was not opened for send")
        if not messages:
            return []
        qm, qh = self.qm, d.qm_handle
        if not uow:
            if len(messages) == 1:
                m = qm.send(qh, messages[0])
                return [(m.id_uniquifier, m.lookup_id)]
            return [(u, 0) for u in qm.send_many(qh, messages)]
        if uow == SINGLE_MESSAGE_UOW:
            t = qm.begin()
            try:
                uniqs = qm.send_many(qh, messages, t)
            except BaseException:
                t.abort()
                raise
            return list(zip(uniqs, t.commit(), strict=True))
        # As R_StartTransactionalReceive does (MS-MQRR 3.1.4.13 step 6), a send creates a
        # transaction it does not know yet: clients begin transactions without a round trip.
        tx = self.transaction(s, uow, create=True)
        # The transaction keeps its sends in memory until it ends: counted as pending work.
        nbytes = sum(m.size for m in messages) + SEND_OVERHEAD * len(messages)
        with self._lock:
            self.check_session(s)
            if tx.state.outcome is not None:
                raise _err(HResult.MQ_ERROR_TRANSACTION_SEQUENCE, "the transaction ended")
            self.budget.hold_sends(s, tx, nbytes)
        try:
            return [(u, 0) for u in qm.send_many(qh, messages, tx.txn)]
        except BaseException:
            with self._lock:
                self.budget.release_sends(s, tx, nbytes)
            raise

    # ---- reading -------------------------------------------------------------------------

    @contextlib.contextmanager
    def waiting(
        self, s: RemoteSession, handle: int, request_id: int, cancel: threading.Event | None
    ) -> Iterator[Waiter]:
        """A call of ``s`` that may wait, registered for the duration: closing the handle,
        ending the session or (with a non-zero ``request_id``) R_CancelReceive stops it."""
        w = Waiter(s, handle, request_id, cancel or threading.Event())
        key = (handle, request_id)
        with self._lock:
            self.check_session(s)
            if request_id:
                if key in self._waiters:
                    raise _err(HResult.MQ_ERROR_INVALID_PARAMETER, f"request {request_id} is already waiting")
                self._waiters[key] = w
            s.waiters.add(w)
        try:
            yield w
        finally:
            with self._lock:
                s.waiters.discard(w)
                if request_id and self._waiters.get(key) is w:
                    del self._waiters[key]

    def read(
        self,
        s: RemoteSession,
        handle: int,
        action: int = Action.RECEIVE,
        *,
        lookup_id: int = 0,
        cursor: int = 0,
        timeout_ms: int = 0,
        uow: bytes = b"",
        max_count: int = 1,
        request_id: int = 0,
        cancel: threading.Event | None = None,
    ) -> list[MessageRecord]:
        """R_StartReceive + R_EndReceive(RR_ACK) in one call, batched (up to ``max_count``;
        only the first message is waited for). Inside a transaction the messages are
        removed at commit. A non-zero ``request_id`` lets R_CancelReceive stop the wait."""
        self.limits.messages(max_count, "max_count")
        d = self.descriptor(s, handle)
        act = check_read(d, action, lookup_id, cursor, timeout_ms, uow, max_count)
        qm, qh = self.qm, d.qm_handle
        timeout = timeout_seconds(timeout_ms)
        with self.waiting(s, handle, request_id, cancel) as w:
            if act.is_lookup:
                seek = SEEK[act]
                if act.is_peek:
                    return [qm.peek_by_lookup_id(qh, lookup_id, seek)]
                return self._in_tx(s, uow, lambda t: [qm.receive_by_lookup_id(qh, lookup_id, seek, tx=t)])
            if cursor:
                return self._in_tx(
                    s, uow, lambda t: cursor_batch(self.qm, w, qh, act, cursor, timeout, t, max_count)
                )
            if act == Action.RECEIVE:
                return self._in_tx(
                    s,
                    uow,
                    lambda t: wait_sliced(
                        w,
                        timeout,
                        lambda x: qm.receive_many(qh, max_count, tx=t, timeout=x, max_bytes=REPLY_BYTES),
                        lambda x: qm.peek(qh, timeout=x),
                    ),
                )
            if max_count == 1:
                return [wait_sliced(w, timeout, lambda x: qm.peek(qh, timeout=x))]
            c = qm.create_cursor(qh)  # PEEK_CURRENT of several head messages: a cursor of our own
            try:
                return cursor_batch(self.qm, w, qh, Action.PEEK_CURRENT, c, timeout, None, max_count)
            finally:
                qm.close_cursor(c)

    # ---- acknowledgment class, move ------------------------------------------------------

    def set_ack_class(
        self, s: RemoteSession, handle: int, uow: bytes, lookup_id: int, message_class: int
    ) -> None:
        """R_SetUserAcknowledgementClass (MS-MQRR 3.1.4.14): 0xC004 makes the message's
        acknowledgment at commit NackReceiveRejected; 0 leaves it."""
        if message_class not in (0, NACK_RECEIVE_REJECTED):
            raise _err(HResult.MQ_ERROR_INVALID_PARAMETER, f"usClass {message_class:#x}")
        if handle:
            self.descriptor(s, handle)
        if uow:
            self.transaction(s, uow, create=False).txn.set_dequeue_reason(lookup_id, message_class)
            return
        with self._lock:
            txs = list(s.txs.values())
        for tx in txs:  # "in any transaction" (3.1.4.14)
            try:
                tx.txn.set_dequeue_reason(lookup_id, message_class)
                return
            except MQError as exc:
                if exc.hresult != HResult.MQ_ERROR_TRANSACTION_USAGE:
                    raise
        raise _err(HResult.MQ_ERROR_TRANSACTION_USAGE, f"message {lookup_id} is in no transaction")

    def move(
        self,
        s: RemoteSession,
        handle: int,
        uow: bytes,
        lookup_id: int,
        to: str,
        return_after: float | None = None,
    ) -> int:
        """R_MoveMessage (MS-MQRR 3.1.4.10): move message ``lookup_id`` of the handle's
        queue to ``to`` (one of its subqueues, the queue itself, or another subqueue of the
        same queue), inside transaction ``uow`` when one is given. The handle needs
        RECEIVE access (STATUS_ACCESS_DENIED); the rules and errors are
        :meth:`openmsmq.qm.QueueManager.move_message`'s. Returns the new
        LookupIdentifier (0 inside a transaction: known at its commit)."""
        d = self.descriptor(s, handle)
        if not d.access.can_receive:
            raise _err(HResult.STATUS_ACCESS_DENIED, "R_MoveMessage needs RECEIVE_ACCESS")
        check_name(to, "move destination")
        txn = self.transaction(s, uow, create=False).txn if uow else None
        return self.qm.move_message(d.qm_handle, lookup_id, to, txn, return_after=return_after)

    # ---- administration ------------------------------------------------------------------

    def _need(self, s: RemoteSession, queue: str, perm: Permission) -> None:
        if not s.principal.allows(queue, perm):
            raise _err(
                HResult.MQ_ERROR_ACCESS_DENIED, f"{s.principal.name} may not {quoted(perm)} {quoted(queue)}"
            )

    def create_queue(self, s: RemoteSession, path: str, **props: Any) -> QueueRecord:
        """Create a private queue (needs ADMIN on its canonical path)."""
        self._need(s, self.qm.queue_key(check_name(path)), Permission.ADMIN)
        return self.qm.create_queue(path, **props)

    def delete_queue(self, s: RemoteSession, name: str) -> None:
        """Delete a queue (needs ADMIN on it)."""
        self._need(s, self.qm.get_queue(check_name(name)).name, Permission.ADMIN)
        self.qm.delete_queue(name)

    def list_queues(self, s: RemoteSession, include_system: bool = False) -> list[QueueRecord]:
        """Every queue the caller has some permission on."""
        recs = self.qm.list_queues(include_system=include_system)
        return [r for r in recs if s.principal.permissions(r.name)]

    def queue_info(self, s: RemoteSession, name: str) -> QueueRecord:
        """One queue's properties and counts (needs some permission on it)."""
        rec = self.qm.get_queue(check_name(name))
        if not s.principal.permissions(rec.name):
            raise _err(HResult.MQ_ERROR_ACCESS_DENIED, f"{s.principal.name} has no right on {quoted(name)}")
        return rec
