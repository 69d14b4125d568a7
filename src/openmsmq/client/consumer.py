"""A transactional consumer loop with a retry policy: the poison-message handling of the
client library (WCF's MSMQ binding gives .NET services the same).

Each message is received in its own transaction and handed to the handler; the
transaction commits when the handler returns and aborts when it raises (the queue
manager then adds one to the message's AbortCount). Before the handler sees a message,
the consumer applies the retry policy (:mod:`openmsmq.retry_policy`) to its counts:
past ``receive_retry_count`` aborts the message moves to ``;retry`` (back after
``retry_cycle_delay``), and after ``max_retry_cycles`` cycles it is moved to ``;poison``,
rejected, dropped or (``fault``) raised as :class:`~openmsmq.errors.PoisonMessageError`.
The other messages keep flowing behind a poison one.

The policy is the consumer's own when given, else the queue's (a queue whose policy the
queue manager already applies at each abort: the consumer then only meets a message past
it after a crash, or with ``fault``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from openmsmq.client.message import Message
from openmsmq.client.types import QueueInfo
from openmsmq.errors import HResult, MQError, PoisonMessageError
from openmsmq.retry_policy import Disposition, RetryPolicy
from openmsmq.wire.subqueues import POISON, RETRY


class ConsumedQueue(Protocol):
    """What :func:`consume` uses of an open queue (:class:`openmsmq.client.Queue`)."""

    name: str

    def info(self) -> QueueInfo: ...

    def transaction(self) -> Any: ...

    def receive(self, timeout: float | None = None, tx: Any = None) -> Message: ...

    def move(self, lookup_id: int, to: str, *, tx: Any = None, return_after: float | None = None) -> int: ...

    def reject(self, message: Message, tx: Any) -> None: ...


__all__ = ["ConsumeStats", "ConsumedQueue", "consume"]

log = logging.getLogger("openmsmq.client.consumer")


@dataclass
class ConsumeStats:
    """What one :func:`consume` call did, message by message."""

    #: Handled and committed.
    processed: int = 0
    #: Handler raised: the transaction was aborted (the message is back, or where the
    #: queue's policy sent it).
    aborted: int = 0
    #: Moved to ``;retry`` by this consumer's policy.
    retried: int = 0
    #: Moved to ``;poison``.
    poisoned: int = 0
    #: Rejected (NACK_RECEIVE_REJECTED at commit).
    rejected: int = 0
    #: Dropped (received without being handled).
    dropped: int = 0


def consume(
    queue: ConsumedQueue,
    handler: Callable[[Message], object],
    *,
    policy: RetryPolicy | None = None,
    max_messages: int | None = None,
    timeout: float | None = 0.0,
) -> ConsumeStats:
    """Receive and handle messages of ``queue`` (opened for receiving, transactional),
    one transaction each, until the queue stays empty for ``timeout`` seconds or
    ``max_messages`` were taken. Raises :class:`~openmsmq.errors.PoisonMessageError`
    when the policy's last word on a message is ``fault`` (the message stays)."""
    if max_messages is not None and max_messages < 0:
        raise MQError(HResult.MQ_ERROR_INVALID_PARAMETER, f"max_messages {max_messages} is negative")
    effective = policy if policy is not None else RetryPolicy.decode(queue.info().retry_policy)
    stats = ConsumeStats()
    taken = 0
    while max_messages is None or taken < max_messages:
        with queue.transaction() as tx:
            try:
                m = queue.receive(timeout=timeout, tx=tx)
            except MQError as exc:
                if exc.hresult == HResult.MQ_ERROR_IO_TIMEOUT:
                    return stats
                raise
            taken += 1
            d = Disposition.STAY if effective is None else effective.decide(m.abort_count, m.move_count)
            if d is Disposition.STAY:
                try:
                    handler(m)
                except Exception:
                    log.debug("handler failed on message %d of %s: aborted", m.lookup_id, queue.name)
                    tx.abort()
                    stats.aborted += 1
                    continue
                stats.processed += 1
                continue
            assert effective is not None
            if d is Disposition.RETRY:
                queue.move(m.lookup_id, RETRY, tx=tx, return_after=effective.retry_cycle_delay)
                stats.retried += 1
            elif d is Disposition.POISON:
                queue.move(m.lookup_id, POISON, tx=tx)
                stats.poisoned += 1
            elif d is Disposition.REJECT:
                queue.reject(m, tx)
                stats.rejected += 1
            elif d is Disposition.DROP:
                log.warning(
                    "poison message %d of %s dropped after %d aborted receives (drop)",
                    m.lookup_id, queue.name, m.abort_count,
                )  # fmt: skip
                stats.dropped += 1
            else:  # FAULT: the message stays where it is
                tx.abort()
                raise PoisonMessageError(queue.name, m.lookup_id, m.abort_count, m.move_count)
    return stats
