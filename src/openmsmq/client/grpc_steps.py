"""The client end of the step stream (rpc Steps, :mod:`openmsmq.remote.steps`) and the
consumer loop's fast path of :class:`~openmsmq.client.grpc_transport.GrpcTransport`.

:class:`StepStream` carries Read, StartReceive, EndReceive, Send, Commit and Abort over
one bidirectional stream per connection instead of one gRPC call each (a stream message
costs about half a unary call's setup on both ends).

:class:`ConsumerAhead` makes the loop users write, ``begin; receive one; process;
commit``, one round trip per transaction without a change to that loop:

* the commit of a transaction whose only op was one receive from a queue's head (of one
  message, or a batch of at most n) carries, in the same request and after the commit,
  the same receive from that handle (without waiting) into a new transaction the client
  picks (MS-MQRR 3.1.4.13 step 6 creates it on the server). The application never sees
  that transaction: when its next transaction's first op is the same receive from the
  same handle, the messages already here are returned and the application's transaction
  is carried by the one begun ahead from then on (its XACTUOW on the wire; the
  application's id is unchanged).
  Anything else first gives the message back by aborting the transaction begun ahead
  (the message goes back to its place: order is kept). A message taken ahead and not
  asked for within :data:`HOLD` seconds goes back the same way, from a thread of the
  connection, so a consumer that stops consuming keeps nothing locked;
* the acknowledgment of a transactional two-phase receive (R_EndTransactionalReceive
  RR_ACK, what the asyncio client's ``receive`` sends) is held back and travels with the
  commit of its transaction, before it in the same request. Its effect is only seen at
  commit (the message is deleted then); should it fail, the commit does not run and the
  transaction aborts. One held back longer than a quarter of the server's Pending Request
  Cleanup Timer (or :data:`HOLD`) is sent on its own, so slow processing never meets the
  timer.

A client that vanishes loses nothing: the session's rundown aborts its transactions,
the one begun ahead included (MS-MQRR 3.1.6). A connection that is closed first gives
back what it took ahead (the rundown's abort would count as a failed attempt on a
message the application never saw); one that dies without closing cannot, and the
server cannot tell a message taken ahead from one the application was processing when
it died, so that abort counts (poison handling must see a consumer that dies on a
message).
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
        #: True while the release thread holds :attr:`lock` to give a message back.
        self.releasing = False
        self._requests: queue.SimpleQueue[pb.StepRequest | None] | None = None
        self._replies: Any = None

    def acquire(self) -> bool:
        """Take :attr:`lock` if it is free, or once the release thread is done with it (a
        message it gives back is back before the caller's op runs, so order is kept);
        False when another call is using the stream."""
        if self.lock.acquire(blocking=False):
            return True
        return self.releasing and self.lock.acquire(timeout=30.0)

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
    """A transaction begun ahead by a commit, and the message its receive took."""

    #: The transaction's XACTUOW on the server.
    uow: bytes
    handle: int
    #: "read" (R_StartReceive + R_EndReceive in the transaction) or "start" (a pending
    #: R_StartTransactionalReceive under ``request_id``).
    kind: str
    request_id: int
    #: What the receive took (one for "start"; up to ``max_count`` for "read").
    messages: list[Message]
    max_count: int
    at: float


@dataclass
class _Owed:
    """RR_ACKs of transactional receives of ``uow`` (server XACTUOW), held for its commit."""

    uow: bytes
    handle: int
    request_ids: list[int]
    since: float


class ConsumerAhead:
    """The consumer loop's state of one connection (see the module docstring).

    ``stream``: the connection's :class:`StepStream`; ``request_ids(n)``: n consecutive
    request ids; ``decode``: the messages of a ReadReply; ``prefetch``: whether commits
    take the next message ahead; ``cleanup``: the server's Pending Request Cleanup Timer
    (seconds, 0 unknown). Methods that may exchange run with :attr:`StepStream.lock` held
    by the caller; the release thread takes it itself.
    """

    def __init__(
        self,
        stream: StepStream,
        request_ids: Callable[[int], int],
        decode: Callable[[pb.ReadReply], list[Message]],
        *,
        prefetch: bool = True,
        hold: float = HOLD,
        cleanup: float = 0.0,
    ) -> None:
        self.stream = stream
        self.prefetch = prefetch
        self.hold = hold
        #: Longest an RR_ACK is held back.
        self.ack_hold = min(hold, cleanup / 4) if cleanup > 0 else hold
        self._request_ids = request_ids
        self._decode = decode
        self._state = threading.Lock()  # guards _ahead and _owed against the release thread
        self._ahead: _Ahead | None = None
        self._owed: _Owed | None = None
        #: A transactional StartReceive of one message whose RR_ACK may be held back.
        self._started: tuple[bytes, int, int] | None = None
        #: Transactions that failed an acknowledgment sent ahead of their commit.
        self._doomed: dict[bytes, MQError] = {}
        #: The application's XACTUOW -> the one begun ahead that carries it.
        self._alias: dict[bytes, bytes] = {}
        #: server uow -> (handle, "read" | "start", max_count) for transactions whose only
        #: op was one receive (of one message, or a batch of at most max_count) from the
        #: head of that handle; (0, "", 0) once they did anything else.
        self._shape: OrderedDict[bytes, tuple[int, str, int]] = OrderedDict()
        #: Transactions begun ahead that took nothing (the queue was empty): aborted by
        #: the next request on the stream, ahead of its own ops.
        self._empty: list[bytes] = []
        self._wake = threading.Event()
        #: The release thread waits with no deadline (nothing was held when it looked).
        self._idle = True
        self._closed = False
        self._releaser: threading.Thread | None = None

    def lead_ops(self) -> list[pb.StepOp]:
        """Ops the next request carries before its own: aborts of empty transactions
        begun ahead (they cannot fail but with the session, which fails the request)."""
        empty, self._empty = self._empty, []
        return [pb.StepOp(abort=pb.TransactionRequest(transaction=u)) for u in empty]

    # ---- the application's transactions -------------------------------------------------

    def server_uow(self, uow: bytes) -> bytes:
        """The XACTUOW that carries the application's transaction ``uow`` on the wire."""
        return self._alias.get(uow, uow) if uow else uow

    def forget(self, uow: bytes) -> bytes:
        """End the application's ``uow`` here; return its XACTUOW on the wire."""
        return self._alias.pop(uow, uow)

    def note(self, uow: bytes, handle: int, kind: str = "", max_count: int = 1) -> None:
        """Record an op of (server) transaction ``uow``: ``handle``, ``kind`` and
        ``max_count`` for a receive from its head, 0 for anything else."""
        if not uow:
            return
        shape = self._shape
        shape[uow] = (handle, kind, max_count) if uow not in shape else (0, "", 0)
        while len(shape) > _SHAPES:
            shape.popitem(last=False)

    def claim(
        self, handle: int, uow: bytes, kind: str, max_count: int = 1
    ) -> tuple[int, list[Message]] | None:
        """The messages taken ahead for the first op of the application's transaction
        ``uow`` (new, nothing sent in it yet), a receive from ``handle``'s head of ``kind``
        and ``max_count`` (the same receive as the one taken ahead): (request id,
        messages); ``uow`` is carried by the transaction begun ahead from now on."""
        with self._state:
            a = self._ahead
            if (
                a is None
                or (a.handle, a.kind, a.max_count) != (handle, kind, max_count)
                or time.monotonic() - a.at > self._held(a)
            ):
                return None
            self._ahead = None
        self._alias[uow] = a.uow
        self.note(a.uow, handle, kind, max_count)
        if kind == "start":
            self._started = (a.uow, handle, a.request_id)
        return a.request_id, a.messages

    def _held(self, a: _Ahead) -> float:
        """How long ``a`` may wait for the application: a pending receive ("start") less
        than its Pending Request Cleanup Timer, so that its RR_ACK finds it."""
        return self.ack_hold if a.kind == "start" else self.hold

    def started(self, uow: bytes, handle: int, request_id: int) -> None:
        """A transactional StartReceive of one message in (server) ``uow``: its RR_ACK may
        be held back for the commit."""
        self._started = (uow, handle, request_id)

    def defer_ack(self, handle: int, request_ids: list[int], ack: int) -> bool:
        """Hold back the RR_ACK of the receive :meth:`started` recorded for its commit;
        False when it must be sent now."""
        st = self._started
        if ack != RemoteAck.RR_ACK or st is None or list(request_ids) != [st[2]] or st[1] != handle:
            return False
        owed = self._owed
        if owed is not None and (owed.uow != st[0] or owed.handle != handle):
            return False  # another transaction's are held: this one goes now
        self._started = None
        with self._state:
            if owed is None:
                self._owed = _Owed(st[0], handle, [st[2]], time.monotonic())
            else:
                owed.request_ids.append(st[2])
        self._start_releaser()
        return True

    # ---- settling (before any other call) ------------------------------------------------

    @property
    def busy(self) -> bool:
        """Whether something is held back or taken ahead."""
        return self._owed is not None or self._ahead is not None

    def settle(self, keep: bytes | None = None) -> None:
        """Send the RR_ACKs held back and give back what was taken ahead, before a call
        that is not the consumer loop's. ``keep``: a (server) transaction whose RR_ACKs
        may still wait for its commit."""
        self._started = None
        with self._state:
            owed = self._owed
            if owed is not None and owed.uow != keep:
                self._owed = None
            else:
                owed = None
            a, self._ahead = self._ahead, None
        if owed is not None:
            self._send_acks(owed)
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
        """Abort the transaction begun ahead: its message goes back to its place."""
        ops: list[pb.StepOp] = []
        if a.kind == "start":  # end the pending entry too (else it waits for its timer)
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
        # Given back, not aborted: the application never saw the message, so it is no
        # failed attempt (its AbortCount stays).
        ops.append(pb.StepOp(give_back=pb.TransactionRequest(transaction=a.uow)))
        # A failure leaves it to the session's rundown (the stream or the server is gone).
        with contextlib.suppress(MQError):
            self.stream.exchange(ops)

    # ---- commit and abort ----------------------------------------------------------------

    def commit(self, uow: bytes) -> None:
        """Commit (server) ``uow``: its held-back RR_ACKs first, then the commit, then (for
        a transaction whose only op was one receive from a handle's head) the same receive
        into a new transaction, all in one request."""
        doomed = self._doomed.pop(uow, None)
        handle, kind, max_count = self._shape.pop(uow, (0, "", 0))
        if doomed is not None:
            self._abort_quietly(uow)
            raise doomed
        self.settle(keep=uow)
        with self._state:
            owed, self._owed = self._owed, None
        ops = self.lead_ops()
        if owed is not None:
            ops.append(_ack_op(owed))
        ops.append(pb.StepOp(commit=pb.TransactionRequest(transaction=uow)))
        nxt = b""
        rid = 0
        if handle and self.prefetch and not self._closed:
            nxt = uuid.uuid4().bytes
            read = pb.ReadRequest(
                handle=handle, action=_RECEIVE, timeout_ms=0, transaction=nxt, max_count=max_count,
                reply_format=PACKED_V1,
            )  # fmt: skip
            if kind == "start":
                rid = read.request_id = self._request_ids(1)
                ops.append(pb.StepOp(start_receive=read))
            else:
                ops.append(pb.StepOp(read=read))
        results = self.stream.exchange(ops)
        n_before = len(ops) - (2 if nxt else 1)
        for i, res in enumerate(results[: n_before + 1]):
            if res.hresult:
                if i < n_before:  # an acknowledgment (or a lead abort) failed: no commit ran
                    self._abort_quietly(uow)
                raise failure(res)
        if nxt and len(results) == len(ops):
            self._took_ahead(nxt, handle, kind or "read", rid, max_count, results[-1])

    def _took_ahead(
        self, uow: bytes, handle: int, kind: str, request_id: int, max_count: int, res: pb.StepResult
    ) -> None:
        got = self._decode(res.read) if res.hresult == 0 else []
        if not got:
            # Nothing to take (MQ_ERROR_IO_TIMEOUT: the queue is empty), or the receive
            # failed: the transaction begun ahead holds nothing; the next request ends it.
            self._empty.append(uow)
            return
        with self._state:
            self._ahead = _Ahead(uow, handle, kind, request_id, got, max_count, time.monotonic())
        self._start_releaser()

    def abort(self, uow: bytes) -> None:
        """Abort (server) ``uow``."""
        self._doomed.pop(uow, None)
        self._shape.pop(uow, None)
        with self._state:
            if self._owed is not None and self._owed.uow == uow:
                self._owed = None
        self.settle(keep=uow)
        ops = [*self.lead_ops(), pb.StepOp(abort=pb.TransactionRequest(transaction=uow))]
        results = self.stream.exchange(ops)
        if results and results[-1].hresult:
            raise failure(results[-1])

    def _abort_quietly(self, uow: bytes) -> None:
        with contextlib.suppress(MQError):
            self.stream.exchange([pb.StepOp(abort=pb.TransactionRequest(transaction=uow))])

    def take(self, uow: bytes) -> None:
        """Forget what is held for (server) ``uow``: its commit or abort goes without the
        stream (RR_ACKs held back are not needed there: the commit deletes what the
        transaction received)."""
        with self._state:
            if self._owed is not None and self._owed.uow == uow:
                self._owed = None
        self._shape.pop(uow, None)

    # ---- giving back what nobody asked for -----------------------------------------------

    def _start_releaser(self) -> None:
        if self._idle:  # a release thread waiting with a deadline finds the new one itself
            self._wake.set()
        if self._releaser is None:
            self._releaser = threading.Thread(
                target=self._release_loop, name="openmsmq-grpc-ahead", daemon=True
            )
            self._releaser.start()

    def _due(self) -> float | None:
        """Seconds until something held is due (<= 0: now); None: nothing held."""
        now = time.monotonic()
        with self._state:
            dues = []
            if self._ahead is not None:
                dues.append(self._ahead.at + self._held(self._ahead) - now)
            if self._owed is not None:
                dues.append(self._owed.since + self.ack_hold - now)
        return min(dues) if dues else None

    def _release_loop(self) -> None:
        while not self._closed:
            self._idle = True
            due = self._due()
            if due is None:
                self._wake.wait()
                self._wake.clear()
                continue
            self._idle = False
            if due > 0:
                self._wake.wait(due)
                self._wake.clear()
                continue
            if not self.stream.lock.acquire(timeout=self.hold):
                continue  # a call is in flight; it settles or claims what is held
            try:
                self.stream.releasing = True
                now = time.monotonic()
                with self._state:
                    a = self._ahead
                    if a is not None and now - a.at >= self._held(a):
                        self._ahead = None
                    else:
                        a = None
                    owed = self._owed
                    if owed is not None and now - owed.since >= self.ack_hold:
                        self._owed = None
                    else:
                        owed = None
                if a is not None:
                    self._give_back(a)
                if owed is not None:
                    self._send_acks(owed)
            finally:
                self.stream.releasing = False
                self.stream.lock.release()

    def release(self) -> None:
        """Before the connection ends (caller holds :attr:`StepStream.lock`): give back
        what was taken ahead, uncounted (the session's rundown aborts what is left as a
        failed attempt, raising its AbortCount). RR_ACKs held back are dropped: their
        transaction is the application's, aborted by the rundown as it should be."""
        self._started = None
        with self._state:
            a, self._ahead = self._ahead, None
            self._owed = None
        if a is not None:
            self._give_back(a)

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
