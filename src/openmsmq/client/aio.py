"""The asyncio application API: the same surface as :mod:`openmsmq.client`, awaitable.

::

    from openmsmq.client import aio

    async with await aio.connect("./data") as conn:
        q = await conn.open_queue("private$\\orders")
        async with conn.transaction() as tx:
            msg = await q.receive(timeout=5, tx=tx)

Calls run the blocking transport in a worker thread (``asyncio.to_thread``), one hop
per call: a batch (``send_many``, ``receive_many``, ``iter_receive``) is one hop.

Cancellation. A waiting receive is cancellation-safe: single receives use the two-phase
receive of MS-MQRR (R_StartReceive, then R_EndReceive), and a message locked by a
cancelled wait is NACKed (put back). Waits run in slices of :data:`WAIT_SLICE` seconds
so a cancelled call frees its worker thread soon. ``receive_many`` waits with a peek
and then takes the batch without waiting; a cancellation that lands during that short
take behaves like a crash after a non-transactional receive (the batch is gone) — use a
transaction when that matters: an aborted transaction puts everything back.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, TypeVar

from openmsmq.client.connection import RECEIVE_SEEK, Body, Cursor, Queue, Seek, open_transport, tx_id_of
from openmsmq.client.message import Message, PendingMessage
from openmsmq.client.selection import hinting, open_handle, queue_name
from openmsmq.client.transport import Transport
from openmsmq.client.types import (
    INFINITE,
    Access,
    Ack,
    OutgoingMessage,
    QueueInfo,
    ReadAction,
    SendReceipt,
    ShareMode,
    TransactionId,
)
from openmsmq.errors import HResult, MQError

__all__ = ["WAIT_SLICE", "AsyncConnection", "AsyncCursor", "AsyncQueue", "AsyncTransaction", "connect"]

T = TypeVar("T")

#: Longest single blocking wait (seconds) a worker thread makes for an async receive.
WAIT_SLICE = 1.0


def _tid(tx: AsyncTransaction | TransactionId | None) -> TransactionId | None:
    if isinstance(tx, AsyncTransaction):
        return tx.id
    return tx_id_of(tx)


async def connect(target: str | Path | Transport, *, create: bool = True) -> AsyncConnection:
    """Connect (see :func:`openmsmq.connect`, also for ``create``); opening runs in a
    worker thread."""
    if isinstance(target, Transport):
        return AsyncConnection(target)
    return AsyncConnection(await asyncio.to_thread(open_transport, target, create=create))


async def _sliced(op: Callable[[float], Any], timeout: float | None) -> Any:
    """Run ``op(wait)`` in worker threads, ``wait`` <= WAIT_SLICE, until it succeeds or
    ``timeout`` (None = forever) passes; IOTimeoutError then."""
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + max(0.0, timeout)
    while True:
        remaining = None if deadline is None else max(0.0, deadline - loop.time())
        wait = WAIT_SLICE if remaining is None else min(WAIT_SLICE, remaining)
        try:
            return await op(wait)
        except MQError as exc:
            if exc.hresult != HResult.MQ_ERROR_IO_TIMEOUT:
                raise
            if remaining is not None and remaining <= WAIT_SLICE:
                raise


class AsyncTransaction:
    """``async with conn.transaction() as tx:`` — begins on entry, commits on normal exit,
    aborts on exception (cancellation included)."""

    def __init__(self, transport: Transport, tx_id: TransactionId | None = None) -> None:
        self._transport = transport
        self._id = tx_id
        #: ``"new"``, ``"active"``, ``"committed"`` or ``"aborted"``.
        self.state = "new" if tx_id is None else "active"

    @property
    def id(self) -> TransactionId:
        """The transaction's XACTUOW (begun)."""
        if self._id is None:
            raise MQError(HResult.MQ_ERROR_TRANSACTION_SEQUENCE, "transaction not begun")
        return self._id

    async def begin(self) -> AsyncTransaction:
        """Begin (done by ``async with``)."""
        if self._id is None:
            self._id = self._transport.begin()  # no I/O (Transport.begin): no worker thread
            self.state = "active"
        return self

    async def commit(self) -> None:
        """Commit: durable when this returns."""
        try:
            await asyncio.to_thread(self._transport.commit, self.id)
        except BaseException:
            self.state = "aborted"
            raise
        self.state = "committed"

    async def abort(self) -> None:
        """Abort: sends dropped, received messages back in place."""
        self.state = "aborted"
        await asyncio.to_thread(self._transport.abort, self.id)

    async def __aenter__(self) -> AsyncTransaction:
        return await self.begin()

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        if self.state != "active":
            return
        if exc_type is None:
            await self.commit()
        else:
            # Shielded: a cancelled task must still give its locked messages back.
            with contextlib.suppress(MQError):
                await asyncio.shield(asyncio.to_thread(self._transport.abort, self.id))
            self.state = "aborted"


