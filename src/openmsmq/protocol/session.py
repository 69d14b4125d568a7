"""One MS-MQQB session over one TCP connection, sans-I/O (h11 / aioquic style).

Feed bytes with :meth:`Session.receive_data`, then drain :meth:`Session.events`;
send with :meth:`Session.send_user_message`, and write :meth:`Session.data_to_send`
to the socket (all pending packets coalesced into one buffer). Timers: ask
:meth:`Session.get_timer` for the next deadline and call :meth:`Session.handle_timer`.
Every input takes ``now`` (seconds, float); nothing here reads a clock.

Covered: establishment as initiator and acceptor (MS-MQQB 3.1.5.2-3.1.5.4, 3.1.5.10),
the Session Initialization and Session Cleanup timers, session acknowledgments with
the window, Session Ack Wait and Session Ack Send timers (3.1.5.5, 3.1.5.8.2,
3.1.5.8.7, 3.1.6.3, 3.1.6.4), closing (3.1.5.9), the routing decision of
MS-MQQB 3.1.1.6.2 (final destination vs intermediate QM) and, for the final
destination, the transactional acceptance rule through a shared
:class:`~openmsmq.protocol.incoming.IncomingSequences` registry.

Transactional retention and resend live in
:class:`~openmsmq.protocol.outgoing.OutgoingSequence`, which outlives sessions;
OrderAcks may arrive on any session, so this class only *reports* them.

Remote misbehaviour never raises from :meth:`receive_data`: the session closes,
:attr:`Session.error` holds the :class:`~openmsmq.errors.RemoteProtocolError`, and a
:class:`ConnectionClosed` event names the peer, the packet type and the reason.
Local misuse (sending before OPEN or after close) raises
:class:`~openmsmq.errors.LocalProtocolError`.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from openmsmq.errors import LocalProtocolError, RemoteProtocolError, WireError
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
    TransactionalMessageRefused,
    TransactionalMessageRejected,
    UserMessagePacket,
    UserMessageReceived,
    destination_key,
)
from openmsmq.protocol.incoming import (
    Accepted,
    IncomingSequence,
    IncomingSequences,
    SendOrderAck,
    SequenceKey,
)
from openmsmq.protocol.session_acks import (
    AwaitingAck,
    covered_by_ack,
    recoverable_ack_fields,
    stored_before_ack,
)
from openmsmq.wire.constants import MAX_HANDSHAKE_PACKET_SIZE, DeliveryMode, OperatingSystemFlag
from openmsmq.wire.fast import fast_constructor
from openmsmq.wire.headers import ConnectionParametersHeader, EstablishConnectionHeader, SessionHeader
from openmsmq.wire.ids import NULL_GUID
from openmsmq.wire.packets import (
    ConnectionParameters,
    EstablishConnection,
    FinalAck,
    OrderAck,
    OrderAckBody,
    Packet,
    SessionAck,
    UserMessage,
)
from openmsmq.wire.stream import PacketDecoder
from openmsmq.wire.userheader import DirectQueueFormatName, PrivateQueueFormatNameId

__all__ = [
    "CloseReason",
    "ConnectionClosed",
    "EstablishmentComplete",
    "FinalAckReceived",
    "ForwardMessage",
    "OrderAckReceived",
    "Role",
    "RoutingPolicy",
    "Session",
    "SessionAckReceived",
    "SessionConfig",
    "SessionEvent",
    "SessionState",
    "TransactionalMessageAccepted",
    "TransactionalMessageRefused",
    "TransactionalMessageRejected",
    "UserMessagePacket",
    "UserMessageReceived",
]

_U16 = 0x10000
#: DeliveryMode.RECOVERABLE as a plain int (no IntEnum member lookup per message).
_DM_RECOVERABLE = int(DeliveryMode.RECOVERABLE)
#: RecoverableAckTimeout range, ms (MS-MQQB 2.2.2.1, 3.1.5.3.2).
_RECOVERABLE_ACK_MIN_MS = 0x1F4
_RECOVERABLE_ACK_MAX_MS = 0x1D4C0
#: "send a SessionAck immediately" threshold of MS-MQQB 3.1.5.8.7.
_RECOVERABLE_ACK_BURST = 32
#: Bytes received that also make the next SessionAck immediate: a sender that bounds what
#: it holds in bytes (large messages) would otherwise wait for a timer.
_ACK_BYTES = 1024 * 1024
#: How far the numbers of recoverable messages sent may run ahead of the oldest one the
#: peer received but has not yet acknowledged as stored. RecoverableMsgSeqNumber is 16
#: bits (MS-MQQB 2.2.1): a number reused while its first message still waited for its
#: stored-acknowledgment made the two indistinguishable, and the older one was never
#: released (a receiver whose store lagged a whole number space behind its receipts left
#: those messages in the sender's outgoing queue for good). Half the number space.
_RECOVERABLE_AHEAD_MAX = 0x8000
_OPEN = SessionState.OPEN
_CLOSED = SessionState.CLOSED

#: TransactionalMessageAccepted(...) without the frozen-dataclass __init__ (one per message).
_new_accepted_event = fast_constructor(TransactionalMessageAccepted)


def _packet_name(packet: Packet) -> str:
    return type(packet).__name__


class RoutingPolicy(Protocol):
    """A queue manager's rules for what one session's peer may claim and send, given to
    :class:`Session` by its owner (the transfer: docs/security.md)."""

    def identity_refusal(self, remote_qm: uuid.UUID) -> str | None:
        """Why the peer's claim to be ``remote_qm`` is not accepted (the ``identity``
        rule), or None."""
        ...

    def source_refusal(self, source: uuid.UUID, remote_qm: uuid.UUID) -> str | None:
        """Why a packet whose SourceQueueManager is ``source`` may not come from the
        session's QM ``remote_qm`` (the ``source-qm`` rule), or None."""
        ...

    def forwards(self, destination: object, qm_address: uuid.UUID) -> bool | None:
        """Whether a packet whose QueueManagerAddress names this QM (or is NULL) still goes
        on to another QM because of its DestinationQueue (MS-MQQB 3.1.1.6.2): True
        forwards it; False keeps it here and lets the session skip the question for later
        packets with the same DestinationQueue object; None keeps this one packet here."""
        ...


