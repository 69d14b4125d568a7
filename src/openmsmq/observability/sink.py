"""What the hot paths report to metrics: a tiny protocol, and a no-op default.

``store/`` and ``qm/`` must not import ``prometheus_client`` (layers depend downward, and
a library user without a metrics endpoint should not pay for one). They hold a
:class:`MetricsSink` instead — an attribute or constructor argument defaulting to
:data:`NULL_METRICS` — and call it once per *batch* at the points where a batch becomes
final (a commit, a group of accepted messages, one Transmit or Released event).
:class:`openmsmq.observability.metrics.Metrics` implements it with Prometheus metrics;
``openmsmq serve`` passes one down.

This module imports only the standard library, so any layer above ``wire``/``protocol``
may import it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Protocol

__all__ = ["NULL_METRICS", "STAGES", "MetricsSink", "NullMetrics"]

#: The stages of a message's way from the sender's commit to a receiver, each observed
#: once per batch (:meth:`MetricsSink.observe_stage`):
#:
#: * ``store_queue_wait``: a store operation waited for its group commit to start (the
#:   oldest operation of each commit: the single writer busy with the previous one);
#: * ``outgoing_commit_to_write``: the sending QM, from a commit into an outgoing queue
#:   being noticed to the next write of MS-MQQB packets to the peers (the wake-up, the
#:   load from the store, the encoding);
#: * ``accept_read_to_batch``: the receiving QM, from reading accepted messages off the
#:   socket to handing them to the store as a batch (the wait for the previous batch, and
#:   the hold of a dense stream, ``mqqb.accept_batch_wait``);
#: * ``accept_batch_to_stored``: from handing a batch to the store to its messages being
#:   durable and reported to their sequences (the thread hops, the commit's queue wait
#:   and the commit); waiting readers are woken at its commit;
#: * ``stored_to_reader``: from a commit waking the reads waiting on a queue to one of
#:   them having taken its messages (the thread wake-up and the select); the reply to a
#:   remote reader comes after it.
STAGES = (
    "store_queue_wait",
    "outgoing_commit_to_write",
    "accept_read_to_batch",
    "accept_batch_to_stored",
    "stored_to_reader",
)


class MetricsSink(Protocol):
    """Events the queue manager, its store and its transfer report (one call per batch).

    ``now`` arguments are the transfer's protocol clock (monotonic seconds): the sink only
    subtracts two of them. Labels (``role``, ``reason``) are Enum members of the protocol
    layer; the sink turns them into label values.
    """

    def count_committed(self, sent: int, received: int) -> None:
        """One committed application transaction (or non-transactional operation): ``sent``
        messages sent, ``received`` messages received (removed by a reader)."""
        ...

    def count_dead_lettered(self, classes: Iterable[int]) -> None:
        """Messages moved to a dead-letter queue by one commit, one Message.Class each
        (MS-MQMQ 2.2.18.1.6)."""
        ...

    def count_poison(self, queue: str, disposition: str) -> None:
        """A queue's retry policy handled one message: ``retry``, ``poison``, ``reject``
        or ``drop`` (openmsmq.retry_policy.Disposition)."""
        ...

    def observe_commit(self, ops: int, seconds: float) -> None:
        """One store transaction of ``ops`` operations took ``seconds`` (its fsync included)."""
        ...

    def count_accepted(self, n: int) -> None:
        """``n`` incoming transactional messages of one group are durable (MS-MQQB 3.1.5.8.6)."""
        ...

    def count_rejected(self, reason: object) -> None:
        """An incoming transactional message failed the acceptance rule for ``reason``."""
        ...

    def count_forwarded(self, n: int) -> None:
        """``n`` messages passed on to another QM (this QM is an intermediate hop)."""
        ...

    def count_refused(self, rule: str) -> None:
        """A peer's packet or session, or a client's request, was refused by ``rule``: a trust
        rule (``source-qm``, ``identity``, ``ack-origin``, ...), a limit's setting (such as
        ``remote.max_batch_messages``) or a check (``permission``); docs/security.md."""
        ...

    def count_arrival_rejected(self, classes: Iterable[int]) -> None:
        """Messages that arrived in order but were rejected by the arrival rules of one
        durable store transaction (MS-MQQB 3.1.5.8), one NACK Message.Class each."""
        ...

    def count_transmitted(self, queue: int, handles: Sequence[int], now: float, resend: bool) -> None:
        """Messages of outgoing queue ``queue`` went out in one Transmit: their
        LookupIdentifiers ``handles``, ascending (``resend``: the protocol sends them
        again, after the Transactional Ack Wait Timer or when a session opens)."""
        ...

    def count_released(self, queue: int, n: int, last_handle: int, now: float) -> None:
        """An OrderAck released ``n`` messages of outgoing queue ``queue``, up to
        LookupIdentifier ``last_handle``."""
        ...

    def session_opened(self, role: object) -> None:
        """An MS-MQQB session of ``role`` finished its handshake."""
        ...

    def session_closed(self, role: object, reason: object, *, was_open: bool = True) -> None:
        """An MS-MQQB session closed for ``reason`` (``was_open``: it had been established)."""
        ...

    def reading_paused(self, paused: bool) -> None:
        """The MS-MQQB node stopped (True) or resumed (False) reading from its peers: the
        received messages waiting for the store passed ``mqqb.receive_buffer``."""
        ...

    def range_removed(self, positions: Mapping[str, int]) -> None:
        """A range reader (the Spark source's commit) durably removed every message at or
        below ``positions[queue]`` (queue name -> LookupIdentifier)."""
        ...

    def observe_stage(self, stage: str, seconds: float) -> None:
        """One batch spent ``seconds`` in ``stage`` of the way from a sender's commit to a
        receiver (one of :data:`STAGES`; docs/operations.md, "Where latency goes")."""
        ...


class NullMetrics:
    """A :class:`MetricsSink` that records nothing (the default everywhere)."""

    def count_committed(self, sent: int, received: int) -> None:
        """Nothing."""

    def count_dead_lettered(self, classes: Iterable[int]) -> None:
        """Nothing."""

    def count_poison(self, queue: str, disposition: str) -> None:
        """Nothing."""

    def observe_commit(self, ops: int, seconds: float) -> None:
        """Nothing."""

    def count_accepted(self, n: int) -> None:
        """Nothing."""

    def count_rejected(self, reason: object) -> None:
        """Nothing."""

    def count_forwarded(self, n: int) -> None:
        """Nothing."""

    def count_refused(self, rule: str) -> None:
        """Nothing."""

    def count_arrival_rejected(self, classes: Iterable[int]) -> None:
        """Nothing."""

    def count_transmitted(self, queue: int, handles: Sequence[int], now: float, resend: bool) -> None:
        """Nothing."""

    def count_released(self, queue: int, n: int, last_handle: int, now: float) -> None:
        """Nothing."""

    def session_opened(self, role: object) -> None:
        """Nothing."""

    def session_closed(self, role: object, reason: object, *, was_open: bool = True) -> None:
        """Nothing."""

    def reading_paused(self, paused: bool) -> None:
        """Nothing."""

    def range_removed(self, positions: Mapping[str, int]) -> None:
        """Nothing."""

    def observe_stage(self, stage: str, seconds: float) -> None:
        """Nothing."""


#: The shared no-op sink.
NULL_METRICS: MetricsSink = NullMetrics()
