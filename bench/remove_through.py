"""QM CPU of ``QueueManager.remove_through`` (the Spark source's batch removal), in-process.

    .venv/bin/python bench/remove_through.py [--messages 100000] [--body-size 100] [--repeat 3]

Fills one transactional queue with ``--messages`` messages (transactions of 10,000),
then times one ``remove_through({queue: last})`` with ``time.process_time()`` (the whole
process: the calling thread and the store's writer thread) and the wall clock; prints
CPU per removed message for each round, then the Python calls of one more removal under
cProfile (calling thread only), a figure machine load does not move, and the command and
load average. Checks after each round that the queue is empty and its counters are zero.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shlex
import sys
import tempfile
import time

from openmsmq.qm import Message, QueueManager

QUEUE = "private$\\spark"


def fill(qm: QueueManager, count: int, body: bytes) -> int:
    """Send ``count`` messages in transactions of up to 10,000; the queue's last id."""
    left = count
    while left:
        n = min(left, 10_000)
        with qm.begin() as tx:
            qm.send_many(QUEUE, [Message(body=body) for _ in range(n)], tx)
        left -= n
    r = qm.lookup_range(QUEUE)
    assert r is not None and r.count == count
    return r.last


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--body-size", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    body = b"x" * args.body_size
    print("$ .venv/bin/python " + shlex.join(sys.argv))
    print("load average at start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    with tempfile.TemporaryDirectory() as d, QueueManager(d + "/qm") as qm:
        qm.create_queue(QUEUE, transactional=True)
        for i in range(args.repeat):
            last = fill(qm, args.messages, body)
            c0, w0 = time.process_time(), time.perf_counter()
            got = qm.remove_through({QUEUE: last})
            c1, w1 = time.process_time(), time.perf_counter()
            rec = qm.get_queue(QUEUE)
            assert got == args.messages and rec.msg_count == 0 and rec.total_bytes == 0
            print(
                f"round {i + 1}: removed {got:,}: {(c1 - c0) * 1e6 / got:.2f} us CPU/msg,"
                f" {(w1 - w0) * 1e3:.0f} ms wall"
            )
        last = fill(qm, args.messages, body)
        prof = cProfile.Profile()
        prof.enable()
        qm.remove_through({QUEUE: last})
        prof.disable()
        print(f"Python calls of one removal (cProfile, calling thread): {pstats.Stats(prof).total_calls:,}")
    print("load average at end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
