"""The remote-read transport: :class:`GrpcTransport` carries the client API to an
``openmsmq`` remote-read service (MS-MQRR semantics over gRPC, :mod:`openmsmq.remote`).

``grpc://host:port`` — options in the query string or as keyword arguments:

* ``token=...`` bearer token (or the ``OPENMSMQ_REMOTE_TOKEN`` environment variable);
* ``tls=1`` use TLS with the system roots, ``ca=/path/ca.pem`` with these roots,
  ``server_name=...`` the name the certificate must carry (tests, IP addresses).

The transport opens a session stream at connect and pings on it, so the server notices
a vanished client (its transactions are aborted, its pending receives put back). Server
failures raise :class:`~openmsmq.errors.MQError` with the server's HRESULT; a server
that cannot be reached raises MQ_ERROR_REMOTE_MACHINE_NOT_AVAILABLE.
"""

from __future__ import annotations

import dataclasses
import itertools
import os
import queue
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import parse_qs, urlsplit

import grpc

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
from openmsmq.errors import ConfigError, HResult, MQError, quoted
from openmsmq.redact import redact
from openmsmq.remote import openmsmq_remote_pb2 as pb
from openmsmq.remote import openmsmq_remote_pb2_grpc as pb_grpc
from openmsmq.remote.codes import HRESULT_KEY, INFINITE_TIMEOUT_MS, SESSION_KEY
from openmsmq.remote.packed import (
    FLAG_DEAD_LETTER,
    FLAG_FIRST_IN_TRANSACTION,
    FLAG_JOURNAL,
    FLAG_LAST_IN_TRANSACTION,
    FLAG_TRANSACTIONAL,
    PACKED_V1,
    decode_messages,
)
from openmsmq.remote.status import QMStatus, status_from_pb
from openmsmq.wire.ids import ObjectId

__all__ = ["GrpcTransport", "error_from_rpc"]

R = TypeVar("R")

#: Largest request sent (the server accepts 16 × 4 MiB + 1 MiB).
MAX_REQUEST_BYTES = 65 * 1024 * 1024

_CODE_HRESULT = {
    grpc.StatusCode.UNAVAILABLE: HResult.MQ_ERROR_REMOTE_MACHINE_NOT_AVAILABLE,
    grpc.StatusCode.DEADLINE_EXCEEDED: HResult.MQ_ERROR_IO_TIMEOUT,
    grpc.StatusCode.RESOURCE_EXHAUSTED: HResult.MQ_ERROR_INSUFFICIENT_RESOURCES,
    grpc.StatusCode.UNAUTHENTICATED: HResult.MQ_ERROR_ACCESS_DENIED,
    grpc.StatusCode.PERMISSION_DENIED: HResult.MQ_ERROR_ACCESS_DENIED,
    grpc.StatusCode.CANCELLED: HResult.MQ_ERROR_OPERATION_CANCELLED,
    grpc.StatusCode.UNIMPLEMENTED: HResult.MQ_ERROR_UNSUPPORTED_OPERATION,
}


def error_from_rpc(exc: grpc.RpcError) -> MQError:
    """The :class:`MQError` for a failed call: the server's HRESULT when it sent one, else
    one derived from the gRPC status (UNAVAILABLE → MQ_ERROR_REMOTE_MACHINE_NOT_AVAILABLE)."""
    call: Any = exc
    details = ""
    try:
        details = call.details() or ""
        for key, value in call.trailing_metadata() or ():
            if key == HRESULT_KEY:
                return MQError(int(value, 16), details)
        code = call.code()
    except (AttributeError, ValueError, TypeError):
        code = None
    hresult = _CODE_HRESULT.get(code, HResult.MQ_ERROR) if code is not None else HResult.MQ_ERROR
    return MQError(hresult, details or str(code))


def _uow(tx: TransactionId | None) -> bytes:
    return b"" if tx is None else tx.uow.bytes


def _timeout_ms(timeout: float | None) -> int:
    if timeout is None:
        return INFINITE_TIMEOUT_MS
    if timeout <= 0:
        return 0
    return min(INFINITE_TIMEOUT_MS - 1, max(1, round(timeout * 1000)))


