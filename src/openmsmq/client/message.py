"""The message as an application sees it: :class:`Message` (read) and :class:`PendingMessage`.

Field names follow the Message attributes of MS-MQDMPR 3.1.1.12 in the spelling of
the MSMQ application API (label, body, correlation id, app specific, ...).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from openmsmq.client.types import INFINITE, AckRequest, Delivery
from openmsmq.errors import WireError
from openmsmq.wire.constants import MessageClass, message_class_name
from openmsmq.wire.ids import ObjectId

__all__ = ["Message", "PendingMessage", "class_name", "is_acknowledgment_class"]


def is_acknowledgment_class(message_class: int) -> bool:
    """True for the acknowledgment classes of MS-MQMQ 2.2.18.1.6: ACK_REACH_QUEUE, the
    receive acknowledgment (0x4000 bit) and every NACK (0x8000 bit)."""
    return message_class == MessageClass.ACK_REACH_QUEUE or bool(message_class & 0xC000)


def class_name(message_class: int) -> str:
    """The name of a Message.Class, e.g. ``"NORMAL"``, ``"ACK_RECEIVE"``,
    ``"NACK_RECEIVE_TIMEOUT"``; ``"0x...."`` for an application-defined class (the one
    spelling of :func:`openmsmq.wire.constants.message_class_name`)."""
    return message_class_name(message_class)


def _utc(seconds: int) -> datetime | None:
    return datetime.fromtimestamp(seconds, UTC) if seconds else None


@dataclass(frozen=True, slots=True)
class Message:
    """A received or peeked message (by value; picklable).

    ``message_id`` is the Identifier in MSMQ text form ``{GUID}\\uniquifier``
    (MS-MQMQ 2.2.8); ``lookup_id`` the 64-bit LookupIdentifier; times are seconds since
    1970 UTC (``sent_at`` / ``arrived_at`` give datetimes).
    """

    body: bytes
    label: str
    lookup_id: int
    message_id: str
    #: Message.Class (MS-MQMQ 2.2.18.1.6); 0 = an application message.
    message_class: int = 0
    priority: int = 3
    #: CorrelationIdentifier, 20 bytes.
    correlation_id: bytes = bytes(20)
    app_specific: int = 0
    body_type: int = 0
    delivery: Delivery = Delivery.EXPRESS
    sent_time: int = 0
    arrived_time: int = 0
    time_to_reach_queue: int = 0
    time_to_be_received: int = INFINITE
    #: Destination queue format name as the sender gave it.
    queue: str = ""
    admin_queue: str = ""
    response_queue: str = ""
    #: AcknowledgementsRequested.
    ack: AckRequest = AckRequest.NONE
    journal: bool = False
    dead_letter: bool = False
    transactional: bool = False
    first_in_transaction: bool = False
    last_in_transaction: bool = False
    #: GUID of the source queue manager, in braces.
    source_machine: str = ""
    extension: bytes = b""
    #: TransactionalMessageSequenceIdentifier as u64 ``(TimeStamp << 32) | Ordinal``
    #: (MS-MQMQ 2.2.18.1.2); 0 when the message is not transactional.
    tx_sequence_id: int = 0
    #: TxSequenceNumber (u32); 0 when the message is not transactional.
    tx_sequence_number: int = 0
    #: AbortCount: transactional receives of it aborted since it last moved (a queue's
    #: retry policy moves it on when this passes receive_retry_count).
    abort_count: int = 0
    #: MoveCount: moves between its queue and subqueues (a retry cycle is two).
    move_count: int = 0

    @property
    def class_name(self) -> str:
        """Name of :attr:`message_class`, e.g. ``"NORMAL"`` (see :func:`class_name`)."""
        return class_name(self.message_class)

    @property
    def is_acknowledgment(self) -> bool:
        """An acknowledgment message (ACK_REACH_QUEUE, ACK_RECEIVE or a NACK class), as an
        administration queue receives them (MS-MQQB 3.1.7.15)."""
        return is_acknowledgment_class(self.message_class)

    @property
    def acknowledged_message_id(self) -> str | None:
        """For an acknowledgment: the Identifier of the message it is about, in the
        ``{GUID}\\uniquifier`` form of :attr:`message_id` — its CorrelationIdentifier
        (MS-MQQB 3.1.7.15). None for other messages."""
        if not self.is_acknowledgment:
            return None
        try:
            return str(ObjectId.decode(self.correlation_id))
        except (WireError, ValueError):
            return None

    @property
    def sent_at(self) -> datetime | None:
        """SentTime as an aware UTC datetime (None if unset)."""
        return _utc(self.sent_time)

    @property
    def arrived_at(self) -> datetime | None:
        """ArrivedTime as an aware UTC datetime (None if unset)."""
        return _utc(self.arrived_time)

    @property
    def text(self) -> str:
        """The body decoded as UTF-8 (undecodable bytes replaced)."""
        return self.body.decode("utf-8", errors="replace")

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict with stable keys (bytes as hex, body as UTF-8 text when it decodes)."""
        try:
            text: str | None = self.body.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        return {
            "lookup_id": self.lookup_id,
            "message_id": self.message_id,
            "label": self.label,
            "body": text,
            "body_hex": self.body.hex(),
            "body_size": len(self.body),
            "class": self.message_class,
            "class_name": self.class_name,
            "acknowledges": self.acknowledged_message_id,
            "priority": self.priority,
            "correlation_id": self.correlation_id.hex(),
            "app_specific": self.app_specific,
            "body_type": self.body_type,
            "delivery": self.delivery.name.lower(),
            "sent_time": self.sent_time,
            "arrived_time": self.arrived_time,
            "time_to_reach_queue": self.time_to_reach_queue,
            "time_to_be_received": self.time_to_be_received,
            "queue": self.queue,
            "admin_queue": self.admin_queue,
            "response_queue": self.response_queue,
            "ack": int(self.ack),
            "journal": self.journal,
            "dead_letter": self.dead_letter,
            "transactional": self.transactional,
            "first_in_transaction": self.first_in_transaction,
            "last_in_transaction": self.last_in_transaction,
            "source_machine": self.source_machine,
            "abort_count": self.abort_count,
            "move_count": self.move_count,
        }


@dataclass(frozen=True, slots=True)
class PendingMessage:
    """A message locked by a two-phase receive (MS-MQRR R_StartReceive /
    R_StartTransactionalReceive). End it with ACK or NACK by ``request_id``
    (dwRequestId; PendingRequestEntry, MS-MQRR 3.1.1). ``transactional``: it was started
    in a transaction, so it ends with R_EndTransactionalReceive (else R_EndReceive)."""

    request_id: int
    message: Message
    transactional: bool = False
