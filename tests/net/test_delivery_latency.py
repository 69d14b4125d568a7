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


class _Nodes:
    """Queue managers A and B on loopback, each behind an MQQB node, A sending to B's
    transactional queue Q. ``async with`` starts the nodes and stops them on exit,
    releasing first what :meth:`hold_accepts` holds; :meth:`close` closes the QMs."""

    def __init__(
        self,
        tmp_path: Path,
        *,
        poll_interval: float,
        accept_batch_wait: float,
        accept_batch_min: int = 512,
        metrics: tuple[Metrics, Metrics] | None = None,
    ) -> None:
        self.port = _free_port()
        self.poll_interval = poll_interval
        self.accept_batch_wait = accept_batch_wait
        self.accept_batch_min = accept_batch_min
        ma, mb = metrics if metrics is not None else (None, None)
        self.qa = QueueManager(tmp_path / "a", integrity_check=False, metrics=ma)
        self.qb = QueueManager(tmp_path / "b", integrity_check=False, metrics=mb)
        self.qb.create_queue(Q, transactional=True)
        self.gate = threading.Event()

    def _node(self, qm: QueueManager, host: str) -> MQQBNode:
        net = NetConfig(
            host=host, port=self.port, backoff_min=0.05, backoff_max=0.2, poll_interval=self.poll_interval,
            accept_batch_min=self.accept_batch_min, accept_batch_wait=self.accept_batch_wait,
        )  # fmt: skip
        return MQQBNode(
            Transfer(qm, TransferConfig(local_addresses=(host,)), asyncio.get_running_loop().time()), net
        )

    async def __aenter__(self) -> _Nodes:
        self.node_a = self._node(self.qa, A)
        self.node_b = self._node(self.qb, B)
        await self.node_b.start()
        await self.node_a.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.gate.set()
        await self.node_a.stop()
        await self.node_b.stop()

    def send(self, bodies: list[bytes]) -> None:
        """Commit ``bodies`` into A's outgoing queue to B."""
        tx = self.qa.begin()
        self.qa.send_many(DEST_B, [MessageRecord(body=b) for b in bodies], tx)
        tx.commit()

    async def stored(self, count: int) -> None:
        """Until B's queue holds ``count`` messages."""
        await _wait_for(lambda: self.qb.get_queue(Q).msg_count == count)

    def hold_accepts(self) -> None:
        """Hold B's next accept batches in the store until the nodes stop or the gate is set."""
        run = self.node_b.transfer.run_store_work

        def gated(work: StoreWork) -> list[BaseException | None]:
            if isinstance(work, AcceptBatch):
                assert self.gate.wait(30)
            return run(work)

        self.node_b.transfer.run_store_work = gated  # type: ignore[method-assign]

    async def m1_in_flight(self) -> None:
        """m0 opens the session; then B's store is held and m1's accept batch is in flight
        with nothing waiting for the next."""
        self.send([b"m0"])
        await self.stored(1)
        self.hold_accepts()
        self.send([b"m1"])
        transfer = self.node_b.transfer
        await _wait_for(lambda: transfer.store.accepted_bytes == 0 and not transfer.idle)

    def delivered(self) -> list[bytes]:
        """The bodies in B's queue, in order."""
        return [m.body for m in self.qb.peek_range(Q, 0, 10)]

    def close(self) -> None:
        self.qa.close()
        self.qb.close()


def test_a_commit_in_this_process_is_sent_without_waiting_for_the_poll_interval(tmp_path: Path) -> None:
    async def main() -> None:
        async with _Nodes(tmp_path, poll_interval=HOUR, accept_batch_wait=0.005) as n:
            # The node's first poll (at start) found nothing; the next is an hour away.
            await asyncio.sleep(0.05)
            for k in range(3):  # each commit is noticed, not only the first
                await asyncio.to_thread(n.send, [f"m{k}".encode()])
                await n.stored(k + 1)
        assert n.delivered() == [b"m0", b"m1", b"m2"]
        n.close()

    asyncio.run(main())


def test_a_sparse_stream_is_stored_without_waiting_for_the_accept_batch(tmp_path: Path) -> None:
    async def main() -> None:
        # Outgoing queues are polled often; accepted messages could be held for an hour.
        async with _Nodes(tmp_path, poll_interval=0.02, accept_batch_wait=HOUR) as n:
            for k in range(3):
                n.send([f"m{k}".encode()])
                await n.stored(k + 1)
        assert n.delivered() == [b"m0", b"m1", b"m2"]
        n.close()

    asyncio.run(main())


