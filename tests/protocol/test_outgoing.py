"""Sender side of transactional sequences: retention, release, FinalAck, resend back-off."""

from __future__ import annotations

import uuid

import pytest

from openmsmq.errors import LocalProtocolError
from openmsmq.protocol.incoming import IncomingSequence, IncomingSequenceSnapshot, SequenceKey
from openmsmq.protocol.outgoing import (
    AwaitingFinalAck,
    FinalAckIgnored,
    IgnoreReason,
    OrderAckIgnored,
    OutgoingSequence,
    Released,
    ResendConfig,
    RetainedMessage,
    Settled,
    Transmit,
)
from openmsmq.wire.ids import TxSequenceId

S1 = TxSequenceId(500, 1)
S2 = TxSequenceId(500, 2)


def msg(n: int, seq: TxSequenceId = S1, fa: bool = False) -> RetainedMessage:
    return RetainedMessage(seq, n, n - 1, message_id=100 + n, final_ack_requested=fa, handle=n)


def connected(now: float = 0.0) -> OutgoingSequence:
    o = OutgoingSequence(now)
    assert o.connection_made(now) == []
    return o


def numbers(events: list[object]) -> list[int]:
    out: list[int] = []
    for e in events:
        assert isinstance(e, Transmit)
        out.extend(m.tx_sequence_number for m in e.messages)
    return out


def test_add_transmits_and_starts_timer() -> None:
    o = connected()
    assert o.add(msg(1), now=1.0) == [Transmit((msg(1),), resend=False)]
    assert o.get_timer() == 31.0
    o.add(msg(2), now=2.0)
    assert o.get_timer() == 31.0  # already running: not restarted
    assert [m.tx_sequence_number for m in o.unacked] == [1, 2]


def test_add_many_is_one_transmit() -> None:
    o = connected()
    (ev,) = o.add_many([msg(1), msg(2), msg(3)], now=0.0)
    assert isinstance(ev, Transmit) and [m.tx_sequence_number for m in ev.messages] == [1, 2, 3]


def test_retained_until_order_ack_and_released_several_at_once() -> None:
    o = connected()
    o.add_many([msg(n) for n in range(1, 6)], now=0.0)
    # no input other than an OrderAck/FinalAck can release (SessionAcks never reach this object)
    assert len(o.unacked) == 5
    ev = o.order_ack_received(S1, 3, now=1.0)
    assert ev == [Released((msg(1), msg(2), msg(3)))]
    assert [m.tx_sequence_number for m in o.unacked] == [4, 5]
    assert not o.all_order_acked
    assert o.order_ack_received(S1, 5, now=2.0) == [Released((msg(4), msg(5)))]
    assert o.all_order_acked
    assert o.get_timer() is None


def test_repeated_order_ack_is_a_no_op() -> None:
    o = connected()
    o.add_many([msg(1), msg(2)], now=0.0)
    o.order_ack_received(S1, 2, now=1.0)
    assert o.order_ack_received(S1, 2, now=2.0) == []
    assert o.order_ack_received(S1, 1, now=2.0) == []
    assert o.last_ack_count == 3
    assert o.time_of_last_ack == 2.0


@pytest.mark.parametrize(
    ("seq", "number", "reason"),
    [
        (S2, 1, IgnoreReason.UNKNOWN_SEQUENCE),
        (S1, 4, IgnoreReason.BEYOND_SENT),
        (S1, 0, IgnoreReason.INVALID_NUMBER),
    ],
)
def test_unmatched_order_ack_is_reported(seq: TxSequenceId, number: int, reason: IgnoreReason) -> None:
    """The receiver's OrderAck carries the acknowledged stream's IncomingTxSequenceID (the
    seed names OutgoingTxSequenceID: protocol.md §11 item 2): the sender matches it to
    its sequence and releases; one naming another TxSequenceID (what the receiver's own
    OutgoingTxSequenceID would be), a number beyond what was sent, or 0 is reported,
    never applied."""
    o = connected()
    o.add_many([msg(1), msg(2), msg(3)], now=0.0)
    # What the receiver sends for these three (seed 002's registry, then 3.1.6.9).
    receiver = IncomingSequence(IncomingSequenceSnapshot(SequenceKey(uuid.UUID(int=1), "q")), 0.0)
    for m in o.unacked:
        receiver.receive(m.tx_sequence_id, m.tx_sequence_number, m.previous_tx_sequence_number, 0.0)
    receiver.messages_stored([(S1, 1), (S1, 2)], 0.1)
    ack = receiver.handle_timer(0.5)
    assert ack is not None and (ack.tx_sequence_id, ack.tx_sequence_number) == (S1, 2)
    assert ack.tx_sequence_id != S2  # not the receiver's own (outgoing) sequence
    assert o.order_ack_received(seq, number, now=1.0) == [OrderAckIgnored(seq, number, reason)]
    assert len(o.unacked) == 3
    assert o.order_ack_received(ack.tx_sequence_id, ack.tx_sequence_number, now=1.0) == [
        Released((msg(1), msg(2)))
    ]


