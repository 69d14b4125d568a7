"""Every count a remote-read call carries is checked before any work, and permissions are
checked before anything is written.

The attacks as reproduced against a running queue manager: an R_StartReceive asking for
2,000,000 messages (0xFFFFFFFF was accepted) held the core's lock for seconds and took
about 750 MB, one PendingRequestEntry per request id; a token allowed only to peek on one
queue made the service create a persistent outgoing queue (and its metric series) for
every remote format name it tried to open for send, each call then denied; and rules match
canonical names while ``.\\private$\\prod2`` was checked as written, so
``private$\\prod*=peek`` did not stop its creation by a later ``*=all`` rule.
"""

from __future__ import annotations

import logging
import tracemalloc

import grpc
import pytest

from openmsmq.client import Access, ReadAction, outgoing
from openmsmq.client.grpc_transport import GrpcTransport
from openmsmq.client.types import RangeQuery
from openmsmq.errors import HResult, LimitError, MQError
from openmsmq.observability.metrics import Metrics
from openmsmq.qm import MessageRecord, QueueManager, QueueType
from openmsmq.remote import openmsmq_remote_pb2 as pb
from openmsmq.remote import openmsmq_remote_pb2_grpc as pb_grpc
from openmsmq.remote.auth import Permission, Principal, parse_tokens
from openmsmq.remote.codes import HRESULT_KEY, SESSION_KEY, AccessMode, RemoteAck
from openmsmq.remote.core import RemoteReadCore
from openmsmq.remote.limits import RemoteLimits
from openmsmq.remote.server import RemoteServer

from .conftest import PLAINQ, TXQ, bodies, fill


def _outgoing(qm: QueueManager) -> list[str]:
    return [r.name for r in qm.list_queues(include_system=True) if r.queue_type == QueueType.OUTGOING]


# ---- counts --------------------------------------------------------------------------------


def test_a_start_receive_beyond_the_batch_limit_is_refused_before_any_work(
    core: RemoteReadCore, qm: QueueManager
) -> None:
    fill(qm, PLAINQ, [b"a", b"b", b"c"])
    s = core.open_session(Principal("greedy"))
    h = core.open_queue(s, PLAINQ, AccessMode.RECEIVE)
    with pytest.raises(LimitError) as err:
        core.receives.start_receive(s, h, request_id=1, max_count=200_000)  # the default bound is 100,000
    assert err.value.hresult == HResult.MQ_ERROR_INVALID_PARAMETER
    assert err.value.limit == "remote.max_batch_messages"
    assert "200,000" in str(err.value) and "remote.max_batch_messages = 100,000" in str(err.value)
    with pytest.raises(LimitError):
        core.read(s, h, max_count=200_000)
    # Nothing was locked or held; the messages are all there for the next reader.
    assert core.pending_count == 0 and s.pending_bytes == 0
    assert [m.body for _, m in core.receives.start_receive(s, h, request_id=1, max_count=10)] == [
        b"a",
        b"b",
        b"c",
    ]


def test_every_message_count_of_the_core_is_bounded(qm: QueueManager) -> None:
    core = RemoteReadCore(qm, limits=RemoteLimits(max_batch_messages=4))
    try:
        fill(qm, TXQ, [b"%d" % i for i in range(6)])
        s = core.open_session(Principal("p"))
        h = core.open_queue(s, TXQ, AccessMode.RECEIVE | AccessMode.SEND)
        tx = core.begin(s)
        for call in (
            lambda: core.read(s, h, max_count=5, uow=tx),
            lambda: core.receives.start_receive(s, h, request_id=1, max_count=5, uow=tx),
            lambda: core.receives.end_receive(s, h, list(range(1, 6)), RemoteAck.RR_ACK),
            lambda: core.send(s, h, [MessageRecord(body=b"x")] * 5, tx),
        ):
            with pytest.raises(LimitError) as err:
                call()
            assert err.value.limit == "remote.max_batch_messages"
        assert (
            len(core.receives.start_receive(s, h, request_id=1, max_count=4, uow=tx)) == 4
        )  # at the bound: fine
        core.abort(s, tx)
        assert len(bodies(qm, TXQ)) == 6
    finally:
        core.close()


