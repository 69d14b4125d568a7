"""Helpers of the step-stream tests (test_steps.py, test_steps_batches.py): numbered
bodies, a counter of what a transport sends, and the consumers the tests open."""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import openmsmq
from openmsmq.client import Access, Connection, Queue
from openmsmq.client.grpc_steps import StepStream
from openmsmq.client.grpc_transport import GrpcTransport
from openmsmq.qm import QueueManager
from openmsmq.remote import openmsmq_remote_pb2 as pb

from .conftest import TXQ, fill

Connect = Callable[..., GrpcTransport]


def numbered(n: int, prefix: str = "m") -> list[bytes]:
    return [f"{prefix}{i:03d}".encode() for i in range(n)]


class Calls:
    """Counts what a transport sends: unary rpcs and step-stream requests (by their ops)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.counts: collections.Counter[str] = collections.Counter()
        original = StepStream.exchange

        def exchange(stream: StepStream, ops: list[pb.StepOp]) -> list[pb.StepResult]:
            self.counts["stream " + "+".join(str(o.WhichOneof("op")) for o in ops)] += 1
            return original(stream, ops)

        monkeypatch.setattr(StepStream, "exchange", exchange)

    def watch(self, t: GrpcTransport) -> None:
        stub: Any = t._stub
        for name in ("Read", "StartReceive", "EndReceive", "Commit", "Abort", "BeginTransaction", "Send"):
            rpc = getattr(stub, name)

            def counted(request: Any, metadata: Any = None, rpc: Any = rpc, name: str = name) -> Any:
                self.counts["unary " + name] += 1
                return rpc(request, metadata=metadata)

            setattr(stub, name, counted)

    @contextlib.contextmanager
    def connected(self, target: str) -> Iterator[Connection]:
        """``openmsmq.connect(target)``, its transport's calls counted; closed on exit."""
        with openmsmq.connect(target) as conn:
            self.watch(conn.transport)  # type: ignore[arg-type]
            yield conn

    def round_trips(self) -> int:
        return sum(self.counts.values())


def receiver(connect: Connect) -> tuple[Connection, Queue]:
    """A consumer of its own: a new connection and TXQ opened on it for receiving."""
    conn = Connection(connect())
    return conn, conn.open_queue(TXQ, Access.RECEIVE)


def consumer(qm: QueueManager, connect: Connect, messages: list[bytes]) -> tuple[Connection, Queue]:
    """``messages`` in TXQ and a :func:`receiver` of them."""
    fill(qm, TXQ, messages)
    return receiver(connect)
