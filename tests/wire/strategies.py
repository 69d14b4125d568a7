"""Hypothesis strategies for every wire header and packet."""

from __future__ import annotations

import uuid

from hypothesis import strategies as st

from openmsmq.wire import (
    SAME_AS_ADMIN,
    ConnectionParameters,
    ConnectionParametersHeader,
    DebugHeader,
    DirectQueueFormatName,
    EstablishConnection,
    EstablishConnectionHeader,
    FinalAck,
    FinalAckBody,
    MessagePropertiesHeader,
    MQFAddressHeader,
    MQFFormatNameElement,
    MQFSignatureHeader,
    MultiQueueFormatHeader,
    OrderAck,
    OrderAckBody,
    PrivateQueueFormatName,
    PrivateQueueFormatNameId,
    PublicQueueFormatName,
    SecurityHeader,
    SessionAck,
    SessionHeader,
    SoapHeader,
    TransactionHeader,
    TxSequenceId,
    UserHeader,
    UserMessage,
)

u8 = st.integers(0, 0xFF)
u16 = st.integers(0, 0xFFFF)
u32 = st.integers(0, 0xFFFFFFFF)
guids = st.builds(uuid.UUID, int=st.integers(0, 2**128 - 1))
text = st.text(st.characters(codec="utf-16", exclude_characters="\x00"), max_size=40)

tx_sequence_ids = st.builds(TxSequenceId, u32, u32)
private_ids = st.builds(PrivateQueueFormatNameId, u32, st.sampled_from([2, 3, 4]))
dest_private_ids = st.builds(PrivateQueueFormatNameId, u32, st.just(3))
publics = st.builds(PublicQueueFormatName, guids)
privates = st.builds(PrivateQueueFormatName, guids, u32)
directs = st.builds(DirectQueueFormatName, text)
destinations = st.one_of(st.none(), dest_private_ids, publics, directs)
admins = st.one_of(st.none(), private_ids.filter(lambda q: q.kind != 4), publics, privates, directs)
responses = st.one_of(st.none(), st.just(SAME_AS_ADMIN), private_ids, publics, privates, directs)

user_headers = st.builds(
    UserHeader,
    guids,
    guids,
    u32,
    u32,
    destinations,
    admins,
    responses,
    u32,
    u32.map(lambda f: f & 0xED0003FF),  # non-structural bits, AH excluded
    st.one_of(st.none(), guids),
)

session_headers = st.builds(SessionHeader, u16, u16, u32, u16, u16, st.integers(1, 0xFFFF), u16)
transaction_headers = st.builds(
    TransactionHeader,
    tx_sequence_ids,
    st.integers(1, 0xFFFFFFFF),
    st.integers(0, 0xFFFFFFFE),
    u32.map(lambda f: f & ~1),
    st.one_of(st.none(), guids),
)
small_bytes = st.binary(max_size=48)
security_headers = st.builds(
    SecurityHeader,
    u16.map(lambda f: f & ~0xF | 1),
    small_bytes,
    small_bytes,
    small_bytes,
    small_bytes,
    small_bytes,
).filter(lambda h: any((h.sender_id, h.encryption_key, h.signature, h.sender_cert, h.provider_info)))
properties_headers = st.builds(
    MessagePropertiesHeader,
    u16,
    st.binary(max_size=300),
    u32,
    st.one_of(st.none(), st.text(st.characters(codec="utf-16", exclude_characters="\x00"), max_size=100)),
    u8,
    st.binary(min_size=20, max_size=20),
    u32,
    u32,
    u32,
    u32,
    u32,
    small_bytes,
)
debug_headers = st.builds(DebugHeader, st.one_of(st.none(), guids), u16.map(lambda f: f & ~3), u16)
utf16_data = st.binary(max_size=40).map(lambda b: b[: len(b) & ~1])
soap_headers = st.builds(SoapHeader, utf16_data, utf16_data, u16, u16)
mqf_elements = st.one_of(
    st.builds(MQFFormatNameElement, st.just(1), guids),
    st.builds(MQFFormatNameElement, st.just(2), st.tuples(guids, u32)),
    st.builds(MQFFormatNameElement, st.just(3), text),
    st.builds(MQFFormatNameElement, st.just(6), guids),
)


