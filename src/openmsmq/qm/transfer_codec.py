"""Conversions between stored :class:`~openmsmq.store.records.Message` values and MS-MQQB
UserMessage packets, for the transfer between queue managers (:mod:`openmsmq.qm.transfer`).

Only DIRECT=TCP: destinations travel (``DirectQueueFormatName``, MS-MQMQ 2.2.18.1.5.2).
Admin and response queues are not carried yet (see docs/transfer.md, "Limits").
"""

from __future__ import annotations

import uuid

from openmsmq.store.records import Message
from openmsmq.wire.headers import TransactionHeader
from openmsmq.wire.ids import NULL_GUID, TxSequenceId
from openmsmq.wire.packets import UserMessage
from openmsmq.wire.userheader import DirectQueueFormatName

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


def packet_from_message(
    m: Message, destination: str, source_qm: uuid.UUID, previous_tx_sequence_number: int | None = None
) -> UserMessage:
    """The UserMessage for a message of an outgoing queue (``destination`` is the wire
    direct name). ``previous_tx_sequence_number`` overrides the stored value on a resend
    that bridges removed messages (MS-MQQB 3.1.7.1.3)."""
    transaction = None
    if m.transactional and m.tx_sequence_number:
        prev = previous_tx_sequence_number
        if prev is None:
            prev = m.tx_previous_sequence_number
        transaction = TransactionHeader(
            TxSequenceId.from_int(m.tx_sequence_id),
            m.tx_sequence_number,
            prev,
            TransactionHeader.make_flags(
                final_ack=m.final_ack_required, first=m.first_in_transaction, last=m.last_in_transaction
            ),
        )
    return UserMessage.build(
        source_qm=m.id_lineage if m.id_lineage != NULL_GUID else source_qm,
        message_id=m.id_uniquifier & 0xFFFFFFFF,
        destination_queue=DirectQueueFormatName(destination),
        body=m.body,
        sent_time=m.sent_time & 0xFFFFFFFF,
        destination_qm=m.destination_qm,
        label=m.label or None,
        message_class=m.message_class,
        priority=0 if transaction is not None else m.priority,
        delivery_mode=1 if transaction is not None else m.delivery,
        ack_requests=m.ack_flags,
        hop_count=m.hop_count,
        time_to_reach_queue=m.time_to_reach_queue,
        time_to_be_received=m.time_to_be_received,
        correlation_id=m.correlation_id if len(m.correlation_id) == 20 else bytes(20),
        application_tag=m.app_specific,
        body_type=m.body_type,
        transaction=transaction,
        negative_journaling=m.negative_journaling,
        positive_journaling=m.positive_journaling,
    )


def message_from_packet(p: UserMessage, destination_format_name: str) -> Message:
    """The message to store at the final destination, as sent: Identifier, SentTime and
    the transactional sequence fields are kept (the QM assigns LookupIdentifier and
    ArrivedTime)."""
    tx = p.transaction
    return Message(
        body=p.body,
        label=p.label,
        priority=p.priority,
        message_class=p.message_class,
        body_type=p.properties.body_type,
        correlation_id=p.properties.correlation_id,
        app_specific=p.properties.application_tag,
        delivery=p.delivery_mode,
        time_to_reach_queue=p.time_to_reach_queue,
        time_to_be_received=p.time_to_be_received,
        ack_flags=p.ack_requests,
        positive_journaling=p.user.positive_journaling,
        negative_journaling=p.user.negative_journaling,
        tracing=p.tracing,
        hop_count=p.hop_count,
        final_ack_required=bool(tx and tx.final_ack_required),
        id_lineage=p.source_qm,
        id_uniquifier=p.user.message_id,
        sent_time=p.sent_time,
        destination_queue=destination_format_name,
        destination_qm=p.destination_qm,
        source_machine=p.source_qm,
        transactional=tx is not None,
        tx_sequence_id=tx.tx_sequence_id.value if tx else 0,
        tx_sequence_number=tx.tx_sequence_number if tx else 0,
        tx_previous_sequence_number=tx.previous_tx_sequence_number if tx else 0,
        first_in_transaction=bool(tx and tx.first_in_transaction),
        last_in_transaction=bool(tx and tx.last_in_transaction),
    )
