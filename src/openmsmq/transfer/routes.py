"""The ways to other queue managers a :class:`~openmsmq.transfer.engine.Transfer` learns
while it runs (in memory only): where ``PRIVATE=<guid>`` names and the acknowledgments
of relayed messages go when no static route names the QM (MS-MQQB 3.1.7.17,
DestinationForAck ``PRIVATE=<guid>``).

Three sources, in the order :meth:`LearnedRoutes.way_to` asks them:

* the peer of the last *verified* session of a QM (never a peer's mere claim of a GUID,
  docs/security.md);
* the session on which a QM's own transactional messages arrived (the way back for
  their OrderAcks and FinalAcks);
* the previous hop of the last packet from a QM this QM forwarded (the way back to a
  QM several hops away).

Each map holds at most :data:`QM_PEERS_MAX` QMs: a peer inventing GUIDs cannot grow it
without bound.
"""

from __future__ import annotations

import uuid
from collections.abc import Set

from openmsmq.protocol.events import UserMessagePacket
from openmsmq.transfer.codec import split_direct
from openmsmq.transfer.connections import Connections
from openmsmq.transfer.state import TransferConfig
from openmsmq.wire.ids import NULL_GUID
from openmsmq.wire.packets import FinalAck, OrderAck, UserMessage
from openmsmq.wire.userheader import DirectQueueFormatName

__all__ = ["QM_PEERS_MAX", "LearnedRoutes", "QmRoutes", "relay_refusal"]

#: Remote QMs remembered per map (new ones beyond are not).
QM_PEERS_MAX = 4096


class LearnedRoutes:
    """The learned ways to remote QMs, by QM GUID (the single owner of them).

    ``local_hosts``: the hosts naming this QM; a learned address among them is no route
    (QMs on one address apart by port: it would only loop back here)."""

    def __init__(self, local_hosts: Set[str], limit: int = QM_PEERS_MAX) -> None:
        self._local_hosts = local_hosts
        self._limit = limit
        #: QM GUID -> the peer of its last verified session.
        self._qm_peers: dict[uuid.UUID, str] = {}
        #: QM GUID -> the peer of the session its own transactional messages came on.
        self._senders: dict[uuid.UUID, str] = {}
        #: Source QM GUID -> the previous hop of the last packet from it this QM forwarded.
        self._reverse: dict[uuid.UUID, str] = {}
        #: Source QMs whose ``_reverse`` entry is that QM's own session: a packet of it
        #: coming back around a route loop does not replace it with the loop's hop.
        self._reverse_direct: set[uuid.UUID] = set()

    def session_verified(self, qm: uuid.UUID, peer: str) -> None:
        """A session with ``qm`` (its GUID verified: a pin, a certificate, or this QM
        dialled it) opened with ``peer``."""
        ways = self._qm_peers
        if qm in ways or len(ways) < self._limit:
            ways[qm] = peer

    def sender_seen(self, qm: uuid.UUID, peer: str) -> None:
        """Transactional messages of ``qm`` came on its own session with ``peer``."""
        ways = self._senders
        if qm in ways or len(ways) < self._limit:
            ways[qm] = peer

    def forwarded(self, source: uuid.UUID, peer: str, *, direct: bool) -> None:
        """This QM forwards a packet of ``source`` that came from ``peer``; ``direct``:
        ``peer``'s session is that of ``source`` itself."""
        ways = self._reverse
        if direct:
            if source in ways or len(ways) < self._limit:
                ways[source] = peer
                self._reverse_direct.add(source)
        elif source not in self._reverse_direct and (source in ways or len(ways) < self._limit):
            ways[source] = peer

    def session_closed(self, qm: uuid.UUID) -> None:
        """The session of ``qm`` closed: a later packet of it may teach another way back."""
        self._reverse_direct.discard(qm)

    def relayed_from(self, qm: uuid.UUID) -> bool:
        """This QM forwarded packets of ``qm``: its acknowledgments may go back that way."""
        return qm in self._reverse

    def way_to(self, qm: uuid.UUID) -> str | None:
        """The learned peer for ``qm`` (verified session, then its senders' session, then
        the way back of what was forwarded), or None; never one of this QM's hosts."""
        local = self._local_hosts
        for ways in (self._qm_peers, self._senders, self._reverse):
            learned = ways.get(qm)
            if learned is not None and learned not in local:
                return learned
        return None


class QmRoutes:
    """Where a ``PRIVATE=<qm>`` name goes, from the open sessions, the static routes and
    the ``learned`` ways (OrderAcks and FinalAcks going back to a sender behind this QM,
    outgoing queues of PRIVATE= names)."""

    def __init__(self, config: TransferConfig, connections: Connections, learned: LearnedRoutes) -> None:
        self._config = config
        self._connections = connections
        self._learned = learned

    def qm_route(self, qm: uuid.UUID) -> str | None:
        """``qm``'s open, verified session here (one this QM opened, or one a pin or a
        certificate vouches for: not a peer's mere claim), else a static route for its
        GUID, else the address of its last verified session, else the session its
        transactional messages came on, else the previous hop of the last packet from it
        this QM forwarded (the way back); None if unknown. A learned address of this QM
        itself (QMs on one address, apart by port) is no route: it would only loop back
        here."""
        for conn in self._connections.values():
            if conn.open and conn.verified and conn.session.remote_qm == qm:
                return conn.peer
        hop = self._config.next_hop_for_qm(qm)
        if hop is not None:
            return hop
        # The QM whose transactional messages came on its own session here is the way back
        # for their acknowledgments (MS-MQQB 3.1.7.17, DestinationForAck PRIVATE=<guid>
        # for a session that is not direct-format). A bare claim of the GUID, with no
        # messages, teaches nothing; pinning the GUID keeps others from sending as it.
        return self._learned.way_to(qm)


def relay_refusal(
    config: TransferConfig, routes: LearnedRoutes, packet: UserMessagePacket, message: UserMessage
) -> str | None:
    """Why this QM does not pass ``packet`` on for another QM (the ``relay`` rule), or
    None. Relaying is opt-in: along a static route for the destination (its DIRECT=
    host, or the GUID of a PRIVATE= name), or anywhere with ``allow_relay``; an
    OrderAck or FinalAck also goes back to a QM whose messages this QM relayed (the way
    they came, ``routes``). Without it any peer could make this QM carry its messages to
    a third host (an open relay)."""
    if config.trust.allow_relay:
        return None
    qm = message.destination_qm
    if qm != NULL_GUID:
        if config.next_hop_for_qm(qm) is not None:
            return None
        if isinstance(packet, OrderAck | FinalAck) and routes.relayed_from(qm):
            return None
        return f"no route for QM {qm} (mqqb.routes {{{qm}}}, or mqqb.allow_relay)"
    dest = message.destination_queue
    parts = split_direct(dest.name) if isinstance(dest, DirectQueueFormatName) else None
    if parts is None or config.routed(parts[0]):
        return None  # (not a direct name: dropped below as having no route)
    return f"no route for {parts[0]} (mqqb.routes, or mqqb.allow_relay)"
