"""The sender's large window of retained messages: contents dropped once sent, read back
from the store for a resend; loading in bounded slices per poll."""

from __future__ import annotations

import pytest

from openmsmq.qm import QueueManager
from openmsmq.store import reads
from openmsmq.store.records import MessageRecord
from openmsmq.transfer.state import TransferConfig

from .harness import Net, bodies_in, outgoing_count, send_tx

DEST_B = "DIRECT=TCP:127.0.0.2\\PRIVATE$\\orders"
Q = "private$\\orders"
A, B = "127.0.0.1", "127.0.0.2"


def _expected(first_tx: int, n_tx: int, per_tx: int) -> list[bytes]:
    return [f"{t}-{i}".encode() for t in range(first_tx, first_tx + n_tx) for i in range(per_tx)]


def _send(net: Net, first_tx: int, n_tx: int, per_tx: int) -> None:
    for t in range(first_tx, first_tx + n_tx):
        send_tx(net.nodes[A].qm, DEST_B, [f"{t}-{i}".encode() for i in range(per_tx)])


def test_sent_messages_are_retained_without_content_and_resent_from_the_store(net: Net) -> None:
    a = net.add(A)
    b = net.add(B)
    b.qm.create_queue(Q, transactional=True)
    _send(net, 0, 1, 10)
    net.run_until_quiet()  # the session is open
    # Everything sent now is lost on the wire; the sender keeps only positions.
    net.blackhole.add((A, B))
    _send(net, 1, 3, 40)
    net.settle()
    (t,) = a.transfer.outgoing.values()
    assert len(t.messages) == 120 and all(v is None for v in t.messages.values())
    assert len(bodies_in(b.qm, Q)) == 10
    # Reconnect: the resend reads all 120 back from the store, in order.
    net.cut(A, B)
    net.blackhole.clear()
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == _expected(0, 1, 10) + _expected(1, 3, 40)
    assert outgoing_count(a.qm) == 0 and not t.messages


def test_resend_after_partial_release_reads_back_only_the_unacknowledged(net: Net) -> None:
    a = net.add(A)
    b = net.add(B)
    b.qm.create_queue(Q, transactional=True)
    _send(net, 0, 1, 30)
    net.run_until_quiet()
    net.blackhole.add((A, B))
    _send(net, 1, 2, 30)
    net.settle()
    net.cut(A, B)
    net.blackhole.clear()
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == _expected(0, 3, 30)
    assert b.transfer.stats["rejected"] == 0
    assert outgoing_count(a.qm) == 0


def test_poll_loads_a_bounded_slice_and_reports_more(net: Net) -> None:
    a = net.add(A, batch_size=50, load_per_poll=100)
    b = net.add(B)
    b.qm.create_queue(Q, transactional=True)
    _send(net, 0, 5, 60)  # 300 committed
    now = net.clock.now
    assert a.transfer.poll(now) is True  # the outgoing queue is found, 100 loaded
    (t,) = a.transfer.outgoing.values()
    assert len(t.messages) == 100
    assert a.transfer.poll(now) is True
    assert a.transfer.poll(now) is True  # the last 100: a full slice, there may be more
    assert len(t.messages) == 300
    assert a.transfer.poll(now) is False  # an empty read ends the backlog
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == _expected(0, 5, 60)


def test_max_in_flight_bounds_loading(net: Net) -> None:
    a = net.add(A, batch_size=50, max_in_flight=120)
    b = net.add(B)
    b.qm.create_queue(Q, transactional=True)
    _send(net, 0, 4, 50)
    a.transfer.poll(net.clock.now)
    (t,) = a.transfer.outgoing.values()
    assert len(t.messages) == 120
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == _expected(0, 4, 50)


def test_packets_are_built_only_a_bounded_backlog_ahead_of_the_window(net: Net) -> None:
    """With a session open, loading pauses once ``backlog`` packets wait for the window
    (twice the window at least) and resumes on the SessionAcks that drain it; every
    message still arrives once and in order."""
    a = net.add(A, backlog=100)
    b = net.add(B)
    b.qm.create_queue(Q, transactional=True)
    _send(net, 0, 1, 10)
    net.run_until_quiet()  # the session is open
    _send(net, 1, 20, 100)
    a.transfer.poll(net.clock.now)  # no bytes move: no SessionAck drains the backlog
    (t,) = a.transfer.outgoing.values()
    (conn,) = [c for c in a.transfer.connections if c.open]
    bound = 2 * a.transfer.config.session.window_size  # 128 > backlog=100
    assert t.held
    assert conn.session.backlog <= bound
    assert len(t.messages) <= bound + a.transfer.config.session.window_size
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == _expected(0, 1, 10) + _expected(1, 20, 100)
    assert outgoing_count(a.qm) == 0


def test_a_held_queue_whose_session_went_is_loaded_by_the_poll_in_slices(net: Net) -> None:
    """refill() after the session went only releases the hold: the next polls load in
    slices of load_per_poll (no unbounded load in the driver's pump), and the messages
    arrive once the session is back."""
    a = net.add(A, backlog=100, load_per_poll=200)
    b = net.add(B)
    b.qm.create_queue(Q, transactional=True)
    _send(net, 0, 1, 10)
    net.run_until_quiet()  # the session is open
    _send(net, 1, 20, 100)
    a.transfer.poll(net.clock.now)
    (t,) = a.transfer.outgoing.values()
    assert t.held and a.transfer.refill_due
    loaded = len(t.messages)
    net.cut(A, B)
    a.transfer.refill(net.clock.now)
    assert not t.held and not a.transfer.refill_due
    assert len(t.messages) == loaded  # nothing loaded by refill itself
    a.transfer.poll(net.clock.now)
    assert len(t.messages) <= loaded + 200  # one poll: one slice
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == _expected(0, 1, 10) + _expected(1, 20, 100)
    assert outgoing_count(a.qm) == 0


