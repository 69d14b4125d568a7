"""Child process of test_steps.py: the consumer loop commits some messages (each commit
taking the next one ahead), then (mode ``claim``) receives the one taken ahead in a
transaction it never ends, or (mode ``ahead``) leaves it taken ahead, and waits to be
SIGKILLed. Modes ``batch-claim`` and ``batch-ahead``: the same with ``receive_many(2)``."""

from __future__ import annotations

import json
import sys
import time

import openmsmq
from openmsmq.client import Access


def main(target: str, queue: str, mode: str) -> None:
    conn = openmsmq.connect(target)
    q = conn.open_queue(queue, Access.RECEIVE)
    done = []
    batch = mode.startswith("batch-")  # receive_many(2): each commit takes the next two ahead
    for _ in range(2 if batch else 3):
        with conn.transaction() as tx:
            got = q.receive_many(2, timeout=5, tx=tx) if batch else [q.receive(timeout=5, tx=tx)]
            done.extend(m.body.decode() for m in got)
    print("COMMITTED " + json.dumps(done), flush=True)
    if mode == "batch-claim":
        tx = conn.transaction()
        held = q.receive_many(2, timeout=5, tx=tx)  # the batch taken ahead by the last commit
        print("HOLDING " + json.dumps([m.body.decode() for m in held]), flush=True)
    elif mode == "claim":
        tx = conn.transaction()
        held1 = q.receive(timeout=5, tx=tx)  # the message taken ahead by the last commit
        print("HOLDING " + held1.body.decode(), flush=True)
    else:
        print("HOLDING ahead", flush=True)
    time.sleep(600)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
