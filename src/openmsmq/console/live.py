"""What the console's pages update without reloading: rates and queue depths, once a second.

One :class:`Sampler` per console ticks every ``interval`` seconds on serve's event loop:
it reads the counters of :class:`~openmsmq.observability.metrics.Metrics` (messages in:
sent by applications and accepted from peers; out: received by applications and
released by an OrderAck; store commits) into rates, keeps the last ``history`` of them
for the charts, turns the queue manager's per-queue counters of messages in and out
(:meth:`~openmsmq.qm.manager.QueueManager.message_counts`, memory only) into each queue's
rates, reads the node's role (standalone, or active with its fencing epoch), and, while
some browser watches, the depth of every queue (one aggregate statement, read off the
loop in a thread) and the state of every outgoing queue. Every watcher's
server-sent-event stream reads that one shared tick, so the cost does not grow with the
number of browsers beyond sending the changes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from openmsmq.observability.metrics import Metrics
from openmsmq.qm.manager import QueueManager
from openmsmq.store.ranges import QueueStats
from openmsmq.wire.subqueues import POISON, RETRY

__all__ = ["STANDALONE", "RatePoint", "Sampler", "Tick", "counter_total", "subqueue_totals"]

#: The role of a queue manager that is not one node of a highly available pair.
STANDALONE: dict[str, Any] = {"role": "standalone", "epoch": None, "since": None}

log = logging.getLogger("openmsmq.console")


def counter_total(metric: Any) -> float:
    """The sum of a prometheus counter's or histogram's ``_total`` / ``_count`` samples
    (every label combination)."""
    total = 0.0
    for family in metric.collect():
        for sample in family.samples:
            if sample.name.endswith(("_total", "_count")):
                total += sample.value
    return total


def subqueue_totals(depths: Mapping[str, tuple[int, int, int | None]]) -> dict[str, int]:
    """Messages in the ``;poison`` and in the ``;retry`` subqueues of all queues, from
    depths by display name (``private$\\orders;poison``)."""
    totals = {POISON: 0, RETRY: 0}
    for name, (count, _, _) in depths.items():
        sub = name.rpartition(";")[2].lower() if ";" in name else ""
        if sub in totals:
            totals[sub] += count
    return totals


@dataclass(frozen=True, slots=True)
class RatePoint:
    """Rates over one tick (per second), at wall-clock ``time``."""

    time: float
    messages_in: float
    messages_out: float
    commits: float


@dataclass(slots=True)
class Tick:
    """What one tick saw: a sequence number, the last rates and, while watched, depths."""

    number: int = 0
    rates: RatePoint | None = None
    #: Queue display name → (count, bytes, oldest ArrivedTime).
    queues: dict[str, tuple[int, int, int | None]] = field(default_factory=dict)
    #: Outgoing format name → state.
    outgoing: dict[str, str] = field(default_factory=dict)
    #: Queue display name → (messages in, messages out) per second over the last tick.
    flows: dict[str, tuple[float, float]] = field(default_factory=dict)
    #: The node's role: ``role`` (standalone / active / stepping-down), ``epoch``, ``since``.
    role: dict[str, Any] = field(default_factory=dict)


class Sampler:
    """The console's clock of live values (see the module docstring)."""

    def __init__(
        self,
        qm: QueueManager,
        metrics: Metrics,
        outgoing_states: Callable[[], dict[str, str]],
        *,
        role: Callable[[], dict[str, Any]] = lambda: dict(STANDALONE),
        interval: float = 1.0,
        history: int = 120,
    ) -> None:
        self.qm = qm
        self.metrics = metrics
        self.outgoing_states = outgoing_states
        self.role = role
        self._last_counts: tuple[float, dict[str, tuple[int, int]]] | None = None
        self.interval = interval
        self.history: deque[RatePoint] = deque(maxlen=history)
        self.tick = Tick()
        self.watchers = 0
        self._changed = asyncio.Condition()
        self._task: asyncio.Task[None] | None = None
        self._last: tuple[float, float, float, float] | None = None
        self.closing = False

    def _counters(self) -> tuple[float, float, float]:
        m = self.metrics
        into = counter_total(m.messages_sent) + counter_total(m.messages_accepted)
        out = counter_total(m.messages_received) + counter_total(m.messages_acknowledged)
        return into, out, counter_total(m.commit_duration)

    def start(self) -> None:
        """Start ticking on the running loop."""
        self._task = asyncio.get_running_loop().create_task(self._run(), name="openmsmq-console-sampler")

    async def stop(self) -> None:
        """Stop ticking and end every watcher's stream."""
        self.closing = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        async with self._changed:
            self._changed.notify_all()

    async def _run(self) -> None:
        while True:
            try:
                await self.sample()
            except asyncio.CancelledError:
                raise
            except Exception:  # a failed read must not end the live view for good
                log.exception("console sampler failed")
            await asyncio.sleep(self.interval)

    async def sample(self) -> None:
        """Take one tick now and wake the watchers."""
        now = time.time()
        into, out, commits = self._counters()
        if self._last is not None:
            then, i0, o0, c0 = self._last
            span = max(now - then, 1e-3)
            point = RatePoint(now, (into - i0) / span, (out - o0) / span, (commits - c0) / span)
            self.history.append(point)
            self.tick.rates = point
        self._last = (now, into, out, commits)
        self._read_flows(now)
        self.tick.role = self.role()
        if self.watchers:
            await self._read_depths()
        await self._publish()

    def _read_flows(self, now: float) -> None:
        """Each queue's messages in and out per second since the last tick, from the
        queue manager's per-queue counters (a queue new since then counts from 0)."""
        counts = self.qm.message_counts()
        if self._last_counts is not None:
            then, before = self._last_counts
            span = max(now - then, 1e-3)
            flows = {}
            for name, (n_in, n_out) in counts.items():
                b_in, b_out = before.get(name, (0, 0))
                flows[name] = (round(max(0, n_in - b_in) / span, 1), round(max(0, n_out - b_out) / span, 1))
            self.tick.flows = flows
        self._last_counts = (now, counts)

    async def refresh(self) -> None:
        """Read the depths and states again now (after an action changed them), so that the
        page the action leads to never gets the tick from before it."""
        await self._read_depths()
        await self._publish()

    async def _read_depths(self) -> None:
        stats: list[QueueStats] = await asyncio.to_thread(self.qm.queue_stats)
        self.tick.queues = {s.name: (s.message_count, s.total_bytes, s.oldest_arrived_time) for s in stats}
        self.tick.outgoing = self.outgoing_states()

    async def _publish(self) -> None:
        self.tick.number += 1
        async with self._changed:
            self._changed.notify_all()

    async def events(self, visible: Callable[[str], bool]) -> AsyncIterator[str]:
        """A server-sent-event stream for one browser: the full state first, then what
        changed at each tick, for the queues ``visible`` (by display name) lets it see."""
        self.watchers += 1
        sent_queues: dict[str, tuple[int, int, int | None]] = {}
        sent_outgoing: dict[str, str] = {}
        sent_flows: dict[str, tuple[float, float]] = {}
        sent_role: dict[str, Any] = {}
        sent_totals: dict[str, int] = {}
        seen = -1
        sent_rates: RatePoint | None = None
        try:
            # Read now: the last tick may be older than the page this browser just loaded,
            # whose values it must not set back.
            await self.refresh()
            while not self.closing:
                if self.tick.number == seen:
                    async with self._changed:
                        await self._changed.wait()
                    continue
                seen = self.tick.number
                t = self.tick
                queues = {k: v for k, v in t.queues.items() if sent_queues.get(k) != v and visible(k)}
                outgoing = {k: v for k, v in t.outgoing.items() if sent_outgoing.get(k) != v and visible(k)}
                flows = {k: v for k, v in t.flows.items() if sent_flows.get(k) != v and visible(k)}
                sent_queues.update(queues)
                sent_outgoing.update(outgoing)
                sent_flows.update(flows)
                # ``now``: the server's clock, for the ages of the oldest messages.
                doc: dict[str, Any] = {"now": time.time(), "queues": queues, "outgoing": outgoing,
                                       "flows": flows}  # fmt: skip
                if t.role != sent_role:
                    doc["role"] = sent_role = t.role
                totals = subqueue_totals(sent_queues)
                if totals != sent_totals:
                    doc["subqueues"] = sent_totals = totals
                if t.rates is not None and t.rates is not sent_rates:
                    sent_rates = t.rates
                    r = t.rates
                    doc["rates"] = [r.time, r.messages_in, r.messages_out, r.commits]
                yield f"data: {json.dumps(doc, separators=(',', ':'))}\n\n"
        finally:
            self.watchers -= 1
