"""Intermediate hop (seed 003): packets for other queue managers passed on with their
TransactionHeader untouched, under the ``relay`` rule (docs/security.md)."""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import replace

from openmsmq.observability.sink import MetricsSink
from openmsmq.protocol.events import UserMessagePacket, destination_key
from openmsmq.transfer.acknowledgments import AckSession
from openmsmq.transfer.codec import message_from_packet, split_direct
from openmsmq.transfer.connections import Connections
from openmsmq.transfer.routes import LearnedRoutes, QmRoutes, relay_refusal
from openmsmq.transfer.session import Conn, ack_session_of
from openmsmq.transfer.state import TransferConfig
from openmsmq.transfer.store_work import StoreWorkQueue
from openmsmq.transfer.trust import PeerTrust
from openmsmq.wire.constants import MessageClass
from openmsmq.wire.ids import NULL_GUID
from openmsmq.wire.packets import FinalAck, OrderAck, UserMessage
from openmsmq.wire.userheader import DirectQueueFormatName

__all__ = ["Forwarder"]

log = logging.getLogger("openmsmq.transfer")

#: MS-MQQB 3.1.5.8.2: a forwarded message whose hop count would exceed 0x1D is dropped.
_MAX_HOPS = 0x1D
#: Forwarded packets kept per next hop while no session to it is open.
_FORWARD_BUFFER = 100_000


class Forwarder:
    """Passes packets on for other QMs (the single owner of the packets waiting for a
    session to their next hop); recoverable ones go through ``store`` (store and
    forward). ``stats``: the transfer's counters (this part adds ``forwarded``)."""

    def __init__(
        self,
        config: TransferConfig,
        connections: Connections,
        learned: LearnedRoutes,
        routes: QmRoutes,
        trust: PeerTrust,
        store: StoreWorkQueue,
        metrics: MetricsSink,
        stats: dict[str, int],
    ) -> None:
        self._config = config
        self._connections = connections
        self._learned = learned
        self._routes = routes
        self._trust = trust
        self._store = store
        self._metrics = metrics
        self._stats = stats
        #: Next hop -> packets waiting for a session to it.
        self._buffers: dict[str, deque[UserMessagePacket]] = {}
        #: (source QM GUID, connection) of the last forwarded packet checked and learned.
        self._last_reverse: tuple[object, object] = (None, None)
        #: Packets were buffered for a next hop at some point (tested without a call on
        #: every look for wanted peers; :meth:`waiting_hops` then says which).
        self.buffering = False

    def waiting_hops(self) -> set[str]:
        """Next hops packets wait for (a session to each is wanted)."""
        return {peer for peer, buf in self._buffers.items() if buf}

    def peer_up(self, peer: str, now: float) -> None:
        """A session to ``peer`` opened: what waited for it goes."""
        buf = self._buffers.get(peer)
        conn = self._connections.open_to(peer)
        while buf and conn is not None:
            conn.session.send_user_message(buf.popleft(), now)

    def forward(
        self, packet: UserMessagePacket, now: float, conn: Conn | None = None, recoverable: int | None = None
    ) -> None:
        """Intermediate hop (seed 003): pass the packet on with its TransactionHeader
        untouched; only the hop count moves and the previous hop's SessionHeader goes.

        A recoverable non-transactional message (``recoverable``: its number on ``conn``)
        is stored and forwarded: it goes into the outgoing queue of its destination and is
        acknowledged once stored, so the previous hop releases it and a crash here keeps
        it. Other packets are forwarded in memory: transactional ones are resent by their
        sender until the end-to-end OrderAck, express ones carry no promise."""
        message = packet if isinstance(packet, UserMessage) else packet.message
        source = message.user.source_queue_manager
        if conn is not None and (self._last_reverse[0] is not source or self._last_reverse[1] is not conn):
            refusal = relay_refusal(self._config, self._learned, packet, message)
            if refusal is not None:
                # Not passed on and not acknowledged: a recoverable one stays with its
                # sender, a transactional one too (it waits for an OrderAck).
                what = f"a message for {destination_key(message.destination_queue, message.destination_qm)}"
                self._trust.refused(conn.peer, "relay", what, refusal)
                return
            # The decoder shares GUID objects: a stream costs one dict write, not one each.
            self._learned.forwarded(source, conn.peer, direct=conn.session.remote_qm == source)
            self._last_reverse = (source, conn)
        hops = message.hop_count + 1
        if hops > _MAX_HOPS:
            log.warning("dropping message %s: hop count exceeded", message.message_id)
            if isinstance(packet, UserMessage) and message.properties.message_class == 0:
                # NACK_HOP_COUNT_EXCEEDED (MS-MQQB 3.1.5.8.2): the admin NACK and, "if the
                # packet contains a TransactionHeader", the FinalAck: back the way the
                # message came when the previous hop is not its sender (ack_session_of).
                session = ack_session_of(conn, source) if conn is not None else AckSession(False, "", source)
                dest = message.destination_queue
                name = "DIRECT=" + dest.name if isinstance(dest, DirectQueueFormatName) else ""
                self._store.add_refusal(
                    message_from_packet(message, name), MessageClass.NACK_HOP_COUNT_EXCEEDED, session
                )
            return
        user = replace(message.user, flags=(message.user.flags & ~0x1F) | hops)
        message = replace(message, user=user, session=None)
        if recoverable is not None and conn is not None:
            dest = message.destination_queue
            if isinstance(dest, DirectQueueFormatName):
                name = "DIRECT=" + dest.name
            else:
                name = destination_key(dest, message.destination_qm)  # PRIVATE=<guid>\n
            self._store.add_forward((name, message_from_packet(message, name), conn.cid, recoverable))
            self._stats["forwarded"] += 1
            self._metrics.count_forwarded(1)
            return
        out: UserMessagePacket
        if isinstance(packet, OrderAck):
            out = OrderAck(message)
        elif isinstance(packet, FinalAck):
            out = FinalAck(message)
        else:
            out = message
        peer = None
        if message.destination_qm != NULL_GUID:
            # PRIVATE= names (OrderAcks and FinalAcks going back to a sender behind this
            # QM): see QmRoutes.
            peer = self._routes.qm_route(message.destination_qm)
        else:
            dest = message.destination_queue
            parts = split_direct(dest.name) if isinstance(dest, DirectQueueFormatName) else None
            if parts is not None:
                peer = self._config.next_hop(parts[0])
        if peer is None:
            log.warning("dropping message %s: no route to its destination", message.message_id)
            return
        self._stats["forwarded"] += 1
        self._metrics.count_forwarded(1)
        conn = self._connections.open_to(peer)
        if conn is not None:
            conn.session.send_user_message(out, now)
            return
        buf = self._buffers.setdefault(peer, deque())
        self.buffering = True
        if len(buf) < _FORWARD_BUFFER:
            buf.append(out)  # the original sender resends what is lost (end to end)
