"""Session: a client/server pair wired to each other in memory (no sockets, literal now values)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import pytest

from openmsmq.errors import LocalProtocolError, RemoteProtocolError, WireError
from openmsmq.protocol.events import (
    CloseReason,
    ConnectionClosed,
    EstablishmentComplete,
    ForwardMessage,
    OrderAckReceived,
    Role,
    SessionAckReceived,
    SessionConfig,
    SessionEvent,
    SessionState,
    TransactionalMessageAccepted,
    TransactionalMessageRejected,
    UserMessageReceived,
)
from openmsmq.protocol.incoming import IncomingSequences
from openmsmq.protocol.outgoing import OutgoingSequence, Released, RetainedMessage, Transmit
from openmsmq.protocol.session import Session
from openmsmq.wire.headers import SessionHeader, TransactionHeader
from openmsmq.wire.ids import TxSequenceId
from openmsmq.wire.packets import SessionAck, UserMessage
from openmsmq.wire.userheader import DirectQueueFormatName, PrivateQueueFormatNameId

QM_A = uuid.UUID("11111111-1111-1111-1111-111111111111")
QM_B = uuid.UUID("22222222-2222-2222-2222-222222222222")
QM_C = uuid.UUID("33333333-3333-3333-3333-333333333333")
SEQ = TxSequenceId(1_700_000_000, 1)
QUEUE = PrivateQueueFormatNameId(7)


def pump(a: Session, b: Session, now: float, rounds: int = 100) -> None:
    """Move bytes both ways until both sides are quiet (at most ``rounds`` rounds)."""
    for _ in range(rounds):
        da, db = a.data_to_send(), b.data_to_send()
        if not da and not db:
            return
        if da:
            b.receive_data(da, now)
        if db:
            a.receive_data(db, now)
    raise AssertionError("sessions did not go quiet")


def drain(s: Session) -> list[SessionEvent]:
    return list(s.events())


def pair(
    now: float = 0.0, config: SessionConfig | None = None, remote: uuid.UUID | None = QM_B
) -> tuple[Session, Session]:
    a = Session(Role.INITIATOR, QM_A, now, remote_qm=remote, config=config, peer="B")
    b = Session(Role.ACCEPTOR, QM_B, now, config=config, peer="A", incoming=IncomingSequences())
    pump(a, b, now)
    return a, b


def tx_packet(m: RetainedMessage, dest_qm: uuid.UUID | None = QM_B, queue: object = QUEUE) -> UserMessage:
    return UserMessage.build(
        source_qm=QM_A,
        message_id=m.message_id,
        destination_queue=queue,  # type: ignore[arg-type]
        body=b"payload-%d" % m.tx_sequence_number,
        sent_time=1_700_000_000,
        destination_qm=dest_qm,
        transaction=TransactionHeader(SEQ, m.tx_sequence_number, m.previous_tx_sequence_number),
    )


def express_packet(n: int) -> UserMessage:
    return UserMessage.build(
        source_qm=QM_A, message_id=n, destination_queue=QUEUE, body=b"x", sent_time=0, destination_qm=QM_B
    )


def recoverable_packet(n: int, destination_qm: uuid.UUID = QM_B) -> UserMessage:
    """A non-transactional recoverable UserMessage (DM = 1)."""
    return UserMessage.build(
        source_qm=QM_A, message_id=n, destination_queue=QUEUE, body=b"r", sent_time=0,
        destination_qm=destination_qm, delivery_mode=1,
    )  # fmt: skip


def send_transmits(s: Session, events: Sequence[object], now: float) -> None:
    for ev in events:
        assert isinstance(ev, Transmit)
        for m in ev.messages:
            s.send_user_message(tx_packet(m), now, handle=m.handle)


def msg(n: int) -> RetainedMessage:
    return RetainedMessage(SEQ, n, n - 1, message_id=n, handle=n)


# ---------------------------------------------------------------- establishment


def test_handshake_initiator_acceptor() -> None:
    a, b = pair(now=10.0)
    assert a.state is SessionState.OPEN and b.state is SessionState.OPEN
    (ea,) = drain(a)
    (eb,) = drain(b)
    assert isinstance(ea, EstablishmentComplete) and ea.remote_qm == QM_B and ea.window_size == 64
    assert isinstance(eb, EstablishmentComplete) and eb.remote_qm == QM_A
    assert eb.ack_wait_timeout == 20.0
    # RTT 0 => RecoverableAckSendTimeout clamped to 500 ms, echoed by the acceptor
    assert ea.recoverable_ack_timeout == eb.recoverable_ack_timeout == 0.5
    # the Session Initialization Timer was stopped on both sides
    assert a.get_timer() is not None and a.get_timer() != 70.0


def test_the_initiator_measures_the_handshake_round_trip() -> None:
    """The initiator's TimeStamp comes back in the EstablishConnection response: the
    round trip it measures (50 ms here: 20 ms out, 30 ms back) rides on its
    EstablishmentComplete; the acceptor measures none."""
    a = Session(Role.INITIATOR, QM_A, 10.0, remote_qm=QM_B, peer="B")
    b = Session(Role.ACCEPTOR, QM_B, 10.0, peer="A", incoming=IncomingSequences())
    b.receive_data(a.data_to_send(), 10.02)  # EstablishConnection
    a.receive_data(b.data_to_send(), 10.05)  # its response
    pump(a, b, 10.05)
    (ea,) = drain(a)
    (eb,) = drain(b)
    assert isinstance(ea, EstablishmentComplete) and isinstance(eb, EstablishmentComplete)
    assert ea.round_trip == pytest.approx(0.05, abs=0.0011) and a.round_trip == ea.round_trip
    assert eb.round_trip is None and b.round_trip is None
    # RecoverableAckSendTimeout = 8 x round trip (400 ms), clamped to at least 500 ms.
    assert ea.recoverable_ack_timeout == eb.recoverable_ack_timeout == 0.5


def test_a_round_trip_longer_than_the_initialization_timer_is_not_reported() -> None:
    """Beyond the Session Initialization Timer (60 s) the echoed TimeStamp cannot be the
    one sent: no round trip is reported (RecoverableAckSendTimeout is clamped as before)."""
    a = Session(Role.INITIATOR, QM_A, 10.0, remote_qm=QM_B, peer="B")
    b = Session(Role.ACCEPTOR, QM_B, 10.0, peer="A", incoming=IncomingSequences())
    b.receive_data(a.data_to_send(), 10.0)
    a.receive_data(b.data_to_send(), 200.0)
    pump(a, b, 200.0)
    (ea,) = drain(a)
    assert isinstance(ea, EstablishmentComplete) and ea.round_trip is None and a.round_trip is None
    assert ea.recoverable_ack_timeout == 120.0  # 8 x 190 s, clamped to 120 s


def test_handshake_direct_adopts_server_guid() -> None:
    a, _b = pair(remote=None)
    assert a.is_open and a.remote_qm == QM_B


def test_acceptor_refuses_wrong_server_guid() -> None:
    a, b = pair(remote=QM_C)
    (eb,) = drain(b)
    assert isinstance(eb, ConnectionClosed) and eb.reason is CloseReason.REFUSED
    (ea,) = drain(a)
    assert isinstance(ea, ConnectionClosed) and ea.reason is CloseReason.REFUSED
    assert a.closed and b.closed


def test_initialization_timer_closes() -> None:
    b = Session(Role.ACCEPTOR, QM_B, 0.0)
    assert b.get_timer() == 60.0
    b.handle_timer(59.9)
    assert not b.closed
    b.handle_timer(60.0)
    (ev,) = drain(b)
    assert isinstance(ev, ConnectionClosed) and ev.reason is CloseReason.INITIALIZATION_TIMEOUT
    assert b.get_timer() is None


def test_send_before_open_is_local_error() -> None:
    a = Session(Role.INITIATOR, QM_A, 0.0, remote_qm=QM_B)
    with pytest.raises(LocalProtocolError):
        a.send_user_message(express_packet(1), 0.0)
    a.close(0.0)
    with pytest.raises(LocalProtocolError):
        a.send_user_message(express_packet(1), 0.0)


# ---------------------------------------------------------------- transactional transfer


def run_transfer(n_messages: int) -> tuple[Session, Session, OutgoingSequence, list[int], list[object]]:
    a, b = pair(now=0.0)
    drain(a), drain(b)
    out = OutgoingSequence(0.0)
    out.connection_made(0.0)
    send_transmits(a, out.add_many([msg(n) for n in range(1, n_messages + 1)], now=0.0), 0.0)
    pump(a, b, 0.1)
    stored: list[int] = []
    for ev in drain(b):
        assert isinstance(ev, TransactionalMessageAccepted)
        assert ev.packet.transaction is not None
        stored.append(ev.packet.transaction.tx_sequence_number)
        b.incoming.get(ev.result.key, 0.1).message_stored(
            ev.result.tx_sequence_id, ev.result.tx_sequence_number, now=0.2
        )
    released: list[object] = []
    return a, b, out, stored, released


def test_transactional_transfer_with_order_acks() -> None:
    a, b, out, stored, _ = run_transfer(5)
    assert stored == [1, 2, 3, 4, 5]
    deadline = b.incoming.get_timer()
    assert deadline == pytest.approx(0.6)
    (ack,) = b.incoming.handle_timer(0.6)
    assert ack.tx_sequence_number == 5 and ack.key.source_qm == QM_A
    b.send_order_ack(ack, 0.6)
    pump(a, b, 0.6)
    evs = drain(a)
    order_acks = [e for e in evs if isinstance(e, OrderAckReceived)]
    assert [(e.source_qm, e.tx_sequence_id, e.tx_sequence_number) for e in order_acks] == [(QM_B, SEQ, 5)]
    rel = out.order_ack_received(SEQ, 5, now=0.7)
    assert rel == [Released(tuple(msg(n) for n in range(1, 6)))]
    assert out.all_order_acked


def test_session_ack_never_releases_transactional() -> None:
    a, b, out, _, _ = run_transfer(3)
    a.send_user_message(express_packet(99), 0.3, handle=99)
    pump(a, b, 0.3)
    assert isinstance(drain(b)[0], UserMessageReceived)
    # B's Session Ack Send Timer (RecoverableAckSendTimeout 0.5 s) sends a SessionAck
    deadline = b.get_timer()
    assert deadline is not None
    b.handle_timer(deadline)
    pump(a, b, deadline)
    acks = [e for e in drain(a) if isinstance(e, SessionAckReceived)]
    assert len(acks) == 1
    # The SessionAck covers all four sent (AckSequenceNumber 4: none awaits it any more),
    # the transactional ones sent with handles 1-3 among them ...
    assert acks[0].ack_sequence_number == 4 and a.unacked_message_count == 0
    assert sorted(m.handle for m in out.unacked) == [1, 2, 3]
    # ... yet only the express message's handle is released: a SessionAck never releases
    # a transactional message (seed 003); only its OrderAck does (OutgoingSequence).
    assert acks[0].acked_handles == (99,)


def test_duplicates_after_reconnect_are_rejected_and_order_ack_repaired() -> None:
    a, b, out, _stored, _ = run_transfer(3)
    registry = b.incoming
    # the OrderAck is lost; the connection drops and a new one is made
    a.connection_lost(1.0)
    out.connection_lost()
    a2 = Session(Role.INITIATOR, QM_A, 2.0, remote_qm=QM_B)
    b2 = Session(Role.ACCEPTOR, QM_B, 2.0, incoming=registry)
    pump(a2, b2, 2.0)
    drain(a2), drain(b2)
    send_transmits(a2, out.connection_made(2.0), 2.0)
    send_transmits(a2, out.add_many([msg(4)], now=2.0), 2.0)
    pump(a2, b2, 2.0)
    evs = drain(b2)
    assert [type(e) for e in evs] == [TransactionalMessageRejected] * 3 + [TransactionalMessageAccepted]
    acc = evs[3]
    assert isinstance(acc, TransactionalMessageAccepted)
    registry.get(acc.result.key, 2.0).message_stored(SEQ, 4, now=2.1)
    (ack,) = registry.handle_timer(2.5)
    assert ack.tx_sequence_number == 4
    b2.send_order_ack(ack, 2.5)
    pump(a2, b2, 2.5)
    (oa,) = [e for e in drain(a2) if isinstance(e, OrderAckReceived)]
    (rel,) = out.order_ack_received(oa.tx_sequence_id, oa.tx_sequence_number, now=2.6)
    assert isinstance(rel, Released) and [m.tx_sequence_number for m in rel.messages] == [1, 2, 3, 4]


def test_intermediate_qm_forwards_without_sequence_processing() -> None:
    a, b = pair()
    drain(a), drain(b)
    packet = tx_packet(msg(1), dest_qm=QM_C)
    a.send_user_message(packet, 0.0)
    pump(a, b, 0.0)
    (ev,) = drain(b)
    assert isinstance(ev, ForwardMessage)
    assert ev.packet == packet  # TransactionHeader passed through untouched
    assert ev.recoverable is None  # acknowledged on receipt: the sender keeps it until its OrderAck
    assert len(b.incoming) == 0  # no sequence state touched
    assert b.incoming.get_timer() is None  # no OrderAck scheduled


def test_direct_format_null_address_is_local() -> None:
    a, b = pair(remote=None)
    drain(a), drain(b)
    direct = DirectQueueFormatName("TCP:127.0.0.1\\PRIVATE$\\orders")
    a.send_user_message(tx_packet(msg(1), dest_qm=None, queue=direct), 0.0)
    pump(a, b, 0.0)
    (ev,) = drain(b)
    assert isinstance(ev, TransactionalMessageAccepted)
    assert ev.result.key.destination == "DIRECT=tcp:127.0.0.1\\private$\\orders"
    assert b.direct_format_session


class _ForwardOther:
    """A routing policy that sends every direct name of host "c" on, refuses a source
    other than the session's QM, and counts how often it is asked."""

    def __init__(self) -> None:
        self.asked = 0

    def identity_refusal(self, remote_qm: uuid.UUID) -> str | None:
        return None

    def source_refusal(self, source: uuid.UUID, remote_qm: uuid.UUID) -> str | None:
        return None if source == remote_qm else f"{source} is not {remote_qm}"

    def forwards(self, destination: object, qm_address: uuid.UUID) -> bool | None:
        self.asked += 1
        assert isinstance(destination, DirectQueueFormatName)
        return destination.name.lower().startswith("tcp:c\\")


