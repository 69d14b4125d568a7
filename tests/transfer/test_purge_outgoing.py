"""Purging an outgoing queue (QueueManager.purge_queue with its format name): where its
messages go, and the transfer after it (the sender bridges the purged TxSequenceNumbers,
MS-MQQB 3.1.7.1.3, so the receiver accepts the next message)."""

from __future__ import annotations

from pathlib import Path

from openmsmq.qm import names
from openmsmq.qm.manager import QueueManager
from openmsmq.store.records import MessageRecord
from openmsmq.transfer.ack_admin import attach_acknowledgments
from openmsmq.wire.constants import AckRequest, MessageClass

from .harness import Net, Node, bodies_in, outgoing_count, send_tx

A, B = "127.0.0.1", "127.0.0.2"
DEST_B = f"DIRECT=TCP:{B}\\PRIVATE$\\orders"
Q = "private$\\orders"


def _reached_once(net: Net) -> tuple[Node, Node]:
    """A and B, B's queue holding the one message A sent it (B knows A's sequence)."""
    a = net.add(A)
    b = net.add(B)
    b.qm.create_queue(Q, transactional=True)
    send_tx(a.qm, DEST_B, [b"first"])
    net.run_until_quiet()
    return a, b


def _offline(net: Net, address: str) -> QueueManager:
    """The QM of ``address`` opened without its transfer (as the CLI opens a stopped one)."""
    return QueueManager(net.root / address, threaded=False, clock=net.clock, integrity_check=False)


def test_after_a_purge_of_its_outgoing_queue_the_next_message_gets_through(net: Net) -> None:
    # B was reached once (it holds the sequence state of A's first burst); then three
    # messages wait at A for a B that is away, and A's outgoing queue is purged with A
    # stopped. A later message is numbered after the purged ones; A sends it with the
    # PreviousTxSequenceNumber B last acknowledged, so B accepts it.
    a, b = _reached_once(net)
    net.cut(A, B)
    b.qm.close()
    del net.nodes[B]
    send_tx(a.qm, DEST_B, [b"p0", b"p1", b"p2"])
    net.settle()
    a.qm.close()
    del net.nodes[A]
    qm = _offline(net, A)
    try:
        assert qm.purge_queue(DEST_B) == 3
    finally:
        qm.close()
    a = net.add(A)
    b = net.add(B)
    send_tx(a.qm, DEST_B, [b"after"])
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == [b"first", b"after"]
    assert outgoing_count(a.qm) == 0


def test_a_purge_while_the_transfer_runs_leaves_only_later_messages_to_deliver(net: Net) -> None:
    # The three purged messages were loaded and sent into a link that lost them; after the
    # purge the transfer's resend reads the queue again and finds them gone: B gets the
    # message sent after the purge, and A's queue empties.
    a, b = _reached_once(net)
    net.blackhole.add((A, B))
    send_tx(a.qm, DEST_B, [b"p0", b"p1", b"p2"])
    net.settle()
    assert sum(len(t.messages) for t in a.transfer.outgoing.values()) == 3  # loaded, sent
    assert a.qm.purge_queue(DEST_B) == 3
    net.blackhole.discard((A, B))
    net.cut(A, B)
    send_tx(a.qm, DEST_B, [b"after"])
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == [b"first", b"after"]
    assert outgoing_count(a.qm) == 0


def test_purged_messages_leave_with_nack_deleted_to_the_dead_letter_queue_or_away(tmp_path: Path) -> None:
    # dead_letter (negative source journaling) -> the transactional dead-letter queue;
    # a negative arrival acknowledgment asked for -> its NACK; the rest deleted.
    with QueueManager(tmp_path / "a", threaded=False, integrity_check=False, computer_name="hosta") as qm:
        attach_acknowledgments(qm)
        qm.create_queue("private$\\admin")
        admin = "DIRECT=OS:hosta\\private$\\admin"
        with qm.begin() as tx:
            qm.send_many(
                DEST_B,
                [
                    MessageRecord(body=b"journaled", negative_journaling=True),
                    MessageRecord(body=b"nacked", admin_queue=admin, ack_flags=AckRequest.NEG_ARRIVAL),
                    MessageRecord(body=b"plain"),
                ],
                tx,
            )
        qm.send(DEST_B.replace("orders", "other"), MessageRecord(body=b"elsewhere"))
        assert qm.purge_queue(DEST_B) == 3
        assert qm.purge_queue(DEST_B) == 0
        dead = qm.peek_range(names.DEADXACT)
        assert [(m.body, m.message_class) for m in dead] == [(b"journaled", MessageClass.NACK_DELETED)]
        (nack,) = qm.peek_range("private$\\admin")
        assert nack.message_class == MessageClass.NACK_DELETED and nack.body == b"nacked"
        outgoing = {
            r.display_name: r.msg_count for r in qm.list_queues(include_system=True) if r.queue_type == 4
        }
        assert outgoing == {DEST_B: 0, DEST_B.replace("orders", "other"): 1}  # the other queue kept
