"""Prometheus metrics of one queue-manager process, and their HTTP endpoint.

One :class:`Metrics` object owns one ``prometheus_client`` :class:`CollectorRegistry`
with every ``openmsmq_*`` metric (names carry their unit: ``_seconds``, ``_bytes``,
``_operations``; counters end in ``_total`` when exposed). The hot path increments them
once per *batch*::

    metrics.messages_sent.inc(len(sends))          # one commit of many sends
    metrics.rejected(RejectReason.GAP).inc()
    metrics.dead_lettered(0xC002).inc(n)            # Message.Class -> class name label
    metrics.observe_commit(ops=len(batch), seconds=elapsed)

Queue depth and bytes are not counted on the hot path: :class:`QueueManagerCollector`
asks the queue manager on each scrape (one ``SELECT`` over the ``queues`` table, whose
``msg_count`` / ``total_bytes`` the store keeps current in every commit), and also
exposes the store writer's commit counters (``Store.stats``).

:func:`start_metrics_server` serves ``/metrics`` from a daemon thread (the
``prometheus_client`` WSGI server), on 127.0.0.1 unless told otherwise.

Label values are short and bounded: Enum members become their lower-case name
(``RejectReason.GAP`` → ``gap``, ``Role.INITIATOR`` → ``initiator``); message classes
become their MS-MQMQ 2.2.18.1.6 name (``NACK_RECEIVE_TIMEOUT``). ``docs/operations.md``
lists every metric with its meaning.
"""

from __future__ import annotations

import logging
import threading
from bisect import bisect_right
from collections import Counter as _Tally
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from openmsmq import __version__
from openmsmq.config import MetricsConfig
from openmsmq.observability.health import Health, serve_http, with_health
from openmsmq.observability.logging import log_event
from openmsmq.wire.constants import message_class_name

__all__ = [
    "BATCH_BUCKETS",
    "COMMIT_BUCKETS",
    "FIRST_SENT_WINDOW",
    "ORDER_ACK_BUCKETS",
    "STAGE_BUCKETS",
    "Metrics",
    "MetricsServer",
    "QueueManagerCollector",
    "QueueStat",
    "default_metrics",
    "label_value",
    "start_metrics_from_config",
    "start_metrics_server",
]

_log = logging.getLogger("openmsmq.metrics")

#: Commit latency buckets (s): an fsync takes from ~50 µs (NVMe) to tens of ms (disks).
COMMIT_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
#: Operations per group commit (one fsync); the writer caps it at store.group_commit_max_batch.
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)
#: OrderAck round trip (s): OrderAckTimeout is 500 ms and MaximumOrderAckDelay 10 s
#: (MS-MQQB 3.1.1.3.1), so most values sit between 0.5 and 10 s.
ORDER_ACK_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
#: Stage buckets (s): from a loop wake-up (tens of µs) to a stalled disk.
STAGE_BUCKETS = (
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.002, 0.003, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
)  # fmt: skip


#: Transmit batches remembered per outgoing queue for the OrderAck round trip (oldest
#: dropped beyond it: the round trip of what they carried is then under-estimated).
FIRST_SENT_WINDOW = 65536


def label_value(value: object) -> str:
    """A label value: Enum members as their lower-case name, anything else as ``str``."""
    if isinstance(value, Enum):
        return value.name.lower()
    return str(value)


def _class_label(message_class: int | str) -> str:
    """The label of a Message.Class: its one name (``NACK_BAD_DST_Q``,
    :func:`~openmsmq.wire.constants.message_class_name`)."""
    if isinstance(message_class, str):
        return message_class
    return message_class_name(message_class)