def _with_routing(routing: _ForwardOther) -> tuple[Session, Session]:
    a = Session(Role.INITIATOR, QM_A, 0.0, remote_qm=None, peer="B")
    b = Session(Role.ACCEPTOR, QM_B, 0.0, peer="A", incoming=IncomingSequences(), routing=routing)
    pump(a, b, 0.0)
    drain(a), drain(b)
    return a, b


def test_the_routing_policy_given_to_the_session_decides_what_goes_on() -> None:
    routing = _ForwardOther()
    a, b = _with_routing(routing)
    other = DirectQueueFormatName("TCP:c\\PRIVATE$\\orders")
    a.send_user_message(tx_packet(msg(1), dest_qm=None, queue=other), 0.0)
    pump(a, b, 0.0)
    (ev,) = drain(b)
    assert isinstance(ev, ForwardMessage)
    here = DirectQueueFormatName("TCP:127.0.0.1\\PRIVATE$\\orders")
    for n in (1, 2):  # one destination object: the policy is asked for it once
        a.send_user_message(tx_packet(msg(n), dest_qm=None, queue=here), 0.0)
        pump(a, b, 0.0)
    evs = drain(b)
    assert [type(e) for e in evs] == [TransactionalMessageAccepted] * 2
    assert routing.asked == 2