def _address(header_id: int) -> st.SearchStrategy[MQFAddressHeader]:
    return st.lists(mqf_elements, max_size=3).map(
        lambda es: MQFAddressHeader.from_elements(header_id, tuple(es))
    )


multi_queue_headers = st.builds(
    MultiQueueFormatHeader,
    _address(0x64),
    _address(0xC8),
    _address(0x12C),
    st.builds(MQFSignatureHeader, small_bytes, u16),
)


@st.composite
def user_messages(draw: st.DrawFn) -> UserMessage:
    user = draw(user_headers)
    tx = draw(st.one_of(st.none(), transaction_headers))
    if tx is not None and not user.flags & 0x60:
        user = UserHeader(
            user.source_queue_manager,
            user.queue_manager_address,
            user.sent_time,
            user.message_id,
            user.destination_queue,
            user.admin_queue,
            user.response_queue,
            user.time_to_be_received,
            user.flags | 0x20,
            user.connector_type,
        )
    props = draw(properties_headers)
    if props.message_class == 0xFF or props.message_class >= 0x4000:
        dest = user.destination_queue
        if (isinstance(dest, PrivateQueueFormatNameId | DirectQueueFormatName)) and dest.is_order_queue:
            props = MessagePropertiesHeader(0, props.body, props.allocation_body_size)
    debug = draw(st.one_of(st.none(), debug_headers))
    base_flags = draw(u16.map(lambda f: f & ~0x38 & ~0x100)) | (draw(st.booleans()) << 8 if debug else 0)
    return UserMessage(
        user,
        props,
        tx,
        draw(st.one_of(st.none(), security_headers)),
        debug,
        draw(st.one_of(st.none(), soap_headers)),
        draw(st.one_of(st.none(), multi_queue_headers)),
        draw(st.one_of(st.none(), session_headers)),
        draw(st.binary(max_size=16).map(lambda b: b[: len(b) & ~3])),
        base_flags,
        draw(u32),
        draw(u8),
    )


order_queues = st.one_of(
    st.builds(PrivateQueueFormatNameId, st.just(4)),
    st.builds(
        DirectQueueFormatName,
        st.sampled_from(["TCP:10.1.2.3\\PRIVATE$\\order_queue$", "OS:h\\private$\\ORDER_QUEUE$"]),
    ),
)
order_ack_bodies = st.builds(OrderAckBody, tx_sequence_ids, st.integers(1, 0xFFFFFFFF), u32)
final_ack_bodies = st.builds(FinalAckBody, tx_sequence_ids, u32, u32, guids, u32)
order_acks = st.builds(
    OrderAck.build,
    order_ack_bodies,
    source_qm=guids,
    destination_queue=order_queues,
    destination_qm=guids,
    sent_time=u32,
    message_id=u32,
    delivery_mode=st.sampled_from([0, 1]),
)
final_acks = st.builds(
    FinalAck.build,
    final_ack_bodies,
    st.sampled_from([0x4000, 0x8000, 0x8003, 0x8009, 0xC000, 0xC001, 0xC002, 0xC004]),
    source_qm=guids,
    destination_queue=order_queues,
    sent_time=u32,
    message_id=u32,
)
establish_connections = st.builds(
    EstablishConnection,
    st.builds(EstablishConnectionHeader, guids, guids, u32, u16, u16),
    u16.map(lambda f: f & ~0x38),
    u8,
    u32,
    u16.map(lambda f: f & ~0xF),
    u16,
)
connection_parameters = st.builds(
    ConnectionParameters,
    st.builds(ConnectionParametersHeader, u32, u32, u16, u16),
    u16.map(lambda f: f & ~0x38),
    u8,
    u32,
    u16.map(lambda f: f & ~0xF),
    u16,
)
session_acks = st.builds(
    SessionAck, session_headers, u16.map(lambda f: f & ~0x38), u8, u32, u16.map(lambda f: f & ~0x1F), u16
)
packets = st.one_of(
    user_messages(), order_acks, final_acks, establish_connections, connection_parameters, session_acks
)
