"""Events, states and configuration of an MS-MQQB session (see :mod:`openmsmq.protocol.session`)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from enum import IntEnum

from openmsmq.errors import LocalProtocolError, RemoteProtocolError
from openmsmq.protocol.incoming import Accepted, Rejected
from openmsmq.wire.ids import TxSequenceId
from openmsmq.wire.packets import FinalAck, OrderAck, UserMessage
from openmsmq.wire.userheader import (
    DirectQueueFormatName,
    PrivateQueueFormatName,
    PrivateQueueFormatNameId,
    PublicQueueFormatName,
    QueueFormat,
)

__all__ = [
    "CloseReason",
    "ConnectionClosed",
    "EstablishmentComplete",
    "FinalAckReceived",
    "ForwardMessage",
    "OrderAckReceived",
    "Role",
    "SessionAckReceived",
    "SessionConfig",
    "SessionEvent",
    "SessionState",
    "TransactionalMessageAccepted",
    "TransactionalMessageRefused",
    "TransactionalMessageRejected",
    "UserMessagePacket",
    "UserMessageReceived",
    "destination_key",
]

#: A user-message-shaped packet: what travels as a UserMessage on the session.
UserMessagePacket = UserMessage | OrderAck | FinalAck


class Role(IntEnum):
    """Which side opened the TCP connection (MS-MQQB 1.1 glossary)."""

    INITIATOR = 1
    ACCEPTOR = 2


class SessionState(IntEnum):
    """SessionState ADM element (MS-MQQB 3.1.1.3.1); WAITING_RECONNECT belongs to the QM."""

    OPEN = 0
    CLOSED = 1
    WAITING_CP_MSG = 2
    WAITING_CPR_MSG = 3
    WAITING_EC_MSG = 4
    WAITING_ECR_MSG = 5


class CloseReason(IntEnum):
    """Why a session closed."""

    #: :meth:`Session.close` was called.
    LOCAL = 1
    #: The peer broke the protocol or sent malformed bytes (MS-MQQB 3.1.5.1.3).
    PROTOCOL_ERROR = 2
    #: The connection was refused (InternalHeader.Flags.CS, MS-MQQB 3.1.5.3).
    REFUSED = 3
    #: Session Initialization Timer expired (MS-MQQB 3.1.6.6).
    INITIALIZATION_TIMEOUT = 4
    #: Session Ack Wait Timer expired without any packet from the peer (MS-MQQB 3.1.6.3).
    ACK_TIMEOUT = 5
    #: Session Cleanup Timer found the session idle (MS-MQQB 3.1.6.2).
    IDLE = 6
    #: The transport reported the TCP connection closed (MS-MQQB 3.1.7.3).
    TRANSPORT_CLOSED = 7
    #: The peer sent what a trust rule of this QM refuses (a message claiming another QM's
    #: identity on a session that may not carry one, a GUID it may not use from its
    #: address, ...): ``ConnectionClosed.rule`` names the rule (docs/security.md).
    UNTRUSTED = 8


@dataclass(frozen=True, slots=True)
class SessionConfig:
    """Session parameters (MS-MQQB 3.1.1.3.1, 3.1.2; durations in seconds)."""

    #: WindowSize ADM element: SHOULD be 64.
    window_size: int = 64
    #: AckWaitTimeout (sent as ConnectionParameters.AckTimeout): 20 s on a LAN.
    ack_wait_timeout: float = 20.0
    #: Session Initialization Timer: 60 s (Windows default).
    initialization_timeout: float = 60.0
    #: Session Cleanup Timer: 300 s (Windows CleanupInterval).
    cleanup_interval: float = 300.0
    #: Session Ack Wait Timer = factor × AckWaitTimeout (2 for direct sessions on Windows).
    ack_wait_factor: float = 1.0

    def __post_init__(self) -> None:
        if not 1 <= self.window_size <= 0xFFFF:
            raise LocalProtocolError("window_size must be 1..0xFFFF")
        if not 20.0 <= self.ack_wait_timeout <= 120.0:
            raise LocalProtocolError("ack_wait_timeout must be 20..120 s (MS-MQQB 2.2.2.1 AckTimeout)")
        if min(self.initialization_timeout, self.cleanup_interval, self.ack_wait_factor) <= 0:
            raise LocalProtocolError("session durations must be positive")


# ---------------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class EstablishmentComplete:
    """The session is OPEN (MS-MQQB 3.1.5.4)."""

    remote_qm: uuid.UUID
    #: ReceivedWindowSize: the peer's window.
    window_size: int
    #: Negotiated AckWaitTimeout and RecoverableAckSendTimeout, seconds.
    ack_wait_timeout: float
    recoverable_ack_timeout: float
    #: The EstablishConnection round trip, seconds (milliseconds resolution), as the
    #: initiator measured it from its echoed TimeStamp (MS-MQQB 3.1.5.3); None on an
    #: acceptor. With the window it bounds the session's rate: window / round trip.
    round_trip: float | None = None


@dataclass(frozen=True, slots=True)
class UserMessageReceived:
    """A non-transactional UserMessage whose final destination is this QM.

    For a recoverable one (``recoverable_number`` is not None; 0 is a number like any
    other, the one after 0xFFFF) call
    :meth:`Session.recoverable_message_stored` once it is persisted; only then does a
    SessionAck cover it. Duplicate elimination (MessageIDHistoryTable, MS-MQQB
    3.1.5.8.1) is the QM's, keyed by ``packet.message_id``.
    """

    packet: UserMessage
    recoverable_number: int | None


@dataclass(frozen=True, slots=True)
class TransactionalMessageAccepted:
    """A transactional message for this QM passed the acceptance rule (seed 002).

    Store it with ``result.state`` in one store transaction, then call
    ``IncomingSequences.get(result.key, now).messages_stored(...)``.
    """

    packet: UserMessage
    result: Accepted


@dataclass(frozen=True, slots=True)
class TransactionalMessageRejected:
    """A transactional message for this QM failed the acceptance rule: drop it."""

    packet: UserMessage
    result: Rejected


@dataclass(frozen=True, slots=True)
class TransactionalMessageRefused:
    """A transactional message for this QM that the rules of receipt before Transactional
    Message Processing refused (MS-MQQB 3.1.5.8.2 destination and queue kind, 3.1.5.8.3
    access, 3.1.7.1.2 expiry): "disregard the message and perform no further processing",
    so the acceptance rule never saw it (the incoming sequence and its Order Ack Send
    Timer are untouched). The QM raises its NACK of class ``message_class``."""

    packet: UserMessage
    message_class: int


@dataclass(frozen=True, slots=True)
class ForwardMessage:
    """A message whose final destination is another QM (MS-MQQB 3.1.1.6.2).

    This QM is an intermediate hop: the TransactionHeader is passed on untouched and no
    sequence processing was done. Route ``packet`` to the next hop.
    """

    packet: UserMessagePacket
    #: RecoverableMessage number of a recoverable non-transactional UserMessage or FinalAck,
    #: which the session acknowledges only once the QM stored it
    #: (:meth:`Session.recoverable_message_stored`, MS-MQQB 3.1.5.8.7), 0 included (the
    #: number after 0xFFFF); None for anything else (express, transactional, OrderAcks).
    recoverable: int | None = None


@dataclass(frozen=True, slots=True)
class OrderAckReceived:
    """An OrderAck for this QM (MS-MQQB 3.1.5.6): route it to the OutgoingSequence owning
    ``tx_sequence_id`` (``source_qm`` is the QM that acknowledges)."""

    source_qm: uuid.UUID
    tx_sequence_id: TxSequenceId
    tx_sequence_number: int
    packet: OrderAck


@dataclass(frozen=True, slots=True)
class FinalAckReceived:
    """A FinalAck for this QM (MS-MQQB 3.1.5.7)."""

    source_qm: uuid.UUID
    tx_sequence_id: TxSequenceId
    tx_sequence_number: int
    message_id: int
    message_class: int
    packet: FinalAck


@dataclass(frozen=True, slots=True)
class SessionAckReceived:
    """A SessionHeader arrived (stand-alone SessionAck or piggy-backed, MS-MQQB 3.1.5.5).

    ``acked_handles`` lists the handles given to :meth:`Session.send_user_message` for
    *non-transactional* messages the peer acknowledged: express ones by
    AckSequenceNumber, recoverable ones by the recoverable fields. Transactional
    messages are never listed: a SessionAck never releases them (MS-MQQB 3.1.1.6.2).
    """

    ack_sequence_number: int
    acked_handles: tuple[int, ...]
    window_size: int


@dataclass(frozen=True, slots=True)
class ConnectionClosed:
    """The session is CLOSED; the transport must close the TCP connection.

    Write :meth:`Session.data_to_send` first: a refusal (EstablishConnection with CS = 1)
    may still be pending. ``error`` is the peer's :class:`RemoteProtocolError` when
    ``reason`` is PROTOCOL_ERROR.
    """

    reason: CloseReason
    peer: str
    #: Packet type involved ("" when none), e.g. "EstablishConnection", "UserMessage".
    packet_type: str = ""
    detail: str = ""
    error: RemoteProtocolError | None = None
    #: For ``UNTRUSTED``: the trust rule that refused the peer (docs/security.md).
    rule: str = ""


SessionEvent = (
    EstablishmentComplete
    | UserMessageReceived
    | TransactionalMessageAccepted
    | TransactionalMessageRejected
    | TransactionalMessageRefused
    | ForwardMessage
    | OrderAckReceived
    | FinalAckReceived
    | SessionAckReceived
    | ConnectionClosed
)


def destination_key(queue: QueueFormat | None, destination_qm: uuid.UUID) -> str:
    """A stable text key for UserHeader.DestinationQueue (used in :class:`SequenceKey`)."""
    if isinstance(queue, PrivateQueueFormatNameId):
        return f"PRIVATE={destination_qm}\\{queue.identifier:08x}"
    if isinstance(queue, DirectQueueFormatName):
        return f"DIRECT={queue.name.lower()}"
    if isinstance(queue, PublicQueueFormatName):
        return f"PUBLIC={queue.queue_guid}"
    if isinstance(queue, PrivateQueueFormatName):
        return f"PRIVATE={queue.queue_manager_guid}\\{queue.identifier:08x}"
    return repr(queue)
