"""Four remote consumers in transactional receive on one queue: every message is
committed by exactly one of them (batched, with some aborts and NACKs on the way)."""

from __future__ import annotations

import threading

from openmsmq.client import Access, Ack
from openmsmq.client.grpc_transport import GrpcTransport
from openmsmq.errors import HResult, MQError
from openmsmq.qm import MessageRecord, QueueManager
from openmsmq.remote.server import RemoteServer

from .conftest import TXQ, bodies

N = 20_000
BATCH = 500


def consume(target: str, two_phase: bool, out: list[int], errors: list[BaseException]) -> None:
    t = GrpcTransport(target)
    try:
        h = t.open_queue(TXQ, Access.RECEIVE)
        for rnd in range(10_000):  # bounded; ends at the first empty read
            tx = t.begin()
            try:
                if two_phase:
                    pending = t.start_receive_many(h, BATCH, tx=tx, timeout=0.2)
                    keep = [p for i, p in enumerate(pending) if i % 50 != 7]
                    back = [p for i, p in enumerate(pending) if i % 50 == 7]
                    assert t.end_receive_many(h, [p.request_id for p in keep], Ack.ACK) == [0] * len(keep)
                    assert t.end_receive_many(h, [p.request_id for p in back], Ack.NACK) == [0] * len(back)
                    ids = [p.message.lookup_id for p in keep]
                else:
                    ids = [m.lookup_id for m in t.read(h, tx=tx, max_count=BATCH, timeout=0.2)]
            except MQError as exc:
                t.abort(tx)
                if exc.hresult == HResult.MQ_ERROR_IO_TIMEOUT:
                    return
                raise
            if rnd % 9 == 4:
                t.abort(tx)  # everything goes back for someone else
                continue
            t.commit(tx)
            out.extend(ids)
    except BaseException as exc:
        errors.append(exc)
    finally:
        t.close()


def test_four_consumers_commit_every_message_exactly_once(qm: QueueManager) -> None:
    with qm.begin() as t:
        qm.send_many(TXQ, [MessageRecord(body=b"%d" % i) for i in range(N)], t)
    expected = sorted(m.lookup_id for m in qm.peek_range(TXQ, 0, N + 1))
    assert len(expected) == N
    with RemoteServer(qm, port=0) as srv:
        srv.start()
        results: list[list[int]] = [[] for _ in range(4)]
        errors: list[BaseException] = []
        threads = [
            threading.Thread(target=consume, args=(srv.target, i % 2 == 1, results[i], errors))
            for i in range(4)
        ]
        for th in threads:
            th.start()
        for th in threads:
            th.join(120)
        assert not any(th.is_alive() for th in threads)
    assert errors == []
    committed = [x for r in results for x in r]
    assert len(committed) == len(set(committed)), "a message was committed twice"
    assert sorted(committed) == expected
    assert all(results), "every consumer took part"
    assert bodies(qm, TXQ) == []
