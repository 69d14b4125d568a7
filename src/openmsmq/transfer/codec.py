"""Conversions between stored :class:`~openmsmq.store.records.MessageRecord` values and MS-MQQB
UserMessage packets, for the transfer between queue managers (:mod:`openmsmq.transfer.engine`).

DIRECT=TCP: and DIRECT=OS: destinations travel (``DirectQueueFormatName``, MS-MQMQ
2.2.18.1.5.2), and ``PRIVATE=<guid>\\n`` ones (``PrivateQueueFormatNameId`` with the GUID
as QueueManagerAddress, MS-MQMQ 2.2.18.1.5.1): the routed FinalAcks of MS-MQQB 3.1.7.17.
Admin and response queues travel as direct names (UserHeader AQ / RQ 0x7) or as
``PRIVATE=<guid>\\n`` names (0x6), so that acknowledgments (MS-MQQB 3.1.7.15) find the
sender's admin queue; the send path refuses other forms for remote queues (see
docs/transfer.md, "Limits").
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from openmsmq.errors import HResult, LocalProtocolError, MQError
from openmsmq.store.props import (
    CORRELATION,
    GFLAGS_AT,
    GUIDS_END,
    LENGTHS_AT,
    RARE,
    RARE_LENGTHS,
    STRINGS_AT,
    ZERO_CORRELATION,
    ZERO_GUID,
    guid_block,
    guid_blocks,
    split_guids,
)
from openmsmq.store.records import (
    BODY_COPY_MAX,
    GUID_BYTES,
    INFINITE,
    PROPS,
    MessageRecord,
    guid_bytes_of,
    message_to_row,
)
from openmsmq.wire.constants import MAX_PACKET_SIZE, QueueFormatType
from openmsmq.wire.fast import fast_constructor
from openmsmq.wire.headers import TransactionHeader
from openmsmq.wire.ids import TxSequenceId
from openmsmq.wire.message import encode_direct_transactional
from openmsmq.wire.packets import UserMessage
from openmsmq.wire.properties import MessagePropertiesHeader, cached_label_wire, label_wire
from openmsmq.wire.remote_names import wire_queue
from openmsmq.wire.userheader import (
    DirectQueueFormatName,
    PrivateQueueFormatName,
    PrivateQueueFormatNameId,
    PublicQueueFormatName,
    UserHeader,
    direct_queue_wire,
)

__all__ = [
    "RowEncoder",
    "arrival_rows",
    "direct_host",
    "direct_name",
    "may_exceed_packet",
    "message_from_packet",
    "outgoing_fields",
    "packet_from_message",
    "row_encoder",
    "sequence_id_of",
    "split_direct",
]


def direct_name(format_name: str) -> str | None:
    """``DIRECT=TCP:host\\PRIVATE$\\q`` → ``TCP:host\\PRIVATE$\\q`` (the wire form), and the
    same for ``DIRECT=OS:computer\\...`` (the computer's name, resolved to an address by a
    route or DNS, MS-MQMQ 2.1.2); None otherwise."""
    text = format_name.strip()
    if not text.upper().startswith("DIRECT="):
        return None
    rest = text[len("DIRECT=") :]
    if split_direct(rest) is None:
        return None
    return rest


def split_direct(wire_name: str) -> tuple[str, str] | None:
    """``TCP:host\\path`` or ``OS:computer\\path`` → (host lower-cased, path); None for
    any other name (the other DIRECT= protocols do not travel over TCP here)."""
    head = wire_name[:4].upper()
    if head == "TCP:":
        rest = wire_name[4:]
    elif head[:3] == "OS:":
        rest = wire_name[3:]
    else:
        return None
    host, sep, path = rest.partition("\\")
    if not sep or not host or not path:
        return None
    return host.lower(), path


def direct_host(format_name: str) -> str | None:
    """The host of a DIRECT=TCP: / DIRECT=OS: format name (lower-cased), or None."""
    wire = direct_name(format_name)
    if wire is None:
        return None
    parts = split_direct(wire)
    return parts[0] if parts else None


# Per-message conversions run once per transferred message on each side, so they build
# the frozen values with the wire package's fast constructors (all fields, in order,
# nothing re-validated) instead of UserMessage.build / Message(**fields), several times
# cheaper. tests/transfer/test_codec.py checks them against the reference construction
# field by field.
_new_user_header = fast_constructor(UserHeader)
_new_properties = fast_constructor(
    MessagePropertiesHeader,
    fields=("message_class", "body", "allocation_body_size", "label", "ack_flags", "correlation_id",
            "body_type", "application_tag"),
)  # fmt: skip
_new_tx = fast_constructor(TransactionHeader)
_new_user_message = fast_constructor(
    UserMessage, fields=("user", "properties", "transaction", "base_flags", "time_to_reach_queue")
)
_NULL_CORRELATION = bytes(20)


#: (value, object) of the last TxSequenceId built: one reference, so threads never see
#: a value paired with another value's object.
_last_sequence: tuple[int, TxSequenceId] = (0, TxSequenceId(0, 0))


def sequence_id_of(value: int) -> TxSequenceId:
    """TxSequenceId.from_int, reusing the last value (consecutive messages share it)."""
    global _last_sequence
    last = _last_sequence
    if last[0] != value:
        last = _last_sequence = (value, TxSequenceId.from_int(value))
    return last[1]


def packet_from_message(
    m: MessageRecord,
    destination: str | DirectQueueFormatName | PrivateQueueFormatNameId,
    source_qm: uuid.UUID,
    previous_tx_sequence_number: int | None = None,
    destination_qm: uuid.UUID | None = None,
) -> UserMessage:
    """The UserMessage for a message of an outgoing queue (``destination`` is the wire
    direct name, or its :class:`DirectQueueFormatName` to share one per queue, or the
    PrivateQueueFormatNameId of a ``PRIVATE=<guid>\\n`` name, whose GUID is then
    ``destination_qm``: the UserHeader's QueueManagerAddress).
    ``previous_tx_sequence_number`` overrides the stored value on a resend that bridges
    removed messages (MS-MQQB 3.1.7.1.3).

    Equal to ``UserMessage.build(...)`` with the fields below; values outside their wire
    ranges raise :class:`LocalProtocolError` as ``build`` does."""
    dest = destination
    if isinstance(dest, str):
        dest = DirectQueueFormatName(dest)
    transaction = None
    if m.transactional and m.tx_sequence_number:
        prev = previous_tx_sequence_number
        if prev is None:
            prev = m.tx_previous_sequence_number
        flags = (m.final_ack_required << 1) | (m.first_in_transaction << 2) | (m.last_in_transaction << 3)
        # sequence_id_of inlined: consecutive messages share their TxSequenceId.
        last = _last_sequence
        sequence_id = last[1] if last[0] == m.tx_sequence_id else sequence_id_of(m.tx_sequence_id)
        transaction = _new_tx(sequence_id, m.tx_sequence_number, prev, flags, None)
        priority = 0
        delivery = 1
    else:
        priority = m.priority
        delivery = m.delivery
    hops = m.hop_count
    if not 0 <= priority <= 7 or not 0 <= hops <= 0x1F or not 0 <= delivery <= 3:
        raise LocalProtocolError(f"message {m.lookup_id}: priority, hop count or delivery out of range")
    lineage = m.id_lineage
    user = _new_user_header(
        lineage if lineage.int else source_qm,  # UUID.int: no Python-level UUID.__eq__ call
        m.destination_qm if destination_qm is None else destination_qm,
        m.sent_time & 0xFFFFFFFF,
        m.id_uniquifier & 0xFFFFFFFF,
        dest,
        wire_queue(m.admin_queue) if m.admin_queue else None,
        wire_queue(m.response_queue) if m.response_queue else None,
        m.time_to_be_received,
        hops | (delivery << 5) | (m.negative_journaling << 8) | (m.positive_journaling << 9),
        None,
    )
    body = m.body
    correlation = m.correlation_id
    if len(correlation) != 20:
        correlation = _NULL_CORRELATION
    props = _new_properties(
        m.message_class, body, len(body), m.label or None, m.ack_flags, correlation,
        m.body_type, m.app_specific,
    )  # fmt: skip
    return _new_user_message(user, props, transaction, priority, m.time_to_reach_queue)


# -- straight from the stored row ---------------------------------------------------------
#
# A transactional message of an outgoing queue goes out as the UserMessage that
# packet_from_message(message_from_row(row), ...).encode() gives; for the usual row (no
# admin / response queue, hop count in range) its fields map 1:1 onto the packet's, so the
# sender encodes the row's values directly, without the Message and the five packet values
# per message (tests/transfer/test_codec.py checks the bytes against that reference).

#: The row's ``props`` head (openmsmq.store.props.HEAD).
assert PROPS.format == "<IIBIIIBHIqHB"
_unpack_row_props = PROPS.unpack_from
_unpack_rare = RARE_LENGTHS.unpack_from
#: (TimeToReachQueue, TimeToBeReceived, bits: JP 1, JN 2, tracing 4, FA 8; Identifier
#: uniquifier, SentTime) at their offsets in props.
_unpack_outgoing = struct.Struct("<9xII4xBxxIq").unpack_from
_U64 = 1 << 64

#: props bytes 9..16: TimeToReachQueue and TimeToBeReceived, both INFINITE for a message
#: that never expires (the usual one: one slice comparison then).
_NEVER_EXPIRES = b"\xff" * 8
assert PROPS.format[:11] == "<IIBIIIBHIq"


def row_expire_at(row: Sequence[Any]) -> int | None:
    """When a stored message of an outgoing queue expires (s since 1970): SentTime plus
    the shorter of TimeToReachQueue and TimeToBeReceived, as the QM's expiry pass counts
    it (``QueueManager._send_record``); None when it never does."""
    props = row[11]
    if props[9:17] == _NEVER_EXPIRES:
        return None
    ttrq: int
    ttbr: int
    sent: int
    ttrq, ttbr, _bits, _uniquifier, sent = _unpack_outgoing(props)
    return sent + min(ttrq, ttbr)  # INFINITE is the largest value: the other one wins


def message_expire_at(m: MessageRecord) -> int | None:
    """:func:`row_expire_at` of a :class:`MessageRecord`."""
    ttl = min(m.time_to_reach_queue, m.time_to_be_received)
    return None if ttl == INFINITE else m.sent_time + ttl


#: ``encode(row, previous_tx_sequence_number)`` -> the packet's bytes, or None when the
#: row needs the general path (:func:`packet_from_message`).
RowEncoder = Callable[[Sequence[Any], int], "bytes | None"]


def outgoing_fields(row: Sequence[Any]) -> tuple[int, int, int, int, int, bool, int]:
    """(LookupIdentifier, TxSequenceID value, TxSequenceNumber, PreviousTxSequenceNumber,
    Identifier uniquifier, FinalAck wanted: FA, JP or JN, expiry: :func:`row_expire_at`
    or a time beyond any clock when it never expires) of a stored transactional row,
    without building its :class:`MessageRecord` (one unpack of its props)."""
    ttrq, ttbr, bits, uniquifier, sent = _unpack_outgoing(row[11])
    sequence_id = row[4]
    return (
        row[0],
        sequence_id + _U64 if sequence_id < 0 else sequence_id,  # records.from_i64
        row[5],
        row[6],
        uniquifier,
        bits & 0xB != 0,  # FA (8), JN (2), JP (1)
        # INFINITE is the largest u32: the other one wins; both INFINITE: ~136 years on.
        sent + (ttrq if ttrq < ttbr else ttbr),
    )


def row_encoder(
    destination: DirectQueueFormatName | PrivateQueueFormatNameId, source_qm: uuid.UUID
) -> RowEncoder:
    """An encoder of the stored rows of one outgoing queue (``destination``, its wire
    direct name) sent by the QM ``source_qm``: ``encode(row, previous)`` returns the bytes
    of ``packet_from_message(message_from_row(row), destination, source_qm,
    previous).encode()`` for a transactional row of the usual shape, None for any other
    row (not transactional, an admin or response queue, a hop count or value out of its
    wire range, a packet too large): the caller then takes the general path, which
    converts it or raises its usual error. A private destination takes the general path
    for every row."""
    if not isinstance(destination, DirectQueueFormatName):
        return _general_path
    direct_wire = direct_queue_wire(destination)
    source_le = source_qm.bytes_le
    # props' gflags and GUIDs -> the wire bytes of the lineage and the destination QM.
    guids: dict[bytes, tuple[bytes, bytes]] = {}

    def encode(row: Sequence[Any], previous: int) -> bytes | None:
        (_lid, _pri, message_class, transactional, sequence_id, number, _prev, tx_flags, _arr, _ack, _size,
         props, body) = row  # fmt: skip
        if not (transactional and number):
            return None
        (body_type, app_specific, _delivery, ttrq, ttbr, ack_flags, bits, hops, uniquifier, sent_time,
         _n_dest, g,
         ) = _unpack_row_props(props)  # fmt: skip
        n_label = 0
        if g & RARE:
            n_label, n_admin, n_response, _n_ext, _n_sender = _unpack_rare(props, LENGTHS_AT[g & 7])
            if n_admin or n_response:
                return None
        if hops > 0x1F:
            return None
        end = GUIDS_END[g & 3]
        key = props[GFLAGS_AT:end]  # gflags and the GUIDs
        if key.__class__ is not bytes:  # a row not read from SQLite (a bytearray props)
            key = bytes(key)
        wire = guids.get(key)
        if wire is None:
            lineage, dest_qm, _source = split_guids(key)
            # Identifier lineage, or this QM when none (packet_from_message: lineage.int).
            src = source_le if lineage == ZERO_GUID else uuid.UUID(bytes=lineage).bytes_le
            wire = (src, uuid.UUID(bytes=dest_qm).bytes_le)
            if len(guids) >= 64:
                guids.clear()
            guids[key] = wire
        correlation = props[end : end + 20] if g & CORRELATION else ZERO_CORRELATION
        raw_label = b""
        if n_label:
            at = STRINGS_AT[g & 15]
            label = props[at : at + n_label].decode()
            raw_label = cached_label_wire(label) or label_wire(label)
        try:
            return encode_direct_transactional(
                ttrq, wire[0], wire[1], ttbr, sent_time & 0xFFFFFFFF, uniquifier,
                # Flags: hop count, DM = recoverable (1: every transactional message), JN, JP.
                hops | 0x20 | (bits & 2) << 7 | (bits & 1) << 9,
                direct_wire,
                # TransactionHeader.Flags: FA (bits 8), FirstInTransaction, LastInTransaction.
                (bits & 8) >> 2 | (tx_flags & 1) << 2 | (tx_flags & 2) << 2,
                sequence_id + _U64 if sequence_id < 0 else sequence_id,
                number, previous, ack_flags, raw_label, message_class, correlation, body_type,
                app_specific, body,
            )  # fmt: skip
        except (struct.error, LocalProtocolError):
            return None

    return encode


def _general_path(row: Sequence[Any], previous: int) -> None:
    """The :data:`RowEncoder` that sends every row through :func:`packet_from_message`."""
    return None


#: More than the fixed headers, SessionHeader and padding of a UserMessage take.
_HEADERS_BOUND = 4096


def may_exceed_packet(m: MessageRecord, destination: str) -> bool:
    """Whether ``m``'s packet to ``destination`` might exceed the 4 MiB PacketSize limit
    (an upper bound of its size does): only then is encoding it a check worth its cost."""
    names = len(m.admin_queue) + len(m.response_queue) + len(destination)
    return m.size + 2 * names + _HEADERS_BOUND > MAX_PACKET_SIZE


def _queue_text(q: object, user: UserHeader, admin: object) -> str:
    """The format name of a received admin / response queue field (its type: MS-MQMQ
    2.2.19.2 AQ / RQ); "" for SAME_AS_ADMIN (type 0x1) and anything unknown."""
    if isinstance(q, DirectQueueFormatName):
        return "DIRECT=" + q.name
    if isinstance(q, PrivateQueueFormatName):
        return f"PRIVATE={q.queue_manager_guid}\\{q.identifier:08x}"
    if isinstance(q, PrivateQueueFormatNameId):
        if q.kind == QueueFormatType.PRIVATE_ON_SOURCE:
            qm = user.source_queue_manager
        elif q.kind == QueueFormatType.PRIVATE_ON_DESTINATION:
            qm = user.queue_manager_address
        elif isinstance(admin, PrivateQueueFormatName):  # RQ 0x4: on the admin queue's QM
            qm = admin.queue_manager_guid
        elif isinstance(admin, PrivateQueueFormatNameId):
            on_source = admin.kind == QueueFormatType.PRIVATE_ON_SOURCE
            qm = user.source_queue_manager if on_source else user.queue_manager_address
        else:
            return ""
        return f"PRIVATE={qm}\\{q.identifier:08x}"
    if isinstance(q, PublicQueueFormatName):
        return f"PUBLIC={q.queue_guid}"
    return ""


#: The Message fields a received UserMessage sets, in the argument order of
#: :data:`_new_received`; every other field takes its declared default.
_RECEIVED_FIELDS = (
    "body", "label", "priority", "message_class", "body_type", "correlation_id", "app_specific",
    "delivery", "time_to_reach_queue", "time_to_be_received", "ack_flags", "positive_journaling",
    "negative_journaling", "tracing", "hop_count", "id_lineage", "id_uniquifier", "sent_time",
    "destination_queue", "destination_qm", "source_machine", "admin_queue", "response_queue",
    "final_ack_required", "transactional", "tx_sequence_id", "tx_sequence_number",
    "tx_previous_sequence_number", "first_in_transaction", "last_in_transaction",
)  # fmt: skip
_new_received = fast_constructor(MessageRecord, fields=_RECEIVED_FIELDS)
_D_ADMIN_QUEUE = MessageRecord.__dataclass_fields__["admin_queue"].default
_D_RESPONSE_QUEUE = MessageRecord.__dataclass_fields__["response_queue"].default


def message_from_packet(p: UserMessage, destination_format_name: str) -> MessageRecord:
    """The message to store at the final destination, as sent: Identifier, SentTime and
    the transactional sequence fields are kept (the QM assigns LookupIdentifier and
    ArrivedTime)."""
    user = p.user
    props = p.properties
    tx = p.transaction
    uflags = user.flags
    bflags = p.base_flags
    admin = user.admin_queue
    response = user.response_queue
    if tx is None:
        final_ack = transactional = first = last = False
        sequence_id = number = previous = 0
    else:
        tflags = tx.flags
        seq = tx.tx_sequence_id
        final_ack = tflags & 0x2 != 0  # "!= 0" rather than bool(): no call per message
        transactional = True
        sequence_id = (seq.timestamp << 32) | seq.ordinal  # TxSequenceId.value, inlined
        number = tx.tx_sequence_number
        previous = tx.previous_tx_sequence_number
        first = tflags & 0x4 != 0
        last = tflags & 0x8 != 0
    message: MessageRecord = _new_received(
        props.body, props.label or "", bflags & 0x7, props.message_class, props.body_type,
        props.correlation_id, props.application_tag, (uflags >> 5) & 0x3, p.time_to_reach_queue,
        user.time_to_be_received, props.ack_flags, uflags & 0x200 != 0, uflags & 0x100 != 0,
        bflags & 0x100 != 0, uflags & 0x1F, user.source_queue_manager, user.message_id, user.sent_time,
        destination_format_name, user.queue_manager_address, user.source_queue_manager,
        _D_ADMIN_QUEUE if admin is None else _queue_text(admin, user, None),
        _D_RESPONSE_QUEUE if response is None else _queue_text(response, user, admin),
        final_ack, transactional, sequence_id, number, previous, first, last,
    )  # fmt: skip
    return message


_D_LOOKUP_ID = MessageRecord.__dataclass_fields__["lookup_id"].default
_D_ARRIVED_TIME = MessageRecord.__dataclass_fields__["arrived_time"].default
_pack_props = PROPS.pack
_join_bytearray = bytearray().join


def arrival_rows(packets: Sequence[UserMessage], destination_format_name: str) -> list[list[Any]]:
    """The store rows of received UserMessages, exactly
    ``message_to_row(message_from_packet(p, destination_format_name))`` for each packet,
    without the intermediate :class:`MessageRecord` (45 fields) for the shape every transfer
    message has: transactional, no Label, no admin or response queue, a 20-byte
    CorrelationId. Any other packet takes that reference path. Raises :class:`MQError`
    as :func:`~openmsmq.store.records.message_to_row` does (a property out of range).

    The row layout is :data:`openmsmq.store.records.ROW_COLUMNS` (``props`` packed with
    :data:`~openmsmq.store.records.PROPS`); ``tests/transfer/test_codec.py`` checks the two
    paths give equal rows on generated packets."""
    dest = destination_format_name.encode()
    dest_len = len(dest)
    gb = GUID_BYTES
    blocks = guid_blocks
    rows: list[list[Any]] = []
    append = rows.append
    for p in packets:
        user = p.user
        props = p.properties
        tx = p.transaction
        corr = props.correlation_id
        if (
            tx is None
            or props.label
            or user.admin_queue is not None
            or user.response_queue is not None
            or len(corr) != 20
        ):
            append(message_to_row(message_from_packet(p, destination_format_name)))
            continue
        uflags = user.flags
        bflags = p.base_flags
        tflags = tx.flags
        lineage = user.source_queue_manager
        lineage_bytes = gb.get(lineage.int) or guid_bytes_of(lineage)
        qm = user.queue_manager_address
        # Message bits as message_to_row packs them: PositiveJournaling (UserHeader.Flags
        # JP, 0x200), NegativeJournaling (JN, 0x100), Trace (BaseHeader.Flags TR, 0x100),
        # FinalAck required (TransactionHeader.Flags FA, 0x2).
        bits = (uflags >> 9 & 1) | (uflags >> 7 & 2) | (bflags >> 6 & 4) | (tflags << 2 & 8)
        ack_flags = props.ack_flags
        qm_bytes = gb.get(qm.int) or guid_bytes_of(qm)
        # props' GUIDs (openmsmq.store.props): the source QM is the lineage here.
        g, guids = blocks.get((lineage_bytes, qm_bytes, lineage_bytes)) or guid_block(
            lineage_bytes, qm_bytes, lineage_bytes
        )
        if corr != ZERO_CORRELATION:
            g |= CORRELATION
            guids += corr
        try:
            head = _pack_props(
                props.body_type, props.application_tag, (uflags >> 5) & 0x3, p.time_to_reach_queue,
                user.time_to_be_received, ack_flags, bits, uflags & 0x1F, user.message_id,
                user.sent_time, dest_len, g,
            )  # fmt: skip
        except struct.error as exc:
            raise MQError(
                HResult.MQ_ERROR_ILLEGAL_PROPERTY_VALUE, f"message property out of range: {exc}"
            ) from exc
        seq = tx.tx_sequence_id
        seq_id = (seq.timestamp << 32) | seq.ordinal  # TxSequenceId.value, inlined
        body: bytes | bytearray = props.body
        if len(body) <= BODY_COPY_MAX:
            # Bound as a bytearray, as message_to_row binds it: sqlite3 sends bytes through
            # its adapter lookup, a bytearray straight (cheaper per inserted row).
            body = bytearray(body)
        append([
            _D_LOOKUP_ID, bflags & 0x7, props.message_class, 1,
            seq_id - (1 << 64) if seq_id >= (1 << 63) else seq_id,  # to_i64
            tx.tx_sequence_number, tx.previous_tx_sequence_number,
            (tflags >> 2) & 0x3,  # first (TransactionHeader.Flags 0x4) | last (0x8) << 1
            _D_ARRIVED_TIME, 1 if bits or ack_flags else 0,
            len(body),  # Message.size: no Label, no extension
            _join_bytearray((head, guids, dest)), body,
        ])  # fmt: skip
    return rows
