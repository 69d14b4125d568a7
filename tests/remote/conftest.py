"""Fixtures for the remote-read tests: a queue manager, its service, clients."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from openmsmq.client.grpc_transport import GrpcTransport
from openmsmq.qm import MessageRecord, QueueManager
from openmsmq.remote.core import RemoteReadCore
from openmsmq.remote.server import RemoteServer
from tests.clock import Clock

TXQ = "private$\\tx"
PLAINQ = "private$\\plain"


@pytest.fixture
def qm(tmp_path: Path) -> Iterator[QueueManager]:
    """A queue manager with a transactional and a non-transactional queue."""
    with QueueManager(tmp_path / "qm") as manager:
        manager.create_queue(TXQ, transactional=True)
        manager.create_queue(PLAINQ)
        yield manager


@pytest.fixture
def clock() -> Clock:
    """The clock of :func:`core`, at 1000 s; a test moves it."""
    return Clock(1000.0)


@pytest.fixture
def core(qm: QueueManager, clock: Clock) -> Iterator[RemoteReadCore]:
    """The remote-read core on ``qm`` without gRPC: cleanup timer 10 s, sessions 60 s."""
    c = RemoteReadCore(qm, cleanup_timeout=10.0, session_timeout=60.0, clock=clock)
    yield c
    c.close()


def fill(qm: QueueManager, queue: str, bodies: list[bytes]) -> None:
    """Put messages in a queue directly through the QM (one commit)."""
    if qm.get_queue(queue).transactional:
        with qm.begin() as t:
            qm.send_many(queue, [MessageRecord(body=b) for b in bodies], t)
    else:
        qm.send_many(queue, [MessageRecord(body=b) for b in bodies])


def bodies(qm: QueueManager, queue: str) -> list[bytes]:
    """Every message body in a queue (locked ones included), in LookupIdentifier order."""
    return [m.body for m in qm.peek_range(queue, 0, 1_000_000)]


@pytest.fixture
def server(qm: QueueManager) -> Iterator[RemoteServer]:
    """The remote-read service on a free loopback port, cleanup timer 0.3 s."""
    srv = RemoteServer(qm, port=0, cleanup_timeout=0.3, session_timeout=5.0).start()
    try:
        yield srv
    finally:
        srv.stop(grace=0.2)


@pytest.fixture
def connect(server: RemoteServer) -> Iterator[Callable[..., GrpcTransport]]:
    """Open gRPC transports to the server (closed at the end of the test)."""
    opened: list[GrpcTransport] = []

    def make(**kwargs: object) -> GrpcTransport:
        t = GrpcTransport(server.target, **kwargs)  # type: ignore[arg-type]
        opened.append(t)
        return t

    yield make
    for t in opened:
        t.close()
