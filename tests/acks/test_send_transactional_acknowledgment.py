"""Seed 000: MS-MQQB 3.1.7.17 Send Transactional Acknowledgment, table by table.

Every row of the class table and of the attribute table, the three body constructions,
the DestinationForAck branches and the discard on an Open Queue failure — checked on the
built Message and on the bytes of the encoded OrderAck / FinalAck packet.
"""

from __future__ import annotations

import logging
import struct
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from openmsmq.errors import LocalProtocolError
from openmsmq.qm import MessageRecord, QueueManager, QueueType
from openmsmq.transfer.acknowledgments import (
    CLASS_NAMES,
    CLASS_VALUES,
    TRANSACTIONAL_ACK_CLASSES,
    AckSession,
    ack_destination,
    build_transactional_acknowledgment,
    encode_transactional_acknowledgment,
    send_transactional_acknowledgment,
)
from openmsmq.transfer.codec import direct_name, packet_from_message
from openmsmq.wire import FinalAck, OrderAck, decode_packet
from openmsmq.wire.headers import TransactionHeader
from openmsmq.wire.ids import ObjectId, TxSequenceId
from openmsmq.wire.message import UserMessage
from openmsmq.wire.userheader import DirectQueueFormatName

SOURCE_QM = uuid.UUID("11111111-2222-3333-4444-555555555555")
REMOTE_QM = uuid.UUID("aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee")
SEQ = TxSequenceId(0x5F000001, 0x00000007)  # (TimeStamp, Ordinal)
DIRECT = AckSession(True, "192.0.2.10", REMOTE_QM, SEQ, 42)
ROUTED = AckSession(False, "192.0.2.10", REMOTE_QM, SEQ, 42)

# A stored transactional message that arrived from SOURCE_QM (iUserMessage).
STORED = MessageRecord(
    body=b"payload",
    label="order 1",
    transactional=True,
    id_lineage=SOURCE_QM,
    id_uniquifier=0x01020304,
    source_machine=SOURCE_QM,
    tx_sequence_id=(0x5E000002 << 32) | 0x00000009,
    tx_sequence_number=17,
    tx_previous_sequence_number=16,
    final_ack_required=True,
)

# ---- the seed's first table, verbatim: iMessageClass constant, value, Class name ------------

CLASS_TABLE = [
    ("MQMSG_CLASS_ORDER_ACK", 0x00FF, "OrderAck"),
    ("MQMSG_CLASS_ACK_RECEIVE", 0x4000, "AckReceive"),
    ("MQMSG_CLASS_NACK_BAD_DST_Q", 0x8000, "NackBadDestQueue"),
    ("MQMSG_CLASS_NACK_DELETED", 0x8001, "NackPurged"),  # as the seed writes it
    ("MQMSG_CLASS_NACK_REACH_QUEUE_TIMEOUT", 0x8002, "NackReachQueueTimeout"),
    ("MQMSG_CLASS_NACK_Q_EXCEED_QUOTA", 0x8003, "NackQueueExceedQuota"),
    ("MQMSG_CLASS_NACK_ACCESS_DENIED", 0x8004, "NackAccessDenied"),
    ("MQMSG_CLASS_NACK_HOP_COUNT_EXCEEDED", 0x8005, "NackHopCountExceeded"),
    ("MQMSG_CLASS_NACK_BAD_SIGNATURE", 0x8006, "NackBadSignature"),
    ("MQMSG_CLASS_NACK_BAD_ENCRYPTION", 0x8007, "NackBadEncryption"),
    ("MQMSG_CLASS_NACK_NOT_TRANSACTIONAL_Q", 0x8009, "NackNotTransactionalQueue"),
    ("MQMSG_CLASS_NACK_NOT_TRANSACTIONAL_MSG", 0x800A, "NackNotTransactionalMessage"),
    ("MQMSG_CLASS_NACK_UNSUPPORTED_CRYPTO_PROVIDER", 0x800B, "NackUnsupportedCryptoProvider"),
    ("MQMSG_CLASS_NACK_Q_DELETED", 0xC000, "NackQueueDeleted"),
    ("MQMSG_CLASS_NACK_Q_PURGED", 0xC001, "NackQueuePurged"),
    ("MQMSG_CLASS_NACK_RECEIVE_TIMEOUT", 0xC002, "NackReceiveTimeout"),
    ("MQMSG_CLASS_NACK_RECEIVE_REJECTED", 0xC004, "NackReceiveRejected"),
]


