"""In-process transport: the client API straight onto a :class:`~openmsmq.qm.QueueManager`.

Every connection to one data directory in a process shares one QueueManager (opened
on the first connection, closed with the last one it opened), so the share-mode
checks of MS-MQDMPR 3.1.7.1.5 step 5 see every handle of the process. A QueueManager
owned by someone else (``openmsmq serve`` embedding clients) can be given directly.
"""

from __future__ import annotations

import itertools
import os
import shlex
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from openmsmq.client.checks import check_outgoing, check_two_phase, connection_closed, too_few
from openmsmq.client.message import Message, PendingMessage
from openmsmq.client.transport import SINGLE_MESSAGE, Transport
from openmsmq.client.types import (
    INFINITE,
    Access,
    Ack,
    AckRequest,
    Delivery,
    LookupRange,
    OutgoingMessage,
    QueueInfo,
    RangeQuery,
    ReadAction,
    SendReceipt,
    ShareMode,
    TransactionId,
)
from openmsmq.errors import HResult, MQError, quoted
from openmsmq.qm import (
    MessageRecord,
    PendingReceive,
    QueueHandle,
    QueueManager,
    QueueRecord,
    QueueType,
    Transaction,
)
from openmsmq.qm.sending import refuse_subqueue
from openmsmq.remote.read_calls import SEEK
from openmsmq.remote.status import QMStatus, collect_status
from openmsmq.runtime import STORE_FILE, holds_queue_manager, take_serve_lock
from openmsmq.server.node import open_node
from openmsmq.wire.ids import ObjectId

__all__ = ["InProcessTransport", "message_from_record", "queue_info_from_record", "record_from_outgoing"]

T = TypeVar("T")

_KIND = {
    QueueType.PRIVATE: "private",
    QueueType.SYSTEM: "system",
    QueueType.JOURNAL: "journal",
    QueueType.OUTGOING: "outgoing",
    QueueType.SUBQUEUE: "subqueue",
}


# ---- value mapping ---------------------------------------------------------------------------


def message_from_record(m: MessageRecord) -> Message:
    """The public view of a stored message."""
    return Message(
        body=m.body,
        label=m.label,
        lookup_id=m.lookup_id,
        message_id=_message_id(m),
        message_class=m.message_class,
        priority=m.priority,
        correlation_id=m.correlation_id,
        app_specific=m.app_specific,
        body_type=m.body_type,
        delivery=Delivery(m.delivery) if m.delivery in (0, 1) else Delivery.EXPRESS,
        sent_time=m.sent_time,
        arrived_time=m.arrived_time,
        time_to_reach_queue=m.time_to_reach_queue,
        time_to_be_received=m.time_to_be_received,
        queue=m.destination_queue,
        admin_queue=m.admin_queue,
        response_queue=m.response_queue,
        ack=AckRequest(m.ack_flags & 0x0F),
        journal=m.positive_journaling,
        dead_letter=m.negative_journaling,
        transactional=m.transactional,
        first_in_transaction=m.first_in_transaction,
        last_in_transaction=m.last_in_transaction,
        source_machine=f"{{{m.source_machine}}}",
        extension=m.extension,
        tx_sequence_id=m.tx_sequence_id,
        tx_sequence_number=m.tx_sequence_number,
        abort_count=m.abort_count,
        move_count=m.move_count,
    )


def record_from_outgoing(m: OutgoingMessage) -> MessageRecord:
    """The QM record for a message to send (the QM assigns identity, times and position)."""
    check_outgoing(m)
    return MessageRecord(
        body=bytes(m.body),
        label=m.label,
        priority=m.priority,
        correlation_id=m.correlation_id.ljust(20, b"\0"),
        app_specific=m.app_specific,
        body_type=m.body_type,
        delivery=int(m.delivery),
        time_to_reach_queue=m.time_to_reach_queue,
        time_to_be_received=m.time_to_be_received,
        ack_flags=int(m.ack),
        positive_journaling=m.journal,
        negative_journaling=bool(m.dead_letter),
        admin_queue=m.admin_queue,
        response_queue=m.response_queue,
        extension=m.extension,
    )


