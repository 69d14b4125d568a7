"""Conversions between stored :class:`~openmsmq.store.records.Message` values and MS-MQQB
UserMessage packets, for the transfer between queue managers (:mod:`openmsmq.qm.transfer`).

Only DIRECT=TCP: destinations travel (``DirectQueueFormatName``, MS-MQMQ 2.2.18.1.5.2).
Admin and response queues travel when they are direct format names (UserHeader AQ / RQ
0x7), so that acknowledgments (MS-MQQB 3.1.7.15) find the sender's admin queue; other
forms are not carried (see docs/transfer.md, "Limits").
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

from openmsmq.errors import LocalProtocolError
from openmsmq.store.records import Message
from openmsmq.wire._fast import fast_constructor
from openmsmq.wire.headers import TransactionHeader
from openmsmq.wire.ids import TxSequenceId
from openmsmq.wire.packets import UserMessage
from openmsmq.wire.properties import MessagePropertiesHeader
from openmsmq.wire.userheader import DirectQueueFormatName, UserHeader

__all__ = ["direct_host", "direct_name", "message_from_packet", "packet_from_message", "split_direct"]


def direct_name(format_name: str) -> str | None:
    """``DIRECT=TCP:host\\PRIVATE$\\q`` → ``TCP:host\\PRIVATE$\\q`` (the wire form); None otherwise."""
    text = format_name.strip()
    if not text.upper().startswith("DIRECT="):
        return None
    rest = text[len("DIRECT=") :]
    if not rest.upper().startswith("TCP:"):
        return None
    return rest


def split_direct(wire_name: str) -> tuple[str, str] | None:
    """``TCP:host\\path`` → (host lower-cased, path); None when it is not a TCP direct name."""
    if not wire_name.upper().startswith("TCP:"):
        return None
    host, sep, path = wire_name[4:].partition("\\")
    if not sep or not host or not path:
        return None
    return host.lower(), path


def direct_host(format_name: str) -> str | None:
    """The host of a DIRECT=TCP: format name (lower-cased), or None."""
    wire = direct_name(format_name)
    if wire is None:
        return None
    parts = split_direct(wire)
    return parts[0] if parts else None


# Per-message conversions run once per transferred message on each side, so they build
# the frozen values with the wire package's fast constructors (all fields, in order,
# nothing re-validated) instead of UserMessage.build / Message(**fields): 7.4 -> ~2.5 us
# and 5.8 -> ~2 us. tests/transfer/test_codec.py checks them against the reference
# construction field by field.
_new_user_header = fast_constructor(UserHeader)
_new_properties = fast_constructor(MessagePropertiesHeader)
_new_tx = fast_constructor(TransactionHeader)
_new_user_message = fast_constructor(UserMessage)
_new_message = fast_constructor(Message)
#: Message fields in declaration order with their defaults (a field added later with a
#: default keeps working: it takes its default here).
_MESSAGE_DEFAULTS: list[Any] = [f.default for f in dataclasses.fields(Message)]
_MI = {f.name: i for i, f in enumerate(dataclasses.fields(Message))}
_NULL_CORRELATION = bytes(20)
_I_BODY = _MI["body"]
_I_LABEL = _MI["label"]
_I_PRIORITY = _MI["priority"]
_I_MESSAGE_CLASS = _MI["message_class"]
_I_BODY_TYPE = _MI["body_type"]
_I_CORRELATION_ID = _MI["correlation_id"]
_I_APP_SPECIFIC = _MI["app_specific"]
_I_DELIVERY = _MI["delivery"]
_I_TIME_TO_REACH_QUEUE = _MI["time_to_reach_queue"]
_I_TIME_TO_BE_RECEIVED = _MI["time_to_be_received"]
_I_ACK_FLAGS = _MI["ack_flags"]
_I_POSITIVE_JOURNALING = _MI["positive_journaling"]
_I_NEGATIVE_JOURNALING = _MI["negative_journaling"]
_I_TRACING = _MI["tracing"]
_I_HOP_COUNT = _MI["hop_count"]
_I_ID_LINEAGE = _MI["id_lineage"]
_I_ID_UNIQUIFIER = _MI["id_uniquifier"]
_I_SENT_TIME = _MI["sent_time"]
_I_DESTINATION_QUEUE = _MI["destination_queue"]
_I_DESTINATION_QM = _MI["destination_qm"]
_I_SOURCE_MACHINE = _MI["source_machine"]
_I_FINAL_ACK_REQUIRED = _MI["final_ack_required"]
_I_ADMIN_QUEUE = _MI["admin_queue"]
_I_RESPONSE_QUEUE = _MI["response_queue"]
_I_TRANSACTIONAL = _MI["transactional"]
_I_TX_SEQUENCE_ID = _MI["tx_sequence_id"]
_I_TX_SEQUENCE_NUMBER = _MI["tx_sequence_number"]
_I_TX_PREVIOUS_SEQUENCE_NUMBER = _MI["tx_previous_sequence_number"]
_I_FIRST_IN_TRANSACTION = _MI["first_in_transaction"]
_I_LAST_IN_TRANSACTION = _MI["last_in_transaction"]


#: (value, object) of the last TxSequenceId built: one reference, so threads never see
#: a value paired with another value's object.
_last_sequence: tuple[int, TxSequenceId] = (0, TxSequenceId(0, 0))


def _sequence_id(value: int) -> TxSequenceId:
    """TxSequenceId.from_int, reusing the last value (consecutive messages share it)."""
    global _last_sequence
    last = _last_sequence
    if last[0] != value:
        last = _last_sequence = (value, TxSequenceId.from_int(value))
    return last[1]


def packet_from_message(
    m: Message,
    destination: str | DirectQueueFormatName,
    source_qm: uuid.UUID,
    previous_tx_sequence_number: int | None = None,
) -> UserMessage:
    """The UserMessage for a message of an outgoing queue (``destination`` is the wire
    direct name, or its :class:`DirectQueueFormatName` to share one per queue).
    ``previous_tx_sequence_number`` overrides the stored value on a resend that bridges
    removed messages (MS-MQQB 3.1.7.1.3).

    Equal to ``UserMessage.build(...)`` with the fields below; values outside their wire
    ranges raise :class:`LocalProtocolError` as ``build`` does."""
    dest = destination
    if not isinstance(dest, DirectQueueFormatName):
        dest = DirectQueueFormatName(dest)
    transaction = None
    if m.transactional and m.tx_sequence_number:
        prev = previous_tx_sequence_number
        if prev is None:
            prev = m.tx_previous_sequence_number
        flags = (m.final_ack_required << 1) | (m.first_in_transaction << 2) | (m.last_in_transaction << 3)
        # _sequence_id inlined: consecutive messages share their TxSequenceId.
        last = _last_sequence
        sequence_id = last[1] if last[0] == m.tx_sequence_id else _sequence_id(m.tx_sequence_id)
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
        m.destination_qm,
        m.sent_time & 0xFFFFFFFF,
        m.id_uniquifier & 0xFFFFFFFF,
        dest,
        _direct_queue(m.admin_queue) if m.admin_queue else None,
        _direct_queue(m.response_queue) if m.response_queue else None,
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
        m.body_type, m.app_specific, 0, 0, 0, b"", b"",
    )  # fmt: skip
    return _new_user_message(user, props, transaction, None, None, None, None, None, b"", priority,
                             m.time_to_reach_queue, 0)  # fmt: skip


def _direct_queue(format_name: str) -> DirectQueueFormatName | None:
    """A DIRECT= admin / response queue name as its UserHeader form; None for other forms."""
    if format_name[:7].upper() != "DIRECT=":
        return None
    return DirectQueueFormatName(format_name[7:])


def _direct_text(q: object) -> str:
    return "DIRECT=" + q.name if isinstance(q, DirectQueueFormatName) else ""


def message_from_packet(p: UserMessage, destination_format_name: str) -> Message:
    """The message to store at the final destination, as sent: Identifier, SentTime and
    the transactional sequence fields are kept (the QM assigns LookupIdentifier and
    ArrivedTime)."""
    user = p.user
    props = p.properties
    tx = p.transaction
    uflags = user.flags
    v = _MESSAGE_DEFAULTS.copy()
    v[_I_BODY] = props.body
    v[_I_LABEL] = props.label or ""
    v[_I_PRIORITY] = p.base_flags & 0x7
    v[_I_MESSAGE_CLASS] = props.message_class
    v[_I_BODY_TYPE] = props.body_type
    v[_I_CORRELATION_ID] = props.correlation_id
    v[_I_APP_SPECIFIC] = props.application_tag
    v[_I_DELIVERY] = (uflags >> 5) & 0x3
    v[_I_TIME_TO_REACH_QUEUE] = p.time_to_reach_queue
    v[_I_TIME_TO_BE_RECEIVED] = user.time_to_be_received
    v[_I_ACK_FLAGS] = props.ack_flags
    # "!= 0" rather than bool(): no call on this per-message path
    v[_I_POSITIVE_JOURNALING] = uflags & 0x200 != 0
    v[_I_NEGATIVE_JOURNALING] = uflags & 0x100 != 0
    v[_I_TRACING] = p.base_flags & 0x100 != 0
    v[_I_HOP_COUNT] = uflags & 0x1F
    v[_I_ID_LINEAGE] = user.source_queue_manager
    v[_I_ID_UNIQUIFIER] = user.message_id
    v[_I_SENT_TIME] = user.sent_time
    v[_I_DESTINATION_QUEUE] = destination_format_name
    v[_I_DESTINATION_QM] = user.queue_manager_address
    v[_I_SOURCE_MACHINE] = user.source_queue_manager
    if user.admin_queue is not None:
        v[_I_ADMIN_QUEUE] = _direct_text(user.admin_queue)
    if user.response_queue is not None:
        v[_I_RESPONSE_QUEUE] = _direct_text(user.response_queue)
    if tx is not None:
        tflags = tx.flags
        seq = tx.tx_sequence_id
        v[_I_FINAL_ACK_REQUIRED] = tflags & 0x2 != 0
        v[_I_TRANSACTIONAL] = True
        v[_I_TX_SEQUENCE_ID] = (seq.timestamp << 32) | seq.ordinal  # TxSequenceId.value, inlined
        v[_I_TX_SEQUENCE_NUMBER] = tx.tx_sequence_number
        v[_I_TX_PREVIOUS_SEQUENCE_NUMBER] = tx.previous_tx_sequence_number
        v[_I_FIRST_IN_TRANSACTION] = tflags & 0x4 != 0
        v[_I_LAST_IN_TRANSACTION] = tflags & 0x8 != 0
    message: Message = _new_message(*v)
    return message
