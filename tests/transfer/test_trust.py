"""The trust rules of the transfer (docs/security.md), each against the attack it stops,
with a forged peer built from the project's own Session and codecs: nothing lost,
delivered twice, blocked or leaked, and every refusal logged and counted."""

from __future__ import annotations

import logging
import uuid

import pytest

from openmsmq.observability.metrics import Metrics, label_value
from openmsmq.protocol.incoming import RejectReason
from openmsmq.store.records import MessageRecord
from openmsmq.transfer.trust import TrustConfig
from openmsmq.wire.constants import MessageClass
from openmsmq.wire.ids import TxSequenceId

from .forged import ForgedPeer
from .harness import Net, Node, bodies_in, outgoing_count, send_tx

A, B, C, M = "127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.9"
Q = "private$\\orders"
DEST_B = f"DIRECT=TCP:{B}\\PRIVATE$\\orders"
DEST_C = f"DIRECT=TCP:{C}\\PRIVATE$\\orders"


def _refusals(metrics: Metrics, rule: str) -> float:
    value = metrics.registry.get_sample_value("openmsmq_refusals_total", {"rule": rule})
    return value or 0.0


def _sequence(node: Node) -> TxSequenceId:
    """The TxSequenceID ``node`` sends on (what an attacker guesses or sees on the wire)."""
    node.transfer.poll(0.0)
    [t] = node.transfer.outgoing.values()
    sid = t.seq.current_sequence_id
    assert sid is not None
    return sid


def _stop(net: Net, node: Node) -> None:
    """``node`` stops (what it held for its store is lost, as in a crash)."""
    for (x, _cid), (y, _other) in list(net.links.items()):
        if node.address in (x, y):
            net.cut(x, y)
    del net.nodes[node.address]
    node.held.clear()
    node.qm.close()


def _b(net: Net, **cfg: object) -> Node:
    b = net.add(B, **cfg)
    b.qm.create_queue(Q, transactional=True)
    return b


# ---------------------------------------------------------------------- forged OrderAck


def test_a_forged_order_ack_from_an_unrelated_peer_releases_nothing(
    net: Net, caplog: pytest.LogCaptureFixture
) -> None:
    """The attack as reproduced: B stopped, three transactional messages waiting at A, an
    unrelated peer from another address with a random GUID sends OrderAck(seq, 3). Before,
    A's outgoing queue emptied and B never received them."""
    metrics = Metrics()
    a = net.add(A, metrics=metrics)
    b = _b(net)
    b.hold_store = True  # B receives the three messages and stops before storing them
    send_tx(a.qm, DEST_B, [b"m0", b"m1", b"m2"])
    net.settle()
    sid = _sequence(a)
    _stop(net, b)
    forger = ForgedPeer(net, a, M)
    assert forger.open
    with caplog.at_level(logging.WARNING, "openmsmq.transfer"):
        forger.send(forger.order_ack(sid, 3))
        net.advance(1.0)
    assert outgoing_count(a.qm) == 3  # nothing released
    assert not forger.open  # the forger's session is closed
    assert _refusals(metrics, "ack-origin") == 1
    assert any("rule ack-origin" in r.getMessage() and M in r.getMessage() for r in caplog.records)
    b = net.add(B)  # B comes back: it gets all three, once each, in order
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == [b"m0", b"m1", b"m2"]
    assert outgoing_count(a.qm) == 0


def test_a_forged_order_ack_claiming_the_receivers_guid_releases_nothing(net: Net) -> None:
    """The forger knows B's GUID (it is in every packet B sends) and claims it, as its
    session's QM and as the OrderAck's source. It connected while A, just restarted, knew
    nothing of B (so the identity rule had nothing to hold against it): the OrderAck
    still comes over a session that is not with the queue's next hop."""
    a = net.add(A)
    b = _b(net)
    send_tx(a.qm, DEST_B, [b"first"])
    net.run_until_quiet()
    a = net.restart(A)
    forger = ForgedPeer(net, a, M, guid=b.qm.guid)
    assert forger.open
    b.hold_store = True
    send_tx(a.qm, DEST_B, [b"m0", b"m1", b"m2"])
    net.settle()
    sid = _sequence(a)
    _stop(net, b)
    forger.send(forger.order_ack(sid, 3))
    net.advance(1.0)
    assert outgoing_count(a.qm) == 3
    assert not forger.open
    b = net.add(B)  # B starts again over its store
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == [b"first", b"m0", b"m1", b"m2"]


