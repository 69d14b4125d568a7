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

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _removal import arguments, run_rounds  # bench/_removal.py: the shared timing loop

from openmsmq.qm import MessageRecord, QueueManager

QUEUE = "private$\\spark"


def fill(qm: QueueManager, count: int, body: bytes) -> tuple[int, int]:
    """Send ``count`` messages in transactions of up to 10,000; (count, the queue's last id)."""
    left = count
    while left:
        n = min(left, 10_000)
        with qm.begin() as tx:
            qm.send_many(QUEUE, [MessageRecord(body=body) for _ in range(n)], tx)
        left -= n
    r = qm.lookup_range(QUEUE)
    assert r is not None and r.count == count
    return count, r.last


def remove(qm: QueueManager, backlog: tuple[int, int]) -> int:
    return qm.remove_through({QUEUE: backlog[1]})


def check(qm: QueueManager, backlog: tuple[int, int], got: Any) -> int:
    rec = qm.get_queue(QUEUE)
    assert got == backlog[0] and rec.msg_count == 0 and rec.total_bytes == 0
    return int(got)


def main() -> None:
    args = arguments(__doc__ or "", body_size=100)
    run_rounds(
        args, lambda qm: qm.create_queue(QUEUE, transactional=True), fill, remove, check, "removed", "removal"
    )


if __name__ == "__main__":
    main()