def test_a_dense_stream_still_gathers_larger_batches(tmp_path: Path) -> None:
    """With accept_batch_min 2, a batch of one (half of it) during whose commit another
    message arrived leaves the stream dense: that message is held for a larger batch (an
    hour at most here) and goes with the one after it."""

    async def main() -> None:
        async with _Nodes(tmp_path, poll_interval=0.02, accept_batch_wait=HOUR, accept_batch_min=2) as n:
            await n.m1_in_flight()
            n.send([b"m2"])  # accepted while m1 is being stored
            await _wait_for(lambda: len(n.node_b.transfer.store.waiting_accepted()) == 1)
            n.gate.set()
            await n.stored(2)
            await _wait_for(lambda: n.node_b.transfer.accepts_waiting)  # m2 accepted, held
            assert n.qb.get_queue(Q).msg_count == 2
            n.send([b"m3"])
            await n.stored(4)
        assert n.delivered() == [b"m0", b"m1", b"m2", b"m3"]
        n.close()

    asyncio.run(main())


def test_a_lone_message_after_a_backlog_is_stored_without_waiting_for_the_accept_batch(
    tmp_path: Path,
) -> None:
    """A backlog (messages that piled up while the store was slow) is stored as one large
    batch during whose commit nothing more arrives; a message arriving alone after it is
    stored at once, not held for companions that are not coming (the hold is an hour
    here)."""

    async def main() -> None:
        async with _Nodes(tmp_path, poll_interval=0.02, accept_batch_wait=HOUR, accept_batch_min=2) as n:
            await n.m1_in_flight()
            n.send([b"m2", b"m3"])  # the backlog: accepted while m1 is being stored
            await _wait_for(lambda: len(n.node_b.transfer.store.waiting_accepted()) == 2)
            n.gate.set()
            await n.stored(4)  # the backlog's batch
            await _wait_for(lambda: n.node_b.transfer.idle)
            n.send([b"m4"])  # alone after the backlog
            await n.stored(5)
        assert n.delivered() == [b"m0", b"m1", b"m2", b"m3", b"m4"]
        n.close()

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
        async with _Nodes(tmp_path, poll_interval=HOUR, accept_batch_wait=0.005, metrics=(ma, mb)) as n:
            await asyncio.sleep(0.05)
            for k in range(3):
                # A reader waits on B's queue before the message is sent.
                reader = asyncio.create_task(asyncio.to_thread(n.qb.receive, Q, timeout=30.0))
                await _wait_for(lambda: n.qb.queues.by_name[Q.lower()].readers > 0)
                await asyncio.to_thread(n.send, [f"m{k}".encode()])
                assert (await reader).body == f"m{k}".encode()
        a, b = _stage_counts(ma), _stage_counts(mb)
        assert a["outgoing_commit_to_write"] >= 3
        assert a["store_queue_wait"] >= 3
        assert b["accept_read_to_batch"] == b["accept_batch_to_stored"] >= 3
        assert b["stored_to_reader"] == 3
        assert b["store_queue_wait"] >= 3
        # Nothing arrives at A and nobody reads there.
        assert a["accept_read_to_batch"] == a["stored_to_reader"] == 0
        n.close()

    asyncio.run(main())


def test_a_commit_wake_up_writes_its_packets_without_a_second_pump(tmp_path: Path) -> None:
    """The wake-up after a commit into an outgoing queue loads and writes the messages in
    the same callback: with the node's scheduled pumps disabled (kick does nothing), the
    message still leaves A."""

    async def main() -> None:
        kicks = 0
        async with _Nodes(tmp_path, poll_interval=HOUR, accept_batch_wait=0.005) as n:
            await asyncio.sleep(0.05)
            await asyncio.to_thread(n.send, [b"m0"])  # the session opens
            await n.stored(1)

            def kick() -> None:
                nonlocal kicks
                kicks += 1

            n.node_a.kick = kick  # type: ignore[method-assign]
            await asyncio.to_thread(n.send, [b"m1"])
            await n.stored(2)
        assert n.delivered() == [b"m0", b"m1"]
        n.close()

    asyncio.run(main())


def test_accepted_messages_waiting_for_a_batch_go_when_the_one_in_flight_is_stored(tmp_path: Path) -> None:
    """Messages accepted while a batch is being stored form the next batch, handed to the
    store by the completion of the previous one itself: with the node's scheduled pumps
    disabled once m2 waits, m2 is still stored."""

    async def main() -> None:
        async with _Nodes(tmp_path, poll_interval=0.02, accept_batch_wait=HOUR) as n:
            await n.m1_in_flight()
            n.send([b"m2"])  # accepted while m1's batch waits at the gate
            await _wait_for(lambda: n.node_b.transfer.store.accepted_bytes > 0)
            n.node_b.kick = lambda: None  # type: ignore[method-assign]
            n.gate.set()
            await n.stored(3)
        assert n.delivered() == [b"m0", b"m1", b"m2"]
        n.close()

    asyncio.run(main())
