"""MS-MQQB section 4.1 example frames: documented field values and byte-exact re-encoding.

Where the spec's example is defective (packets.md §16) the test says so and asserts
both the defect and the reading we implement.
"""

from __future__ import annotations

import uuid

import pytest

from openmsmq.errors import WireError
from openmsmq.wire import (
    ConnectionParameters,
    DirectQueueFormatName,
    EstablishConnection,
    PacketDecoder,
    SessionAck,
    UserMessage,
    decode_packet,
)

from .frames import (
    FRAME1_PING_REQUEST,
    FRAME3_ESTABLISH_REQUEST,
    FRAME4_ESTABLISH_RESPONSE,
    FRAME5_PARAMETERS_REQUEST,
    FRAME6_PARAMETERS_RESPONSE,
    FRAME7_USER_MESSAGE_AS_PRINTED,
    FRAME8_SESSION_ACK,
    frame7_completed,
)

CLIENT_GUID_BYTES = bytes.fromhex("D1587355509195954997B6E611EA26C6")
SERVER_GUID_BYTES = bytes.fromhex("0789CD434C39118F44459078909EA0FC")


def printed_guid(raw: bytes) -> str:
    """How the spec's decoder text prints a GUID: the 16 bytes reversed (packets.md §16)."""
    return str(uuid.UUID(bytes=raw[::-1])).upper()


def test_spec_prints_guids_byte_reversed() -> None:
    # Defect: {C626EA11-E6B6-9749-9595-9150557358D1} is the byte reversal of the wire bytes,
    # not their MS-DTYP reading. We read GUIDs as MS-DTYP 2.3.4.2 says (uuid bytes_le).
    assert printed_guid(CLIENT_GUID_BYTES) == "C626EA11-E6B6-9749-9595-9150557358D1"
    assert printed_guid(SERVER_GUID_BYTES) == "FCA09E90-7890-4544-8F11-394C43CD8907"
    assert FRAME1_PING_REQUEST[8:24] == CLIENT_GUID_BYTES


def test_frame3_establish_connection_request() -> None:
    pkt = decode_packet(FRAME3_ESTABLISH_REQUEST)
    assert isinstance(pkt, EstablishConnection)
    assert len(FRAME3_ESTABLISH_REQUEST) == 572
    assert pkt.base_reserved == 0xC0
    assert pkt.base_flags == 0x3  # PR 3 (IN is structural)
    assert pkt.time_to_reach_queue == 0xFFFFFFFF
    assert not pkt.connection_refused
    h = pkt.header
    assert h.client_guid == uuid.UUID(bytes_le=CLIENT_GUID_BYTES)
    assert h.server_guid == uuid.UUID(bytes_le=SERVER_GUID_BYTES)
    assert h.timestamp == 501140046
    # Defect: the decoder text calls 0x0310 "Reserved: 784" and shows OperatingSystem 0;
    # the word at offset 56 is OperatingSystem = RE 0x10 | SE | OS (packets.md §5).
    assert h.operating_system == 0x0310
    assert h.ping_not_sent and h.server_os
    # Also documented: SE = 1 although FRAME 1 shows a ping was sent.
    assert h.padding == b"\x5a" * 512
    assert pkt.encode() == FRAME3_ESTABLISH_REQUEST


def test_frame4_establish_connection_response() -> None:
    pkt = decode_packet(FRAME4_ESTABLISH_RESPONSE)
    assert isinstance(pkt, EstablishConnection)
    assert pkt.base_reserved == 0x5A
    h = pkt.header
    # Defect: the text shows the request's GUIDs, but the response bytes carry other GUIDs.
    assert h.client_guid != uuid.UUID(bytes_le=CLIENT_GUID_BYTES)
    assert h.client_guid == uuid.UUID(bytes_le=bytes.fromhex("0523741F5EBE7741BC77C4DD7719E474"))
    assert h.server_guid == uuid.UUID(bytes_le=bytes.fromhex("EB6A3A3C67F5434187D385CF4D68CEB4"))
    assert h.timestamp == 501140046  # echoed
    assert h.padding == b"\x5a" * 512  # MUST be 0x5A in a response
    assert pkt.encode() == FRAME4_ESTABLISH_RESPONSE


def test_frame5_connection_parameters_request() -> None:
    pkt = decode_packet(FRAME5_PARAMETERS_REQUEST)
    assert isinstance(pkt, ConnectionParameters)
    assert pkt.header.recoverable_ack_timeout == 1496
    assert pkt.header.ack_timeout == 120000
    assert pkt.header.window_size == 64
    assert pkt.header.reserved == 0
    assert pkt.encode() == FRAME5_PARAMETERS_REQUEST


def test_frame6_connection_parameters_response_window_size_defect() -> None:
    pkt = decode_packet(FRAME6_PARAMETERS_RESPONSE)
    assert isinstance(pkt, ConnectionParameters)
    # Defect: the decoder text says WindowSize 32 (0x20); the bytes say 0x0040 = 64.
    assert pkt.header.window_size == 64
    assert pkt.header.window_size != 32
    assert pkt.encode() == FRAME6_PARAMETERS_RESPONSE


