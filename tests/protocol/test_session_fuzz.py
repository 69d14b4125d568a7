"""Random peer input never makes a Session raise: it only closes with a RemoteProtocolError."""

from __future__ import annotations

import uuid

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from openmsmq.errors import RemoteProtocolError
from openmsmq.protocol.events import CloseReason, ConnectionClosed, Role
from openmsmq.protocol.incoming import IncomingSequences
from openmsmq.protocol.session import Session
from openmsmq.wire.headers import (
    ConnectionParametersHeader,
    EstablishConnectionHeader,
    SessionHeader,
    TransactionHeader,
)
from openmsmq.wire.ids import NULL_GUID, TxSequenceId
from openmsmq.wire.packets import (
    ConnectionParameters,
    EstablishConnection,
    OrderAck,
    OrderAckBody,
    SessionAck,
    UserMessage,
)
from openmsmq.wire.userheader import PrivateQueueFormatNameId

QM_A = uuid.UUID(int=0xA)
QM_B = uuid.UUID(int=0xB)

u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFFFFFF)
guids = st.sampled_from([QM_A, QM_B, NULL_GUID, uuid.UUID(int=0xC)])
seq_ids = st.builds(TxSequenceId, st.integers(0, 3), st.integers(0, 3))

establish = st.builds(
    lambda c, s, t, cs: EstablishConnection(
        EstablishConnectionHeader(c, s, t), internal_flags=0x10 if cs else 0
    ),
    guids,
    guids,
    u32,
    st.booleans(),
).map(lambda p: p.encode())
params = st.builds(
    lambda r, a, w: ConnectionParameters(ConnectionParametersHeader(r, a, w)),
    st.sampled_from([0, 500, 1496, 120000, 200000]),
    st.sampled_from([0, 20000, 120000, 130000]),
    u16,
).map(lambda p: p.encode())
session_acks = st.builds(
    lambda a, r, f, u, rs, w: SessionAck(SessionHeader(a, r, f, u, rs, w)),
    st.integers(0, 5),
    st.integers(0, 5),
    u32,
    st.integers(0, 5),
    st.integers(0, 5),
    st.integers(1, 0xFFFF),
).map(lambda p: p.encode())
user_messages = st.builds(
    lambda src, dst, sid, n, prev, tx: UserMessage.build(
        source_qm=src,
        message_id=n,
        destination_queue=PrivateQueueFormatNameId(1),
        body=b"b",
        sent_time=0,
        destination_qm=dst,
        transaction=TransactionHeader(sid, n, prev) if tx else None,
    ),
    guids,
    guids,
    seq_ids,
    st.integers(0, 6),
    st.integers(0, 6),
    st.booleans(),
).map(lambda p: p.encode())
order_acks = st.builds(
    lambda sid, n, dst: OrderAck.build(
        OrderAckBody.for_number(sid, n),
        source_qm=QM_A,
        destination_queue=PrivateQueueFormatNameId(4),
        destination_qm=dst,
    ),
    seq_ids,
    st.integers(1, 6),
    guids,
).map(lambda p: p.encode())
packets = st.one_of(establish, params, session_acks, user_messages, order_acks, st.binary(max_size=64))


def check(session: Session) -> None:
    for ev in session.events():
        if isinstance(ev, ConnectionClosed) and ev.reason is CloseReason.PROTOCOL_ERROR:
            assert isinstance(ev.error, RemoteProtocolError)
            assert isinstance(session.error, RemoteProtocolError)
    assert session.closed or session.error is None


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=700), cut=st.integers(1, 64))
def test_random_bytes_only_close_the_session(data: bytes, cut: int) -> None:
    s = Session(Role.ACCEPTOR, QM_B, 0.0, incoming=IncomingSequences())
    for i in range(0, len(data), cut):
        s.receive_data(data[i : i + cut], 1.0)
    s.handle_timer(1000.0)
    check(s)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    role=st.sampled_from([Role.ACCEPTOR, Role.INITIATOR]),
    stream=st.lists(st.tuples(packets, st.floats(0, 50)), max_size=12),
)
def test_random_packet_sequences_only_close_the_session(
    role: Role, stream: list[tuple[bytes, float]]
) -> None:
    s = Session(role, QM_B, 0.0, remote_qm=QM_A, incoming=IncomingSequences())
    now = 0.0
    for raw, dt in stream:
        now += dt
        s.receive_data(raw, now)
        s.handle_timer(now)
        s.incoming.handle_timer(now)
        s.data_to_send()
    check(s)


HANDSHAKE = (
    EstablishConnection(EstablishConnectionHeader(QM_A, QM_B, 0)).encode()
    + ConnectionParameters(ConnectionParametersHeader(500, 20000, 64)).encode()
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stream=st.lists(st.tuples(packets, st.floats(0, 50)), max_size=12))
def test_random_packets_on_an_open_session(stream: list[tuple[bytes, float]]) -> None:
    s = Session(Role.ACCEPTOR, QM_B, 0.0, incoming=IncomingSequences())
    s.receive_data(HANDSHAKE, 0.0)
    assert s.is_open
    now = 0.0
    for raw, dt in stream:
        now += dt
        s.receive_data(raw, now)
        s.handle_timer(now)
        s.incoming.handle_timer(now)
        s.data_to_send()
    check(s)
