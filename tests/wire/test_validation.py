"""One test per validation rule: the WireError names header, field, value and expectation."""

from __future__ import annotations

import struct
import uuid

import pytest

from openmsmq.errors import WireError
from openmsmq.wire import (
    ORDER_QUEUE_ID,
    DirectQueueFormatName,
    MessageClass,
    PacketDecoder,
    PrivateQueueFormatNameId,
    SessionHeader,
    TransactionHeader,
    TxSequenceId,
    UserMessage,
    decode_packet,
)

from .frames import FRAME3_ESTABLISH_REQUEST, FRAME5_PARAMETERS_REQUEST, FRAME8_SESSION_ACK

QM_A = uuid.UUID("11111111-2222-3333-4444-555555555555")


def message(**kw: object) -> UserMessage:
    args: dict[str, object] = {
        "source_qm": QM_A,
        "message_id": 7,
        "destination_queue": DirectQueueFormatName("TCP:127.0.0.1\\private$\\q"),
        "body": b"hello",
        "sent_time": 1_700_000_000,
        "label": "L",
    }
    args.update(kw)
    return UserMessage.build(**args)  # type: ignore[arg-type]


def patch(data: bytes, offset: int, fmt: str, value: int) -> bytes:
    b = bytearray(data)
    struct.pack_into(fmt, b, offset, value)
    return bytes(b)


def expect(data: bytes, header: str, field: str, value: object = None, *, stream: bool = True) -> WireError:
    with pytest.raises(WireError) as err:
        decode_packet(data)
    e = err.value
    assert (e.header, e.field) == (header, field)
    if value is not None:
        assert e.value == value
    assert e.expected
    text = str(e)
    assert header in text and field in text and "expected" in text
    if stream:  # the stream decoder reports the same error, and keeps reporting it
        decoder = PacketDecoder()
        with pytest.raises(WireError) as err2:
            decoder.feed(data)
        assert (err2.value.header, err2.value.field) == (header, field)
        with pytest.raises(WireError):
            decoder.feed(b"")
    return e


def test_version_number() -> None:
    expect(patch(FRAME5_PARAMETERS_REQUEST, 0, "<B", 0x11), "BaseHeader", "VersionNumber", "0x11")


def test_signature() -> None:
    expect(patch(FRAME5_PARAMETERS_REQUEST, 4, "<I", 0x524F494D), "BaseHeader", "Signature")


def test_packet_size_over_4_mib() -> None:
    e = expect(patch(FRAME5_PARAMETERS_REQUEST, 8, "<I", 0x00400004), "BaseHeader", "PacketSize", 0x00400004)
    assert "4 MiB" in e.expected


def test_stream_rejects_oversized_packet_before_its_bytes_arrive() -> None:
    decoder = PacketDecoder()
    with pytest.raises(WireError) as err:
        decoder.feed(patch(FRAME5_PARAMETERS_REQUEST, 8, "<I", 0x7FFFFFF0)[:16])
    assert err.value.field == "PacketSize"


def test_configured_limit() -> None:
    decoder = PacketDecoder(max_packet_size=1024)
    with pytest.raises(WireError) as err:
        decoder.feed(message(body=b"x" * 2000).encode())
    assert err.value.field == "PacketSize" and "configured" in err.value.expected


def test_packet_size_alignment() -> None:
    expect(patch(FRAME5_PARAMETERS_REQUEST, 8, "<I", 0x22), "BaseHeader", "PacketSize", 0x22)


def test_packet_size_too_small() -> None:
    expect(patch(FRAME5_PARAMETERS_REQUEST, 8, "<I", 16), "BaseHeader", "PacketSize", 16, stream=False)


def test_packet_size_of_internal_packet() -> None:
    data = patch(FRAME5_PARAMETERS_REQUEST, 8, "<I", 36) + b"\x00" * 4
    e = expect(data, "BaseHeader", "PacketSize", 36)
    assert "32" in e.expected


def test_packet_size_disagrees_with_buffer() -> None:
    e = expect(FRAME5_PARAMETERS_REQUEST + b"\x00" * 4, "BaseHeader", "PacketSize", stream=False)
    assert "36" in e.expected


def test_internal_packet_type() -> None:
    expect(patch(FRAME5_PARAMETERS_REQUEST, 18, "<H", 0x4), "InternalHeader", "Flags.PT", 4)


def test_connection_refused_bit_not_allowed_in_session_ack() -> None:
    expect(patch(FRAME8_SESSION_ACK, 18, "<H", 0x11), "InternalHeader", "Flags.CS", 1)


def test_session_ack_requires_sh() -> None:
    expect(patch(FRAME8_SESSION_ACK, 2, "<H", 0x000B), "BaseHeader", "Flags.SH", 0)


def test_connection_packets_forbid_sh() -> None:
    expect(patch(FRAME5_PARAMETERS_REQUEST, 2, "<H", 0x001B), "BaseHeader", "Flags.SH", 1, stream=False)


def test_internal_packets_forbid_debug_header() -> None:
    expect(patch(FRAME3_ESTABLISH_REQUEST, 2, "<H", 0x002B), "BaseHeader", "Flags.DH", 1)


