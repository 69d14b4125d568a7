"""An MS-MQQB peer over a real TCP (or TLS) socket, built from the project's own
:class:`~openmsmq.protocol.session.Session`: it claims whatever QM GUID and sends whatever
packets a test builds (a forged peer, or a well-behaved one). Blocking, every wait bounded."""

from __future__ import annotations

import contextlib
import itertools
import socket
import ssl
import time
import uuid

from openmsmq.protocol.events import Role
from openmsmq.protocol.session import Session
from openmsmq.wire.constants import DeliveryMode
from openmsmq.wire.headers import TransactionHeader
from openmsmq.wire.ids import TxSequenceId
from openmsmq.wire.message import UserMessage
from openmsmq.wire.userheader import DirectQueueFormatName

_MESSAGE_IDS = itertools.count(1)


class SocketPeer:
    """Connects from ``local`` to ``host:port`` and completes the handshake as ``guid``
    (``tls``: a client context to wrap the socket in)."""

    def __init__(
        self, host: str, port: int, local: str, guid: uuid.UUID | None = None,
        tls: ssl.SSLContext | None = None, timeout: float = 10.0,
    ) -> None:  # fmt: skip
        self.host = host
        self.guid = guid or uuid.uuid4()
        raw = socket.create_connection((host, port), timeout, source_address=(local, 0))
        self.sock: socket.socket = tls.wrap_socket(raw, server_hostname=host) if tls is not None else raw
        self.sock.settimeout(timeout)
        self.session = Session(Role.INITIATOR, self.guid, time.monotonic(), peer=host)
        self.peer_closed = False
        self._flush()
        deadline = time.monotonic() + timeout
        while not self.session.is_open and not self.session.closed and not self.peer_closed:
            if time.monotonic() > deadline:
                raise TimeoutError("handshake")
            self.pump(0.2)

    def _flush(self) -> None:
        data = self.session.data_to_send()
        if data and not self.peer_closed:
            try:
                self.sock.sendall(data)
            except OSError:
                self.peer_closed = True

    def pump(self, seconds: float) -> None:
        """Read for up to ``seconds`` (what arrives is acknowledged at once)."""
        end = time.monotonic() + seconds
        while not self.peer_closed and time.monotonic() < end:
            self.sock.settimeout(max(0.01, end - time.monotonic()))
            try:
                data = self.sock.recv(65536)
            except TimeoutError:
                break
            except (OSError, ssl.SSLError):
                self.peer_closed = True
                break
            if not data:
                self.peer_closed = True
                break
            now = time.monotonic()
            self.session.receive_data(data, now)
            self.session.pending_events.clear()
            self.session.flush_acknowledgments(now)
            self._flush()

    @property
    def open(self) -> bool:
        """The session is open and the other side has not closed the connection."""
        return self.session.is_open and not self.peer_closed

    def send_bytes(self, data: bytes) -> None:
        """Raw bytes on the connection (a fuzzer's)."""
        try:
            self.sock.sendall(data)
        except OSError:
            self.peer_closed = True

    def send(self, packet: UserMessage, settle: float = 0.3) -> None:
        """Send ``packet`` on the open session, then read for ``settle`` seconds."""
        if self.session.is_open:
            self.session.send_user_message(packet, time.monotonic())
            self._flush()
        self.pump(settle)

    def transactional(
        self, queue: str, body: bytes, sequence: TxSequenceId, number: int, previous: int,
        source: uuid.UUID | None = None,
    ) -> UserMessage:  # fmt: skip
        """A transactional UserMessage for ``DIRECT=TCP:<host>\\<queue>``."""
        return UserMessage.build(
            source_qm=source or self.guid,
            message_id=next(_MESSAGE_IDS),
            destination_queue=DirectQueueFormatName(f"TCP:{self.host}\\{queue}"),
            body=body,
            sent_time=int(time.time()),
            delivery_mode=DeliveryMode.RECOVERABLE,
            transaction=TransactionHeader(sequence, number, previous),
        )

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
