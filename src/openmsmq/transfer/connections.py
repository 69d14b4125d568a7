"""The table of MS-MQQB connections of a :class:`~openmsmq.transfer.engine.Transfer`:
one :class:`~openmsmq.transfer.session.Conn` per TCP connection, by connection id, and
the open session to a next hop (the one every outgoing queue and forwarded packet for
that hop goes on)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, ValuesView

from openmsmq.protocol.events import Role
from openmsmq.transfer.session import Conn
from openmsmq.transfer.state import SessionStatus

__all__ = ["SLOW_LINK_MIN_ROUND_TRIP", "SLOW_LINK_RATE", "Connections"]

log = logging.getLogger("openmsmq.transfer")

#: A session whose window allows fewer messages per second than this over its measured
#: round trip (window / round trip) is logged once per next hop with what to change;
#: round trips under SLOW_LINK_MIN_ROUND_TRIP are never (a loaded host answers a
#: handshake late now and then: not a link to tune).
SLOW_LINK_RATE = 10_000
SLOW_LINK_MIN_ROUND_TRIP = 0.005


class Connections:
    """The connections of one transfer, by id (their single owner)."""

    def __init__(self) -> None:
        self._by_id: dict[int, Conn] = {}
        self._next_id = 1
        #: ``get(cid)`` -> the connection, or None (the dict's own ``get``: no extra call
        #: per packet read).
        self.get: Callable[[int], Conn | None] = self._by_id.get
        #: ``values()`` -> a view of the connections (the dict's own, as ``get``).
        self.values: Callable[[], ValuesView[Conn]] = self._by_id.values
        #: Next hops whose window / round trip was logged as slow (check_link).
        self._slow_links: set[str] = set()
        #: Next-hop host -> the address its last session this QM dialled reached.
        self._reached: dict[str, str] = {}

    def new_id(self) -> int:
        """A connection id not used before in this transfer."""
        cid = self._next_id
        self._next_id += 1
        return cid

    def add(self, conn: Conn) -> None:
        self._by_id[conn.cid] = conn

    def remove(self, cid: int) -> None:
        del self._by_id[cid]

    def note_reached(self, hop: str, address: str) -> None:
        """A session this QM dialled to next-hop host ``hop`` reached ``address``."""
        self._reached[hop] = address

    def reached(self, hop: str) -> str:
        """The address the last session dialled to next-hop host ``hop`` reached ("" if none)."""
        return self._reached.get(hop, "")

    def hops_reaching(self, addresses: set[str]) -> set[str]:
        """The next-hop hosts whose last dialled session reached one of ``addresses``."""
        return {hop for hop, address in self._reached.items() if address in addresses}

    def __iter__(self) -> Iterator[Conn]:
        return iter(self._by_id.values())

    def __len__(self) -> int:
        return len(self._by_id)

    def open_to(self, peer: str) -> Conn | None:
        """The open session to next hop ``peer``: one this QM dialled first, else one the
        peer dialled; None when none is open."""
        best = None
        for c in self._by_id.values():
            if c.peer == peer and c.open and not c.session.closed:
                if c.role is Role.INITIATOR:
                    return c
                best = best or c
        return best

    def check_link(self, peer: str, window: int, round_trip: float) -> None:
        """Log once per next hop when the session window caps its rate below
        :data:`SLOW_LINK_RATE`: a session sends at most ``window`` packets per round trip
        (MS-MQQB 3.1.7.1: UnAckedMessageCount below the window), so a link of 50 ms
        with the default window of 64 moves about 1,280 messages a second however fast
        both QMs are. The window is the smaller of the two QMs' WindowSize."""
        if round_trip < SLOW_LINK_MIN_ROUND_TRIP or peer in self._slow_links:
            return
        rate = window / round_trip
        if rate >= SLOW_LINK_RATE:
            return
        self._slow_links.add(peer)
        log.warning(
            "session to %s: a round trip of %.0f ms with a window of %d packets allows at most about"
            " %s messages/s on it; raise protocol.window_size on both queue managers for this link"
            " (docs/operations.md, links with a long round trip)",
            peer, round_trip * 1000, window, f"{rate:,.0f}",
        )  # fmt: skip

    def statuses(self) -> list[SessionStatus]:
        """Per connection not closed: peer, direction, handshake state, window, round trip."""
        return [
            SessionStatus(
                c.peer,
                c.address,
                c.role.name.lower(),
                c.open,
                c.session.remote_qm,
                c.session.send_window,
                c.session.round_trip,
                c.certified is not None,
            )
            for c in self._by_id.values()
            if not c.session.closed
        ]