def test_a_huge_start_receive_allocates_no_more_entries_than_the_budget_holds(qm: QueueManager) -> None:
    # Within remote.max_batch_messages a batch still asks for up to 100,000 request ids; a
    # queue of a few messages must not cost an entry per id asked for: the entries are cut
    # to what the session's pending budget (1 MiB here) could ever hold.
    core = RemoteReadCore(qm, max_pending_bytes=1 << 20)
    try:
        fill(qm, PLAINQ, [b"m%d" % i for i in range(5)])
        s = core.open_session(Principal("p"))
        h = core.open_queue(s, PLAINQ, AccessMode.RECEIVE)
        tracemalloc.start()
        try:
            got = core.receives.start_receive(s, h, request_id=1, max_count=100_000)
            _now, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert len(got) == 5
        assert peak < 4 << 20, f"{peak:,} bytes for 5 messages"  # an entry per id took ~40 MB
    finally:
        core.close()


def test_over_grpc_a_max_count_of_u32_max_is_refused_logged_counted_and_others_served(
    qm: QueueManager, caplog: pytest.LogCaptureFixture
) -> None:
    fill(qm, PLAINQ, [b"a", b"b"])
    metrics = Metrics()
    server = RemoteServer(qm, port=0, session_timeout=5.0, metrics=metrics).start()
    greedy = GrpcTransport(server.target)
    other = GrpcTransport(server.target)
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    try:
        h = greedy.open_queue(PLAINQ, Access.RECEIVE)
        stub = pb_grpc.RemoteReadStub(channel)  # type: ignore[no-untyped-call]
        md = ((SESSION_KEY, greedy.session_id),)
        caplog.set_level(logging.WARNING, logger="openmsmq.remote")
        for _ in range(3):  # an attacker repeats: one line, three counts
            with pytest.raises(grpc.RpcError) as err:
                stub.StartReceive(
                    pb.ReadRequest(handle=h, action=0, request_id=1, max_count=0xFFFFFFFF), metadata=md
                )
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "remote.max_batch_messages" in (err.value.details() or "")
            trailing = dict(err.value.trailing_metadata() or ())
            assert int(trailing[HRESULT_KEY], 16) == HResult.MQ_ERROR_INVALID_PARAMETER
        # Another client is served as before, and nothing was taken.
        oh = other.open_queue(PLAINQ, Access.PEEK)
        assert [m.body for m in other.read(oh, ReadAction.PEEK_CURRENT, max_count=10)] == [b"a", b"b"]
        assert bodies(qm, PLAINQ) == [b"a", b"b"]
        refused = metrics.registry.get_sample_value(
            "openmsmq_refusals_total", {"rule": "remote.max_batch_messages"}
        )
        assert refused == 3
        lines = [r.getMessage() for r in caplog.records if "refused StartReceive" in r.getMessage()]
        assert len(lines) == 1, lines
        assert "127.0.0.1" in lines[0] and "rule: remote.max_batch_messages" in lines[0]
        assert "4,294,967,295" in lines[0]
    finally:
        channel.close()
        greedy.close()
        other.close()
        server.stop(grace=0.2)


def test_range_calls_bound_their_counts(qm: QueueManager) -> None:
    server = RemoteServer(qm, port=0, limits=RemoteLimits(max_batch_messages=3, max_batch_queues=2)).start()
    t = GrpcTransport(server.target)
    try:
        fill(qm, PLAINQ, [b"a", b"b", b"c", b"d"])
        for call, limit in (
            (lambda: t.peek_range(PLAINQ, 0, None, 4), "remote.max_batch_messages"),
            (lambda: t.lookup_ranges([RangeQuery(PLAINQ)] * 3), "remote.max_batch_queues"),
            (
                lambda: t.send_idempotent(PLAINQ, [outgoing(b"x")] * 4, ["1", "2", "3", "4"]),
                "remote.max_batch_messages",
            ),
            (lambda: t.open_queue("private$\\" + "q" * 5000, Access.PEEK), "1,024"),
            (lambda: t.send_idempotent(PLAINQ, [outgoing(b"x", response_queue="r" * 5000)], ["1"]), "1,024"),
        ):
            with pytest.raises(MQError) as err:
                call()
            assert err.value.hresult == HResult.MQ_ERROR_INVALID_PARAMETER
            assert limit in str(err.value)
        assert len(t.peek_range(PLAINQ, 0, None, 3)) == 3
        assert bodies(qm, PLAINQ) == [b"a", b"b", b"c", b"d"]
    finally:
        t.close()
        server.stop(grace=0.2)