def test_the_routing_policy_refuses_a_source_that_is_not_the_peer() -> None:
    a, b = _with_routing(_ForwardOther())
    packet = UserMessage.build(
        source_qm=QM_C,
        message_id=msg(1).message_id,
        destination_queue=QUEUE,
        body=b"x",
        sent_time=1_700_000_000,
        destination_qm=QM_B,
    )
    a.send_user_message(packet, 0.0)
    pump(a, b, 0.0)
    assert b.closed
    (ev,) = [e for e in drain(b) if isinstance(e, ConnectionClosed)]
    assert ev.rule == "source-qm"


# ---------------------------------------------------------------- window and timers


def test_window_holds_messages_until_session_ack() -> None:
    cfg = SessionConfig(window_size=2)
    a, b = pair(config=cfg)
    drain(a), drain(b)
    for n in range(1, 6):
        a.send_user_message(express_packet(n), 0.0, handle=n)
    assert a.unacked_message_count == 2 and a.backlog == 3  # the window holds the rest
    # B acknowledges express messages at half the window (MS-MQQB 3.1.1.6.1: "based on
    # message count and session window size"), not only on its Session Ack Send Timer:
    # the stream goes on without waiting for a timer.
    pump(a, b, 0.0)
    assert len(drain(b)) == 5
    assert a.backlog == 0
    handles = [h for e in drain(a) if isinstance(e, SessionAckReceived) for h in e.acked_handles]
    assert handles == [1, 2, 3, 4, 5]


