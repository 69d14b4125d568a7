"""Transfer between two (or three) queue managers, sans-I/O, with literal clocks."""

from __future__ import annotations

import gc
import tracemalloc

import pytest

from openmsmq.errors import HResult, MQError
from openmsmq.protocol.outgoing import RetainedMessage
from openmsmq.qm import names
from openmsmq.qm import sending as qm_sending
from openmsmq.store.records import MessageRecord
from openmsmq.transfer.engine import AcceptBatch
from openmsmq.transfer.state import RECEIVED_OVERHEAD, TransferConfig
from openmsmq.transfer.trust import TrustConfig
from openmsmq.wire.constants import MessageClass
from openmsmq.wire.ids import TxSequenceId

from .harness import Net, Node, bodies_in, failing_accepts, outgoing_count, send_tx

DEST_B = "DIRECT=TCP:127.0.0.2\\PRIVATE$\\orders"
DEST_C = "DIRECT=TCP:127.0.0.3\\PRIVATE$\\orders"
Q = "private$\\orders"
#: An intermediate hop relays only along its routes (docs/security.md): B's route to C.
RELAY_C = (("127.0.0.3", "127.0.0.3"),)


def hops(*peers: str) -> TrustConfig:
    """A QM behind an intermediate hop accepts other QMs' messages from it only when it
    is configured as one (docs/security.md, source-qm)."""
    return TrustConfig(intermediate_hops=peers)


def _pair(net: Net, **cfg: object) -> tuple:
    a = net.add("127.0.0.1", **cfg)
    b = net.add("127.0.0.2", **cfg)
    b.qm.create_queue(Q, transactional=True)
    return a, b


def _expected(n_tx: int, per_tx: int) -> list[bytes]:
    return [f"{t}-{i}".encode() for t in range(n_tx) for i in range(per_tx)]


def _send_all(a, n_tx: int, per_tx: int, dest: str = DEST_B) -> None:
    for t in range(n_tx):
        send_tx(a.qm, dest, [f"{t}-{i}".encode() for i in range(per_tx)])


def test_many_transactional_messages_exactly_once_in_order(net: Net) -> None:
    a, b = _pair(net)
    _send_all(a, 5, 200)
    assert outgoing_count(a.qm) == 1000
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == _expected(5, 200)
    assert outgoing_count(a.qm) == 0
    # Group commit: far fewer store batches than messages.
    assert b.transfer.stats["accepted"] == 1000
    assert b.transfer.stats["batches"] < 100
    status = b.transfer.incoming_status()
    assert len(status) == 1 and status[0].tx_sequence_number == 1000 and status[0].reject_count == 0
    out = a.transfer.outgoing_status()
    assert out[0].last_acked is not None and out[0].last_acked[1] == 1000 and out[0].last_unacked is None


def _release_turns(a: Node, monkeypatch: pytest.MonkeyPatch) -> list[list[int]]:
    """The OrderAck releases A's transfer hands its store, one list per store transaction
    (the TxSequenceNumber each outgoing queue is released up to), as they happen."""
    calls: list[list[int]] = []
    real = a.transfer.sequence_store.release_outgoing_many

    def spy(releases):  # type: ignore[no-untyped-def]
        calls.append([n for _, n in releases])
        return real(releases)

    monkeypatch.setattr(a.transfer.sequence_store, "release_outgoing_many", spy)
    return calls


