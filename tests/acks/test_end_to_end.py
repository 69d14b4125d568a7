"""Acknowledgments across two queue managers, each raised by the real situation.

QM A (127.0.0.1) sends to QM B (127.0.0.2) over MS-MQQB; both run their Transfer wired in
memory (tests/transfer/harness.py: real sessions and packets, a literal clock) with the
acknowledgment listener attached as ``serve()`` attaches it. Each test asserts the class,
the body / identity fields and the queue the acknowledgment lands in: A's admin queue
(MS-MQQB 3.1.7.15) and, for FinalAcks (3.1.7.17 / 3.1.5.7), the journal or the
transactional dead-letter queue at A where the sent message ends.
"""

from __future__ import annotations

import pytest

from openmsmq.observability.metrics import Metrics
from openmsmq.protocol.outgoing import OutgoingSequence
from openmsmq.qm import names
from openmsmq.qm.manager import QueueManager
from openmsmq.store.records import INFINITE, MessageRecord
from openmsmq.transfer.ack_admin import attach_acknowledgments
from openmsmq.transfer.acknowledgments import AckSession, send_transactional_acknowledgment
from openmsmq.wire.constants import AckRequest, MessageClass
from openmsmq.wire.ids import ObjectId, TxSequenceId
from tests.acks.nodes import acked_node as _node
from tests.transfer.harness import Net, Node, outgoing_count

A, B = "127.0.0.1", "127.0.0.2"
ADMIN = f"DIRECT=TCP:{A}\\private$\\admin"
ORDERS = f"DIRECT=TCP:{B}\\private$\\orders"
PA, PR, NA, NR = (
    AckRequest.POS_ARRIVAL,
    AckRequest.POS_RECEIVE,
    AckRequest.NEG_ARRIVAL,
    AckRequest.NEG_RECEIVE,
)


def _pair(
    net: Net, *, orders_tx: bool = True, quota_kb: int | None = None, **cfg: object
) -> tuple[Node, Node]:
    a = _node(net, A)
    b = _node(net, B, **cfg)
    a.qm.create_queue("private$\\admin")
    kw = {} if quota_kb is None else {"quota_kb": quota_kb}
    b.qm.create_queue("private$\\orders", transactional=orders_tx, **kw)  # type: ignore[arg-type]
    return a, b


def _send(qm: QueueManager, dest: str, *, tx: bool = True, **attrs: object) -> MessageRecord:
    m = MessageRecord(**{"body": b"order-1", "label": "o1", "admin_queue": ADMIN, **attrs})  # type: ignore[arg-type]
    if not tx:
        return qm.send(dest, m)
    with qm.begin() as t:
        sent = qm.send(dest, m, t)
    return sent


def _peek(qm: QueueManager, queue: str) -> list[MessageRecord]:
    return qm.peek_range(queue, 0, 1000)


def _admin(a: Node) -> list[MessageRecord]:
    return _peek(a.qm, "private$\\admin")


def _check_admin(ack: MessageRecord, sent: MessageRecord, a: Node, cls: int, *, body: bool) -> None:
    assert ack.message_class == cls
    # 3.1.7.15: CorrelationIdentifier = the original Identifier, ResponseQueue = its destination.
    assert ack.correlation_id == ObjectId(a.qm.guid, sent.id_uniquifier).encode()
    assert ack.response_queue.lower() == ORDERS.lower()
    assert ack.body == (sent.body if body else b"")
    assert ack.ack_flags == 0 and not ack.positive_journaling and not ack.negative_journaling


def _final_ack_landed(a: Node, sent: MessageRecord, queue: str, cls: int) -> MessageRecord:
    """The sent message, settled by its FinalAck, is in ``queue`` at A with ``cls``."""
    [m] = _peek(a.qm, queue)
    assert (m.id_lineage, m.id_uniquifier) == (a.qm.guid, sent.id_uniquifier)
    assert m.message_class == cls
    assert _peek(a.qm, names.AWAITING_FINAL_ACK) == []
    return m


def _run(net: Net, rounds: int = 10) -> None:
    net.settle()
    for _ in range(rounds):
        net.advance(0.6)


# ---------------------------------------------------------------- positive acknowledgments


def test_ack_reach_queue(net: Net) -> None:
    a, b = _pair(net)
    sent = _send(a.qm, ORDERS, ack_flags=PA)
    net.run_until_quiet()
    assert [m.body for m in _peek(b.qm, "private$\\orders")] == [b"order-1"]
    [ack] = _admin(a)
    _check_admin(ack, sent, a, MessageClass.ACK_REACH_QUEUE, body=False)


