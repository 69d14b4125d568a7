"""The ``ack-origin`` rule of the transfer (docs/security.md): an OrderAck or FinalAck is
taken only from the peer that may speak for the messages it would settle. Its TxSequenceID
is no secret (a time and a counter, MS-MQQB 3.1.1.3.1, sent in clear): any peer could
otherwise release a sequence this QM sends elsewhere, and its messages would be lost."""

from __future__ import annotations

import uuid

from openmsmq.store.records import MessageRecord
from openmsmq.transfer.codec import direct_name, split_direct
from openmsmq.transfer.connections import Connections
from openmsmq.transfer.session import Conn
from openmsmq.transfer.state import OutgoingTransfer, TransferConfig, hop_host
from openmsmq.transfer.trust import AckOrigin, PeerTrust
from openmsmq.wire.remote_names import private_name

__all__ = ["AckOriginCheck"]


class AckOriginCheck:
    """Whether an acknowledgment may settle what it names: None, or why not."""

    def __init__(self, config: TransferConfig, trust: PeerTrust, connections: Connections) -> None:
        self._config = config
        self._trust = trust
        self._connections = connections

    def for_queue(self, conn: Conn, source_qm: uuid.UUID, t: OutgoingTransfer) -> str | None:
        """The rule for an OrderAck / FinalAck from ``source_qm`` on ``conn`` that would
        settle messages of ``t``: it must come over a session with ``t``'s next hop, a
        configured intermediate hop or, for a DIRECT= name reached through another QM, the
        destination's own session, from the QM ``t`` sends to (a PRIVATE= name's GUID, or
        the QM that answered when this QM dialled the next hop)."""
        trust = self._trust
        reached = self._connections.reached
        hop = hop_host(t.next_hop)
        private = t.destination_qm is not None
        routed = private or hop != t.host.lower()
        destination = t.destination_qm if private else (None if routed else trust.answered(hop))
        origin = AckOrigin(conn.peer, conn.address, conn.session.remote_qm, source_qm)
        return trust.ack_refusal(
            origin, t.next_hop, reached(hop), destination_qm=destination, routed=routed,
            destination_host="" if private else t.host,
            via_intermediate=trust.is_intermediate_hop(
                conn.peer, conn.address, conn.session.remote_qm, reached(hop_host(conn.peer)),
            ),
        )  # fmt: skip

    def for_stored(self, origin: AckOrigin, m: MessageRecord) -> str | None:
        """The rule for a FinalAck from ``origin`` that matched ``m``, a message waiting in
        the store for it (called on the store's thread: it reads the configuration and
        single dict entries only). For a ``PRIVATE=<guid>`` destination the FinalAck must
        come from that QM."""
        wire = direct_name(m.destination_queue)
        parts = split_direct(wire) if wire else None
        if parts is None:
            private = private_name(m.destination_queue)
            if private is not None and origin.source_qm != private[0]:
                return f"comes from QM {origin.source_qm}, the message went to QM {private[0]}"
            return None
        host = parts[0].lower()
        hop = hop_host(self._config.next_hop(host))
        routed = hop != host
        return self._trust.ack_refusal(
            origin,
            hop,
            self._connections.reached(hop),
            destination_qm=None if routed else self._trust.answered(hop),
            routed=routed,
        )
