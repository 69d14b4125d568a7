"""A session whose window caps its rate over a long round trip is logged once per next
hop, with the rate and the key to change (``Connections.check_link``): with the default
window of 64 a 50 ms link moves about 1,280 messages a second, whatever the QMs can do
(two serve processes through a proxy delaying each direction 25 ms: 1,190 msgs/s)."""

from __future__ import annotations

import pytest

from openmsmq.protocol.events import Role

from .harness import Net

Q = "private$\\orders"


def _handshake(net: Net, one_way: float) -> None:
    """A opens a session to B; each direction of the handshake takes ``one_way`` s."""
    a, b = net.nodes["127.0.0.1"].transfer, net.nodes["127.0.0.2"].transfer
    now = net.clock.now
    ca = a.connection_made("127.0.0.2", Role.INITIATOR, now)
    cb = b.connection_made("127.0.0.1", Role.ACCEPTOR, now)
    for _ in range(4):  # EstablishConnection, its response, ConnectionParameters, its response
        for _cid, data in a.data_to_send():
            b.data_received(cb, data, now + one_way)
        now += one_way
        for _cid, data in b.data_to_send():
            a.data_received(ca, data, now + one_way)
        now += one_way
    net.clock.now = now
    conn_a, conn_b = a.connections.get(ca), b.connections.get(cb)
    assert conn_a is not None and conn_b is not None
    assert conn_a.open and conn_b.open
    assert conn_a.session.round_trip == pytest.approx(2 * one_way, abs=0.0011)
    assert conn_b.session.round_trip is None  # the acceptor measures none
    a.connection_lost(ca, now)
    b.connection_lost(cb, now)


def test_a_long_round_trip_with_the_default_window_is_logged_once(
    net: Net, caplog: pytest.LogCaptureFixture
) -> None:
    net.add("127.0.0.1")
    net.add("127.0.0.2")
    with caplog.at_level("INFO", logger="openmsmq.transfer"):
        _handshake(net, 0.025)
        _handshake(net, 0.025)  # the same next hop again: no second warning
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1
    assert "127.0.0.2" in warnings[0] and "round trip of 50 ms" in warnings[0]
    assert "window of 64 packets" in warnings[0] and "about 1,280 messages/s" in warnings[0]
    assert "protocol.window_size" in warnings[0]
    opened = [r.getMessage() for r in caplog.records if "initiator open" in r.getMessage()]
    assert opened and "window 64, round trip 50 ms" in opened[0]


@pytest.mark.parametrize(
    ("one_way", "window", "warned"),
    [
        (0.001, 64, False),  # 2 ms: a LAN, or a loaded host answering late
        (0.025, 1024, False),  # 50 ms with a window of 1,024: about 20,480 messages/s
        (0.005, 64, True),  # 10 ms with 64: about 6,400 messages/s
    ],
)
def test_which_links_are_logged(net: Net, caplog: pytest.LogCaptureFixture, one_way: float, window: int,
                                warned: bool) -> None:  # fmt: skip
    from openmsmq.protocol.events import SessionConfig

    session = SessionConfig(window_size=window)
    net.add("127.0.0.1", session=session)
    net.add("127.0.0.2", session=session)
    with caplog.at_level("WARNING", logger="openmsmq.transfer"):
        _handshake(net, one_way)
    assert any("protocol.window_size" in r.getMessage() for r in caplog.records) is warned


def test_the_status_of_an_outgoing_queue_shows_its_session_s_window_and_round_trip(net: Net) -> None:
    """``openmsmq status`` shows what bounds a session's rate (window / round trip)."""
    from openmsmq.protocol.events import SessionConfig

    from .harness import send_tx

    a = net.add("127.0.0.1", session=SessionConfig(window_size=1024))
    b = net.add("127.0.0.2", session=SessionConfig(window_size=64))  # a Windows peer's window
    b.qm.create_queue(Q, transactional=True)
    send_tx(a.qm, "DIRECT=TCP:127.0.0.2\\PRIVATE$\\orders", [b"m"])
    net.settle()
    [out] = a.transfer.outgoing_status()
    assert out.connected and out.window == 64 and out.round_trip == 0.0  # same clock both ways
    net.cut("127.0.0.1", "127.0.0.2")
    [out] = a.transfer.outgoing_status()
    assert not out.connected and out.window is None and out.round_trip is None
