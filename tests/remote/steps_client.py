"""Child process of test_steps.py: the consumer loop commits some messages (each commit
taking the next one ahead), then (mode ``claim``) receives the one taken ahead in a
transaction it never ends, or (mode ``ahead``) leaves it taken ahead, and waits to be
SIGKILLed."""

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
    for _ in range(3):
        with conn.transaction() as tx:
            done.append(q.receive(timeout=5, tx=tx).body.decode())
    print("COMMITTED " + json.dumps(done), flush=True)
    if mode == "claim":
        tx = conn.transaction()
        held = q.receive(timeout=5, tx=tx)  # the message taken ahead by the last commit
        print("HOLDING " + held.body.decode(), flush=True)
    else:
        print("HOLDING ahead", flush=True)
    time.sleep(600)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
