"""The remote-read transport: :class:`GrpcTransport` carries the client API to an
``openmsmq`` remote-read service (MS-MQRR semantics over gRPC, :mod:`openmsmq.remote`).

``grpc://host:port`` — options in the query string or as keyword arguments:

* ``token=...`` bearer token (or the ``OPENMSMQ_REMOTE_TOKEN`` environment variable);
* ``tls=1`` use TLS with the system roots, ``ca=/path/ca.pem`` with these roots,
  ``server_name=...`` the name the certificate must carry (tests, IP addresses).
* ``steps=0`` one gRPC call per operation instead of the step stream, ``prefetch=0`` no
  message taken ahead by a commit (:mod:`openmsmq.client.grpc_steps`, docs/remote.md).

The transport opens a session stream at connect and pings on it, so the server notices
a vanished client (its transactions are aborted, its pending receives put back). Server
failures raise :class:`~openmsmq.errors.MQError` with the server's HRESULT; a server
that cannot be reached raises MQ_ERROR_REMOTE_MACHINE_NOT_AVAILABLE.
"""

from __future__ import annotations

import itertools
import logging
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

from openmsmq.client import grpc_replies
from openmsmq.client.checks import check_outgoing, check_two_phase, connection_closed, too_few
from openmsmq.client.grpc_steps import ConsumerAhead, StepStream, StepsUnsupported, failure
from openmsmq.client.message import Message, PendingMessage
from openmsmq.client.transport import SINGLE_MESSAGE, Transport
from openmsmq.client.types import (
    INFINITE,
    Access,
    Ack,
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
from openmsmq.remote.codes import HRESULT_KEY, INFINITE_TIMEOUT_MS, SESSION_KEY, UNKNOWN_STEP_OP
from openmsmq.remote.packed import PACKED_V1
from openmsmq.remote.status import QMStatus, status_from_pb
from openmsmq.wire.ids import ObjectId

log = logging.getLogger(__name__)

#: Longest :meth:`GrpcTransport.close` waits for gRPC's teardown (see there).
CLOSE_WAIT = 10.0

__all__ = ["GrpcTransport", "error_from_rpc"]

R = TypeVar("R")

#: Largest request sent (the server accepts 16 × 4 MiB + 1 MiB).
MAX_REQUEST_BYTES = 65 * 1024 * 1024

#: Bytes a StepRequest adds around a SendRequest it carries (with the lead ops of the
#: consumer loop, a few aborts), kept free below :data:`MAX_REQUEST_BYTES`.
_STEP_FRAMING = 4096

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


def _outgoing(m: OutgoingMessage) -> pb.OutgoingMessage:
    check_outgoing(m)
    if not 0 <= m.priority <= INFINITE:  # a uint32 field; its range 0..7 is the server's check
        raise MQError(HResult.MQ_ERROR_ILLEGAL_PROPERTY_VALUE, "priority must be a u32")
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
    pings (default: a third of the server's session timeout). ``steps`` (``?steps=0``):
    False sends every call as a call of its own instead of over the step stream;
    ``prefetch`` (``?prefetch=0``): False makes commits take no message ahead
    (:mod:`openmsmq.client.grpc_steps`).
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
        steps: bool | None = None,
        prefetch: bool | None = None,
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
        off = ("0", "false", "no")
        if steps is None:
            steps = query.get("steps", "1").lower() not in off
        if prefetch is None:
            prefetch = steps and query.get("prefetch", "1").lower() not in off
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
        #: Read, StartReceive, EndReceive, Send, Commit and Abort over one stream (grpc_steps).
        self._steps = StepStream(lambda it: self._stub.Steps(it, metadata=self._md), error_from_rpc)
        self._steps.supported = steps
        #: False once the server answered a send op as unknown (it predates it).
        self._send_steps = True
        self._ahead = ConsumerAhead(
            self._steps,
            self._request_ids,
            grpc_replies.messages,
            prefetch=prefetch,
            cleanup=first.pending_cleanup,
        )
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

    def _call(self, method: Callable[..., R], request: Any, step: str = "") -> R:
        """Call ``method``; an op the step stream carries (``step``: its StepOp field)
        goes over the stream when it is free. Whatever the consumer loop owes or holds
        ahead is settled first (grpc_steps)."""
        if self._closed:
            raise connection_closed()
        if self._steps.supported and self._steps.acquire():
            try:
                if self._ahead.busy:
                    self._ahead.settle()
                if step:
                    return self._step(step, request)  # type: ignore[no-any-return]
            except StepsUnsupported:
                pass  # a server without the stream: the unary call below
            finally:
                self._steps.lock.release()
        try:
            return method(request, metadata=self._md)
        except grpc.RpcError as exc:
            raise error_from_rpc(exc) from None

    def _step(self, kind: str, request: Any) -> Any:
        """One op over the step stream (caller holds its lock); its reply as the rpc's."""
        lead = self._ahead.lead_ops()
        results = self._steps.exchange([*lead, pb.StepOp(**{kind: request})])
        res = results[-1]
        if len(results) <= len(lead):  # a lead op failed (the session is gone)
            raise failure(res)
        if kind == "end_receive" and len(res.end_receive.status) == len(request.request_ids):
            return res.end_receive  # per-id statuses, as the EndReceive rpc answers
        unknown = res.hresult == HResult.MQ_ERROR_INVALID_PARAMETER and res.details == UNKNOWN_STEP_OP
        if kind == "send" and unknown:
            self._send_steps = False  # a server older than sends on the stream: it ran nothing
            raise StepsUnsupported
        if res.hresult:
            raise failure(res)
        if kind == "send":
            return res.send
        return res.read if kind in ("read", "start_receive") else pb.Empty()

    def _claim(
        self, handle: int, uow: bytes, kind: str, wait: bool = True, max_count: int = 1
    ) -> tuple[int, list[Message]] | None:
        """The messages the last commit took ahead (grpc_steps) for the first op of the new
        transaction ``uow``, a receive of ``max_count`` from ``handle``'s head, if any."""
        if uow not in self._fresh:
            return None
        if not (self._steps.acquire() if wait else self._steps.lock.acquire(blocking=False)):
            return None
        try:
            got = self._ahead.claim(handle, uow, kind, max_count)
            if got is not None:
                self._fresh.discard(uow)  # carried by the transaction begun ahead
            return got
        finally:
            self._steps.lock.release()

    def _wire(self, tx: TransactionId | None) -> bytes:
        """The XACTUOW that carries ``tx`` on the wire (grpc_steps: maybe one begun ahead)."""
        return self._ahead.server_uow(_uow(tx))

    def _call_tx(self, method: Callable[..., R], request: Any, uow: bytes, step: str = "") -> R:
        """:meth:`_call` for a request carrying transaction ``uow``. The server creates a
        transaction it does not know on a receive or send (MS-MQRR 3.1.4.13 step 6), so the
        first call carrying a fresh transaction begins it there; once one succeeded the
        transaction is known. After a failed first call it may or may not exist there:
        :meth:`_settle` makes sure it does."""
        if not uow or uow not in self._fresh:
            return self._call(method, request, step)
        try:
            reply = self._call(method, request, step)
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
        req = pb.SendRequest(
            handle=handle, transaction=self._wire(tx), messages=[_outgoing(m) for m in messages]
        )
        if req.ByteSize() > MAX_REQUEST_BYTES:
            raise MQError(
                HResult.MQ_ERROR_INSUFFICIENT_RESOURCES,
                f"a send of {req.ByteSize()} bytes exceeds {MAX_REQUEST_BYTES}: send fewer messages per call",
            )
        self._ahead.note(req.transaction, 0)
        # Over the step stream when it is free, as the unary call otherwise; one close to
        # the size limit goes unary (the op's framing must not push it over).
        step = "send" if self._send_steps and req.ByteSize() <= MAX_REQUEST_BYTES - _STEP_FRAMING else ""
        reply = self._call_tx(self._stub.Send, req, req.transaction, step)
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
            raise too_few("max_count", max_count)
        # A receive from the head, of one message or a batch: the commit of a transaction
        # that did only this takes the same receive ahead (grpc_steps).
        head = action == ReadAction.RECEIVE and not lookup_id and not cursor
        if head and tx is not None and (got := self._claim(handle, _uow(tx), "read", True, max_count)):
            return got[1]
        uow = self._wire(tx)
        req = pb.ReadRequest(
            handle=handle, action=int(action), lookup_id=lookup_id, cursor=cursor,
            timeout_ms=_timeout_ms(timeout), transaction=uow, max_count=max_count,
            reply_format=PACKED_V1,
        )  # fmt: skip
        self._ahead.note(uow, handle if head else 0, "read", max_count)
        return grpc_replies.messages(self._call_tx(self._stub.Read, req, uow, "read"))

    def start_receive(
        self,
        handle: int,
        action: ReadAction = ReadAction.RECEIVE,
        *,
        lookup_id: int = 0,
        timeout: float | None = 0.0,
        tx: TransactionId | None = None,
    ) -> PendingMessage:
        check_two_phase(action)
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
            raise too_few("max_count", max_count)
        head = action == ReadAction.RECEIVE and not lookup_id and not cursor and max_count == 1
        if head and tx is not None and (got := self._claim(handle, _uow(tx), "start")) is not None:
            return [PendingMessage(got[0], got[1][0], True)]
        uow = self._wire(tx)
        req = pb.ReadRequest(
            handle=handle, action=int(action), lookup_id=lookup_id, cursor=cursor,
            timeout_ms=_timeout_ms(timeout), transaction=uow, max_count=max_count,
            request_id=self._request_ids(max_count), reply_format=PACKED_V1,
        )  # fmt: skip
        self._ahead.note(uow, handle if head else 0, "start")
        reply = self._call_tx(self._stub.StartReceive, req, uow, "start_receive")
        got_all = grpc_replies.pending(reply, tx is not None)
        if head and uow and len(got_all) == 1:
            self._ahead.started(uow, handle, got_all[0].request_id)
        return got_all

    def ready_receive(self, handle: int, tx: TransactionId) -> PendingMessage | None:
        got = self._claim(handle, _uow(tx), "start", wait=False)  # an event loop may call it
        return None if got is None else PendingMessage(got[0], got[1][0], True)

    def hold_end(self, handle: int, request_id: int, ack: Ack, transactional: bool | None = None) -> bool:
        if transactional is False or not self._steps.lock.acquire(blocking=False):
            return False
        try:  # an RR_ACK of a transactional receive travels with its commit (grpc_steps)
            return self._ahead.defer_ack(handle, [request_id], int(ack))
        finally:
            self._steps.lock.release()

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
        if len(request_ids) == 1 and self.hold_end(handle, request_ids[0], ack, transactional):
            return [0]
        method = {None: pb.END_METHOD_UNSPECIFIED, False: pb.END_RECEIVE, True: pb.END_TRANSACTIONAL_RECEIVE}
        req = pb.EndReceiveRequest(
            handle=handle, ack=int(ack), request_ids=list(request_ids), method=method[transactional]
        )
        return list(self._call(self._stub.EndReceive, req, "end_receive").status)

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
        uow = self._wire(tx)
        self._ahead.note(uow, 0)
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
            raise too_few("n", n)
        req = pb.NthLookupIdRequest(queue=queue, after=after, n=n, through=through)
        lookup_id: int = self._call(self._stub.NthLookupId, req).lookup_id
        return lookup_id

    def peek_range(
        self, queue: str, after: int = 0, through: int | None = None, max_count: int = 1000
    ) -> list[Message]:
        if max_count < 1:
            raise too_few("max_count", max_count)
        req = pb.PeekRangeRequest(
            queue=queue, after=after, through=through, max_count=max_count, reply_format=PACKED_V1
        )
        return grpc_replies.messages(self._call(self._stub.PeekRange, req))

    def peek_range_packed(
        self, queue: str, after: int = 0, through: int | None = None, max_count: int = 1000
    ) -> bytes | None:
        """:meth:`peek_range` as the packed blob of the reply (:mod:`openmsmq.remote.packed`),
        for callers that decode it into columns themselves (the Spark source); None if
        the server answered in the ``repeated Message`` form instead."""
        if max_count < 1:
            raise too_few("max_count", max_count)
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
            raise connection_closed()
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
            self._end_tx(self._ahead.forget(uow), commit=True)

    def abort(self, tx: TransactionId) -> None:
        uow = tx.uow.bytes
        if not self._end_here(uow):
            self._end_tx(self._ahead.forget(uow), commit=False)

    def _end_tx(self, uow: bytes, *, commit: bool) -> None:
        """Commit or abort ``uow`` over the step stream (with what the consumer loop owes
        it, and the next receive ahead), or with the unary call when the stream is busy."""
        if self._closed:
            raise connection_closed()
        if self._steps.supported and self._steps.acquire():
            try:
                if commit:
                    self._ahead.commit(uow)
                else:
                    self._ahead.abort(uow)
                return
            except StepsUnsupported:
                pass
            finally:
                self._steps.lock.release()
        self._ahead.take(uow)
        rpc = self._stub.Commit if commit else self._stub.Abort
        self._call(rpc, pb.TransactionRequest(transaction=uow))

    # ---- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        """End the session (the server closes its handles and aborts its transactions)
        and close the channel."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        # The teardown runs on its own thread, waited for at most CLOSE_WAIT: a
        # KeyboardInterrupt that reached the main thread inside grpc's own code can leave a
        # call's internal lock held, and cancelling that call would then block forever.
        # The server's session rundown (MS-MQRR 3.1.6) ends whatever the teardown leaves.
        done = threading.Thread(target=self._teardown, name="openmsmq-grpc-close", daemon=True)
        done.start()
        done.join(CLOSE_WAIT)
        if done.is_alive():
            log.warning(
                "closing the remote-read connection did not finish within %.0f s; the server"
                " ends the session when the process exits", CLOSE_WAIT,
            )  # fmt: skip

    def _teardown(self) -> None:
        if self._steps.supported and self._steps.acquire():
            try:
                self._ahead.release()  # before the session's end, which would count it
            finally:
                self._steps.lock.release()
        self._ahead.close()
        self._steps.drop()
        self._stop.put(None)
        self._reader.join(timeout=5.0)  # the stream ends after the server's rundown
        self._channel.close()

    def __enter__(self) -> GrpcTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