_GUID_TEXT: dict[bytes, str] = {}
_ACKS = {i: AckRequest(i) for i in range(16)}
_DELIVERY = {0: Delivery.EXPRESS, 1: Delivery.RECOVERABLE}


def _guid(raw: bytes) -> str:
    """``{GUID}`` text of 16 RFC 4122 bytes, memoised (a batch has few distinct QM GUIDs)."""
    text = _GUID_TEXT.get(raw)
    if text is None:
        if len(_GUID_TEXT) > 4096:
            _GUID_TEXT.clear()
        text = _GUID_TEXT[raw] = f"{{{uuid.UUID(bytes=raw)}}}" if len(raw) == 16 else "{}"
    return text


# Message fields from a packed record (openmsmq.remote.packed): the record's names are
# the parameters of the generated ``make``; a Message field missing here gets its default.
_RECORD = [
    "lookup_id", "uniq", "message_class", "priority", "app_specific", "body_type", "delivery",
    "sent_time", "arrived_time", "ttrq", "ttbr", "ack_flags", "flags", "request_id", "tx_seq_id",
    "tx_seq_num", "lineage", "source", "body", "label", "corr", "dest", "admin", "resp", "ext",
]  # fmt: skip
_FIELD_SOURCE = {
    "body": "body", "label": "label", "lookup_id": "lookup_id",
    "message_id": "_guid(lineage) + _BACKSLASH + str(uniq)",
    "message_class": "message_class", "priority": "priority", "correlation_id": "corr",
    "app_specific": "app_specific", "body_type": "body_type",
    "delivery": "_DELIVERY.get(delivery, _EXPRESS)", "sent_time": "sent_time",
    "arrived_time": "arrived_time", "time_to_reach_queue": "ttrq", "time_to_be_received": "ttbr",
    "queue": "dest", "admin_queue": "admin", "response_queue": "resp",
    "ack": "_ACKS[ack_flags & 0x0F]", "journal": f"flags & {FLAG_JOURNAL} != 0",
    "dead_letter": f"flags & {FLAG_DEAD_LETTER} != 0",
    "transactional": f"flags & {FLAG_TRANSACTIONAL} != 0",
    "first_in_transaction": f"flags & {FLAG_FIRST_IN_TRANSACTION} != 0",
    "last_in_transaction": f"flags & {FLAG_LAST_IN_TRANSACTION} != 0",
    "source_machine": "_guid(source)", "extension": "ext",
    "tx_sequence_id": "tx_seq_id", "tx_sequence_number": "tx_seq_num",
}  # fmt: skip


def _record_maker() -> Callable[..., Message]:
    """``make(*record) -> Message`` for a packed record, generated once.

    The hot path of batched receives: a frozen dataclass's ``__init__`` sets its fields
    through ``object.__setattr__``; for the slotted :class:`Message` the generated
    function stores straight into the slots (half the cost per message), giving an
    object equal to ``Message(...)`` with the same values. Falls back to the constructor
    should :class:`Message` stop being a plain slotted dataclass.
    """
    env: dict[str, Any] = {
        "Message": Message, "_guid": _guid, "_BACKSLASH": "\\", "_DELIVERY": _DELIVERY,
        "_EXPRESS": Delivery.EXPRESS, "_ACKS": _ACKS, "_new": object.__new__,
    }  # fmt: skip
    values: list[tuple[str, str]] = []
    for f in dataclasses.fields(Message):
        expr = _FIELD_SOURCE.get(f.name)
        if expr is None:  # a field this transport does not carry: its default
            if f.default is not dataclasses.MISSING:
                env[f"_default_{f.name}"] = f.default
                expr = f"_default_{f.name}"
            elif f.default_factory is not dataclasses.MISSING:
                env[f"_factory_{f.name}"] = f.default_factory
                expr = f"_factory_{f.name}()"
            else:
                raise TypeError(f"Message.{f.name} has no default and no packed source")
        values.append((f.name, expr))
    fast = (
        "__slots__" in Message.__dict__
        and not hasattr(Message, "__post_init__")
        and all(f.init for f in dataclasses.fields(Message))
    )
    lines = [f"def make({', '.join(_RECORD)}):"]
    if fast:
        lines.append("    o = _new(Message)")
        for name, expr in values:
            env[f"_set_{name}"] = getattr(Message, name).__set__
            lines.append(f"    _set_{name}(o, {expr})")
        lines.append("    return o")
    else:
        lines.append("    return Message(" + ", ".join(f"{n}={e}" for n, e in values) + ")")
    exec("\n".join(lines), env)  # source built above from field names only
    make: Callable[..., Message] = env["make"]
    return make


