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

import uuid
from functools import partial

from openmsmq.errors import LocalProtocolError
from openmsmq.store import packet_rows
from openmsmq.store.records import (
    INFINITE,
    MessageRecord,
)
from openmsmq.wire.constants import MAX_PACKET_SIZE, QueueFormatType
from openmsmq.wire.fast import fast_constructor
from openmsmq.wire.headers import TransactionHeader
from openmsmq.wire.ids import TxSequenceId
from openmsmq.wire.packets import UserMessage
from openmsmq.wire.properties import MessagePropertiesHeader
from openmsmq.wire.remote_names import wire_queue
from openmsmq.wire.userheader import (
    DirectQueueFormatName,
    PrivateQueueFormatName,
    PrivateQueueFormatNameId,
    PublicQueueFormatName,
    UserHeader,
)

__all__ = [
    "arrival_rows",
    "direct_host",
    "direct_name",
    "may_exceed_packet",
    "message_from_packet",
    "packet_from_message",
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


def message_expire_at(m: MessageRecord) -> int | None:
    """:func:`row_expire_at` of a :class:`MessageRecord`."""
    ttl = min(m.time_to_reach_queue, m.time_to_be_received)
    return None if ttl == INFINITE else m.sent_time + ttl


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


#: The store rows of received UserMessages for ``destination_format_name``: exactly
#: ``message_to_row(message_from_packet(p, destination_format_name))`` for each packet
#: (:func:`openmsmq.store.packet_rows.arrival_rows`, the store's fast path for the usual
#: transactional packet; every other packet takes :func:`message_from_packet`).
arrival_rows = partial(packet_rows.arrival_rows, general=message_from_packet)
