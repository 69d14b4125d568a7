"""A receiver that could not store a peer's messages refuses that peer by every name it
knows it by: a route may name the peer with a port or by a host name, while an accepted
connection names it by its IP (see ``Transfer._refuse``)."""

from __future__ import annotations

import pytest

from openmsmq.protocol.events import Role
from openmsmq.transfer.state import hop_host, split_hop
from openmsmq.transfer.store_work import STORE_RETRY_MIN

from .harness import Net, bodies_in, failing_accepts, outgoing_count, send_tx

Q = "private$\\orders"
DEST_B = "DIRECT=TCP:127.0.0.2\\PRIVATE$\\orders"
TO_A = "DIRECT=TCP:127.0.0.1\\PRIVATE$\\orders"


@pytest.mark.parametrize(
    ("hop", "host", "port"),
    [
        ("127.0.0.1", "127.0.0.1", 1801),
        ("127.0.0.1:18021", "127.0.0.1", 18021),
        ("QM-A.example", "qm-a.example", 1801),
        ("[::1]:2000", "::1", 2000),
        ("[::1]", "::1", 1801),
        ("::1", "::1", 1801),  # a bare IPv6 address: no port to split off
    ],
)
def test_hop_host_and_split_hop(hop: str, host: str, port: int) -> None:
    assert hop_host(hop) == host
    split_host, split_port = split_hop(hop, 1801)
    assert (split_host.lower(), split_port) == (host, port)


def _connect_as(net: Net, a: str, b: str, name: str) -> None:
    """``a`` opens a session to ``b`` naming it ``name`` (a route's next hop), as the
    asyncio driver does: ``address`` is the IP the socket reached."""
    now = net.clock.now
    ca = net.nodes[a].transfer.connection_made(name, Role.INITIATOR, now, b)
    cb = net.nodes[b].transfer.connection_made(a, Role.ACCEPTOR, now, a)
    net.links[(a, ca)] = (b, cb)
    net.links[(b, cb)] = (a, ca)


def _count_calls(monkeypatch: pytest.MonkeyPatch, target: object, name: str) -> list[int]:
    """Count the calls of ``target.name`` (the returned list's one item)."""
    calls = [0]
    real = getattr(target, name)

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(target, name, counted)
    return calls


def _settle_bounded(net: Net) -> None:
    for _ in range(50):  # bounded: a reopen loop would never stop moving
        if not net.step():
            return
    raise AssertionError("the network kept moving")


def test_a_refusal_on_a_session_to_a_hop_with_a_port_refuses_the_peer_s_address(
    net: Net, monkeypatch: pytest.MonkeyPatch
) -> None:
    """B reaches A through a route naming ``127.0.0.1:18021``, and A's messages come on
    that session. The refusal used to be kept under ``127.0.0.1:18021``: A connecting
    from 127.0.0.1 was let in at once, and B's own next hop stayed wanted."""
    hop = "127.0.0.1:18021"
    a = net.add("127.0.0.1")
    b = net.add("127.0.0.2", routes=(("127.0.0.1", hop),))
    a.qm.create_queue(Q, transactional=True)
    b.qm.create_queue(Q, transactional=True)
    full = failing_accepts(b, monkeypatch)
    full[0] = True
    attempts = _count_calls(monkeypatch, b.transfer.sequence_store, "accept_arrival_rows_many")
    _connect_as(net, "127.0.0.2", "127.0.0.1", hop)
    send_tx(b.qm, TO_A, [b"b0"])
    send_tx(a.qm, DEST_B, [b"a0", b"a1"])  # they travel on B's session: A opens none
    _settle_bounded(net)
    assert bodies_in(a.qm, Q) == [b"b0"] and bodies_in(b.qm, Q) == []
    # A's reconnect from 127.0.0.1 was refused: no second try into the full store.
    assert attempts == [1]
    send_tx(b.qm, TO_A, [b"b1"])
    _settle_bounded(net)
    now = net.clock.now
    assert b.transfer.refusing("127.0.0.1", now)  # A's connections, from its IP
    assert b.transfer.refusing(hop, now)
    assert hop not in b.transfer.wanted_peers()  # B does not reopen it either
    full[0] = False
    net.advance(STORE_RETRY_MIN + 0.1)
    assert not b.transfer.refusing("127.0.0.1", net.clock.now)
    assert hop in b.transfer.wanted_peers()  # b1 still waits for a session to A
    _connect_as(net, "127.0.0.2", "127.0.0.1", hop)  # what B's connector does now
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == [b"a0", b"a1"]
    assert bodies_in(a.qm, Q) == [b"b0", b"b1"]
    assert outgoing_count(a.qm) == 0 and outgoing_count(b.qm) == 0


def test_a_refusal_on_an_accepted_session_covers_the_host_name_b_routes_to(
    net: Net, monkeypatch: pytest.MonkeyPatch
) -> None:
    """B's route names A ``qm-a`` (its earlier session there reached 127.0.0.1). A's
    messages that B cannot store come on the session A opened, named by A's IP. B must
    not open ``qm-a`` for its own messages during the back-off: A's resend would come
    on it straight back into B's full store."""
    a = net.add("127.0.0.1")
    b = net.add("127.0.0.2", routes=(("127.0.0.1", "qm-a"),))
    a.qm.create_queue(Q, transactional=True)
    b.qm.create_queue(Q, transactional=True)
    full = failing_accepts(b, monkeypatch)
    _connect_as(net, "127.0.0.2", "127.0.0.1", "qm-a")
    send_tx(b.qm, TO_A, [b"b0"])
    net.run_until_quiet()
    assert bodies_in(a.qm, Q) == [b"b0"]
    net.cut("127.0.0.2", "127.0.0.1")
    full[0] = True
    send_tx(a.qm, DEST_B, [b"a0"])
    net.advance(0.2)  # A finds its new outgoing queue and opens its own session to B
    send_tx(b.qm, TO_A, [b"b1"])
    _settle_bounded(net)
    now = net.clock.now
    assert b.transfer.refusing("127.0.0.1", now)
    assert "qm-a" not in b.transfer.wanted_peers()
    assert not [c for c in b.transfer.connections if not c.session.closed]
    full[0] = False
    net.advance(STORE_RETRY_MIN + 0.1)
    assert "qm-a" in b.transfer.wanted_peers()
    _connect_as(net, "127.0.0.2", "127.0.0.1", "qm-a")
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == [b"a0"]
    assert bodies_in(a.qm, Q) == [b"b0", b"b1"]
    assert outgoing_count(a.qm) == 0 and outgoing_count(b.qm) == 0
    assert b.transfer.unstored_bytes == 0
