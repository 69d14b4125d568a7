"""The simulated world of high availability: two or three nodes of one queue manager, the
lease in a shared database, and faults (docs/simulation.md, "The lease world").

Each node runs the real :class:`~openmsmq.ha.lease.LeaseCore` under a simulated clock (its
own offset and rate); the simulator is its driver, as :mod:`openmsmq.ha.driver` is in
production. The database is a model of the store's lease statements (one atomic step per
request, its clock the true simulated time) and of the fence every write transaction runs
first. An active node commits writes at a steady rate.

Faults: pauses of a node (its events wait, its clock goes on: SIGSTOP, a long GC pause),
partitions between a node and the database (requests and answers vanish), crashes of a node
(restart later as a new incarnation), crashes of a node's database connection (what was
in flight may or may not have run) and restarts of the database (every connection drops).

Invariants, checked as the run goes:

* ``one-active-per-epoch`` — at most one node incarnation ever believes it is active with a
  given epoch;
* ``stale-commit`` — the database accepts a write only from the epoch of the current lease,
  made by the node that was granted that epoch;
* ``local-stop`` — whenever a node decides to commit, the lease it believes it holds is
  still its own and unexpired on the database's clock (it stops before it can be taken);
* ``liveness`` — after the faults, some node serves; ``takeover`` — when that active then
  dies, another node commits within the bound.

:func:`run_ha` executes one seed; planted bugs (:data:`HA_BUGS`) are test-side variants of the
core or of the database's fence.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from openmsmq.ha.lease import (
    AcquireLease,
    LeaseAction,
    LeaseConfig,
    LeaseCore,
    LeaseSeen,
    ReadLease,
    ReleaseLease,
    RenewLease,
    Role,
    StartServing,
    StopServing,
)

from .model import START, EventLoop, SimFailure, Trace

MAX_EVENTS = 300_000


@dataclass(frozen=True)
class HaFaults:
    """What an HA run injects, and how often (rates per simulated second of the fault phase)."""

    fault_time: float = 60.0
    lease: LeaseConfig = field(default_factory=LeaseConfig)
    #: Writes per second of the active node.
    commit_rate: float = 10.0
    pause_rate: float = 0.06
    partition_rate: float = 0.06
    crash_rate: float = 0.04
    conn_crash_rate: float = 0.1
    db_restart_rate: float = 0.015
    #: Probability of a slow request or answer (0.05 .. 1.5 s) during the fault phase.
    slow: float = 0.05
    #: Largest difference of a node's clock rate from the database's.
    drift: float = 0.01
    #: After the faults, some node must commit within this long.
    settle_limit: float = 25.0
    #: Most node crashes per run.
    max_crashes: int = 5


@dataclass
class HaStats:
    """Counters of one HA run (summed over runs by the CLI)."""

    faults: Counter[str] = field(default_factory=Counter)
    step_downs: Counter[str] = field(default_factory=Counter)
    commits: int = 0
    fenced: int = 0
    grants: int = 0
    events: int = 0
    #: Simulated seconds from the final kill of the active to the first write of the next.
    takeover: float = 0.0

    def add(self, other: HaStats) -> None:
        self.faults.update(other.faults)
        self.step_downs.update(other.step_downs)
        self.commits += other.commits
        self.fenced += other.fenced
        self.grants += other.grants
        self.events += other.events
        self.takeover = max(self.takeover, other.takeover)


@dataclass
class HaResult:
    """Outcome of one HA seed."""

    seed: int
    ok: bool
    stats: HaStats
    failure: SimFailure | None = None
    trace: list[str] = field(default_factory=list)

    def report(self) -> str:
        lines = [f"ha seed {self.seed}: {'ok' if self.ok else 'FAILED'}"]
        if self.failure is not None:
            lines.append(f"  {self.failure}")
        lines += ["  trace (last events):", *("    " + t for t in self.trace)]
        return "\n".join(lines)


# ------------------------------------------------------------------ planted bugs


class DeadlineFromReply(LeaseCore):
    """Planted bug: the local deadline counts from the answer, not from the request (a slow
    answer then stretches it past the database's expiry)."""

    def lease_deadline(self, sent_at: float, received_at: float) -> float:
        return received_at + self.config.duration - self.config.margin


class SameEpoch(LeaseCore):
    """Planted bug: a takeover keeps the epoch it saw (the fence cannot tell terms apart)."""

    def next_epoch(self, seen_epoch: int) -> int:
        return seen_epoch


#: name -> (core class, the database fences writes)
HA_BUGS: dict[str, tuple[type[LeaseCore], bool]] = {
    "ha-no-fence": (LeaseCore, False),
    "ha-deadline-from-reply": (DeadlineFromReply, True),
    "ha-same-epoch": (SameEpoch, True),
}


# ------------------------------------------------------------------ the database


@dataclass
class Lease:
    epoch: int = 0
    holder: str | None = None
    expires_at: float = START


class Database:
    """The lease row and the fence, as the store's statements treat them (one atomic step
    per request, on the database's clock: the true simulated time)."""

    def __init__(self, fence: bool) -> None:
        self.lease = Lease()
        self.fence = fence
        self.up = True
        #: epoch -> the holder it was granted to
        self.granted: dict[int, str] = {}

    def seen(self, now: float) -> LeaseSeen:
        return LeaseSeen(self.lease.epoch, self.lease.holder, self.lease.expires_at - now)

    def apply(self, now: float, action: LeaseAction) -> tuple[str, LeaseSeen | None]:
        lease = self.lease
        if isinstance(action, ReadLease):
            return "seen", self.seen(now)
        if isinstance(action, AcquireLease):
            free = lease.holder is None or lease.expires_at <= now
            if lease.epoch == action.expected_epoch and free:
                lease.epoch, lease.holder = action.new_epoch, action.holder
                lease.expires_at = now + action.duration
                self.granted[action.new_epoch] = action.holder
                return "granted", None
            return "seen", self.seen(now)
        if isinstance(action, RenewLease):
            if lease.epoch == action.epoch and lease.holder == action.holder and lease.expires_at > now:
                lease.expires_at = now + action.duration
                return "renewed", None
            return "refused", self.seen(now)
        assert isinstance(action, ReleaseLease)
        if lease.epoch == action.epoch and lease.holder == action.holder:
            lease.holder, lease.expires_at = None, now
        return "released", None

    def commit(self, now: float, epoch: int, holder: str) -> bool:
        """A write transaction of ``holder`` with fencing epoch ``epoch``; False: fenced."""
        if self.fence and self.lease.epoch != epoch:
            return False
        if self.lease.epoch != epoch or self.granted.get(epoch) != holder:
            raise SimFailure(
                "stale-commit",
                f"write of {holder} with epoch {epoch} accepted while the lease is epoch "
                f"{self.lease.epoch} granted to {self.granted.get(self.lease.epoch)}",
            )
        return True


# ------------------------------------------------------------------ nodes


@dataclass(eq=False)
class Node:
    name: str
    offset: float
    rate: float
    incarnation: int = 0
    core: LeaseCore | None = None
    paused_until: float = 0.0
    partitioned_until: float = 0.0
    conn: int = 0
    timer_gen: int = 0
    #: request id -> connection it went out on (lease requests of this incarnation)
    inflight: dict[int, int] = field(default_factory=dict)
    serving: int | None = None

    def local(self, t: float) -> float:
        return self.offset + (t - START) * self.rate

    def true(self, local: float) -> float:
        return START + (local - self.offset) / self.rate

    @property
    def holder(self) -> str:
        return f"{self.name}#{self.incarnation}"


class HaWorld:
    """One run (use :func:`run_ha`)."""

    def __init__(self, seed: int, faults: HaFaults, bug: str | None) -> None:
        self.seed = seed
        self.cfg = faults
        self.rng = random.Random(seed)
        self.loop = EventLoop(START)
        self.trace = Trace()
        self.stats = HaStats()
        core_class, fence = HA_BUGS.get(bug or "", (LeaseCore, True))
        self.core_class = core_class
        self.db = Database(fence)
        self.fault_end = START + faults.fault_time
        count = self.rng.choice((2, 2, 3))
        self.nodes = [
            Node(f"n{i}", self.rng.uniform(0, 1e5), 1 + self.rng.uniform(-faults.drift, faults.drift))
            for i in range(count)
        ]
        self.believers: dict[int, str] = {}
        self.crashes = 0
        self.done = False
        #: (time of the final kill, the killed node's epoch) once phase 3 has begun.
        self.final_kill: tuple[float, int] | None = None

    # -------------------------------------------------------------- running

    def run(self) -> None:
        for node in self.nodes:
            self._boot(node)
        for kind, rate in (
            ("pause", self.cfg.pause_rate),
            ("partition", self.cfg.partition_rate),
            ("crash", self.cfg.crash_rate),
            ("conn-crash", self.cfg.conn_crash_rate),
            ("db-restart", self.cfg.db_restart_rate),
        ):
            self.loop.after(self.rng.expovariate(rate), self._fault, kind, rate)
        # Every fault lasts at most 8 s: after that everything is healthy again.
        self.loop.at(self.fault_end + 8.0 + self.cfg.settle_limit, self._settled_check)
        try:
            if not self.loop.run(lambda: self.done, MAX_EVENTS):
                raise SimFailure("liveness", "the simulation ran out of events")
        finally:
            self.stats.events = self.loop.count

    def _log(self, fmt: str, *args: Any) -> None:
        self.trace(self.loop.now, fmt, *args)

    # -------------------------------------------------------------- node events

    def _at(self, node: Node, when: float, fn: Any, *args: Any) -> None:
        self.loop.at(when, self._node_run, node, node.incarnation, fn, args)

    def _node_run(self, node: Node, incarnation: int, fn: Any, args: tuple[Any, ...]) -> None:
        if node.incarnation != incarnation or node.core is None:
            return
        if self.loop.now < node.paused_until:
            self.loop.at(node.paused_until, self._node_run, node, incarnation, fn, args)
            return
        fn(*args)

    def _boot(self, node: Node) -> None:
        node.incarnation += 1
        node.core = self.core_class(self.cfg.lease, node.holder)
        node.inflight.clear()
        node.serving = None
        node.conn += 1
        self._log("%s boots", node.holder)
        self._do(node, node.core.start(node.local(self.loop.now)))

    def _arm(self, node: Node) -> None:
        assert node.core is not None
        node.timer_gen += 1
        at = node.core.get_timer()
        if at is not None:
            self._at(node, max(node.true(at), self.loop.now), self._fire, node, node.timer_gen, at)

    def _fire(self, node: Node, gen: int, at: float) -> None:
        if gen == node.timer_gen and node.core is not None:
            # max(): the round trip between the two clocks must not land a hair early.
            self._do(node, node.core.handle_timer(max(node.local(self.loop.now), at)))

    def _do(self, node: Node, actions: list[LeaseAction]) -> None:
        core = node.core
        assert core is not None
        if core.role is Role.ACTIVE and core.epoch is not None:
            other = self.believers.setdefault(core.epoch, core.holder)
            if other != core.holder:
                raise SimFailure(
                    "one-active-per-epoch", f"{core.holder} and {other} both active with epoch {core.epoch}"
                )
        for action in actions:
            if isinstance(action, StartServing):
                self._log("%s active with epoch %d", node.holder, action.epoch)
                self.stats.grants += 1
                node.serving = action.epoch
                self._at(
                    node, self.loop.now + self.rng.uniform(0.02, 0.3), self._commit_tick, node, action.epoch
                )
            elif isinstance(action, StopServing):
                self._log("%s steps down from %d: %s", node.holder, action.epoch, action.reason)
                self.stats.step_downs[action.reason.split(" (")[0]] += 1
                node.serving = None
                self._at(node, self.loop.now + self.rng.uniform(0.0, 0.2), self._stopped, node)
            else:
                self._send(node, action)
        self._arm(node)

    def _stopped(self, node: Node) -> None:
        assert node.core is not None
        self._do(node, node.core.handle_stopped(node.local(self.loop.now)))

    # -------------------------------------------------------------- requests

    def _latency(self) -> float:
        if self.loop.now < self.fault_end and self.rng.random() < self.cfg.slow:
            return self.rng.uniform(0.05, 1.5)
        return 0.0005 + self.rng.expovariate(1 / 0.003)

    def _reachable(self, node: Node) -> bool:
        return self.db.up and self.loop.now >= node.partitioned_until

    def _send(self, node: Node, action: LeaseAction) -> None:
        rid = action.request_id  # type: ignore[union-attr]
        node.inflight[rid] = node.conn
        if not self.db.up:
            # Connection refused at once: the driver reports the failure.
            self._at(node, self.loop.now + 0.01, self._failed, node, rid)
            return
        self.loop.after(self._latency(), self._db_arrive, node, node.incarnation, node.conn, action)

    def _db_arrive(self, node: Node, incarnation: int, conn: int, action: LeaseAction) -> None:
        if not self._reachable(node):
            return  # lost on the way; the core's request timeout notices
        if (conn != node.conn or incarnation != node.incarnation) and self.rng.random() < 0.5:
            return  # the connection died before the statement reached the server
        outcome, seen = self.db.apply(self.loop.now, action)
        self._log("db %s %s -> %s", node.holder, type(action).__name__, outcome)
        self.loop.after(self._latency(), self._answer, node, incarnation, conn, action, outcome, seen)

    def _answer(
        self,
        node: Node,
        incarnation: int,
        conn: int,
        action: LeaseAction,
        outcome: str,
        seen: LeaseSeen | None,
    ) -> None:
        if incarnation != node.incarnation or conn != node.conn or self.loop.now < node.partitioned_until:
            return
        if not self.db.up:
            return
        self._at(node, self.loop.now, self._deliver, node, action, outcome, seen)

    def _deliver(self, node: Node, action: LeaseAction, outcome: str, seen: LeaseSeen | None) -> None:
        core = node.core
        assert core is not None
        rid = action.request_id  # type: ignore[union-attr]
        node.inflight.pop(rid, None)
        now = node.local(self.loop.now)
        if outcome == "seen":
            assert seen is not None
            self._do(node, core.handle_seen(now, rid, seen))
        elif outcome == "granted":
            self._do(node, core.handle_granted(now, rid))
        elif outcome == "renewed":
            self._do(node, core.handle_renewed(now, rid))
        elif outcome == "refused":
            self._do(node, core.handle_refused(now, rid, seen))
        else:
            self._do(node, core.handle_released(now, rid))

    def _failed(self, node: Node, rid: int) -> None:
        assert node.core is not None
        node.inflight.pop(rid, None)
        self._do(node, node.core.handle_failure(node.local(self.loop.now), rid))

    def _drop_connection(self, node: Node) -> None:
        """The node's database connection breaks: its outstanding requests fail."""
        node.conn += 1
        for rid in sorted(node.inflight):
            self._at(node, self.loop.now + self.rng.uniform(0.0, 0.05), self._failed, node, rid)
        node.inflight.clear()

    # -------------------------------------------------------------- the workload

    def _commit_tick(self, node: Node, epoch: int) -> None:
        core = node.core
        assert core is not None
        if node.serving != epoch:
            return
        fencing = core.fencing_epoch(node.local(self.loop.now))
        if fencing is not None:
            lease = self.db.lease
            if lease.epoch != fencing or lease.holder != core.holder or lease.expires_at <= self.loop.now:
                raise SimFailure(
                    "local-stop",
                    f"{core.holder} commits with epoch {fencing} while the lease is epoch {lease.epoch} "
                    f"of {lease.holder}, {lease.expires_at - self.loop.now:+.3f} s to its expiry",
                )
            # The write leaves after some local work: a pause may fall in between.
            self._at(node, self.loop.now + self.rng.uniform(0.0, 0.02), self._commit_send, node, fencing)
        self._at(
            node, self.loop.now + self.rng.expovariate(self.cfg.commit_rate), self._commit_tick, node, epoch
        )

    def _commit_send(self, node: Node, epoch: int) -> None:
        if not self._reachable(node):
            return
        self.loop.after(self._latency(), self._commit_arrive, node, node.incarnation, node.conn, epoch)

    def _commit_arrive(self, node: Node, incarnation: int, conn: int, epoch: int) -> None:
        if not self._reachable(node) or (conn != node.conn and self.rng.random() < 0.5):
            return
        holder = f"{node.name}#{incarnation}"
        if self.db.commit(self.loop.now, epoch, holder):
            self.stats.commits += 1
            self._committed(epoch)
            return
        self.stats.fenced += 1
        self._log("db fenced a write of %s with epoch %d", holder, epoch)
        self.loop.after(self._latency(), self._fenced_answer, node, incarnation, conn, epoch)

    def _fenced_answer(self, node: Node, incarnation: int, conn: int, epoch: int) -> None:
        if incarnation == node.incarnation and conn == node.conn and self._reachable(node):
            self._at(node, self.loop.now, self._fenced, node, epoch)

    def _fenced(self, node: Node, epoch: int) -> None:
        assert node.core is not None
        self._do(node, node.core.handle_fenced(node.local(self.loop.now), epoch))

    # -------------------------------------------------------------- faults

    def _fault(self, kind: str, rate: float) -> None:
        now = self.loop.now
        if now >= self.fault_end:
            return
        self.loop.after(self.rng.expovariate(rate), self._fault, kind, rate)
        up = [n for n in self.nodes if n.core is not None]
        if kind == "db-restart":
            if not self.db.up:
                return
            self.stats.faults[kind] += 1
            self.db.up = False
            self._log("db down")
            for node in up:
                self._drop_connection(node)
            self.loop.after(self.rng.uniform(0.3, 6.0), self._db_back)
            return
        if not up:
            return
        node = self.rng.choice(up)
        # Faults hit the active node more often: that is where they matter.
        actives = [n for n in up if n.core is not None and n.core.role is Role.ACTIVE]
        if actives and self.rng.random() < 0.6:
            node = self.rng.choice(actives)
        self.stats.faults[kind] += 1
        if kind == "pause":
            length = self.rng.uniform(0.2, 8.0)
            node.paused_until = max(node.paused_until, now + length)
            self._log("%s paused %.2f s", node.holder, length)
        elif kind == "partition":
            length = self.rng.uniform(0.2, 8.0)
            node.partitioned_until = max(node.partitioned_until, now + length)
            self._log("%s cut off from the db for %.2f s", node.holder, length)
        elif kind == "conn-crash":
            self._log("%s loses its db connection", node.holder)
            self._drop_connection(node)
        elif kind == "crash":
            if self.crashes >= self.cfg.max_crashes:
                return
            self.crashes += 1
            self._crash(node)
            self.loop.after(self.rng.uniform(0.1, 5.0), self._restart, node)

    def _crash(self, node: Node) -> None:
        self._log("%s crashes", node.holder)
        node.core = None
        node.serving = None
        node.inflight.clear()
        node.conn += 1
        node.paused_until = 0.0

    def _restart(self, node: Node) -> None:
        if node.core is None and self.final_kill is None:
            self._boot(node)

    def _db_back(self) -> None:
        self.db.up = True
        self._log("db up")

    # -------------------------------------------------------------- the end

    def _committed(self, epoch: int) -> None:
        if self.final_kill is not None and epoch != self.final_kill[1] and not self.done:
            self.stats.takeover = self.loop.now - self.final_kill[0]
            bound = self.cfg.lease.duration + self.cfg.lease.poll_interval + 2.0
            if self.stats.takeover > bound:
                raise SimFailure(
                    "takeover", f"the next active wrote {self.stats.takeover:.2f} s after the kill"
                )
            self.done = True

    def _settled_check(self) -> None:
        """After the faults: some node must be serving and writing; then kill it."""
        lease = self.db.lease
        active = [n for n in self.nodes if n.core is not None and n.serving == lease.epoch]
        if not active or lease.expires_at <= self.loop.now:
            raise SimFailure("liveness", f"nobody serves {self.cfg.settle_limit} s after the faults")
        for node in self.nodes:
            if node.core is None:
                self._boot(node)  # every other node is a standby that can take over
        victim = active[0]
        self.final_kill = (self.loop.now, lease.epoch)
        self._crash(victim)
        bound = self.cfg.lease.duration + self.cfg.lease.poll_interval + 2.0
        self.loop.after(bound + 0.01, self._takeover_check)

    def _takeover_check(self) -> None:
        if not self.done:
            raise SimFailure("takeover", "no other node wrote after the active was killed")


def run_ha(seed: int, faults: HaFaults | None = None, bug: str | None = None) -> HaResult:
    """Run one HA seed; the result says whether every invariant held."""
    world = HaWorld(seed, faults or HaFaults(), bug)
    try:
        world.run()
    except SimFailure as failure:
        return HaResult(seed, False, world.stats, failure, world.trace.lines())
    return HaResult(seed, True, world.stats, None, world.trace.lines())