class Metrics:
    """Every ``openmsmq_*`` metric of one QM process, in :attr:`registry`.

    Plain counters are attributes (``metrics.messages_sent.inc(n)``); labelled ones are
    reached through small methods that cache the label child, so the hot path pays one
    dict lookup and one locked add per batch.

    It is the :class:`~openmsmq.observability.sink.MetricsSink` that ``openmsmq serve``
    hands to the queue manager, its store and its transfer (the ``count_*`` methods).
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.info = Gauge("openmsmq_build_info", "openmsmq version (value 1).", ["version"], registry=r)
        self.info.labels(__version__).set(1)
        #: Messages sent by local applications (committed sends, local or remote destination).
        self.messages_sent = Counter(
            "openmsmq_messages_sent", "Messages sent by local applications (committed).", registry=r
        )
        #: Messages removed by local applications or remote readers (committed receives).
        self.messages_received = Counter(
            "openmsmq_messages_received", "Messages received by applications (committed).", registry=r
        )
        #: UserMessage packets carrying a message to another QM, first transmissions only.
        self.messages_transmitted = Counter(
            "openmsmq_messages_transmitted",
            "Messages transmitted to another queue manager over MS-MQQB (first transmissions).",
            registry=r,
        )
        #: Messages this QM relayed as an intermediate hop (neither sent nor read here).
        self.messages_forwarded = Counter(
            "openmsmq_messages_forwarded",
            "Messages relayed for other queue managers (this QM is an intermediate hop).",
            registry=r,
        )
        #: Incoming transactional messages that passed the acceptance rule and were stored.
        self.messages_accepted = Counter(
            "openmsmq_messages_accepted",
            "Messages from other queue managers accepted and stored (MS-MQQB 3.1.5.8.6).",
            registry=r,
        )
        #: Outgoing messages released by an OrderAck (MS-MQQB 3.1.5.6).
        self.messages_acknowledged = Counter(
            "openmsmq_messages_acknowledged",
            "Outgoing transactional messages released by an OrderAck.",
            registry=r,
        )
        #: Retransmissions of messages still waiting for their OrderAck (MS-MQQB 3.1.6.5).
        self.resends = Counter(
            "openmsmq_message_resends", "Messages transmitted again (Transactional Ack Wait).", registry=r
        )
        self._rejected = Counter(
            "openmsmq_messages_rejected",
            "Incoming messages refused by the acceptance rule, by reason.",
            ["reason"],
            registry=r,
        )
        self._dead_lettered = Counter(
            "openmsmq_messages_dead_lettered",
            "Messages moved to a dead-letter queue, by Message.Class name.",
            ["class"],
            registry=r,
        )
        self._poison = Counter(
            "openmsmq_poison_messages",
            "Messages a queue's retry policy handled after aborted receives, by queue and by what"
            " happened (retry: moved to ;retry; poison: moved to ;poison; reject; drop).",
            ["queue", "disposition"],
            registry=r,
        )
        self._arrival_rejected = Counter(
            "openmsmq_messages_rejected_on_arrival",
            "Incoming messages received in order but refused by the arrival rules (MS-MQQB 3.1.5.8), "
            "by NACK Message.Class name.",
            ["class"],
            registry=r,
        )
        self._sessions = Gauge("openmsmq_sessions", "Open MS-MQQB sessions, by role.", ["role"], registry=r)
        self._sessions_opened = Counter(
            "openmsmq_sessions_opened", "MS-MQQB sessions established, by role.", ["role"], registry=r
        )
        self._sessions_closed = Counter(
            "openmsmq_sessions_closed", "MS-MQQB sessions closed, by reason.", ["reason"], registry=r
        )
        self._refused = Counter(
            "openmsmq_refusals",
            "Packets, sessions and requests of peers and clients refused by a trust rule, a limit or a"
            " check, by rule (the rule's name or the setting that refused them; docs/security.md).",
            ["rule"],
            registry=r,
        )
        self._reading_paused = Gauge(
            "openmsmq_mqqb_reading_paused",
            "1 while the MS-MQQB node does not read from its peers (received messages wait for the store).",
            registry=r,
        )
        self._reading_pauses = Counter(
            "openmsmq_mqqb_reading_pauses",
            "Times the MS-MQQB node stopped reading for the store.",
            registry=r,
        )
        self._range_position = Gauge(
            "openmsmq_range_reader_position",
            "LookupIdentifier through which a range reader (the Spark source) has committed and "
            "removed the queue's messages.",
            ["queue"],
            registry=r,
        )
        #: Wall time of one group commit (BEGIN … COMMIT, fsync included).
        self.commit_duration = Histogram(
            "openmsmq_store_commit_duration_seconds",
            "Time of one store commit including its fsync.",
            buckets=COMMIT_BUCKETS,
            registry=r,
        )
        #: Operations that shared one commit (one fsync).
        self.commit_batch = Histogram(
            "openmsmq_store_commit_batch_operations",
            "Operations committed together by one store transaction (one fsync).",
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        #: Time from sending a message to the OrderAck that covers it.
        self.order_ack_rtt = Histogram(
            "openmsmq_order_ack_round_trip_seconds",
            "Time from transmitting a transactional message to the OrderAck covering it.",
            buckets=ORDER_ACK_BUCKETS,
            registry=r,
        )
        #: Where the time of a message's way goes, per stage (observability.sink.STAGES).
        self.stage_duration = Histogram(
            "openmsmq_stage_duration_seconds",
            "Time one batch spent in a stage of a message's way from the sender's commit to a receiver.",
            ["stage"],
            buckets=STAGE_BUCKETS,
            registry=r,
        )
        self._children: dict[tuple[str, str], Any] = {}
        self._children_lock = threading.Lock()
        self._range_high: dict[str, int] = {}
        self._collectors: list[Collector] = []
        # Per outgoing queue: the highest LookupIdentifier transmitted so far, and the
        # (first, last LookupIdentifier, time) of each first-transmission batch not yet
        # fully released (the transfer calls these on its event loop thread only).
        self._sent_high: dict[int, int] = {}
        self._first_sent: dict[int, deque[tuple[int, int, float]]] = {}

    # ---- labelled children (cached) ------------------------------------------------------

    def _child(self, metric: Any, kind: str, value: str) -> Any:
        key = (kind, value)
        child = self._children.get(key)
        if child is None:
            with self._children_lock:
                child = self._children.get(key)
                if child is None:
                    child = metric.labels(value)
                    self._children[key] = child
        return child

    def rejected(self, reason: object) -> Counter:
        """The counter of messages rejected for ``reason`` (e.g. ``RejectReason.DUPLICATE``)."""
        child: Counter = self._child(self._rejected, "rejected", label_value(reason))
        return child

    def refused(self, rule: str) -> Counter:
        """The counter of refusals by trust rule ``rule`` (e.g. ``"ack-origin"``)."""
        child: Counter = self._child(self._refused, "refused", rule)
        return child

    def dead_lettered(self, message_class: int | str) -> Counter:
        """The counter of messages dead-lettered with ``message_class`` (int or name)."""
        child: Counter = self._child(self._dead_lettered, "dead", _class_label(message_class))
        return child

    def rejected_on_arrival(self, message_class: int | str) -> Counter:
        """The counter of messages rejected on arrival with NACK ``message_class``."""
        child: Counter = self._child(self._arrival_rejected, "arrival", _class_label(message_class))
        return child

    def sessions(self, role: object) -> Gauge:
        """The gauge of open sessions of ``role`` (``Role.INITIATOR`` / ``Role.ACCEPTOR``)."""
        child: Gauge = self._child(self._sessions, "sessions", label_value(role))
        return child

    # ---- events --------------------------------------------------------------------------

    def session_opened(self, role: object) -> None:
        """A session of ``role`` is established: count it and raise the open gauge."""
        label = label_value(role)
        self._child(self._sessions_opened, "opened", label).inc()
        self._child(self._sessions, "sessions", label).inc()

    def session_closed(self, role: object, reason: object, *, was_open: bool = True) -> None:
        """A session closed for ``reason`` (e.g. ``CloseReason.IDLE``); ``was_open=False`` for one
        that never finished its handshake (counted, gauge unchanged)."""
        self._child(self._sessions_closed, "closed", label_value(reason)).inc()
        if was_open:
            self._child(self._sessions, "sessions", label_value(role)).dec()

    def reading_paused(self, paused: bool) -> None:
        """The MS-MQQB node stopped (True) or resumed (False) reading from its peers."""
        self._reading_paused.set(1 if paused else 0)
        if paused:
            self._reading_pauses.inc()

    def range_removed(self, positions: Mapping[str, int]) -> None:
        """A range reader removed through ``positions``: its position per queue (a gauge
        that only rises: a repeated or older removal leaves it where it is)."""
        for queue, through in positions.items():
            child = self._child(self._range_position, "range", queue)
            with self._children_lock:
                if through > self._range_high.get(queue, 0):
                    self._range_high[queue] = through
                    child.set(through)

    def observe_commit(self, ops: int, seconds: float) -> None:
        """One store commit of ``ops`` operations that took ``seconds`` (fsync included)."""
        self.commit_duration.observe(seconds)
        self.commit_batch.observe(ops)

    def observe_stage(self, stage: str, seconds: float) -> None:
        """One batch spent ``seconds`` in ``stage`` (observability.sink.STAGES)."""
        self._child(self.stage_duration, "stage", stage).observe(seconds)

    def observe_order_ack_rtt(self, seconds: float) -> None:
        """An OrderAck arrived ``seconds`` after the first transmission it covers."""
        self.order_ack_rtt.observe(seconds)

    # ---- MetricsSink (the hot paths; one call per batch) ----------------------------------

    def count_committed(self, sent: int, received: int) -> None:
        """One committed transaction: ``sent`` messages sent, ``received`` received."""
        if sent:
            self.messages_sent.inc(sent)
        if received:
            self.messages_received.inc(received)

    def count_dead_lettered(self, classes: Iterable[int]) -> None:
        """Messages moved to a dead-letter queue by one commit, by Message.Class."""
        for cls, n in _Tally(classes).items():
            self.dead_lettered(cls).inc(n)

    def count_poison(self, queue: str, disposition: str) -> None:
        """A retry policy moved, rejected or dropped one message of ``queue``."""
        self._poison.labels(queue=queue, disposition=disposition).inc()

    def count_accepted(self, n: int) -> None:
        """``n`` incoming transactional messages stored (one group of an accept batch)."""
        self.messages_accepted.inc(n)

    def count_rejected(self, reason: object) -> None:
        """One incoming message refused by the acceptance rule for ``reason``."""
        self.rejected(reason).inc()

    def count_refused(self, rule: str) -> None:
        """One packet, session or request refused by ``rule`` (docs/security.md lists the rules)."""
        self.refused(rule).inc()

    def count_forwarded(self, n: int) -> None:
        """``n`` messages relayed as an intermediate hop."""
        self.messages_forwarded.inc(n)

    def count_arrival_rejected(self, classes: Iterable[int]) -> None:
        """Messages refused by the arrival rules of one store transaction, by NACK class."""
        for cls, n in _Tally(classes).items():
            self.rejected_on_arrival(cls).inc(n)

    def count_transmitted(self, queue: int, handles: Sequence[int], now: float, resend: bool) -> None:
        """One Transmit of outgoing queue ``queue``: the LookupIdentifiers ``handles`` (in
        ascending order) went out at ``now`` (protocol clock).

        The protocol marks as a resend everything sent when a session opens, including
        messages this process never transmitted (loaded while no session was open, or
        reloaded after a restart): a message counts as a first transmission when its
        LookupIdentifier is above the highest this process transmitted on that queue,
        and as a resend otherwise. Each first-transmission batch is remembered, with
        ``now``, for the OrderAck round trip (:meth:`count_released`)."""
        if not handles:
            return
        high = self._sent_high.get(queue, 0)
        first_index = bisect_right(handles, high) if (resend or handles[0] <= high) else 0
        first = len(handles) - first_index
        if first:
            self.messages_transmitted.inc(first)
            last = handles[-1]
            self._sent_high[queue] = last
            window = self._first_sent.get(queue)
            if window is None:
                window = self._first_sent[queue] = deque(maxlen=FIRST_SENT_WINDOW)
            window.append((handles[first_index], last, now))
        if first_index:
            self.resends.inc(first_index)

    def count_released(self, queue: int, n: int, last_handle: int, now: float) -> None:
        """An OrderAck released ``n`` messages of ``queue`` through LookupIdentifier
        ``last_handle`` at ``now``: count them, and observe the OrderAck round trip — the
        time since the first transmission of the oldest message it released (the head
        of the queue's first-transmission batches)."""
        self.messages_acknowledged.inc(n)
        window = self._first_sent.get(queue)
        if not window:
            return
        if window[0][0] <= last_handle:
            self.order_ack_rtt.observe(max(0.0, now - window[0][2]))
        while window and window[0][1] <= last_handle:
            window.popleft()

    # ---- scrape-time collectors ----------------------------------------------------------

    def attach_queue_manager(self, qm: QueueManagerLike) -> QueueManagerCollector:
        """Expose ``qm``'s queue depths and store counters on scrape; returns the collector
        (give it to :meth:`detach` before closing the queue manager)."""
        collector = QueueManagerCollector.for_queue_manager(qm)
        self.registry.register(collector)
        self._collectors.append(collector)
        return collector

    def detach(self, collector: Collector) -> None:
        """Stop exposing a collector added by :meth:`attach_queue_manager`."""
        if collector in self._collectors:
            self._collectors.remove(collector)
            self.registry.unregister(collector)
            if isinstance(collector, QueueManagerCollector):
                collector.close()

    def exposition(self) -> bytes:
        """The metrics in the Prometheus text format, as a scrape would return them."""
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


_default: Metrics | None = None
_default_lock = threading.Lock()


def default_metrics() -> Metrics:
    """The process-wide :class:`Metrics` (created on first use) for code that has no
    instance passed in; ``openmsmq serve`` exposes this one."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = Metrics()
    return _default


# --------------------------------------------------------------------------------------------------
# Queue depth collector
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class QueueStat:
    """One queue's current depth as the collector exposes it."""

    #: The queue's name as created (``private$\\orders``, ``system$;deadxact``, a format name).
    queue: str
    #: ``private`` / ``system`` / ``journal`` / ``outgoing``.
    kind: str
    messages: int
    bytes: int


class _StoreStatsLike(Protocol):
    batches: int
    ops: int
    failed_ops: int
    round_trips: int | None
    held_seconds: float
    longest_hold: float
    commit_waits: int


class QueueManagerLike(Protocol):
    """What the collector needs of a QueueManager (duck-typed: no import of ``qm``)."""

    def list_queues(self, *, include_system: bool = False) -> list[Any]:
        """Queue records with ``display_name``, ``queue_type``, ``msg_count``, ``total_bytes``."""
        ...

    @property
    def store(self) -> Any:
        """The store, whose ``stats`` has ``batches``, ``ops`` and ``failed_ops``."""
        ...

    def message_counts(self) -> Mapping[str, tuple[int, int]]:
        """Messages in and out of each queue since it opened, by display name (memory only)."""
        ...


class QueueManagerCollector(Collector):
    """Scrape-time metrics of one queue manager: per-queue depth and bytes, messages in
    and out per queue, store commits.

    ``queues`` returns the current :class:`QueueStat` list (one cheap query); ``store_stats``
    returns the writer's counters or None; ``counts`` the messages in and out of each queue
    (counters the queue manager keeps in memory, added once per commit). A failing source
    (QM closed, store error) drops its metrics from that scrape instead of failing the
    whole scrape.

    ``queues`` always runs on one worker thread of the collector: the HTTP server answers
    each scrape on a new thread, and the store keeps one read connection per thread until
    it closes, so querying from the scrape threads would open a connection per scrape.
    :meth:`close` stops the worker (:meth:`Metrics.detach` calls it).
    """

    def __init__(
        self,
        queues: Callable[[], Iterable[QueueStat]],
        store_stats: Callable[[], _StoreStatsLike | None] = lambda: None,
        *,
        counts: Callable[[], Mapping[str, tuple[int, int]]] | None = None,
        timeout: float = 10.0,
    ) -> None:
        self._queues = queues
        self._store_stats = store_stats
        self._counts = counts
        self._timeout = timeout
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="openmsmq-metrics")

    def close(self) -> None:
        """Stop the worker thread (later scrapes report no queue metrics)."""
        self._worker.shutdown(wait=True)

    @classmethod
    def for_queue_manager(cls, qm: QueueManagerLike) -> QueueManagerCollector:
        """A collector over a :class:`~openmsmq.qm.QueueManager` (``list_queues`` reads the
        ``queues`` table only: its counts are kept current by every commit)."""

        def queues() -> list[QueueStat]:
            return [
                QueueStat(
                    r.display_name,
                    label_value(r.queue_type),
                    int(r.msg_count),
                    int(r.total_bytes),
                )
                for r in qm.list_queues(include_system=True)
            ]

        return cls(queues, lambda: getattr(qm.store, "stats", None), counts=qm.message_counts)

    def describe(self) -> Iterator[Metric]:
        """Metric names only (so registering does not query the queue manager)."""
        yield from self._families()
        if self._counts is not None:
            yield from self._count_families()

    @staticmethod
    def _count_families() -> tuple[CounterMetricFamily, CounterMetricFamily]:
        return (
            CounterMetricFamily(
                "openmsmq_queue_messages_in",
                "Messages that entered a queue (sent, arrived, moved or dead-lettered into it) since"
                " the queue manager opened.",
                labels=["queue"],
            ),
            CounterMetricFamily(
                "openmsmq_queue_messages_out",
                "Messages that left a queue (received, released by an OrderAck, moved out, expired)"
                " since the queue manager opened.",
                labels=["queue"],
            ),
        )

    def _families(
        self,
    ) -> tuple[
        GaugeMetricFamily,
        GaugeMetricFamily,
        CounterMetricFamily,
        CounterMetricFamily,
        CounterMetricFamily,
        CounterMetricFamily,
        CounterMetricFamily,
    ]:
        return (
            GaugeMetricFamily(
                "openmsmq_queue_messages",
                "Messages in a queue (locked ones included).",
                labels=["queue", "kind"],
            ),
            GaugeMetricFamily(
                "openmsmq_queue_bytes", "Bytes of the messages in a queue.", labels=["queue", "kind"]
            ),
            CounterMetricFamily("openmsmq_store_commits", "Store transactions committed (one fsync each)."),
            CounterMetricFamily("openmsmq_store_operations", "Store operations committed."),
            CounterMetricFamily("openmsmq_store_failed_operations", "Store operations that failed."),
            CounterMetricFamily(
                "openmsmq_store_commit_waits",
                "Group commits whose leader waited for the previous commit's committers.",
            ),
            CounterMetricFamily(
                "openmsmq_store_round_trips",
                "Statements the store's writer sent to its database server in committed transactions"
                " (PostgreSQL; absent for SQLite).",
            ),
        )

    def collect(self) -> Iterator[Metric]:
        """Query the sources now."""
        depth, size, commits, ops, failed, waits, trips = self._families()
        try:
            stats = self._worker.submit(lambda: list(self._queues())).result(self._timeout)
        except Exception as exc:  # a scrape must not fail because the QM is closing
            log_event(_log, "metrics_queue_depth_failed", logging.DEBUG, error=str(exc))
        else:
            for s in stats:
                depth.add_metric([s.queue, s.kind], s.messages)
                size.add_metric([s.queue, s.kind], s.bytes)
            yield depth
            yield size
        if self._counts is not None:
            into, out = self._count_families()
            try:
                counts = self._counts()
            except Exception as exc:  # as for the depths: the QM may be closing
                log_event(_log, "metrics_queue_counts_failed", logging.DEBUG, error=str(exc))
            else:
                for queue, (n_in, n_out) in counts.items():
                    into.add_metric([queue], n_in)
                    out.add_metric([queue], n_out)
                yield into
                yield out
        store = self._store_stats()
        if store is not None:
            commits.add_metric([], store.batches)
            ops.add_metric([], store.ops)
            failed.add_metric([], store.failed_ops)
            waits.add_metric([], store.commit_waits)
            yield from (commits, ops, failed, waits)
            held = CounterMetricFamily(
                "openmsmq_store_writer_held_seconds",
                "Seconds store transactions held the writer (BEGIN to COMMIT, fsync included).",
            )
            held.add_metric([], store.held_seconds)
            longest = GaugeMetricFamily(
                "openmsmq_store_writer_longest_hold_seconds",
                "The longest time one store transaction held the writer since the store opened:"
                " what a commit queued behind it waited, at most.",
            )
            longest.add_metric([], store.longest_hold)
            yield from (held, longest)
            if store.round_trips is not None:
                trips.add_metric([], store.round_trips)
                yield trips


