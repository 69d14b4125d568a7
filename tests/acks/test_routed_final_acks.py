"""FinalAcks to a sender behind an intermediate QM (MS-MQQB 3.1.7.17).

A (127.0.0.1) reaches B (127.0.0.2) through C (127.0.0.3). The message arrives at B on
C's session, so B's FinalAck goes to ``PRIVATE=<A's GUID>\\00000004`` (not a direct
name): B sends it back to the previous hop recorded with the incoming sequence, and C
passes it on to A by A's GUID (A's session, the address of A's last session, or a
static route for A's GUID). A then settles its copy (MS-MQQB 3.1.5.7).

The same GUID routes carry an application's ``PRIVATE=<guid>\\n`` names, which the
destination QM serves by queue number.
"""

from __future__ import annotations

import logging
import uuid

import pytest

from openmsmq.qm import names
from openmsmq.remote.status import outgoing_state
from openmsmq.store.records import MessageRecord
from openmsmq.transfer.ack_admin import attach_acknowledgments
from openmsmq.transfer.trust import TrustConfig
from openmsmq.wire.constants import AckRequest, MessageClass
from tests.acks.nodes import acked_node
from tests.transfer.harness import Net, Node, outgoing_count

A, B, C = "127.0.0.1", "127.0.0.2", "127.0.0.3"
#: These QMs relay for each other and take relayed messages from each other (the trust
#: rules, docs/security.md, are tested in tests/transfer/test_trust.py).
RELAYS = TrustConfig(allow_relay=True, intermediate_hops=("127.0.0.0/8",))


def _node(net: Net, address: str, **cfg: object) -> Node:
    return acked_node(net, address, trust=RELAYS, **cfg)


ADMIN = f"DIRECT=TCP:{A}\\private$\\admin"
ORDERS = f"DIRECT=TCP:{B}\\private$\\orders"


def _routed(net: Net, *, c_routes: tuple[tuple[str, str], ...] = ()) -> tuple[Node, Node, Node]:
    a = _node(net, A, routes=((B, C),))
    c = _node(net, C, routes=c_routes)
    b = _node(net, B)
    a.qm.create_queue("private$\\admin")
    b.qm.create_queue("private$\\orders", transactional=True)
    return a, b, c


def _send(a: Node, **attrs: object) -> MessageRecord:
    m = MessageRecord(body=b"order-1", admin_queue=ADMIN, **attrs)  # type: ignore[arg-type]
    with a.qm.begin() as tx:
        return a.qm.send(ORDERS, m, tx)


def _receive_at_b(b: Node) -> None:
    with b.qm.begin() as tx:
        assert b.qm.receive("private$\\orders", tx=tx).body == b"order-1"


def _peek(node: Node, queue: str) -> list[MessageRecord]:
    return node.qm.peek_range(queue, 0, 1000)


def _final_ack_queues(node: Node) -> list[str]:
    """Outgoing queues of ``node`` named PRIVATE=<guid>\\n that still hold messages."""
    return [
        q.display_name
        for q in node.qm.list_queues(include_system=True)
        if q.display_name.upper().startswith("PRIVATE=") and q.msg_count
    ]


def _landed(a: Node, sent: MessageRecord, queue: str) -> None:
    [m] = _peek(a, queue)
    assert (m.id_lineage, m.id_uniquifier) == (a.qm.guid, sent.id_uniquifier)
    assert _peek(a, names.AWAITING_FINAL_ACK) == []


def test_positive_final_ack_comes_back_through_the_intermediate(net: Net) -> None:
    a, b, c = _routed(net)
    sent = _send(a, ack_flags=AckRequest.POS_RECEIVE, positive_journaling=True)
    net.run_until_quiet()
    [waiting] = _peek(a, names.AWAITING_FINAL_ACK)  # OrderAck'ed end to end, through C
    assert waiting.id_uniquifier == sent.id_uniquifier
    assert outgoing_count(a.qm) == 0
    _receive_at_b(b)
    net.run_until_quiet()
    # AckReceive + JP: journaled at A (3.1.5.7); the admin queue has the AckReceive.
    _landed(a, sent, names.SYSTEM_JOURNAL)
    assert [m.message_class for m in _peek(a, "private$\\admin")] == [MessageClass.ACK_RECEIVE]
    assert _final_ack_queues(b) == []
    assert c.transfer.stats["forwarded"] >= 2  # the message one way, the FinalAck back
    assert c.transfer.unstored_bytes == 0  # what the forwards counted was given back once stored