def test_a_forged_final_ack_settles_nothing(net: Net) -> None:
    """A message that asked for a FinalAck waits for it at A after its OrderAck; a forger
    sending a negative FinalAck for it would have it dead-lettered (and the application
    told it was not received)."""
    metrics = Metrics()
    a = net.add(A, metrics=metrics)
    b = _b(net)
    tx = a.qm.begin()
    a.qm.send(DEST_B, MessageRecord(body=b"j", positive_journaling=True, negative_journaling=True), tx)
    tx.commit()
    net.run_until_quiet()
    [waiting] = a.qm.peek_range("private$\\awaiting_final_ack$", 0, 10)
    a = net.restart(A)  # only the store knows where the message went now
    forger = ForgedPeer(net, a, M, guid=b.qm.guid)
    forger.send(
        forger.final_ack(
            TxSequenceId.from_int(waiting.tx_sequence_id), waiting.tx_sequence_number,
            waiting.id_uniquifier, MessageClass.NACK_RECEIVE_REJECTED,
        )
    )  # fmt: skip
    net.run_until_quiet()
    assert [m.body for m in a.qm.peek_range("private$\\awaiting_final_ack$", 0, 10)] == [b"j"]
    assert _refusals(metrics, "ack-origin") == 1
    assert bodies_in(b.qm, Q) == [b"j"]


# ---------------------------------------------------------------------- sequence hijack


def test_a_peer_claiming_another_qms_source_cannot_move_its_incoming_sequence(net: Net) -> None:
    """The hijack as reproduced: a session claims A's identity in UserHeader.SourceQueueManager
    and sends TxSequenceID 0xFFFFFFFFFFFFFFFF for A's queue at B: B's incoming sequence
    for (A, queue) moved past anything A can send, and A's real messages were rejected
    for good. Now the message is refused (its SourceQueueManager is not the session's QM
    and the forger is no configured intermediate hop): A's messages keep arriving."""
    metrics = Metrics()
    a = net.add(A)
    b = _b(net, metrics=metrics)
    send_tx(a.qm, DEST_B, [b"m0"])
    net.run_until_quiet()
    forger = ForgedPeer(net, b, M)
    far = TxSequenceId.from_int(0xFFFFFFFFFFFFFFFF)
    forger.send(forger.transactional(Q, b"forged", far, 1, 0, source=a.qm.guid))
    assert not forger.open
    assert _refusals(metrics, "source-qm") == 1
    send_tx(a.qm, DEST_B, [b"m1", b"m2"])
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == [b"m0", b"m1", b"m2"]  # nothing forged stored, nothing blocked
    assert [s.reject_count for s in b.transfer.incoming_status()] == [0]


def test_the_spoof_no_longer_passes_a_queues_allowed_senders(net: Net) -> None:
    """A queue that only A may send to: a forger claiming A's GUID as the source of its
    messages used to get them stored there."""
    a = net.add(A)
    b = net.add(B)
    b.qm.create_queue(Q, transactional=True, allowed_senders=[a.qm.guid])
    forger = ForgedPeer(net, b, M)
    sid = TxSequenceId.from_int((int(net.clock.now) << 32) | 1)
    forger.send(forger.transactional(Q, b"forged", sid, 1, 0, source=a.qm.guid))
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == []
    assert b.transfer.incoming_status() == []  # and no sequence was created for it
    send_tx(a.qm, DEST_B, [b"real"])
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == [b"real"]