def queue_info_from_record(r: QueueRecord) -> QueueInfo:
    """The public view of a queue record."""
    return QueueInfo(
        path=r.display_name,
        kind=_KIND.get(r.queue_type, str(r.queue_type)),
        transactional=r.transactional,
        label=r.label,
        quota_kb=r.quota_kb,
        journal=r.journal,
        journal_quota_kb=r.journal_quota_kb,
        private_number=r.private_number,
        created_time=r.created_time,
        modify_time=r.modify_time,
        message_count=r.msg_count,
        total_bytes=r.total_bytes,
        destination=r.destination_format_name or "",
        allowed_senders=tuple(r.allowed_senders.split(",")) if r.allowed_senders else (),
        retry_policy=r.retry_policy,
    )


# ---- shared queue managers -------------------------------------------------------------------


@dataclass(eq=False)
class _Handle:
    """An OpenQueueDescriptor of this transport (MS-MQDMPR 3.1.1.16)."""

    qm_handle: QueueHandle
    access: Access
    share: ShareMode
    cursors: set[int] = field(default_factory=set)
    pending: dict[int, PendingReceive] = field(default_factory=dict)

    @property
    def queue_id(self) -> int:
        return self.qm_handle.record.queue_id


class _Shared:
    """One QueueManager and every open handle on it in this process."""

    def __init__(self, qm: QueueManager, owned: bool) -> None:
        self.qm = qm
        self.owned = owned
        self.refs = 0
        self.lock = threading.Lock()
        self.opened: dict[int, list[_Handle]] = {}

    def register(self, h: _Handle) -> None:
        """Add a descriptor after the sharing checks of MS-MQDMPR 3.1.7.1.5 step 5."""
        with self.lock:
            others = self.opened.setdefault(h.queue_id, [])
            for o in others:
                if _conflict(o, h):
                    raise MQError(
                        HResult.MQ_ERROR_SHARING_VIOLATION,
                        f"queue {h.qm_handle.format_name} is opened with MQ_DENY_RECEIVE_SHARE",
                    )
            others.append(h)

    def unregister(self, h: _Handle) -> None:
        with self.lock:
            others = self.opened.get(h.queue_id, [])
            if h in others:
                others.remove(h)


def _conflict(existing: _Handle, request: _Handle) -> bool:
    """The sharing table of MS-MQDMPR 3.1.7.1.5 step 5."""
    if existing.share == ShareMode.DENY_RECEIVE and existing.access.can_receive:
        return request.share == ShareMode.DENY_RECEIVE or request.access.can_receive
    if existing.share == ShareMode.DENY_RECEIVE and existing.access.can_peek:
        return request.access.can_receive
    if existing.share == ShareMode.DENY_NONE and existing.access.can_receive:
        return request.share == ShareMode.DENY_RECEIVE
    return False


_registry: dict[Path, _Shared] = {}
_registry_lock = threading.Lock()


def _acquire(data_dir: Path | None, qm: QueueManager | None) -> tuple[Path, _Shared]:
    with _registry_lock:
        if qm is not None:
            key = qm.data_dir.resolve()
            shared = _registry.get(key)
            if shared is None or shared.qm is not qm:
                shared = _Shared(qm, owned=False)
                _registry[key] = shared
        else:
            assert data_dir is not None
            key = data_dir.resolve()
            shared = _registry.get(key)
            if shared is None:
                # Administration acknowledgments of receives, purges and expiry here too,
                # as under serve (FinalAcks need the session a message came in on: none).
                qm = open_node(key).qm
                shared = _Shared(qm, owned=True)
                _registry[key] = shared
        shared.refs += 1
        return key, shared


def _no_queue_manager(typed: str) -> MQError:
    """A data directory that holds no queue manager, named as the caller gave it."""
    why = f"it has no {STORE_FILE}" if Path(typed).is_dir() else "the directory does not exist"
    return MQError(
        HResult.MQ_ERROR_SERVICE_NOT_AVAILABLE,
        f"no queue manager at {quoted(typed)} ({why}): check --qm / OPENMSMQ_QM,"
        f" or create one with: openmsmq init {shlex.quote(typed)}"
        f" (or openmsmq serve --data-dir {shlex.quote(typed)})",
    )


def _release(key: Path, shared: _Shared) -> None:
    with _registry_lock:
        shared.refs -= 1
        if shared.refs > 0:
            return
        if _registry.get(key) is shared:
            del _registry[key]
    if shared.owned:
        shared.qm.close()