def test_negative_final_ack_dead_letters_after_the_senders_session_closed(net: Net) -> None:
    a, b, _ = _routed(net)
    sent = _send(a, ack_flags=AckRequest.NEG_RECEIVE, negative_journaling=True)
    net.run_until_quiet()
    net.cut(A, C)  # A has nothing more to send: C reaches A at its last session's address
    with b.qm.begin() as tx:
        b.qm.receive("private$\\orders", tx=tx)
        tx.abort()
    assert b.qm.purge_queue("private$\\orders") == 1  # NACK_Q_PURGED
    net.run_until_quiet()
    [dead] = _peek(a, names.DEADXACT)
    assert (dead.id_uniquifier, dead.message_class) == (sent.id_uniquifier, MessageClass.NACK_Q_PURGED)
    assert _peek(a, names.AWAITING_FINAL_ACK) == []
    assert _final_ack_queues(b) == []


def test_restarted_receiver_routes_by_the_stored_incoming_sequence(net: Net) -> None:
    a, b, _ = _routed(net)
    sent = _send(a, ack_flags=AckRequest.POS_RECEIVE, positive_journaling=True)
    net.run_until_quiet()
    b = net.restart(B)  # nothing in memory: the previous hop comes from the store
    attach_acknowledgments(b.qm, session_of=b.transfer.ack_session_for)
    _receive_at_b(b)
    net.run_until_quiet()
    _landed(a, sent, names.SYSTEM_JOURNAL)


def test_restarted_intermediate_uses_a_static_route_for_the_senders_guid(net: Net) -> None:
    a = _node(net, A, routes=((B, C),))
    _node(net, C, routes=((f"{{{a.qm.guid}}}", A),))  # as [mqqb.routes] writes it
    b = _node(net, B)
    b.qm.create_queue("private$\\orders", transactional=True)
    a.qm.create_queue("private$\\admin")
    sent = _send(a, ack_flags=AckRequest.POS_RECEIVE, positive_journaling=True)
    net.run_until_quiet()
    net.cut(A, C)
    c = net.restart(C)  # C forgets A's session; the route remains
    assert c.transfer.config.next_hop_for_qm(a.qm.guid) == A
    _receive_at_b(b)
    net.run_until_quiet()
    _landed(a, sent, names.SYSTEM_JOURNAL)


def test_an_intermediate_keeps_a_final_ack_it_cannot_place_until_it_learns_the_way(net: Net) -> None:
    a, b, c = _routed(net)
    sent = _send(a, ack_flags=AckRequest.POS_RECEIVE, positive_journaling=True)
    net.run_until_quiet()
    net.cut(A, C)
    c = net.restart(C)  # C no longer knows where A is
    _receive_at_b(b)
    for _ in range(10):
        net.advance(0.6)
    # B handed the FinalAck to C, which stored it (B's outgoing queue is empty) and waits.
    assert _final_ack_queues(b) == []
    assert _final_ack_queues(c) == [f"PRIVATE={a.qm.guid}\\00000004"]
    assert len(_peek(a, names.AWAITING_FINAL_ACK)) == 1
    with a.qm.begin() as tx:  # A's next message through C shows C the way back
        a.qm.send(ORDERS, MessageRecord(body=b"order-2"), tx)
    net.run_until_quiet()
    _landed(a, sent, names.SYSTEM_JOURNAL)
    assert _final_ack_queues(c) == []


def test_a_final_ack_without_a_route_waits_and_is_reported_once(
    net: Net, caplog: pytest.LogCaptureFixture
) -> None:
    _, b, _ = _routed(net)
    unknown = "PRIVATE=5b1f7a52-1111-4c1e-9a6b-3d2f00000001\\00000004"
    b.qm.send(unknown, MessageRecord(body=b"x"))
    with caplog.at_level(logging.WARNING, logger="openmsmq.transfer"):
        for _ in range(20):  # 20 looks at the queue list (queue_refresh 0.1 s)
            net.advance(0.6)
    assert _final_ack_queues(b) == [unknown]  # kept, not dropped
    said = [r for r in caplog.records if "no route to its QM" in r.getMessage()]
    assert len(said) == 1
    [st] = [o for o in b.transfer.outgoing_status() if o.format_name == unknown]
    assert outgoing_state(st) == "no route"  # what openmsmq status shows


