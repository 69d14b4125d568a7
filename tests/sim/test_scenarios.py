"""Scripted scenarios on the simulator's world: the shortest reproductions of what random
seeds found, independent of the simulator's random draws (no random faults here)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from openmsmq.store.records import Message

from .checker import Flow
from .model import FaultConfig, SimFailure
from .world import World

#: No random faults, no slow fsync; the script injects what it needs.
QUIET = FaultConfig(cut_rate=0, stall_rate=0, partition_rate=0, crash_rate=0, dup_conn_rate=0,
                    crash_in_store=0, slow_fsync=0)  # fmt: skip


@pytest.fixture
def world(tmp_path: Path) -> Iterator[World]:
    w = World(0, QUIET, tmp_path)
    for node in w.nodes.values():
        w._start(node, first=True)
    yield w
    for node in w.nodes.values():
        if node.qm is not None:
            node.qm.close()


def _commit(w: World, flow: Flow, n: int) -> None:
    node = w.nodes[flow.src]
    assert node.qm is not None and node.transfer is not None
    bodies = [flow.new_body(0) for _ in range(n)]
    with node.qm.begin() as tx:
        node.qm.send_many(flow.format_name, [Message(body=b) for b in bodies], tx)
    w.oracle.committed(flow, bodies)
    node.transfer.poll(w.loop.now)
    w._pump(node)


def _run(w: World, seconds: float) -> None:
    end = w.loop.now + seconds
    w.loop.at(end, lambda: None)
    w.loop.run(lambda: w.loop.now >= end, 200_000)


def test_quiet_transfer_through_the_hop(world: World) -> None:
    f1, f2, f3 = world.flows
    for flow in (f1, f2, f3):
        _commit(world, flow, 5)
    _run(world, 40.0)  # F2 waits out the 30 s TxSequenceID quarantine (shared with F1)
    for flow in (f1, f2, f3):
        assert flow.arrived == 5 and len(flow.released) == 5, flow.name


@pytest.mark.xfail(strict=True, raises=SimFailure, reason="TxSequenceID reuse (docs/simulation.md, Findings)")
def test_order_ack_for_a_finished_sequence_never_releases_another_queue(world: World) -> None:
    """A's outgoing queues for B (F1) and C (F2) are created in the same second and get the
    same TxSequenceID. F1 finishes it; F2 waits (quarantine, in memory). A and B crash; B
    cannot reach C. After the restart F2 sends that TxSequenceID at once; B, storing slowly, answers
    F1's next message with an OrderAck for its durable position, F1's finished sequence:
    it must not release F2's messages, which C never received."""
    f1, f2, _f3 = world.flows
    _commit(world, f1, 3)
    _commit(world, f2, 3)
    _run(world, 3.0)
    assert len(f1.released) == 3 and not f2.released  # F2 waits for the TxSequenceID
    world.cfg = FaultConfig(max_crashes=10)  # allow the scripted crashes
    world.net.partition("B", "C", 60.0)
    for name in ("A", "B"):
        world._crash(name, "crash")
    _run(world, 5.0)  # both restarted (restart delays are at most 3 s)
    assert all(n.qm is not None for n in world.nodes.values())
    world._fsync = lambda: 1.0  # type: ignore[method-assign]  # B stores slowly
    _commit(world, f1, 1)
    try:
        _run(world, 200.0)  # the partition heals after 60 s; resends repair the rest
    except SimFailure as failure:
        assert failure.check == "release-after-durable", failure  # what the bug does today
        raise
    assert f2.arrived == 3 and len(f2.released) == 3
    assert f1.arrived == 4 and len(f1.released) == 4
