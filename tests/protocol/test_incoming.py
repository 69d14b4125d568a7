"""Receiver side of transactional sequences: acceptance rule (seed 002) and OrderAck (seed 003)."""

from __future__ import annotations

import uuid

import pytest

from openmsmq.errors import LocalProtocolError
from openmsmq.protocol.incoming import (
    Accepted,
    IncomingSequence,
    IncomingSequences,
    IncomingSequenceSnapshot,
    OrderAckConfig,
    Rejected,
    RejectReason,
    SendOrderAck,
    SequenceKey,
)
from openmsmq.wire.ids import ZERO_SEQUENCE_ID, TxSequenceId

KEY = SequenceKey(uuid.UUID(int=0xA), "PRIVATE=00000000-0000-0000-0000-00000000000b\\00000001")
S1 = TxSequenceId(1000, 1)
S2 = TxSequenceId(1000, 2)
S_HIGH_TS = TxSequenceId(1001, 0)  # larger as a u64 although its ordinal is smaller


def seq_at(seq_id: TxSequenceId, number: int, now: float = 0.0) -> IncomingSequence:
    return IncomingSequence(IncomingSequenceSnapshot(KEY, seq_id, number), now)


# (incoming id, incoming number, msg id, msg number, msg previous, expected reject reason or None)
ACCEPTANCE_TABLE = [
    # first message ever: only the second clause (higher ID, Previous == 0) can accept it
    (ZERO_SEQUENCE_ID, 0, S1, 1, 0, None),
    (ZERO_SEQUENCE_ID, 0, S1, 2, 1, RejectReason.NEW_SEQUENCE_NOT_AT_START),
    # in order
    (S1, 3, S1, 4, 3, None),
    # previous == incoming, < incoming, > incoming
    (S1, 3, S1, 5, 3, None),  # sender bridged a gap left by an expired message
    (S1, 3, S1, 5, 2, None),  # previous < incoming and number > incoming: accepted
    (S1, 3, S1, 5, 4, RejectReason.GAP),  # previous > incoming: message 4 missing
    # previous == 0 with the same sequence ID and a higher number: first clause accepts
    (S1, 3, S1, 4, 0, None),
    # duplicates
    (S1, 3, S1, 3, 2, RejectReason.DUPLICATE),
    (S1, 3, S1, 1, 0, RejectReason.DUPLICATE),
    # new, higher sequence ID
    (S1, 3, S2, 1, 0, None),
    (S1, 3, S2, 7, 0, None),  # number is not checked on a new sequence, only Previous == 0
    (S1, 3, S2, 2, 1, RejectReason.NEW_SEQUENCE_NOT_AT_START),
    (S1, 3, S_HIGH_TS, 1, 0, None),  # u64 comparison: TimeStamp is the high half
    # older sequence
    (S2, 1, S1, 4, 3, RejectReason.OLD_SEQUENCE),
    (S2, 1, S1, 1, 0, RejectReason.OLD_SEQUENCE),
    (S_HIGH_TS, 1, S2, 1, 0, RejectReason.OLD_SEQUENCE),
]


@pytest.mark.parametrize(("in_id", "in_no", "m_id", "m_no", "m_prev", "reason"), ACCEPTANCE_TABLE)
def test_acceptance_rule(
    in_id: TxSequenceId,
    in_no: int,
    m_id: TxSequenceId,
    m_no: int,
    m_prev: int,
    reason: RejectReason | None,
) -> None:
    seq = seq_at(in_id, in_no)
    result = seq.receive(m_id, m_no, m_prev, now=5.0)
    if reason is None:
        assert isinstance(result, Accepted)
        assert (seq.incoming_tx_sequence_id, seq.incoming_tx_sequence_number) == (m_id, m_no)
        assert result.state.tx_sequence_id == m_id
        assert result.state.tx_sequence_number == m_no
        assert seq.reject_count == 0
    else:
        assert isinstance(result, Rejected)
        assert result.reason is reason
        # protocol.md §11 item 1: a rejected message never moves the incoming state
        assert (seq.incoming_tx_sequence_id, seq.incoming_tx_sequence_number) == (in_id, in_no)
        assert result.reject_count == seq.reject_count == 1
    assert seq.last_access_time == 5.0


