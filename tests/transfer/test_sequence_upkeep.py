"""Incoming sequences that keep rejecting are reported and can be reset; the sequences
are capped and expire; the Order Ack Send Timer scan looks only at sequences whose timer
runs (docs/operations.md, "Incoming sequences")."""

from __future__ import annotations

import logging
import uuid

import pytest

from openmsmq.errors import MQError
from openmsmq.observability.metrics import Metrics
from openmsmq.protocol import incoming as incoming_module
from openmsmq.protocol.incoming import IncomingSequenceSnapshot, SequenceKey
from openmsmq.transfer.engine import Transfer
from openmsmq.transfer.trust import TrustConfig
from openmsmq.wire.ids import TxSequenceId

from .forged import ForgedPeer
from .harness import Net, bodies_in

B, M = "127.0.0.2", "127.0.0.9"
Q = "private$\\orders"


def _sid(net: Net) -> TxSequenceId:
    return TxSequenceId.from_int((int(net.clock.now) << 32) | 1)


def test_a_sequence_that_keeps_rejecting_is_logged_once_then_periodically_and_can_be_reset(
    net: Net, caplog: pytest.LogCaptureFixture
) -> None:
    b = net.add(B, trust=TrustConfig(stuck_after=60.0, stuck_repeat=600.0))
    b.qm.create_queue(Q, transactional=True)
    sender = ForgedPeer(net, b, M)  # a sender speaking for itself
    sid = _sid(net)
    sender.send(sender.transactional(Q, b"1", sid, 1, 0))
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == [b"1"]

    def gap() -> None:  # its store lost messages 2..4: it sends 5 after 4, again and again
        sender.send(sender.transactional(Q, b"5", sid, 5, 4))

    with caplog.at_level(logging.WARNING, "openmsmq.transfer"):
        gap()
        net.advance(30.0)
        gap()
        stuck = [r for r in caplog.records if "rejects every message" in r.getMessage()]
        assert stuck == []  # not yet: a gap is repaired by the next resend, usually
        net.advance(31.0)
        gap()
        gap()
        stuck = [r.getMessage() for r in caplog.records if "rejects every message" in r.getMessage()]
        assert len(stuck) == 1  # once ...
        assert str(sender.guid) in stuck[0] and "private$\\orders" in stuck[0] and "GAP" in stuck[0]
        net.advance(300.0)
        gap()
        assert len([r for r in caplog.records if "rejects every message" in r.getMessage()]) == 1
        net.advance(301.0)
        gap()
        assert len([r for r in caplog.records if "rejects every message" in r.getMessage()]) == 2  # ... again
    [status] = b.transfer.incoming_status()
    assert status.last_rejected == ("GAP", sid, 5, 4) and status.reject_count == 6
    # An operator checked the sender and resets the sequence where its message is accepted.
    reset = b.transfer.reset_incoming_sequence(sender.guid, status.destination, None, net.clock.now)
    assert reset.before == (sid, 1) and reset.after == (sid, 4)
    gap()
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == [b"1", b"5"]
    [state] = b.qm.incoming_sequences()
    assert (state.tx_sequence_id, state.tx_sequence_number) == (sid.value, 5)


def test_a_reset_is_refused_while_messages_of_the_sequence_are_being_stored(net: Net) -> None:
    b = net.add(B)
    b.qm.create_queue(Q, transactional=True)
    b.hold_store = True
    sender = ForgedPeer(net, b, M)
    sender.send(sender.transactional(Q, b"1", _sid(net), 1, 0))
    [status] = b.transfer.incoming_status()
    with pytest.raises(MQError, match="being stored"):
        b.transfer.reset_incoming_sequence(sender.guid, status.destination, None, net.clock.now)
    b.release_held(net.clock.now)
    assert bodies_in(b.qm, Q) == [b"1"]


