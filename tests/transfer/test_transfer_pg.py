"""MS-MQQB transfer into a queue manager whose store is PostgreSQL (the in-memory
harness: real queue managers and transfer engines, bytes moved by the test): exactly
once and in order, across a crash of the receiver and of the sender, the incoming
sequence state kept in the database with the messages."""

from __future__ import annotations

import contextlib
import threading

from openmsmq.errors import StorageError
from openmsmq.qm.options import StoreOptions
from tests.pgserver import PgServer

from .harness import Net, bodies_in, outgoing_count, send_tx

DEST_B = "DIRECT=TCP:127.0.0.2\\PRIVATE$\\orders"
Q = "private$\\orders"


def _pair(net: Net, dsn: str) -> tuple:
    a = net.add("127.0.0.1")
    b = net.add("127.0.0.2", store_options=StoreOptions(backend="postgresql", dsn=dsn))
    b.qm.create_queue(Q, transactional=True)
    return a, b


def _send_all(a, n_tx: int, per_tx: int, tag: str = "") -> list[bytes]:
    sent = []
    for t in range(n_tx):
        bodies = [f"{tag}{t}-{i}".encode() for i in range(per_tx)]
        send_tx(a.qm, DEST_B, bodies)
        sent += bodies
    return sent


def test_transactional_transfer_into_postgresql_exactly_once_in_order(net: Net, pg_dsn: str) -> None:
    a, b = _pair(net, pg_dsn)
    sent = _send_all(a, 5, 200)
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == sent
    assert outgoing_count(a.qm) == 0
    assert b.transfer.stats["batches"] < 100  # group commit: far fewer transactions than messages
    (status,) = b.transfer.incoming_status()
    assert status.tx_sequence_number == 1000


def test_receiver_on_postgresql_restarted_keeps_its_sequence_state(net: Net, pg_dsn: str) -> None:
    a, _ = _pair(net, pg_dsn)
    first = _send_all(a, 1, 100, "a")
    net.run_until_quiet()
    b = net.restart("127.0.0.2")
    assert b.qm.store.__class__.__name__ == "PgStore"
    second = _send_all(a, 1, 100, "b")
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == first + second
    assert outgoing_count(a.qm) == 0


def test_duplicates_resent_by_a_crashed_sender_are_rejected_by_postgresql(net: Net, pg_dsn: str) -> None:
    a, b = _pair(net, pg_dsn)
    first = _send_all(a, 1, 1, "first")
    net.run_until_quiet()
    # B stores everything but its OrderAcks never reach A; then A crashes and resends.
    net.blackhole.add(("127.0.0.2", "127.0.0.1"))
    rest = _send_all(a, 2, 100)
    net.settle()
    net.advance(0.6)
    stored_before_crash = len(bodies_in(b.qm, Q)) - 1
    assert stored_before_crash >= 64
    net.blackhole.clear()
    net.restart("127.0.0.1")
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == first + rest
    assert b.transfer.stats["rejected"] >= stored_before_crash
    assert outgoing_count(net.nodes["127.0.0.1"].qm) == 0


def test_arrivals_while_postgresql_restarts_are_stored_not_refused(
    net: Net, pg_server: PgServer, pg_dsn: str
) -> None:
    """B's database stops (``pg_ctl stop -m immediate``) and starts again a second later
    while messages arrive: B's reads fail at once, its writes wait for the database.
    nothing is refused, and once it is back every message is stored exactly once, in
    order."""
    a, b = _pair(net, pg_dsn)
    first = _send_all(a, 1, 10, "a")
    net.run_until_quiet()
    pg_server.stop_immediate()
    restart = threading.Timer(1.0, pg_server.restart)
    restart.start()
    try:
        second = _send_all(a, 2, 50, "b")
        for _ in range(30):  # store work fails while the database is away, and stores nothing
            with contextlib.suppress(StorageError):
                net.advance(0.1)
    finally:
        restart.join()
    net.run_until_quiet()
    assert bodies_in(b.qm, Q) == first + second
    assert outgoing_count(a.qm) == 0
