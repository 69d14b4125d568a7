"""The simulated world: three queue managers, their applications, the network and the faults.

Topology (fixed): A (127.0.0.2) sends to B (127.0.0.3) directly and to C (127.0.0.4) through
B (a static route: B is an intermediate hop); C sends to A directly. Each QM is the real
:class:`~openmsmq.qm.manager.QueueManager` (``threaded=False``: every store operation
commits in the caller's thread) composed with the real :class:`~openmsmq.transfer.engine.Transfer`
(protocol sessions, outgoing and incoming sequences). Only the clock, the network, the
store latency and the applications are simulated.

:func:`run` executes one seed and returns a :class:`RunResult`.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import random
import shutil
import tempfile
import traceback
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

from openmsmq.errors import HResult, MQError
from openmsmq.protocol.events import Role
from openmsmq.qm.manager import QueueManager
from openmsmq.qm.transaction import PendingReceive, Transaction
from openmsmq.store.records import MessageRecord, QueueType
from openmsmq.transfer.engine import AcceptBatch, ReleaseBatch, StoreWork, Transfer, TransferConfig
from openmsmq.transfer.trust import TrustConfig

from .byzantine import FORGED, Byzantine
from .byzantine import NAME as BYZANTINE
from .checker import Flow, Oracle
from .model import START, EventLoop, FaultConfig, SimFailure, SimStats, Trace
from .network import End, Link, Network
from .planted import PLANTED_BUGS

ADDRESSES = {"A": "127.0.0.2", "B": "127.0.0.3", "C": "127.0.0.4"}
#: A reaches C through B; B relays to C only along a route for it (docs/security.md).
ROUTES = {"A": (("127.0.0.4", "127.0.0.3"),), "B": (("127.0.0.4", "127.0.0.4"),)}
#: C takes A's messages from B: B is a configured intermediate hop there. Every QM also
#: pins the others' GUIDs to their addresses (allowed_peers {GUID}=CIDR, set at the first
#: start): the byzantine peer cannot pass for one of them (docs/security.md).
HOPS = {"C": ("127.0.0.3",)}
#: (flow, sender, destination node, queue name)
FLOWS = (("F1", "A", "B", "q1"), ("F2", "A", "C", "q2"), ("F3", "C", "A", "q3"))
#: Seconds after which an abandoned receive transaction is aborted (the remote-read
#: cleanup timer's role), unless a crash drops it first.
ABANDON_CLEANUP = 5.0
MAX_EVENTS = 400_000


@dataclass
class RunResult:
    """Outcome of one seed."""

    seed: int
    ok: bool
    stats: SimStats
    failure: SimFailure | None = None
    trace: list[str] = field(default_factory=list)
    summary: str = ""

    def report(self) -> str:
        """What a failing run prints: seed, broken check, flow summary, last events."""
        lines = [f"seed {self.seed}: {'ok' if self.ok else 'FAILED'}"]
        if self.failure is not None:
            lines.append(f"  {self.failure}")
        if self.summary:
            lines.append(f"  {self.summary}")
        lines += ["  trace (last events):", *("    " + t for t in self.trace)]
        return "\n".join(lines)


@dataclass(eq=False)
class SimNode:
    """One queue manager host; ``epoch`` counts its incarnations (a crash starts a new one)."""

    name: str
    address: str
    data_dir: Path
    config: TransferConfig
    qm: QueueManager | None = None
    transfer: Transfer | None = None
    epoch: int = 0
    #: Transfer connection id -> (link, side).
    conns: dict[int, tuple[Link, int]] = field(default_factory=dict)
    connecting: set[str] = field(default_factory=set)
    backoff: dict[str, float] = field(default_factory=dict)
    retry_at: dict[str, float] = field(default_factory=dict)
    timer_at: float | None = None
    #: (sender QM GUID, destination lower-case) -> (TxSequenceID, number) last made durable.
    incoming_durable: dict[tuple[uuid.UUID, str], tuple[int, int]] = field(default_factory=dict)
    #: The QM's GUID (known from its first start on).
    guid: uuid.UUID | None = None

    @property
    def up(self) -> bool:
        """The QM is running."""
        return self.qm is not None


@contextlib.contextmanager
def _seeded_uuid4(rng: random.Random) -> Iterator[None]:
    """QM GUIDs come from ``uuid.uuid4``; make them a function of the seed."""
    original = uuid.uuid4
    uuid.uuid4 = lambda: uuid.UUID(int=rng.getrandbits(128), version=4)
    try:
        yield
    finally:
        uuid.uuid4 = original


def _scratch_root() -> str | None:
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None


class World:
    """One run of the simulation (use :func:`run`)."""

    def __init__(self, seed: int, faults: FaultConfig, root: Path, bug: str | None = None) -> None:
        #: The incoming sequences with a planted bug (tests/sim/planted.py), or the real ones.
        self.sequence_type = PLANTED_BUGS[bug] if bug is not None else None
        self.seed = seed
        self.cfg = faults
        self.rng = random.Random(seed)
        self.loop = EventLoop(START)
        self.stats = SimStats()
        self.trace = Trace()
        self.net = Network(
            self.loop,
            self.rng,
            self.stats,
            self.trace,
            self._deliver,
            self._lost,
            faults.zombie,
            lambda name: name == BYZANTINE or self.nodes[name].qm is not None,
        )
        self.fault_end = START + faults.fault_time
        self.crashes = 0
        self.done = False
        self.nodes: dict[str, SimNode] = {}
        self.by_address: dict[str, SimNode] = {}
        for name, address in ADDRESSES.items():
            windows: dict[str, int] = {}
            if faults.batch_size is not None:
                windows["batch_size"] = faults.batch_size
            if faults.max_in_flight is not None:
                windows["max_in_flight"] = faults.max_in_flight
            config = TransferConfig(
                local_addresses=(address,), routes=ROUTES.get(name, ()), queue_refresh=0.5,
                trust=TrustConfig(intermediate_hops=HOPS.get(name, ())), **windows,
            )  # fmt: skip
            node = SimNode(name, address, root / name, config)
            self.nodes[name] = node
            self.by_address[address] = node
        self.flows = [
            Flow(f, src, dst, f"private$\\{q}", f"DIRECT=TCP:{ADDRESSES[dst]}\\PRIVATE$\\{q}")
            for f, src, dst, q in FLOWS
        ]
        self.oracle = Oracle(self.flows, faults.check_release)
        self.flow_queues = {f.queue.lower() for f in self.flows}
        #: Open sender transactions (they must end before the run can drain).
        self.open_sends = 0
        #: Consecutive empty receive polls per flow in the drain phase.
        self.idle_polls: dict[str, int] = {}
        self.byzantine = Byzantine(self)

    # ------------------------------------------------------------------ running

    def run(self) -> None:
        """Run the seed to the end; raises :class:`SimFailure` on a broken invariant."""
        self._pin_guids()
        for node in self.nodes.values():
            self._start(node, first=True)
        for flow in self.flows:
            self.loop.after(self.rng.expovariate(self.cfg.send_rate), self._app_send, flow)
            self.loop.after(self.rng.expovariate(self.cfg.receive_rate), self._app_receive, flow)
        for kind, rate in (
            ("cut", self.cfg.cut_rate),
            ("stall", self.cfg.stall_rate),
            ("partition", self.cfg.partition_rate),
            ("crash", self.cfg.crash_rate),
            ("dup-conn", self.cfg.dup_conn_rate),
            ("byzantine", self.cfg.byzantine_rate),
        ):
            if rate > 0:
                self.loop.after(self.rng.expovariate(rate), self._fault, kind, rate)
        self.loop.at(self.fault_end, self._check_drained)
        try:
            finished = self.loop.run(lambda: self.done, MAX_EVENTS)
            if not finished:
                raise SimFailure("liveness", "the simulation ran out of events before draining")
            self.stats.messages_checked = self.oracle.final_check()
        finally:
            self.stats.events = self.loop.count
            self.stats.sim_time = self.loop.now - START
            for node in self.nodes.values():
                if node.qm is not None:
                    node.qm.close()

    # ------------------------------------------------------------------ nodes

    def _pin_guids(self) -> None:
        """Create each QM's identity (its GUID, drawn from the seed) and pin every GUID to
        its QM's address in every QM's configuration."""
        for node in self.nodes.values():
            with _seeded_uuid4(self.rng):
                qm = QueueManager(node.data_dir, threaded=False, clock=lambda: self.loop.now,
                                  computer_name=node.address, integrity_check=False)  # fmt: skip
            node.guid = qm.guid
            qm.close()
        pins = tuple((n.guid, (f"{n.address}/32",)) for n in self.nodes.values() if n.guid is not None)
        for node in self.nodes.values():
            node.config = replace(node.config, trust=replace(node.config.trust, pinned=pins))

    def pump_node(self, node: SimNode) -> None:
        """Write and run what ``node`` has to do now (for the byzantine peer)."""
        self._pump(node)

    def _start(self, node: SimNode, first: bool = False) -> None:
        now = self.loop.now
        with _seeded_uuid4(self.rng):
            qm = QueueManager(
                node.data_dir,
                threaded=False,
                clock=lambda: self.loop.now,
                computer_name=node.address,
                integrity_check=False,
            )
        node.qm = qm
        if first:
            for flow in self.flows:
                if flow.dst == node.name:
                    qm.create_queue(flow.queue, transactional=True)
        node.transfer = Transfer(qm, node.config, now)
        if self.sequence_type is not None:
            node.transfer.incoming.use_sequence_type(self.sequence_type, now)
        node.timer_at = None
        if not first:
            self._check_restart(node)
        self.loop.after(0.0, self._poll, node.name, node.epoch)

    def _poll(self, name: str, epoch: int) -> None:
        node = self.nodes[name]
        if node.epoch != epoch or node.transfer is None or self.done:
            return
        node.transfer.poll(self.loop.now)
        self._pump(node)
        # Commits poll at once; this periodic poll only retries loads that waited (e.g. a
        # TxSequenceID in quarantine), so it can be slow once the applications stopped.
        self.loop.after(1.0 if self.loop.now < self.fault_end else 5.0, self._poll, name, epoch)

    def _pump(self, node: SimNode) -> None:
        """Write what the node's sessions produced, close what they closed, start store
        work, ask for connections, re-arm the node's timer."""
        t = node.transfer
        if t is None:
            return
        now = self.loop.now
        for _ in range(20):
            moved = False
            for cid, data in t.data_to_send():
                entry = node.conns.get(cid)
                if entry is not None:
                    self.net.send(entry[0], entry[1], data)
                    self.byzantine.captures(data)
                moved = True
            for cid in t.connections_to_close():
                t.connection_lost(cid, now)
                entry = node.conns.pop(cid, None)
                if entry is not None:
                    self.net.close_end(*entry)
                moved = True
            if not moved:
                break
        if t.refill_due:
            # As the asyncio driver: after the writes, load what the window sends next.
            t.refill(now)
            for cid, data in t.data_to_send():
                entry = node.conns.get(cid)
                if entry is not None:
                    self.net.send(entry[0], entry[1], data)
        while (work := t.next_store_work()) is not None:
            self._store_start(node, work)
        for peer in sorted(t.wanted_peers()):
            if peer not in node.connecting and peer in self.by_address:
                node.connecting.add(peer)
                self.loop.at(node.retry_at.get(peer, now), self._connect, node.name, node.epoch, peer)
        deadline = t.get_timer()
        if deadline is not None and (node.timer_at is None or deadline < node.timer_at):
            node.timer_at = deadline
            self.loop.at(max(deadline, now + 0.001), self._timer, node.name, node.epoch)

    def _timer(self, name: str, epoch: int) -> None:
        node = self.nodes[name]
        if node.epoch != epoch or node.transfer is None:
            return
        node.timer_at = None
        node.transfer.handle_timer(self.loop.now)
        self._pump(node)

    def _connect(self, name: str, epoch: int, peer: str, extra: bool = False) -> None:
        node = self.nodes[name]
        if node.epoch != epoch or node.transfer is None:
            return
        if not extra:
            node.connecting.discard(peer)
        now = self.loop.now
        other = self.by_address[peer]
        if other.transfer is None or self.net.partitioned(name, other.name, now):
            if extra:
                return
            wait = min(max(node.backoff.get(peer, 0.05) * 2, 0.1), 4.0)
            node.backoff[peer] = wait
            node.retry_at[peer] = now + wait * self.rng.uniform(0.8, 1.2)
            self.trace(now, "%s connect %s failed, retry in %.2f", name, other.name, wait)
            self._pump(node)
            return
        node.backoff.pop(peer, None)
        node.retry_at.pop(peer, None)
        cid_a = node.transfer.connection_made(peer, Role.INITIATOR, now)
        cid_b = other.transfer.connection_made(node.address, Role.ACCEPTOR, now)
        link = self.net.open_link(End(name, node.epoch, cid_a), End(other.name, other.epoch, cid_b))
        node.conns[cid_a] = (link, 0)
        other.conns[cid_b] = (link, 1)
        self.trace(now, "link %d %s->%s open%s", link.lid, name, other.name, " (extra)" if extra else "")
        self._pump(node)
        self._pump(other)

    def _deliver(self, end: End, data: bytes) -> None:
        if end.node == BYZANTINE:
            self.byzantine.deliver(end, data)
            return
        node = self.nodes[end.node]
        if node.epoch != end.epoch or node.transfer is None:
            return
        node.transfer.data_received(end.cid, data, self.loop.now)
        self._pump(node)

    def _lost(self, end: End) -> None:
        if end.node == BYZANTINE:
            self.byzantine.lost(end)
            return
        node = self.nodes[end.node]
        if node.epoch != end.epoch or node.transfer is None:
            return
        node.conns.pop(end.cid, None)
        node.transfer.connection_lost(end.cid, self.loop.now)
        self._pump(node)

    # ------------------------------------------------------------------ store

    def _fsync(self) -> float:
        if self.loop.now < self.fault_end and self.rng.random() < self.cfg.slow_fsync:
            return self.rng.uniform(0.3, 2.5)
        return self.rng.uniform(0.0005, 0.004)

    def _store_start(self, node: SimNode, work: StoreWork) -> None:
        latency = self._fsync()
        if (
            isinstance(work, AcceptBatch)
            and self.loop.now < self.fault_end
            and self.rng.random() < self.cfg.crash_in_store
        ):
            # The window the planted "ack-before-durable" bug falls into: accepted (maybe
            # acknowledged), not yet durable, then the receiver dies.
            self.loop.after(self.rng.uniform(0.0, latency), self._crash, node.name, "crash-in-store")
        self.loop.after(latency, self._store_durable, node.name, node.epoch, work)

    def _store_durable(self, name: str, epoch: int, work: StoreWork) -> None:
        node = self.nodes[name]
        if node.epoch != epoch or node.transfer is None or node.qm is None:
            return  # the process died first: nothing of it is durable
        before: dict[str, list[bytes]] = {}
        if isinstance(work, ReleaseBatch):
            for fname, _n in work.releases:
                before[fname] = [m.body for m in node.qm.peek_range(fname, 0, 1_000_000)]
        outcome = node.transfer.run_store_work(work)
        now = self.loop.now
        if isinstance(work, AcceptBatch):
            for group, res in zip(work.groups, outcome, strict=False):
                if res is not None:
                    raise SimFailure("store", f"{name}: accept failed: {res}")
                if group.queue.lower() in self.flow_queues or any(
                    m.body.startswith(FORGED) for m in group.messages
                ):
                    # (the byzantine peer's own messages to queues that do not exist are
                    # its business; anything forged stored anywhere is a finding)
                    self.oracle.stored(name, group.messages)
                st = group.state
                node.incoming_durable[(st.sender_qm, st.destination.lower())] = (
                    st.tx_sequence_id,
                    st.tx_sequence_number,
                )
            self.trace(now, "%s stored %d", name, sum(len(g.messages) for g in work.groups))
        elif isinstance(work, ReleaseBatch):
            for fname, left in before.items():
                after = {m.body for m in node.qm.peek_range(fname, 0, 1_000_000)}
                gone = [b for b in left if b not in after]
                flow = next(f for f in self.flows if f.format_name.lower() == fname.lower())
                self.oracle.released(flow, gone)
                self.trace(now, "%s released %d of %s", name, len(gone), flow.name)
        if self.loop.now < self.fault_end and self.rng.random() < self.cfg.crash_in_store / 4:
            self.loop.after(self.rng.uniform(0.0, 0.002), self._crash, name, "crash-after-store")
        self.loop.after(self.rng.uniform(0.0, 0.002), self._store_done, name, epoch, work, outcome)

    def _store_done(
        self, name: str, epoch: int, work: StoreWork, outcome: list[BaseException | None]
    ) -> None:
        node = self.nodes[name]
        if node.epoch != epoch or node.transfer is None:
            return
        node.transfer.store_work_done(work, outcome, self.loop.now)
        if isinstance(work, ReleaseBatch):
            node.transfer.poll(self.loop.now)  # room in the window: load more (serve polls every 50 ms)
        self._pump(node)

    # ------------------------------------------------------------------ crashes

    def _crash(self, name: str, kind: str) -> None:
        node = self.nodes[name]
        if node.qm is None or self.crashes >= self.cfg.max_crashes or self.done:
            return
        self.crashes += 1
        self.stats.faults[kind] += 1
        now = self.loop.now
        half_open = self.rng.random() < self.cfg.half_open
        if half_open:
            self.stats.faults["half-open"] += 1
        self.trace(now, "%s CRASH (%s%s)", name, kind, ", peers not told" if half_open else "")
        # Synchronous store: every operation committed before it returned; nothing may be
        # left half-done in the connection we are about to drop.
        if node.qm.store._conn.in_transaction:
            raise SimFailure("store", f"{name}: crash with an open SQLite transaction")
        node.qm.close()
        node.qm = None
        node.transfer = None
        node.epoch += 1
        node.conns.clear()
        node.connecting.clear()
        node.retry_at.clear()
        node.backoff.clear()
        self.net.node_crashed(name, notify_peers=not half_open)
        self.loop.after(self.rng.uniform(0.1, 3.0), self._restart, name)

    def _restart(self, name: str) -> None:
        node = self.nodes[name]
        if node.qm is not None:
            return
        self.trace(self.loop.now, "%s restart", name)
        self._start(node)
        self.net.reachable_again(name)
        self._pump(node)

    def _check_restart(self, node: SimNode) -> None:
        """Invariant 4 (and the oracle's view of the store) right after a restart."""
        qm, t = node.qm, node.transfer
        assert qm is not None and t is not None
        restored = {
            (s.source_qm, s.destination.lower()): (s.tx_sequence_id.value, s.tx_sequence_number)
            for s in t.incoming_status()
        }
        for key, durable in node.incoming_durable.items():
            if restored.get(key) != durable:
                raise SimFailure(
                    "sequence-state",
                    f"{node.name}: incoming {key[1]} restored {restored.get(key)}, durable {durable}",
                )
        for flow in self.flows:
            if flow.dst == node.name:
                held = {m.body for m in qm.peek_range(flow.queue, 0, 1_000_000)}
                if held != flow.present:
                    raise SimFailure(
                        "sequence-state",
                        f"{node.name}: {flow.queue} holds {len(held)} messages after restart, "
                        f"the oracle {len(flow.present)}",
                    )
            if flow.src == node.name:
                out = self._outgoing(node, flow)
                want = [b for b in flow.expected if b not in flow.released]
                if [m.body for m in out] != want:
                    raise SimFailure(
                        "sequence-state",
                        f"{node.name}: outgoing {flow.name} holds {len(out)} after restart,"
                        f" expected {len(want)}",
                    )
                for prev, cur in itertools.pairwise(out):
                    same = cur.tx_sequence_id == prev.tx_sequence_id
                    if same and cur.tx_sequence_number != prev.tx_sequence_number + 1:
                        raise SimFailure("sequence-state", f"{node.name}: {flow.name} numbering broken")

    def _outgoing(self, node: SimNode, flow: Flow) -> list[MessageRecord]:
        assert node.qm is not None
        for rec in node.qm.list_queues(include_system=True):
            if rec.queue_type == QueueType.OUTGOING and rec.display_name.lower() == flow.format_name.lower():
                return node.qm.peek_range(rec.display_name, 0, 1_000_000)
        return []

    # ------------------------------------------------------------------ faults

    def _fault(self, kind: str, rate: float) -> None:
        now = self.loop.now
        if now >= self.fault_end or self.done:
            return
        self.loop.after(self.rng.expovariate(rate), self._fault, kind, rate)
        rng = self.rng
        if kind == "cut":
            links = self.net.open_links()
            if links:
                self.net.cut(rng.choice(links))
        elif kind == "stall":
            links = self.net.open_links()
            if links:
                link, seconds = rng.choice(links), rng.uniform(0.2, 25.0)
                self.net.stall(link, seconds, both=rng.random() < 0.5)
                self.stats.faults["stall"] += 1
                self.trace(now, "link %d stalls %.1fs", link.lid, seconds)
        elif kind == "partition":
            a, b = rng.sample(sorted(self.nodes), 2)
            seconds = rng.uniform(1.0, 20.0)
            self.net.partition(a, b, seconds)
            self.stats.faults["partition"] += 1
            self.trace(now, "partition %s|%s %.1fs", a, b, seconds)
        elif kind == "crash":
            self._crash(rng.choice(sorted(self.nodes)), "crash")
        elif kind == "byzantine":
            self.byzantine.act()
        elif kind == "dup-conn":
            a, b = rng.sample(sorted(self.nodes), 2)
            node, other = self.nodes[a], self.nodes[b]
            if node.transfer is not None and other.transfer is not None:
                self.stats.faults["dup-conn"] += 1
                self._connect(a, node.epoch, other.address, extra=True)

    # ------------------------------------------------------------------ applications

    def _app_send(self, flow: Flow) -> None:
        """A sending application: one transaction of 1..4 messages, committed (mostly),
        aborted, or abandoned, after a think time during which the QM may crash."""
        now = self.loop.now
        if now >= self.fault_end:
            return
        self.loop.after(self.rng.expovariate(self.cfg.send_rate), self._app_send, flow)
        node = self.nodes[flow.src]
        if node.qm is None:
            return
        tx = node.qm.begin()
        txno = self.stats.committed_tx + self.stats.aborted_tx + self.open_sends
        bodies = [flow.new_body(txno) for _ in range(self.rng.randint(1, 4))]
        node.qm.send_many(flow.format_name, [MessageRecord(body=b, label=flow.name) for b in bodies], tx)
        r = self.rng.random()
        outcome = "commit" if r < 0.85 else "abort" if r < 0.95 else "abandon"
        self.open_sends += 1
        self.loop.after(self.rng.uniform(0.0, 0.3), self._app_send_end, flow, node.epoch, tx, bodies, outcome)

    def _app_send_end(
        self, flow: Flow, epoch: int, tx: Transaction, bodies: list[bytes], outcome: str
    ) -> None:
        self.open_sends -= 1
        node = self.nodes[flow.src]
        if node.epoch != epoch or node.qm is None or node.transfer is None:
            self.stats.aborted_tx += 1  # the QM crashed under the application: never committed
            return
        if outcome == "commit":
            tx.commit()
            self.oracle.committed(flow, bodies)
            self.stats.committed_tx += 1
            self.trace(self.loop.now, "%s commit %d -> %s", flow.src, len(bodies), flow.name)
            node.transfer.poll(self.loop.now)
            self._pump(node)
        else:
            if outcome == "abort":
                tx.abort()
            self.stats.aborted_tx += 1

    def _app_receive(self, flow: Flow) -> None:
        """A receiving application at the destination: a transactional receive of 1..3
        messages ended by commit, abort, NACK of one, or abandonment; or a
        non-transactional two-phase receive that is acknowledged or cancelled."""
        if self.done:
            return
        now = self.loop.now
        calm = now >= self.fault_end
        if calm:
            # Drain phase: poll fast while messages come, back off (up to 5 s) while idle.
            idle = self.idle_polls.get(flow.name, 0)
            self.loop.after(min(0.05 * 2**idle, 5.0), self._app_receive, flow)
            self.idle_polls[flow.name] = idle + 1
        else:
            self.loop.after(self.rng.expovariate(self.cfg.receive_rate), self._app_receive, flow)
        node = self.nodes[flow.dst]
        qm = node.qm
        if qm is None:
            return
        r = self.rng.random()
        if calm:
            how = "commit" if r < 0.8 else "ack"
        else:
            how = ("commit", "abort", "nack", "abandon", "cancel", "ack")[
                sum(r >= p for p in (0.5, 0.6, 0.72, 0.8, 0.9))
            ]
        think = self.rng.uniform(0.0, 0.2)
        if how in ("cancel", "ack"):
            try:
                pending = qm.dequeue_begin(flow.queue, timeout=0)
            except MQError as exc:
                if exc.hresult != HResult.MQ_ERROR_IO_TIMEOUT:
                    raise
                return
            self.idle_polls[flow.name] = 0
            self.loop.after(think, self._app_receive_end, flow, node.epoch, how, None, [pending])
            return
        tx = qm.begin()
        pendings: list[PendingReceive] = []
        for _ in range(self.rng.randint(1, 3)):
            try:
                pendings.append(qm.dequeue_begin(flow.queue, tx=tx, timeout=0))
            except MQError as exc:
                if exc.hresult != HResult.MQ_ERROR_IO_TIMEOUT:
                    raise
                break
        if not pendings:
            tx.abort()
            return
        self.idle_polls[flow.name] = 0
        self.loop.after(think, self._app_receive_end, flow, node.epoch, how, tx, pendings)

    def _app_receive_end(
        self, flow: Flow, epoch: int, how: str, tx: Transaction | None, pendings: list[PendingReceive]
    ) -> None:
        node = self.nodes[flow.dst]
        qm = node.qm
        if node.epoch != epoch or qm is None:
            self.stats.receives["dropped-by-crash"] += 1
            return
        self.stats.receives[how] += 1
        if how == "ack":
            qm.dequeue_end(pendings[0], delete=True)
            self.oracle.consumed(flow, [pendings[0].message], how)
        elif how == "cancel":
            qm.dequeue_end(pendings[0], delete=False)
        else:
            assert tx is not None
            if how == "commit":
                tx.commit()
                self.oracle.consumed(flow, [p.message for p in pendings], how)
            elif how == "abort":
                tx.abort()
            elif how == "nack":
                qm.dequeue_end(pendings[0], delete=False)
                tx.commit()
                self.oracle.consumed(flow, [p.message for p in pendings[1:]], how)
            else:  # abandoned: a crash drops it, or the cleanup timer aborts it
                self.loop.after(ABANDON_CLEANUP, self._cleanup, flow, epoch, tx)
        self.trace(self.loop.now, "%s receive %s %d of %s", flow.dst, how, len(pendings), flow.name)

    def _cleanup(self, flow: Flow, epoch: int, tx: Transaction) -> None:
        node = self.nodes[flow.dst]
        if node.epoch == epoch and node.qm is not None:
            tx.abort()

    # ------------------------------------------------------------------ liveness

    def _check_drained(self) -> None:
        now = self.loop.now
        waited = now - self.fault_end
        if (
            self.open_sends == 0
            and all(n.qm is not None for n in self.nodes.values())
            and self.oracle.all_consumed()
            and all(not self._outgoing(self.nodes[f.src], f) for f in self.flows)
        ):
            self.done = True
            self.stats.drain_time = waited
            return
        if waited > self.cfg.drain_limit:
            status = []
            for n in self.nodes.values():
                if n.transfer is not None:
                    status += [
                        f"{n.name} out {s.format_name} in_flight={s.in_flight} connected={s.connected}"
                        for s in n.transfer.outgoing_status()
                    ]
            raise SimFailure(
                "liveness",
                f"not drained {self.cfg.drain_limit:.0f}s after the faults stopped: "
                f"{self.oracle.summary()} | " + "; ".join(status),
            )
        self.loop.after(0.5, self._check_drained)


def run(seed: int, faults: FaultConfig | None = None, bug: str | None = None) -> RunResult:
    """Run one seed (optionally with a planted bug) in a scratch directory; never raises
    for a broken invariant: the result says what broke, with the trace."""
    cfg = faults or FaultConfig()
    root = Path(tempfile.mkdtemp(prefix="openmsmq-sim-", dir=_scratch_root()))
    log = logging.getLogger("openmsmq")
    level = log.level
    log.setLevel(logging.CRITICAL)
    world = World(seed, cfg, root, bug)
    try:
        world.run()
        return RunResult(seed, True, world.stats, summary=world.oracle.summary())
    except SimFailure as failure:
        return RunResult(seed, False, world.stats, failure, world.trace.lines(), world.oracle.summary())
    except Exception as exc:  # the code under test (or the simulator) raised: also a finding
        where = traceback.extract_tb(exc.__traceback__)[-1]
        failure = SimFailure("exception", f"{type(exc).__name__}: {exc} at {where.filename}:{where.lineno}")
        return RunResult(seed, False, world.stats, failure, world.trace.lines(), world.oracle.summary())
    finally:
        log.setLevel(level)
        shutil.rmtree(root, ignore_errors=True)