def test_an_implausible_tx_sequence_id_from_the_sender_itself_is_refused_and_logged(
    net: Net, caplog: pytest.LogCaptureFixture
) -> None:
    """A peer speaking for itself cannot start a sequence whose TxSequenceID TimeStamp lies
    beyond this QM's clock: no sender can ever get past such an ID again."""
    metrics = Metrics()
    b = _b(net, metrics=metrics)
    peer = ForgedPeer(net, b, M)
    far = TxSequenceId.from_int(0xFFFFFFFF_00000001)
    with caplog.at_level(logging.WARNING, "openmsmq.transfer"):
        peer.send(peer.transactional(Q, b"far", far, 1, 0))
    assert bodies_in(b.qm, Q) == []
    assert _refusals(metrics, "implausible-sequence") == 1
    rejected = {"reason": label_value(RejectReason.IMPLAUSIBLE_SEQUENCE)}
    assert metrics.registry.get_sample_value("openmsmq_messages_rejected_total", rejected) == 1
    assert any("implausible-sequence" in r.getMessage() for r in caplog.records)
    # Its own next sequence, with a TimeStamp of now, is accepted.
    now = TxSequenceId.from_int((int(b.qm.clock()) << 32) | 1)
    peer.send(peer.transactional(Q, b"now", now, 1, 0))
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == [b"now"]


def test_a_configured_intermediate_hop_may_carry_other_qms_messages(net: Net) -> None:
    """The same message (another QM's source) from a configured intermediate hop is accepted."""
    b = _b(net, trust=TrustConfig(intermediate_hops=("127.0.0.0/29",)))
    hop = ForgedPeer(net, b, "127.0.0.5")
    origin = uuid.uuid4()
    sid = TxSequenceId.from_int((int(net.clock.now) << 32) | 1)
    hop.send(hop.transactional(Q, b"relayed", sid, 1, 0, source=origin))
    net.advance(1.0)  # (its OrderAck waits in B's outgoing queue for the forged hop)
    assert bodies_in(b.qm, Q) == [b"relayed"]
    assert [s.source_qm for s in b.transfer.incoming_status()] == [origin]  # keyed by the original sender


def test_a_guid_this_qm_reached_elsewhere_is_refused_from_another_address(net: Net) -> None:
    """A forger claiming, as its own session's identity, the GUID of a QM this QM dialled
    at another address is refused at the handshake."""
    metrics = Metrics()
    a = net.add(A, metrics=metrics)
    b = _b(net)
    send_tx(a.qm, DEST_B, [b"m0"])
    net.run_until_quiet()  # A dialled B
    forger = ForgedPeer(net, a, M, guid=b.qm.guid)
    assert not forger.open
    assert _refusals(metrics, "identity") == 1
    # B itself, connecting from its address, is let in.
    assert ForgedPeer(net, a, B, guid=b.qm.guid).open


def test_learned_routes_never_come_from_a_claim(net: Net) -> None:
    """A peer that only claims a GUID (an accepted session) does not become the route for
    PRIVATE=<that GUID> names; one this QM dialled does."""
    a = net.add(A)
    claimed = uuid.uuid4()
    forger = ForgedPeer(net, a, M, guid=claimed)
    assert forger.open
    assert a.transfer.qm_route(claimed) is None
    b = _b(net)
    send_tx(a.qm, DEST_B, [b"m0"])
    net.run_until_quiet()
    assert a.transfer.qm_route(b.qm.guid) == B


# ---------------------------------------------------------------------- open relay


