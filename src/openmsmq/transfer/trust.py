"""Whom the transfer trusts for what: the MS-MQQB peer rules of docs/security.md.

MS-MQQB has no authentication of its own: a peer's QM GUID (EstablishConnection
ClientGuid / ServerGuid) and every UserHeader.SourceQueueManager it sends are claims. These
rules bind the claims to what this QM can check (the address a session comes from or
reaches, the configuration, a TLS certificate) so that one peer cannot act for another:

* **source-qm** -- a peer speaks for itself: a packet whose SourceQueueManager is not the
  session's QM is processed only on a session with a configured intermediate hop
  (``intermediate_hops``, or the next hop of a static route);
* **identity** -- a GUID pinned to networks (``allowed_peers``: ``{GUID}=CIDR``) is
  accepted from those networks only; a GUID bound to a certificate (TLS) only with it;
  and a GUID this QM reached by dialling an address is not accepted from another one;
* **ack-origin** -- an OrderAck or FinalAck is applied to an outgoing queue only when it
  came over a session with that queue's next hop and from the QM the queue sends to;
* **relay** -- a message for another QM is passed on only along a configured route
  (or with ``allow_relay``), and acknowledgments only back along the way this QM relayed;
* **sequence-cap** / **implausible-sequence** -- the incoming sequences are bounded and a
  new TxSequenceID may not start ahead of this QM's clock (protocol.incoming).

Each refusal is logged (the first of a kind per peer at once, repeats summed up) and
counted (``MetricsSink.count_refused``). The objects here hold policy and what was
learned from verified sessions; :class:`~openmsmq.transfer.engine.Transfer` applies them.
"""

from __future__ import annotations

import ipaddress
import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

from openmsmq.observability.repeats import RepeatedEvents
from openmsmq.observability.sink import MetricsSink
from openmsmq.protocol.events import Role

__all__ = ["AckOrigin", "PeerTrust", "SessionTrust", "TrustConfig"]

log = logging.getLogger("openmsmq.transfer")

#: Refusals come in bursts (a peer retrying, a flood): the first of each (peer, rule) at
#: once, the repeats summed up every minute.
_refusals = RepeatedEvents(log, interval=60.0)

#: GUIDs whose dialled addresses are remembered, and addresses kept per GUID.
_DIALLED_MAX = 4096
_ADDRESSES_PER_QM = 8

_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class TrustConfig:
    """The trust settings of a QM's transfer (``[mqqb]``, docs/configuration.md).

    ``intermediate_hops``: peers (host names, IP addresses, CIDR networks, or ``{GUID}``)
    whose sessions may carry messages of other QMs; the next hops of static routes are
    intermediate hops too. ``allow_relay``: pass on messages for any other QM (an open
    relay; default: only along static routes). ``pinned``: QM GUIDs and the networks each
    may connect from. ``sequence_clock_skew``: how far (s) a new TxSequenceID's TimeStamp
    may lie ahead of this QM's clock. ``max_incoming_sequences``: incoming sequences kept
    at most. ``incoming_sequence_max_idle``: a sequence idle this long is forgotten (and
    its persisted state deleted). ``upkeep_interval``: seconds between looks for expired
    sequences. ``stuck_after`` / ``stuck_repeat``: a sequence rejecting every message for
    this long is logged as a warning, again every ``stuck_repeat`` while it lasts.
    """

    intermediate_hops: tuple[str, ...] = ()
    allow_relay: bool = False
    pinned: tuple[tuple[uuid.UUID, tuple[str, ...]], ...] = ()
    sequence_clock_skew: float = 86_400.0
    max_incoming_sequences: int = 100_000
    incoming_sequence_max_idle: float = 90 * 86_400.0
    upkeep_interval: float = 60.0
    stuck_after: float = 60.0
    stuck_repeat: float = 600.0


def _networks(items: Iterable[str]) -> tuple[tuple[_Network, ...], frozenset[str]]:
    """CIDR networks and host names (lower-cased) of a list of peer entries."""
    nets: list[_Network] = []
    hosts: set[str] = set()
    for item in items:
        try:
            nets.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            hosts.add(item.lower())
    return tuple(nets), frozenset(hosts)


def _in(address: str, nets: tuple[_Network, ...]) -> bool:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    return any(ip in n for n in nets)


def _host(hop: str) -> str:
    """The host of ``host[:port]`` / ``[v6]:port``, lower-cased."""
    if hop.startswith("["):
        return hop[1:].partition("]")[0].lower()
    return (hop.partition(":")[0] if hop.count(":") == 1 else hop).lower()


