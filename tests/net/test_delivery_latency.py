"""What must not bound delivery: the poll interval for a commit made in this process, and
the accept batch's hold for a sparse stream (docs/transfer.md, "How a message travels").

Each test sets the bound it checks to an hour, so that only the mechanism under test can
deliver the message within the bounded wait."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from openmsmq.net import MQQBNode, NetConfig
from openmsmq.observability.metrics import Metrics
from openmsmq.observability.sink import STAGES
from openmsmq.qm.manager import QueueManager
from openmsmq.store.records import MessageRecord
from openmsmq.transfer.engine import AcceptBatch, StoreWork, Transfer, TransferConfig

from .test_mqqb import DEST_B, A, B, Q, _free_port, _wait_for

HOUR = 3600.0


async def _nodes(
    tmp_path: Path,
    *,
    poll_interval: float,
    accept_batch_wait: float,
    accept_batch_min: int = 512,
    metrics: tuple[Metrics, Metrics] | None = None,
) -> tuple[QueueManager, QueueManager, MQQBNode, MQQBNode]:
    port = _free_port()
    ma, mb = metrics if metrics is not None else (None, None)
    qa = QueueManager(tmp_path / "a", integrity_check=False, metrics=ma)
    qb = QueueManager(tmp_path / "b", integrity_check=False, metrics=mb)
    qb.create_queue(Q, transactional=True)
    loop = asyncio.get_running_loop()

    def net(host: str) -> NetConfig:
        return NetConfig(
            host=host, port=port, backoff_min=0.05, backoff_max=0.2, poll_interval=poll_interval,
            accept_batch_min=accept_batch_min, accept_batch_wait=accept_batch_wait,
        )  # fmt: skip

    node_a = MQQBNode(Transfer(qa, TransferConfig(local_addresses=(A,)), loop.time()), net(A))
    node_b = MQQBNode(Transfer(qb, TransferConfig(local_addresses=(B,)), loop.time()), net(B))
    await node_b.start()
    await node_a.start()
    return qa, qb, node_a, node_b


def _send(qm: QueueManager, bodies: list[bytes]) -> None:
    tx = qm.begin()
    qm.send_many(DEST_B, [MessageRecord(body=b) for b in bodies], tx)
    tx.commit()


def test_a_commit_in_this_process_is_sent_without_waiting_for_the_poll_interval(tmp_path: Path) -> None:
    async def main() -> None:
        qa, qb, node_a, node_b = await _nodes(tmp_path, poll_interval=HOUR, accept_batch_wait=0.005)
        try:
            # The node's first poll (at start) found nothing; the next is an hour away.
            await asyncio.sleep(0.05)
            for k in range(3):  # each commit is noticed, not only the first
                await asyncio.to_thread(_send, qa, [f"m{k}".encode()])
                await _wait_for(lambda k=k: qb.get_queue(Q).msg_count == k + 1)  # type: ignore[misc]
        finally:
            await node_a.stop()
            await node_b.stop()
        assert [m.body for m in qb.peek_range(Q, 0, 10)] == [b"m0", b"m1", b"m2"]
        qa.close()
        qb.close()

    asyncio.run(main())


def test_a_sparse_stream_is_stored_without_waiting_for_the_accept_batch(tmp_path: Path) -> None:
    async def main() -> None:
        # Outgoing queues are polled often; accepted messages could be held for an hour.
        qa, qb, node_a, node_b = await _nodes(tmp_path, poll_interval=0.02, accept_batch_wait=HOUR)
        try:
            for k in range(3):
                _send(qa, [f"m{k}".encode()])
                await _wait_for(lambda k=k: qb.get_queue(Q).msg_count == k + 1)  # type: ignore[misc]
        finally:
            await node_a.stop()
            await node_b.stop()
        assert [m.body for m in qb.peek_range(Q, 0, 10)] == [b"m0", b"m1", b"m2"]
        qa.close()
        qb.close()

    asyncio.run(main())


def _gate(node: MQQBNode) -> threading.Event:
    """Hold ``node``'s next accept batches in the store until the returned event is set."""
    gate = threading.Event()
    run = node.transfer.run_store_work

    def gated(work: StoreWork) -> list[BaseException | None]:
        if isinstance(work, AcceptBatch):
            assert gate.wait(30)
        return run(work)

    node.transfer.run_store_work = gated  # type: ignore[method-assign]
    return gate