def test_reject_counter_counts_then_resets_on_accept() -> None:
    seq = seq_at(S1, 3)
    assert isinstance(seq.receive(S1, 3, 2, now=1.0), Rejected)
    assert isinstance(seq.receive(S1, 2, 1, now=2.0), Rejected)
    r = seq.receive(S1, 9, 8, now=3.0)
    assert isinstance(r, Rejected) and r.reject_count == 3
    assert seq.snapshot().reject_count == 3
    assert seq.last_access_time == 3.0
    a = seq.receive(S1, 4, 3, now=4.0)
    assert isinstance(a, Accepted)
    assert seq.reject_count == 0 and a.state.reject_count == 0
    assert seq.last_access_time == 4.0 and a.state.last_access_time == 4.0


def test_late_duplicate_does_not_roll_state_back() -> None:
    """§11 item 1: the literal text would set Incoming* to the duplicate's values."""
    seq = seq_at(S1, 0)
    for n in (1, 2, 3):
        assert isinstance(seq.receive(S1, n, n - 1, now=0.0), Accepted)
    assert isinstance(seq.receive(S1, 1, 0, now=0.1), Rejected)
    # had the state rolled back to 1, message 2 would be accepted a second time
    assert isinstance(seq.receive(S1, 2, 1, now=0.2), Rejected)
    assert isinstance(seq.receive(S1, 4, 3, now=0.3), Accepted)


def test_old_sequence_after_new_one() -> None:
    seq = seq_at(S1, 5)
    assert isinstance(seq.receive(S2, 1, 0, now=0.0), Accepted)
    r = seq.receive(S1, 6, 5, now=0.0)
    assert isinstance(r, Rejected) and r.reason is RejectReason.OLD_SEQUENCE


def test_receive_checks_u32_numbers() -> None:
    with pytest.raises(LocalProtocolError):
        seq_at(S1, 0).receive(S1, 1 << 32, 0, now=0.0)


# ---------------------------------------------------------------- OrderAck scheduling


def test_timer_started_when_inactive() -> None:
    seq = seq_at(S1, 0, now=100.0)
    assert seq.get_timer() is None
    seq.receive(S1, 1, 0, now=100.0)
    assert seq.get_timer() == pytest.approx(100.5)


def test_timer_restarted_while_within_maximum_delay() -> None:
    seq = seq_at(S1, 0, now=100.0)  # LastOrderAckSendTime = 100
    seq.receive(S1, 1, 0, now=100.0)
    seq.receive(S1, 2, 1, now=100.3)
    assert seq.get_timer() == pytest.approx(100.8)  # restarted, not left at 100.5
    seq.receive(S1, 3, 2, now=109.9)  # 9.9 s < MaximumOrderAckDelay
    assert seq.get_timer() == pytest.approx(110.4)


def test_maximum_order_ack_delay_stops_postponement() -> None:
    seq = seq_at(S1, 0, now=100.0)
    seq.receive(S1, 1, 0, now=109.8)  # timer inactive: started
    assert seq.get_timer() == pytest.approx(110.3)
    seq.receive(S1, 2, 1, now=110.1)  # 10.1 s since LastOrderAckSendTime: not restarted
    assert seq.get_timer() == pytest.approx(110.3)
    seq.messages_stored([(S1, 1), (S1, 2)], now=110.2)
    assert seq.handle_timer(110.2999) is None
    assert seq.handle_timer(110.3) == SendOrderAck(KEY, S1, 2)
    assert seq.last_order_ack_send_time == 110.3
    assert seq.get_timer() is None
    # after the send the cap counts from the new LastOrderAckSendTime again
    seq.receive(S1, 3, 2, now=111.0)
    seq.receive(S1, 4, 3, now=111.4)
    assert seq.get_timer() == pytest.approx(111.9)