@dataclass(frozen=True, slots=True)
class AckOrigin:
    """Where an OrderAck or FinalAck came from: the session's peer (as the transfer names
    it), the socket address, the session's QM and the packet's SourceQueueManager."""

    peer: str
    address: str
    session_qm: uuid.UUID
    source_qm: uuid.UUID


class PeerTrust:
    """The trust rules of one QM and what it learned from sessions it can vouch for.

    ``routes``: the static routes (destination, next hop) of the transfer; their next
    hops are intermediate hops. ``metrics`` counts the refusals."""

    def __init__(self, config: TrustConfig, routes: Iterable[tuple[str, str]], metrics: MetricsSink) -> None:
        self.config = config
        self.metrics = metrics
        hops = [e for e in config.intermediate_hops if not e.startswith("{")]
        self._hop_nets, self._hop_hosts = _networks(hops)
        self._hop_hosts |= {_host(hop) for _, hop in routes}
        self._hop_guids = frozenset(
            uuid.UUID(e.strip("{}")) for e in config.intermediate_hops if e.startswith("{")
        )
        self._route_destinations = frozenset(dest.lower() for dest, _ in routes)
        self._pins: dict[uuid.UUID, tuple[_Network, ...]] = {
            guid: _networks(nets)[0] for guid, nets in config.pinned
        }
        #: QM GUID -> the addresses this QM reached it at by dialling (in memory): a
        #: session that claims the GUID from another address is not that QM.
        self._dialled: dict[uuid.UUID, list[str]] = {}
        #: Next-hop host -> the GUID that answered when this QM last dialled it.
        self._answered: dict[str, uuid.UUID] = {}

    # ------------------------------------------------------------------ configuration

    def is_intermediate_hop(
        self, peer: str, address: str, remote_qm: uuid.UUID, hop_address: str = ""
    ) -> bool:
        """Whether a session with ``peer`` (socket ``address``; ``hop_address``: the
        address the last session to that next hop reached) may carry other QMs' messages."""
        names = {_host(peer), address.lower(), hop_address.lower()} - {""}
        if names & self._hop_hosts or remote_qm in self._hop_guids:
            return True
        return any(_in(n, self._hop_nets) for n in names)

    def configured(self, address: str) -> bool:
        """Whether ``address`` is a peer the configuration names: an intermediate hop (host,
        address or network of ``mqqb.intermediate_hops``, a route's next hop) or in the
        networks a GUID is pinned to."""
        address = address.lower()
        if address in self._hop_hosts or _in(address, self._hop_nets):
            return True
        return any(_in(address, nets) for nets in self._pins.values())

    def relays_to(self, host: str) -> bool:
        """Whether messages for destination ``host`` (a DIRECT= host, or ``{GUID}`` of a
        PRIVATE= name) may be passed on: a static route names it, or relaying is open."""
        return self.config.allow_relay or host.lower() in self._route_destinations

    def pinned(self, qm: uuid.UUID) -> bool:
        """``qm`` is bound to networks by ``allowed_peers``."""
        return qm in self._pins

    # ------------------------------------------------------------------ identities

    def identity_refusal(
        self, remote_qm: uuid.UUID, address: str, role: Role, certified: uuid.UUID | None = None
    ) -> str | None:
        """Why a session whose peer claims ``remote_qm`` from ``address`` is refused, or
        None. ``certified``: the GUID of the peer's TLS certificate (None: plain)."""
        if certified is not None and certified != remote_qm:
            return f"claims QM {remote_qm} but its certificate names QM {certified}"
        nets = self._pins.get(remote_qm)
        if nets is not None:
            if not _in(address, nets):
                return f"claims QM {remote_qm}, which mqqb.allowed_peers binds to other networks"
            return None
        if role is Role.ACCEPTOR and certified is None:
            known = self._dialled.get(remote_qm)
            if known and address.lower() not in known:
                return (
                    f"claims QM {remote_qm}, which this QM reaches at {', '.join(known)}"
                    " (pin it in mqqb.allowed_peers if it has several addresses)"
                )
        return None

    def verified(self, remote_qm: uuid.UUID, address: str, role: Role, certified: uuid.UUID | None) -> bool:
        """Whether the session's GUID is more than a claim: this QM dialled the address
        (what answers there is the QM there), a pin binds the GUID to the address, a
        certificate names it, or this QM reached that QM at this address before."""
        if role is Role.INITIATOR or certified == remote_qm:
            return True
        nets = self._pins.get(remote_qm)
        if nets is not None:
            return _in(address, nets)
        return address.lower() in self._dialled.get(remote_qm, ())

    def note_dialled(self, hop: str, address: str, remote_qm: uuid.UUID) -> None:
        """A session this QM opened to next hop ``hop`` reached ``address`` and the QM
        there answered as ``remote_qm`` (EstablishConnection ServerGuid)."""
        self._answered[_host(hop)] = remote_qm
        if not address:
            return
        known = self._dialled.get(remote_qm)
        if known is None:
            if len(self._dialled) >= _DIALLED_MAX:
                return
            known = self._dialled[remote_qm] = []
        if address.lower() not in known:
            known.append(address.lower())
            del known[:-_ADDRESSES_PER_QM]

    def answered(self, hop: str) -> uuid.UUID | None:
        """The GUID of the QM that answered when this QM last dialled ``hop``."""
        return self._answered.get(_host(hop))

    # ------------------------------------------------------------------ acknowledgments

    def ack_refusal(
        self,
        origin: AckOrigin,
        next_hop: str,
        hop_address: str,
        *,
        destination_qm: uuid.UUID | None,
        routed: bool,
        destination_host: str = "",
        via_intermediate: bool = False,
    ) -> str | None:
        """Why an OrderAck / FinalAck from ``origin`` may not be applied to an outgoing
        queue whose next hop is ``next_hop`` (``hop_address``: the address its last
        session reached) and whose destination QM is ``destination_qm`` (a PRIVATE=
        name's GUID, or the GUID that answered at the next hop; None when unknown), or
        None. ``routed``: a static route leads to the destination through another QM,
        which carries the destination's acknowledgments (its identity cannot be checked
        here: the configured hop is trusted for that path). ``destination_host``: the host
        of a DIRECT= destination reached through another QM; the destination's own session
        from that address, speaking for itself, may acknowledge too (acknowledgments are
        messages that take their own way back, MS-MQQB 3.1.7.17). ``via_intermediate``: the
        session is with a configured intermediate hop, trusted to carry other QMs'
        acknowledgments (the way back may differ from the way there); the acknowledgment
        must still name the destination QM when it is known."""
        names = {_host(origin.peer), origin.address.lower()} - {""}
        if via_intermediate:
            if destination_qm is not None and origin.source_qm != destination_qm:
                return f"comes from QM {origin.source_qm}, the queue sends to QM {destination_qm}"
            return None
        if (
            routed
            and destination_host
            and destination_host.lower() in names
            and origin.source_qm == origin.session_qm
            and (destination_qm is None or origin.source_qm == destination_qm)
        ):
            return None
        hop = _host(next_hop)
        if hop not in names and (not hop_address or hop_address.lower() not in names):
            return f"came over a session with {origin.peer}, not with the queue's next hop {next_hop}"
        if not routed and origin.source_qm != origin.session_qm:
            return f"names QM {origin.source_qm} as its source on the session of QM {origin.session_qm}"
        if destination_qm is not None and origin.source_qm != destination_qm:
            return f"comes from QM {origin.source_qm}, the queue sends to QM {destination_qm}"
        return None

    # ------------------------------------------------------------------ refusals

    def refused(self, peer: str, rule: str, what: str, detail: str) -> None:
        """Log (once per peer and rule, repeats summed up) and count a refusal."""
        self.metrics.count_refused(rule)
        _refusals.log(
            (peer, rule), logging.WARNING, "refused %s from %s (rule %s): %s", what, peer, rule, detail
        )


class SessionTrust:
    """The trust rules as one session applies them while it decodes (given to
    :class:`~openmsmq.transfer.session.TransferRouting`): whether its peer's identity
    is acceptable, and whether it may carry other QMs' messages. ``certified`` is the QM
    GUID of the peer's TLS certificate, when the connection is TLS."""

    def __init__(
        self, trust: PeerTrust, peer: str, address: str, role: Role, hop_address: str = "",
        certified: uuid.UUID | None = None,
    ) -> None:  # fmt: skip
        self.trust = trust
        self.peer = peer
        self.address = address
        self.role = role
        self.hop_address = hop_address
        self.certified = certified
        self._carries: bool | None = None

    def identity_refusal(self, remote_qm: uuid.UUID) -> str | None:
        """See :meth:`PeerTrust.identity_refusal`."""
        return self.trust.identity_refusal(remote_qm, self.address, self.role, self.certified)

    def carries_others(self, remote_qm: uuid.UUID) -> bool:
        """The session is with a configured intermediate hop (decided once per session)."""
        if self._carries is None:
            self._carries = self.trust.is_intermediate_hop(
                self.peer, self.address, remote_qm, self.hop_address
            )
        return self._carries
