"""Child process of test_sigkill.py: commits some transactional receives, then holds
others (ACKed, pending, plain reads, non-transactional two-phase) until SIGKILLed."""

from __future__ import annotations

import json
import sys
import time

from openmsmq.client import Access, Ack
from openmsmq.client.grpc_transport import GrpcTransport


def main(target: str, queue: str) -> None:
    t = GrpcTransport(target, ping_interval=0.2)
    h = t.open_queue(queue, Access.RECEIVE)
    tx = t.begin()
    done = t.read(h, tx=tx, max_count=100)
    t.commit(tx)
    print("COMMITTED " + json.dumps([m.body.decode() for m in done]), flush=True)
    tx1 = t.begin()
    pending = t.start_receive_many(h, 100, tx=tx1)
    t.end_receive_many(h, [p.request_id for p in pending[:50]], Ack.ACK)
    tx2 = t.begin()
    held = t.read(h, tx=tx2, max_count=100)
    plain = t.start_receive_many(h, 100)
    print(f"READY {len(pending) + len(held) + len(plain)}", flush=True)
    time.sleep(600)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
