"""A client SIGKILLed in the middle of transactional receives loses nothing (invariant 7)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from openmsmq.client import Access
from openmsmq.client.grpc_transport import GrpcTransport
from openmsmq.errors import HResult, MQError
from openmsmq.qm import QueueManager
from openmsmq.remote.server import RemoteServer

from .conftest import TXQ, bodies, fill

CHILD = Path(__file__).with_name("sigkill_client.py")
N = 500


def test_sigkilled_client_messages_come_back_and_are_committed_once(qm: QueueManager) -> None:
    everything = [f"m{i:04d}" for i in range(N)]
    fill(qm, TXQ, [b.encode() for b in everything])
    with RemoteServer(qm, port=0, cleanup_timeout=0.5, session_timeout=2.0) as srv:
        srv.start()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
        child = subprocess.Popen(
            [sys.executable, str(CHILD), srv.target, TXQ], stdout=subprocess.PIPE, text=True, env=env
        )
        try:
            assert child.stdout is not None
            committed_line = child.stdout.readline()
            ready_line = child.stdout.readline()
            assert committed_line.startswith("COMMITTED "), committed_line
            assert ready_line.startswith("READY "), ready_line
            committed = json.loads(committed_line.split(" ", 1)[1])
            assert len(committed) == 100 and int(ready_line.split()[1]) == 300
            # The child holds 300 messages in two transactions and 100 pending receives.
            assert len(bodies(qm, TXQ)) == N - 100
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(10)

        second = GrpcTransport(srv.target)
        try:
            h = second.open_queue(TXQ, Access.RECEIVE)
            got: list[str] = []
            for _ in range(100):  # bounded: each round waits up to 5 s for the rest to come back
                if len(got) >= N - len(committed):
                    break
                tx = second.begin()
                try:
                    msgs = second.read(h, tx=tx, max_count=N, timeout=5)
                except MQError as exc:
                    assert exc.hresult == HResult.MQ_ERROR_IO_TIMEOUT
                    second.abort(tx)
                    continue
                second.commit(tx)
                got.extend(m.body.decode() for m in msgs)
        finally:
            second.close()
    assert len(got) == len(set(got)), "a message was delivered twice to committed work"
    assert not set(got) & set(committed)
    assert sorted(got + committed) == everything
    assert bodies(qm, TXQ) == []