def test_ack_receive_and_positive_final_ack_journals_at_the_sender(net: Net) -> None:
    a, b = _pair(net)
    sent = _send(a.qm, ORDERS, ack_flags=PR | NR, positive_journaling=True)
    net.run_until_quiet()
    # OrderAck'ed, the message waits for its FinalAck at A (durably, aside).
    [waiting] = _peek(a.qm, names.AWAITING_FINAL_ACK)
    assert waiting.id_uniquifier == sent.id_uniquifier
    with b.qm.begin() as tx:
        assert b.qm.receive("private$\\orders", tx=tx).body == b"order-1"
    net.run_until_quiet()
    [ack] = _admin(a)
    _check_admin(ack, sent, a, MessageClass.ACK_RECEIVE, body=False)
    # FinalAck AckReceive + JP: MS-MQQB 3.1.5.7 moves it to the system journal.
    _final_ack_landed(a, sent, names.SYSTEM_JOURNAL, sent.message_class)


# ---------------------------------------------------------------- NACKs on arrival at B


def test_nack_bad_destination_queue(net: Net) -> None:
    """MS-MQQB 3.1.5.8.2 refuses a message for a queue that does not exist before
    Transactional Message Processing (3.1.5.8.6): B's incoming sequence never sees it (no
    state, no OrderAck); A takes it out of its outgoing queue when the FinalAck comes
    (3.1.5.7)."""
    a, b = _pair(net, send_insecure_nacks=True)
    sent = _send(a.qm, f"DIRECT=TCP:{B}\\private$\\nosuch", ack_flags=NA, negative_journaling=True)
    net.run_until_quiet()  # settled by its FinalAck: the outgoing queue empties
    [ack] = _admin(a)
    assert ack.message_class == MessageClass.NACK_BAD_DST_Q
    assert ack.correlation_id == ObjectId(a.qm.guid, sent.id_uniquifier).encode()
    assert ack.body == b"order-1"
    _final_ack_landed(a, sent, names.DEADXACT, MessageClass.NACK_BAD_DST_Q)
    assert b.transfer.incoming_status() == [] and b.qm.incoming_sequences() == []  # never accepted
    [out] = a.transfer.outgoing_status()
    assert out.last_acked is None  # no OrderAck: the FinalAck took it out


def test_arrival_rejections_are_counted_by_class_once_durable(net: Net) -> None:
    a, b = _pair(net, orders_tx=False)
    b.qm.metrics = b.qm.store.metrics = metrics = Metrics()
    _send(a.qm, f"DIRECT=TCP:{B}\\private$\\nosuch")
    _send(a.qm, ORDERS)  # a transactional message for a non-transactional queue
    _send(a.qm, ORDERS)
    net.run_until_quiet()
    value = metrics.registry.get_sample_value
    name = "openmsmq_messages_rejected_on_arrival_total"
    assert value(name, {"class": "NACK_BAD_DST_Q"}) == 1
    assert value(name, {"class": "NACK_NOT_TRANSACTIONAL_Q"}) == 2
    assert value("openmsmq_messages_accepted_total", {}) == 0


def test_nack_bad_destination_queue_admin_needs_send_insecure_nacks(net: Net) -> None:
    a, _ = _pair(net)
    sent = _send(a.qm, f"DIRECT=TCP:{B}\\private$\\nosuch", ack_flags=NA, negative_journaling=True)
    net.run_until_quiet()
    assert _admin(a) == []  # 3.1.7.15: insecure class, SendInsecureNacks FALSE
    _final_ack_landed(a, sent, names.DEADXACT, MessageClass.NACK_BAD_DST_Q)  # FinalAck still goes


def test_nack_access_denied(net: Net) -> None:
    """B's queue admits only another QM as sender: A's message is refused on receipt
    (MS-MQQB 3.1.5.8.3, before the acceptance rule: B's sequence does not move), nothing
    is stored at B, A settles it by its FinalAck."""
    a = _node(net, A)
    b = _node(net, B, send_insecure_nacks=True)
    a.qm.create_queue("private$\\admin")
    other = "0f0e0d0c-0b0a-0908-0706-050403020100"
    b.qm.create_queue("private$\\orders", transactional=True, allowed_senders=[other])
    sent = _send(a.qm, ORDERS, ack_flags=NA, negative_journaling=True)
    net.run_until_quiet()
    assert _peek(b.qm, "private$\\orders") == []
    [ack] = _admin(a)
    _check_admin(ack, sent, a, MessageClass.NACK_ACCESS_DENIED, body=True)
    _final_ack_landed(a, sent, names.DEADXACT, MessageClass.NACK_ACCESS_DENIED)
    assert b.qm.incoming_sequences() == []  # refused before the acceptance rule
    [out] = a.transfer.outgoing_status()
    assert (out.in_flight, out.last_unacked, out.last_acked) == (0, None, None)  # settled, not OrderAck'ed


