"""Child of tests/qm/test_poison_crash.py: moves, aborted receives (under a retry policy
that moves messages to ;retry and ;poison), retry-cycle returns and consuming receives
on one queue, at random, until it is SIGKILLed.

Usage: ``poison_crash_driver.py DATA_DIR LOG SEED``. Every operation is logged before it
starts (``begin``) and, with the state it left the message in (queue, AbortCount,
MoveCount), after it returned (``done``); a line is flushed and fsynced before the next
operation starts, so the log never claims more than what committed.
"""

from __future__ import annotations

import json
import os
import random
import sys
from pathlib import Path

from openmsmq.errors import MQError
from openmsmq.qm import MessageRecord, QueueManager
from openmsmq.retry_policy import RetryPolicy

Q = "private$\\p"
PLACES = (Q, Q + ";retry", Q + ";poison", Q + ";side")
N = 120


def main() -> None:
    data, log_path, seed = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    rng = random.Random(seed)
    log = open(log_path, "a", buffering=1)  # noqa: SIM115 - open for the whole run

    def write(rec: dict[str, object]) -> None:
        log.write(json.dumps(rec) + "\n")
        log.flush()
        os.fsync(log.fileno())

    with QueueManager(data) as qm:
        if qm.find_queue(Q) is None:
            policy = RetryPolicy(receive_retry_count=1, max_retry_cycles=2, retry_cycle_delay=0.01)
            qm.create_queue(Q, transactional=True, retry_policy=policy)
            with qm.begin() as tx:
                qm.send_many(Q, [MessageRecord(body=f"t{i:04d}".encode()) for i in range(N)], tx)
            write({"op": "sent", "tokens": [f"t{i:04d}" for i in range(N)]})

        def where() -> dict[str, tuple[str, int, int, int]]:
            out = {}
            for place in PLACES:
                try:
                    for m in qm.peek_range(place, 0, 1_000_000):
                        out[m.body.decode()] = (place, m.lookup_id, m.abort_count, m.move_count)
                except MQError:
                    pass  # a subqueue nothing was moved into yet
            return out

        for step in range(1_000_000):
            now = where()
            if not now:
                break
            token = rng.choice(sorted(now))
            place, lid, _a, _m = now[token]
            kind = rng.choice(("abort", "abort", "abort", "move", "return", "consume"))
            write({"op": step, "kind": kind, "token": token, "begin": True})
            try:
                if kind == "abort":
                    tx = qm.begin()
                    qm.receive_by_lookup_id(place, lid, tx=tx)
                    tx.abort()
                elif kind == "move":
                    target = rng.choice([p for p in PLACES if p != place])
                    with qm.begin() if rng.random() < 0.5 else _nothing() as tx:
                        qm.move_message(place, lid, target, tx)
                elif kind == "return":
                    qm.return_due()
                else:
                    with qm.begin() as tx:
                        qm.receive_by_lookup_id(place, lid, tx=tx)
            except MQError as exc:
                write({"op": step, "error": str(exc)})
                continue
            after = where()
            state = {t: [v[0], v[2], v[3]] for t, v in after.items()}
            write(
                {
                    "op": step,
                    "done": True,
                    "consumed": kind == "consume" and token not in after,
                    "state": state,
                }
            )


class _nothing:
    """``with`` of no transaction."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


if __name__ == "__main__":
    main()
