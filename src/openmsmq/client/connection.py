"""The synchronous application API: :func:`connect`, :class:`Connection`, :class:`Queue`,
:class:`Cursor`, :class:`Transaction`.

Everything is a thin, stateless-as-possible layer over a :class:`Transport`; a batch
(``send_many``, ``receive_many``, ``iter_receive``) is one transport call.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from enum import IntEnum
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from openmsmq.client.message import Message, PendingMessage
from openmsmq.client.selection import (
    by_correlation_id,
    by_message_id,
    hinting,
    open_handle,
    queue_name,
    take_message,
)
from openmsmq.client.transport import SINGLE_MESSAGE, Transport
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
from openmsmq.errors import ConfigError, HResult, MQError, quoted
from openmsmq.redact import redact
from openmsmq.runtime import live_runtime

__all__ = [
    "Body",
    "Connection",
    "Cursor",
    "Queue",
    "Seek",
    "Transaction",
    "connect",
    "open_transport",
    "outgoing",
]

#: What ``send`` accepts as a body: bytes-like, or text (sent as UTF-8).
Body = bytes | bytearray | memoryview | str

#: Message.Class NACK_RECEIVE_REJECTED (MS-MQMQ 2.2.18.1.6), set by :meth:`Queue.reject`.
NACK_RECEIVE_REJECTED = 0xC004


class Seek(IntEnum):
    """Which message a lookup read selects relative to a LookupIdentifier (MS-MQDMPR 3.1.7.3.3)."""

    CURRENT = 0
    NEXT = 1
    PREV = 2
    FIRST = 3
    LAST = 4


PEEK_SEEK = {
    Seek.CURRENT: ReadAction.LOOKUP_PEEK_CURRENT,
    Seek.NEXT: ReadAction.LOOKUP_PEEK_NEXT,
    Seek.PREV: ReadAction.LOOKUP_PEEK_PREV,
    Seek.FIRST: ReadAction.LOOKUP_PEEK_FIRST,
    Seek.LAST: ReadAction.LOOKUP_PEEK_LAST,
}
RECEIVE_SEEK = {
    Seek.CURRENT: ReadAction.LOOKUP_RECEIVE_CURRENT,
    Seek.NEXT: ReadAction.LOOKUP_RECEIVE_NEXT,
    Seek.PREV: ReadAction.LOOKUP_RECEIVE_PREV,
    Seek.FIRST: ReadAction.LOOKUP_RECEIVE_FIRST,
    Seek.LAST: ReadAction.LOOKUP_RECEIVE_LAST,
}


def open_transport(target: str | Path, *, create: bool = True) -> Transport:
    """The transport for ``target``: a data directory (path or ``file:///path``) gives
    the in-process transport; ``grpc://host:port`` the remote-read transport.

    A data directory whose queue manager is running (``openmsmq serve`` published
    ``runtime.json`` there, :mod:`openmsmq.runtime`) is reached through that queue
    manager's remote-read service: one process owns a store. With ``create=False`` a
    directory that holds no queue manager (missing, empty) is an error naming it as
    given (MQ_ERROR_SERVICE_NOT_AVAILABLE) instead of a new queue manager.
    """
    text = str(target)
    scheme = urlsplit(text).scheme.lower() if "://" in text else ""
    if scheme in ("", "file"):
        from openmsmq.client.inproc import InProcessTransport

        path = unquote(urlsplit(text).path) if scheme == "file" else text
        if not path:
            raise ConfigError("target", f"{quoted(redact(text))}: no data directory")
        running = live_runtime(path)
        if running is None:
            return InProcessTransport(path, create=create)
        if not running.get("remote"):
            raise ConfigError(
                "target",
                f"{quoted(redact(text))} belongs to the running queue manager"
                f" (pid {running.get('pid')}), whose"
                " remote-read service is off: enable [remote] or stop that queue manager",
            )
        text, scheme = str(running["remote"]), "grpc"
    if scheme == "grpc":
        try:
            module = importlib.import_module("openmsmq.client.grpc_transport")
        except ImportError as exc:
            raise ConfigError(
                "target", f"{quoted(redact(text))}: the grpc transport is not available"
            ) from exc
        transport: Transport = module.GrpcTransport(text)
        return transport
    raise ConfigError(
        "target", f"{quoted(redact(text))}: expected a data directory, file:///path or grpc://host:port"
    )


def connect(target: str | Path | Transport, *, create: bool = True) -> Connection:
    """Connect to a queue manager: a data directory (or ``file:///path``) in this process,
    or ``grpc://host:port`` (remote read). A ready :class:`Transport` is used as is.

    A data directory without a queue manager gets a new one, unless ``create=False``
    (what the ``openmsmq`` commands pass): then it is MQ_ERROR_SERVICE_NOT_AVAILABLE,
    naming the directory, so that a mistyped path fails instead of starting afresh."""
    transport = target if isinstance(target, Transport) else open_transport(target, create=create)
    return Connection(transport)


def _to_bytes(body: Body) -> bytes:
    return body.encode("utf-8") if isinstance(body, str) else bytes(body)


def outgoing(body: Body | OutgoingMessage = b"", **props: Any) -> OutgoingMessage:
    """Build an :class:`OutgoingMessage` from a body and keyword properties
    (``label``, ``priority``, ``correlation_id``, ``app_specific``, ``ack``, ...).

    An unknown property raises MQ_ERROR_ILLEGAL_PROPID.
    """
    if isinstance(body, OutgoingMessage):
        base = body
    else:
        base = OutgoingMessage(body=_to_bytes(body))
    if not props:
        return base
    fields = OutgoingMessage.__dataclass_fields__
    unknown = sorted(set(props) - set(fields))
    if unknown:
        raise MQError(HResult.MQ_ERROR_ILLEGAL_PROPID, f"unknown message properties {unknown}")
    values = {name: getattr(base, name) for name in fields}
    values.update(props)
    if isinstance(values["body"], str | bytearray | memoryview):
        values["body"] = _to_bytes(values["body"])
    return OutgoingMessage(**values)


def tx_id_of(tx: Transaction | TransactionId | None) -> TransactionId | None:
    if tx is None or isinstance(tx, TransactionId):
        return tx
    return tx.id


class Transaction:
    """A transaction of a connection: commit on normal exit of ``with``, abort on exception.

    Pass it as ``tx=`` to sends and receives of any queue of the same connection.
    """

    def __init__(self, transport: Transport, tx_id: TransactionId) -> None:
        self._transport = transport
        self.id = tx_id
        #: ``"active"``, ``"committed"`` or ``"aborted"``.
        self.state = "active"

    def commit(self) -> None:
        """Commit: every send and receive becomes durable at once."""
        try:
            self._transport.commit(self.id)
        except BaseException:
            self.state = "aborted"
            raise
        self.state = "committed"

    def abort(self) -> None:
        """Abort: sends are dropped; received messages go back where they were."""
        self.state = "aborted"
        self._transport.abort(self.id)

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if self.state != "active":
            return
        if exc_type is None:
            self.commit()
        else:
            with contextlib.suppress(MQError):
                self.abort()

    def __repr__(self) -> str:
        return f"<Transaction {self.id} {self.state}>"


class Cursor:
    """A cursor on a queue (MS-MQRR R_CreateCursor): browse with peeks, receive at it.

    Cursor reads default to ``timeout=0`` (browse what is there).
    """

    def __init__(self, queue: Queue, number: int) -> None:
        self.queue = queue
        self.number = number
        self._closed = False

    def _read(self, action: ReadAction, timeout: float | None, tx: Any = None, n: int = 1) -> list[Message]:
        q = self.queue
        return q._transport.read(
            q.handle, action, cursor=self.number, timeout=timeout, tx=tx_id_of(tx), max_count=n
        )

    def peek_current(self, timeout: float | None = 0.0) -> Message:
        """MQ_ACTION_PEEK_CURRENT: the message at the cursor (the first one for a new cursor)."""
        return self._read(ReadAction.PEEK_CURRENT, timeout)[0]

    def peek_next(self, timeout: float | None = 0.0) -> Message:
        """MQ_ACTION_PEEK_NEXT: advance the cursor, then peek."""
        return self._read(ReadAction.PEEK_NEXT, timeout)[0]

    def peek_many(self, n: int, timeout: float | None = 0.0) -> list[Message]:
        """Peek up to ``n`` messages from the cursor on (current, then next ones), one call."""
        return self._read(ReadAction.PEEK_CURRENT, timeout, n=n)

    def receive_current(
        self, timeout: float | None = 0.0, tx: Transaction | TransactionId | None = None
    ) -> Message:
        """MQ_ACTION_RECEIVE at the cursor."""
        return self._read(ReadAction.RECEIVE, timeout, tx)[0]

    def __iter__(self) -> Iterator[Message]:
        """Browse from the cursor to the end of the queue (no waiting)."""
        action = ReadAction.PEEK_CURRENT
        while True:
            try:
                yield self._read(action, 0.0)[0]
            except MQError as exc:
                if exc.hresult == HResult.MQ_ERROR_IO_TIMEOUT:
                    return
                raise
            action = ReadAction.PEEK_NEXT

    def close(self) -> None:
        """Close the cursor (idempotent)."""
        if not self._closed:
            self._closed = True
            self.queue._transport.close_cursor(self.queue.handle, self.number)

    def __enter__(self) -> Cursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Queue:
    """An open queue handle. Receive/peek calls default to ``timeout=None`` (wait forever,
    MSMQ INFINITE); pass seconds to get :class:`~openmsmq.errors.IOTimeoutError` instead."""

    def __init__(
        self, transport: Transport, name: str, handle: int, access: Access, share: ShareMode
    ) -> None:
        self._transport = transport
        self.name = name
        self.handle = handle
        self.access = access
        self.share = share
        self._closed = False

    def __repr__(self) -> str:
        return f"<Queue {self.name!r} handle={self.handle} access={self.access!r}>"

    # ---- sending ---------------------------------------------------------------------------

    def send(
        self,
        body: Body | OutgoingMessage = b"",
        label: str | None = None,
        *,
        tx: Transaction | TransactionId | None = None,
        **props: Any,
    ) -> SendReceipt:
        """Send one message; ``props`` are :class:`OutgoingMessage` fields. ``tx`` may be a
        :class:`Transaction` or :data:`SINGLE_MESSAGE` (a transaction of its own)."""
        if label is not None:
            props["label"] = label
        message = outgoing(body, **props).with_send_defaults(tx is not None)
        return self._transport.send(self.handle, [message], tx_id_of(tx))[0]

    def send_many(
        self,
        bodies: Iterable[Body | OutgoingMessage],
        *,
        tx: Transaction | TransactionId | None = None,
        **props: Any,
    ) -> list[SendReceipt]:
        """Send many messages in one call and one commit; ``props`` apply to every one."""
        messages = [outgoing(b, **props).with_send_defaults(tx is not None) for b in bodies]
        return self._transport.send(self.handle, messages, tx_id_of(tx))

    # ---- receiving -------------------------------------------------------------------------

    def receive(self, timeout: float | None = None, tx: Transaction | TransactionId | None = None) -> Message:
        """Receive the first message (highest priority, then oldest)."""
        return self._transport.read(self.handle, ReadAction.RECEIVE, timeout=timeout, tx=tx_id_of(tx))[0]

    def receive_many(
        self, n: int, timeout: float | None = None, tx: Transaction | TransactionId | None = None
    ) -> list[Message]:
        """Receive up to ``n`` messages in one call (waits ``timeout`` for the first only)."""
        return self._transport.read(
            self.handle, ReadAction.RECEIVE, timeout=timeout, tx=tx_id_of(tx), max_count=n
        )

    def peek(self, timeout: float | None = None) -> Message:
        """The first message, without removing it."""
        return self._transport.read(self.handle, ReadAction.PEEK_CURRENT, timeout=timeout)[0]

    def peek_many(self, n: int, timeout: float | None = 0.0) -> list[Message]:
        """Up to ``n`` messages from the head in queue order, without removing them (one call)."""
        return self._transport.read(self.handle, ReadAction.PEEK_CURRENT, timeout=timeout, max_count=n)

    def iter_receive(
        self,
        batch: int = 100,
        timeout: float | None = None,
        tx: Transaction | TransactionId | None = None,
    ) -> Iterator[Message]:
        """Receive messages as they come, ``batch`` per transport call; stops when a wait of
        ``timeout`` seconds finds nothing (``None``: never stops)."""
        while True:
            try:
                msgs = self.receive_many(batch, timeout, tx)
            except MQError as exc:
                if exc.hresult == HResult.MQ_ERROR_IO_TIMEOUT:
                    return
                raise
            yield from msgs

    def peek_by_lookup_id(self, lookup_id: int, action: Seek = Seek.CURRENT) -> Message:
        """MQ_LOOKUP_PEEK_*: the message with this LookupIdentifier, or the one next to it.
        None there: :class:`~openmsmq.errors.MessageNotFoundError`."""
        return self._transport.read(self.handle, PEEK_SEEK[Seek(action)], lookup_id=lookup_id)[0]

    def receive_by_lookup_id(
        self, lookup_id: int, action: Seek = Seek.CURRENT, tx: Transaction | TransactionId | None = None
    ) -> Message:
        """MQ_LOOKUP_RECEIVE_*: receive by LookupIdentifier (in ``tx`` or not)."""
        return self._transport.read(
            self.handle, RECEIVE_SEEK[Seek(action)], lookup_id=lookup_id, tx=tx_id_of(tx)
        )[0]

    # ---- by MessageId / CorrelationId (System.Messaging's ReceiveById, PeekById, ...) ----

    def _by(self, wanted: Callable[[Message], bool], what: str, receive: bool, tx: Any) -> Message:
        def take(lookup_id: int) -> Message:
            return self.receive_by_lookup_id(lookup_id, Seek.CURRENT, tx)

        return take_message(self._transport, self.handle, wanted, take if receive else None, what)

    def peek_by_id(self, message_id: str | bytes) -> Message:
        """The message whose MessageId is ``message_id`` (``{GUID}\\n`` as
        :attr:`Message.message_id` shows it, or its 20 bytes), without removing it. None
        in the queue: :class:`~openmsmq.errors.MessageNotFoundError`."""
        return self._by(by_message_id(message_id), f"MessageId {message_id!s}", False, None)

    def receive_by_id(
        self, message_id: str | bytes, tx: Transaction | TransactionId | None = None
    ) -> Message:
        """Receive the message whose MessageId is ``message_id`` (in ``tx`` or not); found
        by browsing the queue as it is now. None: MessageNotFoundError."""
        return self._by(by_message_id(message_id), f"MessageId {message_id!s}", True, tx)

    def peek_by_correlation_id(self, correlation_id: str | bytes) -> Message:
        """The first message whose CorrelationId is ``correlation_id`` (``{GUID}\\n`` or 20
        bytes), without removing it. None: MessageNotFoundError."""
        return self._by(by_correlation_id(correlation_id), f"CorrelationId {correlation_id!s}", False, None)

    def receive_by_correlation_id(
        self, correlation_id: str | bytes, tx: Transaction | TransactionId | None = None
    ) -> Message:
        """Receive the first message whose CorrelationId is ``correlation_id``. None:
        MessageNotFoundError."""
        return self._by(by_correlation_id(correlation_id), f"CorrelationId {correlation_id!s}", True, tx)

    # ---- two-phase receive -----------------------------------------------------------------

    def start_receive(
        self,
        timeout: float | None = None,
        tx: Transaction | TransactionId | None = None,
        *,
        lookup_id: int | None = None,
        action: Seek = Seek.CURRENT,
    ) -> PendingMessage:
        """Lock a message for this handle (R_StartReceive / R_StartTransactionalReceive);
        finish with :meth:`end_receive`. Closing the queue NACKs what is still pending."""
        if lookup_id is None:
            return self._transport.start_receive(self.handle, timeout=timeout, tx=tx_id_of(tx))
        return self._transport.start_receive(
            self.handle, RECEIVE_SEEK[Seek(action)], lookup_id=lookup_id, tx=tx_id_of(tx)
        )

    def end_receive(self, pending: PendingMessage, ack: Ack | bool = Ack.ACK) -> None:
        """ACK (remove; at commit inside a transaction) or NACK (put back) a pending receive."""
        if isinstance(ack, bool):
            ack = Ack.ACK if ack else Ack.NACK
        self._transport.end_receive(self.handle, pending.request_id, ack, pending.transactional)

    @contextlib.contextmanager
    def receiving(
        self, timeout: float | None = None, tx: Transaction | TransactionId | None = None
    ) -> Iterator[Message]:
        """``with q.receiving(timeout=5) as msg:`` — the message is removed (ACK) only if the
        block finishes; an exception puts it back (NACK)."""
        pending = self.start_receive(timeout, tx)
        try:
            yield pending.message
        except BaseException:
            with contextlib.suppress(MQError):
                self.end_receive(pending, Ack.NACK)
            raise
        self.end_receive(pending, Ack.ACK)

    def reject(self, message: Message, tx: Transaction | TransactionId) -> None:
        """Mark a message received in ``tx`` as rejected: at commit its acknowledgment has
        class NACK_RECEIVE_REJECTED (R_SetUserAcknowledgementClass, MS-MQRR 3.1.4.14)."""
        tid = tx_id_of(tx)
        assert tid is not None
        self._transport.set_ack_class(tid, message.lookup_id, NACK_RECEIVE_REJECTED)

    # ---- cursors, purge, properties --------------------------------------------------------

    def cursor(self) -> Cursor:
        """A new cursor (use as a context manager to close it)."""
        return Cursor(self, self._transport.create_cursor(self.handle))

    def purge(self) -> int:
        """Delete every available message (needs RECEIVE access); returns how many."""
        return self._transport.purge(self.handle)

    def info(self) -> QueueInfo:
        """The queue's properties and current counts."""
        return self._transport.queue_info(self.name)

    def close(self) -> None:
        """Close the handle (idempotent): cursors close, pending receives are put back."""
        if not self._closed:
            self._closed = True
            self._transport.close_queue(self.handle)

    def __enter__(self) -> Queue:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Connection:
    """A connection to one queue manager (context manager: closes on exit)."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    @property
    def target(self) -> str:
        """What the connection was opened on."""
        return self.transport.target

    def open_queue(
        self,
        name: str,
        access: Access | None = None,
        share: ShareMode = ShareMode.DENY_NONE,
    ) -> Queue:
        """Open a queue by path name (``private$\\orders``, ``.\\private$\\orders``) or format
        name (``DIRECT=OS:host\\private$\\orders``, ``PRIVATE=guid\\n``, also with
        System.Messaging's ``FormatName:`` before it). The default access is send and
        receive for a queue of this QM, send for a queue of another QM."""
        name, handle, opened = open_handle(self.transport, name, access, share)
        return Queue(self.transport, name, handle, opened, ShareMode(share))

    def create_queue(
        self,
        path: str,
        *,
        transactional: bool = False,
        label: str = "",
        quota_kb: int | None = None,
        journal: bool = False,
        journal_quota_kb: int = INFINITE,
        exist_ok: bool = False,
        allowed_senders: Sequence[str] = (),
    ) -> QueueInfo:
        """Create a private queue; with ``exist_ok`` an existing one is returned as it is.

        ``allowed_senders``: QM GUIDs that may send into it over MS-MQQB (empty: every
        sender); messages from other QMs are rejected with NACK_ACCESS_DENIED."""
        try:
            return self.transport.create_queue(
                queue_name(path),
                transactional=transactional,
                label=label,
                quota_kb=quota_kb,
                journal=journal,
                journal_quota_kb=journal_quota_kb,
                allowed_senders=allowed_senders,
            )
        except MQError as exc:
            if exist_ok and exc.hresult == HResult.MQ_ERROR_QUEUE_EXISTS:
                return self.transport.queue_info(queue_name(path))
            raise

    def delete_queue(self, name: str) -> None:
        """Delete a queue and its messages."""
        with hinting(queue_name(name)):
            self.transport.delete_queue(queue_name(name))

    def purge_outgoing(self, format_name: str) -> int:
        """Purge this QM's outgoing queue to the remote queue ``format_name`` (as ``queue
        list --all`` shows it): every message leaves it with the class NACK_DELETED
        (0x8001); those sent with ``dead_letter`` go to the dead-letter queues, the others
        are deleted. Only with the queue manager stopped (an in-process connection to its
        data directory). Returns how many left the queue."""
        return self.transport.purge_outgoing(queue_name(format_name))

    def list_queues(self, *, include_system: bool = False) -> list[QueueInfo]:
        """Private queues (with ``include_system``: system, journal and outgoing ones too)."""
        return self.transport.list_queues(include_system=include_system)

    def queue_info(self, name: str) -> QueueInfo:
        """Properties and counts of a queue."""
        with hinting(queue_name(name)):
            return self.transport.queue_info(queue_name(name))

    def set_queue_properties(self, name: str, **changes: Any) -> QueueInfo:
        """Change properties of the private queue ``name`` (MQSetQueueProperties): ``label``,
        ``quota_kb`` (INFINITE: no limit), ``journal``, ``journal_quota_kb``,
        ``base_priority``, ``allowed_senders``; only those given change. Returns the queue."""
        with hinting(queue_name(name)):
            return self.transport.set_queue_properties(queue_name(name), **changes)

    def suspend_outgoing(self, format_name: str) -> QueueInfo:
        """Suspend the outgoing queue to ``format_name`` (Suspend-MsmqOutgoingQueue): its
        messages stay stored and none is sent until :meth:`resume_outgoing` or a restart
        of the queue manager. Needs a running queue manager (its ``grpc://`` service, or
        its data directory while ``openmsmq serve`` runs)."""
        return self.transport.set_outgoing_state(queue_name(format_name), True)

    def resume_outgoing(self, format_name: str) -> QueueInfo:
        """Resume an outgoing queue :meth:`suspend_outgoing` suspended."""
        return self.transport.set_outgoing_state(queue_name(format_name), False)

    def transaction(self) -> Transaction:
        """Begin a transaction (``with conn.transaction() as tx: ...``)."""
        return Transaction(self.transport, self.transport.begin())

    def close(self) -> None:
        """Close every handle, abort open transactions, release the queue manager."""
        self.transport.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ += ["SINGLE_MESSAGE"]