def test_access_granted_once_the_sender_is_allowed(net: Net) -> None:
    a = _node(net, A)
    b = _node(net, B)
    a.qm.create_queue("private$\\admin")
    b.qm.create_queue("private$\\orders", transactional=True, allowed_senders=[str(a.qm.guid).upper()])
    _send(a.qm, ORDERS, ack_flags=NA)
    net.run_until_quiet()
    assert [m.body for m in _peek(b.qm, "private$\\orders")] == [b"order-1"]
    assert _admin(a) == []
    # Taking A off the list (the queue now admits only another QM) refuses its next message.
    b.qm.set_queue_properties("private$\\orders", allowed_senders="0f0e0d0c-0b0a-0908-0706-050403020100")
    _send(a.qm, ORDERS, ack_flags=NA)
    net.run_until_quiet()
    assert len(_peek(b.qm, "private$\\orders")) == 1
    assert [m.message_class for m in _admin(a)] == []  # insecure class: no admin ack by default


def test_nack_access_denied_admin_needs_send_insecure_nacks(net: Net) -> None:
    a = _node(net, A)
    b = _node(net, B)
    a.qm.create_queue("private$\\admin")
    b.qm.create_queue(
        "private$\\orders", transactional=True, allowed_senders=["0f0e0d0c-0b0a-0908-0706-050403020100"]
    )
    sent = _send(a.qm, ORDERS, ack_flags=NA, negative_journaling=True)
    net.run_until_quiet()
    assert _admin(a) == []  # 3.1.7.15: ACCESS_DENIED is an insecure class
    _final_ack_landed(a, sent, names.DEADXACT, MessageClass.NACK_ACCESS_DENIED)


def test_nack_not_transactional_queue(net: Net) -> None:
    a, b = _pair(net, orders_tx=False)
    sent = _send(a.qm, ORDERS, ack_flags=NA, negative_journaling=True)
    net.run_until_quiet()
    assert _peek(b.qm, "private$\\orders") == []
    [ack] = _admin(a)
    _check_admin(ack, sent, a, MessageClass.NACK_NOT_TRANSACTIONAL_Q, body=True)
    _final_ack_landed(a, sent, names.DEADXACT, MessageClass.NACK_NOT_TRANSACTIONAL_Q)


def test_nack_not_transactional_message(net: Net) -> None:
    a, b = _pair(net)
    sent = _send(a.qm, ORDERS, tx=False, ack_flags=NA, delivery=1)
    net.run_until_quiet()
    assert _peek(b.qm, "private$\\orders") == []
    [ack] = _admin(a)
    _check_admin(ack, sent, a, MessageClass.NACK_NOT_TRANSACTIONAL_MSG, body=True)
    assert ack.delivery == 1


def test_a_non_transactional_dead_letter_message_rejected_by_b_lands_in_bs_dead_letter_queue(
    net: Net,
) -> None:
    """A non-transactional message sent with negative source journaling that the
    destination QM rejects goes to that QM's dead-letter queue with the class (MS-MQQB
    3.1.5.8.8 for the quota; MSMQ: the dead-letter queue of the computer that could not
    deliver it); one sent without it is dropped there. A holds none of them."""
    a, b = _pair(net, quota_kb=1)
    b.qm.create_queue("private$\\plain", quota_kb=1)
    sent = [
        _send(a.qm, ORDERS, tx=False, delivery=1, negative_journaling=True),  # into a transactional queue
        _send(a.qm, f"DIRECT=TCP:{B}\\private$\\nosuch", tx=False, delivery=1, negative_journaling=True),
        _send(a.qm, f"DIRECT=TCP:{B}\\private$\\plain", tx=False, body=b"x" * 2000, negative_journaling=True),
        _send(a.qm, ORDERS, tx=False, delivery=1),  # no dead_letter: dropped
    ]
    net.run_until_quiet()
    dead = sorted((m.id_uniquifier, m.message_class) for m in _peek(b.qm, names.DEADLETTER))
    assert dead == sorted(
        [
            (sent[0].id_uniquifier, MessageClass.NACK_NOT_TRANSACTIONAL_MSG),
            (sent[1].id_uniquifier, MessageClass.NACK_BAD_DST_Q),
            (sent[2].id_uniquifier, MessageClass.NACK_Q_EXCEED_QUOTA),
        ]
    )
    assert _peek(a.qm, names.DEADLETTER) == [] and outgoing_count(a.qm) == 0


def test_nack_quota_exceeded(net: Net) -> None:
    a, b = _pair(net, quota_kb=1)
    first = _send(a.qm, ORDERS)
    big = MessageRecord(body=b"x" * 1500, admin_queue=ADMIN, ack_flags=NA, negative_journaling=True)
    with a.qm.begin() as tx:
        sent = a.qm.send(ORDERS, big, tx)
    net.run_until_quiet()
    assert [m.id_uniquifier for m in _peek(b.qm, "private$\\orders")] == [first.id_uniquifier]
    [ack] = _admin(a)
    assert ack.message_class == MessageClass.NACK_Q_EXCEED_QUOTA
    assert ack.correlation_id == ObjectId(a.qm.guid, sent.id_uniquifier).encode()
    _final_ack_landed(a, sent, names.DEADXACT, MessageClass.NACK_Q_EXCEED_QUOTA)