def test_order_ack_beyond_transmitted_while_disconnected() -> None:
    o = OutgoingSequence(0.0)
    o.add(msg(1), now=0.0)  # not connected: never transmitted
    assert o.order_ack_received(S1, 1, now=1.0) == [OrderAckIgnored(S1, 1, IgnoreReason.UNKNOWN_SEQUENCE)]


def test_order_ack_beyond_sent_up_to_the_assigned_number_after_a_restart() -> None:
    # Restarted sender: the store holds 1..25 of S1 (next number 26) but only 1..10 are
    # reloaded; the receiver already stored all 25 and acknowledges 25.
    o = OutgoingSequence(0.0, retained=[msg(n) for n in range(1, 11)])
    assert numbers(list(o.connection_made(1.0))) == list(range(1, 11))
    assert o.order_ack_received(S1, 25, now=2.0) == [OrderAckIgnored(S1, 25, IgnoreReason.BEYOND_SENT)]
    o.note_assigned(S1, 25)
    # Never beyond what the store assigned.
    assert o.order_ack_received(S1, 26, now=2.0) == [OrderAckIgnored(S1, 26, IgnoreReason.BEYOND_SENT)]
    assert o.order_ack_received(S1, 25, now=3.0) == [Released(tuple(msg(n) for n in range(1, 11)))]
    assert o.all_order_acked and o.get_timer() is None
    # What is loaded next and the OrderAck covers is released at once, never sent.
    loaded = [msg(n) for n in range(11, 21)]
    assert o.add_many(loaded, now=4.0) == [Released(tuple(loaded))]
    # A batch straddling the acknowledged number: release the covered part, send the rest.
    assert o.add_many([msg(n) for n in range(21, 28)], now=5.0) == [
        Released(tuple(msg(n) for n in range(21, 26))),
        Transmit((msg(26), msg(27)), resend=False),
    ]
    assert [m.tx_sequence_number for m in o.unacked] == [26, 27]
    assert o.get_timer() == 35.0
    assert o.order_ack_received(S1, 27, now=6.0) == [Released((msg(26), msg(27)))]


def test_note_assigned_for_another_sequence_releases_nothing() -> None:
    o = connected()
    o.add_many([msg(1), msg(2)], now=0.0)
    o.note_assigned(S2, 9)  # a number assigned in S2 says nothing about S1
    assert o.order_ack_received(S1, 9, now=1.0) == [OrderAckIgnored(S1, 9, IgnoreReason.BEYOND_SENT)]
    assert len(o.unacked) == 2


def test_final_ack_requested_retention() -> None:
    o = connected()
    o.add_many([msg(1), msg(2, fa=True), msg(3)], now=0.0)
    ev = o.order_ack_received(S1, 3, now=1.0)
    assert ev == [Released((msg(1), msg(3))), AwaitingFinalAck((msg(2, fa=True),))]
    assert o.all_order_acked
    assert o.awaiting_final_ack == (msg(2, fa=True),)
    # a FinalAck with the wrong MessageID does not match
    bad = o.final_ack_received(S1, 2, 999, 0x4000, now=2.0)
    assert bad == [FinalAckIgnored(S1, 2, 999, 0x4000, IgnoreReason.UNKNOWN_MESSAGE)]
    assert o.final_ack_received(S1, 2, 102, 0x4000, now=3.0) == [
        Released((msg(2, fa=True),), final_ack_class=0x4000)
    ]
    assert o.awaiting_final_ack == ()


