"""The simulated network itself: in-order bytes under stalls, resets, silent drops."""

from __future__ import annotations

import random

from .model import START, EventLoop, SimStats, Trace
from .network import End, Link, Network


class Ends:
    """Records what the network hands to the two ends."""

    def __init__(self) -> None:
        self.got: dict[str, bytearray] = {"a": bytearray(), "b": bytearray()}
        self.lost: list[str] = []
        self.up = {"a": True, "b": True}

    def deliver(self, end: End, data: bytes) -> None:
        self.got[end.node] += data

    def on_lost(self, end: End) -> None:
        self.lost.append(end.node)


def _net(seed: int, zombie: float = 0.0) -> tuple[EventLoop, Network, Ends, Link]:
    loop, ends = EventLoop(START), Ends()
    net = Network(loop, random.Random(seed), SimStats(), Trace(), ends.deliver, ends.on_lost, zombie,
                  lambda n: ends.up[n])  # fmt: skip
    link = net.open_link(End("a", 0, 1), End("b", 0, 1))
    return loop, net, ends, link


def test_bytes_arrive_in_order_through_fragments_stalls_and_partitions() -> None:
    for seed in range(20):
        loop, net, ends, link = _net(seed)
        rng = random.Random(seed)
        sent = bytearray()
        for i in range(300):
            data = bytes([i % 256]) * rng.randint(1, 40)
            sent += data
            net.send(link, 0, data)
            if i % 50 == 10:
                net.stall(link, rng.uniform(0.1, 3.0), both=True)
            if i % 97 == 5:
                net.partition("a", "b", 1.0)
            if i % 37 == 0:  # let some of it arrive before writing more
                loop.run(lambda: False, 10_000)
        loop.run(lambda: False, 100_000)
        assert ends.got["b"] == sent and not ends.lost


def test_a_side_not_told_of_a_cut_learns_by_a_reset_when_it_writes() -> None:
    for seed in range(40):
        loop, net, ends, link = _net(seed)
        net.cut(link)
        loop.run(lambda: False, 1000)
        told = set(ends.lost)
        for side, name in ((0, "a"), (1, "b")):
            if name not in told:
                net.send(link, side, b"x")
        loop.run(lambda: False, 1000)
        if link.silent:
            assert ends.lost == [] and net.stats.faults["blackhole"] == 1
        else:
            assert sorted(ends.lost) == ["a", "b"]


def test_half_open_after_a_crash_resets_only_once_the_host_is_back() -> None:
    loop, net, ends, link = _net(1)
    ends.up["b"] = False
    net.node_crashed("b", notify_peers=False)
    net.send(link, 0, b"into the void")
    loop.run(lambda: False, 1000)
    assert ends.lost == [] and link.pipes[0].rst_waiting
    ends.up["b"] = True
    net.reachable_again("b")
    loop.run(lambda: False, 1000)
    assert ends.lost == ["a"] and ends.got["b"] == b""


def test_a_zombie_connection_delivers_late_then_resets() -> None:
    for seed in range(10):
        loop, net, ends, link = _net(seed, zombie=1.0)
        net.send(link, 0, b"late")
        net.send(link, 1, b"late")
        net.cut(link)
        loop.run(lambda: False, 1000)
        # One side was told at once; the other read what was in flight towards it, then the end.
        assert sorted(ends.lost) == ["a", "b"]
        assert sorted(ends.got.values(), key=len)[-1] == b"late"
