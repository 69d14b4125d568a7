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

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _removal import arguments, run_rounds  # bench/_removal.py: the shared timing loop

from openmsmq.qm import MessageRecord, QueueManager
from openmsmq.qm.handles import QueueHandle

DEST = "DIRECT=TCP:127.0.0.2\\PRIVATE$\\bench"


def fill(qm: QueueManager, count: int, body: bytes) -> tuple[QueueHandle, int, int]:
    """Commit ``count`` messages 100 per transaction; (outgoing queue handle, last
    TxSequenceNumber, the TxSequenceID before the release)."""
    for start in range(0, count, 100):
        with qm.begin() as tx:
            qm.send_many(DEST, [MessageRecord(body=body) for _ in range(min(100, count - start))], tx)
    (rec,) = [q for q in qm.list_queues(include_system=True) if q.destination_format_name]
    handle = qm.open_queue(rec.display_name)  # as serve A opens it (transfer/sender.py)
    state = qm.outgoing_sequence(handle)
    assert rec.msg_count == count and state.next_tx_sequence_number == count + 1
    return handle, count, state.tx_sequence_id


def release(qm: QueueManager, backlog: tuple[QueueHandle, int, int]) -> Any:
    handle, last, _ = backlog
    return qm.sequence_store().release_outgoing(handle, last, return_ids=False)


def check(qm: QueueManager, backlog: tuple[QueueHandle, int, int], result: Any) -> int:
    handle, last, before = backlog
    _, state = result
    rec = qm.get_queue(handle)
    assert rec.msg_count == 0 and rec.total_bytes == 0 and state.tx_sequence_id != before
    return last


def main() -> None:
    args = arguments(__doc__ or "", body_size=256)
    run_rounds(args, lambda qm: None, fill, release, check, "released", "release")


if __name__ == "__main__":
    main()
