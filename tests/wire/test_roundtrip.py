"""Round trips: decode(encode(x)) == x for every header and packet, and encode(decode(b)) == b."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from openmsmq.wire import (
    DebugHeader,
    MessagePropertiesHeader,
    MQFAddressHeader,
    MultiQueueFormatHeader,
    ObjectId,
    PacketDecoder,
    SecurityHeader,
    SessionHeader,
    SoapHeader,
    TransactionHeader,
    TxSequenceId,
    UserHeader,
    decode_packet,
    encode_packets,
)
from openmsmq.wire.headers import ConnectionParametersHeader, EstablishConnectionHeader

from . import strategies as S

FAST = settings(max_examples=150, deadline=None)


def roundtrip(cls: Any, value: Any) -> None:
    data = value.encode()
    assert len(data) % 4 == 0 or cls in (TxSequenceId, ObjectId)
    decoded = cls.decode(data)
    assert decoded == value
    assert decoded.encode() == data


@FAST
@given(S.user_headers)
def test_user_header(h: UserHeader) -> None:
    roundtrip(UserHeader, h)


@FAST
@given(S.properties_headers)
def test_properties_header(h: MessagePropertiesHeader) -> None:
    roundtrip(MessagePropertiesHeader, h)


@FAST
@given(S.transaction_headers)
def test_transaction_header(h: TransactionHeader) -> None:
    roundtrip(TransactionHeader, h)


@FAST
@given(S.session_headers)
def test_session_header(h: SessionHeader) -> None:
    roundtrip(SessionHeader, h)


@FAST
@given(S.security_headers)
def test_security_header(h: SecurityHeader) -> None:
    roundtrip(SecurityHeader, h)


@FAST
@given(S.debug_headers)
def test_debug_header(h: DebugHeader) -> None:
    roundtrip(DebugHeader, h)


@FAST
@given(S.soap_headers)
def test_soap_header(h: SoapHeader) -> None:
    roundtrip(SoapHeader, h)


@FAST
@given(S.multi_queue_headers)
def test_multi_queue_header(h: MultiQueueFormatHeader) -> None:
    roundtrip(MultiQueueFormatHeader, h)


@FAST
@given(st.lists(S.mqf_elements, max_size=4))
def test_mqf_elements_parse_back(elements: list[Any]) -> None:
    h = MQFAddressHeader.from_elements(0x64, tuple(elements))
    assert h.elements() == tuple(elements)


@FAST
@given(st.builds(EstablishConnectionHeader, S.guids, S.guids, S.u32, S.u16, S.u16))
def test_establish_connection_header(h: EstablishConnectionHeader) -> None:
    roundtrip(EstablishConnectionHeader, h)


@FAST
@given(st.builds(ConnectionParametersHeader, S.u32, S.u32, S.u16, S.u16))
def test_connection_parameters_header(h: ConnectionParametersHeader) -> None:
    roundtrip(ConnectionParametersHeader, h)


@FAST
@given(S.tx_sequence_ids, S.tx_sequence_ids)
def test_tx_sequence_id_codec_and_order(a: TxSequenceId, b: TxSequenceId) -> None:
    assert TxSequenceId.decode(a.encode()) == a
    assert TxSequenceId.from_int(a.value) == a
    # MS-MQMQ 2.2.18.1.2: compared as the u64 (TimeStamp << 32) | Ordinal, = little-endian read.
    assert (
        (a < b)
        == (a.value < b.value)
        == (int.from_bytes(a.encode(), "little") < int.from_bytes(b.encode(), "little"))
    )


@FAST
@given(S.guids, S.u32)
def test_object_id(guid: Any, uniq: int) -> None:
    oid = ObjectId(guid, uniq)
    assert ObjectId.decode(oid.encode()) == oid
    assert len(oid.encode()) == 20


@FAST
@given(S.packets)
def test_packet_roundtrip(packet: Any) -> None:
    data = packet.encode()
    decoded = decode_packet(data)
    assert decoded == packet
    assert type(decoded) is type(packet)
    assert decoded.encode() == data


@settings(max_examples=60, deadline=None)
@given(st.lists(S.packets, min_size=1, max_size=5), st.data())
def test_stream_any_chunking(packets: list[Any], data: st.DataObject) -> None:
    stream = encode_packets(packets)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    decoder = PacketDecoder()
    out: list[Any] = []
    prev = 0
    for cut in [*cuts, len(stream)]:
        out.extend(decoder.feed(stream[prev:cut]))
        prev = cut
    assert out == packets
    assert decoder.buffered == 0