def test_incoming_sequences_are_capped(net: Net, caplog: pytest.LogCaptureFixture) -> None:
    """3,000 sources over one connection left 3,002 persisted sequences: a new sequence
    beyond mqqb.max_incoming_sequences is refused (logged, counted); the others go on."""
    metrics = Metrics()
    b = net.add(B, metrics=metrics, trust=TrustConfig(max_incoming_sequences=2))
    for q in ("q1", "q2", "q3"):
        b.qm.create_queue(f"private$\\{q}", transactional=True)
    sender = ForgedPeer(net, b, M)
    sid = _sid(net)
    sender.send(sender.transactional("private$\\q1", b"a", sid, 1, 0))
    sender.send(sender.transactional("private$\\q2", b"b", sid, 1, 0))
    with caplog.at_level(logging.WARNING, "openmsmq.transfer"):
        sender.send(sender.transactional("private$\\q3", b"c", sid, 1, 0))
    net.advance(1.0)  # (the OrderAcks wait in B's outgoing queue for the forged sender)
    assert not sender.open
    assert metrics.registry.get_sample_value("openmsmq_refusals_total", {"rule": "sequence-cap"}) == 1
    assert any("sequence-cap" in r.getMessage() for r in caplog.records)
    assert len(b.qm.incoming_sequences()) == 2 and bodies_in(b.qm, "private$\\q3") == []
    again = ForgedPeer(net, b, M, guid=sender.guid)  # its existing sequences still work
    again.send(again.transactional("private$\\q1", b"a2", sid, 2, 1))
    net.advance(1.0)
    assert bodies_in(b.qm, "private$\\q1") == [b"a", b"a2"]


def test_idle_sequences_expire_and_their_rows_are_deleted(net: Net) -> None:
    b = net.add(B, trust=TrustConfig(incoming_sequence_max_idle=1000.0, upkeep_interval=100.0))
    b.qm.create_queue("private$\\q1", transactional=True)
    b.qm.create_queue("private$\\q2", transactional=True)
    sender = ForgedPeer(net, b, M)
    sid = _sid(net)
    sender.send(sender.transactional("private$\\q1", b"old", sid, 1, 0))
    net.run_until_quiet()
    net.advance(600.0)
    sender = ForgedPeer(net, b, M, guid=sender.guid)
    sender.send(sender.transactional("private$\\q2", b"recent", sid, 1, 0))
    net.run_until_quiet()
    assert len(b.qm.incoming_sequences()) == 2
    for _ in range(6):
        net.advance(100.0)
    left = b.qm.incoming_sequences()
    assert [s.destination.lower() for s in left] == ["direct=tcp:127.0.0.2\\private$\\q2"]
    assert [s.key.destination.lower() for s in b.transfer.incoming] == ["direct=tcp:127.0.0.2\\private$\\q2"]
    # The forgotten one starts again only with a message that starts a sequence.
    later = TxSequenceId.from_int(sid.value + 1)
    sender = ForgedPeer(net, b, M, guid=sender.guid)  # (its session closed while idle)
    sender.send(sender.transactional("private$\\q1", b"new", later, 1, 0))
    net.run_until_quiet()
    assert bodies_in(b.qm, "private$\\q1") == [b"old", b"new"]


def test_an_expired_rows_deletion_spares_a_sequence_accepted_again_meanwhile(net: Net) -> None:
    b = net.add(B)
    b.qm.create_queue(Q, transactional=True)
    sender = ForgedPeer(net, b, M)
    sid = _sid(net)
    sender.send(sender.transactional(Q, b"1", sid, 1, 0))
    net.run_until_quiet()
    [stale] = b.qm.incoming_sequences()
    sender.send(sender.transactional(Q, b"2", sid, 2, 1))
    net.run_until_quiet()
    assert b.qm.update_incoming_sequences([stale]) == 0  # the row moved on: kept
    assert [s.tx_sequence_number for s in b.qm.incoming_sequences()] == [2]


def test_the_order_ack_timer_scan_looks_only_at_sequences_whose_timer_runs(
    net: Net, monkeypatch: pytest.MonkeyPatch
) -> None:
    b = net.add(B)
    b.qm.create_queue(Q, transactional=True)
    snapshots = [
        IncomingSequenceSnapshot(SequenceKey(uuid.uuid4(), f"DIRECT=tcp:{B}\\private$\\q{i}"))
        for i in range(3000)
    ]
    b.qm.update_incoming_sequences([], [])
    t = Transfer(b.qm, b.transfer.config, net.clock.now)
    for snap in snapshots:
        t.incoming.get(snap.key, net.clock.now)
    calls = [0]
    real = incoming_module.IncomingSequence.get_timer

    def counting(self):  # type: ignore[no-untyped-def]
        calls[0] += 1
        return real(self)

    monkeypatch.setattr(incoming_module.IncomingSequence, "get_timer", counting)
    assert t.incoming.get_timer() is None and calls[0] == 0
    t.get_timer()
    t.handle_timer(net.clock.now)
    assert calls[0] == 0
    seq = t.incoming.get(snapshots[0].key, net.clock.now)
    seq.receive(_sid(net), 1, 0, net.clock.now)
    assert t.incoming.get_timer() == net.clock.now + 0.5 and calls[0] == 1