# --------------------------------------------------------------------------------------------------
# HTTP endpoint
# --------------------------------------------------------------------------------------------------


class MetricsServer:
    """A running ``/metrics`` endpoint; :meth:`stop` shuts it down and joins its thread."""

    def __init__(self, server: Any, thread: threading.Thread) -> None:
        self._server = server
        self._thread = thread

    @property
    def address(self) -> str:
        """The bound IP address."""
        return str(self._server.server_address[0])

    @property
    def port(self) -> int:
        """The bound port (the real one when 0 was asked)."""
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``http://address:port/metrics``."""
        host = f"[{self.address}]" if ":" in self.address else self.address
        return f"http://{host}:{self.port}/metrics"

    def stop(self, timeout: float = 5.0) -> None:
        """Stop serving and close the socket (idempotent)."""
        if self._thread.is_alive():
            self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout)

    def __enter__(self) -> MetricsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_metrics_server(
    registry: CollectorRegistry | Metrics,
    address: str = "127.0.0.1",
    port: int = 9181,
    health: Health | None = None,
) -> MetricsServer:
    """Serve ``registry`` (or a :class:`Metrics`' registry) at ``http://address:port/metrics``
    from a daemon thread; port 0 picks a free port (see :attr:`MetricsServer.port`). With
    ``health``, ``/ready`` and ``/live`` too (:mod:`openmsmq.observability.health`).

    Raises OSError when the address cannot be bound.
    """
    reg = registry.registry if isinstance(registry, Metrics) else registry
    app = make_wsgi_app(reg)
    server, thread = serve_http(with_health(app, health) if health is not None else app, address, port)
    handle = MetricsServer(server, thread)
    log_event(_log, "metrics_listening", address=handle.address, port=handle.port)
    return handle


def start_metrics_from_config(
    config: MetricsConfig, metrics: Metrics | None = None, health: Health | None = None
) -> MetricsServer | None:
    """Start the endpoint as ``[metrics]`` says; None when ``enabled`` is false. Serves
    ``metrics`` or :func:`default_metrics`, and ``health``'s ``/ready`` and ``/live``."""
    if not config.enabled:
        return None
    return start_metrics_server(metrics or default_metrics(), config.listen_address, config.port, health)