# ---- permissions before writes, on canonical names --------------------------------------------


def test_a_peek_only_token_never_creates_outgoing_queues(core: RemoteReadCore, qm: QueueManager) -> None:
    peeker = core.open_session(Principal("peeker", (("private$\\prod*", Permission.PEEK),)))
    for i in range(20):
        with pytest.raises(MQError) as err:
            core.open_queue(peeker, f"DIRECT=TCP:10.9.{i}.1\\private$\\x", AccessMode.SEND)
        assert err.value.hresult == HResult.MQ_ERROR_ACCESS_DENIED
    assert _outgoing(qm) == []
    # A token that may send there still can: the outgoing queue is created then.
    sender = core.open_session(Principal("sender", (("outgoing:direct=tcp:10.9.0.1*", Permission.SEND),)))
    core.open_queue(sender, "DIRECT=TCP:10.9.0.1\\private$\\x", AccessMode.SEND)
    assert _outgoing(qm) == ["outgoing:direct=tcp:10.9.0.1\\private$\\x"]


def test_rules_match_the_canonical_name_however_the_path_is_written(
    core: RemoteReadCore, qm: QueueManager
) -> None:
    s = core.open_session(Principal("ops", (("private$\\prod*", Permission.PEEK), ("*", Permission.ALL))))
    for path in (".\\private$\\prod2", "PRIVATE$\\Prod3", " private$\\prod4"):
        with pytest.raises(MQError) as err:
            core.create_queue(s, path)
        assert err.value.hresult == HResult.MQ_ERROR_ACCESS_DENIED, path
    assert sorted(r.name for r in qm.list_queues()) == ["private$\\plain", "private$\\tx"]
    qm.create_queue("private$\\prod1")
    with pytest.raises(MQError) as err:
        core.open_queue(s, ".\\PRIVATE$\\PROD1", AccessMode.RECEIVE)
    assert err.value.hresult == HResult.MQ_ERROR_ACCESS_DENIED
    assert core.open_queue(s, ".\\PRIVATE$\\PROD1", AccessMode.PEEK) > 0
    core.create_queue(s, "private$\\other")  # the catch-all rule still grants the rest
    assert "private$\\other" in [r.name for r in qm.list_queues()]


def test_a_denied_call_over_grpc_is_logged_and_counted(
    qm: QueueManager, caplog: pytest.LogCaptureFixture
) -> None:
    metrics = Metrics()
    tokens = parse_tokens("peek-only-token private$\\prod*=peek\n")
    server = RemoteServer(qm, port=0, tokens=tokens, metrics=metrics).start()
    caplog.set_level(logging.WARNING, logger="openmsmq.remote")
    try:
        t = GrpcTransport(server.target, token="peek-only-token")
        try:
            with pytest.raises(MQError) as err:
                t.open_queue("DIRECT=TCP:10.9.9.9\\private$\\x", Access.SEND)
            assert err.value.hresult == HResult.MQ_ERROR_ACCESS_DENIED
        finally:
            t.close()
        with pytest.raises(MQError):
            GrpcTransport(server.target, token="wrong-token-123")
        assert _outgoing(qm) == []
        sample = metrics.registry.get_sample_value
        assert sample("openmsmq_refusals_total", {"rule": "permission"}) == 1
        assert sample("openmsmq_refusals_total", {"rule": "token"}) == 1
        text = "\n".join(r.getMessage() for r in caplog.records)
        assert "refused OpenQueue from ipv4:127.0.0.1" in text and "(token#1)" in text
        assert "refused Session from ipv4:127.0.0.1" in text and "rule: token" in text
        assert "peek-only-token" not in text and "wrong-token-123" not in text
    finally:
        server.stop(grace=0.2)
