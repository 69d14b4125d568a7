"""The simulated network: TCP connections as two ordered byte pipes that can be cut,
stalled, partitioned, and that may keep delivering after their sender gave up.

TCP never loses, duplicates or reorders bytes *within* a connection, so those faults
happen the way they do in reality, across connections: bytes in flight are lost when a
connection is cut (often in the middle of a packet, since writes are split into random
fragments), the sender resends on the next connection (duplicates), and an old connection
that the sender already abandoned can deliver its last bytes after the new connection's
(reordering). See docs/simulation.md for the full fault model.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from .model import EventLoop, SimStats, Trace


@dataclass(eq=False)
class End:
    """One end of a connection, owned by one incarnation (``epoch``) of a node."""

    node: str
    epoch: int
    cid: int
    #: The node still has this connection (it has not been told it is lost).
    open: bool = True


@dataclass(eq=False)
class Pipe:
    """One direction of a connection."""

    #: Delivery time of the last fragment scheduled (fragments are delivered in order).
    last_at: float = 0.0
    #: Nothing is delivered before this time (stall / partition: TCP keeps retransmitting).
    hold_until: float = 0.0
    #: Fragments still in flight are lost (connection reset, receiving host gone).
    dropped: bool = False
    #: The writing end can still write (it is open and the connection is not cut).
    writable: bool = True
    #: A FIN (orderly close) follows the data in flight.
    fin: bool = False
    #: The writer wrote into the dead connection: a reset is on its way back.
    rst_scheduled: bool = False
    #: ... or will be, once the other host is reachable again (TCP retransmits until then).
    rst_waiting: bool = False


@dataclass(eq=False)
class Link:
    """A TCP connection: ``ends[0]`` is the initiator, ``pipes[i]`` carries ends[i] → ends[1-i]."""

    lid: int
    ends: tuple[End, End]
    pipes: tuple[Pipe, Pipe] = field(default_factory=lambda: (Pipe(), Pipe()))
    #: A middlebox dropped the connection silently: no reset ever comes back.
    silent: bool = False

    def between(self, a: str, b: str) -> bool:
        """Whether this link connects nodes ``a`` and ``b`` (either direction)."""
        return {self.ends[0].node, self.ends[1].node} == {a, b}


class Network:
    """Moves fragments between link ends through the event loop.

    ``deliver(end, data)`` hands bytes to the node that owns ``end`` (ignored by the
    caller if that incarnation is gone); ``lost(end)`` tells it the connection is gone.
    """

    def __init__(
        self,
        loop: EventLoop,
        rng: random.Random,
        stats: SimStats,
        trace: Trace,
        deliver: Callable[[End, bytes], None],
        lost: Callable[[End], None],
        zombie: float,
        is_up: Callable[[str], bool],
    ) -> None:
        self.loop = loop
        self.rng = rng
        self.stats = stats
        self.trace = trace
        self._deliver_cb = deliver
        self._lost_cb = lost
        self.zombie = zombie
        self._is_up = is_up
        self.links: list[Link] = []
        self._next_lid = 1
        #: (node, node) sorted pair -> partition end time.
        self.partitions: dict[tuple[str, str], float] = {}

    # ------------------------------------------------------------------ links

    def open_link(self, a: End, b: End) -> Link:
        """A new connection from ``a`` (initiator) to ``b``."""
        link = Link(self._next_lid, (a, b))
        self._next_lid += 1
        now = self.loop.now
        for pipe in link.pipes:
            pipe.last_at = now
        self.links.append(link)
        return link

    def partitioned(self, a: str, b: str, now: float) -> bool:
        """Whether ``a`` and ``b`` cannot reach each other at ``now``."""
        until = self.partitions.get((min(a, b), max(a, b)))
        return until is not None and now < until

    def latency(self) -> float:
        """One-way delay of a fragment: mostly LAN-like, sometimes a slow path."""
        r = self.rng.random()
        if r < 0.9:
            return self.rng.uniform(0.0002, 0.003)
        return self.rng.uniform(0.01, 0.25)

    def send(self, link: Link, side: int, data: bytes) -> None:
        """``link.ends[side]`` writes ``data``: split it into fragments, schedule them in order."""
        if not link.ends[side].open:
            return
        pipe = link.pipes[side]
        if pipe.dropped or not pipe.writable:
            self._dead_write(link, side)
            return
        now = self.loop.now
        pieces = self._fragments(data)
        for piece in pieces:
            at = max(now + self.latency(), pipe.last_at)
            if pipe.hold_until > at:
                at = pipe.hold_until + self.latency()
            pipe.last_at = at
            self.loop.at(at, self._arrive, link, side, piece)

    def _dead_write(self, link: Link, side: int) -> None:
        """A write into a connection the other side no longer has: the other host answers
        with a reset once it is reachable; after a silent drop nothing ever comes back."""
        pipe = link.pipes[side]
        if link.silent or pipe.rst_scheduled:
            return
        me, other = link.ends[side].node, link.ends[1 - side].node
        now = self.loop.now
        if self._is_up(other) and not self.partitioned(me, other, now):
            pipe.rst_scheduled = True
            pipe.rst_waiting = False
            # The reset takes the same (possibly stalled) path as the data.
            at = max(now, link.pipes[0].hold_until, link.pipes[1].hold_until) + 2 * self.latency()
            self.loop.at(at, self._tell_lost, link, side)
        else:
            pipe.rst_waiting = True

    def reachable_again(self, node: str) -> None:
        """``node`` restarted or a partition ended: writers waiting for a reset get it."""
        for link in self.links:
            for side in (0, 1):
                end = link.ends[side]
                if end.open and link.ends[1 - side].node == node and link.pipes[side].rst_waiting:
                    self._dead_write(link, side)

    def _fragments(self, data: bytes) -> list[bytes]:
        r = self.rng.random()
        if r < 0.6 or len(data) < 2:
            return [data]
        # TCP segments: split at arbitrary byte positions (headers cut in half included).
        n = 2 if r < 0.9 else min(len(data), self.rng.randint(3, 8))
        cuts = sorted(self.rng.sample(range(1, len(data)), n - 1)) if len(data) > n else []
        out, prev = [], 0
        for c in [*cuts, len(data)]:
            out.append(data[prev:c])
            prev = c
        return out

    def _arrive(self, link: Link, side: int, piece: bytes) -> None:
        pipe = link.pipes[side]
        if pipe.dropped:
            return
        now = self.loop.now
        if pipe.hold_until > now:
            self.loop.at(pipe.hold_until, self._arrive, link, side, piece)
            return
        dst = link.ends[1 - side]
        if dst.open:
            self._deliver_cb(dst, piece)

    def close_end(self, link: Link, side: int) -> None:
        """``ends[side]`` closed the connection (its node already knows): the peer sees the
        data in flight, then the end of the connection."""
        end = link.ends[side]
        end.open = False
        out, back = link.pipes[side], link.pipes[1 - side]
        out.writable = False
        back.dropped = True  # nobody reads on this side any more
        back.writable = False
        if not out.fin and not out.dropped:
            out.fin = True
            self.loop.at(max(out.last_at, out.hold_until) + self.latency(), self._fin, link, side)

    def _fin(self, link: Link, side: int) -> None:
        pipe = link.pipes[side]
        if pipe.hold_until > self.loop.now:
            self.loop.at(pipe.hold_until + self.latency(), self._fin, link, side)
            return
        self._tell_lost(link, 1 - side)

    def _tell_lost(self, link: Link, side: int) -> None:
        end = link.ends[side]
        if not end.open:
            return
        end.open = False
        link.pipes[side].writable = False
        link.pipes[1 - side].dropped = True
        self._lost_cb(end)

    def _forget_closed(self) -> None:
        self.links = [lk for lk in self.links if lk.ends[0].open or lk.ends[1].open]

    # ------------------------------------------------------------------ faults

    def cut(self, link: Link) -> None:
        """Reset the connection. Fragments in flight are lost, or (zombie) the abandoned
        connection still delivers its last bytes to one side, late."""
        zombie = self.rng.random() < self.zombie
        now = self.loop.now
        if zombie:
            # ends[z] gives up at once and reconnects; ends[1-z] still reads what was in
            # flight towards it, much later, then sees the reset.
            z = self.rng.randrange(2)
            self.stats.faults["zombie"] += 1
            late = link.pipes[z]
            late.writable = False
            late.hold_until = max(late.hold_until, now + self.rng.uniform(0.5, 6.0))
            back = link.pipes[1 - z]  # the path is slow both ways (a reset comes back late)
            back.hold_until = max(back.hold_until, late.hold_until)
            self.trace(now, "link %d %s->%s zombie until %+.3f", link.lid, link.ends[z].node,
                       link.ends[1 - z].node, late.hold_until - now)  # fmt: skip
            self._tell_lost(link, z)
            late.dropped = False  # what was in flight towards ends[1-z] still arrives
            late.fin = True
            self.loop.at(late.hold_until + 0.001, self._fin, link, z)
            return
        for pipe in link.pipes:
            pipe.dropped = True
            pipe.writable = False
        if self.rng.random() < 0.1:
            # A firewall / NAT forgot the connection: no reset, writes vanish; only the
            # sessions' own timers can find out.
            link.silent = True
            self.stats.faults["blackhole"] += 1
            self.trace(now, "link %d %s<->%s dropped silently", link.lid, *(e.node for e in link.ends))
            return
        self.stats.faults["cut"] += 1
        self.trace(now, "link %d %s<->%s cut", link.lid, link.ends[0].node, link.ends[1].node)
        for side in (0, 1):
            if self.rng.random() < 0.3:
                continue  # this side hears of it when it next writes (a reset comes back)
            self.loop.after(self.rng.uniform(0.0, 0.5), self._tell_lost, link, side)

    def stall(self, link: Link, seconds: float, both: bool) -> None:
        """Nothing moves on the link (one or both directions) for ``seconds``."""
        until = self.loop.now + seconds
        for side in (0, 1) if both else (self.rng.randrange(2),):
            pipe = link.pipes[side]
            pipe.hold_until = max(pipe.hold_until, until)

    def partition(self, a: str, b: str, seconds: float) -> None:
        """``a`` and ``b`` cannot reach each other for ``seconds``: links stall, connects fail."""
        until = self.loop.now + seconds
        key = (min(a, b), max(a, b))
        self.partitions[key] = max(self.partitions.get(key, 0.0), until)
        self.loop.at(until + 0.001, self._partition_over, a, b)
        for link in self.links:
            if link.between(a, b):
                for pipe in link.pipes:
                    pipe.hold_until = max(pipe.hold_until, until)

    def _partition_over(self, a: str, b: str) -> None:
        if not self.partitioned(a, b, self.loop.now):
            self.reachable_again(a)
            self.reachable_again(b)

    def node_crashed(self, node: str, notify_peers: bool) -> None:
        """Every end of ``node`` vanishes. Bytes it already sent still arrive; then the peer
        gets a reset — or, half-open (host gone without a word), nothing until it writes
        once the host is back (then a reset), or until its own session timers notice."""
        for link in self.links:
            for side in (0, 1):
                end = link.ends[side]
                if end.node != node or not end.open:
                    continue
                end.open = False
                out, back = link.pipes[side], link.pipes[1 - side]
                out.writable = False
                back.dropped = True
                back.writable = False
                if notify_peers and not out.fin:
                    out.fin = True
                    self.loop.at(max(out.last_at, out.hold_until) + self.latency(), self._fin, link, side)
        self._forget_closed()

    def open_links(self) -> list[Link]:
        """Links whose both ends are open."""
        self._forget_closed()
        return [lk for lk in self.links if lk.ends[0].open and lk.ends[1].open]