_make = _record_maker()


def _message(m: pb.Message) -> Message:
    """A :class:`Message` from the ``repeated Message`` form (servers without packing)."""
    flags = (
        (FLAG_JOURNAL if m.positive_journaling else 0)
        | (FLAG_DEAD_LETTER if m.negative_journaling else 0)
        | (FLAG_TRANSACTIONAL if m.transactional else 0)
        | (FLAG_FIRST_IN_TRANSACTION if m.first_in_transaction else 0)
        | (FLAG_LAST_IN_TRANSACTION if m.last_in_transaction else 0)
    )
    out = _make(
        m.lookup_id, m.id_uniquifier, m.message_class, m.priority, m.app_specific, m.body_type,
        m.delivery, m.sent_time, m.arrived_time, m.time_to_reach_queue, m.time_to_be_received,
        m.ack_flags, flags, m.request_id, m.tx_sequence_id, m.tx_sequence_number, m.id_lineage,
        m.source_machine, m.body, m.label, m.correlation_id, m.destination_queue, m.admin_queue,
        m.response_queue, m.extension,
    )  # fmt: skip
    if m.abort_count or m.move_count:  # not in the packed form: the server then sends this one
        out = dataclasses.replace(out, abort_count=m.abort_count, move_count=m.move_count)
    return out


def _messages(reply: pb.ReadReply) -> list[Message]:
    """The messages of a :class:`ReadReply`, packed or not."""
    if reply.packed:
        return [_make(*r) for r in decode_messages(reply.packed)]
    return [_message(m) for m in reply.messages]


def _pending(reply: pb.ReadReply, transactional: bool = False) -> list[PendingMessage]:
    """The (request id, message) pairs of a StartReceive reply, packed or not."""
    if reply.packed:
        return [
            PendingMessage(r[13], _make(*r), transactional)  # type: ignore[arg-type]
            for r in decode_messages(reply.packed)
        ]
    return [PendingMessage(m.request_id, _message(m), transactional) for m in reply.messages]


def _outgoing(m: OutgoingMessage) -> pb.OutgoingMessage:
    if not 0 <= m.app_specific <= 0xFFFFFFFF:
        raise MQError(HResult.MQ_ERROR_ILLEGAL_PROPERTY_VALUE, "app_specific must be a u32")
    for name in ("priority", "time_to_reach_queue", "time_to_be_received"):
        if not 0 <= getattr(m, name) <= INFINITE:
            raise MQError(HResult.MQ_ERROR_ILLEGAL_PROPERTY_VALUE, f"{name} must be a u32")
    return pb.OutgoingMessage(
        body=bytes(m.body), label=m.label, priority=m.priority, correlation_id=m.correlation_id,
        app_specific=m.app_specific, body_type=m.body_type, delivery=int(m.delivery),
        time_to_reach_queue=m.time_to_reach_queue, time_to_be_received=m.time_to_be_received,
        ack_flags=int(m.ack), admin_queue=m.admin_queue, response_queue=m.response_queue,
        journal=m.journal, dead_letter=bool(m.dead_letter), extension=m.extension,
    )  # fmt: skip


def _queue_info(q: pb.QueueInfo) -> QueueInfo:
    return QueueInfo(
        path=q.path, kind=q.kind, transactional=q.transactional, label=q.label, quota_kb=q.quota_kb,
        journal=q.journal, journal_quota_kb=q.journal_quota_kb, private_number=q.private_number,
        created_time=q.created_time, modify_time=q.modify_time, message_count=q.message_count,
        total_bytes=q.total_bytes, destination=q.destination, allowed_senders=tuple(q.allowed_senders),
        retry_policy=q.retry_policy,
    )  # fmt: skip


