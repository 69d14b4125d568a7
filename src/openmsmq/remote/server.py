"""The remote-read gRPC service: :class:`RemoteServer` serves a :class:`RemoteReadCore`.

The service runs a ``grpc.aio`` server on an asyncio loop of its own thread. Each call
is authenticated (bearer token, :mod:`openmsmq.remote.auth`), bound to its session,
and run in a worker thread: short operations in a small pool, receives that may wait
in a large separate pool, so a waiting receive never delays anyone else's call. A
cancelled call (deadline, client gone) stops its wait. Failures travel as the MSMQ
HRESULT in the trailing metadata ``openmsmq-hresult`` (8 hex digits) with a fitting
gRPC status code; an unexpected exception becomes MQ_ERROR for that call only.

    server = start_remote_server(qm, config)      # binds config.remote.listen_address:port
    ...
    server.stop()
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

import grpc
import grpc.aio

from openmsmq.errors import HResult, LimitError, MQError
from openmsmq.observability.refusals import Refusals
from openmsmq.observability.sink import NULL_METRICS, MetricsSink
from openmsmq.qm import MAX_MESSAGE_BYTES, QueueManager, QueueRecord, QueueType
from openmsmq.remote import admin, range_calls, steps
from openmsmq.remote import openmsmq_remote_pb2 as pb
from openmsmq.remote import openmsmq_remote_pb2_grpc as pb_grpc
from openmsmq.remote.auth import ALLOW_ALL, Principal, TokenTable, load_tokens
from openmsmq.remote.codes import HRESULT_KEY, SESSION_KEY
from openmsmq.remote.core import RemoteReadCore, RemoteSession
from openmsmq.remote.limits import RemoteLimits, check_count
from openmsmq.remote.packed import PACKED_V1
from openmsmq.remote.pending import MAX_PENDING_BYTES, MAX_TOTAL_PENDING_BYTES
from openmsmq.remote.status import TransferSnapshot, collect_status, status_to_pb
from openmsmq.remote.steps import message_to_pb, read_reply, record_from_pb
from openmsmq.remote.stream_worker import StreamWorkers, default_event_loop

__all__ = [
    "HRESULT_KEY",
    "SESSION_KEY",
    "RemoteServer",
    "message_to_pb",
    "read_reply",
    "start_remote_server",
    "status_for",
]

log = logging.getLogger("openmsmq.remote")

T = TypeVar("T")

#: Largest request the server accepts (a batch of sends); larger gets RESOURCE_EXHAUSTED.
MAX_REQUEST_BYTES = 16 * MAX_MESSAGE_BYTES + (1 << 20)

_INFINITE = 0xFFFFFFFF
_KIND = {QueueType.PRIVATE: "private", QueueType.SYSTEM: "system", QueueType.JOURNAL: "journal",
         QueueType.OUTGOING: "outgoing", QueueType.SUBQUEUE: "subqueue"}  # fmt: skip

_STATUS: dict[int, grpc.StatusCode] = {
    HResult.MQ_ERROR_INVALID_PARAMETER: grpc.StatusCode.INVALID_ARGUMENT,
    HResult.STATUS_INVALID_PARAMETER: grpc.StatusCode.INVALID_ARGUMENT,
    HResult.MQ_ERROR_ILLEGAL_PROPERTY_VALUE: grpc.StatusCode.INVALID_ARGUMENT,
    HResult.MQ_ERROR_ILLEGAL_PROPERTY_SIZE: grpc.StatusCode.INVALID_ARGUMENT,
    HResult.MQ_ERROR_ILLEGAL_FORMATNAME: grpc.StatusCode.INVALID_ARGUMENT,
    HResult.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME: grpc.StatusCode.INVALID_ARGUMENT,
    HResult.MQ_ERROR_LABEL_TOO_LONG: grpc.StatusCode.INVALID_ARGUMENT,
    HResult.MQ_ERROR_QUEUE_NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    HResult.MQ_ERROR_MESSAGE_NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    HResult.STATUS_NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    HResult.MQ_ERROR_QUEUE_EXISTS: grpc.StatusCode.ALREADY_EXISTS,
    HResult.MQ_ERROR_ACCESS_DENIED: grpc.StatusCode.PERMISSION_DENIED,
    HResult.STATUS_ACCESS_DENIED: grpc.StatusCode.PERMISSION_DENIED,
    HResult.MQ_ERROR_IO_TIMEOUT: grpc.StatusCode.DEADLINE_EXCEEDED,
    HResult.MQ_ERROR_OPERATION_CANCELLED: grpc.StatusCode.CANCELLED,
    HResult.MQ_ERROR_INSUFFICIENT_RESOURCES: grpc.StatusCode.RESOURCE_EXHAUSTED,
    HResult.MQ_ERROR_MESSAGE_STORAGE_FAILED: grpc.StatusCode.UNAVAILABLE,
    HResult.MQ_ERROR_SERVICE_NOT_AVAILABLE: grpc.StatusCode.UNAVAILABLE,
    HResult.MQ_ERROR: grpc.StatusCode.INTERNAL,
}


def status_for(hresult: int) -> grpc.StatusCode:
    """The gRPC status code a failure HRESULT travels with (docs/remote.md)."""
    return _STATUS.get(int(hresult), grpc.StatusCode.FAILED_PRECONDITION)


#: Most allowed senders a queue created remotely may list.
MAX_ALLOWED_SENDERS = 1000

#: The rule a refusal is counted under when no LimitError names one.
_RULE_BY_HRESULT: dict[int, str] = {
    HResult.MQ_ERROR_ACCESS_DENIED: "permission",
    HResult.STATUS_ACCESS_DENIED: "permission",
    HResult.MQ_ERROR_INSUFFICIENT_RESOURCES: "resources",
}


def _done(fn: Callable[[RemoteSession], object]) -> Callable[[RemoteSession, threading.Event], pb.Empty]:
    """Wrap a call that returns nothing so that it answers :class:`Empty`."""

    def run(s: RemoteSession, _cancel: threading.Event) -> pb.Empty:
        fn(s)
        return pb.Empty()

    run.__qualname__ = fn.__qualname__  # names the rpc in refusal logs
    return run


class _CallError(Exception):
    def __init__(self, hresult: int, message: str, code: grpc.StatusCode | None = None) -> None:
        super().__init__(message)
        self.hresult = int(hresult)
        self.message = message
        self.code = code or status_for(hresult)
        #: The rule that refused the call (a setting, ``token``), for the refusal's log and count.
        self.rule: str | None = None


# ---- value mapping ---------------------------------------------------------------------------


def queue_info_to_pb(r: QueueRecord) -> pb.QueueInfo:
    """A queue record as the protobuf :class:`QueueInfo`."""
    return pb.QueueInfo(
        path=r.display_name, kind=_KIND.get(r.queue_type, str(r.queue_type)),
        transactional=r.transactional, label=r.label, quota_kb=r.quota_kb, journal=r.journal,
        journal_quota_kb=r.journal_quota_kb, private_number=r.private_number,
        created_time=r.created_time, modify_time=r.modify_time, message_count=r.msg_count,
        total_bytes=r.total_bytes, destination=r.destination_format_name or "",
        allowed_senders=r.allowed_senders.split(",") if r.allowed_senders else [],
        retry_policy=r.retry_policy,
    )  # fmt: skip


# ---- the servicer ----------------------------------------------------------------------------


class _Servicer(pb_grpc.RemoteReadServicer):
    """One method per rpc; each is a thin shell around :class:`RemoteReadCore`."""

    def __init__(self, core: RemoteReadCore, tokens: TokenTable | None, pool: ThreadPoolExecutor,
                 wait_pool: ThreadPoolExecutor, refusals: Refusals,
                 stream_workers: StreamWorkers) -> None:  # fmt: skip
        self.core = core
        self.stream_workers = stream_workers
        self.tokens = tokens
        self.pool = pool
        self.wait_pool = wait_pool
        self.refusals = refusals
        #: Returns the live-transfer-state provider (see RemoteServer.status_provider).
        self.status_provider: Callable[[], Callable[[], TransferSnapshot] | None] = lambda: None
        #: Returns the incoming-sequence resetter (see RemoteServer.sequence_resetter).
        self.sequence_resetter: Callable[[], SequenceResetter | None] = lambda: None
        #: Returns the outgoing-queue control (see RemoteServer.outgoing_control).
        self.outgoing_control: Callable[[], admin.OutgoingControl | None] = lambda: None

    # ---- plumbing ------------------------------------------------------------------------

    def _principal(self, context: grpc.aio.ServicerContext[Any, Any]) -> Principal:
        if self.tokens is None:
            return ALLOW_ALL
        token = None
        for key, value in context.invocation_metadata() or ():
            if key == "authorization" and isinstance(value, str) and value.lower().startswith("bearer "):
                token = value[7:].strip()
        principal = self.tokens.authenticate(token)
        if principal is None:
            error = _CallError(
                HResult.MQ_ERROR_ACCESS_DENIED,
                "missing or unknown bearer token",
                grpc.StatusCode.UNAUTHENTICATED,
            )
            error.rule = "token"
            raise error
        return principal

    def _refused(self, context: Any, rpc: str, error: _CallError, principal: Principal | None) -> None:
        """Log and count a refusal (a limit, a permission, a token); other failures are the
        caller's business (a queue not found, a timeout)."""
        rule = error.rule or _RULE_BY_HRESULT.get(error.hresult)
        if rule is None:
            return
        who = str(context.peer() or "?")
        if principal is not None:
            who += f" ({principal.name})"
        self.refusals.refused(rule, who, rpc, error.message)

    def _session(self, context: grpc.aio.ServicerContext[Any, Any], principal: Principal) -> RemoteSession:
        sid = None
        for key, value in context.invocation_metadata() or ():
            if key == SESSION_KEY and isinstance(value, str):
                sid = value
        if not sid:
            raise _CallError(
                HResult.MQ_ERROR_INVALID_PARAMETER, f"no {SESSION_KEY} metadata: open a Session first"
            )
        return self.core.session(sid, principal)

    async def _run(
        self,
        context: grpc.aio.ServicerContext[Any, Any],
        fn: Callable[[RemoteSession, threading.Event], T],
        *,
        waits: bool = False,
    ) -> T:
        """Authenticate, find the session, run ``fn`` in a worker; failures → status + HRESULT."""
        cancel = threading.Event()
        error: _CallError
        principal: Principal | None = None
        try:
            principal = self._principal(context)
            session = self._session(context, principal)
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self.wait_pool if waits else self.pool, fn, session, cancel)
        except asyncio.CancelledError:
            cancel.set()  # the client went away or its deadline passed: stop waiting
            raise
        except _CallError as exc:
            error = exc
        except MQError as exc:
            error = _CallError(exc.hresult, exc.message or str(exc))
            if isinstance(exc, LimitError):
                error.rule = exc.limit
        except Exception as exc:  # a bug must fail this call only, never the server
            log.exception("remote-read call failed")
            error = _CallError(HResult.MQ_ERROR, f"internal error: {type(exc).__name__}")
        # The rpc's name, from the function each method passes (…Servicer.Send.<locals>.fn).
        rpc = fn.__qualname__.split(".<locals>", 1)[0].rsplit(".", 1)[-1]
        self._refused(context, rpc, error, principal)
        await context.abort(
            error.code, error.message, trailing_metadata=((HRESULT_KEY, f"{error.hresult:08X}"),)
        )
        raise AssertionError("unreachable")  # pragma: no cover

    # ---- session -------------------------------------------------------------------------

    async def Session(
        self, request_iterator: AsyncIterator[pb.SessionPing], context: grpc.aio.ServicerContext[Any, Any]
    ) -> None:
        try:
            principal = self._principal(context)
        except _CallError as exc:
            self._refused(context, "Session", exc, None)
            await context.abort(
                exc.code, exc.message, trailing_metadata=((HRESULT_KEY, f"{exc.hresult:08X}"),)
            )
            return
        session = self.core.open_session(principal)
        context.add_done_callback(lambda _ctx: self.core.close_session(session.id))
        try:
            await context.write(
                pb.SessionPong(
                    session_id=session.id,
                    session_timeout=self.core.session_timeout,
                    pending_cleanup=self.core.cleanup_timeout,
                )
            )
            while True:
                ping = await context.read()
                if ping is grpc.aio.EOF:
                    break
                self.core.touch(session)
                await context.write(pb.SessionPong(seq=ping.seq))
        finally:
            # Stream gone (client closed, crashed or unreachable): the rundown of MS-MQRR 3.1.6.
            self.core.close_session(session.id)

    # ---- handles -------------------------------------------------------------------------

    async def OpenQueue(self, request: pb.OpenQueueRequest, context: Any) -> pb.OpenQueueReply:
        def fn(s: RemoteSession, _c: threading.Event) -> pb.OpenQueueReply:
            return pb.OpenQueueReply(
                handle=self.core.open_queue(s, request.queue, request.access, request.share_mode)
            )

        return await self._run(context, fn)

    async def CloseQueue(self, request: pb.HandleRequest, context: Any) -> pb.Empty:
        return await self._run(context, _done(lambda s: self.core.close_queue(s, request.handle)))

    async def CreateCursor(self, request: pb.HandleRequest, context: Any) -> pb.CreateCursorReply:
        return await self._run(
            context, lambda s, _c: pb.CreateCursorReply(cursor=self.core.create_cursor(s, request.handle))
        )

    async def CloseCursor(self, request: pb.CloseCursorRequest, context: Any) -> pb.Empty:
        return await self._run(
            context, _done(lambda s: self.core.close_cursor(s, request.handle, request.cursor))
        )

    async def PurgeQueue(self, request: pb.HandleRequest, context: Any) -> pb.PurgeReply:
        return await self._run(context, lambda s, _c: pb.PurgeReply(count=self.core.purge(s, request.handle)))

    # ---- receiving -----------------------------------------------------------------------

    async def Read(self, request: pb.ReadRequest, context: Any) -> pb.ReadReply:
        def fn(s: RemoteSession, cancel: threading.Event) -> pb.ReadReply:
            return steps.read(self.core, s, request, cancel)

        return await self._run(context, fn, waits=request.timeout_ms != 0)

    async def StartReceive(self, request: pb.ReadRequest, context: Any) -> pb.ReadReply:
        def fn(s: RemoteSession, cancel: threading.Event) -> pb.ReadReply:
            return steps.start_receive(self.core, s, request, cancel)

        return await self._run(context, fn, waits=request.timeout_ms != 0)

    async def CancelReceive(self, request: pb.CancelReceiveRequest, context: Any) -> pb.Empty:
        return await self._run(
            context, _done(lambda s: self.core.receives.cancel_receive(s, request.handle, request.request_id))
        )

    async def EndReceive(self, request: pb.EndReceiveRequest, context: Any) -> pb.EndReceiveReply:
        def fn(s: RemoteSession, _c: threading.Event) -> pb.EndReceiveReply:
            return steps.end_receive(self.core, s, request)

        return await self._run(context, fn)

    async def SetUserAcknowledgementClass(self, request: pb.SetAckClassRequest, context: Any) -> pb.Empty:
        def fn(s: RemoteSession, _c: threading.Event) -> pb.Empty:
            self.core.set_ack_class(
                s, request.handle, request.transaction, request.lookup_id, request.message_class
            )
            return pb.Empty()

        return await self._run(context, fn)

    async def MoveMessage(self, request: pb.MoveMessageRequest, context: Any) -> pb.MoveMessageReply:
        def fn(s: RemoteSession, _c: threading.Event) -> pb.MoveMessageReply:
            after = request.return_after or None
            lid = self.core.move(s, request.handle, request.transaction, request.lookup_id, request.to, after)
            return pb.MoveMessageReply(lookup_id=lid)

        return await self._run(context, fn)

    # ---- sending and transactions --------------------------------------------------------

    async def Send(self, request: pb.SendRequest, context: Any) -> pb.SendReply:
        def fn(s: RemoteSession, _c: threading.Event) -> pb.SendReply:
            return steps.send(self.core, s, request)

        return await self._run(context, fn)

    async def BeginTransaction(self, request: pb.TransactionRequest, context: Any) -> pb.TransactionRequest:
        return await self._run(
            context, lambda s, _c: pb.TransactionRequest(transaction=self.core.begin(s, request.transaction))
        )

    async def Commit(self, request: pb.TransactionRequest, context: Any) -> pb.Empty:
        def fn(s: RemoteSession, _c: threading.Event) -> pb.Empty:
            return steps.commit(self.core, s, request)

        return await self._run(context, fn)

    async def Abort(self, request: pb.TransactionRequest, context: Any) -> pb.Empty:
        def fn(s: RemoteSession, _c: threading.Event) -> pb.Empty:
            return steps.abort(self.core, s, request)

        return await self._run(context, fn)

    async def Steps(
        self, request_iterator: AsyncIterator[pb.StepRequest], context: grpc.aio.ServicerContext[Any, Any]
    ) -> None:
        """The step stream (openmsmq.remote.steps): authenticated and bound to its session
        once, at its opening; each request runs in one worker hop and is answered in order."""
        principal: Principal | None = None
        try:
            principal = self._principal(context)
            session = self._session(context, principal)
        except (_CallError, MQError) as exc:
            err = exc if isinstance(exc, _CallError) else _CallError(exc.hresult, exc.message or str(exc))
            self._refused(context, "Steps", err, principal)
            trailer = ((HRESULT_KEY, f"{err.hresult:08X}"),)
            await context.abort(err.code, err.message, trailing_metadata=trailer)
            return
        who = principal

        def refused(rpc: str, exc: MQError) -> None:
            error = _CallError(exc.hresult, exc.message or str(exc))
            if isinstance(exc, LimitError):
                error.rule = exc.limit
            self._refused(context, rpc, error, who)

        loop = asyncio.get_running_loop()
        cancel = threading.Event()
        # The stream's requests run one after the other: in a thread of the stream's own
        # while there are threads to spare (openmsmq.remote.stream_worker), else in the pools.
        worker = self.stream_workers.open(loop)
        try:
            while True:
                request = await context.read()
                if request is grpc.aio.EOF:
                    return
                args = (self.core, session.id, principal, request, cancel, refused)
                if worker is not None:
                    reply = await worker.run(steps.run_steps, *args)
                else:
                    pool = self.wait_pool if steps.waits(request) else self.pool
                    reply = await loop.run_in_executor(pool, steps.run_steps, *args)
                await context.write(reply)
        except asyncio.CancelledError:
            cancel.set()  # the client went away: stop a waiting receive
            raise
        finally:
            if worker is not None:
                worker.stop()

    # ---- administration ------------------------------------------------------------------

    async def CreateQueue(self, request: pb.CreateQueueRequest, context: Any) -> pb.QueueInfo:
        def fn(s: RemoteSession, _c: threading.Event) -> pb.QueueInfo:
            quota = request.quota_kb if request.HasField("quota_kb") else None  # the QM's default
            jquota = request.journal_quota_kb if request.HasField("journal_quota_kb") else _INFINITE
            if request.allowed_senders:
                check_count(len(request.allowed_senders), MAX_ALLOWED_SENDERS, "allowed senders", "senders")
            rec = self.core.create_queue(
                s, request.path, transactional=request.transactional, label=request.label,
                quota_kb=quota, journal=request.journal, journal_quota_kb=jquota,
                allowed_senders=list(request.allowed_senders),
            )  # fmt: skip
            return queue_info_to_pb(self.core.queue_info(s, rec.name))

        return await self._run(context, fn)

    async def DeleteQueue(self, request: pb.QueueName, context: Any) -> pb.Empty:
        return await self._run(context, _done(lambda s: self.core.delete_queue(s, request.name)))

    async def ListQueues(self, request: pb.ListQueuesRequest, context: Any) -> pb.ListQueuesReply:
        def fn(s: RemoteSession, _c: threading.Event) -> pb.ListQueuesReply:
            recs = self.core.list_queues(s, request.include_system)
            return pb.ListQueuesReply(queues=[queue_info_to_pb(r) for r in recs])

        return await self._run(context, fn)

    async def GetQueueInfo(self, request: pb.QueueName, context: Any) -> pb.QueueInfo:
        return await self._run(context, lambda s, _c: queue_info_to_pb(self.core.queue_info(s, request.name)))

    # ---- LookupIdentifier ranges (openmsmq.remote.range_calls) --------------------------------

    async def LookupRanges(self, request: pb.LookupRangesRequest, context: Any) -> pb.LookupRangesReply:
        def fn(s: RemoteSession, _c: threading.Event) -> pb.LookupRangesReply:
            queries = [
                (q.queue, q.after, q.through if q.HasField("through") else None) for q in request.queries
            ]
            found = range_calls.lookup_ranges(
                self.core.qm, s.principal, queries, self.core.limits, with_bytes=request.with_bytes
            )
            return pb.LookupRangesReply(
                ranges=[
                    pb.LookupRangeResult(bytes=0 if request.with_bytes else None)
                    if r is None
                    else pb.LookupRangeResult(first=r.first, last=r.last, count=r.count, bytes=r.bytes)
                    for r in found
                ]
            )

        return await self._run(context, fn)

    async def NthLookupId(self, request: pb.NthLookupIdRequest, context: Any) -> pb.NthLookupIdReply:
        def fn(s: RemoteSession, _c: threading.Event) -> pb.NthLookupIdReply:
            through = request.through if request.HasField("through") else None
            lid = range_calls.nth_lookup_id(
                self.core.qm, s.principal, request.queue, request.after, request.n, through
            )
            return pb.NthLookupIdReply(lookup_id=lid)

        return await self._run(context, fn)

    async def PeekRange(self, request: pb.PeekRangeRequest, context: Any) -> pb.ReadReply:
        def fn(s: RemoteSession, _c: threading.Event) -> pb.ReadReply:
            through = request.through if request.HasField("through") else None
            args = (self.core.qm, s.principal, request.queue, request.after, through, request.max_count,
                    self.core.limits)  # fmt: skip
            if request.reply_format == PACKED_V1:
                packed = range_calls.peek_range_packed(*args)
                if packed is not None:
                    return pb.ReadReply(packed=packed)
            return read_reply(range_calls.peek_range(*args), request.reply_format)

        return await self._run(context, fn)

    async def RemoveThrough(self, request: pb.RemoveThroughRequest, context: Any) -> pb.RemoveThroughReply:
        def fn(s: RemoteSession, _c: threading.Event) -> pb.RemoveThroughReply:
            count = range_calls.remove_through(
                self.core.qm, s.principal, dict(request.positions), self.core.limits
            )
            return pb.RemoveThroughReply(count=count)

        return await self._run(context, fn)

    async def SendIdempotent(self, request: pb.SendIdempotentRequest, context: Any) -> pb.SendIdempotentReply:
        def fn(s: RemoteSession, _c: threading.Event) -> pb.SendIdempotentReply:
            if request.messages:  # before the messages are converted
                self.core.limits.messages(len(request.messages), "messages")
            records = [record_from_pb(o) for o in request.messages]
            got = range_calls.send_idempotent(
                self.core.qm, s.principal, request.queue, records, list(request.identities), self.core.limits
            )
            return pb.SendIdempotentReply(lookup_ids=[lid or 0 for lid in got])

        return await self._run(context, fn)

    # ---- status (openmsmq status) --------------------------------------------------------

    async def Status(self, request: pb.Empty, context: Any) -> pb.StatusReply:
        def fn(s: RemoteSession, _c: threading.Event) -> pb.StatusReply:
            provider = self.status_provider()
            snapshot = provider() if provider is not None else None
            principal = s.principal
            st = collect_status(
                self.core.qm, time.time(), snapshot,
                visible=lambda name: bool(principal.permissions(name)),
                show_incoming=principal.is_admin, running=True,
                clock_offset=None if snapshot is not None else time.time() - time.monotonic(),
            )  # fmt: skip
            return status_to_pb(st)

        return await self._run(context, fn)

    async def ResetIncomingSequence(
        self, request: pb.ResetSequenceRequest, context: Any
    ) -> pb.ResetSequenceReply:
        def fn(s: RemoteSession, _c: threading.Event) -> pb.ResetSequenceReply:
            if not s.principal.is_admin:
                raise MQError(HResult.MQ_ERROR_ACCESS_DENIED, "resetting an incoming sequence needs admin")
            resetter = self.sequence_resetter()
            if resetter is None:
                raise MQError(HResult.MQ_ERROR_SERVICE_NOT_AVAILABLE, "no MS-MQQB transfer runs in this QM")
            try:
                source = uuid.UUID(request.source_qm)
            except ValueError:
                raise MQError(
                    HResult.MQ_ERROR_INVALID_PARAMETER, f"{request.source_qm!r} is not a QM GUID"
                ) from None
            before, after = resetter(
                source, request.destination, request.tx_sequence_id, request.tx_sequence_number
            )
            return pb.ResetSequenceReply(
                before_tx_sequence_id=before[0], before_tx_sequence_number=before[1],
                after_tx_sequence_id=after[0], after_tx_sequence_number=after[1],
            )  # fmt: skip

        return await self._run(context, fn)

    # ---- administration (openmsmq.remote.admin) ------------------------------------------

    async def SetQueueProperties(self, request: pb.SetQueuePropertiesRequest, context: Any) -> pb.QueueInfo:
        changes: dict[str, Any] = {
            field: getattr(request, field)
            for field in ("label", "quota_kb", "journal", "journal_quota_kb", "base_priority", "retry_policy")
            if request.HasField(field)
        }
        if request.set_allowed_senders:
            changes["allowed_senders"] = list(request.allowed_senders)

        def fn(s: RemoteSession, _c: threading.Event) -> pb.QueueInfo:
            return queue_info_to_pb(
                admin.set_queue_properties(self.core.qm, s.principal, request.name, changes)
            )

        return await self._run(context, fn)

    async def SetOutgoingState(self, request: pb.OutgoingStateRequest, context: Any) -> pb.QueueInfo:
        def fn(s: RemoteSession, _c: threading.Event) -> pb.QueueInfo:
            rec = admin.set_outgoing_state(
                self.core.qm, s.principal, request.format_name, request.suspended, self.outgoing_control()
            )
            return queue_info_to_pb(rec)

        return await self._run(context, fn)