# ---- packet layout (MS-MQMQ 2.2.19.1-2.2.19.3; packets.md §12-13) ---------------------------


class Layout:
    """Offsets into an encoded acknowledgment packet (no optional headers)."""

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        # MessagePropertiesHeader: 56 fixed bytes + label (16 UTF-16 units) + 36-byte body.
        self.mph = len(raw) - (56 + 32 + 36)

    def base_flags(self) -> int:
        return int(struct.unpack_from("<H", self.raw, 2)[0])

    def user_flags(self) -> int:
        return int(struct.unpack_from("<I", self.raw, 16 + 44)[0])

    def queue_manager_address(self) -> uuid.UUID:
        return uuid.UUID(bytes_le=self.raw[32:48])

    def destination_field(self) -> bytes:
        return self.raw[16 + 48 : self.mph]

    def mph_flags(self) -> int:
        return self.raw[self.mph]

    def label_length(self) -> int:
        return self.raw[self.mph + 1]

    def message_class(self) -> int:
        return int(struct.unpack_from("<H", self.raw, self.mph + 2)[0])

    def body_type(self) -> int:
        return int(struct.unpack_from("<I", self.raw, self.mph + 24)[0])

    def message_size(self) -> int:
        return int(struct.unpack_from("<I", self.raw, self.mph + 32)[0])

    def privacy_level(self) -> int:
        return int(struct.unpack_from("<I", self.raw, self.mph + 40)[0])

    def label(self) -> str:
        return self.raw[self.mph + 56 : self.mph + 88].decode("utf-16-le")

    def body(self) -> bytes:
        return self.raw[self.mph + 88 :]


def encoded(ack: MessageRecord, destination: str) -> Layout:
    packet = encode_transactional_acknowledgment(ack, destination, source_qm=SOURCE_QM, message_id=5)
    raw = packet.encode()
    assert len(raw) == struct.unpack_from("<I", raw, 8)[0]  # BaseHeader.PacketSize
    return Layout(raw)


def build(i_class: int, session: AckSession = DIRECT) -> tuple[MessageRecord, str]:
    if i_class == 0x00FF:
        return build_transactional_acknowledgment(i_class, session)
    return build_transactional_acknowledgment(i_class, session, user_message=STORED)


# ---- table 1: iMessageClass → transAcknowledgment.Class -------------------------------------


def test_class_table_has_exactly_the_seed_rows() -> None:
    assert {int(k): v for k, v in TRANSACTIONAL_ACK_CLASSES.items()} == {v: n for _, v, n in CLASS_TABLE}


@pytest.mark.parametrize(("constant", "value", "name"), CLASS_TABLE, ids=[r[0] for r in CLASS_TABLE])
def test_class_row(constant: str, value: int, name: str) -> None:
    ack, destination = build(value)
    assert CLASS_NAMES[ack.message_class] == name
    assert ack.message_class == CLASS_VALUES[name] == value  # NackPurged is 0x8001 (data-model §6.3)
    layout = encoded(ack, destination)
    assert layout.message_class() == value
    packet = decode_packet(layout.raw)
    assert isinstance(packet, OrderAck if value == 0x00FF else FinalAck)


@pytest.mark.parametrize("value", [0x0000, 0x0001, 0x0002, 0x8008, 0xC003, 0x1234])
def test_class_outside_the_table_is_refused(value: int) -> None:
    with pytest.raises(LocalProtocolError):
        build_transactional_acknowledgment(value, DIRECT, user_message=STORED)


# ---- table 2: the additional attributes ------------------------------------------------------

