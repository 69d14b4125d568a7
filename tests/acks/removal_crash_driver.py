"""Child process of test_removal_crash.py: sends, purges and expires until SIGKILLed.

Usage: python removal_crash_driver.py DATA_DIR LOG_PATH ROUND SEED

One QueueManager with the acknowledgment listener attached (as ``serve`` attaches it).
Each step sends 1-5 non-transactional messages that ask for negative receive
acknowledgments (NR) to the local admin queue and may expire (TimeToBeReceived 60 s),
logs their tokens once the send returned (durable), then purges the queue, expires
everything (``expire`` with a clock 120 s ahead) or does nothing. Each log line is
written and fsynced before going on.
"""

from __future__ import annotations

import json
import os
import random
import sys

from openmsmq.qm import MessageRecord, QueueManager
from openmsmq.transfer.ack_admin import attach_acknowledgments
from openmsmq.wire.constants import AckRequest

SOURCE = "private$\\src"
ADMIN = "private$\\admin"
ADMIN_FORMAT_NAME = "DIRECT=OS:.\\private$\\admin"


def main() -> None:
    data_dir, log_path, rnd, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(seed)
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    qm = QueueManager(data_dir)
    attach_acknowledgments(qm)
    for q in (SOURCE, ADMIN):
        if q not in {r.name for r in qm.list_queues()}:
            qm.create_queue(q)
    step = 0
    while True:
        step += 1
        tokens = [f"{rnd}-{step}-{k}" for k in range(rng.randint(1, 5))]
        qm.send_many(
            SOURCE,
            [
                MessageRecord(
                    body=t.encode(),
                    admin_queue=ADMIN_FORMAT_NAME,
                    ack_flags=AckRequest.NEG_RECEIVE,
                    time_to_be_received=60,
                )
                for t in tokens
            ],
        )
        os.write(fd, (json.dumps({"sent": tokens}) + "\n").encode())
        os.fsync(fd)
        action = rng.random()
        if action < 0.4:
            qm.purge_queue(SOURCE)
        elif action < 0.8:
            qm.expire(qm.clock() + 120)


if __name__ == "__main__":
    main()
