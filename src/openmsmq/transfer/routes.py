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

__all__ = ["QM_PEERS_MAX", "LearnedRoutes"]

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