class GrpcTransport(Transport):
    """:class:`Transport` over the remote-read gRPC service (see the module docstring).

    ``connect_timeout``: seconds to reach the server (then
    MQ_ERROR_REMOTE_MACHINE_NOT_AVAILABLE). ``ping_interval``: seconds between session
    pings (default: a third of the server's session timeout).
    """

    def __init__(
        self,
        target: str,
        *,
        token: str | None = None,
        tls: bool | None = None,
        root_certificates: bytes | None = None,
        server_name: str | None = None,
        connect_timeout: float = 10.0,
        ping_interval: float | None = None,
    ) -> None:
        #: The target as given, its secrets masked (a token in the query): it appears in
        #: messages and logs.
        self.target = redact(target)
        parts = urlsplit(target)
        if parts.scheme.lower() != "grpc" or not parts.hostname or not parts.port:
            raise ConfigError("target", f"{quoted(self.target)}: expected grpc://host:port")
        query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        token = token or query.get("token") or os.environ.get("OPENMSMQ_REMOTE_TOKEN") or None
        ca = query.get("ca")
        if root_certificates is None and ca:
            root_certificates = Path(ca).read_bytes()
        server_name = server_name or query.get("server_name")
        if tls is None:
            tls = query.get("tls", "").lower() in ("1", "true", "yes") or root_certificates is not None
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        address = f"{host}:{parts.port}"
        options: list[tuple[str, Any]] = [
            ("grpc.max_receive_message_length", -1),
            ("grpc.max_send_message_length", MAX_REQUEST_BYTES),
            ("grpc.keepalive_time_ms", 20_000),
            ("grpc.keepalive_timeout_ms", 10_000),
            ("grpc.enable_retries", 0),
        ]
        if server_name:
            options.append(("grpc.ssl_target_name_override", server_name))
        if tls:
            creds = grpc.ssl_channel_credentials(root_certificates=root_certificates)
            self._channel = grpc.secure_channel(address, creds, options=options)
        else:
            self._channel = grpc.insecure_channel(address, options=options)
        self._stub = pb_grpc.RemoteReadStub(self._channel)  # type: ignore[no-untyped-call]
        self._auth: tuple[tuple[str, str], ...] = (("authorization", f"Bearer {token}"),) if token else ()
        self._lock = threading.Lock()
        self._next_request_id = 1
        self._closed = False
        #: Transactions begun here that no call has carried to the server yet (see begin()).
        self._fresh: set[bytes] = set()
        #: Fresh transactions ended here without reaching the server (bounded memory).
        self._ended_here: OrderedDict[bytes, None] = OrderedDict()
        self._stop: queue.Queue[None] = queue.Queue()
        self._session_ready = threading.Event()
        try:
            grpc.channel_ready_future(self._channel).result(timeout=connect_timeout)
        except grpc.FutureTimeoutError:
            self._channel.close()
            raise MQError(
                HResult.MQ_ERROR_REMOTE_MACHINE_NOT_AVAILABLE, f"no remote-read service at {address}"
            ) from None
        self._interval = ping_interval
        self._session_call: Any = self._stub.Session(self._pings(), metadata=self._auth)
        try:
            first = next(self._session_call)
        except grpc.RpcError as exc:
            self._channel.close()
            raise error_from_rpc(exc) from None
        self.session_id: str = first.session_id
        self.session_timeout: float = first.session_timeout
        self._md = (*self._auth, (SESSION_KEY, self.session_id))
        self._session_ready.set()
        self._reader = threading.Thread(target=self._drain, name="openmsmq-grpc-session", daemon=True)
        self._reader.start()

    # ---- session keepalive ---------------------------------------------------------------

    def _pings(self) -> Iterator[pb.SessionPing]:
        """The request side of the session stream: a ping every interval until closed."""
        self._session_ready.wait()
        interval = self._interval or max(0.05, self.session_timeout / 3)
        for seq in itertools.count(1):
            try:
                self._stop.get(timeout=interval)
                return  # close(): half-close the stream; the server runs its rundown
            except queue.Empty:
                yield pb.SessionPing(seq=seq)

    def _drain(self) -> None:
        try:
            for _pong in self._session_call:
                pass
        except grpc.RpcError:
            return  # the session is gone; the next call reports MQ_ERROR_STALE_HANDLE

    def _call(self, method: Callable[..., R], request: Any) -> R:
        if self._closed:
            raise MQError(HResult.MQ_ERROR_SERVICE_NOT_AVAILABLE, "connection is closed")
        try:
            return method(request, metadata=self._md)
        except grpc.RpcError as exc:
            raise error_from_rpc(exc) from None

    def _call_tx(self, method: Callable[..., R], request: Any, uow: bytes) -> R:
        """:meth:`_call` for a request carrying transaction ``uow``. The server creates a
        transaction it does not know on a receive or send (MS-MQRR 3.1.4.13 step 6), so the
        first call carrying a fresh transaction begins it there; once one succeeded the
        transaction is known. After a failed first call it may or may not exist there:
        :meth:`_settle` makes sure it does."""
        if not uow or uow not in self._fresh:
            return self._call(method, request)
        try:
            reply = self._call(method, request)
        except MQError:
            self._settle(uow)
            raise
        self._fresh.discard(uow)
        return reply

    def _settle(self, uow: bytes) -> None:
        """Make sure the server has the fresh transaction ``uow`` (BeginTransaction; "it
        exists" is as good); left fresh if the server cannot be asked."""
        try:
            self._call(self._stub.BeginTransaction, pb.TransactionRequest(transaction=uow))
        except MQError as exc:
            if exc.hresult != HResult.MQ_ERROR_TRANSACTION_SEQUENCE:
                return
        self._fresh.discard(uow)

    def _request_ids(self, n: int) -> int:
        with self._lock:  # n consecutive ids, without a step per id
            first = self._next_request_id
            self._next_request_id += n
        return first & 0x7FFFFFFF or 1

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
        req = pb.CreateQueueRequest(
            path=path, transactional=transactional, label=label,
            journal=journal, journal_quota_kb=journal_quota_kb, allowed_senders=list(allowed_senders),
        )  # fmt: skip
        if quota_kb is not None:  # unset: the server's store.default_queue_quota
            req.quota_kb = quota_kb
        return _queue_info(self._call(self._stub.CreateQueue, req))

    def delete_queue(self, name: str) -> None:
        self._call(self._stub.DeleteQueue, pb.QueueName(name=name))

    def list_queues(self, *, include_system: bool = False) -> list[QueueInfo]:
        reply = self._call(self._stub.ListQueues, pb.ListQueuesRequest(include_system=include_system))
        return [_queue_info(q) for q in reply.queues]

    def queue_info(self, name: str) -> QueueInfo:
        return _queue_info(self._call(self._stub.GetQueueInfo, pb.QueueName(name=name)))

    def set_queue_properties(self, name: str, **changes: Any) -> QueueInfo:
        unknown = set(changes) - {
            "label",
            "quota_kb",
            "journal",
            "journal_quota_kb",
            "base_priority",
            "allowed_senders",
            "retry_policy",
        }
        if unknown:
            raise MQError(HResult.MQ_ERROR_PROPERTY_NOTALLOWED, f"not settable: {', '.join(sorted(unknown))}")
        senders = changes.pop("allowed_senders", None)
        req = pb.SetQueuePropertiesRequest(name=name, **changes)
        if senders is not None:
            req.set_allowed_senders = True
            req.allowed_senders.extend(senders)
        return _queue_info(self._call(self._stub.SetQueueProperties, req))

    def set_outgoing_state(self, format_name: str, suspended: bool) -> QueueInfo:
        req = pb.OutgoingStateRequest(format_name=format_name, suspended=suspended)
        return _queue_info(self._call(self._stub.SetOutgoingState, req))

    # ---- handles -------------------------------------------------------------------------

    def open_queue(self, name: str, access: Access, share: ShareMode = ShareMode.DENY_NONE) -> int:
        req = pb.OpenQueueRequest(queue=name, access=int(access), share_mode=int(share))
        handle: int = self._call(self._stub.OpenQueue, req).handle
        return handle

    def close_queue(self, handle: int) -> None:
        self._call(self._stub.CloseQueue, pb.HandleRequest(handle=handle))

    def create_cursor(self, handle: int) -> int:
        cursor: int = self._call(self._stub.CreateCursor, pb.HandleRequest(handle=handle)).cursor
        return cursor

    def close_cursor(self, handle: int, cursor: int) -> None:
        self._call(self._stub.CloseCursor, pb.CloseCursorRequest(handle=handle, cursor=cursor))

    # ---- messages ------------------------------------------------------------------------

    def purge(self, handle: int) -> int:
        count: int = self._call(self._stub.PurgeQueue, pb.HandleRequest(handle=handle)).count
        return count

    def send(
        self, handle: int, messages: Sequence[OutgoingMessage], tx: TransactionId | None = None
    ) -> list[SendReceipt]:
        if not messages:
            return []
        req = pb.SendRequest(handle=handle, transaction=_uow(tx), messages=[_outgoing(m) for m in messages])
        if req.ByteSize() > MAX_REQUEST_BYTES:
            raise MQError(
                HResult.MQ_ERROR_INSUFFICIENT_RESOURCES,
                f"a send of {req.ByteSize()} bytes exceeds {MAX_REQUEST_BYTES}: send fewer messages per call",
            )
        reply = self._call_tx(self._stub.Send, req, req.transaction)
        return [
            SendReceipt(str(ObjectId(uuid.UUID(bytes=r.id_lineage), r.id_uniquifier)), r.lookup_id)
            for r in reply.receipts
        ]

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
        if max_count < 1:
            raise MQError(HResult.MQ_ERROR_INVALID_PARAMETER, "max_count must be at least 1")
        req = pb.ReadRequest(
            handle=handle, action=int(action), lookup_id=lookup_id, cursor=cursor,
            timeout_ms=_timeout_ms(timeout), transaction=_uow(tx), max_count=max_count,
            reply_format=PACKED_V1,
        )  # fmt: skip
        return _messages(self._call_tx(self._stub.Read, req, req.transaction))

    def start_receive(
        self,
        handle: int,
        action: ReadAction = ReadAction.RECEIVE,
        *,
        lookup_id: int = 0,
        timeout: float | None = 0.0,
        tx: TransactionId | None = None,
    ) -> PendingMessage:
        if ReadAction(action).is_peek:
            raise MQError(HResult.MQ_ERROR_INVALID_PARAMETER, "a two-phase read is a receive action")
        got = self.start_receive_many(handle, 1, action, lookup_id=lookup_id, timeout=timeout, tx=tx)
        return got[0]

    def start_receive_many(
        self,
        handle: int,
        max_count: int,
        action: ReadAction = ReadAction.RECEIVE,
        *,
        lookup_id: int = 0,
        cursor: int = 0,
        timeout: float | None = 0.0,
        tx: TransactionId | None = None,
    ) -> list[PendingMessage]:
        """Batched R_StartReceive / R_StartTransactionalReceive: up to ``max_count``
        messages locked in one call, each with its own request id (waits for the first)."""
        if max_count < 1:
            raise MQError(HResult.MQ_ERROR_INVALID_PARAMETER, "max_count must be at least 1")
        req = pb.ReadRequest(
            handle=handle, action=int(action), lookup_id=lookup_id, cursor=cursor,
            timeout_ms=_timeout_ms(timeout), transaction=_uow(tx), max_count=max_count,
            request_id=self._request_ids(max_count), reply_format=PACKED_V1,
        )  # fmt: skip
        return _pending(self._call_tx(self._stub.StartReceive, req, req.transaction), tx is not None)

    def end_receive(self, handle: int, request_id: int, ack: Ack, transactional: bool | None = None) -> None:
        status = self.end_receive_many(handle, [request_id], ack, transactional)[0]
        if status:
            raise MQError(status, f"end of receive {request_id}")

    def end_receive_many(
        self, handle: int, request_ids: Sequence[int], ack: Ack, transactional: bool | None = None
    ) -> list[int]:
        """Batched R_EndReceive (``transactional`` False) / R_EndTransactionalReceive
        (True): one HRESULT per request id (0 = MQ_OK), in order. None: each receive the
        way it started."""
        method = {None: pb.END_METHOD_UNSPECIFIED, False: pb.END_RECEIVE, True: pb.END_TRANSACTIONAL_RECEIVE}
        req = pb.EndReceiveRequest(
            handle=handle, ack=int(ack), request_ids=list(request_ids), method=method[transactional]
        )
        return list(self._call(self._stub.EndReceive, req).status)

    def cancel_receive(self, handle: int, request_id: int) -> None:
        """R_CancelReceive: end a waiting receive with MQ_ERROR_OPERATION_CANCELLED."""
        self._call(self._stub.CancelReceive, pb.CancelReceiveRequest(handle=handle, request_id=request_id))

    def move_message(
        self,
        handle: int,
        lookup_id: int,
        to: str,
        tx: TransactionId | None = None,
        return_after: float | None = None,
    ) -> int:
        uow = b""
        if tx is not None:
            uow = _uow(tx)
            if uow in self._fresh:  # nothing done in it yet: the server creates it now
                self._settle(uow)
        req = pb.MoveMessageRequest(
            handle=handle, transaction=uow, lookup_id=lookup_id, to=to, return_after=return_after or 0.0
        )
        return int(self._call(self._stub.MoveMessage, req).lookup_id)

    def set_ack_class(self, tx: TransactionId, lookup_id: int, message_class: int) -> None:
        uow = _uow(tx)
        if uow in self._fresh:  # nothing received in it yet: let the server say so
            self._settle(uow)
        req = pb.SetAckClassRequest(transaction=uow, lookup_id=lookup_id, message_class=message_class)
        self._call(self._stub.SetUserAcknowledgementClass, req)

    # ---- LookupIdentifier ranges (one round trip each) ------------------------------------

    def lookup_ranges(
        self, queries: Sequence[RangeQuery], *, with_bytes: bool = False
    ) -> list[LookupRange | None]:
        req = pb.LookupRangesRequest(
            queries=[pb.RangeQuery(queue=q.queue, after=q.after, through=q.through) for q in queries],
            with_bytes=with_bytes,
        )
        reply = self._call(self._stub.LookupRanges, req)
        return [
            LookupRange(r.first, r.last, r.count, r.bytes if r.HasField("bytes") else None)
            if r.count
            else None
            for r in reply.ranges
        ]

    def nth_lookup_id(self, queue: str, after: int, n: int, through: int | None = None) -> int:
        if n < 1:
            raise MQError(HResult.MQ_ERROR_INVALID_PARAMETER, f"n must be at least 1, got {n}")
        req = pb.NthLookupIdRequest(queue=queue, after=after, n=n, through=through)
        lookup_id: int = self._call(self._stub.NthLookupId, req).lookup_id
        return lookup_id

    def peek_range(
        self, queue: str, after: int = 0, through: int | None = None, max_count: int = 1000
    ) -> list[Message]:
        if max_count < 1:
            raise MQError(HResult.MQ_ERROR_INVALID_PARAMETER, "max_count must be at least 1")
        req = pb.PeekRangeRequest(
            queue=queue, after=after, through=through, max_count=max_count, reply_format=PACKED_V1
        )
        return _messages(self._call(self._stub.PeekRange, req))

    def peek_range_packed(
        self, queue: str, after: int = 0, through: int | None = None, max_count: int = 1000
    ) -> bytes | None:
        """:meth:`peek_range` as the packed blob of the reply (:mod:`openmsmq.remote.packed`),
        for callers that decode it into columns themselves (the Spark source); None if
        the server answered in the ``repeated Message`` form instead."""
        if max_count < 1:
            raise MQError(HResult.MQ_ERROR_INVALID_PARAMETER, "max_count must be at least 1")
        req = pb.PeekRangeRequest(
            queue=queue, after=after, through=through, max_count=max_count, reply_format=PACKED_V1
        )
        reply = self._call(self._stub.PeekRange, req)
        if reply.messages:
            return None
        packed: bytes = reply.packed
        return packed

    def remove_through(self, positions: Mapping[str, int]) -> int:
        req = pb.RemoveThroughRequest(positions=dict(positions))
        count: int = self._call(self._stub.RemoveThrough, req).count
        return count

    def send_idempotent(
        self, queue: str, messages: Sequence[OutgoingMessage], identities: Sequence[str]
    ) -> list[int | None]:
        if not messages:
            return []
        req = pb.SendIdempotentRequest(
            queue=queue, messages=[_outgoing(m) for m in messages], identities=list(identities)
        )
        if req.ByteSize() > MAX_REQUEST_BYTES:
            raise MQError(
                HResult.MQ_ERROR_INSUFFICIENT_RESOURCES,
                f"a send of {req.ByteSize()} bytes exceeds {MAX_REQUEST_BYTES}: send fewer messages per call",
            )
        reply = self._call(self._stub.SendIdempotent, req)
        return [lid or None for lid in reply.lookup_ids]

    # ---- status ---------------------------------------------------------------------------

    def status(self) -> QMStatus:
        return status_from_pb(self._call(self._stub.Status, pb.Empty()))

    def reset_incoming_sequence(
        self, source_qm: str, destination: str, tx_sequence_id: int, tx_sequence_number: int
    ) -> tuple[tuple[int, int], tuple[int, int]]:
        r = self._call(
            self._stub.ResetIncomingSequence,
            pb.ResetSequenceRequest(
                source_qm=source_qm, destination=destination, tx_sequence_id=tx_sequence_id,
                tx_sequence_number=tx_sequence_number,
            ),
        )  # fmt: skip
        return (
            (r.before_tx_sequence_id, r.before_tx_sequence_number),
            (r.after_tx_sequence_id, r.after_tx_sequence_number),
        )

    # ---- transactions --------------------------------------------------------------------

    def begin(self) -> TransactionId:
        """A new transaction, without a round trip: the client picks the XACTUOW (MS-MQRR
        2.2.8) and the first receive or send carrying it creates it on the server
        (3.1.4.13 step 6). Committing or aborting one that no call carried is a no-op
        (it holds nothing); ending it twice raises MQ_ERROR_TRANSACTION_SEQUENCE."""
        if self._closed:
            raise MQError(HResult.MQ_ERROR_SERVICE_NOT_AVAILABLE, "connection is closed")
        tid = TransactionId()
        self._fresh.add(tid.uow.bytes)
        return tid

    def _end_here(self, uow: bytes) -> bool:
        """End a transaction locally if the server never saw it; True if so."""
        with self._lock:
            if uow in self._ended_here:
                raise MQError(
                    HResult.MQ_ERROR_TRANSACTION_SEQUENCE, f"transaction {uuid.UUID(bytes=uow)} has ended"
                )
            if uow not in self._fresh:
                return False
            self._fresh.discard(uow)
            self._ended_here[uow] = None
            while len(self._ended_here) > 4096:
                self._ended_here.popitem(last=False)
            return True

    def commit(self, tx: TransactionId) -> None:
        if tx == SINGLE_MESSAGE:
            raise MQError(HResult.MQ_ERROR_TRANSACTION_USAGE, "SINGLE_MESSAGE is not a transaction to commit")
        uow = tx.uow.bytes
        if not self._end_here(uow):
            self._call(self._stub.Commit, pb.TransactionRequest(transaction=uow))

    def abort(self, tx: TransactionId) -> None:
        uow = tx.uow.bytes
        if not self._end_here(uow):
            self._call(self._stub.Abort, pb.TransactionRequest(transaction=uow))

    # ---- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        """End the session (the server closes its handles and aborts its transactions)
        and close the channel."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._stop.put(None)
        self._reader.join(timeout=5.0)  # the stream ends after the server's rundown
        self._channel.close()

    def __enter__(self) -> GrpcTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