def test_frame7_dump_is_truncated() -> None:
    # Defect: PacketSize is 0x8B0 = 2224 but the printed hex dump stops after 1650 bytes.
    assert int.from_bytes(FRAME7_USER_MESSAGE_AS_PRINTED[8:12], "little") == 2224
    assert len(FRAME7_USER_MESSAGE_AS_PRINTED) == 1650
    with pytest.raises(WireError) as err:
        decode_packet(FRAME7_USER_MESSAGE_AS_PRINTED)
    assert err.value.field == "PacketSize"
    decoder = PacketDecoder()
    assert decoder.feed(FRAME7_USER_MESSAGE_AS_PRINTED) == []  # waits for the rest
    assert decoder.buffered == 1650


def test_frame7_user_message_completed() -> None:
    frame = frame7_completed()
    pkt = decode_packet(frame)
    assert isinstance(pkt, UserMessage)
    assert pkt.priority == 3
    assert pkt.time_to_reach_queue == 345600
    assert pkt.source_qm == uuid.UUID(bytes_le=CLIENT_GUID_BYTES)
    assert pkt.destination_qm == uuid.UUID(int=0)  # direct format name
    assert pkt.time_to_be_received == 0xFFFFFFFF
    assert pkt.user.message_id == 2286
    assert pkt.message_id.uniquifier == 2286
    assert pkt.destination_queue == DirectQueueFormatName("OS:a04bm02\\q")
    assert pkt.user.admin_queue is None and pkt.user.response_queue is None
    assert pkt.delivery_mode == 0 and pkt.hop_count == 0
    assert pkt.transaction is None
    # SecurityHeader: SID sender id of 28 bytes, Flags 0x0001, AI clear.
    assert pkt.security is not None
    assert pkt.security.flags == 0x0001
    assert len(pkt.security.sender_id) == 28
    assert pkt.security.sender_id[:2] == b"\x01\x05"  # SID revision 1, 5 sub-authorities
    props = pkt.properties
    assert props.label == "mqsender label"
    assert props.message_class == 0
    assert props.correlation_id == bytes(20)
    assert props.body_type == 0x0008  # VT_BSTR, not in MS-MQMQ 2.2.12's list
    assert props.application_tag == 0
    assert props.hash_algorithm == 0x8004  # SHA-1
    assert props.privacy_level == 0
    assert props.extension == b""
    assert pkt.body == "a".encode("utf-16-le") * 1000
    # Defect: the text says AllocatedBodySize 20 and "MessageBody 20 Bytes"; the bytes say 2000.
    assert props.allocation_body_size == 2000
    # Defect: the text says EncryptionAlgorithm 26113 (0x6601); the bytes say 0x6801 (RC4).
    assert props.encryption_algorithm == 0x6801
    # Defect: SentTime bytes are "4C 49 4F 52" (the signature again), not 0x441105E6 as printed.
    assert pkt.sent_time == 0x524F494C
    assert pkt.sent_time != 1141966310
    # Defect: MessagePropertiesHeader.Flags byte is 0x0F though decoded as 0 ("None"), and no
    # AdminQueue is present although one MUST be when any ack bit is set. The decoder keeps the
    # bits as sent; acting on them is the queue manager's business.
    assert props.ack_flags == 0x0F
    assert pkt.encode() == frame


def test_frame7_padding_bytes_round_trip() -> None:
    frame = frame7_completed(padding=b"\xde\xad")
    pkt = decode_packet(frame)
    assert pkt.encode() == frame
    assert pkt == decode_packet(frame7_completed())  # padding does not take part in equality


def test_frame8_session_ack() -> None:
    pkt = decode_packet(FRAME8_SESSION_ACK)
    assert isinstance(pkt, SessionAck)
    assert pkt.base_reserved == 0xCD
    s = pkt.session
    assert s.ack_sequence_number == 1
    assert s.recoverable_msg_ack_seq_number == 0
    assert s.recoverable_msg_ack_flags == 0
    assert s.user_msg_sequence_number == 0
    assert s.recoverable_msg_seq_number == 0
    assert s.window_size == 64
    # The stand-alone SessionAck's PacketSize (36) counts its SessionHeader (packets.md §2).
    assert len(FRAME8_SESSION_ACK) == 36
    assert pkt.encode() == FRAME8_SESSION_ACK


def test_whole_session_through_stream_decoder() -> None:
    stream = (
        FRAME3_ESTABLISH_REQUEST
        + FRAME4_ESTABLISH_RESPONSE
        + FRAME5_PARAMETERS_REQUEST
        + FRAME6_PARAMETERS_RESPONSE
        + frame7_completed()
        + FRAME8_SESSION_ACK
    )
    decoder = PacketDecoder()
    out = []
    for i in range(0, len(stream), 7):
        out.extend(decoder.feed(stream[i : i + 7]))
    assert [type(p).__name__ for p in out] == [
        "EstablishConnection",
        "EstablishConnection",
        "ConnectionParameters",
        "ConnectionParameters",
        "UserMessage",
        "SessionAck",
    ]
    assert b"".join(p.encode() for p in out) == stream
    assert decoder.buffered == 0
