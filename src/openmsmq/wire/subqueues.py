"""Subqueues: ``queue;subqueue`` (MSMQ 4.0 and later; MS-MQMQ 2.1.1 path names with a
``;`` Subqueue of 1 to 32 characters, MS-MQDMPR 3.1.1.2 Queue.SubqueueCollection).

A subqueue is a partition of one queue: its messages belong to the queue, keep their
Identifier, properties and LookupIdentifier, and enter or leave it only by Move Message
(MS-MQRR 3.1.4.10: between a queue and one of its subqueues, either way, or between two
subqueues of one queue); nothing is ever sent to it. A subqueue exists from the first
move into it.

This module owns the naming rules; the queue manager keeps each subqueue as a queue of
kind :attr:`~openmsmq.store.records.QueueType.SUBQUEUE` whose ``parent_queue_id`` is the
queue's, so that reads, receives, purges and counts work on it as on any queue.
"""

from __future__ import annotations

from openmsmq.errors import HResult, MQError, quoted

__all__ = [
    "MAX_SUBQUEUE_NAME",
    "POISON",
    "RESERVED",
    "RETRY",
    "check_subqueue_name",
    "split_key",
    "subqueue_key",
]

#: The subqueue the retry policy parks a message in between retry cycles.
RETRY = "retry"
#: The subqueue of messages whose last retry cycle failed (receive_error_handling=move).
POISON = "poison"
#: Longest subqueue name (MS-MQMQ 2.1.1; the SubqueueHeader holds 32 UTF-16 units).
MAX_SUBQUEUE_NAME = 32
#: Suffixes that name something else after a ``;`` (the queue's journal, the machine
#: queues, MS-MQMQ 2.1.2); no subqueue takes these names.
RESERVED = frozenset({"journal", "deadletter", "deadxact", "xactonly"})
#: Characters a queue name excludes (MS-MQMQ 2.1.1), a subqueue name too.
_EXCLUDED = frozenset('\\;+,"')


def check_subqueue_name(name: str) -> str:
    """The canonical (case-folded) form of a subqueue name, or MQ_ERROR_ILLEGAL_QUEUE_PATHNAME
    naming what is wrong: empty, longer than 32 characters, a character a queue name
    excludes (``\\ ; + , "``), a control character, or a reserved suffix."""
    if not name:
        raise MQError(HResult.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME, "subqueue name is empty")
    if len(name) > MAX_SUBQUEUE_NAME:
        raise MQError(
            HResult.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME,
            f"subqueue name {quoted(name)} is longer than {MAX_SUBQUEUE_NAME} characters",
        )
    bad = [c for c in name if c in _EXCLUDED or not c.isprintable() or c.isspace()]
    if bad:
        raise MQError(
            HResult.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME,
            f"subqueue name {quoted(name)} holds {quoted(bad[0])}, which a queue name may not",
        )
    folded = name.casefold()
    if folded in RESERVED:
        raise MQError(
            HResult.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME,
            f"{quoted(name)} names a system suffix, not a subqueue",
        )
    return folded


def subqueue_key(queue_key: str, subqueue: str) -> str:
    """The key of subqueue ``subqueue`` of the queue keyed ``queue_key``
    (``private$\\orders`` + ``poison`` -> ``private$\\orders;poison``)."""
    return f"{queue_key};{check_subqueue_name(subqueue)}"


def split_key(key: str) -> tuple[str, str | None]:
    """(queue key, subqueue name or None) of a queue key: ``private$\\orders;poison`` ->
    ``("private$\\orders", "poison")``. A journal (``;journal``) or a machine queue
    (``system$;deadletter``) is no subqueue."""
    if key.startswith("system$;"):
        return key, None
    base, sep, sub = key.rpartition(";")
    if not sep or sub in RESERVED:
        return key, None
    return base, sub
