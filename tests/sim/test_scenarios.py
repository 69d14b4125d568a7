"""Scripted scenarios on the simulator's world: the shortest reproductions of what random
seeds found, independent of the simulator's random draws (no random faults here)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from openmsmq.store.records import MessageRecord
from openmsmq.transfer.engine import ReleaseBatch, StoreWork

from .checker import Flow
from .model import FaultConfig
from .world import SimNode, World

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
        node.qm.send_many(flow.format_name, [MessageRecord(body=b) for b in bodies], tx)
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


def test_order_ack_for_a_finished_sequence_never_releases_another_queue(world: World) -> None:
    """Regression (found by seeds 182 and 1541, fixed in the store by a4a44dd): A's outgoing
    queues for B (F1) and C (F2), created in the same second, used to get the same
    TxSequenceID, kept apart only by an in-memory quarantine. A and B crash; B cannot reach
    C; after the restart F2 sends, and B, storing slowly, answers F1's next message with an
    OrderAck for F1's finished sequence: it must not release F2's messages, which C never
    received (the checker's release-after-durable)."""
    f1, f2, _f3 = world.flows
    _commit(world, f1, 3)
    _commit(world, f2, 3)
    _run(world, 3.0)
    assert len(f1.released) == 3
    a = world.nodes["A"]
    assert a.qm is not None
    ids = {a.qm.outgoing_sequence(f.format_name).tx_sequence_id for f in (f1, f2)}
    assert len(ids) == 2  # the store no longer gives both queues one TxSequenceID
    world.cfg = FaultConfig(max_crashes=10)  # allow the scripted crashes
    world.net.partition("B", "C", 60.0)
    for name in ("A", "B"):
        world._crash(name, "crash")
    _run(world, 5.0)  # both restarted (restart delays are at most 3 s)
    assert all(n.qm is not None for n in world.nodes.values())
    world._fsync = lambda: 1.0  # type: ignore[method-assign]  # B stores slowly
    _commit(world, f1, 1)
    _run(world, 200.0)  # the partition heals after 60 s; resends repair the rest
    assert f2.arrived == 3 and len(f2.released) == 3
    assert f1.arrived == 4 and len(f1.released) == 4


def test_order_ack_beyond_the_reloaded_window_after_a_sender_restart(tmp_path: Path) -> None:
    """C sends F3 to A with at most 10 messages in flight. A stores all 25 (C loads the
    next ones as each OrderAck releases the previous ones in memory), but C's deletions are
    slow and C crashes first. After the restart C reloads 1..10 and resends; A rejects them
    and acknowledges 25, beyond what this incarnation of C has sent: the OrderAck must still
    release them (and, once loaded, the rest), or the outgoing queue never drains."""
    w = World(0, FaultConfig(cut_rate=0, stall_rate=0, partition_rate=0, crash_rate=0, dup_conn_rate=0,
                             crash_in_store=0, slow_fsync=0, max_in_flight=10, batch_size=4),
              tmp_path)  # fmt: skip
    for node in w.nodes.values():
        w._start(node, first=True)
    start_store = w._store_start

    def slow_release_at_c(node: SimNode, work: StoreWork) -> None:
        if node.name == "C" and isinstance(work, ReleaseBatch):
            w.loop.after(10.0, w._store_durable, node.name, node.epoch, work)
        else:
            start_store(node, work)

    w._store_start = slow_release_at_c  # type: ignore[method-assign]
    try:
        f3 = w.flows[2]
        _commit(w, f3, 25)
        _run(w, 5.0)
        assert f3.arrived == 25 and not f3.released
        w.cfg = FaultConfig(max_crashes=10)
        w._crash("C", "crash")
        w._store_start = start_store  # type: ignore[method-assign]
        _run(w, 300.0)
        assert f3.arrived == 25 and len(f3.released) == 25, w.oracle.summary()
    finally:
        for node in w.nodes.values():
            if node.qm is not None:
                node.qm.close()