@pytest.mark.parametrize(("own", "peer"), [(1024, 64), (64, 1024)])
def test_the_smaller_window_of_the_two_sessions_applies(own: int, peer: int) -> None:
    """``serve`` advertises 1,024; a Windows peer advertises 64 (the spec's SHOULD): the
    sender keeps at most 64 unacknowledged either way round."""
    a = Session(Role.INITIATOR, QM_A, 0.0, remote_qm=QM_B, config=SessionConfig(window_size=own), peer="B")
    b = Session(Role.ACCEPTOR, QM_B, 0.0, config=SessionConfig(window_size=peer), peer="A",
                incoming=IncomingSequences())  # fmt: skip
    pump(a, b, 0.0)
    drain(a), drain(b)
    for n in range(1, 201):
        a.send_user_message(express_packet(n), 0.0, handle=n)
    assert a.unacked_message_count == 64 and a.backlog == 136


def test_an_express_stream_is_acknowledged_by_count_not_only_by_the_timer() -> None:
    a, b = pair()  # window 64
    drain(a), drain(b)
    for n in range(1, 1001):
        a.send_user_message(express_packet(n), 0.0, handle=n)
    pump(a, b, 0.0)  # no timer fires: only count-based SessionAcks open the window
    assert len(drain(b)) == 1000
    handles = [h for e in drain(a) if isinstance(e, SessionAckReceived) for h in e.acked_handles]
    assert len(handles) >= 1000 - 64 and handles == sorted(handles)


def test_ack_wait_timer_closes_silent_session() -> None:
    a, _b = pair()
    drain(a)
    a.send_user_message(express_packet(1), 100.0)
    # nothing ever comes back from B: first expiry sees ReceivedAck from the handshake
    a.handle_timer(120.0)
    assert not a.closed
    a.handle_timer(140.0)
    (ev,) = drain(a)
    assert isinstance(ev, ConnectionClosed) and ev.reason is CloseReason.ACK_TIMEOUT


def test_cleanup_timer_closes_idle_session() -> None:
    a, _b = pair()
    drain(a)
    a.handle_timer(300.0)  # handshake counted as no activity: idle
    (ev,) = drain(a)
    assert isinstance(ev, ConnectionClosed) and ev.reason is CloseReason.IDLE