def test_session_header_window_size() -> None:
    expect(patch(FRAME8_SESSION_ACK, 32, "<H", 0), "SessionHeader", "WindowSize", 0)


def test_tracing_requires_debug_header() -> None:
    data = patch(message().encode(), 2, "<H", 0x0103)
    expect(data, "BaseHeader", "Flags.TR", 1)


def user_flags_at(data: bytes) -> int:
    return int(struct.unpack_from("<I", data, 16 + 44)[0])


def test_user_header_mp_must_be_set() -> None:
    data = message().encode()
    expect(patch(data, 60, "<I", user_flags_at(data) & ~0x00200000), "UserHeader", "Flags.MP", 0)


def test_user_header_ah_must_not_be_set() -> None:
    data = message().encode()
    expect(patch(data, 60, "<I", user_flags_at(data) | 0x02000000), "UserHeader", "Flags.AH", 1)


def test_user_header_destination_queue_type() -> None:
    data = message().encode()
    bad = (user_flags_at(data) & ~0x1C00) | (0x2 << 10)
    expect(patch(data, 60, "<I", bad), "UserHeader", "Flags.DQ", 2)


def test_user_header_admin_queue_type() -> None:
    data = message().encode()
    bad = user_flags_at(data) | (0x1 << 13)
    expect(patch(data, 60, "<I", bad), "UserHeader", "Flags.AQ", 1)


def test_transactional_message_must_not_be_express() -> None:
    tx = TransactionHeader(TxSequenceId(1, 1), 1, 0)
    data = message(transaction=tx).encode()
    expect(patch(data, 60, "<I", user_flags_at(data) & ~0x60), "UserHeader", "Flags.DM", 0)


def test_direct_queue_count_odd() -> None:
    data = message().encode()
    expect(patch(data, 64, "<H", 5), "UserHeader", "DestinationQueue.Count", 5)


def test_direct_queue_not_null_terminated() -> None:
    data = message().encode()
    count = struct.unpack_from("<H", data, 64)[0]
    expect(patch(data, 66 + count - 2, "<H", 0x41), "UserHeader", "DestinationQueue.DirectFormatName")


def test_direct_queue_overruns_packet() -> None:
    data = message().encode()
    e = expect(patch(data, 64, "<H", 0x7FF0), "UserHeader", "DestinationQueue.DirectFormatName")
    assert "fit within" in e.expected


def test_transaction_sequence_number_zero() -> None:
    tx = TransactionHeader(TxSequenceId(1, 1), 1, 0)
    data = message(transaction=tx).encode()
    user_end = 16 + 48 + 2 + len("TCP:127.0.0.1\\private$\\q".encode("utf-16-le")) + 2
    user_end += -user_end & 3
    expect(patch(data, user_end + 12, "<I", 0), "TransactionHeader", "TxSequenceNumber", 0)


def test_previous_transaction_sequence_number_range() -> None:
    tx = TransactionHeader(TxSequenceId(1, 1), 5, 4)
    data = message(transaction=tx).encode()
    i = data.index(struct.pack("<II", 5, 4))
    expect(patch(data, i + 4, "<I", 0xFFFFFFFF), "TransactionHeader", "PreviousTxSequenceNumber")


def properties_offset(data: bytes) -> int:
    return data.index(b"L\x00\x00\x00") - 56  # label "L" right after the 56 fixed bytes


def test_label_length_limit() -> None:
    data = message().encode()
    expect(patch(data, properties_offset(data) + 1, "<B", 251), "MessagePropertiesHeader", "LabelLength", 251)


def test_label_not_null_terminated() -> None:
    data = message().encode()
    off = properties_offset(data)
    expect(patch(data, off + 56 + 2, "<H", 0x42), "MessagePropertiesHeader", "Label")


def test_message_size_overruns_packet() -> None:
    data = message().encode()
    off = properties_offset(data)
    expect(patch(data, off + 32, "<I", 10_000), "MessagePropertiesHeader", "MessageBody")


def test_extension_size_overruns_packet() -> None:
    data = message().encode()
    off = properties_offset(data)
    expect(patch(data, off + 52, "<I", 10_000), "MessagePropertiesHeader", "ExtensionData")


def test_trailing_session_header_missing() -> None:
    data = message(session=SessionHeader(1)).encode()
    assert len(data) == struct.unpack_from("<I", data, 8)[0] + 16
    expect(data[:-16], "BaseHeader", "PacketSize", stream=False)
    decoder = PacketDecoder()
    assert decoder.feed(data[:-1]) == []  # waits for the SessionHeader's last byte
    assert len(decoder.feed(data[-1:])) == 1


def order_ack_bytes(body: bytes) -> bytes:
    msg = message(
        destination_queue=PrivateQueueFormatNameId(ORDER_QUEUE_ID),
        message_class=MessageClass.ORDER_ACK,
        body=body,
        label="QM Ordering Ack",
    )
    return msg.encode()


def test_order_ack_body_size() -> None:
    expect(order_ack_bytes(b"\x00" * 32), "MessagePropertiesHeader", "MessageSize", 32)


def test_order_ack_sequence_number_zero() -> None:
    expect(order_ack_bytes(b"\x00" * 36), "OrderAckBody", "TxSequenceNumber", 0)