def test_steady_stream_is_acked_within_max_delay() -> None:
    """A packet every 0.4 s would postpone a restart-only timer forever."""
    seq = seq_at(S1, 0, now=0.0)
    acks: list[tuple[float, SendOrderAck]] = []
    for n in range(1, 60):
        now = n * 0.4
        deadline = seq.get_timer()
        if deadline is not None and now >= deadline:
            ack = seq.handle_timer(now)
            if ack is not None:
                acks.append((now, ack))
        seq.receive(S1, n, n - 1, now=now)
        seq.message_stored(S1, n, now=now)
    assert acks, "MaximumOrderAckDelay must force an OrderAck during a steady stream"
    first_time, first = acks[0]
    assert first_time <= 10.0 + 0.5 + 0.4
    assert first.tx_sequence_number == 25  # everything durable at that moment
    assert len(acks) >= 2  # and again about every MaximumOrderAckDelay


@pytest.mark.parametrize(
    ("events", "expected_timer"),
    [
        ([("rx", 0.0)], 0.5),
        ([("rx", 0.0), ("rx", 0.2)], 0.7),
        ([("rx", 0.0), ("rx", 0.49)], 0.99),
        ([("rx", 9.9), ("rx", 10.0)], 10.4),  # 10.0 - 0 is not < 10: left running
        ([("rx", 9.8), ("rx", 9.99)], 10.49),
    ],
)
def test_order_ack_timer_table(events: list[tuple[str, float]], expected_timer: float) -> None:
    seq = seq_at(S1, 0, now=0.0)
    for n, (_, t) in enumerate(events, start=1):
        seq.receive(S1, n, n - 1, now=t)
    assert seq.get_timer() == pytest.approx(expected_timer)


def test_configurable_durations() -> None:
    cfg = OrderAckConfig(order_ack_timeout=0.1, maximum_order_ack_delay=1.0)
    seq = IncomingSequence(IncomingSequenceSnapshot(KEY), 0.0, cfg)
    seq.receive(S1, 1, 0, now=0.0)
    assert seq.get_timer() == pytest.approx(0.1)
    with pytest.raises(LocalProtocolError):
        OrderAckConfig(order_ack_timeout=0)


def test_rejected_duplicate_rearms_timer_and_re_acks() -> None:
    """A lost OrderAck is repaired: the retransmitted duplicate schedules a new OrderAck."""
    seq = seq_at(S1, 0, now=0.0)
    seq.receive(S1, 1, 0, now=0.0)
    seq.message_stored(S1, 1, now=0.1)
    assert seq.handle_timer(0.5) == SendOrderAck(KEY, S1, 1)
    assert isinstance(seq.receive(S1, 1, 0, now=30.0), Rejected)
    assert seq.get_timer() == pytest.approx(30.5)
    assert seq.handle_timer(30.5) == SendOrderAck(KEY, S1, 1)


def test_restart_from_snapshot_re_acks_duplicate() -> None:
    seq = seq_at(S1, 7, now=0.0)
    assert seq.snapshot().tx_sequence_number == 7
    assert isinstance(seq.receive(S1, 7, 6, now=1.0), Rejected)
    assert seq.handle_timer(1.5) == SendOrderAck(KEY, S1, 7)


# ---------------------------------------------------------------- durability and order


def test_no_ack_before_durable() -> None:
    seq = seq_at(S1, 0, now=0.0)
    seq.receive(S1, 1, 0, now=0.0)
    assert seq.handle_timer(0.5) is None  # not stored yet: nothing to acknowledge
    assert seq.message_stored(S1, 1, now=0.7) == [SendOrderAck(KEY, S1, 1)]  # deferred ack
    assert seq.last_order_ack_send_time == 0.7