def test_cleanup_timer_keeps_active_session() -> None:
    a, b = pair()
    drain(a), drain(b)
    a.send_user_message(express_packet(1), 10.0)
    pump(a, b, 10.0)
    b.handle_timer(20.0)  # session ack send
    pump(a, b, 20.0)
    a.handle_timer(300.0)
    assert not a.closed


# ---------------------------------------------------------------- malformed input


def test_malformed_input_closes_only_that_session() -> None:
    _a1, b1 = pair()
    a2, b2 = pair()
    drain(b1), drain(b2), drain(a2)
    b1.receive_data(b"\x11" + b"\x00" * 15, 1.0)  # VersionNumber must be 0x10
    (ev,) = drain(b1)
    assert isinstance(ev, ConnectionClosed) and ev.reason is CloseReason.PROTOCOL_ERROR
    assert ev.packet_type == "BaseHeader"
    assert "VersionNumber" in ev.detail
    assert isinstance(ev.error, WireError) and isinstance(b1.error, RemoteProtocolError)
    assert b1.closed and b1.get_timer() is None
    b1.receive_data(b"more", 1.0)  # ignored after close, no exception
    # the other session is unaffected
    a2.send_user_message(express_packet(1), 1.0)
    pump(a2, b2, 1.0)
    assert isinstance(drain(b2)[0], UserMessageReceived)


def test_out_of_protocol_packet_closes_session() -> None:
    b = Session(Role.ACCEPTOR, QM_B, 0.0, peer="10.0.0.9:4000")
    b.receive_data(SessionAck(SessionHeader(0)).encode(), 0.0)
    (ev,) = drain(b)
    assert isinstance(ev, ConnectionClosed) and ev.reason is CloseReason.PROTOCOL_ERROR
    assert ev.packet_type == "SessionAck" and ev.peer == "10.0.0.9:4000"
    assert "WAITING_EC_MSG" in ev.detail


def test_session_ack_beyond_sent_is_protocol_error() -> None:
    a, _b = pair()
    drain(a)
    a.receive_data(SessionAck(SessionHeader(ack_sequence_number=5)).encode(), 1.0)
    (ev,) = drain(a)
    assert isinstance(ev, ConnectionClosed) and ev.reason is CloseReason.PROTOCOL_ERROR
    assert "AckSequenceNumber" in ev.detail


def test_session_ack_with_wrong_counts_is_protocol_error() -> None:
    a, _b = pair()
    drain(a)
    a.receive_data(SessionAck(SessionHeader(0, user_msg_sequence_number=3)).encode(), 1.0)
    (ev,) = drain(a)
    assert isinstance(ev, ConnectionClosed) and "UserMsgSequenceNumber" in ev.detail


def test_recoverable_message_acked_only_after_receiver_persists_it() -> None:
    a, b = pair()
    drain(a), drain(b)
    a.send_user_message(recoverable_packet(1), 1.0, handle=42)
    pump(a, b, 1.0)
    (ev,) = drain(b)
    assert isinstance(ev, UserMessageReceived) and ev.recoverable_number == 1
    deadline = b.get_timer()
    assert deadline == pytest.approx(1.5)  # RecoverableAckSendTimeout
    b.handle_timer(1.5)
    pump(a, b, 1.5)
    (ack1,) = [e for e in drain(a) if isinstance(e, SessionAckReceived)]
    assert ack1.acked_handles == ()  # delivered but not yet persisted by B
    b.recoverable_message_stored(ev.recoverable_number)
    deadline = b.get_timer()
    assert deadline is not None
    b.handle_timer(deadline)
    pump(a, b, deadline)
    (ack2,) = [e for e in drain(a) if isinstance(e, SessionAckReceived)]
    assert ack2.acked_handles == (42,)


def test_flush_acknowledgments_sends_the_pending_session_ack_before_a_local_close() -> None:
    a, b = pair()
    drain(a), drain(b)
    a.send_user_message(recoverable_packet(1), 1.0, handle=42)
    a.send_user_message(recoverable_packet(2), 1.0, handle=43)
    pump(a, b, 1.0)
    first, _second = drain(b)
    b.recoverable_message_stored(first.recoverable_number, 1.1)  # the second failed to store
    b.flush_acknowledgments(1.1)  # long before the timer's deadline
    b.close(1.1)
    pump(a, b, 1.1)
    acks = [e for e in drain(a) if isinstance(e, SessionAckReceived)]
    assert [h for ack in acks for h in ack.acked_handles] == [42]
    b.flush_acknowledgments(1.2)  # closed: nothing more
    assert b.data_to_send() == b""


