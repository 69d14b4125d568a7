"""Receive by MessageId / CorrelationId and the default access of a remote format name
through the remote-read service (the client browses, then receives by LookupIdentifier)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from openmsmq.client import Access, Connection
from openmsmq.client.grpc_transport import GrpcTransport
from openmsmq.client.selection import object_id
from openmsmq.errors import MessageNotFoundError, MQError
from openmsmq.qm import QueueManager

from .conftest import PLAINQ, bodies, fill


def test_by_id_and_default_access_over_grpc(qm: QueueManager, connect: Callable[..., GrpcTransport]) -> None:
    fill(qm, PLAINQ, [f"m{i}".encode() for i in range(300)])
    conn = Connection(connect())
    with conn.open_queue("FormatName:DIRECT=OS:.\\" + PLAINQ) as q:
        ids = [m.message_id for m in q.peek_many(300)]
        q.send(b"reply", correlation_id=object_id(ids[3], "id"))
        assert q.receive_by_id(ids[280]).body == b"m280"
        with pytest.raises(MessageNotFoundError):
            q.peek_by_id(ids[280])
        assert q.receive_by_correlation_id(ids[3]).body == b"reply"
    assert len(bodies(qm, PLAINQ)) == 299
    with conn.open_queue("DIRECT=TCP:127.0.0.42\\PRIVATE$\\far") as remote:
        assert remote.access == Access.SEND
        remote.send(b"x")
    with pytest.raises(MQError) as err:
        conn.open_queue("private\\" + PLAINQ.split("\\")[1])
    assert "did you mean" in str(err.value)
