"""The receive, send and transaction calls of the remote-read service, shared by their
unary rpcs (Read, StartReceive, EndReceive, Send, Commit, Abort) and by the step stream
(rpc Steps).

A step stream carries those calls of one session over one bidirectional gRPC stream:
each :class:`StepRequest` is a short list of ops run in order, answered by one
:class:`StepReply`; the first op that fails ends the request and is answered with its
HRESULT (the stream goes on). A consumer's loop needs a call's setup per stream message
instead of per call, and one request can carry what belongs together: the
acknowledgment of a receive (R_EndTransactionalReceive), the commit of its transaction,
and the next R_StartTransactionalReceive (docs/remote.md, "The step stream").

Nothing here holds state or touches gRPC: :class:`~openmsmq.remote.core.RemoteReadCore`
owns the MS-MQRR state, the servicer owns authentication and the worker threads.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from openmsmq.errors import HResult, LimitError, MQError
from openmsmq.qm import INFINITE, MessageRecord
from openmsmq.remote import openmsmq_remote_pb2 as pb
from openmsmq.remote.auth import Principal
from openmsmq.remote.codes import UNKNOWN_STEP_OP
from openmsmq.remote.core import RemoteReadCore, RemoteSession
from openmsmq.remote.limits import check_name
from openmsmq.remote.packed import PACKED_V1, encode_messages

__all__ = [
    "MAX_STEP_OPS",
    "abort",
    "commit",
    "end_receive",
    "message_to_pb",
    "read",
    "read_reply",
    "record_from_pb",
    "run_steps",
    "send",
    "start_receive",
    "waits",
]

log = logging.getLogger("openmsmq.remote")

#: Most ops one StepRequest may carry (a consumer needs three: acknowledgment, commit,
#: next receive); beyond it MQ_ERROR_INVALID_PARAMETER before any op runs.
MAX_STEP_OPS = 16

#: EndReceiveRequest.method -> TwoPhaseReceives.end_receive's ``transactional``.
_END_METHODS: dict[int, bool | None] = {
    pb.END_METHOD_UNSPECIFIED: None,
    pb.END_RECEIVE: False,
    pb.END_TRANSACTIONAL_RECEIVE: True,
}

#: TimeToReachQueue of a message that sets none (seconds: 4 days, LONG_LIVED, MS-MQDMPR 3.1.1.12).
DEFAULT_TTRQ = 0x54600

#: Called with (rpc name, error) for an op refused by a limit or a permission.
Refused = Callable[[str, MQError], None]


# ---- replies ---------------------------------------------------------------------------------


def message_to_pb(m: MessageRecord, request_id: int = 0) -> pb.Message:
    """A stored message as the protobuf :class:`Message`."""
    return pb.Message(
        body=m.body, label=m.label, lookup_id=m.lookup_id, id_lineage=m.id_lineage.bytes,
        id_uniquifier=m.id_uniquifier, message_class=m.message_class, priority=m.priority,
        correlation_id=m.correlation_id, app_specific=m.app_specific, body_type=m.body_type,
        delivery=m.delivery, sent_time=m.sent_time, arrived_time=m.arrived_time,
        time_to_reach_queue=m.time_to_reach_queue, time_to_be_received=m.time_to_be_received,
        destination_queue=m.destination_queue, admin_queue=m.admin_queue,
        response_queue=m.response_queue, ack_flags=m.ack_flags,
        positive_journaling=m.positive_journaling, negative_journaling=m.negative_journaling,
        transactional=m.transactional, first_in_transaction=m.first_in_transaction,
        last_in_transaction=m.last_in_transaction, source_machine=m.source_machine.bytes,
        extension=m.extension, request_id=request_id, tx_sequence_id=m.tx_sequence_id,
        tx_sequence_number=m.tx_sequence_number, abort_count=m.abort_count, move_count=m.move_count,
    )  # fmt: skip


def read_reply(
    msgs: list[MessageRecord], reply_format: int, request_ids: list[int] | None = None
) -> pb.ReadReply:
    """The :class:`ReadReply` for ``msgs``: packed (``reply_format`` 1, one ``bytes``
    field for the whole batch) or as ``repeated Message``. A batch holding a message with an
    AbortCount or a MoveCount is always ``repeated Message``: the packed form does not
    carry them (a client reads both forms)."""
    if reply_format == PACKED_V1 and not any([m.abort_count or m.move_count for m in msgs]):
        return pb.ReadReply(packed=encode_messages(msgs, request_ids))
    if request_ids is None:
        return pb.ReadReply(messages=[message_to_pb(m) for m in msgs])
    return pb.ReadReply(messages=[message_to_pb(m, rid) for rid, m in zip(request_ids, msgs, strict=True)])


def record_from_pb(o: pb.OutgoingMessage) -> MessageRecord:
    """The queue manager's record for a message to send (identity and times assigned by the QM)."""
    if len(o.correlation_id) > 20:
        raise MQError(HResult.MQ_ERROR_ILLEGAL_PROPERTY_SIZE, "correlation id has at most 20 bytes")
    if o.delivery not in (0, 1):
        raise MQError(HResult.MQ_ERROR_ILLEGAL_PROPERTY_VALUE, f"delivery {o.delivery}")
    if o.ack_flags & ~0x0F:
        raise MQError(HResult.MQ_ERROR_ILLEGAL_PROPERTY_VALUE, f"ack flags {o.ack_flags:#x}")
    # Queue names are stored with the message but not counted in its size (quotas count
    # body, label and extension): bounded like every name a call carries.
    check_name(o.admin_queue, "admin queue name")
    check_name(o.response_queue, "response queue name")
    return MessageRecord(
        body=o.body, label=o.label, priority=o.priority if o.HasField("priority") else 3,
        correlation_id=o.correlation_id.ljust(20, b"\0"), app_specific=o.app_specific,
        body_type=o.body_type, delivery=o.delivery,
        time_to_reach_queue=o.time_to_reach_queue if o.HasField("time_to_reach_queue") else DEFAULT_TTRQ,
        time_to_be_received=o.time_to_be_received if o.HasField("time_to_be_received") else INFINITE,
        ack_flags=o.ack_flags, positive_journaling=o.journal, negative_journaling=o.dead_letter,
        admin_queue=o.admin_queue, response_queue=o.response_queue, extension=o.extension,
    )  # fmt: skip


