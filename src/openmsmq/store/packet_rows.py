"""The stored row of a message straight to and from MS-MQQB UserMessage bytes, for the
usual transactional message: the fast paths of the transfer, kept here with the row
layout they read and write (:mod:`openmsmq.store.props`, :data:`~openmsmq.store.records.PROPS`).

Each is exactly its general path for every row or packet it takes and declines the rest
(``tests/transfer/test_codec.py`` checks both against the reference conversions on
generated messages):

* :func:`row_encoder`: ``packet_from_message(message_from_row(row), ...).encode()``;
* :func:`arrival_rows`: ``message_to_row(message_from_packet(p, destination))``.
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
    PROPS,
    MessageRecord,
    guid_bytes_of,
    message_to_row,
)
from openmsmq.wire.message import encode_direct_transactional
from openmsmq.wire.packets import UserMessage
from openmsmq.wire.properties import cached_label_wire, label_wire
from openmsmq.wire.userheader import DirectQueueFormatName, PrivateQueueFormatNameId, direct_queue_wire

__all__ = ["RowEncoder", "arrival_rows", "row_encoder"]

# A transactional message of an outgoing queue goes out as the UserMessage that
# packet_from_message(message_from_row(row), ...).encode() gives; for the usual row (no
# admin / response queue, hop count in range) its fields map 1:1 onto the packet's, so the
# sender encodes the row's values directly, without the Message and the five packet values
# per message (tests/transfer/test_codec.py checks the bytes against that reference).

#: The row's ``props`` head (openmsmq.store.props.HEAD).
assert PROPS.format == "<IIBIIIBHIqHB"
_unpack_row_props = PROPS.unpack_from
_unpack_rare = RARE_LENGTHS.unpack_from
_U64 = 1 << 64


#: ``encode(row, previous_tx_sequence_number)`` -> the packet's bytes, or None when the
#: row needs the general path (:func:`packet_from_message`).
RowEncoder = Callable[[Sequence[Any], int], "bytes | None"]


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


_D_LOOKUP_ID = MessageRecord.__dataclass_fields__["lookup_id"].default
_D_ARRIVED_TIME = MessageRecord.__dataclass_fields__["arrived_time"].default
_pack_props = PROPS.pack
_join_bytearray = bytearray().join


def arrival_rows(
    packets: Sequence[UserMessage],
    destination_format_name: str,
    general: Callable[[UserMessage, str], MessageRecord],
) -> list[list[Any]]:
    """The store rows of received UserMessages, exactly
    ``message_to_row(message_from_packet(p, destination_format_name))`` for each packet,
    without the intermediate :class:`Message` (45 fields) for the shape every transfer
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
    # The GUID block of the previous packet's (lineage, QM) objects: a run of one sequence
    # shares both (the decoder memoises GUIDs), so the block is looked up once per run.
    last_lineage: object = None
    last_qm: object = None
    block: tuple[int, bytes] = (0, b"")
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
            or (corr != ZERO_CORRELATION and len(corr) != 20)  # the zero id is 20 bytes
        ):
            append(message_to_row(general(p, destination_format_name)))
            continue
        uflags = user.flags
        bflags = p.base_flags
        tflags = tx.flags
        lineage = user.source_queue_manager
        qm = user.queue_manager_address
        # Message bits as message_to_row packs them: PositiveJournaling (UserHeader.Flags
        # JP, 0x200), NegativeJournaling (JN, 0x100), Trace (BaseHeader.Flags TR, 0x100),
        # FinalAck required (TransactionHeader.Flags FA, 0x2).
        bits = (uflags >> 9 & 1) | (uflags >> 7 & 2) | (bflags >> 6 & 4) | (tflags << 2 & 8)
        ack_flags = props.ack_flags
        if lineage is not last_lineage or qm is not last_qm:
            lineage_bytes = gb.get(lineage.int) or guid_bytes_of(lineage)
            qm_bytes = gb.get(qm.int) or guid_bytes_of(qm)
            # props' GUIDs (openmsmq.store.props): the source QM is the lineage here.
            block = blocks.get((lineage_bytes, qm_bytes, lineage_bytes)) or guid_block(
                lineage_bytes, qm_bytes, lineage_bytes
            )
            last_lineage, last_qm = lineage, qm
        g, guids = block
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
        size = len(body)
        if size <= BODY_COPY_MAX:
            # Bound as a bytearray, as message_to_row binds it: sqlite3 sends bytes through
            # its adapter lookup, a bytearray straight (cheaper per inserted row).
            body = bytearray(body)
        append([
            _D_LOOKUP_ID, bflags & 0x7, props.message_class, 1,
            seq_id - (1 << 64) if seq_id >= (1 << 63) else seq_id,  # to_i64
            tx.tx_sequence_number, tx.previous_tx_sequence_number,
            (tflags >> 2) & 0x3,  # first (TransactionHeader.Flags 0x4) | last (0x8) << 1
            _D_ARRIVED_TIME, 1 if bits or ack_flags else 0,
            size,  # Message.size: no Label, no extension
            _join_bytearray((head, guids, dest)), body,
        ])  # fmt: skip
    return rows