class Session:
    """One MS-MQQB session (one TCP connection)."""

    def __init__(
        self,
        role: Role,
        local_qm: uuid.UUID,
        now: float,
        *,
        remote_qm: uuid.UUID | None = None,
        incoming: IncomingSequences | None = None,
        config: SessionConfig | None = None,
        peer: str = "",
        arrival_check: Callable[[UserMessage, float], int | None] | None = None,
        routing: RoutingPolicy | None = None,
    ) -> None:
        """Create the session. An initiator sends its EstablishConnection at once:
        ``remote_qm`` is RemoteQMGuid, or None/NULL for a direct format name.
        ``incoming`` is the QM's shared registry (a private one is made if omitted).
        ``arrival_check(message, now)``: the QM's rules of receipt that come before
        Transactional Message Processing (MS-MQQB 3.1.5.8.2, 3.1.5.8.3, 3.1.7.1.2), run
        on each transactional message for this QM before the acceptance rule: a NACK
        class refuses it (:class:`TransactionalMessageRefused`), None lets it on.
        ``routing``: the QM's trust and forwarding rules (:class:`RoutingPolicy`); None
        accepts every identity and source and forwards by QueueManagerAddress only."""
        self.role = role
        self.local_qm = local_qm
        self.config = config or SessionConfig()
        self.peer = peer
        self.remote_qm: uuid.UUID = remote_qm or NULL_GUID
        self.incoming = incoming if incoming is not None else IncomingSequences()
        self._arrival_check = arrival_check
        self._routing = routing
        self.error: RemoteProtocolError | None = None
        self._decoder = PacketDecoder()
        self._events: deque[SessionEvent] = deque()
        self._out: list[bytes] = []
        # Session counters (MS-MQQB 3.1.1.3.1), u16 on the wire.
        self.message_sent_count = 0
        self.recoverable_message_sent_count = 0
        self.message_received_count = 0
        self.recoverable_message_received_count = 0
        self.last_acked_recoverable_msg_seq_number = 0
        self.unacked_received_msg_count = 0
        self._received_bytes = 0  # bytes received since the last SessionHeader sent
        self.received_window_size = self.config.window_size
        self.ack_wait_timeout = self.config.ack_wait_timeout
        #: RecoverableAckSendTimeout, seconds (computed during the handshake).
        self.recoverable_ack_send_timeout = _RECOVERABLE_ACK_MAX_MS / 1000.0
        #: The EstablishConnection round trip an initiator measured (its TimeStamp
        #: echoed, MS-MQQB 3.1.5.3), seconds; None on an acceptor.
        self.round_trip: float | None = None
        self.direct_format_session = False
        # Awaiting session acknowledgment, in send order; held back by the window.
        self._awaiting_ack: deque[AwaitingAck] = deque()
        self._backlog: deque[tuple[UserMessagePacket | bytes, int]] = deque()
        # Encoded bytes of the messages awaiting a session acknowledgment.
        self._window_bytes = 0
        # Recoverable numbers received and persisted, not yet reported in a SessionHeader.
        self._persisted_unacked: set[int] = set()
        # Session-acknowledged recoverable (non-transactional) messages whose persistence
        # bit has not come yet: recoverable number -> handle.
        self._pending_recoverable: dict[int, int] = {}
        # (SourceQueueManager, DestinationQueue, QueueManagerAddress) -> SequenceKey.
        self._keys: dict[tuple[uuid.UUID, object, uuid.UUID], SequenceKey] = {}
        self._known_local: uuid.UUID = NULL_GUID
        #: The last DestinationQueue object the routing policy kept here (identity: the
        #: decoder shares direct-name objects, so the policy runs once per name).
        self._local_destination: object = None
        self._last_key: tuple[uuid.UUID, object, uuid.UUID, SequenceKey, IncomingSequence] | None = None
        #: The last SourceQueueManager object :meth:`_admit_source` let through (identity:
        #: the decoder shares GUID objects, so the check runs once per stream).
        self._admitted_source: object = None
        self._session_active = False
        self._received_ack = False
        self._ec_timestamp = 0
        # Timers (deadlines, None = stopped), MS-MQQB 3.1.2.
        self._init_deadline: float | None = now + self.config.initialization_timeout
        self._cleanup_deadline: float | None = now + self.config.cleanup_interval
        self._ack_wait_deadline: float | None = None
        self._ack_send_deadline: float | None = None
        if role is Role.INITIATOR:
            # MS-MQQB 3.1.5.2.3: EstablishConnection request, state WAITING_ECR_MSG.
            self._ec_timestamp = int(now * 1000) & 0xFFFFFFFF
            header = EstablishConnectionHeader(
                client_guid=local_qm,
                server_guid=self.remote_qm,
                timestamp=self._ec_timestamp,
                operating_system=0x10 | OperatingSystemFlag.SE,
            )
            self._send_packet(EstablishConnection(header))
            self.state = SessionState.WAITING_ECR_MSG
        else:
            self.state = SessionState.WAITING_EC_MSG

    # ------------------------------------------------------------------ queries

    @property
    def is_open(self) -> bool:
        """True in state OPEN."""
        return self.state is SessionState.OPEN

    @property
    def closed(self) -> bool:
        """True once the session is CLOSED."""
        return self.state is SessionState.CLOSED

    @property
    def unacked_message_count(self) -> int:
        """UnAckedMessageCount: sent, not yet session-acknowledged."""
        return len(self._awaiting_ack)

    @property
    def backlog(self) -> int:
        """Messages held back by the window."""
        return len(self._backlog)

    def unacknowledged_handles(self) -> list[int]:
        """Handles of the non-transactional messages given to this session that no
        SessionAck released (sent and awaiting one, or held by the window): after the
        session closes they go again on another (MS-MQQB 3.1.5.5.1, 3.1.6.1 re-dispatch)."""
        out = [e.handle for e in self._awaiting_ack if not e.transactional]
        out += list(self._pending_recoverable.values())
        for packet, handle in self._backlog:
            if not isinstance(packet, bytes):
                message = packet if isinstance(packet, UserMessage) else packet.message
                if message.transaction is None:
                    out.append(handle)
        return out

    @property
    def unacked_bytes(self) -> int:
        """Encoded bytes of the UserMessages sent and not yet session-acknowledged (with
        :attr:`backlog`, what a sender holds for this session: a bound on them keeps large
        messages from filling its memory)."""
        return self._window_bytes

    # ------------------------------------------------------------------ output

    def data_to_send(self) -> bytes:
        """All pending packets as one buffer (one socket write); empties the buffer."""
        if not self._out:
            return b""
        data = b"".join(self._out)
        self._out.clear()
        return data

    def next_event(self) -> SessionEvent | None:
        """The oldest pending event, or None."""
        return self._events.popleft() if self._events else None

    def events(self) -> Iterator[SessionEvent]:
        """Drain every pending event."""
        while self._events:
            yield self._events.popleft()

    @property
    def pending_events(self) -> deque[SessionEvent]:
        """The queue of pending events itself (oldest first), for a caller that drains it
        with ``popleft`` (no generator step per event); events added meanwhile join it."""
        return self._events

    def get_timer(self) -> float | None:
        """The earliest session timer deadline, or None (also None once closed)."""
        if self.closed:
            return None
        deadlines = [
            d
            for d in (
                self._init_deadline,
                self._cleanup_deadline,
                self._ack_wait_deadline,
                self._ack_send_deadline,
            )
            if d is not None
        ]
        return min(deadlines) if deadlines else None

    # ------------------------------------------------------------------ local inputs

    def send_user_message(self, packet: UserMessagePacket, now: float, handle: int = 0) -> None:
        """Queue a UserMessage / OrderAck / FinalAck for sending (MS-MQQB 3.1.7.1).

        Sent at once while the window allows (UnAckedMessageCount < window), else held
        and sent as SessionAcks free the window. ``handle`` comes back in
        :class:`SessionAckReceived` for non-transactional messages.
        """
        self.send_user_messages(((packet, handle),), now)

    def send_user_messages(self, items: Iterable[tuple[UserMessagePacket | bytes, int]], now: float) -> None:
        """:meth:`send_user_message` for each (packet, handle) of ``items``, in order: the
        same packets on the wire, the window drained once for all of them.

        A packet may be given as its encoded bytes when it is a *transactional*
        UserMessage (so recoverable: a transactional message is never express) without a
        SessionHeader: the sender's outgoing queues encode their messages straight from
        the stored rows (``store.packet_rows.row_encoder``). It is counted and
        acknowledged exactly as the same packet given as a value."""
        if self.state is not SessionState.OPEN:
            raise LocalProtocolError(f"send_user_message in state {self.state.name}")
        self._backlog.extend(items)
        self._drain_backlog(now)

    def send_order_ack(
        self,
        ack: SendOrderAck,
        now: float,
        *,
        direct_address: str | None = None,
        message_id: int = 0,
    ) -> None:
        """Write an OrderAck packet (MS-MQQB 2.2.4) straight onto this session: the protocol
        core's form, for a driver without a queue manager (the sans-I/O tests). A queue
        manager raises Send Transactional Acknowledgment instead (seed 000: built,
        enqueued, sent from its outgoing queue; ``openmsmq.transfer.acknowledgments``).

        Destination: ``PRIVATE=<sender QM>\\00000004`` (DQ 0x3) or, for a direct session,
        ``DIRECT=TCP:<direct_address>\\PRIVATE$\\order_queue$``. UserHeader.DM = 1, the
        seed's DeliveryGuarantee Recoverable (docs/conformance.md, §11 item 3).
        """
        destination: PrivateQueueFormatNameId | DirectQueueFormatName
        if direct_address is not None:
            destination = DirectQueueFormatName(f"TCP:{direct_address}\\PRIVATE$\\order_queue$")
            destination_qm: uuid.UUID | None = None
        else:
            destination = PrivateQueueFormatNameId(4)
            destination_qm = ack.key.source_qm
        packet = OrderAck.build(
            OrderAckBody.for_number(ack.tx_sequence_id, ack.tx_sequence_number),
            source_qm=self.local_qm,
            destination_queue=destination,
            destination_qm=destination_qm,
            sent_time=int(now) & 0xFFFFFFFF,
            message_id=message_id,
            delivery_mode=DeliveryMode.RECOVERABLE,
        )
        self.send_user_message(packet, now)

    def recoverable_message_stored(self, recoverable_number: int, now: float | None = None) -> None:
        """The QM persisted the recoverable message of :class:`UserMessageReceived`:
        the next SessionHeader may acknowledge it (MS-MQQB 3.1.5.8.7). With ``now``, that
        SessionAck goes out within RecoverableAckTimeout of it even when the Session Ack
        Send Timer already fired for this message (storing took longer) and was set to
        the later AckTimeout / 2."""
        self._persisted_unacked.add(recoverable_number)
        if now is not None and not self.closed:
            soon = now + self.recoverable_ack_send_timeout
            if self._ack_send_deadline is None or self._ack_send_deadline > soon:
                self._ack_send_deadline = soon

    def flush_acknowledgments(self, now: float) -> None:
        """Send now the SessionAcks the Session Ack Send Timer would send at its deadline
        (MS-MQQB 3.1.6.4): before the QM closes the session, so that the sender releases
        what was persisted instead of sending it again on the next session."""
        if self.closed or not (self.unacked_received_msg_count or self._persisted_unacked):
            return
        self._send_packet(SessionAck(self._make_session_header()))
        while self._persisted_unacked:  # one SessionHeader covers 32 numbers (see handle_timer)
            self._send_packet(SessionAck(self._make_session_header()))

    def close(self, now: float) -> None:
        """Close the session locally (MS-MQQB 3.1.5.9): there is no close packet."""
        if not self.closed:
            self._close(CloseReason.LOCAL, "", "closed locally")

    def connection_lost(self, now: float) -> None:
        """The transport reports the TCP connection closed (MS-MQQB 3.1.7.3)."""
        if not self.closed:
            self._close(CloseReason.TRANSPORT_CLOSED, "", "TCP connection closed")

    # ------------------------------------------------------------------ remote input

    def receive_data(self, data: bytes, now: float) -> None:
        """Bytes from the TCP connection. Never raises for what the peer sent."""
        if self.closed:
            return
        self._received_bytes += len(data)
        try:
            packets = self._decoder.feed(data)
        except WireError as exc:
            # Packets decoded before the bad one are lost with the session; the peer
            # retransmits whatever is unacknowledged on the next session.
            self._fail(exc.header, str(exc), exc)
            return
        for packet in packets:
            state = self.state
            if state is _CLOSED:
                return
            try:
                if type(packet) is UserMessage and state is _OPEN:
                    # _dispatch inlined for the packet of nearly every call (one call and
                    # three isinstance checks less per message; same rules, MS-MQQB 3.1.6.3).
                    self._received_ack = True
                    self._on_user_message(packet, now)
                else:
                    self._dispatch(packet, now)
            except WireError as exc:  # a body decoded lazily (OrderAck/FinalAck)
                self._fail(_packet_name(packet), str(exc), exc)
            except RemoteProtocolError as exc:
                self._fail(_packet_name(packet), str(exc), exc)
        if self.state is not _OPEN and not self.closed:
            try:  # before the handshake ends only its own small packets are waited for
                self._decoder.check_waiting(MAX_HANDSHAKE_PACKET_SIZE, "before the session is open")
            except WireError as exc:
                self._fail(exc.header, str(exc), exc)

    def handle_timer(self, now: float) -> None:
        """Fire every due session timer (MS-MQQB 3.1.6)."""
        if self.closed:
            return
        if self._init_deadline is not None and now >= self._init_deadline:
            self._init_deadline = None
            if self.state is not SessionState.OPEN:
                self._close(CloseReason.INITIALIZATION_TIMEOUT, "", "Session Initialization Timer expired")
                return
        if self._cleanup_deadline is not None and now >= self._cleanup_deadline:
            # MS-MQQB 3.1.6.2: idle since the last tick => close; else reset and restart.
            if not self._session_active and self.state is SessionState.OPEN:
                self._close(CloseReason.IDLE, "", "Session Cleanup Timer: no activity")
                return
            self._session_active = False
            self._cleanup_deadline = now + self.config.cleanup_interval
        if self._ack_wait_deadline is not None and now >= self._ack_wait_deadline:
            # MS-MQQB 3.1.6.3.
            if not self._awaiting_ack:
                self._received_ack = False
                self._ack_wait_deadline = None
            elif not self._received_ack:
                self._close(CloseReason.ACK_TIMEOUT, "", "Session Ack Wait Timer: nothing received")
                return
            else:
                self._received_ack = False
                self._ack_wait_deadline = now + self._ack_wait_duration
        if self._ack_send_deadline is not None and now >= self._ack_send_deadline:
            # MS-MQQB 3.1.6.4: send a SessionAck iff something is unacknowledged; restart.
            # Also when a recoverable message became persisted after the last SessionAck
            # went out, or its bit would wait for the next message (docs/conformance.md).
            if self.unacked_received_msg_count or self._persisted_unacked:
                self._send_packet(SessionAck(self._make_session_header()))
                # One SessionHeader acknowledges the recoverable messages of 32 numbers
                # from its base (RecoverableMsgAckFlags, MS-MQQB 2.2.1): as many more as
                # the persisted ones need, or the rest would wait for the next deadline
                # (AckTimeout / 2) and their sender would keep them that long.
                while self._persisted_unacked:  # each removes its base at least
                    self._send_packet(SessionAck(self._make_session_header()))
            self._ack_send_deadline = now + self.ack_wait_timeout / 2

    # ------------------------------------------------------------------ internals

    @property
    def _ack_wait_duration(self) -> float:
        return self.ack_wait_timeout * self.config.ack_wait_factor

    def _send_packet(self, packet: Packet) -> None:
        self._out.append(packet.encode())

    def _fail(self, packet_type: str, reason: str, exc: RemoteProtocolError | None = None) -> None:
        err = exc if exc is not None else RemoteProtocolError(f"{self.peer}: {packet_type}: {reason}")
        self.error = err
        self._close(CloseReason.PROTOCOL_ERROR, packet_type, reason, err)

    def _close(
        self,
        reason: CloseReason,
        packet_type: str,
        detail: str,
        error: RemoteProtocolError | None = None,
        *,
        rule: str = "",
    ) -> None:
        self.state = SessionState.CLOSED
        self._init_deadline = self._cleanup_deadline = None
        self._ack_wait_deadline = self._ack_send_deadline = None
        self._events.append(ConnectionClosed(reason, self.peer, packet_type, detail, error, rule))

    def _dispatch(self, packet: Packet, now: float) -> None:
        # MS-MQQB 3.1.6.3: every received packet sets ReceivedAck.
        self._received_ack = True
        if isinstance(packet, EstablishConnection):
            self._on_establish_connection(packet, now)
        elif isinstance(packet, ConnectionParameters):
            self._on_connection_parameters(packet, now)
        else:
            if self.state is not SessionState.OPEN:
                raise RemoteProtocolError(
                    f"{self.peer}: {_packet_name(packet)} received in state {self.state.name} (MS-MQQB 3.1.5)"
                )
            if isinstance(packet, SessionAck):
                self._on_session_header(packet.session, now)
            else:
                self._on_user_message(packet, now)

    # -- establishment (MS-MQQB 3.1.5.3, 3.1.5.4) -------------------------------------

    def _on_establish_connection(self, packet: EstablishConnection, now: float) -> None:
        h = packet.header
        if self.state is SessionState.WAITING_EC_MSG:  # acceptor, request
            self.remote_qm = h.client_guid
            # CS = 0 iff ServerGuid is ours or GUID_NULL (direct format name, §11 item 7).
            refused = h.server_guid not in (self.local_qm, NULL_GUID)
            # ... and iff the QM accepts the peer's claim to be ClientGuid (its trust rules).
            untrusted = None if refused else self._identity_refusal(h.client_guid)
            refused = refused or untrusted is not None
            reply = EstablishConnectionHeader(
                client_guid=h.client_guid,
                server_guid=self.local_qm,
                timestamp=h.timestamp,
                operating_system=0x10 | (h.operating_system & OperatingSystemFlag.SE),
            )
            self._send_packet(EstablishConnection(reply, internal_flags=0x10 if refused else 0))
            if untrusted is not None:
                self._close(CloseReason.UNTRUSTED, "EstablishConnection", untrusted, rule="identity")
                return
            if refused:
                self._close(
                    CloseReason.REFUSED,
                    "EstablishConnection",
                    f"ServerGuid {h.server_guid} is neither this QM nor GUID_NULL",
                )
                return
            self.state = SessionState.WAITING_CP_MSG
            self._init_deadline = now + self.config.initialization_timeout
        elif self.state is SessionState.WAITING_ECR_MSG:  # initiator, response
            if packet.connection_refused:
                self._close(CloseReason.REFUSED, "EstablishConnection", "acceptor refused (CS = 1)")
                return
            if h.client_guid != self.local_qm:
                raise RemoteProtocolError(
                    f"{self.peer}: EstablishConnection response ClientGuid {h.client_guid} is not ours"
                )
            if self.remote_qm == NULL_GUID:
                # Direct format name: adopt the acceptor's identity (§11 item 6).
                self.remote_qm = h.server_guid
            elif h.server_guid != self.remote_qm:
                raise RemoteProtocolError(
                    f"{self.peer}: EstablishConnection response ServerGuid {h.server_guid} "
                    f"!= expected {self.remote_qm}"
                )
            untrusted = self._identity_refusal(self.remote_qm)
            if untrusted is not None:
                self._close(CloseReason.UNTRUSTED, "EstablishConnection", untrusted, rule="identity")
                return
            rtt_ms = ((int(now * 1000) & 0xFFFFFFFF) - h.timestamp) & 0xFFFFFFFF
            # A handshake finishes within the Session Initialization Timer (60 s): a longer
            # "round trip" comes from a TimeStamp the peer did not echo as sent.
            self.round_trip = rtt_ms / 1000.0 if rtt_ms <= self.config.initialization_timeout * 1000 else None
            rec_ms = min(max(8 * rtt_ms, _RECOVERABLE_ACK_MIN_MS), _RECOVERABLE_ACK_MAX_MS)
            self.recoverable_ack_send_timeout = rec_ms / 1000.0
            self._send_packet(
                ConnectionParameters(
                    ConnectionParametersHeader(
                        recoverable_ack_timeout=rec_ms,
                        ack_timeout=int(self.ack_wait_timeout * 1000),
                        window_size=self.config.window_size,
                    )
                )
            )
            self.state = SessionState.WAITING_CPR_MSG
        else:
            raise RemoteProtocolError(
                f"{self.peer}: EstablishConnection received in state {self.state.name} (MS-MQQB 3.1.5.3)"
            )

    def _on_connection_parameters(self, packet: ConnectionParameters, now: float) -> None:
        h = packet.header
        if packet.connection_refused:
            self._close(CloseReason.REFUSED, "ConnectionParameters", "peer refused (CS = 1)")
            return
        if self.state is SessionState.WAITING_CP_MSG:  # acceptor, request
            if not _RECOVERABLE_ACK_MIN_MS <= h.recoverable_ack_timeout <= _RECOVERABLE_ACK_MAX_MS:
                raise RemoteProtocolError(
                    f"{self.peer}: ConnectionParameters.RecoverableAckTimeout {h.recoverable_ack_timeout} "
                    "outside 500..120000 ms"
                )
            if not 20000 <= h.ack_timeout <= 120000:
                raise RemoteProtocolError(
                    f"{self.peer}: ConnectionParameters.AckTimeout {h.ack_timeout} outside 20000..120000 ms"
                )
            self.received_window_size = h.window_size
            self.ack_wait_timeout = h.ack_timeout / 1000.0
            self.recoverable_ack_send_timeout = h.recoverable_ack_timeout / 1000.0
            self._send_packet(
                ConnectionParameters(
                    ConnectionParametersHeader(
                        recoverable_ack_timeout=h.recoverable_ack_timeout,
                        ack_timeout=h.ack_timeout,
                        window_size=self.config.window_size,
                    )
                )
            )
        elif self.state is SessionState.WAITING_CPR_MSG:  # initiator, response
            self.received_window_size = h.window_size
        else:
            raise RemoteProtocolError(
                f"{self.peer}: ConnectionParameters received in state {self.state.name} (MS-MQQB 3.1.5.4)"
            )
        self._init_deadline = None
        self.state = SessionState.OPEN
        self._events.append(
            EstablishmentComplete(
                self.remote_qm,
                self.received_window_size,
                self.ack_wait_timeout,
                self.recoverable_ack_send_timeout,
                self.round_trip,
            )
        )

    # -- sending (MS-MQQB 3.1.7.1) -------------------------------------------------------

    def _window(self) -> int:
        # As written the gate uses the own WindowSize; we also honour the peer's
        # advertised window (it signals memory pressure with 1, MS-MQMQ note <15>).
        return max(1, min(self.config.window_size, self.received_window_size or 1))

    @property
    def send_window(self) -> int:
        """Packets this session may have unacknowledged: the smaller of its own
        WindowSize and the peer's advertised one (MS-MQQB 3.1.7.1)."""
        return self._window()

    def _drain_backlog(self, now: float) -> None:
        backlog = self._backlog
        awaiting = self._awaiting_ack
        if not backlog:
            return
        # Each packet sent adds one entry to _awaiting_ack: the room left is counted down
        # below rather than measured per packet.
        room = self._window() - len(awaiting)
        if room <= 0:
            return
        out = self._out
        sent = self.message_sent_count
        recoverable_sent = self.recoverable_message_sent_count
        moved = 0  # bytes of encoded packets taken from the backlog
        pending = self._pending_recoverable
        # The oldest recoverable number the peer received and has not acknowledged as
        # stored: the first key of _pending_recoverable (insertion order). What is not yet
        # acknowledged as received is at most a window behind and needs no check.
        oldest = next(iter(pending)) if pending else None
        try:
            while backlog and room > 0:
                room -= 1
                if oldest is not None and (recoverable_sent - oldest) % _U16 >= _RECOVERABLE_AHEAD_MAX:
                    break  # resumes when stored-acknowledgments release the oldest ones
                packet, handle = backlog.popleft()
                if isinstance(packet, bytes):
                    # An encoded transactional UserMessage (see send_user_messages): DM is
                    # recoverable.
                    sent = (sent + 1) % _U16
                    recoverable_sent = (recoverable_sent + 1) % _U16
                    size = len(packet)
                    moved += size
                    awaiting.append(AwaitingAck(sent, recoverable_sent, True, handle, size))
                    out.append(packet)
                    continue
                message = packet if isinstance(packet, UserMessage) else packet.message
                data = packet.encode()  # may raise LocalProtocolError: nothing counted then
                sent = (sent + 1) % _U16
                recoverable = None  # express
                if (message.user.flags >> 5) & 0x3 == DeliveryMode.RECOVERABLE:  # UserHeader.Flags.DM
                    recoverable_sent = (recoverable_sent + 1) % _U16
                    recoverable = recoverable_sent
                size = len(data)
                awaiting.append(AwaitingAck(sent, recoverable, message.transaction is not None, handle, size))
                self._window_bytes += size
                out.append(data)
        finally:
            self.message_sent_count = sent
            self.recoverable_message_sent_count = recoverable_sent
            self._window_bytes += moved
        if self._ack_wait_deadline is None:
            self._ack_wait_deadline = now + self._ack_wait_duration
        self._session_active = True

    # -- receiving -------------------------------------------------------------------

    def _on_user_message(self, packet: UserMessagePacket, now: float) -> None:
        message = packet if isinstance(packet, UserMessage) else packet.message
        # General processing (MS-MQQB 3.1.5.8.2).
        self.message_received_count = (self.message_received_count + 1) % _U16
        self.unacked_received_msg_count += 1
        user = message.user
        if not self.direct_format_session and isinstance(user.destination_queue, DirectQueueFormatName):
            self.direct_format_session = True
        if self._ack_send_deadline is None:
            self._ack_send_deadline = now + self.ack_wait_timeout / 2
        self._session_active = True
        # None for an express message; a RecoverableMessage number may be 0 (after the wrap).
        recoverable: int | None = None
        big = self._received_bytes >= _ACK_BYTES
        if (user.flags >> 5) & 0x3 == _DM_RECOVERABLE:  # UserHeader.Flags.DM
            # MS-MQQB 3.1.5.8.7 (_on_recoverable, inlined: once per message).
            received = self.recoverable_message_received_count
            unacked = (received - self.last_acked_recoverable_msg_seq_number) % _U16
            if big or unacked >= _RECOVERABLE_ACK_BURST:
                self._send_packet(SessionAck(self._make_session_header()))
            recoverable = self.recoverable_message_received_count = (
                self.recoverable_message_received_count + 1
            ) % _U16
            if not self._persisted_unacked:
                self._ack_send_deadline = now + self.recoverable_ack_send_timeout
            if message.transaction is not None:
                # Transactional messages are retained by the sender until their OrderAck
                # whatever the SessionAck says: acknowledge at once. An OrderAck or a
                # FinalAck is acknowledged at once when it is for this QM (``_route``),
                # once stored when this QM passes it on.
                self._persisted_unacked.add(recoverable)
        elif big or self.unacked_received_msg_count >= max(1, self._window() // 2):
            # Express: MS-MQQB 3.1.1.6.1 has the receiver acknowledge "at intervals defined
            # by an acknowledgment timer or based on message count and session window
            # size". By the timer alone (AckWaitTimeout / 2) an express stream would stop
            # for seconds each time the sender's window filled; a SessionAck at half the
            # window keeps it open (recoverable messages have their own burst of 32).
            self._send_packet(SessionAck(self._make_session_header()))
        # SessionHeader processing (MS-MQQB 3.1.5.8.4) after the counters moved.
        if message.session is not None:
            self._on_session_header(message.session, now)
        self._route(packet, message, recoverable, now)

    def _is_local(self, destination_qm: uuid.UUID) -> bool:
        # Final destination: QueueManagerAddress is this QM, or NULL for a direct format
        # name (protocol.md §11 item 11). Identity first: the decoder shares GUID objects.
        if destination_qm is self._known_local:
            return True
        if destination_qm == self.local_qm or destination_qm == NULL_GUID:
            self._known_local = destination_qm  # the decoder shares GUID objects
            return True
        return False

    def _identity_refusal(self, remote_qm: uuid.UUID) -> str | None:
        """Why the peer's claim to be ``remote_qm`` (ClientGuid of a request, ServerGuid of
        a response) is not accepted, or None (the routing policy's ``identity`` rule; with
        no policy every claim is accepted)."""
        routing = self._routing
        return None if routing is None else routing.identity_refusal(remote_qm)

    def _admit_source(self, source: uuid.UUID, packet: UserMessagePacket) -> bool:
        """Whether a packet whose UserHeader.SourceQueueManager is ``source`` may be
        processed on this session (the routing policy's ``source-qm`` rule); a refused one
        closes the session (:meth:`refuse`)."""
        routing = self._routing
        if routing is not None:
            refusal = routing.source_refusal(source, self.remote_qm)
            if refusal is not None:
                self.refuse("source-qm", type(packet).__name__, refusal)
                return False
        self._admitted_source = source
        return True

    def forget_sequences(self) -> None:
        """The QM dropped or replaced incoming sequences of its registry (expired, reset by
        an operator): forget the sequence objects cached for the stream in progress."""
        self._last_key = None

    def refuse(self, rule: str, packet_type: str, detail: str) -> None:
        """Close the session because the peer broke a trust rule of this QM (``rule``, a
        name from docs/security.md): nothing more it sent is processed. A
        :class:`ConnectionClosed` event with reason UNTRUSTED reports it."""
        if not self.closed:
            self._close(CloseReason.UNTRUSTED, packet_type, detail, rule=rule)

    def _route(
        self, packet: UserMessagePacket, message: UserMessage, recoverable: int | None, now: float
    ) -> None:
        user = message.user
        source_qm = user.source_queue_manager
        if source_qm is not self._admitted_source and not self._admit_source(source_qm, packet):
            return
        qm_address = user.queue_manager_address
        if qm_address is not self._known_local and not self._is_local(qm_address):
            # Intermediate QM (seed 003): pass on untouched, no sequence processing.
            self._events.append(ForwardMessage(packet, stored_before_ack(packet, message, recoverable)))
            return
        destination = user.destination_queue
        if destination is not self._local_destination:
            routing = self._routing
            where = False if routing is None else routing.forwards(destination, qm_address)
            if where:
                self._events.append(ForwardMessage(packet, stored_before_ack(packet, message, recoverable)))
                return
            if where is False:
                # Decided by the destination object alone: the decoder shares direct-name
                # objects, so the policy runs once per name, not per message.
                self._local_destination = destination
        # An OrderAck or FinalAck wraps its UserMessage; a plain UserMessage is its own message.
        if packet is not message and isinstance(packet, OrderAck):
            if recoverable is not None:  # idempotent: acknowledged at once
                self._persisted_unacked.add(recoverable)
            body = packet.body
            self._events.append(
                OrderAckReceived(message.source_qm, body.tx_sequence_id, body.tx_sequence_number, packet)
            )
            return
        if packet is not message and isinstance(packet, FinalAck):
            if recoverable is not None:
                self._persisted_unacked.add(recoverable)
            fbody = packet.body
            self._events.append(
                FinalAckReceived(
                    message.source_qm,
                    fbody.tx_sequence_id,
                    fbody.tx_sequence_number,
                    fbody.message_id,
                    packet.message_class,
                    packet,
                )
            )
            return
        tx = message.transaction
        if tx is None:
            self._events.append(UserMessageReceived(message, recoverable))
            return
        check = self._arrival_check
        if check is not None and (refused := check(message, now)) is not None:
            # MS-MQQB 3.1.5.8: these rules come before Transactional Message Processing
            # (3.1.5.8.6) and end with "perform no further processing".
            self._events.append(TransactionalMessageRefused(message, refused))
            return
        source, queue, qm = user.source_queue_manager, destination, qm_address
        last = self._last_key
        # The decoder shares GUID and direct-name objects, so consecutive messages of one
        # stream hit this identity check and skip hashing the (GUID, queue, GUID) tuple
        # and the registry lookup (a registry never drops a sequence: the object stays
        # the one IncomingSequences.get returns for the key).
        if last is not None and last[0] is source and last[1] is queue and last[2] is qm:
            seq = last[4]
        else:
            cache_key = (source, queue, qm)
            found = self._keys.get(cache_key)
            if found is None:
                key = SequenceKey(source, destination_key(queue, qm))
                if len(self._keys) < 1024:  # a session carries few streams; bound it anyway
                    self._keys[cache_key] = key
            else:
                key = found
            admitted = self.incoming.admit(key, now)
            if admitted is None:
                self.refuse(
                    "sequence-cap",
                    _packet_name(packet),
                    f"a new incoming sequence ({source}, {key.destination}) beyond the"
                    f" {self.incoming.max_sequences} this QM keeps (mqqb.max_incoming_sequences)",
                )
                return
            seq = admitted
            self._last_key = (source, queue, qm, key, seq)
        result = seq.receive(tx.tx_sequence_id, tx.tx_sequence_number, tx.previous_tx_sequence_number, now)
        if isinstance(result, Accepted):
            self._events.append(_new_accepted_event(message, result))
        else:
            self._events.append(TransactionalMessageRejected(message, result))

    def _make_session_header(self) -> SessionHeader:
        # MS-MQQB 3.1.6.4 / 3.1.7.1.3: then reset the receive-side bookkeeping.
        base, flags = recoverable_ack_fields(self._persisted_unacked)
        header = SessionHeader(
            ack_sequence_number=self.message_received_count,
            recoverable_msg_ack_seq_number=base,
            recoverable_msg_ack_flags=flags,
            user_msg_sequence_number=self.message_sent_count,
            recoverable_msg_seq_number=self.recoverable_message_sent_count,
            window_size=self.config.window_size,
        )
        self.unacked_received_msg_count = self._received_bytes = 0
        self.last_acked_recoverable_msg_seq_number = self.recoverable_message_received_count
        return header

    def _on_session_header(self, h: SessionHeader, now: float) -> None:
        # MS-MQQB 3.1.5.5.5: the peer's counts of what it sent must match what we received.
        if h.user_msg_sequence_number != self.message_received_count:
            raise RemoteProtocolError(
                f"{self.peer}: SessionHeader.UserMsgSequenceNumber {h.user_msg_sequence_number} "
                f"!= MessageReceivedCount {self.message_received_count} (MS-MQQB 3.1.5.5.5)"
            )
        if h.recoverable_msg_seq_number != self.recoverable_message_received_count:
            raise RemoteProtocolError(
                f"{self.peer}: SessionHeader.RecoverableMsgSeqNumber {h.recoverable_msg_seq_number} "
                f"!= RecoverableMessageReceivedCount {self.recoverable_message_received_count}"
            )
        awaiting = self._awaiting_ack
        first = awaiting[0].sequence_number if awaiting else None
        covered = covered_by_ack(h.ack_sequence_number, first, len(awaiting), self.message_sent_count)
        if covered is None:
            raise RemoteProtocolError(
                f"{self.peer}: SessionHeader.AckSequenceNumber {h.ack_sequence_number} "
                f"beyond MessageSentCount {self.message_sent_count}"
            )
        # The covered entries are the oldest ones: taken off the front; the rest stay.
        # Only non-transactional entries are released by a SessionAck (3.1.5.5.2/3;
        # transactional never, seed 003): a transactional stream skips the bit set below.
        # One pass over the covered entries (this runs for every acknowledged packet).
        plain: list[AwaitingAck] = []
        released_bytes = 0
        popleft = awaiting.popleft
        for _ in range(covered):
            entry = popleft()
            released_bytes += entry.size
            if not entry.transactional:
                plain.append(entry)
        self._window_bytes -= released_bytes
        rec_acked: set[int] = set()
        # The flags say whether the header acknowledges stored messages: its base may be 0,
        # the number after 0xFFFF (RecoverableMsgSeqNumber is 16 bits and wraps). Reading
        # base 0 as "none" left the 31 messages after every wrap unreleased for good.
        if h.recoverable_msg_ack_flags and (plain or self._pending_recoverable):
            for bit in range(32):
                if h.recoverable_msg_ack_flags >> bit & 1:
                    rec_acked.add((h.recoverable_msg_ack_seq_number + bit) % _U16)
        handles: list[int] = []
        for entry in plain:
            # Express released by AckSequenceNumber, recoverable by the recoverable fields.
            if entry.recoverable_number is None or entry.recoverable_number in rec_acked:
                handles.append(entry.handle)
            else:
                # Delivered, not yet persisted by the peer: its bit comes in a later header.
                self._pending_recoverable[entry.recoverable_number] = entry.handle
        for n in rec_acked:
            handle = self._pending_recoverable.pop(n, None)
            if handle is not None:
                handles.append(handle)
        self.received_window_size = h.window_size
        self._events.append(SessionAckReceived(h.ack_sequence_number, tuple(handles), h.window_size))
        # Restart the Session Ack Wait Timer if entries still await an ack, else stop it.
        self._ack_wait_deadline = (now + self._ack_wait_duration) if self._awaiting_ack else None
        self._drain_backlog(now)