def test_a_final_ack_before_the_order_ack_settles_the_message_at_once() -> None:
    """MS-MQQB 3.1.5.7 moves the message the FinalAck names out of the OutgoingMessageTable
    too: one the receiver refused before its acceptance rule is never OrderAck'ed, so it
    leaves the sequence when its FinalAck comes, whatever it asked for, and the messages
    after it are resent bridged over it (3.1.7.1.3)."""
    o = connected()
    o.add_many([msg(1, fa=True), msg(2), msg(3)], now=0.0)
    assert o.final_ack_received(S1, 1, 101, 0x8000, now=1.0) == [Settled(msg(1, fa=True), 0x8000)]
    assert o.final_ack_received(S1, 2, 102, 0x8000, now=1.0) == [Settled(msg(2), 0x8000)]
    assert [m.tx_sequence_number for m in o.unacked] == [3]
    assert o.get_timer() == pytest.approx(30.0)
    (t,) = o.handle_timer(30.0)
    assert isinstance(t, Transmit)
    assert [(m.tx_sequence_number, m.previous_tx_sequence_number) for m in t.messages] == [(3, 0)]
    # a late OrderAck for the settled numbers releases only what is left
    assert o.order_ack_received(S1, 3, now=32.0) == [Released((msg(3),))]
    assert o.all_order_acked and o.awaiting_final_ack == ()
    # a repeated FinalAck finds nothing
    assert o.final_ack_received(S1, 1, 101, 0x8000, now=33.0)[0].reason == IgnoreReason.UNKNOWN_MESSAGE


def test_resend_back_off_table() -> None:
    o = connected()
    o.add(msg(1), now=0.0)
    expected = [30, 60, 90, 390, 690, 990, 2790, 4590, 6390, 27990, 49590, 71190]
    fired: list[float] = []
    for deadline in expected:
        assert o.get_timer() == pytest.approx(deadline)
        assert o.handle_timer(deadline - 0.001) == []
        ev = o.handle_timer(deadline)
        assert ev == [Transmit((msg(1),), resend=True)]
        fired.append(deadline)
    assert fired == expected
    assert o.resend_interval_index == 9 and o.resend_interval == 21600


def test_configurable_resend_table() -> None:
    cfg = ResendConfig(short=1, medium=2, long=3, final=4)
    assert cfg.table == (1, 1, 1, 2, 2, 2, 3, 3, 3, 4)
    with pytest.raises(LocalProtocolError):
        ResendConfig(short=0)


def test_progress_resets_back_off() -> None:
    """The back-off counts resends nothing answered (one step per expiry); an OrderAck
    that makes progress starts it over, a repeated one changes nothing but TimeOfLastAck
    and LastAckCount (MS-MQQB 3.1.5.6 step 2 is not followed: docs/conformance.md, D6)."""
    o = connected()
    o.add_many([msg(1), msg(2), msg(3)], now=0.0)
    o.handle_timer(30.0)
    o.handle_timer(60.0)
    assert o.resend_interval_index == 2
    o.order_ack_received(S1, 1, now=70.0)
    assert o.resend_interval_index == 0
    assert o.get_timer() == 100.0
    o.order_ack_received(S1, 1, now=80.0)  # repeated
    assert o.resend_interval_index == 0 and o.get_timer() == 100.0
    assert o.last_ack_count == 2 and o.time_of_last_ack == 80.0
    assert o.handle_timer(100.0) == [Transmit((msg(2), msg(3)), resend=True)]
    assert o.resend_interval_index == 1


def test_removing_a_message_brings_the_resend_of_the_ones_after_it_forward() -> None:
    """The messages sent after a removed one named it as their predecessor (3.1.7.1.3):
    they are resent, bridged, within the first ResendTimerTable entry rather than after
    the back-off unanswered resends stretched."""
    o = connected()
    o.add_many([msg(1), msg(2), msg(3)], now=0.0)
    for deadline in (30.0, 60.0, 90.0):
        o.handle_timer(deadline)  # nothing answers: the back-off grows to 300 s
    assert o.get_timer() == 390.0
    o.remove(S1, 1, now=100.0)
    assert o.get_timer() == 130.0
    (t,) = o.handle_timer(130.0)
    assert isinstance(t, Transmit)
    assert [(m.tx_sequence_number, m.previous_tx_sequence_number) for m in t.messages] == [(2, 0), (3, 2)]


def test_resend_after_reconnect_in_order() -> None:
    o = connected()
    o.add_many([msg(1), msg(2), msg(3)], now=0.0)
    o.order_ack_received(S1, 1, now=1.0)
    o.connection_lost()
    assert o.get_timer() is None
    assert o.add(msg(4), now=2.0) == []  # disconnected: retained, not sent
    assert o.handle_timer(1000.0) == []
    ev = o.connection_made(now=5.0)
    assert numbers(list(ev)) == [2, 3, 4]
    assert isinstance(ev[0], Transmit) and ev[0].resend
    assert o.get_timer() == 35.0


