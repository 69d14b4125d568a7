"""The client end of the step stream (rpc Steps, :mod:`openmsmq.remote.steps`) and the
consumer loop's fast path of :class:`~openmsmq.client.grpc_transport.GrpcTransport`.

:class:`StepStream` carries Read, StartReceive, EndReceive, Commit and Abort over one
bidirectional stream per connection instead of one gRPC call each (a stream message
costs about half a unary call's setup on both ends).

:class:`ConsumerAhead` makes the loop users write, ``begin; receive one; process;
commit``, one round trip per transaction without a change to that loop:

* the acknowledgment of a transactional two-phase receive (R_EndTransactionalReceive
  RR_ACK) is not sent on its own: it travels with the commit of its transaction, in the
  same request and before it. Its effect is only seen at commit anyway (the message is
  deleted then); should it fail, the commit does not run and the transaction aborts;
* the commit of a transaction that received exactly one message from a queue's head
  carries the next R_StartTransactionalReceive from that handle, into a new transaction
  the client picks (MS-MQRR 3.1.4.13 step 6 creates it). The next :meth:`begin` hands
  out that transaction, and a receive of one message from the same handle in it is
  answered from the reply already here. Anything else first gives the message back
  (RR_NACK, and the transaction is aborted if nobody began it): the message is never
  seen by the application unless it asks for it, and its order is kept. A message taken
  ahead and not asked for within :data:`HOLD` seconds goes back the same way, from a
  thread of the connection, so a consumer that stops consuming keeps nothing locked.

A client that vanishes loses nothing: the session's rundown aborts its transactions,
including one begun ahead (MS-MQRR 3.1.6).
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import grpc

from openmsmq.client.message import Message
from openmsmq.errors import HResult, MQError
from openmsmq.remote import openmsmq_remote_pb2 as pb
from openmsmq.remote.codes import RemoteAck
from openmsmq.remote.packed import PACKED_V1

__all__ = ["HOLD", "ConsumerAhead", "StepStream", "StepsUnsupported"]

#: Seconds a message taken ahead waits for the application's next receive before it is
#: given back (RR_NACK).
HOLD = 1.0

#: Transactions whose shape (what they did so far) is remembered at most.
_SHAPES = 4096

_RECEIVE = 0  # MQ_ACTION_RECEIVE


class StepsUnsupported(Exception):
    """The server has no Steps rpc (it predates it): use the unary calls."""


class StepStream:
    """One Steps stream: :meth:`exchange` sends a request and returns its results.

    The caller holds :attr:`lock` around an exchange (one request in flight per stream);
    a caller finding it held uses the unary calls instead. A broken stream is reopened
    by the next exchange; its outcome is unknown, as a unary call's that failed
    in flight, and the failure is raised as :class:`MQError`.
    """

    def __init__(
        self,
        open_stream: Callable[[Iterator[pb.StepRequest]], Any],
        error: Callable[[grpc.RpcError], MQError],
    ) -> None:
        self._open = open_stream
        self._error = error
        #: Held by whoever uses the stream (one request in flight).
        self.lock = threading.Lock()
        #: False once the server answered UNIMPLEMENTED.
        self.supported = True
        self._requests: queue.SimpleQueue[pb.StepRequest | None] | None = None
        self._replies: Any = None

    @staticmethod
    def _iterate(requests: queue.SimpleQueue[pb.StepRequest | None]) -> Iterator[pb.StepRequest]:
        while True:
            request = requests.get()
            if request is None:
                return  # half-close
            yield request

    def exchange(self, ops: list[pb.StepOp]) -> list[pb.StepResult]:
        """Run ``ops`` (caller holds :attr:`lock`); one result per op run."""
        if self._replies is None:
            requests: queue.SimpleQueue[pb.StepRequest | None] = queue.SimpleQueue()
            self._replies = self._open(self._iterate(requests))
            self._requests = requests
        assert self._requests is not None
        self._requests.put(pb.StepRequest(ops=ops))
        try:
            reply = next(self._replies)
        except grpc.RpcError as exc:
            self.drop()
            code = getattr(exc, "code", lambda: None)()
            if code == grpc.StatusCode.UNIMPLEMENTED:
                self.supported = False
                raise StepsUnsupported from None
            raise self._error(exc) from None
        except StopIteration:
            self.drop()
            raise MQError(HResult.MQ_ERROR_REMOTE_MACHINE_NOT_AVAILABLE, "the step stream ended") from None
        return list(reply.results)

    def drop(self) -> None:
        """Close the stream (the next exchange opens another)."""
        requests, replies = self._requests, self._replies
        self._requests = self._replies = None
        if requests is not None:
            requests.put(None)
        if replies is not None:
            replies.cancel()


def failure(result: pb.StepResult) -> MQError:
    """The :class:`MQError` of a failed op."""
    return MQError(result.hresult, result.details)


@dataclass
class _Ahead:
    """A transaction begun ahead by a commit, with the message its receive locked."""

    uow: bytes
    handle: int
    request_id: int
    message: Message | None
    at: float
    #: begin() handed it out.
    given: bool = False


@dataclass
class _Owed:
    """Acknowledgments (RR_ACK) of transactional receives, sent with the commit."""

    uow: bytes
    handle: int
    request_ids: list[int]


class ConsumerAhead:
    """The consumer loop's state of one connection (see the module docstring).

    ``stream``: the connection's :class:`StepStream`; ``request_ids(n)``: n consecutive
    request ids; ``decode``: the messages of a ReadReply; ``prefetch``: whether commits
    take the next message ahead. Every method runs with :attr:`StepStream.lock` held by
    the caller, except :meth:`begin` and the release thread (which takes it itself).
    """

    def __init__(
        self,
        stream: StepStream,
        request_ids: Callable[[int], int],
        decode: Callable[[pb.ReadReply], list[Message]],
        *,
        prefetch: bool = True,
        hold: float = HOLD,
    ) -> None:
        self.stream = stream
        self.prefetch = prefetch
        self.hold = hold
        self._request_ids = request_ids
        self._decode = decode
        self._state = threading.Lock()  # guards _ahead against begin() from other threads
        self._ahead: _Ahead | None = None
        self._owed: _Owed | None = None
        #: A transactional StartReceive of one message whose RR_ACK may wait for the commit.
        self._started: tuple[bytes, int, int] | None = None
        #: Transactions that failed an acknowledgment sent ahead of their commit.
        self._doomed: dict[bytes, MQError] = {}
        #: uow -> handle for transactions whose only op was one receive from the head of
        #: that handle; 0 once they did anything else.
        self._shape: OrderedDict[bytes, int] = OrderedDict()
        self._wake = threading.Event()
        self._closed = False
        self._releaser: threading.Thread | None = None

    # ---- begin ---------------------------------------------------------------------------

    def begin(self) -> bytes | None:
        """The transaction begun ahead, if one waits for the application (it exists on
        the server, maybe with a message locked for it); None: pick a new one."""
        with self._state:
            a = self._ahead
            if a is None or a.given:
                return None
            a.given = True
            return a.uow

    def take(self, uow: bytes) -> _Ahead | None:
        """Forget what was taken ahead into ``uow`` (its commit or abort goes without the
        stream) and return it."""
        with self._state:
            a = self._ahead
            if a is None or a.uow != uow:
                return None
            self._ahead = None
            return a

    # ---- what a transaction did ---------------------------------------------------------

    def note(self, uow: bytes, handle: int) -> None:
        """Record an op of transaction ``uow``: ``handle`` for a receive of one message
        from its head, 0 for anything else."""
        if not uow:
            return
        shape = self._shape
        shape[uow] = handle if uow not in shape else 0
        while len(shape) > _SHAPES:
            shape.popitem(last=False)

    def claim(self, handle: int, uow: bytes) -> tuple[int, Message] | None:
        """The message taken ahead for a receive of one message from ``handle``'s head in
        ``uow``, if there is one: (request id, message). Its RR_ACK is then owed."""
        with self._state:
            a = self._ahead
            if (
                a is None
                or not a.given
                or a.uow != uow
                or a.handle != handle
                or a.message is None
                or time.monotonic() - a.at > self.hold
            ):
                return None
            self._ahead = None
            msg = a.message
        self.note(uow, handle)
        return a.request_id, msg

    def started(self, uow: bytes, handle: int, request_id: int) -> None:
        """A transactional StartReceive of one message (its RR_ACK may be deferred)."""
        self._started = (uow, handle, request_id)

    def defer_ack(self, handle: int, request_ids: list[int], ack: int) -> bool:
        """Owe the RR_ACK of a transactional receive started by :meth:`started` until its
        commit; False when it must be sent now."""
        st = self._started
        if (
            ack != RemoteAck.RR_ACK
            or st is None
            or len(request_ids) != 1
            or st[1:] != (handle, request_ids[0])
        ):
            return False
        self._started = None
        self.owe(st[0], handle, request_ids[0])
        return True

    def owe(self, uow: bytes, handle: int, request_id: int) -> None:
        """Owe the RR_ACK of request ``request_id`` of ``uow`` until the commit."""
        owed = self._owed
        if owed is not None and (owed.uow != uow or owed.handle != handle):
            self.settle()
            owed = None
        if owed is None:
            self._owed = _Owed(uow, handle, [request_id])
        else:
            owed.request_ids.append(request_id)

    # ---- settling (before any other call) ------------------------------------------------

    @property
    def busy(self) -> bool:
        """Whether something is owed or held ahead."""
        return self._owed is not None or self._ahead is not None or self._started is not None

    def settle(self, keep: bytes | None = None) -> None:
        """Send what is owed (acknowledgments) and give back what was taken ahead and not
        claimed, before a call that is not the consumer loop's. ``keep``: a transaction
        whose acknowledgments may wait for its commit (the caller's own)."""
        self._started = None
        owed = self._owed
        if owed is not None and owed.uow != keep:
            self._owed = None
            self._send_acks(owed)
        with self._state:
            a = self._ahead
            self._ahead = None
        if a is not None:
            self._give_back(a)

    def _send_acks(self, owed: _Owed) -> None:
        try:
            results = self.stream.exchange([_ack_op(owed)])
        except MQError as exc:
            self._doomed[owed.uow] = exc
            return
        if results and results[-1].hresult:
            self._doomed[owed.uow] = failure(results[-1])

    def _give_back(self, a: _Ahead) -> None:
        """RR_NACK the message taken ahead; abort its transaction if nobody began it."""
        ops: list[pb.StepOp] = []
        if a.message is not None:
            ops.append(
                pb.StepOp(
                    end_receive=pb.EndReceiveRequest(
                        handle=a.handle,
                        ack=int(RemoteAck.RR_NACK),
                        request_ids=[a.request_id],
                        method=pb.END_TRANSACTIONAL_RECEIVE,
                    )
                )
            )
        if not a.given:
            ops.append(pb.StepOp(abort=pb.TransactionRequest(transaction=a.uow)))
        if ops:
            # A failure leaves the session's rundown or the cleanup timer to put it back.
            with contextlib.suppress(MQError):
                self.stream.exchange(ops)

    # ---- commit and abort ----------------------------------------------------------------

    def commit(self, uow: bytes) -> None:
        """Commit ``uow``: its owed acknowledgments first, then the commit, then (for a
        transaction that received one message from a handle's head) the next receive from
        that handle into a new transaction, all in one request."""
        doomed = self._doomed.pop(uow, None)
        handle = self._shape.pop(uow, 0)
        if doomed is not None:
            self._abort_quietly(uow)
            raise doomed
        self.settle(keep=uow)
        owed, self._owed = self._owed, None
        ops: list[pb.StepOp] = [] if owed is None else [_ack_op(owed)]
        ops.append(pb.StepOp(commit=pb.TransactionRequest(transaction=uow)))
        nxt = b""
        rid = 0
        if handle and self.prefetch and not self._closed:
            nxt = uuid.uuid4().bytes
            rid = self._request_ids(1)
            start = pb.ReadRequest(
                handle=handle, action=_RECEIVE, timeout_ms=0, transaction=nxt, max_count=1,
                request_id=rid, reply_format=PACKED_V1,
            )  # fmt: skip
            ops.append(pb.StepOp(start_receive=start))
        results = self.stream.exchange(ops)
        n_before = len(ops) - (2 if nxt else 1)
        for i, res in enumerate(results[: n_before + 1]):
            if res.hresult:
                if i < n_before:  # an acknowledgment failed: the commit did not run
                    self._abort_quietly(uow)
                raise failure(res)
        if nxt and len(results) == len(ops):
            self._took_ahead(nxt, handle, rid, results[-1])

    def _took_ahead(self, uow: bytes, handle: int, request_id: int, res: pb.StepResult) -> None:
        if res.hresult == 0:
            got = self._decode(res.read)
            if not got:
                return
            a = _Ahead(uow, handle, request_id, got[0], time.monotonic())
        elif res.hresult == HResult.MQ_ERROR_IO_TIMEOUT:
            # Nothing to take: the transaction exists (empty) and is handed out as is.
            a = _Ahead(uow, handle, 0, None, time.monotonic())
        else:
            return  # the receive failed before or after creating it: the rundown ends it
        with self._state:
            self._ahead = a
        if a.message is not None:
            self._start_releaser()
            self._wake.set()

    def abort(self, uow: bytes) -> None:
        """Abort ``uow`` (messages taken ahead into it go back with it)."""
        self._doomed.pop(uow, None)
        self._shape.pop(uow, None)
        if self._owed is not None and self._owed.uow == uow:
            self._owed = None
        with self._state:
            a = self._ahead
            if a is not None and a.uow == uow:
                self._ahead = None
        self.settle(keep=uow)
        results = self.stream.exchange([pb.StepOp(abort=pb.TransactionRequest(transaction=uow))])
        if results and results[-1].hresult:
            raise failure(results[-1])

    def _abort_quietly(self, uow: bytes) -> None:
        with contextlib.suppress(MQError):
            self.stream.exchange([pb.StepOp(abort=pb.TransactionRequest(transaction=uow))])

    # ---- giving back what nobody asked for -----------------------------------------------

    def _start_releaser(self) -> None:
        if self._releaser is None:
            self._releaser = threading.Thread(
                target=self._release_loop, name="openmsmq-grpc-ahead", daemon=True
            )
            self._releaser.start()

    def _release_loop(self) -> None:
        while not self._closed:
            self._wake.wait()
            self._wake.clear()
            while not self._closed:
                with self._state:
                    a = self._ahead
                if a is None or a.message is None:
                    break
                due = a.at + self.hold - time.monotonic()
                if due > 0:
                    time.sleep(min(due, self.hold))
                    continue
                if not self.stream.lock.acquire(timeout=self.hold):
                    continue
                try:
                    with self._state:
                        stale = self._ahead is a
                        if stale:
                            self._ahead = None
                    if stale:
                        self._give_back(a)
                finally:
                    self.stream.lock.release()

    def close(self) -> None:
        """Stop the release thread (the session's end gives everything back)."""
        self._closed = True
        self._wake.set()


def _ack_op(owed: _Owed) -> pb.StepOp:
    return pb.StepOp(
        end_receive=pb.EndReceiveRequest(
            handle=owed.handle,
            ack=int(RemoteAck.RR_ACK),
            request_ids=list(owed.request_ids),
            method=pb.END_TRANSACTIONAL_RECEIVE,
        )
    )