def test_nack_reach_queue_timeout_on_arrival(net: Net) -> None:
    """Message Expiration comes before Transactional Message Processing (MS-MQQB 3.1.5.8)
    and raises only the administration NACK (3.1.7.1.2): no FinalAck (2.2.5 lists no
    NACK_REACH_QUEUE_TIMEOUT for it), B's sequence untouched. The sender's own expiry of
    the message then dead-letters it there."""
    a, b = _pair(net)
    b.qm.clock = lambda: net.clock.now + 60  # B's clock is a minute ahead
    sent = _send(a.qm, ORDERS, ack_flags=NA, negative_journaling=True, time_to_reach_queue=5)
    for _ in range(5):  # 3 s: A sends it in time by its clock; B finds it expired
        net.advance(0.6)
    assert _peek(b.qm, "private$\\orders") == [] and b.qm.incoming_sequences() == []
    [ack] = _admin(a)
    _check_admin(ack, sent, a, MessageClass.NACK_REACH_QUEUE_TIMEOUT, body=True)
    # No FinalAck came: the message still waits in A's outgoing queue.
    assert outgoing_count(a.qm) == 1 and _peek(a.qm, names.DEADXACT) == []
    net.run_until_quiet()  # A's own expiry (TimeToReachQueue at A) ends it
    [dead] = _peek(a.qm, names.DEADXACT)
    assert dead.id_uniquifier == sent.id_uniquifier
    assert dead.message_class == MessageClass.NACK_REACH_QUEUE_TIMEOUT


def test_nack_reach_queue_timeout_in_the_outgoing_queue(net: Net) -> None:
    a, _ = _pair(net)
    sent = _send(a.qm, ORDERS, ack_flags=NA, time_to_reach_queue=5)
    assert a.qm.expire(net.clock.now + 60) == 1  # expired before it was ever sent
    [ack] = _admin(a)
    _check_admin(ack, sent, a, MessageClass.NACK_REACH_QUEUE_TIMEOUT, body=True)
    [dead] = _peek(a.qm, names.DEADXACT)
    assert dead.message_class == MessageClass.NACK_REACH_QUEUE_TIMEOUT


def test_nack_hop_count_exceeded(net: Net) -> None:
    # A route loop: A sends 127.0.0.9 to B, B sends it back to A.
    a = _node(net, A, routes=(("127.0.0.9", B),))
    _node(net, B, routes=(("127.0.0.9", A),))
    a.qm.create_queue("private$\\admin")
    sent = _send(a.qm, "DIRECT=TCP:127.0.0.9\\private$\\q", ack_flags=NA)
    _run(net)
    [ack] = _admin(a)
    assert ack.message_class == MessageClass.NACK_HOP_COUNT_EXCEEDED
    assert ack.correlation_id == ObjectId(a.qm.guid, sent.id_uniquifier).encode()
    assert ack.response_queue.lower() == "direct=tcp:127.0.0.9\\private$\\q"
    assert ack.body == b"order-1"


def test_hop_count_final_ack_goes_to_the_sender_through_the_intermediates(net: Net) -> None:
    """MS-MQQB 3.1.5.8.2: the QM that drops a message whose hop count would exceed 0x1D
    sends the negative FinalAck "if the packet contains a TransactionHeader", also when
    the previous hop is not the sender: here B and C bounce it between them (a route
    loop behind B) and the FinalAck goes back by the sender's GUID, through B, to A,
    which dead-letters it (it was sent with dead_letter)."""
    C = "127.0.0.3"
    a = _node(net, A, routes=(("127.0.0.9", B),))
    _node(net, B, routes=(("127.0.0.9", C),))
    _node(net, C, routes=(("127.0.0.9", B),))
    a.qm.create_queue("private$\\admin")
    sent = _send(a.qm, "DIRECT=TCP:127.0.0.9\\private$\\q", negative_journaling=True)
    net.run_until_quiet()
    assert outgoing_count(a.qm) == 0
    _final_ack_landed(a, sent, names.DEADXACT, MessageClass.NACK_HOP_COUNT_EXCEEDED)


# ---------------------------------------------------------------- NACKs on removal at B


def test_nack_queue_deleted(net: Net) -> None:
    a, b = _pair(net, orders_tx=False)
    b.qm.create_queue("private$\\tx", transactional=True)
    sent = _send(a.qm, f"DIRECT=TCP:{B}\\private$\\tx", ack_flags=NR, negative_journaling=True)
    net.run_until_quiet()
    b.qm.delete_queue("private$\\tx")
    net.run_until_quiet()
    [ack] = _admin(a)
    assert ack.message_class == MessageClass.NACK_Q_DELETED
    assert ack.correlation_id == ObjectId(a.qm.guid, sent.id_uniquifier).encode()
    _final_ack_landed(a, sent, names.DEADXACT, MessageClass.NACK_Q_DELETED)


