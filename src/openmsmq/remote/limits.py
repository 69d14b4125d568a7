"""The limits of the remote-read service: every count and size a request carries is checked
here before the call does any work.

A request names how many messages it wants (``max_count``), how many request ids it ends,
how many messages it sends, how many queues it names, and queue names of any length; the
gRPC layer only bounds the request's bytes (:data:`openmsmq.remote.server.MAX_REQUEST_BYTES`).
Unchecked, a ``max_count`` of 0xFFFFFFFF made the service allocate a PendingRequestEntry per
request id under the core's lock, stalling every other client. Each check raises
:class:`~openmsmq.errors.LimitError` naming the setting that bounds it; the service logs and
counts the refusal (:mod:`openmsmq.observability.refusals`).

:class:`RemoteLimits` holds the configurable bounds (``[remote]``: ``max_batch_messages``,
``max_batch_queues``); a queue or format name is bounded by :data:`MAX_NAME_CHARS`, a fixed
bound far above any name MSMQ accepts.
"""

from __future__ import annotations

from dataclasses import dataclass

from openmsmq.errors import HResult, LimitError

__all__ = [
    "MAX_BATCH_MESSAGES",
    "MAX_BATCH_QUEUES",
    "MAX_NAME_CHARS",
    "NAME_LIMIT",
    "RemoteLimits",
    "check_count",
    "check_name",
]

#: Default of ``remote.max_batch_messages``: messages (or request ids) one call may ask for,
#: end or carry.
MAX_BATCH_MESSAGES = 100_000
#: Default of ``remote.max_batch_queues``: queues one call may name (LookupRanges, RemoveThrough).
MAX_BATCH_QUEUES = 1000
#: Longest queue path or format name a call may carry. MSMQ's own bounds are far lower
#: (a queue name has at most 124 characters, MS-MQMQ 2.1.1); names are parsed and
#: memoised, so an unbounded one would be kept in memory.
MAX_NAME_CHARS = 1024
#: How a refusal of a too-long name names its rule.
NAME_LIMIT = "queue name length"


def check_count(n: int, limit: int, key: str, what: str) -> int:
    """``n`` when ``1 <= n <= limit``; else :class:`LimitError` (MQ_ERROR_INVALID_PARAMETER)
    naming ``key`` and ``what`` was asked."""
    if n < 1:
        raise LimitError(HResult.MQ_ERROR_INVALID_PARAMETER, f"{what} must be at least 1, got {n}", limit=key)
    if n > limit:
        raise LimitError(
            HResult.MQ_ERROR_INVALID_PARAMETER, f"{what} {n:,} exceeds {key} = {limit:,}", limit=key
        )
    return n


def check_name(name: str, what: str = "queue name") -> str:
    """``name`` when it has at most :data:`MAX_NAME_CHARS` characters, else :class:`LimitError`."""
    if len(name) > MAX_NAME_CHARS:
        raise LimitError(
            HResult.MQ_ERROR_INVALID_PARAMETER,
            f"{what} of {len(name):,} characters (at most {MAX_NAME_CHARS:,})",
            limit=NAME_LIMIT,
        )
    return name


@dataclass(frozen=True)
class RemoteLimits:
    """The configurable bounds of one remote-read service (``[remote]``)."""

    #: ``remote.max_batch_messages``: messages one Read / StartReceive may ask for, request
    #: ids one EndReceive may end, messages one Send or SendIdempotent may carry, messages
    #: one PeekRange may return.
    max_batch_messages: int = MAX_BATCH_MESSAGES
    #: ``remote.max_batch_queues``: queues one LookupRanges or RemoveThrough may name.
    max_batch_queues: int = MAX_BATCH_QUEUES

    def messages(self, n: int, what: str) -> int:
        """``n`` within ``remote.max_batch_messages`` (see :func:`check_count`)."""
        return check_count(n, self.max_batch_messages, "remote.max_batch_messages", what)

    def queues(self, n: int, what: str) -> int:
        """``n`` within ``remote.max_batch_queues`` (see :func:`check_count`); 0 is allowed."""
        return check_count(n, self.max_batch_queues, "remote.max_batch_queues", what) if n else 0