# ---- the transport ---------------------------------------------------------------------------


class InProcessTransport(Transport):
    """:class:`Transport` over a QueueManager in this process.

    ``InProcessTransport("/var/lib/openmsmq")`` opens (or shares) the QM of that data
    directory, creating it there unless ``create=False``;
    ``InProcessTransport(qm=manager)`` uses a QM owned by the caller.
    """

    def __init__(
        self, data_dir: str | Path | None = None, *, qm: QueueManager | None = None, create: bool = True
    ) -> None:
        if (data_dir is None) == (qm is None):
            raise ValueError("give exactly one of data_dir and qm")
        self.target = str(data_dir if data_dir is not None else qm.data_dir)  # type: ignore[union-attr]
        self.in_process = data_dir is not None  # a QM given by its owner may be served by it
        if data_dir is not None and not create and not holds_queue_manager(data_dir):
            raise _no_queue_manager(str(data_dir))
        self._key, self._shared = _acquire(Path(data_dir) if data_dir is not None else None, qm)
        self.qm = self._shared.qm
        self._lock = threading.Lock()
        self._closed = False
        self._handles: dict[int, _Handle] = {}
        self._txs: dict[TransactionId, Transaction] = {}
        self._ids = itertools.count(1)

    # ---- helpers -------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise connection_closed()

    def _handle(self, handle: int) -> _Handle:
        self._check_open()
        h = self._handles.get(handle)
        if h is None:
            raise MQError(HResult.MQ_ERROR_INVALID_HANDLE, f"no queue handle {handle}")
        return h

    def _tx(self, tx: TransactionId) -> Transaction:
        self._check_open()
        t = self._txs.get(tx)
        if t is None:
            raise MQError(HResult.MQ_ERROR_TRANSACTION_SEQUENCE, f"no active transaction {tx}")
        return t

    def _in_tx(self, tx: TransactionId | None, fn: Callable[[Transaction | None], T]) -> T:
        """Run ``fn`` in ``tx``, in no transaction, or in one of its own (SINGLE_MESSAGE)."""
        if tx is None:
            return fn(None)
        if tx != SINGLE_MESSAGE:
            return fn(self._tx(tx))
        t = self.qm.begin()
        with t:  # commit on success, abort on error
            return fn(t)

    @staticmethod
    def _need(h: _Handle, ok: bool, what: str) -> None:
        if not ok:
            raise MQError(
                HResult.MQ_ERROR_ACCESS_DENIED, f"queue {h.qm_handle.format_name} was not opened for {what}"
            )

    # ---- administration ------------------------------------------------------------------

    def create_queue(
        self,
        path: str,
        *,
        transactional: bool = False,
        label: str = "",
        quota_kb: int | None = None,
        journal: bool = False,
        journal_quota_kb: int = INFINITE,
        allowed_senders: Sequence[str] = (),
    ) -> QueueInfo:
        self._check_open()
        rec = self.qm.create_queue(
            path,
            transactional=transactional,
            label=label,
            quota_kb=quota_kb,
            journal=journal,
            journal_quota_kb=journal_quota_kb,
            allowed_senders=allowed_senders,
        )
        return queue_info_from_record(rec)

    def delete_queue(self, name: str) -> None:
        self._check_open()
        self.qm.delete_queue(name)

    def list_queues(self, *, include_system: bool = False) -> list[QueueInfo]:
        self._check_open()
        return [queue_info_from_record(r) for r in self.qm.list_queues(include_system=include_system)]

    def queue_info(self, name: str) -> QueueInfo:
        self._check_open()
        return queue_info_from_record(self.qm.get_queue(name))

    def set_queue_properties(self, name: str, **changes: Any) -> QueueInfo:
        self._check_open()
        if self.qm.get_queue(name).queue_type != QueueType.PRIVATE:
            raise MQError(
                HResult.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION,
                f"{quoted(name)} is not a private queue: only those have settable properties",
            )
        if changes:
            self.qm.set_queue_properties(name, **changes)
        return queue_info_from_record(self.qm.get_queue(name))

    def set_outgoing_state(self, format_name: str, suspended: bool) -> QueueInfo:
        self._check_open()
        raise MQError(
            HResult.MQ_ERROR_SERVICE_NOT_AVAILABLE,
            f"no MS-MQQB transfer runs on this store: {'suspending' if suspended else 'resuming'}"
            f" {quoted(format_name)} acts on a running queue manager ('openmsmq serve'), and"
            " lasts until it stops",
        )

    # ---- handles -------------------------------------------------------------------------

    def open_queue(self, name: str, access: Access, share: ShareMode = ShareMode.DENY_NONE) -> int:
        self._check_open()
        access = Access(access)
        if not access or access & ~(Access.SEND | Access.RECEIVE | Access.PEEK):
            raise MQError(HResult.MQ_ERROR_UNSUPPORTED_ACCESS_MODE, f"access {int(access):#x}")
        if share == ShareMode.DENY_RECEIVE and not access.can_peek:
            # MQ_DENY_RECEIVE_SHARE is meaningful only for reading handles (MS-MQRR 3.1.4.2).
            raise MQError(
                HResult.MQ_ERROR_UNSUPPORTED_ACCESS_MODE, "deny-receive needs receive or peek access"
            )
        if access.can_send:
            refuse_subqueue(name)  # nothing is sent to a subqueue: refused at open, as MSMQ does
            qh = self.qm.open_queue(name)
        else:
            # Reading never creates an outgoing queue (MS-MQDMPR 3.1.7.1.5 step 4).
            rec = self.qm.get_queue(name)
            if rec.queue_type == QueueType.OUTGOING:
                raise _remote_read(name)
            qh = self.qm.open_queue(name)
        if qh.record.queue_type == QueueType.OUTGOING and access.can_peek:
            raise _remote_read(name)
        h = _Handle(qh, access, ShareMode(share))
        self._shared.register(h)
        with self._lock:
            number = next(self._ids)
            self._handles[number] = h
        return number

    def close_queue(self, handle: int) -> None:
        h = self._handle(handle)
        with self._lock:
            self._handles.pop(handle, None)
        self._rundown(h)

    def _rundown(self, h: _Handle) -> None:
        """Close cursors and NACK pending receives of a closed handle (MS-MQRR 3.1.6)."""
        self._shared.unregister(h)
        for pending in list(h.pending.values()):
            try:
                self.qm.dequeue_end(pending, delete=False)
            except MQError:
                continue  # already ended, or the queue is gone: nothing to put back
        h.pending.clear()
        for c in list(h.cursors):
            try:
                self.qm.close_cursor(c)
            except MQError:
                continue
        h.cursors.clear()

    def create_cursor(self, handle: int) -> int:
        h = self._handle(handle)
        self._need(h, h.access.can_peek, "receive or peek")
        c = self.qm.create_cursor(h.qm_handle)
        h.cursors.add(c)
        return c

    def close_cursor(self, handle: int, cursor: int) -> None:
        h = self._handle(handle)
        if cursor not in h.cursors:
            raise MQError(HResult.MQ_ERROR_INVALID_HANDLE, f"no cursor {cursor} on this handle")
        h.cursors.discard(cursor)
        self.qm.close_cursor(cursor)

    # ---- messages ------------------------------------------------------------------------

    def purge(self, handle: int) -> int:
        h = self._handle(handle)
        self._need(h, h.access.can_receive, "receive (purge needs it)")
        return self.qm.purge_queue(h.qm_handle)

    def purge_outgoing(self, format_name: str) -> int:
        """Purge the outgoing queue to ``format_name``. Over a data directory this process
        opened, the directory's serve lock is held meanwhile: refused when a running
        ``openmsmq serve`` holds it, and no ``serve`` starts during the purge."""
        self._check_open()
        if not self._shared.owned:
            return self._purge_outgoing(format_name)
        try:
            fd = take_serve_lock(self._key)
        except OSError as exc:  # the lock file cannot be made: nor can the purge write
            raise MQError(
                HResult.MQ_ERROR_UNSUPPORTED_OPERATION,
                f"cannot take the serve lock of {self.target}: {exc.strerror or exc}",
            ) from exc
        if fd is None:
            raise MQError(
                HResult.MQ_ERROR_UNSUPPORTED_OPERATION,
                f"{self.target} is served by a running openmsmq serve: stop it to purge an outgoing queue",
            )
        try:
            return self._purge_outgoing(format_name)
        finally:
            os.close(fd)  # releases the lock

    def _purge_outgoing(self, format_name: str) -> int:
        info = self.qm.get_queue(format_name)
        if info.queue_type != QueueType.OUTGOING:
            raise MQError(
                HResult.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION,
                f"{quoted(format_name)} is not an outgoing queue of this queue manager"
                " (purge a local queue by its name)",
            )
        return self.qm.purge_queue(format_name)

    def send(
        self, handle: int, messages: Sequence[OutgoingMessage], tx: TransactionId | None = None
    ) -> list[SendReceipt]:
        h = self._handle(handle)
        self._need(h, h.access.can_send, "send")
        if not messages:
            return []
        records = [record_from_outgoing(m) for m in messages]
        if tx == SINGLE_MESSAGE:
            t = self.qm.begin()
            try:
                uniqs = self.qm.send_many(h.qm_handle, records, t)
            except BaseException:
                t.abort()
                raise
            lookup_ids = t.commit()
            return [self._receipt(u, lid) for u, lid in zip(uniqs, lookup_ids, strict=True)]
        if tx is not None:
            return [self._receipt(u) for u in self.qm.send_many(h.qm_handle, records, self._tx(tx))]
        if len(records) == 1:
            m = self.qm.send(h.qm_handle, records[0])
            return [SendReceipt(_message_id(m), m.lookup_id)]
        # The QM reports only Identifiers for a batch; LookupIdentifiers stay 0.
        return [self._receipt(u) for u in self.qm.send_many(h.qm_handle, records)]

    def _receipt(self, uniquifier: int, lookup_id: int = 0) -> SendReceipt:
        """Identifier = (this QM's GUID, uniquifier) (MS-MQMQ 2.2.8)."""
        return SendReceipt(str(ObjectId(self.qm.guid, uniquifier)), lookup_id)

    def _check_read(
        self, h: _Handle, action: ReadAction, lookup_id: int, cursor: int, tx: TransactionId | None, n: int
    ) -> None:
        """Parameter validity of MS-MQRR 3.1.4.7 (remote-read.md §3) and access checks."""
        if n < 1:
            raise too_few("max_count", n)
        if action.is_peek:
            self._need(h, h.access.can_peek, "peek")
            if tx is not None:
                raise MQError(HResult.MQ_ERROR_TRANSACTION_USAGE, "a peek cannot be part of a transaction")
        else:
            self._need(h, h.access.can_receive, "receive")
        if action.is_lookup:
            if cursor or n != 1:
                raise MQError(HResult.MQ_ERROR_INVALID_PARAMETER, "lookup reads take no cursor and no batch")
        elif lookup_id:
            raise MQError(HResult.MQ_ERROR_INVALID_PARAMETER, "LookupId is only for MQ_LOOKUP_* actions")
        if action == ReadAction.PEEK_NEXT and not cursor:
            raise MQError(HResult.MQ_ERROR_ILLEGAL_CURSOR_ACTION, "MQ_ACTION_PEEK_NEXT needs a cursor")
        if cursor and cursor not in h.cursors:
            raise MQError(HResult.STATUS_INVALID_HANDLE, f"no cursor {cursor} on this handle")

    def read(
        self,
        handle: int,
        action: ReadAction = ReadAction.RECEIVE,
        *,
        lookup_id: int = 0,
        cursor: int = 0,
        timeout: float | None = 0.0,
        tx: TransactionId | None = None,
        max_count: int = 1,
    ) -> list[Message]:
        h = self._handle(handle)
        action = ReadAction(action)
        self._check_read(h, action, lookup_id, cursor, tx, max_count)
        qm, qh = self.qm, h.qm_handle
        if action.is_lookup:
            seek = SEEK[action]
            if action.is_peek:
                return [message_from_record(qm.peek_by_lookup_id(qh, lookup_id, seek))]
            return self._in_tx(
                tx, lambda t: [message_from_record(qm.receive_by_lookup_id(qh, lookup_id, seek, tx=t))]
            )
        if cursor:
            return self._in_tx(tx, lambda t: self._cursor_batch(h, action, cursor, timeout, t, max_count))
        if action == ReadAction.RECEIVE:
            return self._in_tx(
                tx,
                lambda t: [
                    message_from_record(m) for m in qm.receive_many(qh, max_count, tx=t, timeout=timeout)
                ],
            )
        # PEEK_CURRENT of up to max_count head messages: browse with a cursor of our own.
        if max_count == 1:
            return [message_from_record(qm.peek(qh, timeout=timeout))]
        c = qm.create_cursor(qh)
        try:
            return self._cursor_batch(h, ReadAction.PEEK_CURRENT, c, timeout, None, max_count)
        finally:
            qm.close_cursor(c)

    def _cursor_batch(
        self,
        h: _Handle,
        action: ReadAction,
        cursor: int,
        timeout: float | None,
        t: Transaction | None,
        n: int,
    ) -> list[Message]:
        """Up to ``n`` reads through a cursor; only the first waits."""
        records = self.qm.read_through_cursor(
            h.qm_handle,
            cursor,
            n,
            receive=action == ReadAction.RECEIVE,
            advance=action == ReadAction.PEEK_NEXT,
            tx=t,
            timeout=timeout,
        )
        return [message_from_record(r) for r in records]

    def start_receive(
        self,
        handle: int,
        action: ReadAction = ReadAction.RECEIVE,
        *,
        lookup_id: int = 0,
        timeout: float | None = 0.0,
        tx: TransactionId | None = None,
    ) -> PendingMessage:
        h = self._handle(handle)
        action = check_two_phase(action)
        if tx == SINGLE_MESSAGE:
            raise MQError(HResult.MQ_ERROR_TRANSACTION_USAGE, "a two-phase receive needs a real transaction")
        self._check_read(h, action, lookup_id, 0, tx, 1)
        t = self._tx(tx) if tx is not None else None
        if action.is_lookup:
            pending = self.qm.dequeue_begin(h.qm_handle, tx=t, lookup_id=lookup_id, action=SEEK[action])
        else:
            pending = self.qm.dequeue_begin(h.qm_handle, tx=t, timeout=timeout)
        with self._lock:
            request_id = next(self._ids)
            h.pending[request_id] = pending
        return PendingMessage(request_id, message_from_record(pending.message), t is not None)

    def end_receive(self, handle: int, request_id: int, ack: Ack, transactional: bool | None = None) -> None:
        h = self._handle(handle)
        if not h.pending:
            raise MQError(HResult.MQ_ERROR_INVALID_HANDLE, "no pending receive on this handle")
        with self._lock:
            pending = h.pending.get(request_id)
            if pending is None:
                raise MQError(HResult.MQ_ERROR_INVALID_PARAMETER, f"no pending receive {request_id}")
            if transactional is not None and transactional != (pending.transaction is not None):
                # As the remote-read server (TwoPhaseReceives.end_receive): the other method
                # than the one that matches is refused, the receive stays pending.
                which = "R_EndTransactionalReceive" if transactional else "R_EndReceive"
                raise MQError(HResult.MQ_ERROR_TRANSACTION_USAGE, f"{which} for receive {request_id}")
            del h.pending[request_id]
        self.qm.dequeue_end(pending, delete=Ack(ack) == Ack.ACK)

    def set_ack_class(self, tx: TransactionId, lookup_id: int, message_class: int) -> None:
        self._tx(tx).set_dequeue_reason(lookup_id, message_class)

    def move_message(
        self,
        handle: int,
        lookup_id: int,
        to: str,
        tx: TransactionId | None = None,
        return_after: float | None = None,
    ) -> int:
        h = self._handle(handle)
        self._need(h, h.access.can_receive, "receive (a move needs it)")
        txn = None if tx is None else self._tx(tx)
        return self.qm.move_message(h.qm_handle, lookup_id, to, txn, return_after=return_after)

    # ---- LookupIdentifier ranges ----------------------------------------------------------

    def lookup_ranges(
        self, queries: Sequence[RangeQuery], *, with_bytes: bool = False
    ) -> list[LookupRange | None]:
        self._check_open()
        if all(q.after == 0 and q.through is None for q in queries):
            found = self.qm.lookup_ranges([q.queue for q in queries], with_bytes)
            got = [found[q.queue] for q in queries]
        else:
            got = [self.qm.lookup_range(q.queue, q.after, q.through, with_bytes) for q in queries]
        return [None if r is None else LookupRange(r.first, r.last, r.count, r.bytes) for r in got]

    def nth_lookup_id(self, queue: str, after: int, n: int, through: int | None = None) -> int:
        self._check_open()
        if n < 1:
            raise too_few("n", n)
        return self.qm.nth_lookup_id(queue, after, n, through)

    def peek_range(
        self, queue: str, after: int = 0, through: int | None = None, max_count: int = 1000
    ) -> list[Message]:
        self._check_open()
        if max_count < 1:
            raise too_few("max_count", max_count)
        self._local(queue)
        return [message_from_record(m) for m in self.qm.peek_range(queue, after, max_count, through)]

    def remove_through(self, positions: Mapping[str, int]) -> int:
        self._check_open()
        for queue in positions:
            self._local(queue)
        targets: dict[str | QueueHandle, int] = {q: p for q, p in positions.items()}
        return self.qm.remove_through(targets)

    def send_idempotent(
        self, queue: str, messages: Sequence[OutgoingMessage], identities: Sequence[str]
    ) -> list[int | None]:
        self._check_open()
        if not messages:
            return []
        return self.qm.send_idempotent(queue, [record_from_outgoing(m) for m in messages], identities)

    def _local(self, queue: str) -> None:
        """Range reads and removal apply to this QM's queues (not outgoing ones)."""
        if self.qm.get_queue(queue).queue_type == QueueType.OUTGOING:
            raise _remote_read(queue)

    # ---- status ---------------------------------------------------------------------------

    def status(self) -> QMStatus:
        """Stored state only: this process opened the store, so no transfer runs on it."""
        self._check_open()
        # LastAccessTime is stored on the transfer driver's (monotonic) clock.
        return collect_status(self.qm, time.time(), clock_offset=time.time() - time.monotonic())

    def reset_incoming_sequence(
        self, source_qm: str, destination: str, tx_sequence_id: int, tx_sequence_number: int
    ) -> tuple[tuple[int, int], tuple[int, int]]:
        """The stored state (no transfer runs on a store this process opened)."""
        self._check_open()
        try:
            source = uuid.UUID(source_qm)
        except ValueError:
            raise MQError(HResult.MQ_ERROR_INVALID_PARAMETER, f"{source_qm!r} is not a QM GUID") from None
        found = [
            s for s in self.qm.incoming_sequences()
            if s.sender_qm == source and s.destination.lower() == destination.lower()
        ]  # fmt: skip
        if not found:
            raise MQError(
                HResult.MQ_ERROR_INVALID_PARAMETER,
                f"no incoming sequence of QM {source_qm} for {destination}",
            )
        state = found[0]
        before = (state.tx_sequence_id, state.tx_sequence_number)
        if (tx_sequence_id, tx_sequence_number) == (0, 0):
            self.qm.update_incoming_sequences([state])
        else:
            new = replace(
                state, tx_sequence_id=tx_sequence_id, tx_sequence_number=tx_sequence_number, reject_count=0,
                last_access_time=time.time(),
            )  # fmt: skip
            self.qm.update_incoming_sequences([], [(state, new)])
        return before, (tx_sequence_id, tx_sequence_number)

    # ---- transactions --------------------------------------------------------------------

    def begin(self) -> TransactionId:
        self._check_open()
        tid = TransactionId()
        t = self.qm.begin()
        with self._lock:
            self._txs[tid] = t
        return tid

    def commit(self, tx: TransactionId) -> None:
        t = self._tx(tx)
        with self._lock:
            self._txs.pop(tx, None)
        t.commit()

    def abort(self, tx: TransactionId) -> None:
        t = self._tx(tx)
        with self._lock:
            self._txs.pop(tx, None)
        t.abort()

    # ---- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            handles = list(self._handles.values())
            txs = list(self._txs.values())
            self._handles.clear()
            self._txs.clear()
        for h in handles:
            self._rundown(h)
        for t in txs:
            try:
                t.abort()
            except MQError:
                continue  # ended concurrently
        _release(self._key, self._shared)


def _message_id(m: MessageRecord) -> str:
    return str(ObjectId(m.id_lineage, m.id_uniquifier))


def _remote_read(name: str) -> MQError:
    return MQError(
        HResult.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION,
        f"{quoted(name)} is a remote queue: reading it needs the remote-read (grpc://) transport",
    )
