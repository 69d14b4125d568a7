"""DIRECT=OS:<computer> destinations travel (MS-MQMQ 2.1.2): the computer name is
reached through a static route (``--route NAME=HOST``) or, without one, by resolving
the name; the receiving QM knows its own computer name (``qm.name``, default the host
name) and stores the message. Before, such a queue waited for ever ("only DIRECT=TCP: and
PRIVATE= travel"), though DIRECT=OS: is the usual name of a queue on another Windows
machine."""

from __future__ import annotations

from openmsmq.store.records import MessageRecord
from openmsmq.wire.constants import AckRequest, MessageClass
from tests.acks.nodes import acked_node
from tests.transfer.harness import Net, outgoing_count

A, B = "127.0.0.1", "127.0.0.2"
ORDERS = "DIRECT=OS:qmb\\private$\\orders"


def test_a_transactional_stream_to_a_direct_os_name_arrives_in_order(net: Net) -> None:
    a = net.add(A, routes=(("qmb", B),), name="qma")
    b = net.add(B, name="qmb")
    b.qm.create_queue("private$\\orders", transactional=True)
    for i in range(3):
        with a.qm.begin() as tx:
            a.qm.send_many(ORDERS, [MessageRecord(body=b"%d-%d" % (i, k)) for k in range(50)], tx)
    net.run_until_quiet()
    got = b.qm.peek_range("private$\\orders", 0, 1000)
    assert [m.body for m in got] == [b"%d-%d" % (i, k) for i in range(3) for k in range(50)]
    assert got[0].destination_queue.lower() == ORDERS.lower()
    assert outgoing_count(a.qm) == 0  # OrderAck'ed


def test_recoverable_messages_and_acknowledgments_travel_by_computer_name(net: Net) -> None:
    a = acked_node(net, A, routes=(("qmb", B),), name="qma")
    b = acked_node(net, B, routes=(("qma", A),), name="qmb")
    a.qm.create_queue("private$\\admin")
    b.qm.create_queue("private$\\events")
    admin = "DIRECT=OS:qma\\private$\\admin"
    sent = a.qm.send(
        "DIRECT=OS:qmb\\private$\\events",
        MessageRecord(body=b"e1", delivery=1, admin_queue=admin, ack_flags=AckRequest.POS_ARRIVAL),
    )
    net.run_until_quiet()
    assert [m.body for m in b.qm.peek_range("private$\\events", 0, 10)] == [b"e1"]
    [ack] = a.qm.peek_range("private$\\admin", 0, 10)
    assert ack.message_class == MessageClass.ACK_REACH_QUEUE
    assert ack.correlation_id[16:] == sent.id_uniquifier.to_bytes(4, "little")
    assert outgoing_count(a.qm) == 0 and outgoing_count(b.qm) == 0