def test_a_recoverable_message_for_another_qm_is_acked_once_stored_for_forwarding() -> None:
    a, b = pair()
    drain(a), drain(b)
    a.send_user_message(recoverable_packet(1, QM_C), 1.0, handle=7)  # not for B: B is a hop
    pump(a, b, 1.0)
    (ev,) = drain(b)
    assert isinstance(ev, ForwardMessage) and ev.recoverable == 1
    b.handle_timer(1.5)
    pump(a, b, 1.5)
    (ack1,) = [e for e in drain(a) if isinstance(e, SessionAckReceived)]
    assert ack1.acked_handles == ()  # not stored yet: the sender keeps it
    b.recoverable_message_stored(ev.recoverable)
    deadline = b.get_timer()
    assert deadline is not None
    b.handle_timer(deadline)
    pump(a, b, deadline)
    (ack2,) = [e for e in drain(a) if isinstance(e, SessionAckReceived)]
    assert ack2.acked_handles == (7,)


def test_persisted_recoverable_messages_beyond_32_are_all_acked_at_the_deadline() -> None:
    a, b = pair()
    drain(a), drain(b)
    for i in range(100):
        a.send_user_message(recoverable_packet(i + 1), 1.0, handle=1000 + i)
    pump(a, b, 1.0)
    evs = drain(b)
    assert len(evs) == 100
    drain(a)
    for ev in evs:
        assert isinstance(ev, UserMessageReceived)
        b.recoverable_message_stored(ev.recoverable_number)
    deadline = b.get_timer()
    assert deadline is not None
    b.handle_timer(deadline)
    pump(a, b, deadline)
    acked = [h for e in drain(a) if isinstance(e, SessionAckReceived) for h in e.acked_handles]
    # One header covers 32 numbers: all 100 are acknowledged at this deadline anyway.
    assert sorted(acked) == list(range(1000, 1100))


def test_a_recoverable_message_stored_after_the_ack_deadline_is_acked_soon() -> None:
    a, b = pair()
    drain(a), drain(b)
    a.send_user_message(recoverable_packet(1), 1.0, handle=5)
    pump(a, b, 1.0)
    (ev,) = drain(b)
    assert isinstance(ev, UserMessageReceived)
    b.handle_timer(1.5)  # RecoverableAckSendTimeout passed before the store finished
    later = b.get_timer()
    assert later is not None and later >= 10.0  # AckTimeout / 2 from now on
    b.recoverable_message_stored(ev.recoverable_number, 2.0)
    assert b.get_timer() == pytest.approx(2.5)
    b.handle_timer(2.5)
    pump(a, b, 2.5)
    acked = [h for e in drain(a) if isinstance(e, SessionAckReceived) for h in e.acked_handles]
    assert acked == [5]


def test_encoded_transactional_packets_count_as_their_values() -> None:
    """A transactional UserMessage given as its bytes (the sender's row encoder) goes out
    as the same bytes, counted, windowed and acknowledged as the value would be; a
    SessionAck releases none of them (transactional)."""
    cfg = SessionConfig(window_size=4)
    runs = []
    for encoded in (False, True):
        a, b = pair(config=cfg)
        drain(a), drain(b)
        items = [(tx_packet(msg(n)), n) for n in range(1, 11)]
        mixed = [(p.encode() if encoded and n % 3 else p, h) for n, (p, h) in enumerate(items)]
        a.send_user_messages(mixed, 0.0)
        sent = a.data_to_send()
        assert a.unacked_message_count == 4 and a.backlog == 6
        b.receive_data(sent, 0.0)
        accepted = [e for e in drain(b) if isinstance(e, TransactionalMessageAccepted)]
        for _ in range(10):  # bounded: each SessionAck frees the window for more
            deadline = b.get_timer()
            if deadline is None:
                break
            b.handle_timer(deadline)
            pump(a, b, deadline)
            accepted += [e for e in drain(b) if isinstance(e, TransactionalMessageAccepted)]
        acks = [e for e in drain(a) if isinstance(e, SessionAckReceived)]
        assert acks and all(not e.acked_handles for e in acks)
        sending = a.sending
        runs.append((sent, len(accepted), sending.message_sent_count, sending.recoverable_message_sent_count))
    assert runs[0] == runs[1]
    assert runs[0][1] == 10 and runs[0][2] == 10 and runs[0][3] == 10


def _varied(m: RetainedMessage) -> UserMessage:
    """:func:`tx_packet` with a body whose size varies from message to message."""
    return UserMessage.build(
        source_qm=QM_A, message_id=m.message_id, destination_queue=QUEUE,  # type: ignore[arg-type]
        body=b"v" * (m.tx_sequence_number * 7 % 23), sent_time=1_700_000_000, destination_qm=QM_B,
        transaction=TransactionHeader(SEQ, m.tx_sequence_number, m.previous_tx_sequence_number),
    )  # fmt: skip