def test_restore_from_store_then_reconnect() -> None:
    o = OutgoingSequence(0.0, retained=[msg(7), msg(8)], awaiting_final_ack=[msg(5, fa=True)])
    # OrderAcks that arrive for restored messages are honoured (they were sent before the crash)
    assert o.order_ack_received(S1, 7, now=1.0) == [Released((msg(7),))]
    assert numbers(list(o.connection_made(now=2.0))) == [8]
    assert o.final_ack_received(S1, 5, 105, 0x4000, now=3.0)[0] == Released(
        (msg(5, fa=True),), final_ack_class=0x4000
    )


def test_removed_message_gap_is_bridged_on_resend() -> None:
    o = connected()
    o.add_many([msg(1), msg(2), msg(3), msg(4)], now=0.0)
    o.order_ack_received(S1, 1, now=1.0)
    assert o.remove(S1, 2) == msg(2)
    assert o.remove(S1, 3) == msg(3)
    (ev,) = o.handle_timer(31.0)
    assert isinstance(ev, Transmit)
    (m4,) = ev.messages
    assert (m4.tx_sequence_number, m4.previous_tx_sequence_number) == (4, 1)
    # a message committed after the removal is bridged on its first send too
    o2 = connected()
    o2.add(msg(1), now=0.0)
    o2.remove(S1, 1)
    (ev2,) = o2.add(msg(2), now=1.0)
    assert isinstance(ev2, Transmit) and ev2.messages[0].previous_tx_sequence_number == 0
    with pytest.raises(LocalProtocolError):
        o2.remove(S1, 9)


def test_a_message_whose_committed_predecessor_is_gone_is_bridged() -> None:
    # The predecessor left the outgoing queue unsent before it was loaded (expired):
    # PreviousTxSequenceNumber names the message before it still in the table (3.1.7.1.3).
    o = connected()
    (ev,) = o.add_many([msg(1), msg(3), msg(4)], now=0.0)  # 2 is gone
    assert isinstance(ev, Transmit)
    assert [(m.tx_sequence_number, m.previous_tx_sequence_number) for m in ev.messages] == [
        (1, 0),
        (3, 1),
        (4, 3),
    ]
    # Nothing of the sequence before it waits, none known acknowledged (a restart): 0,
    # at most what the receiver has, so it is accepted (seed 002, first condition).
    o2 = connected()
    (ev2,) = o2.add(msg(6), now=0.0)
    assert isinstance(ev2, Transmit) and ev2.messages[0].previous_tx_sequence_number == 0
    # A predecessor acknowledged here is not bridged over.
    o3 = connected()
    o3.add(msg(1), now=0.0)
    o3.order_ack_received(S1, 1, now=1.0)
    (ev3,) = o3.add(msg(2), now=2.0)
    assert isinstance(ev3, Transmit) and ev3.messages[0].previous_tx_sequence_number == 1


def test_numbering_misuse_is_local_error() -> None:
    o = connected()
    o.add(msg(1), now=0.0)
    with pytest.raises(LocalProtocolError):
        o.add(msg(1), now=0.0)  # not increasing
    with pytest.raises(LocalProtocolError):
        o.add(msg(1, seq=S2), now=0.0)  # new sequence while 1 is unacknowledged
    with pytest.raises(LocalProtocolError):
        o.add(RetainedMessage(S1, 5, 5, message_id=1), now=0.0)  # previous must be < number
    o.order_ack_received(S1, 1, now=1.0)
    o.add(msg(1, seq=S2), now=2.0)  # fine once everything is OrderAck'ed
    o.order_ack_received(S2, 1, now=3.0)
    with pytest.raises(LocalProtocolError):
        o.add(msg(9, seq=S1), now=4.0)  # never send on an older sequence


def test_old_sequences_are_forgotten() -> None:
    o = connected()
    for ordinal in range(1, 6):
        sid = TxSequenceId(500, ordinal)
        o.add(RetainedMessage(sid, 1, 0, message_id=ordinal), now=float(ordinal))
        assert o.order_ack_received(sid, 1, now=float(ordinal)) != []
    # the previous sequence is still recognised (a repeated OrderAck is a no-op) ...
    o.add(RetainedMessage(TxSequenceId(500, 6), 1, 0, message_id=6), now=6.0)
    assert o.order_ack_received(TxSequenceId(500, 5), 1, now=6.0) == []
    # ... older ones are forgotten and reported as unknown
    old = TxSequenceId(500, 1)
    assert o.order_ack_received(old, 1, now=6.0) == [OrderAckIgnored(old, 1, IgnoreReason.UNKNOWN_SEQUENCE)]