def test_nack_queue_purged(net: Net) -> None:
    a, b = _pair(net)
    sent = _send(a.qm, ORDERS, ack_flags=NR, negative_journaling=True)
    net.run_until_quiet()
    assert b.qm.purge_queue("private$\\orders") == 1
    net.run_until_quiet()
    [ack] = _admin(a)
    _check_admin(ack, sent, a, MessageClass.NACK_Q_PURGED, body=True)
    _final_ack_landed(a, sent, names.DEADXACT, MessageClass.NACK_Q_PURGED)


def test_nack_receive_timeout(net: Net) -> None:
    a, b = _pair(net)
    sent = _send(a.qm, ORDERS, ack_flags=NR, negative_journaling=True, time_to_be_received=30)
    net.run_until_quiet()
    assert len(_peek(b.qm, "private$\\orders")) == 1
    assert b.qm.expire(net.clock.now + 60) == 1
    net.run_until_quiet()
    [ack] = _admin(a)
    _check_admin(ack, sent, a, MessageClass.NACK_RECEIVE_TIMEOUT, body=True)
    _final_ack_landed(a, sent, names.DEADXACT, MessageClass.NACK_RECEIVE_TIMEOUT)


def test_nack_receive_rejected(net: Net) -> None:
    a, b = _pair(net)
    sent = _send(a.qm, ORDERS, ack_flags=NR, negative_journaling=True)
    net.run_until_quiet()
    with b.qm.begin() as tx:
        got = b.qm.receive("private$\\orders", tx=tx)
        tx.set_dequeue_reason(got.lookup_id, MessageClass.NACK_RECEIVE_REJECTED)
    net.run_until_quiet()
    [ack] = _admin(a)
    _check_admin(ack, sent, a, MessageClass.NACK_RECEIVE_REJECTED, body=True)
    _final_ack_landed(a, sent, names.DEADXACT, MessageClass.NACK_RECEIVE_REJECTED)


# ---------------------------------------------------------------- retention, restart, bad input


def test_awaiting_final_ack_survives_a_sender_restart(net: Net) -> None:
    a, b = _pair(net)
    sent = _send(a.qm, ORDERS, ack_flags=NR, negative_journaling=True)
    net.run_until_quiet()
    assert len(_peek(a.qm, names.AWAITING_FINAL_ACK)) == 1
    a = net.restart(A)
    attach_acknowledgments(a.qm, session_of=a.transfer.ack_session_for)
    assert len(_peek(a.qm, names.AWAITING_FINAL_ACK)) == 1
    b.qm.purge_queue("private$\\orders")
    net.run_until_quiet()
    _final_ack_landed(a, sent, names.DEADXACT, MessageClass.NACK_Q_PURGED)


def test_final_ack_destination_survives_a_receiver_restart(net: Net) -> None:
    a, b = _pair(net)
    sent = _send(a.qm, ORDERS, ack_flags=NR, negative_journaling=True)
    net.run_until_quiet()
    b = net.restart(B)
    attach_acknowledgments(b.qm, session_of=b.transfer.ack_session_for)
    b.qm.purge_queue("private$\\orders")
    net.run_until_quiet()
    _final_ack_landed(a, sent, names.DEADXACT, MessageClass.NACK_Q_PURGED)


def test_without_journaling_the_final_ack_drops_the_waiting_message(net: Net) -> None:
    a, b = _pair(net)
    _send(a.qm, ORDERS, ack_flags=NR, final_ack_required=True)
    net.run_until_quiet()
    assert len(_peek(a.qm, names.AWAITING_FINAL_ACK)) == 1
    b.qm.purge_queue("private$\\orders")
    net.run_until_quiet()
    assert _peek(a.qm, names.AWAITING_FINAL_ACK) == []
    assert _peek(a.qm, names.DEADXACT) == [] and _peek(a.qm, names.SYSTEM_JOURNAL) == []


def test_final_ack_for_an_unknown_message_is_dropped(net: Net, caplog: pytest.LogCaptureFixture) -> None:
    a, b = _pair(net)
    kept = _send(a.qm, ORDERS, ack_flags=NR, negative_journaling=True)
    net.run_until_quiet()
    # B acknowledges a message A never sent (unknown MessageID / sequence number).
    bogus = MessageRecord(
        transactional=True, tx_sequence_id=kept.tx_sequence_id or 1 << 32 | 7, tx_sequence_number=99,
        tx_previous_sequence_number=98, id_lineage=a.qm.guid, id_uniquifier=424242,
        source_machine=a.qm.guid, destination_queue=ORDERS,
    )  # fmt: skip
    assert send_transactional_acknowledgment(
        b.qm, MessageClass.NACK_Q_PURGED, AckSession(True, A, a.qm.guid), user_message=bogus
    )
    with caplog.at_level("WARNING", logger="openmsmq.transfer"):
        net.run_until_quiet()
    assert "no message waits for it" in caplog.text
    # Nothing stored moved; the session still works.
    assert len(_peek(a.qm, names.AWAITING_FINAL_ACK)) == 1
    assert _peek(a.qm, names.DEADXACT) == []
    second = _send(a.qm, ORDERS, ack_flags=PA)
    net.run_until_quiet()
    assert [m.id_uniquifier for m in _peek(b.qm, "private$\\orders")] == [
        kept.id_uniquifier,
        second.id_uniquifier,
    ]