# ------------------------------------------------- PRIVATE=<guid>\n names by a GUID route


def _private_name(node: Node, queue: str) -> str:
    """``PRIVATE=<node's GUID>\\<queue's PrivateQueueNumber>``."""
    [rec] = [q for q in node.qm.list_queues() if q.display_name.lower() == queue]
    return f"PRIVATE={node.qm.guid}\\{rec.private_number:08x}"


def test_private_format_names_reach_their_queues_by_a_guid_route(net: Net) -> None:
    b = _node(net, B)
    b.qm.create_queue("private$\\orders", transactional=True)
    b.qm.create_queue("private$\\events")
    a = _node(net, A, routes=((f"{{{b.qm.guid}}}", C),))  # through C, by B's GUID
    _node(net, C, routes=((f"{{{b.qm.guid}}}", B),))
    orders = _private_name(b, "private$\\orders")
    events = _private_name(b, "private$\\events")
    with a.qm.begin() as tx:
        a.qm.send_many(orders, [MessageRecord(body=b"o1"), MessageRecord(body=b"o2")], tx)
    a.qm.send(events, MessageRecord(body=b"e1"))
    net.run_until_quiet()
    assert [m.body for m in _peek(b, "private$\\orders")] == [b"o1", b"o2"]
    assert [m.body for m in _peek(b, "private$\\events")] == [b"e1"]
    [state] = b.transfer.incoming_status()
    assert state.tx_sequence_number == 2  # one transactional sequence, in order
    assert outgoing_count(a.qm) == 0  # OrderAck'ed end to end, through C
    assert b.transfer.unstored_bytes == 0  # e1 (PRIVATE=, not transactional) counted and given back


def test_a_private_name_of_no_queue_is_rejected_with_nack_bad_dst_q(net: Net) -> None:
    b = _node(net, B)
    a = _node(net, A, routes=((f"{{{b.qm.guid}}}", B),))
    a.qm.create_queue("private$\\admin")
    nosuch = f"PRIVATE={b.qm.guid}\\{0x777:08x}"
    with a.qm.begin() as tx:
        a.qm.send(nosuch, MessageRecord(body=b"x", admin_queue=ADMIN, ack_flags=AckRequest.NEG_ARRIVAL), tx)
    net.run_until_quiet()
    # Transferred and refused by B on receipt (NACK_BAD_DST_Q FinalAck, MS-MQQB 3.1.5.8.2),
    # not lost in the outgoing queue: its FinalAck took it out; B's sequence never saw it.
    assert outgoing_count(a.qm) == 0
    assert b.transfer.incoming_status() == []


# ------------------------------------------------------------- two intermediate QMs


def test_two_intermediates_carry_the_order_ack_and_the_final_ack_back(net: Net) -> None:
    d = "127.0.0.4"  # A -> D -> C -> B
    a = _node(net, A, routes=((B, d),))
    _node(net, d, routes=((B, C),))
    c = _node(net, C)
    b = _node(net, B)
    a.qm.create_queue("private$\\admin")
    b.qm.create_queue("private$\\orders", transactional=True)
    sent = _send(a, ack_flags=AckRequest.POS_RECEIVE, positive_journaling=True)
    net.run_until_quiet()  # fails unless the OrderAck finds its way back through C and D
    assert [m.body for m in _peek(b, "private$\\orders")] == [b"order-1"]
    assert outgoing_count(a.qm) == 0
    # C never had a session with A: the way back is the hop A's messages came from.
    assert c.transfer.config.next_hop_for_qm(a.qm.guid) is None
    _receive_at_b(b)
    net.run_until_quiet()
    _landed(a, sent, names.SYSTEM_JOURNAL)


def test_a_learned_address_of_this_qm_is_no_route(net: Net) -> None:
    # QMs told apart by port on one address: the address learned for the other QM is
    # this QM's own, and sending there would only loop back.
    b = _node(net, B)
    other = uuid.uuid4()
    b.transfer.routes.session_verified(other, B)
    assert b.transfer.qm_route(other) is None
    b.transfer.routes.forwarded(other, C, direct=False)
    assert b.transfer.qm_route(other) == C
