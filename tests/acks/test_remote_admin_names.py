"""Admin and response queue names on messages to a remote queue (MS-MQMQ 2.2.19.2 AQ / RQ).

A message carries its admin and response queues in its UserHeader: a direct name
(type 0x7) or a private queue named by its QM's GUID and number (0x6; 0x2 / 0x3 / 0x4
name the source, destination or admin queue's QM implicitly). A ``PRIVATE=<guid>\\n``
admin queue travels, and the destination QM's acknowledgments reach it by the GUID of
its QM. A name that cannot travel (a path name, ``PUBLIC=``) is refused at send: the
message would otherwise arrive without it and its acknowledgments be lost unreported.
The names count against the 4 MiB packet like the body.
"""

from __future__ import annotations

import pytest

from openmsmq.errors import HResult, MQError
from openmsmq.qm import sending as qm_sending
from openmsmq.store.records import MAX_MESSAGE_BYTES, MessageRecord
from openmsmq.wire.constants import AckRequest, MessageClass
from openmsmq.wire.ids import ObjectId
from tests.acks.nodes import acked_node as _node
from tests.transfer.harness import Net, Node, outgoing_count

A, B = "127.0.0.1", "127.0.0.2"
ORDERS = f"DIRECT=TCP:{B}\\private$\\orders"


def _pair(net: Net) -> tuple[Node, Node]:
    a = _node(net, A)
    b = _node(net, B)
    a.qm.create_queue("private$\\admin")
    a.qm.create_queue("private$\\replies")
    b.qm.create_queue("private$\\orders", transactional=True)
    return a, b


def _private_name(node: Node, queue: str) -> str:
    [rec] = [q for q in node.qm.list_queues() if q.display_name.lower() == queue]
    return f"PRIVATE={node.qm.guid}\\{rec.private_number:08x}"


def test_a_private_admin_queue_travels_and_its_acknowledgment_comes_back(net: Net) -> None:
    a, b = _pair(net)
    admin = _private_name(a, "private$\\admin")
    replies = _private_name(a, "private$\\replies")
    m = MessageRecord(
        body=b"order-1", admin_queue=admin, response_queue=replies, ack_flags=AckRequest.POS_ARRIVAL
    )
    with a.qm.begin() as tx:
        sent = a.qm.send(ORDERS, m, tx)
    net.run_until_quiet()
    [got] = b.qm.peek_range("private$\\orders", 0, 10)
    assert got.admin_queue.lower() == admin.lower()
    assert got.response_queue.lower() == replies.lower()
    # B's AckReachQueue went to PRIVATE=<A's GUID>\n, by A's GUID, into A's admin queue.
    [ack] = a.qm.peek_range("private$\\admin", 0, 10)
    assert ack.message_class == MessageClass.ACK_REACH_QUEUE
    assert ack.correlation_id == ObjectId(a.qm.guid, sent.id_uniquifier).encode()
    assert outgoing_count(a.qm) == 0 and outgoing_count(b.qm) == 0


@pytest.mark.parametrize(
    ("field", "name"),
    [
        ("admin_queue", "private$\\admin"),  # a path name: meaningful only on this QM
        ("admin_queue", "PUBLIC=6f2c1a57-0d4e-4b8e-9d55-3a1f7c2b9e10"),
        ("response_queue", "garbage"),
        ("response_queue", "PRIVATE=6f2c1a57-0d4e-4b8e-9d55-3a1f7c2b9e10\\00000001;JOURNAL"),
    ],
)
def test_a_name_that_cannot_travel_is_refused_at_send(net: Net, field: str, name: str) -> None:
    a, _b = _pair(net)
    with a.qm.begin() as tx, pytest.raises(MQError) as err:
        a.qm.send(ORDERS, MessageRecord(body=b"x", **{field: name}), tx)  # type: ignore[arg-type]
    assert err.value.hresult == HResult.MQ_ERROR_ILLEGAL_FORMATNAME
    assert outgoing_count(a.qm) == 0
    # The same name stays usable for a local queue (the QM resolves it itself).
    a.qm.send("private$\\replies", MessageRecord(body=b"local", **{field: name}))  # type: ignore[arg-type]


def test_admin_and_response_names_count_against_the_packet_size(net: Net) -> None:
    a, b = _pair(net)
    reply = f"DIRECT=TCP:{A}\\private$\\" + "r" * 3000  # 6 KB in UTF-16
    room = MAX_MESSAGE_BYTES - qm_sending.REMOTE_HEADROOM - 2 * len(ORDERS)
    with a.qm.begin() as tx, pytest.raises(MQError) as err:
        a.qm.send(ORDERS, MessageRecord(body=bytes(room), response_queue=reply), tx)
    assert err.value.hresult == HResult.MQ_ERROR_INSUFFICIENT_RESOURCES
    # The same body without the name, and a smaller one with it, are sent and arrive.
    body = bytes(room - 2 * len(reply) - 8)
    with a.qm.begin() as tx:
        a.qm.send(ORDERS, MessageRecord(body=bytes(room)), tx)
        a.qm.send(ORDERS, MessageRecord(body=body, response_queue=reply), tx)
    net.run_until_quiet()
    got = b.qm.peek_range("private$\\orders", 0, 10)
    assert [len(m.body) for m in got] == [room, len(body)]
    assert got[1].response_queue == reply
    assert outgoing_count(a.qm) == 0
