"""Read primitives of the MS-MQRR server over a :class:`~openmsmq.qm.QueueManager`.

Functions of :class:`~openmsmq.remote.core.RemoteReadCore`'s read and receive paths that
need no core state (sessions, handles, the PendingRequestTable): parameter validity of
R_StartReceive / R_StartTransactionalReceive, the sliced wait that lets R_CancelReceive
stop a read, batched reads through a cursor, and Dequeue Message Begin for one message.
Split from :mod:`openmsmq.remote.core`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from openmsmq.errors import HResult, MQError
from openmsmq.qm import (
    CursorAction,
    LookupAction,
    MessageRecord,
    PendingReceive,
    QueueHandle,
    QueueManager,
    Transaction,
)
from openmsmq.remote.codes import Action
from openmsmq.remote.session import OpenQueueDescriptor, Waiter

__all__ = ["REPLY_BYTES", "SEEK", "WAIT_SLICE", "begin_one", "check_read", "cursor_batch", "wait_sliced"]

T = TypeVar("T")

#: Longest single wait inside the queue manager; cancellation is noticed within it.
WAIT_SLICE = 0.2
#: A batched read stops after the message whose body brings the reply to this many bytes
#: (one message at least): a reply must fit one gRPC / protobuf message (under 2 GiB),
#: and a receive that removed messages it could not deliver would lose them.
REPLY_BYTES = 64 * 1024 * 1024

#: The QM's seek for each MQ_LOOKUP_* action.
SEEK: dict[Action, LookupAction] = {
    Action.LOOKUP_PEEK_CURRENT: LookupAction.CURRENT,
    Action.LOOKUP_PEEK_NEXT: LookupAction.NEXT,
    Action.LOOKUP_PEEK_PREV: LookupAction.PREVIOUS,
    Action.LOOKUP_PEEK_FIRST: LookupAction.FIRST,
    Action.LOOKUP_PEEK_LAST: LookupAction.LAST,
    Action.LOOKUP_RECEIVE_CURRENT: LookupAction.CURRENT,
    Action.LOOKUP_RECEIVE_NEXT: LookupAction.NEXT,
    Action.LOOKUP_RECEIVE_PREV: LookupAction.PREVIOUS,
    Action.LOOKUP_RECEIVE_FIRST: LookupAction.FIRST,
    Action.LOOKUP_RECEIVE_LAST: LookupAction.LAST,
}


def _err(code: HResult, message: str) -> MQError:
    return MQError(code, message)


def check_read(
    d: OpenQueueDescriptor,
    action: int,
    lookup_id: int,
    cursor: int,
    timeout_ms: int,
    uow: bytes,
    n: int,
) -> Action:
    """Parameter validity of MS-MQRR 3.1.4.7 / 3.1.4.13 (remote-read.md §3), in the order
    of 3.1.4.13: parameters, cursor, transaction usage."""
    try:
        act = Action(action)
    except ValueError:
        raise _err(HResult.MQ_ERROR_INVALID_PARAMETER, f"ulAction {action:#x}") from None
    if n < 1:
        raise _err(HResult.MQ_ERROR_INVALID_PARAMETER, "max_count must be at least 1")
    if act.is_lookup:
        if cursor or timeout_ms or n != 1:
            raise _err(HResult.MQ_ERROR_INVALID_PARAMETER, "lookup actions take no cursor, timeout or batch")
        if act.needs_lookup_id and not lookup_id:
            raise _err(HResult.MQ_ERROR_INVALID_PARAMETER, f"{act.name} needs a LookupId")
    else:
        if lookup_id:
            raise _err(HResult.MQ_ERROR_INVALID_PARAMETER, "LookupId is only for MQ_LOOKUP_* actions")
        if act == Action.PEEK_NEXT and not cursor:
            raise _err(HResult.MQ_ERROR_INVALID_PARAMETER, "MQ_ACTION_PEEK_NEXT needs a cursor")
    if act.is_peek:
        if not d.access.can_peek:
            raise _err(HResult.MQ_ERROR_ACCESS_DENIED, "handle was not opened for peek")
    elif not d.access.can_receive:
        raise _err(HResult.MQ_ERROR_ACCESS_DENIED, "handle was not opened for receive")
    if cursor and cursor not in d.cursors:
        raise _err(HResult.STATUS_INVALID_HANDLE, f"no cursor {cursor} on handle {d.handle}")
    if uow:
        if not d.qm_handle.record.transactional:
            raise _err(HResult.MQ_ERROR_TRANSACTION_USAGE, "the queue is not transactional")
        if act.is_peek:
            raise _err(HResult.MQ_ERROR_TRANSACTION_USAGE, "a peek cannot be part of a transaction")
    return act


def wait_sliced(
    w: Waiter,
    timeout: float | None,
    fn: Callable[[float], T],
    probe: Callable[[float], object] | None = None,
) -> T:
    """Call ``fn(slice)`` until it returns, ``timeout`` passes, or ``w`` is cancelled.

    With ``probe`` (destructive reads) ``fn`` runs only with timeout 0, right after a
    cancellation check, and the waiting is done by the non-destructive
    ``probe(slice)``: a read whose session ended while it waited never takes a
    message for nobody.
    """
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        if w.event.is_set():
            raise _err(HResult.MQ_ERROR_OPERATION_CANCELLED, "the receive was cancelled")
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        step = WAIT_SLICE if remaining is None else min(remaining, WAIT_SLICE)
        try:
            return fn(0.0 if probe is not None else step)
        except MQError as exc:
            if exc.hresult != HResult.MQ_ERROR_IO_TIMEOUT or (
                remaining is not None and remaining <= (0.0 if probe is not None else step)
            ):
                raise
        if probe is not None:
            try:
                probe(step)
            except MQError as exc:
                if exc.hresult != HResult.MQ_ERROR_IO_TIMEOUT:
                    raise


def cursor_batch(
    qm: QueueManager,
    w: Waiter,
    qh: QueueHandle,
    act: Action,
    cursor: int,
    timeout: float | None,
    t: Transaction | None,
    n: int,
) -> list[MessageRecord]:
    """Up to ``n`` reads through a cursor (:meth:`QueueManager.read_through_cursor`); the
    first waits in slices that R_CancelReceive can stop."""
    receive = act == Action.RECEIVE

    def probe(x: float) -> MessageRecord:
        return qm.peek(qh, timeout=x, cursor=cursor, action=CursorAction.CURRENT)

    return qm.read_through_cursor(
        qh,
        cursor,
        n,
        receive=receive,
        advance=act == Action.PEEK_NEXT,
        tx=t,
        first_read=lambda one: wait_sliced(w, timeout, one, probe if receive else None),
        max_bytes=REPLY_BYTES,
    )


def begin_one(
    qm: QueueManager,
    d: OpenQueueDescriptor,
    act: Action,
    lookup_id: int,
    cursor: int,
    t: Transaction | None,
    x: float,
) -> PendingReceive:
    """Dequeue Message Begin (MS-MQDMPR 3.1.7.1.11) for one message."""
    qh = d.qm_handle
    if act.is_lookup:
        return qm.dequeue_begin(qh, tx=t, lookup_id=lookup_id, action=SEEK[act])
    if not cursor:
        return qm.dequeue_begin(qh, tx=t, timeout=x)
    # At a cursor: the QM locks by LookupIdentifier, so take the message at the
    # cursor and lock exactly that one; retry if another reader took it first.
    for _ in range(64):
        m = qm.peek(qh, timeout=x, cursor=cursor, action=CursorAction.CURRENT)
        try:
            return qm.dequeue_begin(qh, tx=t, lookup_id=m.lookup_id, action=LookupAction.CURRENT)
        except MQError as exc:
            if exc.hresult not in (
                HResult.MQ_ERROR_MESSAGE_NOT_FOUND,
                HResult.MQ_ERROR_TRANSACTION_USAGE,
            ):
                raise
    raise _err(HResult.MQ_ERROR_IO_TIMEOUT, "the message at the cursor kept being taken")
