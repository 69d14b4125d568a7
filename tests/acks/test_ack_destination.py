"""Where transactional acknowledgments go, and the OrderAck as it is sent (seed 000,
MS-MQQB 3.1.7.17; docs/conformance.md, "Seed 000").

Each test records what B writes on its sessions and decodes the OrderAcks and FinalAcks
in it: DestinationForAck follows the session's DirectFormatSession (set by a received
UserMessage with DQ 0x7, 3.1.5.8.2), and the OrderAck is the transAcknowledgment Message
the seed builds, enqueued (Open Queue + Enqueue Message To An Open Queue) and sent from
B's outgoing queue like any recoverable message.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable

from openmsmq.store.records import MessageRecord
from openmsmq.transfer.trust import TrustConfig
from openmsmq.wire import FinalAck, OrderAck
from openmsmq.wire.constants import AckRequest, MessageClass
from openmsmq.wire.packets import Packet
from openmsmq.wire.stream import PacketDecoder
from openmsmq.wire.userheader import DirectQueueFormatName, PrivateQueueFormatNameId
from tests.acks.nodes import acked_node
from tests.transfer.harness import Net, Node, outgoing_count

A, B, C = "127.0.0.1", "127.0.0.2", "127.0.0.3"
NULL = uuid.UUID(int=0)


#: These QMs relay for each other and take relayed messages from each other (the trust
#: rules, docs/security.md, are tested in tests/transfer/test_trust.py).
RELAYS = TrustConfig(allow_relay=True, intermediate_hops=("127.0.0.0/8",))


def _node(net: Net, address: str, **cfg: object) -> Node:
    return acked_node(net, address, trust=RELAYS, **cfg)


def _record(node: Node) -> list[Packet]:
    """Every packet ``node`` writes from now on, decoded per connection."""
    seen: list[Packet] = []
    decoders: dict[int, PacketDecoder] = {}
    real: Callable[[], list[tuple[int, bytes]]] = node.transfer.data_to_send

    def recording() -> list[tuple[int, bytes]]:
        out = real()
        for cid, data in out:
            seen.extend(decoders.setdefault(cid, PacketDecoder()).feed(data))
        return out

    node.transfer.data_to_send = recording  # type: ignore[method-assign]
    return seen


def _acks(seen: list[Packet]) -> tuple[list[OrderAck], list[FinalAck]]:
    return [p for p in seen if isinstance(p, OrderAck)], [p for p in seen if isinstance(p, FinalAck)]


def _direct_order_queue(address: str) -> DirectQueueFormatName:
    return DirectQueueFormatName(f"TCP:{address}\\PRIVATE$\\order_queue$")


def _send_and_receive(a: Node, b: Node, net: Net, dest: str) -> MessageRecord:
    """A sends one message (FinalAck asked: dead_letter) to ``dest``; B's application
    receives it; everything settles."""
    with a.qm.begin() as tx:
        sent = a.qm.send(
            dest, MessageRecord(body=b"x", negative_journaling=True, ack_flags=AckRequest.NONE), tx
        )
    net.run_until_quiet()
    with b.qm.begin() as tx:
        assert b.qm.receive("private$\\orders", tx=tx).body == b"x"
    net.run_until_quiet()
    return sent


def test_a_direct_format_session_acknowledges_to_the_direct_order_queue(net: Net) -> None:
    """DirectFormatSession TRUE: "DIRECT=TCP:<RemoteQMAddress>\\PRIVATE$\\order_queue$"."""
    a = _node(net, A)
    b = _node(net, B)
    b.qm.create_queue("private$\\orders", transactional=True)
    seen = _record(b)
    sent = _send_and_receive(a, b, net, f"DIRECT=TCP:{B}\\private$\\orders")
    orders, finals = _acks(seen)
    assert orders and finals
    for p in [*orders, *finals]:
        assert p.message.user.destination_queue == _direct_order_queue(A)
        assert p.message.user.queue_manager_address == NULL
    assert finals[0].body.message_id == sent.id_uniquifier


def test_a_session_that_is_not_direct_acknowledges_to_the_private_order_queue(net: Net) -> None:
    """A sends to ``PRIVATE=<B>\\n`` straight to B: no UserMessage with DQ 0x7 came on the
    session, DirectFormatSession stays FALSE, so both the OrderAck and the FinalAck go to
    ``PRIVATE=<RemoteQMGuid>\\00000004`` (DQ 0x3, QueueManagerAddress = A's GUID). They
    went to A's direct order queue whenever A itself was the session's peer."""
    b = _node(net, B)
    a = _node(net, A, routes=((f"{{{b.qm.guid}}}", B),))
    orders_q = b.qm.create_queue("private$\\orders", transactional=True)
    seen = _record(b)
    _send_and_receive(a, b, net, f"PRIVATE={b.qm.guid}\\{orders_q.private_number:08x}")
    orders, finals = _acks(seen)
    assert orders and finals
    for p in [*orders, *finals]:
        assert p.message.user.destination_queue == PrivateQueueFormatNameId(4)
        assert p.message.user.queue_manager_address == a.qm.guid
    assert outgoing_count(a.qm) == 0  # A took them as its own (released, then settled)
    assert a.qm.peek_range("system$;deadxact", 0, 10) == []  # positive FinalAck: no dead letter


def test_a_direct_name_through_an_intermediate_is_acknowledged_by_the_senders_guid(net: Net) -> None:
    """The session B received the message on is direct (DQ 0x7) but its peer is C, not the
    sender: the direct form would name C's order queue, where no sequence is processed
    (seed 003: acknowledgments are end to end), so B answers ``PRIVATE=<A>\\00000004``
    and C carries it on by A's GUID (docs/conformance.md, seed 000)."""
    a = _node(net, A, routes=((B, C),))
    _node(net, C)
    b = _node(net, B)
    b.qm.create_queue("private$\\orders", transactional=True)
    seen = _record(b)
    _send_and_receive(a, b, net, f"DIRECT=TCP:{B}\\private$\\orders")
    orders, finals = _acks(seen)
    assert orders and finals
    for p in [*orders, *finals]:
        assert p.message.user.destination_queue == PrivateQueueFormatNameId(4)
        assert p.message.user.queue_manager_address == a.qm.guid
    assert outgoing_count(a.qm) == 0


def test_the_order_ack_on_the_wire_is_the_seed_000_acknowledgment(net: Net) -> None:
    """The OrderAck B sends is seed 000's transAcknowledgment: Class OrderAck (0x00FF),
    DeliveryGuarantee Recoverable (UserHeader.DM = 1), Priority 0, no journaling, no admin
    or response queue, Label "QM Ordering Ack", BodyType VT_EMPTY, and an Identifier given
    at enqueue (MessageID not 0, one per OrderAck); the body names the acknowledged
    sequence (IncomingTxSequenceID) and number. It was enqueued: B's outgoing queue to A's
    order queue carried it."""
    a = _node(net, A)
    b = _node(net, B)
    b.qm.create_queue("private$\\orders", transactional=True)
    seen = _record(b)
    for t in range(2):
        with a.qm.begin() as tx:
            a.qm.send_many(f"DIRECT=TCP:{B}\\private$\\orders", [MessageRecord(body=b"%d" % t)] * 3, tx)
        net.run_until_quiet()
    orders, _ = _acks(seen)
    assert len(orders) >= 2
    sent_ids = {m.tx_sequence_id for m in b.qm.peek_range("private$\\orders", 0, 10)}
    ids = []
    for p in orders:
        raw = p.message.encode()
        user = p.message.user
        assert struct.unpack_from("<H", raw, 2)[0] == 0  # BaseHeader.Flags all 0 (PR 0, no TR)
        assert (user.flags >> 5) & 0x3 == 1  # DM: Recoverable
        assert (user.flags >> 8) & 0x3 == 0  # JN, JP
        assert user.admin_queue is None and user.response_queue is None
        props = p.message.properties
        assert props.message_class == MessageClass.ORDER_ACK
        assert props.label == "QM Ordering Ack" and props.body_type == 0
        assert props.ack_flags == 0
        assert p.message.transaction is None
        assert p.body.tx_sequence_id.value in sent_ids
        assert p.body.tx_previous_sequence_number == p.body.tx_sequence_number - 1
        assert user.message_id != 0
        ids.append(user.message_id)
    assert len(set(ids)) == len(ids)
    queues = {q.display_name.lower() for q in b.qm.list_queues(include_system=True)}
    assert f"direct=tcp:{A}\\private$\\order_queue$".lower() in queues
    assert outgoing_count(a.qm) == 0 and outgoing_count(b.qm) == 0


def test_an_order_ack_waits_in_the_outgoing_queue_while_the_session_is_gone(net: Net) -> None:
    """Enqueued, the OrderAck outlives the session it was raised for: B stored it before
    the link was cut, and A gets it on the next session (before, it was written on the
    session alone and lost with it)."""
    a = _node(net, A)
    b = _node(net, B)
    b.qm.create_queue("private$\\orders", transactional=True)
    dest = f"DIRECT=TCP:{B}\\private$\\orders"
    with a.qm.begin() as tx:
        a.qm.send(dest, MessageRecord(body=b"first"), tx)
    net.run_until_quiet()  # the session is up and idle
    net.blackhole.add((B, A))  # from now on what B writes to A is lost
    with a.qm.begin() as tx:
        a.qm.send_many(dest, [MessageRecord(body=b"x")] * 3, tx)
    net.settle()
    net.advance(0.6)  # B's Order Ack Send Timer: the OrderAck is enqueued, then written into the hole
    assert outgoing_count(b.qm) == 1  # not acknowledged by A: B still holds it
    assert outgoing_count(a.qm) == 3
    net.blackhole.clear()
    net.cut(A, B)
    seen = _record(b)
    net.settle()  # a new session: B's outgoing queue sends the OrderAck again
    orders, _ = _acks(seen)
    assert orders and orders[0].body.tx_sequence_number == 3
    assert outgoing_count(a.qm) == 0  # released by the OrderAck raised on the old session
    net.run_until_quiet()
    assert outgoing_count(b.qm) == 0
