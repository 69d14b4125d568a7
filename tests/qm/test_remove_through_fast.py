"""remove_through's set-based fast path (store.ranges.remove_spans) against the
per-message path: the same data gives the same result (return value, counters, what is
left, events, metrics, idempotence), and receivers racing it never get a message it
removes."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from openmsmq.errors import IOTimeoutError
from openmsmq.qm import MessageRecord, QueueManager, range_reader
from openmsmq.store.ops import RemovedMessage
from tests.clock import Clock

TX = "private$\\tx"
PLAIN = "private$\\plain"
OTHER = "private$\\other"
JOURNAL = "private$\\jr"


class Counts:
    """A metrics sink that only sums count_committed."""

    def __init__(self) -> None:
        self.received = 0

    def count_committed(self, sent: int, received: int) -> None:
        self.received += received

    def __getattr__(self, name: str) -> Callable[..., None]:
        return lambda *a, **k: None


def make(path: Path, threaded: bool = True) -> tuple[QueueManager, Counts]:
    counts = Counts()
    qm = QueueManager(path, threaded=threaded, clock=Clock(), computer_name="host1", metrics=counts)  # type: ignore[arg-type]
    qm.create_queue(TX, transactional=True)
    qm.create_queue(PLAIN)
    qm.create_queue(OTHER, transactional=True)
    qm.create_queue(JOURNAL, transactional=True, journal=True)
    return qm, counts


def populate(qm: QueueManager, *, ack_at: int | None = None) -> None:
    """Deterministic data: transactional batches interleaved with another queue (so a
    span's LookupIdentifiers include other queues' messages), non-transactional
    messages of several priorities (eight bands), a journaling queue."""
    for batch in range(3):
        with qm.begin() as tx:
            qm.send_many(
                TX, [MessageRecord(body=b"t%d-%d" % (batch, i), label="x" * i) for i in range(7)], tx
            )
        with qm.begin() as tx:
            qm.send_many(OTHER, [MessageRecord(body=b"o%d-%d" % (batch, i)) for i in range(3)], tx)
        for i in range(5):
            n = batch * 5 + i
            qm.send(
                PLAIN,
                MessageRecord(body=b"p%d" % n * (n + 1), priority=n % 8, ack_flags=1 if n == ack_at else 0),
            )
        with qm.begin() as tx:
            qm.send_many(JOURNAL, [MessageRecord(body=b"j%d-%d" % (batch, i)) for i in range(2)], tx)


def snapshot(qm: QueueManager) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in (TX, PLAIN, OTHER, JOURNAL, JOURNAL + ";journal"):
        rec = qm.get_queue(name)
        msgs = qm.peek_range(name, 0, 1_000_000)
        assert rec.msg_count == len(msgs)
        assert rec.total_bytes == sum(m.size for m in msgs)
        out[name] = (rec.msg_count, rec.total_bytes, [(m.lookup_id, m.body) for m in msgs])
    return out


def positions(qm: QueueManager) -> list[dict[str, int]]:
    """Several removal positions: mid-range, everything, beyond the end, before the start."""
    tx = qm.lookup_range(TX)
    plain = qm.lookup_range(PLAIN)
    jr = qm.lookup_range(JOURNAL)
    assert tx is not None and plain is not None and jr is not None
    return [
        {TX: 0},
        {TX: tx.first + 9, PLAIN: plain.first + 6},
        {TX: tx.first + 9},  # again: idempotent
        {TX: tx.last, PLAIN: plain.last, JOURNAL: jr.first + 3},
        {TX: 10**12, PLAIN: 10**12, JOURNAL: 10**12, OTHER: 1},
    ]


@pytest.fixture
def spy(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int | None]]:
    """Results of every remove_spans operation run (None: fell back per message)."""
    got: list[int | None] = []
    real = range_reader.ranges.remove_spans

    def wrapped(*args: Any, **kwargs: Any) -> Callable[[Any], int | None]:
        op = real(*args, **kwargs)

        def run(ctx: Any) -> int | None:
            result = op(ctx)
            got.append(result)
            return result

        return run

    monkeypatch.setattr(range_reader.ranges, "remove_spans", wrapped)
    yield got


def run_both(tmp_path: Path, threaded: bool, ack_at: int | None = None) -> tuple[list[Any], list[Any]]:
    """The same operations through the fast path and forced per message; their results."""
    results = []
    for fast in (True, False):
        qm, counts = make(tmp_path / f"qm-{fast}", threaded)
        events: list[RemovedMessage] = []
        qm.add_removal_listener(events.extend)
        try:
            populate(qm, ack_at=ack_at)
            steps = []
            for pos in positions(qm):
                if fast:
                    n = qm.remove_through(pos)
                else:
                    targets = sorted(
                        ((qm.queues.resolve(q), t) for q, t in pos.items()),
                        key=lambda x: x[0].record.queue_id,
                    )
                    n = qm.ranges._remove_through(targets, fast=False)
                steps.append((n, counts.received, snapshot(qm)))
            steps.append([(e.queue_id, e.message.body, e.reason) for e in events])
            assert all(not qs.locked and not qs.purge_pending for qs in qm.queues.by_id.values())
            results.append(steps)
        finally:
            qm.close()
    return results[0], results[1]


@pytest.mark.parametrize("threaded", [True, False], ids=["threaded", "sync"])
def test_fast_path_same_result_as_per_message(tmp_path: Path, threaded: bool, spy: list[int | None]) -> None:
    fast, slow = run_both(tmp_path, threaded)
    assert fast == slow
    assert [n for n, *_ in fast[:-1]] == [0, 12, 0, 26, 4]
    assert spy and None not in spy  # the fast path ran (and never fell back)


def test_ack_wanted_in_a_span_falls_back_with_the_same_result(tmp_path: Path, spy: list[int | None]) -> None:
    fast, slow = run_both(tmp_path, True, ack_at=3)
    assert fast == slow
    assert fast[-1] and fast[-1][0][2] == 0x4000  # the AckReceive event
    assert None in spy


def test_locked_message_in_span_becomes_purge_pending(tmp_path: Path, spy: list[int | None]) -> None:
    qm, counts = make(tmp_path / "qm")
    try:
        populate(qm)
        r = qm.lookup_range(TX)
        assert r is not None
        tx = qm.begin()
        held = qm.receive(TX, tx=tx)  # the first message, locked by another transaction
        assert qm.remove_through({TX: r.first + 4}) == 4
        assert not spy  # per message: the span held a locked message
        assert counts.received == 4
        tx.abort()  # PurgePending: deleted when its lock ends
        left = qm.peek_range(TX, 0, 100)
        assert held.lookup_id not in [m.lookup_id for m in left]
        assert left[0].lookup_id == r.first + 5
        assert qm.get_queue(TX).msg_count == r.count - 5
    finally:
        qm.close()


def test_receive_during_the_fast_removal_gets_a_message_after_the_span(
    tmp_path: Path, spy: list[int | None]
) -> None:
    """The span is locked before the DELETE: a receive that runs while the removal's
    write is in flight (here: inside it) skips the whole span."""
    qm, _ = make(tmp_path / "qm")
    try:
        populate(qm)
        ids = [m.lookup_id for m in qm.peek_range(TX, 0, 100)]
        real_write = qm.store.write
        during: list[MessageRecord] = []

        def write(work: Any, *args: Any, **kwargs: Any) -> Any:
            qm.store.write = real_write  # type: ignore[method-assign]
            with qm.begin() as tx:
                during.append(qm.receive(TX, tx=tx))
            return real_write(work, *args, **kwargs)

        qm.store.write = write  # type: ignore[method-assign]
        assert qm.remove_through({TX: ids[9]}) == 10  # a span with another queue's ids inside
        assert spy == [10]
        assert [m.lookup_id for m in during] == [ids[10]]
        assert [m.lookup_id for m in qm.peek_range(TX, 0, 100)] == ids[11:]
        assert qm.get_queue(TX).msg_count == len(ids) - 11
    finally:
        qm.close()


@pytest.mark.parametrize("aborts", [False, True], ids=["commit", "abort"])
@pytest.mark.parametrize("seed", range(3))
def test_receivers_racing_remove_through(tmp_path: Path, seed: int, aborts: bool) -> None:
    """Receivers (transactional and plain) race repeated remove_through calls: every
    message is either received once or removed, never both, never lost.

    With ``aborts`` some transactions abort: a message remove_through found locked by
    one became PurgePending and is deleted by the abort, counted by neither side, so
    only ``<=`` holds for the sum there; the exact count is the ``commit`` variant."""
    qm, counts = make(tmp_path / "qm")
    total = 3000
    try:
        for b in range(total // 100):
            with qm.begin() as tx:
                qm.send_many(
                    TX, [MessageRecord(body=(b * 100 + i).to_bytes(4, "big")) for i in range(100)], tx
                )
        r = qm.lookup_range(TX)
        assert r is not None and r.count == total
        received: list[bytes] = []
        lock = threading.Lock()
        stop = threading.Event()
        errors: list[BaseException] = []

        def receiver(kind: int) -> None:
            try:
                while not stop.is_set():
                    try:
                        if kind == 0:
                            with qm.begin() as tx:
                                got = [m.body for m in qm.receive_many(TX, 7, tx=tx)]
                        elif kind == 1:
                            got = [qm.receive(TX).body]
                        else:
                            tx = qm.begin()
                            msgs = qm.receive_many(TX, 5, tx=tx)
                            if aborts and len(msgs) % 2:
                                tx.abort()  # back in place: received later or removed
                                continue
                            tx.commit()
                            got = [m.body for m in msgs]
                    except IOTimeoutError:
                        continue
                    with lock:
                        received.extend(got)
                    stop.wait(0.001)  # leave the head unlocked at times: room for the fast path
            except BaseException as e:
                errors.append(e)

        threads = [threading.Thread(target=receiver, args=(k % 3,)) for k in range(3 + seed)]
        for t in threads:
            t.start()
        removed = 0
        step = 97 + 31 * seed
        through = r.first - 1
        while through < r.last:
            through = min(through + step, r.last)
            removed += qm.remove_through({TX: through})
        stop.set()
        for t in threads:
            t.join()
        assert not errors
        # A message a receiver held during the last call and then gave back was marked
        # PurgePending and deleted by that abort (even one racing the mark), so nothing
        # is left without a further call.
        assert len(received) == len(set(received))
        assert qm.peek_range(TX, 0, total) == []
        assert qm.get_queue(TX).msg_count == 0 and qm.get_queue(TX).total_bytes == 0
        if aborts:
            assert len(received) + removed <= total
        else:
            assert len(received) + removed == total  # each message consumed exactly once
            assert counts.received == total
        qs = qm.queues.by_id[qm.get_queue(TX).queue_id]
        with qs.cond:  # the locks of received messages are dropped lazily (QueueState.settle)
            qs.settle()
        assert qs.locked == set()
    finally:
        qm.close()


def test_sparse_span_is_removed_per_message(tmp_path: Path, spy: list[int | None]) -> None:
    """A span far wider than its messages (another queue busy in between) is not locked
    id by id: it goes per message, with the same result."""
    qm, counts = make(tmp_path / "qm")
    try:
        a = qm.send(PLAIN, MessageRecord(body=b"a")).lookup_id
        with qm.begin() as tx:
            qm.send_many(OTHER, [MessageRecord(body=b"o")] * 5000, tx)
        b = qm.send(PLAIN, MessageRecord(body=b"b")).lookup_id
        c = qm.send(PLAIN, MessageRecord(body=b"c")).lookup_id
        assert b - a > 5000
        assert qm.remove_through({PLAIN: b}) == 2
        assert not spy
        assert [m.lookup_id for m in qm.peek_range(PLAIN, 0, 10)] == [c]
        assert qm.get_queue(PLAIN).msg_count == 1 and qm.get_queue(PLAIN).total_bytes == 1
        assert qm.get_queue(OTHER).msg_count == 5000
        assert counts.received == 2
    finally:
        qm.close()
