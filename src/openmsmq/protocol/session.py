"""One MS-MQQB session over one TCP connection, sans-I/O (h11 / aioquic style).

Feed bytes with :meth:`Session.receive_data`, then drain :meth:`Session.events`;
send with :meth:`Session.send_user_message`, and write :meth:`Session.data_to_send`
to the socket (all pending packets coalesced into one buffer). Timers: ask
:meth:`Session.get_timer` for the next deadline and call :meth:`Session.handle_timer`.
Every input takes ``now`` (seconds, float); nothing here reads a clock.

The session is composed of parts, each owning one concept, built by its constructor:
:class:`~openmsmq.protocol.handshake.Handshake` (establishment as initiator and acceptor,
MS-MQQB 3.1.5.2-3.1.5.4, 3.1.5.10), :class:`~openmsmq.protocol.send_window.SendWindow`
(the sending counters, the window and what awaits a SessionAck, 3.1.5.5, 3.1.7.1) and
:class:`~openmsmq.protocol.routing.ArrivalRouter` (the routing decision of 3.1.1.6.2,
final destination vs intermediate QM, and for the final destination the transactional
acceptance rule through a shared
:class:`~openmsmq.protocol.incoming.IncomingSequences` registry). The session itself owns
its state, the packet dispatch, the receive-side counters and session acknowledgments
(3.1.5.8.2, 3.1.5.8.4, 3.1.5.8.7, with the arithmetic of
:mod:`~openmsmq.protocol.session_acks`), the Session Initialization, Cleanup, Ack Wait
and Ack Send timers (3.1.6.2-3.1.6.4, 3.1.6.6) and closing (3.1.5.9).

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
)
from openmsmq.protocol.handshake import Handshake, HandshakeStep
from openmsmq.protocol.incoming import IncomingSequences, SendOrderAck
from openmsmq.protocol.routing import ArrivalRouter, RoutingPolicy
from openmsmq.protocol.send_window import SendWindow
from openmsmq.protocol.session_acks import recoverable_ack_fields
from openmsmq.wire.constants import MAX_HANDSHAKE_PACKET_SIZE, DeliveryMode
from openmsmq.wire.headers import SessionHeader
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
#: "send a SessionAck immediately" threshold of MS-MQQB 3.1.5.8.7.
_RECOVERABLE_ACK_BURST = 32
#: Bytes received that also make the next SessionAck immediate: a sender that bounds what
#: it holds in bytes (large messages) would otherwise wait for a timer.
_ACK_BYTES = 1024 * 1024
_OPEN = SessionState.OPEN
_CLOSED = SessionState.CLOSED


def _packet_name(packet: Packet) -> str:
    return type(packet).__name__


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
        self.error: RemoteProtocolError | None = None
        self._decoder = PacketDecoder()
        self._events: deque[SessionEvent] = deque()
        self._out: list[bytes] = []
        #: Where each received UserMessage goes: forwarded, refused, accepted (MS-MQQB
        #: 3.1.1.6.2, 3.1.5.8).
        self._router = ArrivalRouter(
            local_qm, self.incoming, self._events, self.refuse, arrival_check=arrival_check, routing=routing
        )
        #: The establishment and what it negotiates (MS-MQQB 3.1.5.2-3.1.5.4).
        self._handshake = Handshake(
            role, local_qm, self.remote_qm, self.config, peer, self._router.identity_refusal
        )
        #: The sending side: counters, window, what awaits a SessionAck (MS-MQQB 3.1.7.1).
        self.sending = SendWindow(self.config.window_size, peer)
        # Receive-side session counters (MS-MQQB 3.1.1.3.1), u16 on the wire.
        self.message_received_count = 0
        self.recoverable_message_received_count = 0
        self.last_acked_recoverable_msg_seq_number = 0
        self.unacked_received_msg_count = 0
        self._received_bytes = 0  # bytes received since the last SessionHeader sent
        self.ack_wait_timeout = self.config.ack_wait_timeout
        #: RecoverableAckSendTimeout, seconds (computed during the handshake).
        self.recoverable_ack_send_timeout = self._handshake.recoverable_ack_send_timeout
        #: The EstablishConnection round trip an initiator measured (its TimeStamp
        #: echoed, MS-MQQB 3.1.5.3), seconds; None on an acceptor.
        self.round_trip: float | None = None
        self.direct_format_session = False
        # Recoverable numbers received and persisted, not yet reported in a SessionHeader.
        self._persisted_unacked: set[int] = set()
        self._session_active = False
        self._received_ack = False
        # Timers (deadlines, None = stopped), MS-MQQB 3.1.2.
        self._init_deadline: float | None = now + self.config.initialization_timeout
        self._cleanup_deadline: float | None = now + self.config.cleanup_interval
        self._ack_wait_deadline: float | None = None
        self._ack_send_deadline: float | None = None
        if role is Role.INITIATOR:
            # MS-MQQB 3.1.5.2.3: EstablishConnection request, state WAITING_ECR_MSG.
            self._send_packet(self._handshake.request(now))
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
        return self.sending.unacked_count

    @property
    def backlog(self) -> int:
        """Messages held back by the window."""
        return self.sending.held_count

    def unacknowledged_handles(self) -> list[int]:
        """Handles of the non-transactional messages given to this session that no
        SessionAck released (sent and awaiting one, or held by the window): after the
        session closes they go again on another (MS-MQQB 3.1.5.5.1, 3.1.6.1 re-dispatch)."""
        return self.sending.unacknowledged_handles()

    @property
    def unacked_bytes(self) -> int:
        """Encoded bytes of the UserMessages sent and not yet session-acknowledged (with
        :attr:`backlog`, what a sender holds for this session: a bound on them keeps large
        messages from filling its memory)."""
        return self.sending.window_bytes

    @property
    def send_window(self) -> int:
        """Packets this session may have unacknowledged: the smaller of its own
        WindowSize and the peer's advertised one (MS-MQQB 3.1.7.1)."""
        return self.sending.window()

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
        self.sending.extend(items)
        self._drain_backlog(now)

    def send_encoded(self, packets: list[bytes], now: float) -> None:
        """:meth:`send_user_messages` for encoded transactional UserMessages alone (each
        recoverable, without a SessionHeader: ``store.packet_rows.row_encoder``'s), none of
        which needs its handle back: the same packets on the wire, counted and acknowledged
        alike, held and numbered a run at a time instead of one by one."""
        if self.state is not SessionState.OPEN:
            raise LocalProtocolError(f"send_user_message in state {self.state.name}")
        self.sending.extend_encoded(packets)
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
        router = self._router
        for packet in packets:
            state = self.state
            if state is _CLOSED:
                return
            try:
                kind = type(packet)
                if state is not _OPEN or not (kind is UserMessage or kind is OrderAck or kind is FinalAck):
                    self._dispatch(packet, now)
                    continue
                # A UserMessage, OrderAck or FinalAck on an open session: the packet of nearly
                # every call, processed here rather than in a method per packet.
                # MS-MQQB 3.1.6.3: every received packet sets ReceivedAck.
                self._received_ack = True
                upacket: UserMessagePacket = packet  # type: ignore[assignment]  # its kind, checked above
                message: UserMessage = upacket if kind is UserMessage else upacket.message  # type: ignore[assignment,union-attr]
                # General processing (MS-MQQB 3.1.5.8.2).
                self.message_received_count = (self.message_received_count + 1) % _U16
                self.unacked_received_msg_count += 1
                user = message.user
                if not self.direct_format_session and isinstance(
                    user.destination_queue, DirectQueueFormatName
                ):
                    self.direct_format_session = True
                if self._ack_send_deadline is None:
                    self._ack_send_deadline = now + self.ack_wait_timeout / 2
                self._session_active = True
                # None for an express message; a RecoverableMessage number may be 0 (after the wrap).
                recoverable: int | None = None
                big = self._received_bytes >= _ACK_BYTES
                if (user.flags >> 5) & 0x3 == _DM_RECOVERABLE:  # UserHeader.Flags.DM
                    # MS-MQQB 3.1.5.8.7.
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
                        # Transactional messages are retained by the sender until their
                        # OrderAck whatever the SessionAck says: acknowledge at once. An
                        # OrderAck or a FinalAck is acknowledged at once when it is for this
                        # QM (the router says so), once stored when this QM passes it on.
                        self._persisted_unacked.add(recoverable)
                elif big or self.unacked_received_msg_count >= max(1, self.sending.window() // 2):
                    # Express: MS-MQQB 3.1.1.6.1 has the receiver acknowledge "at intervals
                    # defined by an acknowledgment timer or based on message count and session
                    # window size". By the timer alone (AckWaitTimeout / 2) an express stream
                    # would stop for seconds each time the sender's window filled; a SessionAck
                    # at half the window keeps it open (recoverable messages have their own
                    # burst of 32).
                    self._send_packet(SessionAck(self._make_session_header()))
                # SessionHeader processing (MS-MQQB 3.1.5.8.4) after the counters moved.
                if message.session is not None:
                    self._on_session_header(message.session, now)
                if router.route(upacket, message, recoverable, now) and recoverable is not None:
                    # An OrderAck or FinalAck for this QM: idempotent, acknowledged at once.
                    self._persisted_unacked.add(recoverable)
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
            if not self.sending.awaiting_ack:
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
            step = self._handshake.on_establish_connection(packet, self.state, now)
            self._on_handshake_step(step, "EstablishConnection", now)
        elif isinstance(packet, ConnectionParameters):
            step = self._handshake.on_connection_parameters(packet, self.state, now)
            self._on_handshake_step(step, "ConnectionParameters", now)
        else:
            if self.state is not SessionState.OPEN:
                raise RemoteProtocolError(
                    f"{self.peer}: {_packet_name(packet)} received in state {self.state.name} (MS-MQQB 3.1.5)"
                )
            if not isinstance(packet, SessionAck):  # receive_data takes the user-message packets
                raise RemoteProtocolError(f"{self.peer}: unexpected {_packet_name(packet)} (MS-MQQB 3.1.5)")
            self._on_session_header(packet.session, now)

    # -- establishment (MS-MQQB 3.1.5.3, 3.1.5.4) -------------------------------------

    def _on_handshake_step(self, step: HandshakeStep, packet_type: str, now: float) -> None:
        handshake = self._handshake
        self.remote_qm = handshake.remote_qm
        self._router.remote_qm = handshake.remote_qm
        self.round_trip = handshake.round_trip
        self.ack_wait_timeout = handshake.ack_wait_timeout
        self.recoverable_ack_send_timeout = handshake.recoverable_ack_send_timeout
        if step.reply is not None:
            self._send_packet(step.reply)
        refusal = step.refusal
        if refusal is not None:
            self._close(refusal.reason, packet_type, refusal.detail, rule=refusal.rule)
            return
        if step.state is SessionState.OPEN:
            self._init_deadline = None
            self.sending.received_window_size = handshake.received_window_size
            self.state = SessionState.OPEN
            self._events.append(handshake.established())
        elif step.state is not None:
            if step.state is SessionState.WAITING_CP_MSG:  # the acceptor's second wait
                self._init_deadline = now + self.config.initialization_timeout
            self.state = step.state

    # -- sending (MS-MQQB 3.1.7.1) -------------------------------------------------------

    def _drain_backlog(self, now: float) -> None:
        if self.sending.drain(self._out):
            if self._ack_wait_deadline is None:
                self._ack_wait_deadline = now + self._ack_wait_duration
            self._session_active = True

    # -- receiving -------------------------------------------------------------------

    def forget_sequences(self) -> None:
        """The QM dropped or replaced incoming sequences of its registry (expired, reset by
        an operator): forget the sequence objects cached for the stream in progress."""
        self._router.forget_sequences()

    def refuse(self, rule: str, packet_type: str, detail: str) -> None:
        """Close the session because the peer broke a trust rule of this QM (``rule``, a
        name from docs/security.md): nothing more it sent is processed. A
        :class:`ConnectionClosed` event with reason UNTRUSTED reports it."""
        if not self.closed:
            self._close(CloseReason.UNTRUSTED, packet_type, detail, rule=rule)

    def _make_session_header(self) -> SessionHeader:
        # MS-MQQB 3.1.6.4 / 3.1.7.1.3: then reset the receive-side bookkeeping.
        base, flags = recoverable_ack_fields(self._persisted_unacked)
        header = SessionHeader(
            ack_sequence_number=self.message_received_count,
            recoverable_msg_ack_seq_number=base,
            recoverable_msg_ack_flags=flags,
            user_msg_sequence_number=self.sending.message_sent_count,
            recoverable_msg_seq_number=self.sending.recoverable_message_sent_count,
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
        handles = self.sending.acknowledge(h)
        self._events.append(SessionAckReceived(h.ack_sequence_number, tuple(handles), h.window_size))
        # Restart the Session Ack Wait Timer if entries still await an ack, else stop it.
        self._ack_wait_deadline = (now + self._ack_wait_duration) if self.sending.awaiting_ack else None
        self._drain_backlog(now)
