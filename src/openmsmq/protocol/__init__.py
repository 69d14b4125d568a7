"""Sans-I/O MS-MQQB state machines: sessions, incoming and outgoing transactional sequences.

Nothing in this package reads a clock, sleeps, touches sockets or runs SQL: every input
takes ``now`` and every timer is exposed as a deadline (``get_timer``) plus a
``handle_timer(now)`` input.

* :mod:`openmsmq.protocol.session` — :class:`Session`, one per TCP connection, composed of
  :mod:`~openmsmq.protocol.handshake` (establishment), :mod:`~openmsmq.protocol.send_window`
  (window, sending counters) and :mod:`~openmsmq.protocol.routing` (where a received
  message goes; the acceptance rule).
* :mod:`openmsmq.protocol.events` — the session's events, states and configuration.
* :mod:`openmsmq.protocol.incoming` — receiver: acceptance rule and OrderAck scheduling.
* :mod:`openmsmq.protocol.outgoing` — sender: retention, release and resend.
"""

from openmsmq.protocol.events import (
    CloseReason,
    ConnectionClosed,
    EstablishmentComplete,
    FinalAckReceived,
    ForwardMessage,
    OrderAckReceived,
    Role,
    SessionAckReceived,
    SessionConfig,
    SessionEvent,
    SessionState,
    TransactionalMessageAccepted,
    TransactionalMessageRejected,
    UserMessagePacket,
    UserMessageReceived,
    destination_key,
)
from openmsmq.protocol.incoming import (
    Accepted,
    IncomingSequence,
    IncomingSequences,
    IncomingSequenceSnapshot,
    OrderAckConfig,
    Rejected,
    RejectReason,
    SendOrderAck,
    SequenceKey,
)
from openmsmq.protocol.outgoing import (
    AwaitingFinalAck,
    FinalAckIgnored,
    IgnoreReason,
    OrderAckIgnored,
    OutgoingEvent,
    OutgoingSequence,
    Released,
    ResendConfig,
    RetainedMessage,
    Transmit,
)
from openmsmq.protocol.session import Session

__all__ = [
    "Accepted",
    "AwaitingFinalAck",
    "CloseReason",
    "ConnectionClosed",
    "EstablishmentComplete",
    "FinalAckIgnored",
    "FinalAckReceived",
    "ForwardMessage",
    "IgnoreReason",
    "IncomingSequence",
    "IncomingSequenceSnapshot",
    "IncomingSequences",
    "OrderAckConfig",
    "OrderAckIgnored",
    "OrderAckReceived",
    "OutgoingEvent",
    "OutgoingSequence",
    "RejectReason",
    "Rejected",
    "Released",
    "ResendConfig",
    "RetainedMessage",
    "Role",
    "SendOrderAck",
    "SequenceKey",
    "Session",
    "SessionAckReceived",
    "SessionConfig",
    "SessionEvent",
    "SessionState",
    "TransactionalMessageAccepted",
    "TransactionalMessageRejected",
    "Transmit",
    "UserMessagePacket",
    "UserMessageReceived",
    "destination_key",
]