class AsyncCursor:
    """A cursor (see :class:`openmsmq.client.Cursor`, which each call runs in a worker
    thread); ``async with`` closes it."""

    def __init__(self, queue: AsyncQueue, number: int) -> None:
        self.queue = queue
        self.number = number
        self._cursor = Cursor(queue.sync, number)
        self._closed = False

    async def peek_current(self, timeout: float | None = 0.0) -> Message:
        """MQ_ACTION_PEEK_CURRENT at the cursor."""
        return await asyncio.to_thread(self._cursor.peek_current, timeout)

    async def peek_next(self, timeout: float | None = 0.0) -> Message:
        """MQ_ACTION_PEEK_NEXT: advance, then peek."""
        return await asyncio.to_thread(self._cursor.peek_next, timeout)

    async def peek_many(self, n: int, timeout: float | None = 0.0) -> list[Message]:
        """Up to ``n`` messages from the cursor on, one hop."""
        return await asyncio.to_thread(self._cursor.peek_many, n, timeout)

    async def receive_current(
        self, timeout: float | None = 0.0, tx: AsyncTransaction | TransactionId | None = None
    ) -> Message:
        """MQ_ACTION_RECEIVE at the cursor."""
        return await asyncio.to_thread(self._cursor.receive_current, timeout, _tid(tx))

    async def close(self) -> None:
        """Close the cursor (idempotent)."""
        if not self._closed:
            self._closed = True
            await asyncio.to_thread(self._cursor.close)

    async def __aenter__(self) -> AsyncCursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncQueue:
    """An open queue handle (see :class:`openmsmq.client.Queue`). A call that cannot wait
    runs that Queue's method in a worker thread; the waiting receives and peeks are this
    class's own (cancellation, :data:`WAIT_SLICE`)."""

    def __init__(
        self, transport: Transport, name: str, handle: int, access: Access, share: ShareMode
    ) -> None:
        #: The blocking handle under this one.
        self.sync = Queue(transport, name, handle, access, share)
        self._transport = transport
        self.name, self.handle, self.access, self.share = name, handle, access, share
        self._closed = False

    async def _call(self, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        return await asyncio.to_thread(fn, *args, **kw)

    # ---- sending ---------------------------------------------------------------------------

    async def send(
        self,
        body: Body | OutgoingMessage = b"",
        label: str | None = None,
        *,
        tx: AsyncTransaction | TransactionId | None = None,
        **props: Any,
    ) -> SendReceipt:
        """Send one message."""
        return await self._call(self.sync.send, body, label, tx=_tid(tx), **props)

    async def send_many(
        self,
        bodies: Iterable[Body | OutgoingMessage],
        *,
        tx: AsyncTransaction | TransactionId | None = None,
        **props: Any,
    ) -> list[SendReceipt]:
        """Send many messages in one hop and one commit."""
        return await self._call(self.sync.send_many, bodies, tx=_tid(tx), **props)

    # ---- receiving -------------------------------------------------------------------------

    async def _start_guarded(self, wait: float, tx: TransactionId | None, **kw: Any) -> PendingMessage:
        """start_receive in a thread; if the caller is cancelled, NACK what it locked."""
        loop = asyncio.get_running_loop()
        fut = asyncio.ensure_future(
            asyncio.to_thread(self._transport.start_receive, self.handle, timeout=wait, tx=tx, **kw)
        )

        def undo(f: asyncio.Future[PendingMessage]) -> None:
            if f.cancelled() or f.exception() is not None:
                return
            loop.run_in_executor(None, self._nack_quietly, f.result())

        try:
            return await asyncio.shield(fut)
        except asyncio.CancelledError:
            fut.add_done_callback(undo)
            raise

    def _nack_quietly(self, pending: PendingMessage) -> None:
        with contextlib.suppress(MQError):
            self._transport.end_receive(self.handle, pending.request_id, Ack.NACK, pending.transactional)

    async def start_receive(
        self,
        timeout: float | None = None,
        tx: AsyncTransaction | TransactionId | None = None,
        *,
        lookup_id: int | None = None,
        action: Seek = Seek.CURRENT,
    ) -> PendingMessage:
        """First phase of a receive (see :meth:`openmsmq.client.Queue.start_receive`)."""
        tid = _tid(tx)
        if lookup_id is None and tid is not None:
            ready = self._transport.ready_receive(self.handle, tid)
            if ready is not None:  # held by the transport already: no worker thread
                return ready
        if lookup_id is not None:
            return await self._start_guarded(0.0, tid, action=RECEIVE_SEEK[Seek(action)], lookup_id=lookup_id)
        result: PendingMessage = await _sliced(lambda wait: self._start_guarded(wait, tid), timeout)
        return result

    async def end_receive(self, pending: PendingMessage, ack: Ack | bool = Ack.ACK) -> None:
        """ACK or NACK a pending receive."""
        if isinstance(ack, bool):
            ack = Ack.ACK if ack else Ack.NACK
        if self._transport.hold_end(self.handle, pending.request_id, ack, pending.transactional):
            return  # carried by the commit: no worker thread
        await self._call(
            self._transport.end_receive, self.handle, pending.request_id, ack, pending.transactional
        )

    async def receive(
        self, timeout: float | None = None, tx: AsyncTransaction | TransactionId | None = None
    ) -> Message:
        """Receive the first message; cancellation while waiting puts nothing at risk."""
        pending = await self.start_receive(timeout, tx)
        await asyncio.shield(self.end_receive(pending, Ack.ACK))
        return pending.message

    async def _wait_available(self, timeout: float | None) -> None:
        async def peek(wait: float) -> None:
            await self._call(self._transport.read, self.handle, ReadAction.PEEK_CURRENT, timeout=wait)

        await _sliced(peek, timeout)

    async def receive_many(
        self, n: int, timeout: float | None = None, tx: AsyncTransaction | TransactionId | None = None
    ) -> list[Message]:
        """Receive up to ``n`` messages in one hop (waits ``timeout`` for the first only)."""
        tid = _tid(tx)
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + max(0.0, timeout)
        while True:
            try:
                result: list[Message] = await asyncio.shield(
                    self._call(
                        self._transport.read,
                        self.handle,
                        ReadAction.RECEIVE,
                        timeout=0.0,
                        tx=tid,
                        max_count=n,
                    )
                )
                return result
            except MQError as exc:
                if exc.hresult != HResult.MQ_ERROR_IO_TIMEOUT:
                    raise
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                raise MQError(HResult.MQ_ERROR_IO_TIMEOUT, f"no message in {self.name}")
            await self._wait_available(remaining)

    async def peek(self, timeout: float | None = None) -> Message:
        """The first message, without removing it."""

        async def op(wait: float) -> list[Message]:
            return await self._call(self._transport.read, self.handle, ReadAction.PEEK_CURRENT, timeout=wait)

        result: list[Message] = await _sliced(op, timeout)
        return result[0]

    async def peek_many(self, n: int, timeout: float | None = 0.0) -> list[Message]:
        """Up to ``n`` head messages without removing them, one hop."""
        if timeout:
            await self._wait_available(timeout)
        return await self._call(
            self._transport.read, self.handle, ReadAction.PEEK_CURRENT, timeout=0.0, max_count=n
        )

    async def iter_receive(
        self,
        batch: int = 100,
        timeout: float | None = None,
        tx: AsyncTransaction | TransactionId | None = None,
    ) -> AsyncIterator[Message]:
        """``async for msg in q.iter_receive(batch=100, timeout=1):`` — one hop per batch;
        stops when a wait of ``timeout`` finds nothing (None: never)."""
        while True:
            try:
                msgs = await self.receive_many(batch, timeout, tx)
            except MQError as exc:
                if exc.hresult == HResult.MQ_ERROR_IO_TIMEOUT:
                    return
                raise
            for m in msgs:
                yield m

    async def peek_by_lookup_id(self, lookup_id: int, action: Seek = Seek.CURRENT) -> Message:
        """MQ_LOOKUP_PEEK_* (MessageNotFoundError when there is none)."""
        return await self._call(self.sync.peek_by_lookup_id, lookup_id, action)

    async def receive_by_lookup_id(
        self, lookup_id: int, action: Seek = Seek.CURRENT, tx: AsyncTransaction | TransactionId | None = None
    ) -> Message:
        """MQ_LOOKUP_RECEIVE_* (in ``tx`` or not)."""
        return await self._call(self.sync.receive_by_lookup_id, lookup_id, action, _tid(tx))

    async def peek_by_id(self, message_id: str | bytes) -> Message:
        """The message with this MessageId, not removed (see :meth:`openmsmq.client.Queue.peek_by_id`)."""
        return await self._call(self.sync.peek_by_id, message_id)

    async def receive_by_id(
        self, message_id: str | bytes, tx: AsyncTransaction | TransactionId | None = None
    ) -> Message:
        """Receive the message with this MessageId (MessageNotFoundError when there is none)."""
        return await self._call(self.sync.receive_by_id, message_id, _tid(tx))

    async def peek_by_correlation_id(self, correlation_id: str | bytes) -> Message:
        """The first message with this CorrelationId, not removed."""
        return await self._call(self.sync.peek_by_correlation_id, correlation_id)

    async def receive_by_correlation_id(
        self, correlation_id: str | bytes, tx: AsyncTransaction | TransactionId | None = None
    ) -> Message:
        """Receive the first message with this CorrelationId (MessageNotFoundError when none)."""
        return await self._call(self.sync.receive_by_correlation_id, correlation_id, _tid(tx))

    async def reject(self, message: Message, tx: AsyncTransaction | TransactionId) -> None:
        """Mark a message received in ``tx`` as rejected (NACK_RECEIVE_REJECTED at commit)."""
        await self._call(self.sync.reject, message, _tid(tx))

    async def move(
        self,
        lookup_id: int,
        to: str,
        *,
        tx: AsyncTransaction | TransactionId | None = None,
        return_after: float | None = None,
    ) -> int:
        """Move Message: see :meth:`openmsmq.client.Queue.move`."""
        return await self._call(self.sync.move, lookup_id, to, tx=_tid(tx), return_after=return_after)

    # ---- cursors, purge, properties --------------------------------------------------------

    async def cursor(self) -> AsyncCursor:
        """A new cursor (``async with await q.cursor() as c:``)."""
        return AsyncCursor(self, await self._call(self._transport.create_cursor, self.handle))

    async def purge(self) -> int:
        """Delete every available message; returns how many."""
        return await self._call(self.sync.purge)

    async def info(self) -> QueueInfo:
        """Properties and counts."""
        return await self._call(self.sync.info)

    async def close(self) -> None:
        """Close the handle (idempotent)."""
        if not self._closed:
            self._closed = True
            await self._call(self._transport.close_queue, self.handle)

    async def __aenter__(self) -> AsyncQueue:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncConnection:
    """A connection (see :class:`openmsmq.client.Connection`); ``async with`` closes it."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    async def open_queue(
        self,
        name: str,
        access: Access | None = None,
        share: ShareMode = ShareMode.DENY_NONE,
    ) -> AsyncQueue:
        """Open a queue by path or format name (see :meth:`openmsmq.client.Connection.open_queue`:
        ``FormatName:`` accepted; default access send and receive, send for another QM's queue)."""
        name, handle, opened = await asyncio.to_thread(open_handle, self.transport, name, access, share)
        return AsyncQueue(self.transport, name, handle, opened, ShareMode(share))

    async def create_queue(
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
        """Create a private queue (``allowed_senders``: see :meth:`Connection.create_queue`)."""
        return await asyncio.to_thread(
            self.transport.create_queue,
            queue_name(path),
            transactional=transactional,
            label=label,
            quota_kb=quota_kb,
            journal=journal,
            journal_quota_kb=journal_quota_kb,
            allowed_senders=allowed_senders,
        )

    async def delete_queue(self, name: str) -> None:
        """Delete a queue and its messages."""
        await asyncio.to_thread(self.transport.delete_queue, queue_name(name))

    async def list_queues(self, *, include_system: bool = False) -> list[QueueInfo]:
        """Private queues (and system ones when asked)."""
        return await asyncio.to_thread(self.transport.list_queues, include_system=include_system)

    async def queue_info(self, name: str) -> QueueInfo:
        """Properties and counts of a queue."""
        return await asyncio.to_thread(self.transport.queue_info, queue_name(name))

    async def set_queue_properties(self, name: str, **changes: Any) -> QueueInfo:
        """Change properties of a private queue (see
        :meth:`openmsmq.client.Connection.set_queue_properties`)."""

        def call() -> QueueInfo:
            with hinting(queue_name(name)):
                return self.transport.set_queue_properties(queue_name(name), **changes)

        return await asyncio.to_thread(call)

    async def purge_outgoing(self, format_name: str) -> int:
        """Purge this QM's outgoing queue to ``format_name`` (see
        :meth:`openmsmq.client.Connection.purge_outgoing`)."""
        return await asyncio.to_thread(self.transport.purge_outgoing, queue_name(format_name))

    async def suspend_outgoing(self, format_name: str) -> QueueInfo:
        """Suspend an outgoing queue (see :meth:`openmsmq.client.Connection.suspend_outgoing`)."""
        return await asyncio.to_thread(self.transport.set_outgoing_state, queue_name(format_name), True)

    async def resume_outgoing(self, format_name: str) -> QueueInfo:
        """Resume an outgoing queue :meth:`suspend_outgoing` suspended."""
        return await asyncio.to_thread(self.transport.set_outgoing_state, queue_name(format_name), False)

    def transaction(self) -> AsyncTransaction:
        """A transaction, begun by ``async with`` (or ``await tx.begin()``)."""
        return AsyncTransaction(self.transport)

    async def close(self) -> None:
        """Close handles, abort open transactions, release the queue manager."""
        await asyncio.to_thread(self.transport.close)

    async def __aenter__(self) -> AsyncConnection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
