"""LookupIdentifier-range calls of the remote-read service (the Spark data source's seams).

MS-MQRR has no counterpart: these calls name queues instead of opening them, and each
is one round trip for a whole batch (several queues' ranges, many peeked messages, one
removal transaction over several queues, many idempotent sends). The caller's token
permissions are checked on every queue a call names, as R_OpenQueue would check them
(:mod:`openmsmq.remote.auth`): PEEK for range reads, RECEIVE for removal, SEND for the
idempotent send. Outgoing queues (another QM's queue as seen here) cannot be read or
removed from: MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION, as for R_OpenQueue.

Each function is a thin check around the :class:`~openmsmq.qm.QueueManager` method of
the same name (``qm/range_reader.py``), which carries the guarantees (stable watermark, one
transaction, idempotence).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from openmsmq.errors import HResult, MQError, quoted
from openmsmq.qm import LookupRange, MessageRecord, QueueHandle, QueueManager, QueueRecord, QueueType
from openmsmq.remote.auth import Permission, Principal
from openmsmq.remote.limits import RemoteLimits, check_name
from openmsmq.remote.packed import encode_rows
from openmsmq.remote.read_calls import REPLY_BYTES
from openmsmq.store.rows import any_counted

__all__ = [
    "RangeQuery",
    "lookup_ranges",
    "nth_lookup_id",
    "peek_range",
    "peek_range_packed",
    "remove_through",
    "send_idempotent",
]

#: The bounds when the caller passes none (remote.max_batch_messages and
#: remote.max_batch_queues at their defaults): PeekRange returns at most that many
#: messages (the client pages with ``after``), SendIdempotent carries at most that many.
_DEFAULT_LIMITS = RemoteLimits()

RangeQuery = tuple[str, int, int | None]
"""(queue, after, through): messages with after < LookupIdentifier <= through (None: up
to the stable watermark)."""


def _checked(qm: QueueManager, principal: Principal, queue: str, perm: Permission) -> QueueRecord:
    """The queue's record once ``principal`` may ``perm`` it and it is a local queue."""
    rec = qm.get_queue(check_name(queue))  # MQ_ERROR_QUEUE_NOT_FOUND for an unknown name
    if rec.queue_type == QueueType.OUTGOING:
        raise MQError(
            HResult.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION, f"{quoted(queue)} is not a queue of this QM"
        )
    if not principal.allows(rec.name, perm):
        raise MQError(
            HResult.MQ_ERROR_ACCESS_DENIED, f"{principal.name} may not {quoted(perm)} {quoted(queue)}"
        )
    return rec


def _position(value: int, what: str) -> int:
    if not 0 <= value < 2**63:
        raise MQError(HResult.MQ_ERROR_INVALID_PARAMETER, f"{what} {value} is not a LookupIdentifier")
    return value


def lookup_ranges(
    qm: QueueManager,
    principal: Principal,
    queries: Sequence[RangeQuery],
    limits: RemoteLimits = _DEFAULT_LIMITS,
    with_bytes: bool = False,
) -> list[LookupRange | None]:
    """(first, last, count) per query, in order; None where the range holds no message.
    ``with_bytes``: also each range's total stored size.

    Whole-queue queries (after 0, no through) of several queues come from ONE read
    snapshot; others are read one by one (each watermark is stable on its own).
    """
    limits.queues(len(queries), "queries")
    for queue, after, through in queries:
        _checked(qm, principal, queue, Permission.PEEK)
        _position(after, "after")
        if through is not None:
            _position(through, "through")
    if all(after == 0 and through is None for _, after, through in queries):
        names = [q for q, _, _ in queries]
        found = qm.lookup_ranges(names, with_bytes)
        return [found[q] for q in names]
    return [qm.lookup_range(q, after, through, with_bytes) for q, after, through in queries]


def nth_lookup_id(
    qm: QueueManager, principal: Principal, queue: str, after: int, n: int, through: int | None = None
) -> int:
    """LookupIdentifier of the ``n``-th message after ``after`` (MQ_ERROR_MESSAGE_NOT_FOUND
    when fewer exist)."""
    _checked(qm, principal, queue, Permission.PEEK)
    if not 1 <= n < 2**63:
        raise MQError(HResult.MQ_ERROR_INVALID_PARAMETER, f"n must be 1..2**63-1, got {n}")
    return qm.nth_lookup_id(queue, _position(after, "after"), n, through)


def peek_range(
    qm: QueueManager,
    principal: Principal,
    queue: str,
    after: int,
    through: int | None,
    max_count: int,
    limits: RemoteLimits = _DEFAULT_LIMITS,
) -> list[MessageRecord]:
    """Up to ``max_count`` messages with after < LookupIdentifier (<= through), in
    LookupIdentifier order; nothing removed or locked."""
    limits.messages(max_count, "max_count")
    _checked(qm, principal, queue, Permission.PEEK)
    return qm.peek_range_limited(queue, _position(after, "after"), max_count, through, REPLY_BYTES)


def peek_range_packed(
    qm: QueueManager,
    principal: Principal,
    queue: str,
    after: int,
    through: int | None,
    max_count: int,
    limits: RemoteLimits = _DEFAULT_LIMITS,
) -> bytes | None:
    """:func:`peek_range` in the packed form (:func:`openmsmq.remote.packed.encode_rows`),
    encoded from the stored rows: no :class:`MessageRecord` per message. None when a message of
    the range has an AbortCount or a MoveCount, which the packed form does not carry (the
    caller then answers with :func:`peek_range`)."""
    limits.messages(max_count, "max_count")
    _checked(qm, principal, queue, Permission.PEEK)
    rows = qm.peek_range_rows(queue, _position(after, "after"), max_count, through, REPLY_BYTES)
    if any_counted(rows):
        return None
    return encode_rows(rows)


def remove_through(
    qm: QueueManager,
    principal: Principal,
    positions: Mapping[str, int],
    limits: RemoteLimits = _DEFAULT_LIMITS,
) -> int:
    """Remove every message with LookupIdentifier <= ``positions[queue]``, all queues in ONE
    transaction; returns how many this call removed. Every permission is checked before
    anything is removed."""
    limits.queues(len(positions), "queues")
    for queue, pos in positions.items():
        _checked(qm, principal, queue, Permission.RECEIVE)
        _position(pos, "position")
    targets: dict[str | QueueHandle, int] = {q: p for q, p in positions.items()}
    return qm.remove_through(targets)


def send_idempotent(
    qm: QueueManager,
    principal: Principal,
    queue: str,
    messages: Sequence[MessageRecord],
    identities: Sequence[str],
    limits: RemoteLimits = _DEFAULT_LIMITS,
) -> list[int | None]:
    """Send ``messages`` to a local queue in ONE transaction; a message whose identity the
    queue already accepted is skipped (None in the result, else its LookupIdentifier)."""
    if messages:
        limits.messages(len(messages), "messages")
    _checked(qm, principal, queue, Permission.SEND)
    if not messages:
        return []
    return qm.send_idempotent(queue, messages, identities)