def test_a_qm_without_a_route_relays_nothing(net: Net, caplog: pytest.LogCaptureFixture) -> None:
    """The open relay as reproduced: a message for DIRECT=TCP:<third host> sent to a QM
    with no route was relayed to that host. Now it is refused (not passed on, not
    acknowledged), logged and counted; the third host gets nothing."""
    metrics = Metrics()
    b = net.add(B, metrics=metrics)
    c = net.add(C)
    c.qm.create_queue(Q, transactional=True)
    c.qm.create_queue("private$\\plain")
    peer = ForgedPeer(net, b, M)
    sid = TxSequenceId.from_int((int(net.clock.now) << 32) | 1)
    with caplog.at_level(logging.WARNING, "openmsmq.transfer"):
        peer.send(peer.transactional("PRIVATE$\\orders", b"relay me", sid, 1, 0, host=C))
        net.run_until_quiet()
    assert bodies_in(c.qm, Q) == []
    assert b.transfer.stats["forwarded"] == 0
    assert _refusals(metrics, "relay") == 1
    assert any("rule relay" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("how", ["route", "allow_relay"])
def test_a_qm_relays_along_a_route_or_with_allow_relay(net: Net, how: str) -> None:
    cfg: dict[str, object] = (
        {"routes": ((C, C),)} if how == "route" else {"trust": TrustConfig(allow_relay=True)}
    )
    a = net.add(A, routes=((C, B),))
    net.add(B, **cfg)
    c = net.add(C, trust=TrustConfig(intermediate_hops=(B,)))
    c.qm.create_queue(Q, transactional=True)
    send_tx(a.qm, DEST_C, [b"m0", b"m1"])
    net.run_until_quiet()
    assert bodies_in(c.qm, Q) == [b"m0", b"m1"]
    assert outgoing_count(a.qm) == 0  # C's OrderAcks came back through B


# ---------------------------------------------------------------------- identity pinning


def test_a_pinned_guid_is_accepted_from_its_networks_only(net: Net) -> None:
    """allowed_peers binds A's GUID to 127.0.0.1/32: A itself gets in; a forger claiming
    A's GUID from elsewhere is refused at the handshake, though B never reached A itself."""
    metrics = Metrics()
    a_guid = uuid.uuid4()
    b = _b(net, metrics=metrics, trust=TrustConfig(pinned=((a_guid, ("127.0.0.1/32",)),)))
    assert ForgedPeer(net, b, A, guid=a_guid).open
    forger = ForgedPeer(net, b, M, guid=a_guid)
    assert not forger.open
    assert _refusals(metrics, "identity") == 1
    assert ForgedPeer(net, b, M).open  # anyone else claiming its own GUID is served as before


def test_acknowledgments_may_take_their_own_way_back() -> None:
    """Acknowledgments are messages routed on their own (MS-MQQB 3.1.7.17), so the way
    back may differ from the way there: an OrderAck for a queue whose next hop is B is
    applied from a configured intermediate hop when it names the destination QM, and
    from the destination's own session for a DIRECT= name reached through B; from any
    other peer, or naming another QM, it is refused."""
    from openmsmq.observability.sink import NULL_METRICS
    from openmsmq.transfer.trust import AckOrigin, PeerTrust

    dest_qm, other_qm, hop_qm = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    trust = PeerTrust(TrustConfig(intermediate_hops=("127.0.0.5",)), (), NULL_METRICS)

    def refusal(origin: AckOrigin, *, dest: uuid.UUID | None, routed: bool, host: str = "") -> str | None:
        via = trust.is_intermediate_hop(origin.peer, origin.address, origin.session_qm)
        return trust.ack_refusal(
            origin, B, "", destination_qm=dest, routed=routed, destination_host=host, via_intermediate=via
        )

    relayed = AckOrigin("127.0.0.5", "127.0.0.5", hop_qm, dest_qm)
    assert refusal(relayed, dest=dest_qm, routed=False) is None
    assert refusal(AckOrigin("127.0.0.5", "127.0.0.5", hop_qm, other_qm), dest=dest_qm, routed=False)
    stranger = AckOrigin("127.0.0.6", "127.0.0.6", dest_qm, dest_qm)
    assert refusal(stranger, dest=dest_qm, routed=False)
    own = AckOrigin("127.0.0.4", "127.0.0.4", dest_qm, dest_qm)
    assert refusal(own, dest=None, routed=True, host="127.0.0.4") is None
    assert refusal(own, dest=None, routed=True, host="127.0.0.7")  # not that destination's address
    speaking_for_another = AckOrigin("127.0.0.4", "127.0.0.4", dest_qm, other_qm)
    assert refusal(speaking_for_another, dest=None, routed=True, host="127.0.0.4")


def test_a_senders_order_queue_is_reached_along_the_session_its_messages_came_on(net: Net) -> None:
    """A sender that dialled B with PRIVATE= names is answered at PRIVATE=<its GUID>: B
    learns that way back from the session that carried the sender's own transactional
    messages (a bare claim teaches nothing: test_learned_routes_never_come_from_a_claim)."""
    b = _b(net)
    sender = ForgedPeer(net, b, M)
    assert b.transfer.qm_route(sender.guid) is None
    sid = TxSequenceId.from_int((int(net.clock.now) << 32) | 1)
    sender.send(sender.transactional(Q, b"mine", sid, 1, 0))
    net.advance(1.0)
    assert bodies_in(b.qm, Q) == [b"mine"]
    assert b.transfer.qm_route(sender.guid) == M