# (row of the seed's second table, the built Message's attribute, expected, the same on the
# wire, expected). PrivacyLevel and AuthenticationLevel are not attributes of the store's
# Message: they are checked on the wire only.
AttrRow = tuple[str, Callable[[MessageRecord], object] | None, object, Callable[[Layout], object], object]
ATTRIBUTE_TABLE: list[AttrRow] = [
    ("Priority=Zero", lambda m: m.priority, 0, lambda p: p.base_flags() & 0x0007, 0),
    ("TracingRequested=FALSE", lambda m: m.tracing, False, lambda p: p.base_flags() & 0x0120, 0),
    ("DeliveryGuarantee=Recoverable", lambda m: m.delivery, 1, lambda p: (p.user_flags() >> 5) & 0x3, 1),
    (
        "PositiveJournalingRequested=FALSE",
        lambda m: m.positive_journaling,
        False,
        lambda p: p.user_flags() & 0x200,
        0,
    ),
    (
        "NegativeJournalingRequested=FALSE",
        lambda m: m.negative_journaling,
        False,
        lambda p: p.user_flags() & 0x100,
        0,
    ),
    (
        "AdministrationQueueFormatName=empty",
        lambda m: m.admin_queue,
        "",
        lambda p: p.user_flags() & 0xE000,
        0,
    ),
    ("ResponseQueueFormatName=empty", lambda m: m.response_queue, "", lambda p: p.user_flags() & 0x70000, 0),
    # None on the wire: MessagePropertiesHeader.PrivacyLevel 0.
    ("PrivacyLevel=None", None, None, lambda p: p.privacy_level(), 0),
    # None: no SecurityHeader (UserHeader.Flags.SH clear).
    ("AuthenticationLevel=None", None, None, lambda p: p.user_flags() & 0x80000, 0),
    (
        "Label=QM Ordering Ack",
        lambda m: m.label,
        "QM Ordering Ack",
        lambda p: (p.label_length(), p.label()),
        (16, "QM Ordering Ack\x00"),
    ),
    ("BodyType=VT_EMPTY", lambda m: m.body_type, 0, lambda p: p.body_type(), 0),
]


@pytest.mark.parametrize("row", ATTRIBUTE_TABLE, ids=[r[0] for r in ATTRIBUTE_TABLE])
@pytest.mark.parametrize("value", [0x00FF, 0x4000, 0xC004], ids=["OrderAck", "AckReceive", "NackRejected"])
@pytest.mark.parametrize("session", [DIRECT, ROUTED], ids=["direct", "routed"])
def test_attribute_row(row: AttrRow, value: int, session: AckSession) -> None:
    _, attribute, expected, wire, wire_expected = row
    ack, destination = build(value, session)
    if attribute is not None:
        assert attribute(ack) == expected
    assert wire(encoded(ack, destination)) == wire_expected


def test_header_fields_outside_the_tables() -> None:
    ack, destination = build(0x00FF)
    layout = encoded(ack, destination)
    assert layout.base_flags() == 0  # BaseHeader.Flags all zero (MS-MQQB 2.2.4)
    assert layout.mph_flags() == 0  # no acknowledgments requested
    assert layout.message_size() == 36
    assert ack.ack_flags == 0 and not ack.final_ack_required and not ack.transactional


# ---- body construction: OrderAck, FinalAck from iUserMessage, FinalAck from the packet ------


@pytest.mark.parametrize("number", [1, 42, 0xFFFFFFFF])
def test_order_ack_body_from_the_session(number: int) -> None:
    session = AckSession(True, "192.0.2.10", REMOTE_QM, SEQ, number)
    ack, destination = build_transactional_acknowledgment(0x00FF, session)
    body = encoded(ack, destination).body()
    assert body == ack.body and len(body) == 36
    # TxSequenceId = OutgoingTxSequenceID: Ordinal (low u32) then TimeStamp (high u32).
    assert struct.unpack_from("<II", body, 0) == (SEQ.ordinal, SEQ.timestamp)
    assert struct.unpack_from("<I", body, 8)[0] == number  # IncomingTxSequenceNumber
    assert struct.unpack_from("<I", body, 12)[0] == number - 1  # IncomingTxSequenceNumber - 1
    assert body[16:] == bytes(20)


def test_order_ack_needs_the_session_sequence() -> None:
    with pytest.raises(LocalProtocolError):
        build_transactional_acknowledgment(0x00FF, AckSession(True, "192.0.2.10"))
    with pytest.raises(LocalProtocolError):
        build_transactional_acknowledgment(0x00FF, AckSession(True, "192.0.2.10", REMOTE_QM, SEQ, 0))


def _final_ack_fields(body: bytes) -> tuple[int, int, int, int, uuid.UUID, int]:
    ordinal, timestamp, number, previous = struct.unpack_from("<IIII", body, 0)
    return (
        ordinal,
        timestamp,
        number,
        previous,
        uuid.UUID(bytes_le=body[16:32]),
        struct.unpack_from("<I", body, 32)[0],
    )


