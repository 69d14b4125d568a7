"""Suspending an outgoing queue (MSMQ's Pause, for the operators' console): its messages
stay stored and none is sent until it is resumed; then all arrive, in order, once."""

from __future__ import annotations

from openmsmq.remote.status import outgoing_state

from .harness import Net, bodies_in, outgoing_count, send_tx

A, B = "127.0.0.1", "127.0.0.2"
DEST_B = f"DIRECT=TCP:{B}\\PRIVATE$\\orders"
Q = "private$\\orders"


def _run_a_while(net: Net) -> None:
    """Polls, timers and deliveries for ten seconds of the clock (queue refreshes, resends
    and OrderAcks all fall due in that time)."""
    for _ in range(20):
        for node in net.nodes.values():
            node.transfer.poll(net.clock.now)
        net.advance(0.5)


def test_a_suspended_outgoing_queue_keeps_its_messages_until_resumed(net: Net) -> None:
    a = net.add(A)
    b = net.add(B)
    b.qm.create_queue(Q, transactional=True)
    send_tx(a.qm, DEST_B, [b"first"])
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == [b"first"]

    a.transfer.suspend_outgoing(DEST_B.lower())  # names compare case-insensitively
    send_tx(a.qm, DEST_B, [b"s0", b"s1", b"s2"])
    _run_a_while(net)
    assert bodies_in(b.qm, Q) == [b"first"]
    assert outgoing_count(a.qm) == 3
    (status,) = a.transfer.outgoing_status()
    assert status.suspended and outgoing_state(status) == "suspended"
    assert not a.transfer.wanted_peers()

    a.transfer.resume_outgoing(DEST_B)
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == [b"first", b"s0", b"s1", b"s2"]
    assert outgoing_count(a.qm) == 0
    (status,) = a.transfer.outgoing_status()
    assert not status.suspended and outgoing_state(status) != "suspended"


def test_a_queue_suspended_before_it_is_taken_up_stays_suspended(net: Net) -> None:
    # The operator suspends by name; the transfer takes the queue up at its next refresh
    # (the queue was created after the last one) and keeps it suspended.
    a = net.add(A)
    b = net.add(B)
    b.qm.create_queue(Q, transactional=True)
    a.transfer.suspend_outgoing(DEST_B)
    send_tx(a.qm, DEST_B, [b"m0", b"m1"])
    _run_a_while(net)
    assert bodies_in(b.qm, Q) == []
    assert outgoing_count(a.qm) == 2
    a.transfer.resume_outgoing(DEST_B)
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == [b"m0", b"m1"]


def test_session_status_names_each_connection_and_its_direction(net: Net) -> None:
    a = net.add(A)
    b = net.add(B)
    b.qm.create_queue(Q, transactional=True)
    send_tx(a.qm, DEST_B, [b"x"])
    net.run_until_quiet()
    (mine,) = a.transfer.session_status()
    (theirs,) = b.transfer.session_status()
    assert (mine.role, theirs.role) == ("initiator", "acceptor")
    assert mine.open and theirs.open
    assert mine.remote_qm == b.qm.guid and theirs.remote_qm == a.qm.guid
    assert mine.window > 0 and not mine.tls