async def _in_flight(node: MQQBNode) -> None:
    """Until an accept batch is in flight and nothing waits for the next."""
    await _wait_for(lambda: node.transfer.store.accepted_bytes == 0 and not node.transfer.idle)


def test_a_dense_stream_still_gathers_larger_batches(tmp_path: Path) -> None:
    """With accept_batch_min 2, a batch of one (half of it) during whose commit another
    message arrived leaves the stream dense: that message is held for a larger batch (an
    hour at most here) and goes with the one after it."""

    async def main() -> None:
        qa, qb, node_a, node_b = await _nodes(
            tmp_path, poll_interval=0.02, accept_batch_wait=HOUR, accept_batch_min=2
        )
        gate = threading.Event()
        try:
            _send(qa, [b"m0"])  # the session opens
            await _wait_for(lambda: qb.get_queue(Q).msg_count == 1)
            gate = _gate(node_b)
            _send(qa, [b"m1"])
            await _in_flight(node_b)
            _send(qa, [b"m2"])  # accepted while m1 is being stored
            await _wait_for(lambda: len(node_b.transfer.store.waiting_accepted()) == 1)
            gate.set()
            await _wait_for(lambda: qb.get_queue(Q).msg_count == 2)
            await _wait_for(lambda: node_b.transfer.accepts_waiting)  # m2 accepted, held
            assert qb.get_queue(Q).msg_count == 2
            _send(qa, [b"m3"])
            await _wait_for(lambda: qb.get_queue(Q).msg_count == 4)
        finally:
            gate.set()
            await node_a.stop()
            await node_b.stop()
        assert [m.body for m in qb.peek_range(Q, 0, 10)] == [b"m0", b"m1", b"m2", b"m3"]
        qa.close()
        qb.close()

    asyncio.run(main())


def test_a_lone_message_after_a_backlog_is_stored_without_waiting_for_the_accept_batch(
    tmp_path: Path,
) -> None:
    """A backlog (messages that piled up while the store was slow) is stored as one large
    batch during whose commit nothing more arrives; a message arriving alone after it is
    stored at once, not held for companions that are not coming (the hold is an hour
    here)."""

    async def main() -> None:
        qa, qb, node_a, node_b = await _nodes(
            tmp_path, poll_interval=0.02, accept_batch_wait=HOUR, accept_batch_min=2
        )
        gate = threading.Event()
        try:
            _send(qa, [b"m0"])  # the session opens
            await _wait_for(lambda: qb.get_queue(Q).msg_count == 1)
            gate = _gate(node_b)
            _send(qa, [b"m1"])
            await _in_flight(node_b)
            _send(qa, [b"m2", b"m3"])  # the backlog: accepted while m1 is being stored
            await _wait_for(lambda: len(node_b.transfer.store.waiting_accepted()) == 2)
            gate.set()
            await _wait_for(lambda: qb.get_queue(Q).msg_count == 4)  # the backlog's batch
            await _wait_for(lambda: node_b.transfer.idle)
            _send(qa, [b"m4"])  # alone after the backlog
            await _wait_for(lambda: qb.get_queue(Q).msg_count == 5)
        finally:
            gate.set()
            await node_a.stop()
            await node_b.stop()
        assert [m.body for m in qb.peek_range(Q, 0, 10)] == [b"m0", b"m1", b"m2", b"m3", b"m4"]
        qa.close()
        qb.close()

    asyncio.run(main())


def _stage_counts(m: Metrics) -> dict[str, float]:
    return {
        stage: m.registry.get_sample_value("openmsmq_stage_duration_seconds_count", {"stage": stage}) or 0.0
        for stage in STAGES
    }