#: Resets an incoming sequence of the running transfer: (sender QM, destination as listed,
#: TxSequenceID, TxSequenceNumber; 0, 0 forgets it) -> its (ID, number) before and after.
SequenceResetter = Callable[[uuid.UUID, str, int, int], tuple[tuple[int, int], tuple[int, int]]]


# ---- the server ------------------------------------------------------------------------------


class RemoteServer:
    """The remote-read service on ``host:port`` (port 0 = any free port; see :attr:`port`).

    ``tokens``: a :class:`TokenTable` (None = every caller allowed; keep it on loopback).
    ``tls``: (certificate chain PEM, private key PEM) bytes for TLS. ``cleanup_timeout``:
    the Pending Request Cleanup Timer (s). ``session_timeout``: a session without a ping
    for this long ends (s). ``max_pending_bytes`` / ``max_total_pending_bytes``: what one
    session / all sessions may hold in receives started and not ended (RemoteReadCore).
    ``limits``: the bounds of every count a call carries (RemoteLimits). ``metrics``:
    where refused calls are counted (:meth:`MetricsSink.count_refused`).
    ``event_loop``: makes the service's event loop (default :func:`default_event_loop`).
    ``wait_workers``: threads for receives that wait. ``stream_workers``: step streams
    that get a thread of their own (a stream beyond them uses the two pools; 0: every one does).
    """

    def __init__(
        self,
        qm: QueueManager,
        *,
        host: str = "127.0.0.1",
        port: int = 2105,
        tokens: TokenTable | None = None,
        tls: tuple[bytes, bytes] | None = None,
        cleanup_timeout: float = 300.0,
        session_timeout: float = 30.0,
        max_pending_bytes: int = MAX_PENDING_BYTES,
        max_total_pending_bytes: int = MAX_TOTAL_PENDING_BYTES,
        limits: RemoteLimits | None = None,
        metrics: MetricsSink = NULL_METRICS,
        workers: int = 16,
        wait_workers: int = 256,
        stream_workers: int = 256,
        event_loop: Callable[[], asyncio.AbstractEventLoop] | None = None,
    ) -> None:
        self.qm = qm
        self._new_loop = event_loop or default_event_loop()
        self.host = host
        self.port = port
        self.tokens = tokens
        self.tls = tls
        self.core = RemoteReadCore(
            qm,
            cleanup_timeout=cleanup_timeout,
            session_timeout=session_timeout,
            max_pending_bytes=max_pending_bytes,
            max_total_pending_bytes=max_total_pending_bytes,
            limits=limits,
        )
        #: Refused calls: logged once per client and rule, counted by rule.
        self.refusals = Refusals(log, metrics)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="openmsmq-rr")
        self._wait_pool = ThreadPoolExecutor(max_workers=wait_workers, thread_name_prefix="openmsmq-rr-wait")
        #: Threads of step streams (one each, at most ``stream_workers``).
        self.stream_workers = StreamWorkers(stream_workers)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: grpc.aio.Server | None = None
        self._stopped: asyncio.Event | None = None
        self._started = threading.Event()
        self._start_error: BaseException | None = None
        #: Called (from a worker thread) by the ``Status`` rpc for the live transfer state;
        #: ``openmsmq serve`` sets it (:func:`openmsmq.server.serve.transfer_snapshot`). None:
        #: status shows stored sequence state only.
        self.status_provider: Callable[[], TransferSnapshot] | None = None
        #: Called (from a worker thread) by the ``ResetIncomingSequence`` rpc; ``openmsmq
        #: serve`` sets it (:func:`openmsmq.server.serve.sequence_resetter`).
        self.sequence_resetter: SequenceResetter | None = None
        #: Called (from a worker thread) by the ``SetOutgoingState`` rpc; ``openmsmq serve``
        #: sets it (:func:`openmsmq.server.serve.outgoing_control`).
        self.outgoing_control: admin.OutgoingControl | None = None

    @property
    def target(self) -> str:
        """``grpc://host:port`` for :func:`openmsmq.connect`."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"grpc://{host}:{self.port}"

    def start(self) -> RemoteServer:
        """Bind and start serving (in a thread of its own); returns when listening."""
        self._thread = threading.Thread(target=self._main, name="openmsmq-remote", daemon=True)
        self._thread.start()
        self._started.wait()
        if self._start_error is not None:
            self._thread.join()
            raise self._start_error
        return self

    def _main(self) -> None:
        loop = self._new_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        except BaseException as exc:  # reported by start()
            self._start_error = exc
            self._started.set()
        finally:
            loop.close()

    async def _serve(self) -> None:
        self._stopped = asyncio.Event()
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", MAX_REQUEST_BYTES),
                ("grpc.max_send_message_length", -1),
                ("grpc.keepalive_time_ms", 20_000),
                ("grpc.keepalive_timeout_ms", 10_000),
                ("grpc.http2.min_recv_ping_interval_without_data_ms", 5_000),
                ("grpc.keepalive_permit_without_calls", 1),
                ("grpc.so_reuseport", 0),
            ]
        )
        servicer = _Servicer(
            self.core, self.tokens, self._pool, self._wait_pool, self.refusals, self.stream_workers
        )
        servicer.status_provider = lambda: self.status_provider
        servicer.sequence_resetter = lambda: self.sequence_resetter
        servicer.outgoing_control = lambda: self.outgoing_control
        pb_grpc.add_RemoteReadServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
        address = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
        try:
            if self.tls is not None:
                cert, key = self.tls
                bound = server.add_secure_port(address, grpc.ssl_server_credentials([(key, cert)]))
            else:
                bound = server.add_insecure_port(address)
        except RuntimeError as exc:
            raise MQError(HResult.MQ_ERROR_SERVICE_NOT_AVAILABLE, f"cannot bind {address}: {exc}") from exc
        if not bound:
            raise MQError(HResult.MQ_ERROR_SERVICE_NOT_AVAILABLE, f"cannot bind {address}")
        self.port = bound
        await server.start()
        self._server = server
        timers = asyncio.create_task(self._timers())
        self._started.set()
        log.info("remote-read service listening on %s", self.target)
        if self.tokens is None:
            log.warning(
                "remote-read service on %s without tokens: every local process may read, send, purge"
                " and delete queues through it; on a host shared with other users set"
                " remote.tokens_file and remote.require_token (docs/security.md)",
                self.target,
            )
        await self._stopped.wait()
        timers.cancel()

    async def _timers(self) -> None:
        """Drive the Pending Request Cleanup Timers and session timeouts."""
        loop = asyncio.get_running_loop()
        while True:
            deadline = self.core.next_deadline()
            delay = 0.5 if deadline is None else min(0.5, max(0.0, deadline - self.core.clock()))
            await asyncio.sleep(delay)
            try:
                await loop.run_in_executor(self._pool, self.core.run_timers)
            except Exception:  # keep the timers running whatever one expiry does
                log.exception("remote-read timers failed")

    def stop(self, grace: float = 1.0) -> None:
        """Stop serving: calls in progress get ``grace`` seconds; every session ends."""
        loop, server = self._loop, self._server
        if loop is not None and server is not None and self._thread is not None and self._thread.is_alive():

            async def shutdown() -> None:
                await server.stop(grace)
                assert self._stopped is not None
                self._stopped.set()

            asyncio.run_coroutine_threadsafe(shutdown(), loop).result()
            self._thread.join()
        self.core.close()
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._wait_pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> RemoteServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _read_pem(path: Path | None) -> bytes | None:
    return None if path is None else Path(path).read_bytes()


def start_remote_server(qm: QueueManager, config: Any = None, **overrides: Any) -> RemoteServer:
    """Start the remote-read service for ``qm`` from a :class:`openmsmq.config.Config` (its
    ``[remote]`` section) or a ``RemoteConfig``; ``overrides`` go to :class:`RemoteServer`.

    Reads the tokens file and TLS PEM files named by the configuration. Returns the
    running server (``.port``, ``.target``, ``.stop()``).
    """
    remote = getattr(config, "remote", config)
    kwargs: dict[str, Any] = {}
    if remote is not None:
        kwargs.update(host=remote.listen_address, port=remote.port,
                      cleanup_timeout=remote.pending_request_cleanup,
                      session_timeout=remote.session_timeout,
                      max_pending_bytes=remote.max_pending_bytes,
                      max_total_pending_bytes=remote.max_total_pending_bytes,
                      limits=RemoteLimits(remote.max_batch_messages, remote.max_batch_queues))  # fmt: skip
        if remote.tokens_file is not None:
            kwargs["tokens"] = load_tokens(remote.tokens_file)
        cert, key = _read_pem(remote.tls_cert), _read_pem(remote.tls_key)
        if cert is not None and key is not None:
            kwargs["tls"] = (cert, key)
    kwargs.update(overrides)
    return RemoteServer(qm, **kwargs).start()
