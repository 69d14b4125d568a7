"""Values that cross the client transport: codes, requests and results.

Everything here is a frozen dataclass or an IntEnum so that a network transport
(gRPC) can carry it by value and a process pool can pickle it. The codes
are MS-MQRR's own numbers where MS-MQRR defines them (remote-read.md §3).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from enum import IntEnum, IntFlag

from openmsmq.remote.codes import Action
from openmsmq.wire.constants import INFINITE

__all__ = [
    "DEFAULT_TIME_TO_REACH_QUEUE",
    "INFINITE",
    "Access",
    "Ack",
    "AckRequest",
    "Delivery",
    "LookupRange",
    "OutgoingMessage",
    "QueueInfo",
    "RangeQuery",
    "ReadAction",
    "SendReceipt",
    "ShareMode",
    "TransactionId",
]

#: Default TimeToReachQueue in seconds (4 days, MS-MQDMPR 3.1.1.12 default LONG_LIVED).
DEFAULT_TIME_TO_REACH_QUEUE = 0x54600


class Access(IntFlag):
    """Access requested when opening a queue (MS-MQRR 2.2.1 dwAccess, MSMQ MQ_*_ACCESS).

    A handle may combine SEND with RECEIVE or PEEK; RECEIVE implies PEEK (MS-MQRR 3.1.4.2).
    """

    #: RECEIVE_ACCESS (MS-MQRR 2.2.1): peek, receive and purge.
    RECEIVE = 0x00000001
    #: MQ_SEND_ACCESS: send only.
    SEND = 0x00000002
    #: PEEK_ACCESS (MS-MQRR 2.2.1): peek only.
    PEEK = 0x00000020

    @property
    def can_receive(self) -> bool:
        """True when the handle may receive and purge."""
        return bool(self & Access.RECEIVE)

    @property
    def can_peek(self) -> bool:
        """True when the handle may peek (RECEIVE implies PEEK)."""
        return bool(self & (Access.RECEIVE | Access.PEEK))

    @property
    def can_send(self) -> bool:
        """True when the handle may send."""
        return bool(self & Access.SEND)


class ShareMode(IntEnum):
    """dwShareMode of R_OpenQueue (MS-MQRR 2.2.1; QueueShareMode, MS-MQDMPR 3.1.1.16)."""

    #: MQ_DENY_NONE: other handles may receive concurrently.
    DENY_NONE = 0x00000000
    #: MQ_DENY_SHARE (QueueShareMode.DenyReceive): no other handle may receive.
    DENY_RECEIVE = 0x00000001


#: ulAction of R_StartReceive / R_StartTransactionalReceive (MS-MQRR 2.2.1, 3.1.4.7): the
#: remote-read service's own enum, so a client and the server cannot disagree on a value.
ReadAction = Action


class Ack(IntEnum):
    """dwAck of R_EndReceive / R_EndTransactionalReceive (MS-MQRR 2.2.1)."""

    #: RR_NACK: the message was not taken; it becomes available again.
    NACK = 0x00000001
    #: RR_ACK: the message was taken (removed now, or at commit inside a transaction).
    ACK = 0x00000002


class AckRequest(IntFlag):
    """AcknowledgementsRequested (MessagePropertiesHeader.Flags, MS-MQMQ 2.2.19.3)."""

    NONE = 0x00
    #: PA: positive ack on arrival in the destination queue.
    POS_ARRIVAL = 0x01
    #: PR: positive ack on receive by an application.
    POS_RECEIVE = 0x02
    #: NA: negative ack when the message cannot reach the queue.
    NEG_ARRIVAL = 0x04
    #: NR: negative ack when the message is not received.
    NEG_RECEIVE = 0x08


class Delivery(IntEnum):
    """DeliveryGuarantee (MS-MQDMPR 3.1.1.12; UserHeader.Flags.DM, MS-MQMQ 2.2.19.2)."""

    EXPRESS = 0
    RECOVERABLE = 1


@dataclass(frozen=True, slots=True)
class TransactionId:
    """A transaction's identity: an XACTUOW (MS-MQMQ 2.2.18.1.8), 16 bytes chosen by the
    client for internal transactions (MS-MQRR 2.2.8)."""

    uow: uuid.UUID = field(default_factory=uuid.uuid4)

    def __str__(self) -> str:
        return str(self.uow)


@dataclass(frozen=True, slots=True)
class OutgoingMessage:
    """The properties an application sets on a message it sends (MS-MQDMPR 3.1.1.12).

    Times are seconds; :data:`INFINITE` means never. ``journal`` asks for positive source
    journaling, ``dead_letter`` for negative source journaling (dead-letter on failure);
    ``dead_letter`` None (the default) means yes for a message sent in a transaction and
    no otherwise (:meth:`with_send_defaults`): a transactional message that cannot be
    delivered lands in the sender's transactional dead-letter queue instead of vanishing
    (docs/acknowledgments.md, "Transactional sends").
    """

    body: bytes = b""
    label: str = ""
    #: 0–7, 7 highest; transactional messages are always sent with priority 0.
    priority: int = 3
    #: CorrelationIdentifier: 20 bytes (shorter values are zero-padded).
    correlation_id: bytes = bytes(20)
    #: ApplicationTag (AppSpecific), u32.
    app_specific: int = 0
    #: BodyType, a VARTYPE (MS-MQMQ 2.2.12).
    body_type: int = 0
    delivery: Delivery = Delivery.EXPRESS
    time_to_reach_queue: int = DEFAULT_TIME_TO_REACH_QUEUE
    time_to_be_received: int = INFINITE
    ack: AckRequest = AckRequest.NONE
    admin_queue: str = ""
    response_queue: str = ""
    journal: bool = False
    dead_letter: bool | None = None
    extension: bytes = b""

    def with_send_defaults(self, transactional: bool) -> OutgoingMessage:
        """This message with the defaults of a send in a transaction (``transactional``)
        or not filled in: ``dead_letter`` None becomes ``transactional``."""
        if self.dead_letter is not None:
            return self
        return replace(self, dead_letter=transactional)


@dataclass(frozen=True, slots=True)
class SendReceipt:
    """What a send returns: the message Identifier, and its LookupIdentifier once stored
    (0 while the sending transaction is not committed)."""

    message_id: str
    lookup_id: int = 0


@dataclass(frozen=True, slots=True)
class QueueInfo:
    """A queue's properties and current counts (Queue, MS-MQDMPR 3.1.1.2)."""

    #: The path name as created, e.g. ``private$\\orders``.
    path: str
    #: ``private`` / ``system`` / ``journal`` / ``outgoing`` / ``subqueue``.
    kind: str
    transactional: bool
    label: str
    #: Queue.Quota in KB (INFINITE = no limit).
    quota_kb: int
    journal: bool
    journal_quota_kb: int
    #: PrivateQueueNumber (0 when not a private queue).
    private_number: int
    created_time: int
    modify_time: int
    message_count: int
    total_bytes: int
    #: DestinationFormatName of an outgoing queue, else "".
    destination: str = ""
    #: QM GUIDs allowed to send into the queue over MS-MQQB; empty = every sender.
    allowed_senders: tuple[str, ...] = ()
    #: The retry policy, ``count,cycles,delay,handling`` (openmsmq.retry_policy); "" = none.
    retry_policy: str = ""


@dataclass(frozen=True, slots=True)
class RangeQuery:
    """A LookupIdentifier range of one queue: messages with ``after`` < LookupIdentifier <=
    ``through`` (``None``: up to the queue's stable watermark)."""

    queue: str
    after: int = 0
    through: int | None = None


@dataclass(frozen=True, slots=True)
class LookupRange:
    """The messages of a :class:`RangeQuery`: oldest and newest LookupIdentifier and count.

    For an open-ended query ``last`` is a stable watermark: no message with a
    LookupIdentifier <= ``last`` can appear in that queue later (docs/spark.md).
    """

    first: int
    last: int
    count: int
    bytes: int | None = None
    """Total stored size of the range's messages (``with_bytes`` queries only; None when
    not asked for or the server does not report it)."""