def test_a_backlog_rejected_by_a_deleted_queue_is_settled_in_batches_and_logged_once(
    net: Net, caplog: pytest.LogCaptureFixture
) -> None:
    """B's queue is deleted with 400 messages on their way: each is refused on receipt
    (NACK_BAD_DST_Q) and its negative FinalAck comes back to A, which settles them a
    batch per store transaction (one commit each was the drain's bottleneck): those sent
    with dead_letter land in A's transactional dead-letter queue, the others are
    deleted (MS-MQQB 3.1.5.7: only JN dead-letters). B logs the first refusal and sums
    up the rest; every FinalAck finds its message (not yet OrderAck'ed: none is)."""
    a, b = _pair(net)
    b.qm.delete_queue("private$\\orders")
    for t in range(8):
        with a.qm.begin() as tx:
            a.qm.send_many(
                ORDERS,
                [MessageRecord(body=b"%d-%d" % (t, i), negative_journaling=t % 2 == 0) for i in range(50)],
                tx,
            )
    commits = a.qm.store.stats.batches
    with caplog.at_level("INFO"):
        net.run_until_quiet()
    assert outgoing_count(a.qm) == 0
    dead = _peek(a.qm, names.DEADXACT)
    assert sorted(m.body for m in dead) == sorted(b"%d-%d" % (t, i) for t in (0, 2, 4, 6) for i in range(50))
    assert {m.message_class for m in dead} == {MessageClass.NACK_BAD_DST_Q}
    assert _peek(a.qm, names.AWAITING_FINAL_ACK) == []
    # 400 FinalAcks (and the releases, the sends): far fewer commits than FinalAcks.
    assert a.qm.store.stats.batches - commits < 40
    refused = [r for r in caplog.records if "refused on receipt" in r.getMessage()]
    assert len(refused) == 1
    unmatched = [r for r in caplog.records if "no message waits for it" in r.getMessage()]
    assert unmatched == []


