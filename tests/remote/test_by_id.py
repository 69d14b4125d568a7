"""Receive by MessageId / CorrelationId and the default access of a remote format name
through the remote-read service (the client browses, then receives by LookupIdentifier);
the administration rpcs (queue properties, outgoing suspension) and their permission."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from openmsmq.client import Access, Connection
from openmsmq.client.grpc_transport import GrpcTransport
from openmsmq.client.selection import object_id
from openmsmq.errors import AccessDeniedError, HResult, MessageNotFoundError, MQError
from openmsmq.qm import QueueManager
from openmsmq.remote.auth import parse_tokens
from openmsmq.remote.server import RemoteServer

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


ADMIN_TOKENS = """
admin-token-0001  *=all
writer-token-0002 private$\\plain=send,receive
"""


def test_set_queue_properties_and_outgoing_state_need_admin(qm: QueueManager) -> None:
    with RemoteServer(qm, port=0, tokens=parse_tokens(ADMIN_TOKENS)) as srv:
        srv.start()
        writer = GrpcTransport(srv.target, token="writer-token-0002")
        admin = GrpcTransport(srv.target, token="admin-token-0001")
        try:
            with pytest.raises(AccessDeniedError):
                writer.set_queue_properties(PLAINQ, label="x")
            assert admin.set_queue_properties(PLAINQ, label="x", quota_kb=9).quota_kb == 9
            assert qm.get_queue(PLAINQ).label == "x"
            far = "DIRECT=TCP:127.0.0.42\\PRIVATE$\\far"
            h = admin.open_queue(far, Access.SEND)
            admin.close_queue(h)
            with pytest.raises(AccessDeniedError):
                writer.set_outgoing_state(far, True)
            with pytest.raises(MQError) as err:  # no transfer runs beside this bare server
                admin.set_outgoing_state(far, True)
            assert err.value.hresult == HResult.MQ_ERROR_SERVICE_NOT_AVAILABLE
            with pytest.raises(MQError) as bad:
                admin.set_queue_properties(PLAINQ, privacy_level=1)
            assert bad.value.hresult == HResult.MQ_ERROR_PROPERTY_NOTALLOWED
        finally:
            writer.close()
            admin.close()
