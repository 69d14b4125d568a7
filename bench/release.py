"""QM CPU of A's release of an OrderAck'ed range (``QueueManager.release_outgoing``), in-process.

    .venv/bin/python bench/release.py [--messages 100000] [--body-size 256] [--repeat 3]

Commits ``--messages`` messages (100 per transaction, as ``bench/transfer.py``'s sender)
to a ``DIRECT=TCP:`` destination, so they wait in an outgoing queue with their
TxSequenceNumbers, then times one ``release_outgoing(queue, last, return_ids=False)``
(what ``serve`` A runs when the last OrderAck of a drain arrives) with
``time.process_time()`` (the whole process: calling thread and the store's writer thread)
and the wall clock. Prints CPU per released message for each round, the Python calls of
one more release under cProfile (calling thread only; a figure load does not move), and
the command and load average. Checks after each round that the queue is empty, its
counters are zero and a new TxSequenceID started.
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
from openmsmq.qm.handles import QueueHandle

DEST = "DIRECT=TCP:127.0.0.2\\PRIVATE$\\bench"


def fill(qm: QueueManager, count: int, body: bytes) -> tuple[QueueHandle, int]:
    """Commit ``count`` messages 100 per transaction; (outgoing queue name, last number)."""
    for start in range(0, count, 100):
        with qm.begin() as tx:
            qm.send_many(DEST, [Message(body=body) for _ in range(min(100, count - start))], tx)
    (rec,) = [q for q in qm.list_queues(include_system=True) if q.destination_format_name]
    handle = qm.open_queue(rec.display_name)  # as serve A opens it (qm/transfer_outgoing.py)
    state = qm.outgoing_sequence(handle)
    assert rec.msg_count == count and state.next_tx_sequence_number == count + 1
    return handle, count


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--body-size", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    body = b"x" * args.body_size
    print("$ .venv/bin/python " + shlex.join(sys.argv))
    print("load average at start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    with tempfile.TemporaryDirectory() as d, QueueManager(d + "/qm") as qm:
        for i in range(args.repeat):
            name, last = fill(qm, args.messages, body)
            before = qm.outgoing_sequence(name).tx_sequence_id
            c0, w0 = time.process_time(), time.perf_counter()
            _, state = qm.release_outgoing(name, last, return_ids=False)
            c1, w1 = time.process_time(), time.perf_counter()
            rec = qm.get_queue(name)
            assert rec.msg_count == 0 and rec.total_bytes == 0 and state.tx_sequence_id != before
            print(
                f"round {i + 1}: released {last:,}: {(c1 - c0) * 1e6 / last:.2f} us CPU/msg,"
                f" {(w1 - w0) * 1e3:.0f} ms wall"
            )
        name, last = fill(qm, args.messages, body)
        prof = cProfile.Profile()
        prof.enable()
        qm.release_outgoing(name, last, return_ids=False)
        prof.disable()
        print(f"Python calls of one release (cProfile, calling thread): {pstats.Stats(prof).total_calls:,}")
    print("load average at end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))


if __name__ == "__main__":
    main()