@pytest.mark.parametrize("seed", range(40))
def test_release_matches_the_per_message_rule(seed: int) -> None:
    """OrderAcks over retained messages with gaps (removed numbers), FinalAck requests,
    early FinalAcks (they settle their message at once) and an equal-but-not-identical
    TxSequenceID: the events and what is left are those of the per-message rule (every
    retained message numbered up to the OrderAck's is released, or waits for its
    FinalAck, in order)."""
    import random

    rng = random.Random(seed)
    numbers_ = sorted(rng.sample(range(1, 60), 25))
    fa = {n for n in numbers_ if rng.random() < (0.0 if seed % 2 else 0.2)}
    o = connected()
    o.add_many([msg(n, fa=n in fa) for n in numbers_], now=0.0)
    early = {n: 0x4000 for n in fa if rng.random() < 0.5}
    for n, cls in early.items():
        assert o.final_ack_received(S1, n, 100 + n, cls, now=0.5) == [Settled(msg(n, fa=True), cls)]
    left = [n for n in numbers_ if n not in early]
    acked = 0
    for step in range(4):
        up_to = min(numbers_[-1], max(1, acked + rng.randint(0, 20)))  # valid, sent
        seq = TxSequenceId(500, 1) if step % 2 else S1  # equal, not always the same object
        got = o.order_ack_received(seq, up_to, now=1.0 + step)
        if up_to <= acked:
            assert got == []
            continue
        acked = up_to
        covered = [n for n in left if n <= up_to]
        want: list[object] = []
        plain = tuple(msg(n) for n in covered if n not in fa)
        waiting = tuple(msg(n, fa=True) for n in covered if n in fa and n not in early)
        if plain:
            want.append(Released(plain))
        if waiting:
            want.append(AwaitingFinalAck(waiting))
        assert got == want
        left = [n for n in left if n > up_to]
        assert [m.tx_sequence_number for m in o.unacked] == left
        assert o.all_order_acked == (not left)
        assert (o.get_timer() is None) == (not left)


class _NoScan(list[RetainedMessage]):
    """A retained-message list that counts the scans made over it."""

    scans = 0

    def __iter__(self):  # type: ignore[no-untyped-def]
        type(self).scans += 1
        return super().__iter__()


def test_final_ack_and_remove_find_the_message_by_bisection_not_by_scan() -> None:
    """A FinalAck or a removal looks the message up among up to max_in_flight retained
    ones: by its number, never by walking the list (FinalAcks for a burst of rejected
    messages made the sender quadratic). Found, missing (a gap), another message's
    MessageID, another sequence: each gives the same outcome as before."""
    o = connected()
    kept = list(range(1, 4001, 2))  # odd numbers retained, even ones never sent
    o.add_many([msg(n, fa=n % 3 == 0) for n in kept], now=0.0)
    o._unacked = _NoScan(o._unacked)
    for n in (1, 3, 999, 3999):
        assert o.final_ack_received(S1, n, 100 + n, 0xC000, now=1.0) == [
            Settled(msg(n, fa=n % 3 == 0), 0xC000)
        ]
    for n in (2, 1000, 4000, 4001):
        assert o.final_ack_received(S1, n, 100 + n, 0xC000, now=1.0) == [
            FinalAckIgnored(S1, n, 100 + n, 0xC000, IgnoreReason.UNKNOWN_MESSAGE)
        ]
    assert o.final_ack_received(S1, 5, 999, 0xC000, now=1.0)[0].reason == IgnoreReason.UNKNOWN_MESSAGE
    assert o.final_ack_received(S2, 5, 105, 0xC000, now=1.0)[0].reason == IgnoreReason.UNKNOWN_MESSAGE
    assert o.remove(S1, 2001) == msg(2001, fa=True)
    assert o.remove(S1, 3997) == msg(3997)
    for n, seq in ((2001, S1), (2, S1), (7, S2)):
        with pytest.raises(LocalProtocolError):
            o.remove(seq, n)
    assert _NoScan.scans == 0
    # The settled ones are gone from the sequence: the OrderAck releases the rest.
    ev = o.order_ack_received(S1, 999, now=2.0)
    gone = {
        m.tx_sequence_number for e in ev if isinstance(e, Released | AwaitingFinalAck) for m in e.messages
    }
    assert gone == set(range(5, 998, 2))
    assert [m.tx_sequence_number for m in o.unacked][:2] == [1001, 1003]


def test_current_sequence_id_names_the_retained_sequence_without_a_copy() -> None:
    o = connected()
    assert o.current_sequence_id is None
    o.add_many([msg(1), msg(2)], now=0.0)
    assert o.current_sequence_id == S1
    o.order_ack_received(S1, 2, now=1.0)
    assert o.current_sequence_id is None
    o.add(msg(1, seq=S2), now=2.0)
    assert o.current_sequence_id == S2