def _stream(encoded: bool, window: int, chunks: Sequence[int]) -> tuple[list[object], int]:
    """Transactional messages in ``chunks`` from A to B across the 16-bit wrap of the
    session numbers, a recoverable non-transactional message after each chunk; the
    transactional ones given to :meth:`Session.send_encoded` as bytes (``encoded``) or
    one by one as values. Returns everything observable of A per step (its bytes on the
    wire, counts, window bytes, backlog, released handles) and B's accepted count."""
    a, b = pair(config=SessionConfig(window_size=window))
    drain(a), drain(b)
    a.sending.message_sent_count = b.message_received_count = 0xFFF0
    a.sending.recoverable_message_sent_count = 0xFFF0
    b.recoverable_message_received_count = b.last_acked_recoverable_msg_seq_number = 0xFFF0
    seen: list[object] = []
    accepted = 0
    now = 1.0
    n = 0
    for size in chunks:
        ms = [msg(i) for i in range(n + 1, n + size + 1)]
        n += size
        if encoded:
            a.send_encoded([_varied(m).encode() for m in ms], now)
        else:
            a.send_user_messages([(_varied(m), m.handle) for m in ms], now)
        a.send_user_message(recoverable_packet(1000 + n), now, handle=1000 + n)
        for _ in range(500):  # bounded: each round moves bytes or fires a timer
            da, db = a.data_to_send(), b.data_to_send()
            seen.append((da, a.unacked_message_count, a.unacked_bytes, a.backlog))
            if da:
                b.receive_data(da, now)
            for e in drain(b):
                accepted += isinstance(e, TransactionalMessageAccepted)
                if isinstance(e, UserMessageReceived):
                    assert e.recoverable_number is not None
                    b.recoverable_message_stored(e.recoverable_number, now)
            if db:
                a.receive_data(db, now)
            seen += [e.acked_handles for e in drain(a) if isinstance(e, SessionAckReceived)]
            if not da and not db:
                if not a.unacked_message_count and not a.backlog:
                    break
                now += 0.6  # past RecoverableAckSendTimeout: B acknowledges what it holds
                b.handle_timer(now)
                a.handle_timer(now)
    seen.append((a.sending.message_sent_count, a.sending.recoverable_message_sent_count, a.unacked_bytes))
    return seen, accepted


@pytest.mark.parametrize("window", [1, 5, 64, 100])
def test_encoded_runs_go_out_counted_and_acknowledged_as_single_packets(window: int) -> None:
    """:meth:`Session.send_encoded` holds a batch of encoded transactional messages as one
    run and numbers and acknowledges it a run at a time (a SessionAck may end inside a
    run): the bytes on the wire, the counts, the window's bytes, the backlog and the
    released handles are, at every step, those of the same messages given one by one."""
    chunks = (7, 50, 1, 120, 122)
    runs, accepted = _stream(True, window, chunks)
    singles, accepted_singly = _stream(False, window, chunks)
    assert runs == singles
    assert accepted == accepted_singly == sum(chunks)


def _held_by_the_number_space(encoded: bool) -> list[object]:
    """A's steps when its recoverable numbers run 0x7FF0 ahead of a message B received
    and has not stored, then 40 transactional messages are given to it."""
    a, b = pair()
    drain(a), drain(b)
    a.send_user_message(recoverable_packet(1), 1.0, handle=77)  # B receives it, stores it later
    pump(a, b, 1.0)
    (received,) = [e for e in drain(b) if isinstance(e, UserMessageReceived)]
    b.handle_timer(2.0)
    pump(a, b, 2.0)
    drain(a)
    assert a.sending.pending_recoverable  # acknowledged as received, not as stored
    a.sending.recoverable_message_sent_count += 0x7FF0
    b.recoverable_message_received_count += 0x7FF0
    b.last_acked_recoverable_msg_seq_number = b.recoverable_message_received_count
    ms = [msg(i) for i in range(1, 41)]
    if encoded:
        a.send_encoded([_varied(m).encode() for m in ms], 3.0)
    else:
        a.send_user_messages([(_varied(m), m.handle) for m in ms], 3.0)
    steps: list[object] = [(a.data_to_send(), a.unacked_message_count, a.backlog)]
    assert received.recoverable_number is not None
    b.recoverable_message_stored(received.recoverable_number, 3.0)
    b.handle_timer(4.0)
    pump(a, b, 4.0)
    steps.append((a.unacked_message_count, a.backlog, a.sending.recoverable_message_sent_count))
    steps += [e.acked_handles for e in drain(a) if isinstance(e, SessionAckReceived)]
    return steps


def test_an_encoded_run_waits_for_the_number_space_as_single_packets_do() -> None:
    """RecoverableMsgSeqNumber never runs half its space ahead of the oldest message the
    peer has not acknowledged as stored: a run given to :meth:`Session.send_encoded`
    stops at the same message as the same packets given one by one, and goes on once
    that message is stored."""
    runs, singles = _held_by_the_number_space(True), _held_by_the_number_space(False)
    assert runs == singles
    first = runs[0]
    # Message 1 is number 1; the run stops where number 1 + 0x8000 would be next.
    assert isinstance(first, tuple) and first[1] == 0x8000 - 0x7FF0 and first[2] == 40 - first[1]
    # Stored, so acknowledged as stored: the rest of the run goes.
    assert runs[1] == (runs[1][0], 0, 1 + 0x7FF0 + 40)