def test_a_deferred_order_ack_goes_once_then_the_timer_governs() -> None:
    """Seed 002 / 3.1.6.9: OrderAcks follow the Order Ack Send Timer. One that came due
    while its message was not stored goes out once, when it is; the next durable
    advance is left to the timer (it used to send an OrderAck each time while anything
    was pending: 48 OrderAcks in 0.48 s of steady traffic)."""
    seq = seq_at(S1, 0, now=0.0)
    seq.receive(S1, 1, 0, now=0.0)
    assert seq.handle_timer(0.5) is None
    seq.receive(S1, 2, 1, now=0.6)
    assert seq.message_stored(S1, 1, now=0.65) == [SendOrderAck(KEY, S1, 1)]  # the deferred one
    seq.receive(S1, 3, 2, now=0.7)
    assert seq.message_stored(S1, 2, now=0.75) == []
    # the timer, restarted by message 3, acknowledges the rest
    assert seq.get_timer() == pytest.approx(1.2)
    seq.message_stored(S1, 3, now=0.8)
    assert seq.handle_timer(1.2) == SendOrderAck(KEY, S1, 3)


def test_a_deferred_order_ack_restarts_the_timer_for_what_is_still_being_stored() -> None:
    seq = seq_at(S1, 0, now=0.0)
    seq.receive(S1, 1, 0, now=0.0)
    seq.receive(S1, 2, 1, now=0.1)
    assert seq.handle_timer(0.6) is None  # nothing durable yet
    assert seq.message_stored(S1, 1, now=0.7) == [SendOrderAck(KEY, S1, 1)]
    assert seq.message_stored(S1, 2, now=0.8) == []
    # nothing else arrives: the timer started with the deferred OrderAck covers message 2
    assert seq.get_timer() == pytest.approx(1.2)
    assert seq.handle_timer(1.2) == SendOrderAck(KEY, S1, 2)


def test_the_registry_fires_the_timer_a_deferred_order_ack_restarted() -> None:
    """The registry scans only the sequences whose timer runs: the timer the deferred
    OrderAck starts for what is still being stored must be among them, or message 2 is
    never acknowledged (its sender resends it forever)."""
    reg = IncomingSequences.restore([], now=0.0)
    reg.receive(KEY, S1, 1, 0, now=0.0)
    reg.receive(KEY, S1, 2, 1, now=0.1)
    assert reg.handle_timer(0.6) == []  # nothing durable yet
    seq = reg.get(KEY, 0.0)
    assert seq.message_stored(S1, 1, now=0.7) == [SendOrderAck(KEY, S1, 1)]
    assert seq.message_stored(S1, 2, now=0.8) == []
    assert reg.get_timer() == pytest.approx(1.2)
    assert reg.handle_timer(1.2) == [SendOrderAck(KEY, S1, 2)]


def test_ack_strictly_in_order_when_4_is_stored_before_3() -> None:
    seq = seq_at(S1, 2, now=0.0)
    seq.receive(S1, 3, 2, now=0.0)
    seq.receive(S1, 4, 3, now=0.1)
    assert seq.message_stored(S1, 4, now=0.2) == []
    assert seq.durable_position == (S1, 2)
    ack = seq.handle_timer(0.6)
    # the timer expired: what is durable and contiguous is 2 (already durable before)
    assert ack == SendOrderAck(KEY, S1, 2)
    assert seq.snapshot().tx_sequence_number == 2
    # 3 becomes durable: the OrderAck jumps to 4, never 4 before 3
    assert seq.message_stored(S1, 3, now=0.7) == [SendOrderAck(KEY, S1, 4)]
    assert seq.durable_position == (S1, 4)


def test_one_order_ack_covers_several_messages() -> None:
    seq = seq_at(S1, 5, now=0.0)
    for n in (6, 7, 8):
        seq.receive(S1, n, n - 1, now=0.01 * n)
    assert seq.messages_stored([(S1, 8), (S1, 6), (S1, 7)], now=0.2) == []
    assert seq.handle_timer(0.58) == SendOrderAck(KEY, S1, 8)


