"""GrpcTransport.close is bounded: its teardown (give back what was taken ahead, end the
step stream, half-close the session and wait for the server's rundown, close the channel)
runs in a thread joined for at most CLOSE_WAIT, so a server that never ends the session
cannot hang the caller. The transport is closed when close returns, whatever the teardown
still waits for."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import pytest

from openmsmq.client import grpc_transport
from openmsmq.client.grpc_transport import GrpcTransport
from openmsmq.errors import HResult, MQError
from openmsmq.remote import openmsmq_remote_pb2 as pb
from openmsmq.remote import openmsmq_remote_pb2_grpc as pb_grpc


class _SilentSession(pb_grpc.RemoteReadServicer):
    """A server that opens a session and then never answers again, nor ends the stream."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.opened = threading.Event()

    def Session(self, request_iterator: Any, context: Any) -> Iterator[pb.SessionPong]:
        yield pb.SessionPong(session_id="stuck", session_timeout=30.0)
        self.opened.set()
        self.release.wait(60.0)  # bounded: the test releases it at its end


@pytest.fixture
def silent() -> Iterator[tuple[str, _SilentSession]]:
    servicer = _SilentSession()
    server = grpc.server(ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_RemoteReadServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"grpc://127.0.0.1:{port}", servicer
    finally:
        servicer.release.set()
        server.stop(grace=0)


def test_close_returns_within_its_bound_when_the_server_never_ends_the_session(
    silent: tuple[str, _SilentSession], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    target, servicer = silent
    monkeypatch.setattr(grpc_transport, "CLOSE_WAIT", 0.2)
    t = GrpcTransport(target, connect_timeout=5.0)
    assert servicer.opened.wait(10.0)
    closer = threading.Thread(target=t.close, daemon=True)
    with caplog.at_level(logging.WARNING, logger=grpc_transport.__name__):
        closer.start()
        closer.join(30.0)  # a bound for the test run, not a timing assertion
    assert not closer.is_alive(), "close() hung on a server that never ends the session"
    # close() gave up waiting for the teardown (which waits for the session's end) ...
    assert any("did not finish within" in r.getMessage() for r in caplog.records), caplog.text
    assert not servicer.release.is_set()
    # ... and the transport is closed all the same: calls are refused, close is idempotent.
    with pytest.raises(MQError) as err:
        t.begin()
    assert err.value.hresult == HResult.MQ_ERROR_SERVICE_NOT_AVAILABLE
    with pytest.raises(MQError):
        t.open_queue("private$\\q", access=1)  # type: ignore[arg-type]
    t.close()