def _recoverable_backlog(n: int) -> tuple[Session, Session]:
    """Sessions A -> B with ``n`` recoverable messages handed to A (handles 0..n-1)."""
    a, b = pair()
    drain(a), drain(b)
    for i in range(n):
        a.send_user_message(recoverable_packet(i % 60_000 + 1), 1.0, handle=i)
    return a, b


def test_recoverable_numbers_never_run_half_their_space_ahead_of_the_oldest_unstored() -> None:
    """RecoverableMsgSeqNumber is 16 bits. A receiver acknowledges receipt at once and
    storage later; while its store lags, the sender must not send so far ahead that a
    number comes round again while its first message still waits for its
    stored-acknowledgment, or the two are confused and the older one is never released.
    Here B stores nothing until A stops sending; 70,000 messages then all get released,
    each once, and A never runs more than half the number space ahead."""
    n = 70_000
    a, b = _recoverable_backlog(n)
    released: list[int] = []
    unstored: list[int] = []
    ahead_max = 0
    now = 1.0
    for _ in range(400):  # bounded
        pump(a, b, now, rounds=5000)
        unstored += [e.recoverable_number for e in drain(b) if isinstance(e, UserMessageReceived)]
        released += [h for e in drain(a) if isinstance(e, SessionAckReceived) for h in e.acked_handles]
        pending = a.sending.pending_recoverable
        if pending:
            ahead = (a.sending.recoverable_message_sent_count - next(iter(pending))) % 0x10000
            ahead_max = max(ahead_max, ahead)
        if unstored:
            # A sends nothing more now: B's store catches up with what it received.
            for number in unstored:
                b.recoverable_message_stored(number, now)
            unstored.clear()
        now += 0.25
        b.handle_timer(now)
        a.handle_timer(now)
        if len(released) == n:
            break
    assert sorted(released) == list(range(n))
    assert 30_000 < ahead_max <= 0x8000


def test_stored_acknowledgments_keep_working_after_the_recoverable_number_wraps() -> None:
    """RecoverableMsgSeqNumber counts to 0xFFFF and wraps to 0: a SessionHeader whose
    RecoverableMsgAckSeqNumber is 0 acknowledges numbers 0, 1, … by its flags. Read as
    "no acknowledgment", it left the 31 messages after each wrap unreleased for good."""
    n = 70_000
    a, b = _recoverable_backlog(n)
    released: list[int] = []
    now = 1.0
    for _ in range(3000):  # bounded
        pump(a, b, now, rounds=5000)
        for e in drain(b):
            if isinstance(e, UserMessageReceived):
                b.recoverable_message_stored(e.recoverable_number, now)
        released += [h for e in drain(a) if isinstance(e, SessionAckReceived) for h in e.acked_handles]
        now += 0.05
        b.handle_timer(now)
        a.handle_timer(now)
        if len(released) >= n:
            break
    assert sorted(released) == list(range(n))


def test_the_recoverable_message_numbered_0_waits_for_its_stored_acknowledgment() -> None:
    """After 0xFFFF the RecoverableMessage number wraps to 0, a number like any other: the
    sender keeps message 0 until the receiver acknowledges it as stored, and the receiver
    acknowledges it only once stored. (0 once meant "express" on both sides: A released
    it on receipt, and a crash of B before storing it lost it.)"""
    a, b = pair()
    drain(a), drain(b)
    # The ADM counters as after 65,534 recoverable messages, all acknowledged.
    a.sending.recoverable_message_sent_count = 0xFFFE
    b.recoverable_message_received_count = b.last_acked_recoverable_msg_seq_number = 0xFFFE
    for handle in (1, 2, 3):  # numbered 0xFFFF, 0, 1
        a.send_user_message(recoverable_packet(handle), 1.0, handle=handle)
    pump(a, b, 1.0)
    received = [e for e in drain(b) if isinstance(e, UserMessageReceived)]
    assert [e.recoverable_number for e in received] == [0xFFFF, 0, 1]
    for e in (received[0], received[2]):  # message 0 is not stored yet
        b.recoverable_message_stored(e.recoverable_number, 1.0)
    now = 1.0
    released: list[int] = []
    for _ in range(4):  # bounded: past RecoverableAckSendTimeout and AckTimeout / 2
        now += 10.0
        b.handle_timer(now)
        a.handle_timer(now)
        pump(a, b, now)
        released += [h for e in drain(a) if isinstance(e, SessionAckReceived) for h in e.acked_handles]
    assert sorted(released) == [1, 3]
    b.recoverable_message_stored(received[1].recoverable_number, now)
    deadline = b.get_timer()
    assert deadline is not None
    b.handle_timer(deadline)
    pump(a, b, deadline)
    released += [h for e in drain(a) if isinstance(e, SessionAckReceived) for h in e.acked_handles]
    assert sorted(released) == [1, 2, 3]