def test_durable_prefix_is_in_acceptance_order_across_sequences() -> None:
    seq = seq_at(S1, 2, now=0.0)
    seq.receive(S1, 3, 2, now=0.0)
    seq.receive(S2, 1, 0, now=0.0)
    seq.message_stored(S2, 1, now=0.1)
    assert seq.durable_position == (S1, 2)
    seq.message_stored(S1, 3, now=0.1)
    assert seq.durable_position == (S2, 1)
    assert seq.handle_timer(0.5) == SendOrderAck(KEY, S2, 1)


def test_unknown_store_report_is_local_error() -> None:
    seq = seq_at(S1, 2)
    with pytest.raises(LocalProtocolError):
        seq.message_stored(S1, 3, now=0.0)
    with pytest.raises(LocalProtocolError):
        seq.store_failed(S1, 3)


def test_store_failure_rolls_back_acceptance() -> None:
    seq = seq_at(S1, 2, now=0.0)
    seq.receive(S1, 3, 2, now=0.0)
    seq.receive(S1, 4, 3, now=0.0)
    seq.receive(S1, 5, 4, now=0.0)
    seq.store_failed(S1, 4)
    assert seq.incoming_tx_sequence_number == 3
    # 5 is a gap now, 4 is accepted again on retransmission
    assert isinstance(seq.receive(S1, 5, 4, now=1.0), Rejected)
    assert isinstance(seq.receive(S1, 4, 3, now=1.0), Accepted)
    seq.messages_stored([(S1, 3), (S1, 4)], now=1.1)
    assert seq.snapshot().tx_sequence_number == 4


def test_store_failure_of_first_pending_returns_to_durable() -> None:
    seq = seq_at(S1, 2, now=0.0)
    seq.receive(S1, 3, 2, now=0.0)
    seq.store_failed(S1, 3)
    assert seq.incoming_tx_sequence_number == 2
    assert seq.handle_timer(0.5) == SendOrderAck(KEY, S1, 2)


def test_registry_restore_and_timers() -> None:
    k2 = SequenceKey(uuid.UUID(int=0xC), "q2")
    reg = IncomingSequences.restore([IncomingSequenceSnapshot(KEY, S1, 4)], now=0.0)
    assert len(reg) == 1
    assert isinstance(reg.receive(KEY, S1, 5, 4, now=1.0), Accepted)
    assert isinstance(reg.receive(k2, S2, 1, 0, now=1.2), Accepted)
    assert reg.get_timer() == pytest.approx(1.5)
    reg.get(KEY, 0.0).message_stored(S1, 5, now=1.3)
    reg.get(k2, 0.0).message_stored(S2, 1, now=1.3)
    assert reg.handle_timer(1.5) == [SendOrderAck(KEY, S1, 5)]
    assert reg.handle_timer(1.7) == [SendOrderAck(k2, S2, 1)]
    assert reg.get_timer() is None
    assert {s.key for s in reg.snapshots()} == {KEY, k2}


