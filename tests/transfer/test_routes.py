"""The learned ways to remote QMs (openmsmq.transfer.routes): their order, their bound,
and a route loop that does not replace a QM's own session."""

from __future__ import annotations

import uuid

from openmsmq.transfer.routes import LearnedRoutes


def test_verified_session_then_senders_then_way_back() -> None:
    routes = LearnedRoutes(frozenset({"here"}))
    qm = uuid.uuid4()
    assert routes.way_to(qm) is None and not routes.relayed_from(qm)
    routes.forwarded(qm, "hop-back", direct=False)
    assert routes.way_to(qm) == "hop-back" and routes.relayed_from(qm)
    routes.sender_seen(qm, "sender")
    assert routes.way_to(qm) == "sender"
    routes.session_verified(qm, "verified")
    assert routes.way_to(qm) == "verified"


def test_an_address_of_this_qm_is_skipped() -> None:
    routes = LearnedRoutes(frozenset({"here"}))
    qm = uuid.uuid4()
    routes.session_verified(qm, "here")
    routes.sender_seen(qm, "here")
    assert routes.way_to(qm) is None
    routes.forwarded(qm, "elsewhere", direct=False)
    assert routes.way_to(qm) == "elsewhere"


def test_a_route_loop_does_not_replace_the_direct_session_until_it_closes() -> None:
    routes = LearnedRoutes(frozenset())
    qm = uuid.uuid4()
    routes.forwarded(qm, "own", direct=True)
    routes.forwarded(qm, "loop", direct=False)
    assert routes.way_to(qm) == "own"
    routes.session_closed(qm)
    routes.forwarded(qm, "loop", direct=False)
    assert routes.way_to(qm) == "loop"


def test_each_map_is_bounded_but_known_qms_move() -> None:
    routes = LearnedRoutes(frozenset(), limit=2)
    a, b, c = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    for qm in (a, b, c):
        routes.session_verified(qm, f"p-{qm}")
        routes.sender_seen(qm, f"s-{qm}")
        routes.forwarded(qm, f"r-{qm}", direct=False)
    assert routes.way_to(c) is None and not routes.relayed_from(c)
    routes.session_verified(a, "moved")
    assert routes.way_to(a) == "moved"