def test_a_poll_skips_caught_up_queues_until_something_is_committed(net: Net) -> None:
    """An idle QM with many outgoing queues reads one value per poll (the store's highest
    LookupIdentifier), not each queue (4,000 idle queues took 44 % of a core). A commit
    to any of them, by this process or another, is loaded at the next poll."""
    a = net.add(A)
    b = net.add(B)
    for i in range(40):
        b.qm.create_queue(f"{Q}{i}", transactional=True)
        send_tx(a.qm, f"{DEST_B}{i}", [b"first"])
    net.run_until_quiet()
    assert outgoing_count(a.qm) == 0
    reads: list[object] = []
    real = a.qm.peek_outgoing_rows

    def counting(*args: object) -> object:
        reads.append(args[0])
        return real(*args)  # type: ignore[arg-type]

    a.qm.peek_outgoing_rows = counting  # type: ignore[method-assign]
    for _ in range(5):
        a.transfer.poll(net.clock.now)
    assert reads == []
    send_tx(a.qm, f"{DEST_B}17", [b"second"])
    other = QueueManager(a.qm.data_dir, threaded=False)  # another process on the directory
    try:
        send_tx(other, f"{DEST_B}23", [b"third"])
    finally:
        other.close()
    net.run_until_quiet()
    assert len(reads) >= 2
    assert bodies_in(b.qm, f"{Q}17") == [b"first", b"second"]
    assert bodies_in(b.qm, f"{Q}23") == [b"first", b"third"]
    assert outgoing_count(a.qm) == 0


def test_the_sequence_map_keeps_one_entry_per_outgoing_queue(net: Net) -> None:
    """An OrderAck is matched to the queue that loaded its sequence (``Sender.loaded_sequences``);
    every drained burst starts a new TxSequenceID, and the map still holds one entry per
    outgoing queue, not one per sequence ever sent."""
    a = net.add(A)
    b = net.add(B)
    for i in range(3):
        b.qm.create_queue(f"{Q}{i}", transactional=True)
    sequences = set()
    for burst in range(6):
        for i in range(3):
            send_tx(a.qm, f"{DEST_B}{i}", [b"%d" % burst])
        net.run_until_quiet()
        sequences |= {t.loaded_sequence for t in a.transfer.outgoing.values()}
    assert len(sequences) >= 6  # new sequences were started
    assert len(a.transfer.sender.loaded_sequences()) == 3
    assert [bodies_in(b.qm, f"{Q}{i}") for i in range(3)] == [[b"%d" % n for n in range(6)]] * 3


class _CountingDict(dict[int, None]):
    """An ordered set that counts the walks over it."""

    walks = 0

    def __iter__(self):  # type: ignore[no-untyped-def]
        type(self).walks += 1
        return super().__iter__()


def test_session_acks_release_loaded_plain_messages_without_walking_them(net: Net) -> None:
    """Non-transactional recoverable messages loaded while the next hop was away (up to
    the byte bound) are released by the SessionAcks that acknowledge them, a few at a
    time: each SessionAck looks up what it acknowledges instead of walking everything
    loaded (which made a 100,000-message backlog drain at two thirds of the speed)."""
    a = net.add(A)
    b = net.add(B)
    b.qm.create_queue(Q)
    for t in range(20):
        a.qm.send_many(DEST_B, [MessageRecord(body=b"%d-%d" % (t, i), delivery=1) for i in range(100)])
    for _ in range(3):
        a.transfer.poll(net.clock.now)  # loaded before any session exists
    (t,) = a.transfer.outgoing.values()
    assert len(t.plain) == 2000
    t.plain = _CountingDict(t.plain)
    net.settle(rounds=2000)
    net.run_until_quiet()
    assert len(bodies_in(b.qm, Q)) == 2000 and outgoing_count(a.qm) == 0
    assert _CountingDict.walks <= 3  # the resend when the session opened, not once per SessionAck


def test_polls_read_the_stores_highest_lookup_id_once_per_commit_check(
    net: Net, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A loaded QM polls after each of its own commits: those are seen from the store
    writer's counter (no statement), and the store's highest LookupIdentifier (for
    commits of other processes) is read at most once per ``commit_check`` seconds."""
    a = net.add(A)
    b = net.add(B)
    b.qm.create_queue(Q, transactional=True)
    send_tx(a.qm, DEST_B, [b"first"])
    net.run_until_quiet()
    highs: list[int] = []
    real = reads.max_lookup_id

    def counting(conn: object) -> int:
        highs.append(1)
        return real(conn)  # type: ignore[arg-type]

    monkeypatch.setattr(reads, "max_lookup_id", counting)
    now = net.clock.now
    a.transfer.poll(now)
    read = len(highs)
    assert read <= 1
    for _ in range(3):
        a.transfer.poll(now)
    send_tx(a.qm, DEST_B, [b"second"])  # this process's commit: loaded without a read
    a.transfer.poll(now)
    (t,) = a.transfer.outgoing.values()
    assert len(t.messages) == 1 and len(highs) == read
    a.transfer.poll(now + TransferConfig().commit_check)
    assert len(highs) == read + 1
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == [b"first", b"second"]