def test_a_large_release_is_deleted_a_chunk_per_store_transaction(
    net: Net, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One OrderAck may release max_in_flight messages; A deletes them release_chunk at a
    time, each chunk in its own store transaction, so an application committing to the
    same store waits for one chunk, not for all of them."""
    a = net.add("127.0.0.1", release_chunk=3)
    b = net.add("127.0.0.2")
    b.qm.create_queue(Q, transactional=True)
    calls = _release_turns(a, monkeypatch)
    _send_all(a, 2, 5)  # ten messages, one sequence
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == _expected(2, 5)
    assert outgoing_count(a.qm) == 0
    assert calls == [[3], [6], [9], [10]]  # one OrderAck for all ten: four transactions
    calls.clear()
    _send_all(a, 1, 4)  # all were released: a new sequence, numbered from 1 (3.1.5.6)
    net.run_until_quiet()
    assert calls == [[3], [4]]
    assert outgoing_count(a.qm) == 0 and a.transfer.idle


def test_a_large_release_runs_in_short_turns_by_default(net: Net, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the default configuration an OrderAck of 2,500 messages is released in store
    transactions of at most 1,000 rows each: every one holds the store's writer, and an
    application's commit queued behind it waits for the whole of it (the next chunk is
    handed out only after one committed, so queued commits run in between)."""
    chunk = TransferConfig().release_chunk
    assert chunk <= 1_000
    a, b = _pair(net)
    calls = _release_turns(a, monkeypatch)
    _send_all(a, 5, 500)
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == _expected(5, 500)
    assert outgoing_count(a.qm) == 0
    ends = [n for call in calls for n in call]
    assert ends[-1] == 2_500 and len(ends) >= 3
    assert all(hi - lo <= chunk for lo, hi in zip([0, *ends], ends, strict=False))


def test_final_ack_settlements_run_in_turns_of_release_chunk(net: Net) -> None:
    """A burst of FinalAcks (one per message a deleted queue rejected, say) is settled in
    store transactions of at most ``release_chunk`` FinalAcks, not all in one."""
    a, _ = _pair(net, release_chunk=10)
    s = a.transfer.settlements
    seq = TxSequenceId(1_700_000_000, 1)
    released = tuple(RetainedMessage(seq, i, i - 1, i) for i in range(1, 26))
    s.settle_released(1, released, MessageClass.NACK_Q_DELETED)
    sizes = []
    while (work := s.next_batch(a.transfer.outgoing.values(), lambda: 0.0)) is not None:
        sizes.append(len(work.settles))
        s.done(work, s.run(work), a.transfer.outgoing.values(), lambda _: None)
    assert sizes == [10, 10, 5] and s.idle


def test_lost_batch_is_resent_on_reconnect(net: Net) -> None:
    a, b = _pair(net)
    _send_all(a, 1, 50)
    net.settle()
    net.advance(0.6)
    assert len(bodies_in(b.qm, Q)) == 50
    # The next batch is lost on the wire, then the connection breaks.
    net.blackhole.add(("127.0.0.1", "127.0.0.2"))
    _send_all(a, 2, 50)
    net.settle()
    assert len(bodies_in(b.qm, Q)) == 50
    net.cut("127.0.0.1", "127.0.0.2")
    net.blackhole.clear()
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == [f"0-{i}".encode() for i in range(50)] + _expected(2, 50)
    assert outgoing_count(a.qm) == 0


def test_duplicates_after_sender_crash_are_rejected(net: Net) -> None:
    a, b = _pair(net)
    send_tx(a.qm, DEST_B, [b"first"])
    net.run_until_quiet()
    # B stores everything but its OrderAcks never reach A; then A crashes.
    net.blackhole.add(("127.0.0.2", "127.0.0.1"))
    _send_all(a, 2, 100)
    net.settle()
    net.advance(0.6)
    stored_before_crash = len(bodies_in(b.qm, Q)) - 1
    assert stored_before_crash >= 64  # one session window; its SessionAcks are lost too
    assert outgoing_count(a.qm) == 200
    net.blackhole.clear()
    net.restart("127.0.0.1")
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == [b"first", *_expected(2, 100)]
    assert net.nodes["127.0.0.2"].transfer.stats["rejected"] >= stored_before_crash
    assert outgoing_count(net.nodes["127.0.0.1"].qm) == 0


def test_receiver_crash_keeps_sequence_state(net: Net) -> None:
    a, b = _pair(net)
    _send_all(a, 1, 100)
    net.run_until_quiet()
    net.restart("127.0.0.2")
    _send_all(a, 1, 100)
    net.run_until_quiet()
    b = net.nodes["127.0.0.2"]
    assert bodies_in(b.qm, Q) == _expected(1, 100) * 2
    assert outgoing_count(a.qm) == 0


def test_order_ack_waits_for_receiver_store(net: Net) -> None:
    a, b = _pair(net)
    b.hold_store = True
    _send_all(a, 1, 30)
    net.settle()
    for _ in range(5):
        net.advance(1.0)  # Order Ack Send Timer fires, but nothing is durable yet
    assert bodies_in(b.qm, Q) == []
    assert outgoing_count(a.qm) == 30
    assert all(not t.seq.all_order_acked for t in a.transfer.outgoing.values())
    b.release_held(net.clock.now)
    net.run_until_quiet()
    assert len(bodies_in(b.qm, Q)) == 30
    assert outgoing_count(a.qm) == 0


def test_session_ack_alone_releases_nothing(net: Net) -> None:
    a, b = _pair(net, order_ack=__import__("openmsmq.protocol.incoming", fromlist=["x"]).OrderAckConfig(
        order_ack_timeout=100.0, maximum_order_ack_delay=200.0))  # fmt: skip
    _send_all(a, 1, 40)
    net.settle()
    net.advance(25.0)  # SessionAcks (Ack Send timer, 32-message burst) flow, no OrderAck yet
    assert len(bodies_in(b.qm, Q)) == 40
    assert outgoing_count(a.qm) == 40
    net.advance(100.0)
    net.run_until_quiet()
    assert outgoing_count(a.qm) == 0


def test_intermediate_qm_forwards_transaction_header_untouched(net: Net) -> None:
    a = net.add("127.0.0.1", routes=(("127.0.0.3", "127.0.0.2"),))
    b = net.add("127.0.0.2", routes=RELAY_C)
    c = net.add("127.0.0.3", trust=hops("127.0.0.2"))
    c.qm.create_queue(Q, transactional=True)
    _send_all(a, 2, 25, DEST_C)
    sent = a.qm.peek_range(next(iter(a.transfer.outgoing.values())).handle if a.transfer.outgoing else
                           a.qm.open_queue(DEST_C), 0, 100)  # fmt: skip
    net.run_until_quiet()
    got = c.qm.peek_range(Q, 0, 100)
    assert [m.body for m in got] == _expected(2, 25)
    # The final destination sees the original sender's numbering.
    assert [(m.tx_sequence_id, m.tx_sequence_number, m.tx_previous_sequence_number) for m in got] == [
        (m.tx_sequence_id, m.tx_sequence_number, m.tx_previous_sequence_number) for m in sent
    ]
    assert {m.id_lineage for m in got} == {a.qm.guid}
    assert b.transfer.stats["forwarded"] >= 50
    assert b.transfer.incoming_status() == []  # no sequence processing on the hop
    assert outgoing_count(a.qm) == 0  # OrderAcks came back through B
    seq = c.transfer.incoming_status()[0]
    assert seq.source_qm == a.qm.guid and seq.tx_sequence_id == TxSequenceId.from_int(sent[0].tx_sequence_id)


def test_two_intermediates_and_a_restarted_one(net: Net) -> None:
    # A -> D -> B -> C: the OrderAcks go back C -> B -> D -> A; B and D learn the way
    # back to A from the packets they forward (neither has a route for A).
    a = net.add("127.0.0.1", routes=(("127.0.0.3", "127.0.0.4"),))
    d = net.add("127.0.0.4", routes=(("127.0.0.3", "127.0.0.2"),))
    net.add("127.0.0.2", routes=RELAY_C, trust=hops("127.0.0.4"))
    c = net.add("127.0.0.3", trust=hops("127.0.0.2"))
    c.qm.create_queue(Q, transactional=True)
    _send_all(a, 3, 40, DEST_C)
    net.run_until_quiet()
    assert outgoing_count(a.qm) == 0  # every OrderAck came back over two hops
    net.cut("127.0.0.4", "127.0.0.2")
    net.restart("127.0.0.2")  # B forgets the way back; A's next messages teach it again
    _send_all(a, 2, 40, DEST_C)
    net.run_until_quiet()
    assert [m.body for m in c.qm.peek_range(Q, 0, 1000)] == _expected(3, 40) + _expected(2, 40)
    assert outgoing_count(a.qm) == 0
    assert d.transfer.incoming_status() == []


def test_intermediate_stores_recoverable_messages_before_acknowledging_them(net: Net) -> None:
    # A -> B -> C, recoverable non-transactional messages: B keeps them in its outgoing
    # queue to C and acknowledges them, so A releases them; a reconnect resends nothing.
    a = net.add("127.0.0.1", routes=(("127.0.0.3", "127.0.0.2"),))
    b = net.add("127.0.0.2", routes=RELAY_C)
    c = net.add("127.0.0.3", trust=hops("127.0.0.2"))
    c.qm.create_queue("private$\\plain")
    dest = "DIRECT=TCP:127.0.0.3\\private$\\plain"
    c_is_down = ("127.0.0.2", "127.0.0.3")
    net.blackhole.add(c_is_down)  # B cannot reach C yet: the messages wait at B
    sent = [a.qm.send(dest, MessageRecord(body=b"p%d" % i, delivery=1)) for i in range(5)]
    net.settle()
    for _ in range(5):
        net.advance(0.6)
    assert outgoing_count(a.qm) == 0  # released by B's SessionAck: B stored them
    net.blackhole.discard(c_is_down)
    b = net.restart("127.0.0.2")  # and B keeps them across a crash
    net.cut("127.0.0.1", "127.0.0.2")
    net.run_until_quiet()
    got = c.qm.peek_range("private$\\plain", 0, 100)
    assert [m.body for m in got] == [b"p%d" % i for i in range(5)]  # once each, in order
    # As sent by A: Identifier and SentTime kept, one hop more.
    assert [(m.id_lineage, m.id_uniquifier, m.sent_time) for m in got] == [
        (a.qm.guid, m.id_uniquifier, m.sent_time) for m in sent
    ]
    assert {m.hop_count for m in got} == {1}
    assert outgoing_count(b.qm) == 0


def test_the_recoverable_message_numbered_0_is_released_only_once_stored(net: Net) -> None:
    # RecoverableMessage numbers wrap from 0xFFFF to 0. Message 0 is released by A only
    # once B stored it, as every other recoverable one: B holds its store here, so A keeps
    # all three; then B stores and acknowledges 0 too, and A's outgoing queue empties.
    a, b = _pair(net)
    b.qm.create_queue("private$\\plain")
    dest = "DIRECT=TCP:127.0.0.2\\private$\\plain"
    a.qm.send(dest, MessageRecord(body=b"first", delivery=1))
    net.run_until_quiet()
    (sa,) = [c.session for c in a.transfer.connections]
    (sb,) = [c.session for c in b.transfer.connections]
    # The ADM counters as after 65,535 recoverable messages, all acknowledged.
    sa.sending.recoverable_message_sent_count = 0xFFFE
    sb.recoverable_message_received_count = sb.last_acked_recoverable_msg_seq_number = 0xFFFE
    b.hold_store = True
    for i in range(3):  # numbered 0xFFFF, 0, 1
        a.qm.send(dest, MessageRecord(body=b"p%d" % i, delivery=1))
    net.settle()
    for _ in range(5):
        net.advance(0.6)
    assert outgoing_count(a.qm) == 3  # B has not stored them: A keeps each, 0 included
    b.release_held(net.clock.now)
    net.run_until_quiet()
    assert outgoing_count(a.qm) == 0
    assert bodies_in(b.qm, "private$\\plain") == [b"first", b"p0", b"p1", b"p2"]
    assert b.transfer.unstored_bytes == 0


def test_messages_loaded_for_a_peer_that_is_away_stay_within_queued_bytes_of_memory(net: Net) -> None:
    # While no session is open, what an outgoing queue loads stays in memory: queued_bytes
    # bounds that memory, per-message overhead included. Counted by message size alone,
    # 1 MiB loaded about 3,000 small messages, 4 MB of Python objects.
    bound = 1024 * 1024
    a = net.add("127.0.0.1", queued_bytes=bound)  # B never comes up
    dest = "DIRECT=TCP:127.0.0.2\\private$\\plain"
    for t in range(0, 6000, 500):
        a.qm.send_many(
            dest, [MessageRecord(body=b"%08d" % i + bytes(248), delivery=1) for i in range(t, t + 500)]
        )
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(20):
            net.step()
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    loaded = sum(len(t.messages) for t in a.transfer.outgoing.values())
    assert loaded >= 100  # something is ready for when the peer comes
    assert held <= bound * 1.25, (loaded, held)


def test_received_messages_waiting_for_the_store_stay_within_unstored_bytes_of_memory(net: Net) -> None:
    # While B's store lags, what B received and has not stored stays in memory: it stops
    # reading at unstored_bytes (the link holds the rest, as TCP does for net/mqqb.py),
    # and that bound covers the memory, per-message overhead included. Counted by body
    # size alone, 256 KiB held about 1,000 small messages and 1.1 MB of Python objects.
    bound = 256 * 1024
    a = net.add("127.0.0.1")
    b = net.add("127.0.0.2", unstored_bytes=bound)
    b.qm.create_queue(Q, transactional=True)
    for t in range(0, 3000, 500):
        send_tx(a.qm, DEST_B, [b"%08d" % i + bytes(248) for i in range(t, t + 500)])
    b.hold_store = True  # the store lags: nothing B accepts is stored yet
    held = 0

    def measured(fn):  # B's own allocations: what its calls allocate and keep
        def call(*args):
            nonlocal held
            args = tuple(bytes(bytearray(x)) if isinstance(x, bytes) else x for x in args)
            before = tracemalloc.get_traced_memory()[0]
            out = fn(*args)
            held += tracemalloc.get_traced_memory()[0] - before
            return out

        return call

    b.transfer.data_received = measured(b.transfer.data_received)
    b.transfer.next_store_work = measured(b.transfer.next_store_work)
    gc.collect()
    tracemalloc.start()
    try:
        net.settle()
        gc.collect()
    finally:
        tracemalloc.stop()
    unstored = b.transfer.stats["accepted"]
    assert not b.transfer.reading_wanted and net.held_bytes  # B stopped reading
    assert unstored >= 50
    assert held <= bound * 1.25, (unstored, held)
    # Once the store catches up, everything arrives exactly once, in order.
    b.release_held(net.clock.now)
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == [b"%08d" % i + bytes(248) for i in range(3000)]
    assert outgoing_count(a.qm) == 0 and b.transfer.unstored_bytes == 0


def test_a_message_too_large_for_one_packet_is_refused_at_send_not_stuck_in_the_queue(net: Net) -> None:
    a, b = _pair(net)
    a.qm.create_queue("private$\\local", transactional=True)
    four_mib = bytes(4 * 1024 * 1024)
    with a.qm.begin() as tx:  # a local queue takes a 4 MiB body
        a.qm.send("private$\\local", MessageRecord(body=four_mib), tx)
    with pytest.raises(MQError) as err, a.qm.begin() as tx:
        a.qm.send(DEST_B, MessageRecord(body=four_mib), tx)
    assert err.value.hresult == HResult.MQ_ERROR_INSUFFICIENT_RESOURCES
    assert "remote queue" in str(err.value)
    # A body within the headroom kept for the headers is transferred, and what follows too.
    fits = bytes(4 * 1024 * 1024 - 8192)
    send_tx(a.qm, DEST_B, [fits])
    send_tx(a.qm, DEST_B, [b"after"])
    net.run_until_quiet()
    assert [len(m.body) for m in b.qm.peek_range(Q, 0, 10)] == [len(fits), 5]
    assert outgoing_count(a.qm) == 0


@pytest.mark.parametrize("transactional", [True, False])
def test_a_stored_message_that_cannot_be_sent_is_dead_lettered_not_left_blocking(
    net: Net, monkeypatch: pytest.MonkeyPatch, transactional: bool
) -> None:
    # A store written before the send path refused messages too large for one packet
    # may hold one: it is moved to the dead-letter queue with NACK_BAD_DST_Q, and the
    # messages after it are transferred (the sequence bridges it, MS-MQQB 3.1.7.1.3).
    a, b = _pair(net)
    b.qm.create_queue("private$\\plain")
    plain = ("DIRECT=TCP:127.0.0.2\\private$\\plain", "private$\\plain")
    dest, queue = (DEST_B, Q) if transactional else plain
    monkeypatch.setattr(qm_sending, "REMOTE_HEADROOM", -(1 << 20))  # the old limit: 4 MiB
    too_large = bytes(4 * 1024 * 1024 - 16)

    def send(bodies: list[bytes]) -> None:
        msgs = [MessageRecord(body=body, delivery=1) for body in bodies]
        if transactional:
            with a.qm.begin() as tx:
                a.qm.send_many(dest, msgs, tx)
        else:
            a.qm.send_many(dest, msgs)

    send([b"before"])
    send([too_large])
    send([b"after-1", b"after-2"])
    monkeypatch.undo()
    net.run_until_quiet()
    assert [m.body for m in b.qm.peek_range(queue, 0, 10)] == [b"before", b"after-1", b"after-2"]
    assert outgoing_count(a.qm) == 0
    dlq = names.DEADXACT if transactional else names.DEADLETTER
    [dead] = a.qm.peek_range(dlq, 0, 10)
    assert len(dead.body) == len(too_large) and dead.message_class == MessageClass.NACK_BAD_DST_Q
    # The sequence goes on: a later message is accepted too.
    send([b"later"])
    net.run_until_quiet()
    assert b.qm.peek_range(queue, 0, 10)[-1].body == b"later"


def test_non_transactional_arrivals_and_releases_are_stored_in_runs(net: Net) -> None:
    # One store transaction per run of messages for one queue, at B for the arrivals and
    # at A for the session-acknowledged deletions: not one commit (and fsync) each.
    a = net.add("127.0.0.1")
    b = net.add("127.0.0.2")
    b.qm.create_queue("private$\\plain")
    dest = "DIRECT=TCP:127.0.0.2\\private$\\plain"
    a.qm.send_many(dest, [MessageRecord(body=b"p%d" % i, delivery=1) for i in range(200)])
    a_before, b_before = a.qm.store.stats.batches, b.qm.store.stats.batches
    net.run_until_quiet()
    assert [m.body for m in b.qm.peek_range("private$\\plain", 0, 1000)] == [b"p%d" % i for i in range(200)]
    assert outgoing_count(a.qm) == 0
    assert b.qm.store.stats.batches - b_before < 20
    assert a.qm.store.stats.batches - a_before < 20


def test_receiver_crash_before_order_ack_rejects_resent_duplicates(net: Net) -> None:
    a, b = _pair(net)
    send_tx(a.qm, DEST_B, [b"first"])
    net.run_until_quiet()
    net.blackhole.add(("127.0.0.2", "127.0.0.1"))  # B's acks are lost
    _send_all(a, 1, 50)
    net.settle()
    stored = len(bodies_in(b.qm, Q)) - 1
    assert stored == 50 and outgoing_count(a.qm) == 50
    net.blackhole.clear()
    b = net.restart("127.0.0.2")  # the incoming sequence state comes back from the store
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == [b"first", *_expected(1, 50)]
    assert b.transfer.stats["rejected"] == 50
    assert outgoing_count(a.qm) == 0


def test_non_transactional_messages_travel_and_leave_on_session_ack(net: Net) -> None:
    a = net.add("127.0.0.1")
    b = net.add("127.0.0.2")
    b.qm.create_queue("private$\\plain")
    plain = [MessageRecord(body=f"p{i}".encode()) for i in range(10)]
    a.qm.send_many("DIRECT=TCP:127.0.0.2\\PRIVATE$\\plain", plain)
    net.run_until_quiet()
    net.advance(15.0)  # Session Ack Send Timer (AckWaitTimeout / 2)
    assert bodies_in(b.qm, "private$\\plain") == [f"p{i}".encode() for i in range(10)]
    assert outgoing_count(a.qm) == 0


def test_two_outgoing_queues_created_in_one_second_never_mix_order_acks(net: Net) -> None:
    # An OrderAck names only the sequence: outgoing queues created in the same second get
    # distinct TxSequenceIDs from the store, and both deliver everything.
    a, b = _pair(net, sequence_quarantine=2.0)
    b.qm.create_queue("private$\\other", transactional=True)
    _send_all(a, 1, 30)
    other = "DIRECT=TCP:127.0.0.2\\PRIVATE$\\other"
    send_tx(a.qm, other, [f"o{i}".encode() for i in range(30)])
    ids = {a.qm.outgoing_sequence(t).tx_sequence_id for t in (DEST_B, other)}
    assert len(ids) == 2  # never shared, even within one second
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == _expected(1, 30)
    assert bodies_in(b.qm, "private$\\other") == [f"o{i}".encode() for i in range(30)]
    assert outgoing_count(a.qm) == 0


def test_accepted_messages_wait_for_accept_min(net: Net) -> None:
    """next_store_work(accept_min=N) forms no accept batch below N (the asyncio driver
    passes its accept_batch_min, then 1 after accept_batch_wait); accepts_waiting says
    that messages wait; nothing is acknowledged before the batch is durable."""
    a, b = _pair(net)
    b.run_store = lambda now: 0  # type: ignore[method-assign]  # the test hands out the work
    _send_all(a, 1, 30)
    net.settle()
    assert b.transfer.accepts_waiting
    assert b.transfer.next_store_work(accept_min=31) is None
    work = b.transfer.next_store_work(accept_min=30)
    assert isinstance(work, AcceptBatch) and sum(len(g.messages) for g in work.groups) == 30
    assert not b.transfer.accepts_waiting and b.transfer.next_store_work() is None
    net.advance(1.0)  # the Order Ack Send Timer fires: nothing durable, no OrderAck
    assert outgoing_count(a.qm) == 30
    b.transfer.store_work_done(work, b.transfer.run_store_work(work), net.clock.now)
    del b.run_store
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == _expected(1, 30)
    assert outgoing_count(a.qm) == 0


def test_a_receiver_that_could_not_store_has_the_sender_resend_on_a_new_session(
    net: Net, monkeypatch: pytest.MonkeyPatch
) -> None:
    """B's store is full: B closes the session the messages came on and refuses A's
    sessions for a back-off (5 s, then 10 s while it stays full); once B can store again A
    resends on its next session, long before its Transactional Ack Wait Timer (30 s, and
    up to 6 h after many resends). What was stored before the failure is OrderAck'ed
    before the close; nothing is acknowledged before it is stored; every message arrives
    once and in order."""
    from openmsmq.transfer.store_work import STORE_RETRY_MIN

    a, b = _pair(net)
    start = net.clock.now
    full = failing_accepts(b, monkeypatch)
    first = [f"0-{i}".encode() for i in range(50)]
    send_tx(a.qm, DEST_B, first)
    net.settle()  # stored; its OrderAck waits for the Order Ack Send Timer
    assert bodies_in(b.qm, Q) == first and outgoing_count(a.qm) == 50
    full[0] = True
    send_tx(a.qm, DEST_B, [f"1-{i}".encode() for i in range(50)])
    net.settle()
    # The OrderAck of what was stored went out before the close: A released those 50.
    assert bodies_in(b.qm, Q) == first and outgoing_count(a.qm) == 50
    assert b.transfer.refusing("127.0.0.1", net.clock.now)
    assert not any(c.open for c in a.transfer.connections)  # closed by B, not reopened

    net.advance(STORE_RETRY_MIN + 0.1)  # let in again: A resends, B's store still fails
    assert bodies_in(b.qm, Q) == first and outgoing_count(a.qm) == 50
    net.advance(STORE_RETRY_MIN + 0.1)
    assert b.transfer.refusing("127.0.0.1", net.clock.now)  # the back-off doubled

    full[0] = False
    net.advance(STORE_RETRY_MIN + 0.1)
    net.run_until_quiet()
    assert net.clock.now - start < 25  # before the first Transactional Ack Wait resend (30 s)
    assert bodies_in(b.qm, Q) == _expected(2, 50)
    assert outgoing_count(a.qm) == 0
    assert b.transfer.unstored_bytes == 0  # the failed batches' bytes were given back
    assert not b.transfer.refusing("127.0.0.1", net.clock.now)


def test_a_failed_batch_gives_back_the_bytes_of_the_acceptances_dropped_behind_it(
    net: Net, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Messages of the same sequence accepted while a failing batch was being stored are
    dropped with it (A resends them); what they counted in ``unstored_bytes`` (body and
    per-message overhead) is given back and what other sequences' waiting messages count
    stays, so the bound that stops reading does not drift."""
    from openmsmq.transfer.store_work import STORE_RETRY_MIN

    a, b = _pair(net)
    c = net.add("127.0.0.3")
    full = failing_accepts(b, monkeypatch)
    b.hold_store = True  # the first batch is taken and not finished yet
    send_tx(a.qm, DEST_B, [b"x0"])
    net.settle()
    send_tx(a.qm, DEST_B, [b"x1", b"x2"])
    send_tx(c.qm, DEST_B, [b"y0", b"y1"])
    net.advance(0.2)  # C finds its new outgoing queue and opens a session to B
    assert len(b.held) == 1 and len(b.transfer.store.waiting_accepted()) == 4  # accepted behind it
    full[0] = True
    b.release_held(net.clock.now)  # the batch fails: x1 and x2 are dropped with it
    assert [ev.packet.properties.body for _, ev in b.transfer.store.waiting_accepted()] == [b"y0", b"y1"]
    assert b.transfer.unstored_bytes == b.transfer.store.accepted_bytes == 2 * (2 + RECEIVED_OVERHEAD)
    full[0] = False
    net.advance(STORE_RETRY_MIN + 0.1)
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == [b"y0", b"y1", b"x0", b"x1", b"x2"]  # x0 failed too: resent
    assert outgoing_count(a.qm) == 0 and outgoing_count(c.qm) == 0
    assert b.transfer.unstored_bytes == 0


def _raising_while_full(monkeypatch: pytest.MonkeyPatch, target: object, name: str) -> list[bool]:
    """Make ``target.name`` raise MQ_ERROR_INSUFFICIENT_RESOURCES, as a full disk does,
    while the returned flag's item is True (it starts True)."""
    full = [True]
    real = getattr(target, name)

    def store(*args, **kwargs):  # type: ignore[no-untyped-def]
        if full[0]:
            raise MQError(HResult.MQ_ERROR_INSUFFICIENT_RESOURCES, "store is full")
        return real(*args, **kwargs)

    monkeypatch.setattr(target, name, store)
    return full


@pytest.mark.parametrize("hop", [False, True], ids=["receiver", "next-hop"])
def test_recoverable_messages_a_qm_could_not_store_are_resent_on_a_new_session(
    net: Net, monkeypatch: pytest.MonkeyPatch, hop: bool
) -> None:
    """A recoverable message B failed to store (B the receiver, or the next hop that stores
    it before acknowledging it) was never acknowledged, and A resends such a message only
    on a new session; B acknowledged the messages around it, so the session never timed
    out and the message waited for good (two serve processes, B on a tmpfs that filled:
    39,007 of 60,000 still at A 90 s after the disk grew). Now B closes the session and
    refuses A for the back-off; A resends on its next session, once each."""
    from openmsmq.transfer import store_work as transfer_store
    from openmsmq.transfer.store_work import STORE_RETRY_MIN

    a = net.add("127.0.0.1", routes=(("127.0.0.3", "127.0.0.2"),) if hop else ())
    b = net.add("127.0.0.2", routes=RELAY_C if hop else ())
    dest = net.add("127.0.0.3", trust=hops("127.0.0.2")) if hop else b
    dest.qm.create_queue("private$\\plain")
    if hop:  # B stores what it forwards in its outgoing queue to C
        full = _raising_while_full(monkeypatch, b.transfer.sequence_store, "accept_arrivals")
    else:
        full = _raising_while_full(monkeypatch, transfer_store, "store_arrivals")
    sent = [f"r{i}".encode() for i in range(10)]
    a.qm.send_many(
        f"DIRECT=TCP:{dest.address}\\PRIVATE$\\plain", [MessageRecord(body=x, delivery=1) for x in sent]
    )
    net.settle()
    assert bodies_in(dest.qm, "private$\\plain") == [] and outgoing_count(a.qm) == 10
    assert b.transfer.refusing("127.0.0.1", net.clock.now)
    full[0] = False
    net.advance(STORE_RETRY_MIN + 0.1)
    net.run_until_quiet()
    net.advance(15.0)  # the Session Ack Send Timers
    assert bodies_in(dest.qm, "private$\\plain") == sent
    assert outgoing_count(a.qm) == 0 and outgoing_count(b.qm) == 0


def test_a_receiver_that_could_not_store_does_not_reopen_the_session_itself_during_the_back_off(
    net: Net, monkeypatch: pytest.MonkeyPatch
) -> None:
    """B also has messages for A: A's messages may travel on the session B opened, so B
    reopening it at once would bring A's resend straight back into B's full store, again
    and again. During the back-off B opens no session to A either; afterwards both
    directions finish, every message once and in order."""
    from openmsmq.transfer.store_work import STORE_RETRY_MIN

    a, b = _pair(net)
    a.qm.create_queue(Q, transactional=True)
    full = failing_accepts(b, monkeypatch)
    to_a = "DIRECT=TCP:127.0.0.1\\PRIVATE$\\orders"
    net.connect("127.0.0.2", "127.0.0.1")  # B's session to A: A sends on it too
    send_tx(b.qm, to_a, [b"b0"])
    full[0] = True
    send_tx(a.qm, DEST_B, [b"a0", b"a1"])
    send_tx(b.qm, to_a, [b"b1"])
    for _ in range(50):  # bounded: a reopen loop would never stop moving
        if not net.step():
            break
    else:
        raise AssertionError("B and A kept reopening sessions")
    assert b.transfer.refusing("127.0.0.1", net.clock.now)
    assert "127.0.0.1" not in b.transfer.wanted_peers()
    full[0] = False
    net.advance(STORE_RETRY_MIN + 0.1)
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == [b"a0", b"a1"]
    assert bodies_in(a.qm, Q) == [b"b0", b"b1"]
    assert outgoing_count(a.qm) == 0 and outgoing_count(b.qm) == 0


def test_reject_count_is_persisted_when_a_message_is_rejected(net: Net) -> None:
    """Seed 002: "The IncomingTransactionalTransferInfo.RejectCount ADM attribute MUST be
    set to the TxMessageRejectCount" for a message that is not accepted, so it is stored
    then, and a restart finds it (it came back as 0)."""
    a, b = _pair(net)
    send_tx(a.qm, DEST_B, [b"first"])
    net.run_until_quiet()
    net.blackhole.add(("127.0.0.2", "127.0.0.1"))  # B's OrderAcks are lost
    _send_all(a, 1, 3)
    net.settle()
    net.blackhole.clear()
    net.cut("127.0.0.1", "127.0.0.2")
    net.settle()  # A reconnects and resends the three: duplicates at B
    (live,) = b.transfer.incoming_status()
    assert live.reject_count == 3
    (stored,) = b.qm.incoming_sequences()
    assert stored.reject_count == 3 and stored.tx_sequence_number == 3
    b = net.restart("127.0.0.2")
    assert [s.reject_count for s in b.transfer.incoming_status()] == [3]
    net.run_until_quiet()
    _send_all(a, 1, 1)
    net.run_until_quiet()
    (after,) = b.qm.incoming_sequences()
    assert after.reject_count == 0  # an accepted message resets it


def test_a_transfer_counts_into_the_outgoing_queue_out_of_it_and_into_the_destination(net: Net) -> None:
    """The MS-MQQB paths: the sender's outgoing queue in (sends) and out (OrderAck
    releases), the receiver's queue in (accepted arrivals)."""
    a, b = net.add("127.0.0.1"), net.add("127.0.0.2")
    b.qm.create_queue(Q, transactional=True)
    for t in range(3):
        send_tx(a.qm, DEST_B, [b"%d-%d" % (t, i) for i in range(50)])
    net.run_until_quiet()
    assert outgoing_count(a.qm) == 0
    outgoing = [v for k, v in a.qm.message_counts().items() if k.lower() == DEST_B.lower()]
    assert outgoing == [(150, 150)]
    assert b.qm.message_counts()[Q] == (150, 0)