def test_final_ack_body_from_the_stored_message() -> None:
    ack, destination = build_transactional_acknowledgment(0x4000, DIRECT, user_message=STORED)
    body = encoded(ack, destination).body()
    assert _final_ack_fields(body) == (
        0x00000009,  # TransactionalMessageSequenceIdentifier, Ordinal
        0x5E000002,  # ... TimeStamp
        17,  # TransactionSequenceNumber
        16,  # TransactionPreviousSequenceNumber
        SOURCE_QM,  # SourceMachineIdentifier
        0x01020304,  # Identifier.Uniquifier
    )
    final = decode_packet(encoded(ack, destination).raw)
    assert isinstance(final, FinalAck)
    assert final.body.acknowledged_message_id == ObjectId(SOURCE_QM, 0x01020304)


def _packet(tx: TransactionHeader | None) -> UserMessage:
    return UserMessage.build(
        source_qm=uuid.UUID("99999999-8888-7777-6666-555555555555"),
        message_id=0xCAFE,
        destination_queue=DirectQueueFormatName("TCP:192.0.2.20\\PRIVATE$\\orders"),
        body=b"x",
        sent_time=1000,
        transaction=tx,
    )


def test_final_ack_body_from_the_user_message_packet() -> None:
    packet = _packet(TransactionHeader(TxSequenceId(0x10, 0x20), 5, 4, flags=0x2))
    ack, destination = build_transactional_acknowledgment(0xC000, DIRECT, user_message_packet=packet)
    body = encoded(ack, destination).body()
    assert _final_ack_fields(body) == (
        0x20,  # TransactionHeader.TxSequenceID Ordinal
        0x10,  # ... TimeStamp
        5,  # TxSequenceNumber
        4,  # PreviousTxSequenceNumber
        uuid.UUID("99999999-8888-7777-6666-555555555555"),  # UserHeader.SourceQueueManager
        0xCAFE,  # UserHeader.MessageID
    )


def test_user_message_is_preferred_over_the_packet() -> None:
    packet = _packet(TransactionHeader(TxSequenceId(0x10, 0x20), 5, 4))
    ack, _ = build_transactional_acknowledgment(
        0x4000, DIRECT, user_message_packet=packet, user_message=STORED
    )
    assert _final_ack_fields(ack.body)[5] == STORED.id_uniquifier


def test_final_ack_needs_a_message_or_a_transactional_packet() -> None:
    with pytest.raises(LocalProtocolError):
        build_transactional_acknowledgment(0x4000, DIRECT)
    with pytest.raises(LocalProtocolError):
        build_transactional_acknowledgment(0x4000, DIRECT, user_message_packet=_packet(None))


# ---- DestinationForAck ----------------------------------------------------------------------

DESTINATIONS = [
    (AckSession(True, "192.0.2.10"), "DIRECT=TCP:192.0.2.10\\PRIVATE$\\order_queue$"),
    (AckSession(True, "2001:db8::7"), "DIRECT=TCP:2001:db8::7\\PRIVATE$\\order_queue$"),
    (AckSession(True, "0000000a.00a0c9123456"), "DIRECT=SPX:0000000a.00a0c9123456\\PRIVATE$\\order_queue$"),
    (AckSession(False, "192.0.2.10", REMOTE_QM), f"PRIVATE={REMOTE_QM}\\00000004"),
    (AckSession(True, "mq01.example"), ""),  # neither IP nor SPX: the seed builds nothing
]


@pytest.mark.parametrize(
    ("session", "expected"), DESTINATIONS, ids=["ipv4", "ipv6", "spx", "private", "other"]
)
def test_destination_for_ack(session: AckSession, expected: str) -> None:
    assert ack_destination(session) == expected
    _, destination = build_transactional_acknowledgment(0x4000, session, user_message=STORED)
    assert destination == expected


@pytest.mark.parametrize("address", ["192.0.2.10", "2001:db8::7"])
def test_direct_destination_on_the_wire(address: str) -> None:
    ack, destination = build_transactional_acknowledgment(
        0x00FF, AckSession(True, address, REMOTE_QM, SEQ, 3)
    )
    layout = encoded(ack, destination)
    assert (layout.user_flags() >> 10) & 0x7 == 0x7  # DQ: DirectQueueFormatName
    assert layout.queue_manager_address() == uuid.UUID(int=0)
    name = f"TCP:{address}\\PRIVATE$\\order_queue$\x00".encode("utf-16-le")
    field = layout.destination_field()
    assert struct.unpack_from("<H", field, 0)[0] == len(name)
    assert field[2 : 2 + len(name)] == name
    assert len(field) % 4 == 0