# ---- the calls -------------------------------------------------------------------------------


def read(
    core: RemoteReadCore, s: RemoteSession, request: pb.ReadRequest, cancel: threading.Event
) -> pb.ReadReply:
    """Read: R_StartReceive + R_EndReceive(RR_ACK) in one call."""
    msgs = core.read(
        s, request.handle, request.action, lookup_id=request.lookup_id, cursor=request.cursor,
        timeout_ms=request.timeout_ms, uow=request.transaction, max_count=request.max_count or 1,
        request_id=request.request_id, cancel=cancel,
    )  # fmt: skip
    return read_reply(msgs, request.reply_format)


def start_receive(
    core: RemoteReadCore, s: RemoteSession, request: pb.ReadRequest, cancel: threading.Event
) -> pb.ReadReply:
    """StartReceive: R_StartReceive / R_StartTransactionalReceive, batched."""
    got = core.receives.start_receive(
        s, request.handle, request.action, request_id=request.request_id,
        lookup_id=request.lookup_id, cursor=request.cursor, timeout_ms=request.timeout_ms,
        uow=request.transaction, max_count=request.max_count or 1, cancel=cancel,
    )  # fmt: skip
    return read_reply([m for _, m in got], request.reply_format, [rid for rid, _ in got])


def end_receive(core: RemoteReadCore, s: RemoteSession, request: pb.EndReceiveRequest) -> pb.EndReceiveReply:
    """EndReceive: R_EndReceive / R_EndTransactionalReceive, one status per request id."""
    if request.method not in _END_METHODS:
        raise MQError(HResult.MQ_ERROR_INVALID_PARAMETER, f"EndReceive method {request.method}")
    transactional = _END_METHODS[request.method]
    status = core.receives.end_receive(s, request.handle, request.request_ids, request.ack, transactional)
    return pb.EndReceiveReply(status=status)


def send(core: RemoteReadCore, s: RemoteSession, request: pb.SendRequest) -> pb.SendReply:
    """Send: the messages' count checked before they are converted; durable when it
    returns unless a transaction carries them (then at its commit)."""
    if request.messages:
        core.limits.messages(len(request.messages), "messages")
    records = [record_from_pb(o) for o in request.messages]
    pairs = core.send(s, request.handle, records, request.transaction)
    lineage = core.qm.guid.bytes
    return pb.SendReply(
        receipts=[pb.SendReceipt(id_lineage=lineage, id_uniquifier=u, lookup_id=lid) for u, lid in pairs]
    )