def test_every_stage_of_the_way_to_a_waiting_reader_is_observed(tmp_path: Path) -> None:
    """The stage histograms (observability.sink.STAGES): A's store commit and its commit ->
    write; B's read -> batch, batch -> stored, and the wake-up of a reader waiting on the
    destination queue; each observed once per batch, so a few each for three messages."""

    async def main() -> None:
        ma, mb = Metrics(), Metrics()
        qa, qb, node_a, node_b = await _nodes(
            tmp_path, poll_interval=HOUR, accept_batch_wait=0.005, metrics=(ma, mb)
        )
        try:
            await asyncio.sleep(0.05)
            for k in range(3):
                # A reader waits on B's queue before the message is sent.
                reader = asyncio.create_task(asyncio.to_thread(qb.receive, Q, timeout=30.0))
                await _wait_for(lambda: qb.queues.by_name[Q.lower()].readers > 0)
                await asyncio.to_thread(_send, qa, [f"m{k}".encode()])
                assert (await reader).body == f"m{k}".encode()
        finally:
            await node_a.stop()
            await node_b.stop()
        a, b = _stage_counts(ma), _stage_counts(mb)
        assert a["outgoing_commit_to_write"] >= 3
        assert a["store_queue_wait"] >= 3
        assert b["accept_read_to_batch"] == b["accept_batch_to_stored"] >= 3
        assert b["stored_to_reader"] == 3
        assert b["store_queue_wait"] >= 3
        # Nothing arrives at A and nobody reads there.
        assert a["accept_read_to_batch"] == a["stored_to_reader"] == 0
        qa.close()
        qb.close()

    asyncio.run(main())


def test_a_commit_wake_up_writes_its_packets_without_a_second_pump(tmp_path: Path) -> None:
    """The wake-up after a commit into an outgoing queue loads and writes the messages in
    the same callback: with the node's scheduled pumps disabled (kick does nothing), the
    message still leaves A."""

    async def main() -> None:
        qa, qb, node_a, node_b = await _nodes(tmp_path, poll_interval=HOUR, accept_batch_wait=0.005)
        kicks = 0
        try:
            await asyncio.sleep(0.05)
            await asyncio.to_thread(_send, qa, [b"m0"])  # the session opens
            await _wait_for(lambda: qb.get_queue(Q).msg_count == 1)

            def kick() -> None:
                nonlocal kicks
                kicks += 1

            node_a.kick = kick  # type: ignore[method-assign]
            await asyncio.to_thread(_send, qa, [b"m1"])
            await _wait_for(lambda: qb.get_queue(Q).msg_count == 2)
        finally:
            await node_a.stop()
            await node_b.stop()
        assert [m.body for m in qb.peek_range(Q, 0, 10)] == [b"m0", b"m1"]
        qa.close()
        qb.close()

    asyncio.run(main())


def test_accepted_messages_waiting_for_a_batch_go_when_the_one_in_flight_is_stored(tmp_path: Path) -> None:
    """Messages accepted while a batch is being stored form the next batch, handed to the
    store by the completion of the previous one itself: with the node's scheduled pumps
    disabled once m2 waits, m2 is still stored."""

    async def main() -> None:
        qa, qb, node_a, node_b = await _nodes(tmp_path, poll_interval=0.02, accept_batch_wait=HOUR)
        gate = threading.Event()
        try:
            _send(qa, [b"m0"])  # the session opens
            await _wait_for(lambda: qb.get_queue(Q).msg_count == 1)
            gate = _gate(node_b)
            _send(qa, [b"m1"])
            await _in_flight(node_b)
            _send(qa, [b"m2"])  # accepted while m1's batch waits at the gate
            await _wait_for(lambda: node_b.transfer.store.accepted_bytes > 0)
            node_b.kick = lambda: None  # type: ignore[method-assign]
            gate.set()
            await _wait_for(lambda: qb.get_queue(Q).msg_count == 3)
        finally:
            gate.set()
            await node_a.stop()
            await node_b.stop()
        assert [m.body for m in qb.peek_range(Q, 0, 10)] == [b"m0", b"m1", b"m2"]
        qa.close()
        qb.close()

    asyncio.run(main())