def test_private_destination_on_the_wire() -> None:
    ack, destination = build_transactional_acknowledgment(0x4000, ROUTED, user_message=STORED)
    layout = encoded(ack, destination)
    assert (layout.user_flags() >> 10) & 0x7 == 0x3  # DQ: PrivateQueueFormatNameId on destination
    assert layout.queue_manager_address() == REMOTE_QM  # UserHeader.QueueManagerAddress
    assert layout.destination_field() == struct.pack("<I", 4)  # order_queue$ identifier
    assert len(layout.raw) == 192  # packets.md §13 arithmetic


# ---- Open Queue and Enqueue Message To An Open Queue on a queue manager ---------------------


@pytest.fixture
def qm(tmp_path: Path) -> Iterator[QueueManager]:
    manager = QueueManager(tmp_path / "qm", computer_name="host1", threaded=False)
    yield manager
    manager.close()


def _outgoing(qm: QueueManager) -> dict[str, int]:
    return {
        str(q.destination_format_name): q.msg_count
        for q in qm.list_queues(include_system=True)
        if q.queue_type == QueueType.OUTGOING
    }


@pytest.mark.parametrize("session", [DIRECT, ROUTED], ids=["direct", "routed"])
def test_enqueued_to_the_outgoing_queue_of_destination(qm: QueueManager, session: AckSession) -> None:
    assert send_transactional_acknowledgment(qm, 0x8003, session, user_message=STORED)
    destination = ack_destination(session)
    assert _outgoing(qm) == {destination.casefold(): 1}
    stored = qm.peek(qm.open_queue(destination))
    assert stored.message_class == 0x8003
    assert stored.label == "QM Ordering Ack"
    assert stored.priority == 0 and stored.delivery == 1 and stored.body_type == 0
    assert stored.admin_queue == "" and stored.response_queue == ""
    assert _final_ack_fields(stored.body)[4:] == (SOURCE_QM, STORED.id_uniquifier)
    assert not stored.transactional


@pytest.mark.parametrize(
    "session",
    [
        AckSession(True, "0000000a.00a0c9123456"),  # DIRECT=SPX: this QM cannot open it
        AckSession(True, "mq01.example"),  # DestinationForAck stays empty
    ],
    ids=["spx", "empty"],
)
def test_discarded_when_open_queue_fails(
    qm: QueueManager, session: AckSession, caplog: pytest.LogCaptureFixture
) -> None:
    before = [(q.name, q.msg_count) for q in qm.list_queues(include_system=True)]
    with caplog.at_level(logging.WARNING, logger="openmsmq.transfer.acknowledgments"):
        assert not send_transactional_acknowledgment(qm, 0x4000, session, user_message=STORED)
    assert [(q.name, q.msg_count) for q in qm.list_queues(include_system=True)] == before
    assert any("Open Queue" in r.getMessage() for r in caplog.records)


def test_outgoing_final_ack_travels_as_the_final_ack_packet(qm: QueueManager) -> None:
    """The transfer's codec turns the enqueued acknowledgment into exactly the FinalAck
    packet of MS-MQQB 2.2.5, which the receiver classifies as a FinalAck."""
    assert send_transactional_acknowledgment(qm, 0x4000, DIRECT, user_message=STORED)
    destination = ack_destination(DIRECT)
    stored = qm.peek(qm.open_queue(destination))
    wire_name = direct_name(destination)
    assert wire_name is not None
    raw = packet_from_message(stored, wire_name, qm.guid).encode()
    expected = encode_transactional_acknowledgment(
        stored, destination, source_qm=qm.guid, sent_time=stored.sent_time, message_id=stored.id_uniquifier
    )
    assert raw == expected.encode()
    final = decode_packet(raw)
    assert isinstance(final, FinalAck)
    assert final.message_class == 0x4000
    assert final.body.acknowledged_message_id == ObjectId(SOURCE_QM, STORED.id_uniquifier)