@pytest.mark.parametrize("seed", range(40))
def test_stored_reports_by_value_or_position_give_the_same_durable_prefix(seed: int) -> None:
    """``messages_stored`` with the Accepted values (the transfer's in-order identity path)
    and with (TxSequenceID, TxSequenceNumber) positions, in random batches and orders,
    duplicates and store failures included, keeps the durable point at the longest
    reported prefix in acceptance order (seed 003), as a plain model computes it."""
    import random

    rng = random.Random(seed)
    seq = seq_at(ZERO_SEQUENCE_ID, 0)
    accepted: list[Accepted] = []  # pending, in acceptance order (the model)
    reported: set[int] = set()  # indexes into ``accepted`` reported durable
    durable = (ZERO_SEQUENCE_ID, 0)
    number = 0
    now = 0.0
    for _ in range(60):
        now += 0.01
        step = rng.random()
        if step < 0.5:  # accept a few
            for _ in range(rng.randint(1, 5)):
                number += 1
                r = seq.receive(S1, number, number - 1, now)
                assert isinstance(r, Accepted)
                accepted.append(r)
        elif step < 0.9 and accepted:  # report some stored
            if rng.random() < 0.6:
                k = rng.randint(1, len(accepted))
                batch = list(range(k))
            else:
                batch = rng.sample(range(len(accepted)), rng.randint(1, len(accepted)))
                if rng.random() < 0.3:
                    batch.append(batch[0])  # reported twice
            values: list[Accepted | tuple[TxSequenceId, int]] = [
                accepted[i]
                if rng.random() < 0.5
                else (accepted[i].tx_sequence_id, accepted[i].tx_sequence_number)
                for i in batch
            ]
            seq.messages_stored(values, now)
            reported.update(batch)
            k = 0
            while k < len(accepted) and k in reported:
                k += 1
            if k:
                durable = (accepted[k - 1].tx_sequence_id, accepted[k - 1].tx_sequence_number)
                accepted = accepted[k:]
                reported = {i - k for i in reported if i >= k}
        elif accepted:  # a store failure rolls back from an unreported message on
            candidates = [i for i in range(len(accepted)) if i not in reported]
            if candidates:
                i = rng.choice(candidates)
                seq.store_failed(accepted[i].tx_sequence_id, accepted[i].tx_sequence_number)
                number = accepted[i].tx_sequence_number - 1
                accepted = accepted[:i]
                reported = {j for j in reported if j < i}
        assert seq.durable_position == durable
        assert seq.incoming_tx_sequence_number == (
            accepted[-1].tx_sequence_number if accepted else durable[1]
        )


def test_flush_sends_the_order_ack_of_the_durable_prefix_before_the_deadline() -> None:
    """Graceful stop: a running Order Ack Send Timer fires at once, with what is durable."""
    seq = seq_at(S1, 5, now=0.0)
    for n in (6, 7, 8):
        seq.receive(S1, n, n - 1, now=0.01 * n)
    assert seq.messages_stored([(S1, 6), (S1, 7)], now=0.1) == []
    assert seq.get_timer() == pytest.approx(0.58)
    assert seq.flush_order_ack(0.2) == SendOrderAck(KEY, S1, 7)  # 8 is not durable
    assert seq.last_order_ack_send_time == 0.2
    assert seq.get_timer() is None
    # Nothing scheduled: a flush sends nothing (no OrderAck twice for the same prefix).
    assert seq.flush_order_ack(0.3) is None


def test_flush_never_acknowledges_what_is_not_durable() -> None:
    seq = seq_at(S1, 0, now=0.0)
    seq.receive(S1, 1, 0, now=0.0)
    assert seq.flush_order_ack(0.1) is None  # not stored: nothing to acknowledge yet
    assert seq.message_stored(S1, 1, now=0.2) == [SendOrderAck(KEY, S1, 1)]  # as deferred


def test_registry_flush_fires_every_running_timer() -> None:
    k2 = SequenceKey(uuid.UUID(int=0xC), "q2")
    reg = IncomingSequences.restore([IncomingSequenceSnapshot(KEY, S1, 4)], now=0.0)
    reg.receive(KEY, S1, 5, 4, now=1.0)
    reg.receive(k2, S2, 1, 0, now=1.2)
    reg.get(KEY, 0.0).message_stored(S1, 5, now=1.3)
    reg.get(k2, 0.0).message_stored(S2, 1, now=1.3)
    assert reg.flush_order_acks(1.31) == [SendOrderAck(KEY, S1, 5), SendOrderAck(k2, S2, 1)]
    assert reg.get_timer() is None
    assert reg.flush_order_acks(1.32) == []
