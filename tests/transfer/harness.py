"""Two or more QueueManagers with their Transfer objects wired in memory (no sockets)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from openmsmq.errors import HResult, MQError
from openmsmq.observability.sink import MetricsSink
from openmsmq.protocol.events import Role
from openmsmq.qm.manager import QueueManager
from openmsmq.qm.options import StoreOptions
from openmsmq.store.records import MessageRecord
from openmsmq.transfer.engine import Transfer, TransferConfig
from tests.clock import Clock


@dataclass
class Node:
    address: str
    qm: QueueManager
    transfer: Transfer
    #: Hold store work instead of running it (durability delayed).
    hold_store: bool = False
    held: list = field(default_factory=list)

    def run_store(self, now: float) -> int:
        n = 0
        while (work := self.transfer.next_store_work()) is not None:
            if self.hold_store:
                self.held.append(work)
                continue
            self.transfer.store_work_done(work, self.transfer.run_store_work(work), now)
            n += 1
        return n

    def release_held(self, now: float) -> None:
        self.hold_store = False
        for work in self.held:
            self.transfer.store_work_done(work, self.transfer.run_store_work(work), now)
        self.held.clear()


class Net:
    """Nodes by address; ``links`` maps (node, cid) to the other end (node, cid)."""

    def __init__(self, root: Path, clock: Clock) -> None:
        self.root = root
        self.clock = clock
        self.nodes: dict[str, Node] = {}
        self.links: dict[tuple[str, int], tuple[str, int]] = {}
        #: Addresses whose outgoing bytes are dropped (then the link is cut).
        self.blackhole: set[tuple[str, str]] = set()
        #: Bytes a link holds for a receiver that stopped reading (``reading_wanted`` is
        #: False, as ``net/mqqb.py`` pauses its transports; TCP flow control holds them).
        self.held_bytes: dict[tuple[str, int], list[bytes]] = {}
        #: The store of each node added with its own (kept across restarts).
        self.store_options: dict[str, StoreOptions] = {}
        #: Forged peers (tests/transfer/forged.py) by the (node, cid) of their connection.
        self.forged: dict[tuple[str, int], Any] = {}

    def add(
        self,
        address: str,
        routes: tuple[tuple[str, str], ...] = (),
        name: str | None = None,
        metrics: MetricsSink | None = None,
        store_options: StoreOptions | None = None,
        threaded: bool = False,
        **cfg: object,
    ) -> Node:
        """A QM on ``address`` (``name``: its computer name, default the host's; ``metrics``:
        what it reports to; ``store_options``: its store, kept across restarts;
        ``threaded``: a store with its group commit, for tests that run store work on
        threads of their own)."""
        extra: dict[str, Any] = {} if metrics is None else {"metrics": metrics}
        if store_options is not None:
            extra["store_options"] = store_options
        qm = QueueManager(
            self.root / address, threaded=threaded, clock=self.clock, integrity_check=False,
            computer_name=name, **extra,  # type: ignore[arg-type]
        )  # fmt: skip
        config = TransferConfig(local_addresses=(address,), routes=routes, **cfg)  # type: ignore[arg-type]
        node = Node(address, qm, Transfer(qm, config, self.clock.now))
        self.nodes[address] = node
        if store_options is not None:
            self.store_options[address] = store_options
        return node

    def restart(self, address: str) -> Node:
        """Crash ``address``: volatile state and connections are gone; the store stays."""
        old = self.nodes[address]
        for (a, cid), (b, other) in list(self.links.items()):
            if a == address:
                del self.links[(a, cid)]
                self.links.pop((b, other), None)
                self.held_bytes.pop((a, cid), None)
                self.held_bytes.pop((b, other), None)
                self.nodes[b].transfer.connection_lost(other, self.clock.now)
        config = old.transfer.config
        old.qm.close()
        qm = QueueManager(
            self.root / address,
            threaded=False,
            clock=self.clock,
            integrity_check=False,
            metrics=old.qm.metrics,
            store_options=self.store_options.get(address),
        )
        node = Node(address, qm, Transfer(qm, config, self.clock.now))
        self.nodes[address] = node
        return node

    def connect(self, a: str, b: str) -> None:
        now = self.clock.now
        ca = self.nodes[a].transfer.connection_made(b, Role.INITIATOR, now)
        cb = self.nodes[b].transfer.connection_made(a, Role.ACCEPTOR, now)
        self.links[(a, ca)] = (b, cb)
        self.links[(b, cb)] = (a, ca)

    def cut(self, a: str, b: str) -> None:
        """Close every connection between a and b."""
        for (x, cid), (y, other) in list(self.links.items()):
            if {x, y} == {a, b} and (x, cid) in self.links:
                del self.links[(x, cid)]
                del self.links[(y, other)]
                self.held_bytes.pop((x, cid), None)
                self.held_bytes.pop((y, other), None)
                self.nodes[x].transfer.connection_lost(cid, self.clock.now)
                self.nodes[y].transfer.connection_lost(other, self.clock.now)

    def step(self) -> bool:
        """One round: poll, connect, move bytes, run store work. True if anything moved."""
        now = self.clock.now
        moved = False
        for node in list(self.nodes.values()):
            node.transfer.poll(now)
            for peer in node.transfer.wanted_peers():
                if peer in self.nodes and not self.nodes[peer].transfer.refusing(node.address, now):
                    self.connect(node.address, peer)
                    moved = True
        for node in list(self.nodes.values()):
            if self._read_held(node, now):
                moved = True
            # As the asyncio driver (net/mqqb.py _pump): after SessionAcks freed the
            # window, load what it sends next. Without this an outgoing queue whose
            # loading paused on a full backlog waited for nothing (bench/transfer_cpu.py
            # stalled at 576 of 1,000-3,000 messages).
            if node.transfer.refill_due:
                node.transfer.refill(now)
            for cid, data in node.transfer.data_to_send():
                target = self.links.get((node.address, cid))
                if target is None:
                    forged = self.forged.get((node.address, cid))
                    if forged is not None:
                        forged.deliver(data)
                        moved = True
                    continue
                moved = True
                if (node.address, target[0]) in self.blackhole:
                    continue
                self._deliver(target, data, now)
            for cid in node.transfer.connections_to_close():
                forged = self.forged.pop((node.address, cid), None)
                if forged is not None:
                    forged.closed()
                target = self.links.pop((node.address, cid), None)
                node.transfer.connection_lost(cid, now)
                self.held_bytes.pop((node.address, cid), None)
                if target is not None:
                    self.held_bytes.pop(target, None)
                    self.links.pop(target, None)
                    self.nodes[target[0]].transfer.connection_lost(target[1], now)
                moved = True
            if node.run_store(now):
                moved = True
        return moved

    def _deliver(self, target: tuple[str, int], data: bytes, now: float) -> None:
        """Hand ``data`` to ``target``'s transfer, or hold it on the link (behind what is
        held already) while the receiver does not read."""
        held = self.held_bytes.get(target)
        receiver = self.nodes[target[0]].transfer
        if held or not receiver.reading_wanted:
            self.held_bytes.setdefault(target, []).append(data)
            return
        receiver.data_received(target[1], data, now)

    def _read_held(self, node: Node, now: float) -> bool:
        """Deliver what links hold for ``node``, in order, while it reads."""
        moved = False
        for target in [t for t in self.held_bytes if t[0] == node.address]:
            held = self.held_bytes[target]
            while held and node.transfer.reading_wanted:
                node.transfer.data_received(target[1], held.pop(0), now)
                moved = True
            if not held:
                del self.held_bytes[target]
        return moved

    def settle(self, rounds: int = 200) -> None:
        for _ in range(rounds):
            if not self.step():
                return
        raise AssertionError("network did not settle")

    def advance(self, seconds: float) -> None:
        """Move the clock and fire due timers, then settle."""
        self.clock.now += seconds
        for node in self.nodes.values():
            node.transfer.handle_timer(self.clock.now)
        self.settle()

    def run_until_quiet(self, max_rounds: int = 60, tick: float = 0.6) -> None:
        """Settle, then fire timers (OrderAck after 0.5 s) until nothing is in flight."""
        self.settle()
        for _ in range(max_rounds):
            self.advance(tick)
            if all(
                not any(t.messages for t in n.transfer.outgoing.values())
                and n.transfer.idle
                and outgoing_count(n.qm) == 0
                for n in self.nodes.values()
            ):
                self.advance(tick)
                return
        raise AssertionError("transfer did not finish")


def send_tx(qm: QueueManager, destination: str, bodies: list[bytes]) -> None:
    """Send ``bodies`` in one transaction."""
    tx = qm.begin()
    qm.send_many(destination, [MessageRecord(body=b, label=str(i)) for i, b in enumerate(bodies)], tx)
    tx.commit()


def bodies_in(qm: QueueManager, queue: str) -> list[bytes]:
    return [m.body for m in qm.peek_range(queue, 0, 1_000_000)]


def outgoing_count(qm: QueueManager) -> int:
    return sum(r.msg_count for r in qm.list_queues(include_system=True) if r.queue_type == 4)


def failing_accepts(node: Node, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Make ``node``'s store of accepted transactional arrivals fail as a full disk does
    while the returned flag's item is True (it starts False)."""
    full = [False]
    real = node.transfer.sequence_store.accept_arrival_rows_many

    def store(runs):  # type: ignore[no-untyped-def]
        if full[0]:
            return [MQError(HResult.MQ_ERROR_INSUFFICIENT_RESOURCES, "store is full") for _ in runs]
        return real(runs)

    monkeypatch.setattr(node.transfer.sequence_store, "accept_arrival_rows_many", store)
    return full
