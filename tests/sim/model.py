"""Simulation basics: fault configuration, the event loop, the trace, statistics, failures.

Everything here is deterministic: time is a float the loop advances, randomness comes from
one seeded :class:`random.Random` owned by the run (see :mod:`tests.sim.world`).
"""

from __future__ import annotations

import heapq
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

#: Simulated epoch (seconds since 1970) at which every run starts; any value works as long
#: as it is the same for every run of a seed.
START = 1_700_000_000.0


@dataclass(frozen=True)
class FaultConfig:
    """What a run injects, and how often. Rates are per simulated second of the fault phase.

    The mapping of each kind to reality is in docs/simulation.md.
    """

    #: Length of the fault phase (s): applications send and faults are injected.
    fault_time: float = 12.0
    #: Liveness bound (s): after the fault phase everything must drain within this time.
    drain_limit: float = 600.0
    #: Application transactions per second per sending flow.
    send_rate: float = 1.2
    #: Receive attempts per second per destination queue.
    receive_rate: float = 2.5
    #: Connection cut (RST / broken pipe) of a random open link.
    cut_rate: float = 0.35
    #: Probability that a cut leaves the old connection delivering late (a delayed old
    #: connection: its bytes arrive after the reconnect's).
    zombie: float = 0.35
    #: One link stalls (no delivery, TCP retransmitting) for a while.
    stall_rate: float = 0.12
    #: Two hosts cannot reach each other for a while (connects fail, links stall).
    partition_rate: float = 0.06
    #: Crash of a random queue manager.
    crash_rate: float = 0.08
    #: Probability that a crash is not noticed by the peers (half-open connections).
    half_open: float = 0.3
    #: Probability, per accept batch a receiver starts to store, that it crashes before
    #: the batch is durable (the window an early OrderAck would fall into).
    crash_in_store: float = 0.12
    #: Probability, per store operation, of a slow fsync (0.3 .. 2.5 s).
    slow_fsync: float = 0.3
    #: An extra connection between two hosts that already have one.
    dup_conn_rate: float = 0.08
    #: Most crashes per run (keeps runs short).
    max_crashes: int = 6
    #: Lies of the byzantine peer (tests/sim/byzantine.py) per second of the fault phase.
    byzantine_rate: float = 0.5
    #: TransferConfig.batch_size / max_in_flight of every QM (None: the production
    #: defaults, 500 / 20,000). Small values exercise partial loading of outgoing queues.
    batch_size: int | None = None
    max_in_flight: int | None = None
    #: Check at every release that the message is durable at its destination. Off, the
    #: checker judges only by end-to-end outcomes (loss, duplicates, order, liveness).
    check_release: bool = True


@dataclass
class SimStats:
    """Counters of one run (summed over runs by the CLI)."""

    faults: Counter[str] = field(default_factory=Counter)
    messages_checked: int = 0
    committed_tx: int = 0
    aborted_tx: int = 0
    receives: Counter[str] = field(default_factory=Counter)
    events: int = 0
    drain_time: float = 0.0
    sim_time: float = 0.0

    def add(self, other: SimStats) -> None:
        """Accumulate ``other`` into this (the drain and run times keep the maximum)."""
        self.faults.update(other.faults)
        self.receives.update(other.receives)
        self.messages_checked += other.messages_checked
        self.committed_tx += other.committed_tx
        self.aborted_tx += other.aborted_tx
        self.events += other.events
        self.drain_time = max(self.drain_time, other.drain_time)
        self.sim_time = max(self.sim_time, other.sim_time)


class SimFailure(AssertionError):
    """An invariant broke. ``check`` names it (e.g. ``exactly-once``)."""

    def __init__(self, check: str, detail: str) -> None:
        super().__init__(f"{check}: {detail}")
        self.check = check
        self.detail = detail

    def __reduce__(self) -> tuple[type[SimFailure], tuple[str, str]]:
        return (SimFailure, (self.check, self.detail))


class Trace:
    """The last ``size`` events of a run, formatted only when someone reads them."""

    def __init__(self, size: int = 60) -> None:
        self._items: deque[tuple[float, str, tuple[Any, ...]]] = deque(maxlen=size)

    def __call__(self, now: float, fmt: str, *args: Any) -> None:
        self._items.append((now, fmt, args))

    def lines(self) -> list[str]:
        """The kept events, oldest first, with times relative to the start of the run."""
        return [f"{now - START:9.3f}  {fmt % args if args else fmt}" for now, fmt, args in self._items]


class EventLoop:
    """A heap of (time, sequence number, callback): ties run in scheduling order."""

    def __init__(self, now: float) -> None:
        self.now = now
        self._heap: list[tuple[float, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = 0
        self.count = 0

    def at(self, when: float, fn: Callable[..., None], *args: Any) -> None:
        """Run ``fn(*args)`` at ``when`` (never earlier than now)."""
        self._seq += 1
        heapq.heappush(self._heap, (max(when, self.now), self._seq, fn, args))

    def after(self, delay: float, fn: Callable[..., None], *args: Any) -> None:
        """Run ``fn(*args)`` after ``delay`` seconds."""
        self.at(self.now + delay, fn, *args)

    def run(self, until: Callable[[], bool], max_events: int) -> bool:
        """Run events until ``until()`` is true (checked after each event) or none is left.

        Returns whether ``until()`` became true; raises :class:`SimFailure` after
        ``max_events`` events (a livelock of the simulated system or of the simulator).
        """
        while self._heap:
            if self.count >= max_events:
                raise SimFailure("event-bound", f"more than {max_events} events")
            when, _seq, fn, args = heapq.heappop(self._heap)
            self.now = when
            self.count += 1
            fn(*args)
            if until():
                return True
        return until()
