"""Establishment of one MS-MQQB session (MS-MQQB 3.1.5.2-3.1.5.4, 3.1.5.10), sans-I/O.

:class:`Handshake` owns what the two packets of each side negotiate: the peer's identity
(RemoteQMGuid), its window, AckWaitTimeout, RecoverableAckSendTimeout and the round trip
an initiator measures. It decides, for each EstablishConnection or ConnectionParameters
packet, the reply, the next :class:`~openmsmq.protocol.events.SessionState` or the
refusal that closes the session (:class:`HandshakeStep`); the
:class:`~openmsmq.protocol.session.Session` that holds it sends the reply and moves its
state. A packet out of order or out of range raises
:class:`~openmsmq.errors.RemoteProtocolError`. No I/O, no clock.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import NamedTuple

from openmsmq.errors import RemoteProtocolError
from openmsmq.protocol.events import CloseReason, EstablishmentComplete, Role, SessionConfig, SessionState
from openmsmq.wire.constants import OperatingSystemFlag
from openmsmq.wire.headers import ConnectionParametersHeader, EstablishConnectionHeader
from openmsmq.wire.ids import NULL_GUID
from openmsmq.wire.packets import ConnectionParameters, EstablishConnection, Packet

__all__ = ["RECOVERABLE_ACK_MAX_MS", "Handshake", "HandshakeStep", "Refusal"]

#: RecoverableAckTimeout range, ms (MS-MQQB 2.2.2.1, 3.1.5.3.2).
RECOVERABLE_ACK_MIN_MS = 0x1F4
RECOVERABLE_ACK_MAX_MS = 0x1D4C0


class Refusal(NamedTuple):
    """Why the handshake ends the session: the close reason, the detail, the trust rule."""

    reason: CloseReason
    detail: str
    rule: str = ""


class HandshakeStep(NamedTuple):
    """What one handshake packet leads to: a packet to send (or None), then either the
    next state (None: unchanged) or a :class:`Refusal` that closes the session."""

    reply: Packet | None
    state: SessionState | None
    refusal: Refusal | None = None


class Handshake:
    """The establishment of one session and the parameters it negotiates."""

    def __init__(
        self,
        role: Role,
        local_qm: uuid.UUID,
        remote_qm: uuid.UUID,
        config: SessionConfig,
        peer: str,
        identity_refusal: Callable[[uuid.UUID], str | None],
    ) -> None:
        """``remote_qm``: RemoteQMGuid, NULL for an initiator's direct format name (the
        acceptor's identity is then adopted). ``identity_refusal(qm)``: why the QM does not
        accept the peer's claim to be ``qm`` (its ``identity`` rule), or None."""
        self.role = role
        self.local_qm = local_qm
        self.remote_qm = remote_qm
        self.config = config
        self.peer = peer
        self._identity_refusal = identity_refusal
        #: ReceivedWindowSize as the peer's ConnectionParameters gave it (0 until then).
        self.received_window_size = config.window_size
        self.ack_wait_timeout = config.ack_wait_timeout
        #: RecoverableAckSendTimeout, seconds (computed during the handshake).
        self.recoverable_ack_send_timeout = RECOVERABLE_ACK_MAX_MS / 1000.0
        #: The EstablishConnection round trip an initiator measured (its TimeStamp
        #: echoed, MS-MQQB 3.1.5.3), seconds; None on an acceptor.
        self.round_trip: float | None = None
        self._ec_timestamp = 0

    def request(self, now: float) -> EstablishConnection:
        """The initiator's EstablishConnection request (MS-MQQB 3.1.5.2.3); its TimeStamp
        is ``now`` in milliseconds, echoed back to measure the round trip."""
        self._ec_timestamp = int(now * 1000) & 0xFFFFFFFF
        header = EstablishConnectionHeader(
            client_guid=self.local_qm,
            server_guid=self.remote_qm,
            timestamp=self._ec_timestamp,
            operating_system=0x10 | OperatingSystemFlag.SE,
        )
        return EstablishConnection(header)

    def established(self) -> EstablishmentComplete:
        """The event of a session that became OPEN."""
        return EstablishmentComplete(
            self.remote_qm,
            self.received_window_size,
            self.ack_wait_timeout,
            self.recoverable_ack_send_timeout,
            self.round_trip,
        )

    def on_establish_connection(
        self, packet: EstablishConnection, state: SessionState, now: float
    ) -> HandshakeStep:
        """MS-MQQB 3.1.5.3: the acceptor's request, or the initiator's response."""
        h = packet.header
        if state is SessionState.WAITING_EC_MSG:  # acceptor, request
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
            answer = EstablishConnection(reply, internal_flags=0x10 if refused else 0)
            if untrusted is not None:
                return HandshakeStep(answer, None, Refusal(CloseReason.UNTRUSTED, untrusted, "identity"))
            if refused:
                detail = f"ServerGuid {h.server_guid} is neither this QM nor GUID_NULL"
                return HandshakeStep(answer, None, Refusal(CloseReason.REFUSED, detail))
            return HandshakeStep(answer, SessionState.WAITING_CP_MSG)
        if state is SessionState.WAITING_ECR_MSG:  # initiator, response
            if packet.connection_refused:
                return HandshakeStep(None, None, Refusal(CloseReason.REFUSED, "acceptor refused (CS = 1)"))
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
                return HandshakeStep(None, None, Refusal(CloseReason.UNTRUSTED, untrusted, "identity"))
            rtt_ms = ((int(now * 1000) & 0xFFFFFFFF) - h.timestamp) & 0xFFFFFFFF
            # A handshake finishes within the Session Initialization Timer (60 s): a longer
            # "round trip" comes from a TimeStamp the peer did not echo as sent.
            self.round_trip = rtt_ms / 1000.0 if rtt_ms <= self.config.initialization_timeout * 1000 else None
            rec_ms = min(max(8 * rtt_ms, RECOVERABLE_ACK_MIN_MS), RECOVERABLE_ACK_MAX_MS)
            self.recoverable_ack_send_timeout = rec_ms / 1000.0
            parameters = ConnectionParameters(
                ConnectionParametersHeader(
                    recoverable_ack_timeout=rec_ms,
                    ack_timeout=int(self.ack_wait_timeout * 1000),
                    window_size=self.config.window_size,
                )
            )
            return HandshakeStep(parameters, SessionState.WAITING_CPR_MSG)
        raise RemoteProtocolError(
            f"{self.peer}: EstablishConnection received in state {state.name} (MS-MQQB 3.1.5.3)"
        )

    def on_connection_parameters(
        self, packet: ConnectionParameters, state: SessionState, now: float
    ) -> HandshakeStep:
        """MS-MQQB 3.1.5.4: the acceptor's request, or the initiator's response; either
        opens the session."""
        h = packet.header
        if packet.connection_refused:
            return HandshakeStep(None, None, Refusal(CloseReason.REFUSED, "peer refused (CS = 1)"))
        reply: Packet | None = None
        if state is SessionState.WAITING_CP_MSG:  # acceptor, request
            if not RECOVERABLE_ACK_MIN_MS <= h.recoverable_ack_timeout <= RECOVERABLE_ACK_MAX_MS:
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
            reply = ConnectionParameters(
                ConnectionParametersHeader(
                    recoverable_ack_timeout=h.recoverable_ack_timeout,
                    ack_timeout=h.ack_timeout,
                    window_size=self.config.window_size,
                )
            )
        elif state is SessionState.WAITING_CPR_MSG:  # initiator, response
            self.received_window_size = h.window_size
        else:
            raise RemoteProtocolError(
                f"{self.peer}: ConnectionParameters received in state {state.name} (MS-MQQB 3.1.5.4)"
            )
        return HandshakeStep(reply, SessionState.OPEN)