def commit(core: RemoteReadCore, s: RemoteSession, request: pb.TransactionRequest) -> pb.Empty:
    """Commit: durable when it returns (concurrent commits share the store's fsync)."""
    core.commit(s, request.transaction)
    return pb.Empty()


def abort(core: RemoteReadCore, s: RemoteSession, request: pb.TransactionRequest) -> pb.Empty:
    """Abort: sends dropped, received messages back in place."""
    core.abort(s, request.transaction)
    return pb.Empty()


# ---- the step stream -------------------------------------------------------------------------


def waits(request: pb.StepRequest) -> bool:
    """Whether a request may wait for a message (it then runs in the waiting workers)."""
    for op in request.ops:
        kind = op.WhichOneof("op")
        if kind == "read" and op.read.timeout_ms:
            return True
        if kind == "start_receive" and op.start_receive.timeout_ms:
            return True
    return False


def _run_op(core: RemoteReadCore, s: RemoteSession, op: pb.StepOp, cancel: threading.Event) -> pb.StepResult:
    kind = op.WhichOneof("op")
    if kind == "read":
        return pb.StepResult(read=read(core, s, op.read, cancel))
    if kind == "start_receive":
        return pb.StepResult(read=start_receive(core, s, op.start_receive, cancel))
    if kind == "end_receive":
        reply = end_receive(core, s, op.end_receive)
        failed = next((st for st in reply.status if st), 0)
        return pb.StepResult(
            hresult=failed,
            details=f"end of receive: {failed:#010x}" if failed else "",
            end_receive=reply,
        )
    if kind == "commit":
        commit(core, s, op.commit)
        return pb.StepResult()
    if kind == "abort":
        abort(core, s, op.abort)
        return pb.StepResult()
    if kind == "send":
        return pb.StepResult(send=send(core, s, op.send))
    if kind == "give_back":
        core.abort(s, op.give_back.transaction, counted=False)
        return pb.StepResult()
    raise MQError(HResult.MQ_ERROR_INVALID_PARAMETER, UNKNOWN_STEP_OP)


def run_steps(
    core: RemoteReadCore,
    session_id: str,
    principal: Principal,
    request: pb.StepRequest,
    cancel: threading.Event,
    refused: Refused,
) -> pb.StepReply:
    """Run one StepRequest of the session ``session_id`` (touched, and checked to belong
    to ``principal`` as every unary call's is); stop at the first op that fails."""
    results: list[pb.StepResult] = []
    try:
        if len(request.ops) > MAX_STEP_OPS:
            raise MQError(HResult.MQ_ERROR_INVALID_PARAMETER, f"a step carries at most {MAX_STEP_OPS} ops")
        s = core.session(session_id, principal)
    except MQError as exc:
        failed = pb.StepResult(hresult=int(exc.hresult), details=exc.message or str(exc))
        return pb.StepReply(results=[failed])
    for op in request.ops:
        try:
            result = _run_op(core, s, op, cancel)
        except MQError as exc:
            if isinstance(exc, LimitError) or exc.hresult in (
                HResult.MQ_ERROR_ACCESS_DENIED,
                HResult.STATUS_ACCESS_DENIED,
                HResult.MQ_ERROR_INSUFFICIENT_RESOURCES,
            ):
                refused(_RPC.get(op.WhichOneof("op") or "", "Steps"), exc)
            result = pb.StepResult(hresult=int(exc.hresult), details=exc.message or str(exc))
        except Exception as exc:  # a bug must fail this op only, never the stream or the server
            log.exception("remote-read step failed")
            result = pb.StepResult(hresult=HResult.MQ_ERROR, details=f"internal error: {type(exc).__name__}")
        results.append(result)
        if result.hresult:
            break
    return pb.StepReply(results=results)


#: The rpc each op stands for (refusal logs name it).
_RPC = {
    "read": "Read",
    "start_receive": "StartReceive",
    "end_receive": "EndReceive",
    "commit": "Commit",
    "abort": "Abort",
    "give_back": "Abort",
    "send": "Send",
}
