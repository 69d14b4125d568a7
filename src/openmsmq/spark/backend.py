"""What the Spark data source needs from a queue manager: the :class:`Backend` protocol.

The data source never talks to a queue manager directly; it calls a :class:`Backend`
opened by :func:`open_backend` from the ``endpoint`` option, once on the driver and once
per task on each executor (executors are separate processes, often on other hosts, so a
backend reaches its QM over the network and holds nothing shared in memory).

Endpoints
    ``grpc://host:port``
        The queue manager's remote-read service. Not available yet: it arrives with the
        client library (:mod:`openmsmq.client`); wiring it in is a change to
        :func:`open_backend` only.
    ``file:///absolute/path/to/test.db``
        TEST BACKEND (:mod:`openmsmq.spark.testbackend`): a small SQLite file standing in
        for a queue manager so that the Spark mechanics can be exercised on one machine.
        It is not a product feature and offers none of a QM's guarantees beyond what the
        tests need.

Contract (every implementation must keep it; the data source's exactly-once rests on it)
    1. *Stable watermark.* :meth:`Backend.available_range` reports ``last``: a
       LookupIdentifier such that no message with a LookupIdentifier <= ``last`` can
       become visible in the queue later. LookupIdentifiers of one queue therefore must
       become visible in increasing order; a QM that assigns them at enqueue time inside a
       transaction must report the highest id below every still-open transaction's ids.
    2. *Peek is non-destructive.* :meth:`Backend.peek_range` neither removes nor locks.
    3. *Range removal is one transaction and idempotent.* :meth:`Backend.remove_through`
       removes, for every queue given, all messages with LookupIdentifier <= the position,
       atomically across all queues; repeating it removes nothing more.
    4. *Idempotent send is one transaction and keyed.* :meth:`Backend.send_idempotent`
       enqueues all given messages in one transaction, skipping any whose identity was
       already enqueued to that queue (by an earlier call, or concurrently by another
       attempt of the same task); the check and the insert are in the same transaction.
    5. Failures raise :class:`openmsmq.errors.OpenMSMQError` subclasses (an unreachable QM:
       ``MQError(MQ_ERROR_REMOTE_MACHINE_NOT_AVAILABLE)``; an unknown queue:
       :class:`~openmsmq.errors.QueueNotFoundError`); a failed call had no effect.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable
from urllib.parse import urlsplit

from openmsmq.errors import ConfigError

__all__ = [
    "Backend",
    "LookupRange",
    "OutgoingMessage",
    "PeekedMessage",
    "open_backend",
]


@dataclass(frozen=True)
class LookupRange:
    """Messages of one queue after some position, up to the stable watermark."""

    first: int
    """LookupIdentifier of the oldest such message."""
    last: int
    """The stable watermark (contract 1): LookupIdentifier of the newest such message."""
    count: int
    """How many messages have a LookupIdentifier in ``[first, last]`` (>= 1)."""


@dataclass(frozen=True)
class PeekedMessage:
    """One message as the data source reads it (one output row).

    Field names follow the MS-MQDMPR 3.1.1.12 Message attributes they carry.
    """

    lookup_id: int
    """LookupIdentifier (u64, MS-MQDMPR 3.1.1.12)."""
    message_id: str
    """Identifier, an OBJECTID in MSMQ text form ``{GUID}\\uniquifier`` (MS-MQMQ 2.2.8)."""
    label: str
    body: bytes
    message_class: int
    """Class as its u16 wire value (MS-MQMQ 2.2.18.1.6; 0 = Normal)."""
    priority: int
    correlation_id: bytes
    """CorrelationIdentifier, 20 bytes (MS-MQMQ 2.2.19.3)."""
    app_specific: int
    """ApplicationTag (u32)."""
    sent_time: int
    """SentTime, seconds since 1970-01-01 UTC."""
    arrived_time: int
    """ArrivalTime, seconds since 1970-01-01 UTC."""
    source_qm: str
    """SourceMachineIdentifier: GUID text of the QM that first accepted the message."""
    tx_sequence_id: int | None = None
    """TxSequenceID (MS-MQMQ 2.2.18.1.2) as a signed 64-bit value; None if not transactional."""
    tx_sequence_number: int | None = None
    """TxSequenceNumber (u32); None if not transactional."""


@dataclass(frozen=True)
class OutgoingMessage:
    """A message the writer sends; ``identity`` makes the send idempotent (contract 4)."""

    identity: str
    """Deterministic key, at most 255 characters; unique per destination queue."""
    body: bytes
    label: str = ""
    priority: int = 3
    """0-7; a transactional queue stores 0 whatever is given (MS-MQDMPR 3.1.1.12)."""
    correlation_id: bytes | None = None
    """Exactly 20 bytes, or None for all zeros."""
    app_specific: int = 0


@runtime_checkable
class Backend(Protocol):
    """Operations the Spark data source performs on a queue manager (see the module contract)."""

    def queue_exists(self, queue: str) -> bool:
        """True if ``queue`` (a path name such as ``private$\\orders``) exists on the QM."""
        ...

    def available_range(self, queue: str, after: int = 0, through: int | None = None) -> LookupRange | None:
        """Messages of ``queue`` with ``after`` < LookupIdentifier <= ``through``.

        ``through=None`` means up to the stable watermark (contract 1). None when there is
        no such message. Raises QueueNotFoundError for an unknown queue.
        """
        ...

    def nth_lookup_id(self, queue: str, after: int, n: int) -> int:
        """LookupIdentifier of the ``n``-th message (n >= 1) of ``queue`` after ``after``.

        Only messages at or below the stable watermark count. Raises
        MessageNotFoundError when fewer than ``n`` exist.
        """
        ...

    def peek_range(self, queue: str, after: int, through: int, limit: int) -> list[PeekedMessage]:
        """Up to ``limit`` messages with after < LookupIdentifier <= through, in LookupIdentifier order.

        Non-destructive (contract 2). The caller pages by calling again with ``after`` set to
        the last LookupIdentifier returned.
        """
        ...

    def remove_through(self, positions: Mapping[str, int]) -> int:
        """Remove every message with LookupIdentifier <= ``positions[queue]``, all queues in ONE transaction.

        Idempotent (contract 3). Returns how many messages were removed by this call.
        """
        ...

    def send_idempotent(self, queue: str, messages: Sequence[OutgoingMessage]) -> int:
        """Enqueue ``messages`` to ``queue`` in ONE transaction, skipping identities already seen.

        Returns how many were enqueued by this call (contract 4).
        """
        ...

    def close(self) -> None:
        """Release the connection; the backend is unusable afterwards."""
        ...


def open_backend(endpoint: str, options: Mapping[str, str] | None = None) -> Backend:
    """Open the backend named by ``endpoint`` (the value of the ``endpoint`` option).

    ``options`` are the data source options, for backend settings such as credentials
    or timeouts; none are used yet.
    """
    del options
    parts = urlsplit(endpoint)
    if parts.scheme == "file":
        # Imported here: the test backend is only loaded when a test endpoint is used.
        from openmsmq.spark.testbackend import FileBackend

        if parts.netloc not in ("", "localhost") or not parts.path:
            raise ConfigError(
                "endpoint", f"option 'endpoint': expected file:///absolute/path, got {endpoint!r}"
            )
        return FileBackend(parts.path)
    if parts.scheme == "grpc":
        raise ConfigError(
            "endpoint",
            f"option 'endpoint' {endpoint!r}: the grpc:// backend comes with the openmsmq client "
            "library and is not available in this version",
        )
    raise ConfigError(
        "endpoint",
        f"option 'endpoint' has unsupported scheme {parts.scheme!r} in {endpoint!r} (expected grpc:// or file://)",
    )