def test_a_final_ack_asks_only_the_sequence_that_holds_it(net: Net, monkeypatch: pytest.MonkeyPatch) -> None:
    """With many outgoing queues, each FinalAck is matched in the sequence that holds
    its TxSequenceID, not offered to every queue's (which cost about 3 us per queue per
    FinalAck: 4,000 queues made a burst of FinalAcks crawl). Here 30 queues of B do not
    exist: every message comes back as a negative FinalAck and lands in A's
    dead-letter queue once."""
    asked: list[object] = []
    real = OutgoingSequence.final_ack_received

    def counting(self: OutgoingSequence, *args: object) -> object:
        asked.append(self)
        return real(self, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(OutgoingSequence, "final_ack_received", counting)
    a, _b = _pair(net)
    for q in range(30):
        batch = [MessageRecord(body=b"%d-%d" % (q, i), negative_journaling=True) for i in range(4)]
        with a.qm.begin() as tx:
            a.qm.send_many(f"DIRECT=TCP:{B}\\private$\\missing{q}", batch, tx)
    net.run_until_quiet()
    assert outgoing_count(a.qm) == 0
    dead = _peek(a.qm, names.DEADXACT)
    assert len(dead) == 120 and len({m.body for m in dead}) == 120
    assert {m.message_class for m in dead} == {MessageClass.NACK_BAD_DST_Q}
    assert len(asked) <= 120  # one sequence per FinalAck (before: up to 30 each)


def test_order_ack_for_an_unknown_sequence_is_dropped(net: Net) -> None:
    a, b = _pair(net)
    kept = _send(a.qm, ORDERS, ack_flags=NR, negative_journaling=True)
    net.run_until_quiet()
    unknown = TxSequenceId(0x1234, 99)
    session = AckSession(True, A, a.qm.guid, outgoing_tx_sequence_id=unknown, incoming_tx_sequence_number=7)
    assert send_transactional_acknowledgment(b.qm, MessageClass.ORDER_ACK, session)
    net.run_until_quiet()
    # Nothing released or moved at A; the sessions keep working.
    assert [m.id_uniquifier for m in _peek(a.qm, names.AWAITING_FINAL_ACK)] == [kept.id_uniquifier]
    second = _send(a.qm, ORDERS)
    net.run_until_quiet()
    assert len(_peek(b.qm, "private$\\orders")) == 2
    assert second.id_uniquifier != kept.id_uniquifier


def test_receive_acknowledgment_is_written_in_the_receive_commit(net: Net) -> None:
    a, b = _pair(net)
    _send(a.qm, ORDERS, ack_flags=NR | PR, negative_journaling=True)
    net.run_until_quiet()
    listener = attach_acknowledgments(b.qm)  # a second listener that "crashes" after the commit
    calls: list[int] = []

    def crash(events: list[object]) -> None:
        calls.append(len(events))

    b.qm.removals._listeners[-1] = crash  # what runs after the commit is lost in a crash
    b.qm.removals.hooks.pop(listener)
    with b.qm.begin() as tx:
        b.qm.receive("private$\\orders", tx=tx)
    assert calls == [1]
    # The first listener's admin ACK and FinalAck are already durable in B's outgoing
    # queues, written by the receive's own commit.
    out = [r for r in b.qm.list_queues(include_system=True) if r.queue_type == 4 and r.msg_count]
    assert sorted(r.display_name.lower() for r in out) == sorted(
        [ADMIN.lower(), f"direct=tcp:{A}\\private$\\order_queue$"]
    )


@pytest.mark.parametrize("expiry_pass_first", [False, True], ids=["at-send", "pass-first"])
def test_a_message_expired_before_it_was_sent_is_not_sent(net: Net, expiry_pass_first: bool) -> None:
    # MS-MQQB 3.1.7.1.2. B is not there yet: A loads m1..m3 and waits; m2's
    # TimeToReachQueue passes meanwhile. Whether A's expiry pass or its transfer notices
    # first, m2 is NACKed and dead-lettered once, by A, and never sent; m3 follows m1.
    a = _node(net, A)
    a.qm.create_queue("private$\\admin")
    _send(a.qm, ORDERS)
    expiring = _send(a.qm, ORDERS, ack_flags=NA, negative_journaling=True, time_to_reach_queue=2)
    _send(a.qm, ORDERS)
    net.settle()  # loaded, no session to B
    net.clock.now += 5
    if expiry_pass_first:
        assert a.qm.expire(net.clock.now) == 1
    b = _node(net, B)
    b.qm.create_queue("private$\\orders", transactional=True)
    net.run_until_quiet()
    got = _peek(b.qm, "private$\\orders")
    assert [m.id_uniquifier for m in got] == [expiring.id_uniquifier - 1, expiring.id_uniquifier + 1]
    [dead] = _peek(a.qm, names.DEADXACT)
    assert dead.id_uniquifier == expiring.id_uniquifier
    assert dead.message_class == MessageClass.NACK_REACH_QUEUE_TIMEOUT
    [ack] = _admin(a)  # one NACK: A's, none from B (it never saw m2)
    assert ack.message_class == MessageClass.NACK_REACH_QUEUE_TIMEOUT
    assert ack.id_lineage == a.qm.guid
    assert ack.correlation_id == ObjectId(a.qm.guid, expiring.id_uniquifier).encode()


@pytest.mark.parametrize("restart", [False, True], ids=["loaded-after", "after-a-restart"])
@pytest.mark.parametrize("expired", [(1,), (0,), (0, 1)], ids=["middle", "first", "first-two"])
def test_messages_expired_before_they_were_loaded_leave_no_gap(
    net: Net, restart: bool, expired: tuple[int, ...]
) -> None:
    # MS-MQQB 3.1.7.1.3: the committed PreviousTxSequenceNumber of the message after an
    # expired one names a message B never gets; sent as committed, B would refuse it (and
    # all after it) for good. A's transfer bridges over what is no longer in the queue.
    a = _node(net, A)
    a.qm.create_queue("private$\\admin")
    sent = [_send(a.qm, ORDERS, time_to_reach_queue=2 if i in expired else INFINITE) for i in range(3)]
    net.clock.now += 5
    assert a.qm.expire(net.clock.now) == len(expired)  # before the transfer loaded them
    if restart:
        a = net.restart(A)
    b = _node(net, B)
    b.qm.create_queue("private$\\orders", transactional=True)
    net.run_until_quiet()
    want = [m.id_uniquifier for i, m in enumerate(sent) if i not in expired]
    assert [m.id_uniquifier for m in _peek(b.qm, "private$\\orders")] == want
    assert outgoing_count(a.qm) == 0


@pytest.mark.parametrize("resend", ["reconnect", "timer"])
def test_a_sent_message_that_expires_before_its_order_ack_is_bridged_on_resend(net: Net, resend: str) -> None:
    # m1..m3 went out but never arrived (the link dropped them); m2 expires and A's expiry
    # pass dead-letters it; the resend (after a reconnect, which reloads the queue, or by
    # the Transactional Ack Wait Timer on the open session, which reads the retained
    # messages back) bridges over it (3.1.7.1.3).
    a = _node(net, A)
    a.qm.create_queue("private$\\admin")
    b = _node(net, B)
    b.qm.create_queue("private$\\orders", transactional=True)
    first = _send(a.qm, ORDERS)
    net.run_until_quiet()  # the session is open
    net.blackhole.add((A, B))
    sent = [
        _send(
            a.qm,
            ORDERS,
            ack_flags=NA,
            negative_journaling=True,
            time_to_reach_queue=2 if i == 1 else INFINITE,
        )
        for i in range(3)
    ]
    net.advance(0.2)  # A finds its outgoing queue and sends them, into the void
    [t] = a.transfer.outgoing.values()
    assert len(t.seq.unacked) == 3 and all(v is None for v in t.messages.values())  # sent
    net.clock.now += 5
    assert a.qm.expire(net.clock.now) == 1  # A's expiry pass, between two sends
    net.blackhole.discard((A, B))
    if resend == "reconnect":
        net.cut(A, B)
    else:  # the timer's resend alone, before the session's own timers close it
        a.transfer.sender.on_sequence_events(t, t.seq.handle_timer(net.clock.now + 31), net.clock.now)
        net.settle()
        assert len(_peek(b.qm, "private$\\orders")) == 3  # m3 accepted: bridged to m1
    net.run_until_quiet()
    got = [m.id_uniquifier for m in _peek(b.qm, "private$\\orders")]
    assert got == [first.id_uniquifier, sent[0].id_uniquifier, sent[2].id_uniquifier]
    assert outgoing_count(a.qm) == 0
    assert [m.message_class for m in _admin(a)] == [MessageClass.NACK_REACH_QUEUE_TIMEOUT]


def test_every_rejection_class_is_dead_lettered_at_the_sender_and_counted_in_status(net: Net) -> None:
    """B (and an intermediate) reject A's transactional messages for each reason the code
    has: each, sent with dead_letter, ends in A's transactional dead-letter queue with its
    class (MS-MQQB 3.1.5.7), and A's status counts the negative FinalAcks per destination
    by class. NACK_REACH_QUEUE_TIMEOUT on receipt raises no FinalAck (3.1.7.1.2, 2.2.5):
    A's own expiry of the message dead-letters it, and the status does not count it."""
    from openmsmq.remote.status import TransferSnapshot, collect_status

    a = _node(net, A, routes=(("127.0.0.9", B),))
    b = _node(net, B, routes=(("127.0.0.9", "127.0.0.3"),))
    _node(net, "127.0.0.3", routes=(("127.0.0.9", B),))  # a route loop behind B
    b.qm.create_queue("private$\\plain")
    b.qm.create_queue(
        "private$\\guarded", transactional=True, allowed_senders=["0f0e0d0c-0b0a-0908-0706-050403020100"]
    )
    b.qm.create_queue("private$\\small", transactional=True, quota_kb=1)
    b.qm.create_queue("private$\\orders", transactional=True)
    cases = {
        f"DIRECT=TCP:{B}\\private$\\nosuch": MessageClass.NACK_BAD_DST_Q,
        f"DIRECT=TCP:{B}\\private$\\plain": MessageClass.NACK_NOT_TRANSACTIONAL_Q,
        f"DIRECT=TCP:{B}\\private$\\guarded": MessageClass.NACK_ACCESS_DENIED,
        f"DIRECT=TCP:{B}\\private$\\small": MessageClass.NACK_Q_EXCEED_QUOTA,
        "DIRECT=TCP:127.0.0.9\\private$\\q": MessageClass.NACK_HOP_COUNT_EXCEEDED,
    }
    for dest in cases:
        body = b"x" * 2000 if dest.endswith("small") else dest.encode()
        with a.qm.begin() as tx:
            a.qm.send(dest, MessageRecord(body=body, negative_journaling=True), tx)
    net.run_until_quiet()
    # Expired on receipt (B's clock runs a minute ahead): no FinalAck; A's expiry ends it.
    b.qm.clock = lambda: net.clock.now + 60
    with a.qm.begin() as tx:
        late = a.qm.send(
            ORDERS, MessageRecord(body=b"late", negative_journaling=True, time_to_reach_queue=5), tx
        )
    net.run_until_quiet()
    dead = {m.destination_queue.lower(): m.message_class for m in _peek(a.qm, names.DEADXACT)}
    assert dead == {
        **{d.lower(): c for d, c in cases.items()},
        ORDERS.lower(): MessageClass.NACK_REACH_QUEUE_TIMEOUT,
    }
    assert [m.id_uniquifier for m in _peek(a.qm, names.DEADXACT) if m.destination_queue == ORDERS] == [
        late.id_uniquifier
    ]
    snapshot = TransferSnapshot(tuple(a.transfer.outgoing_status()), tuple(a.transfer.incoming_status()))
    status = collect_status(a.qm, net.clock.now, snapshot).to_dict()
    counted = {o["format_name"].lower(): o["rejected"] for o in status["outgoing"] if o["rejected"]}
    names_ = {
        MessageClass.NACK_BAD_DST_Q: "NACK_BAD_DST_Q",
        MessageClass.NACK_NOT_TRANSACTIONAL_Q: "NACK_NOT_TRANSACTIONAL_Q",
        MessageClass.NACK_ACCESS_DENIED: "NACK_ACCESS_DENIED",
        MessageClass.NACK_Q_EXCEED_QUOTA: "NACK_Q_EXCEED_QUOTA",
        MessageClass.NACK_HOP_COUNT_EXCEEDED: "NACK_HOP_COUNT_EXCEEDED",
    }
    assert counted == {d.lower(): {names_[c]: 1} for d, c in cases.items()}
