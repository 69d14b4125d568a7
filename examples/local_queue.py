"""A first run of openmsmq on one queue manager (what `make demo` runs until the Spark pipeline lands).

It opens a queue manager over a fresh data directory (embedded SQLite store), creates a
transactional queue, sends order events in transactions of 100, receives them back in
transactions, and checks that every message arrived exactly once and in send order.
Everything it prints was measured in this run.

    .venv/bin/python examples/local_queue.py [--messages N] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import openmsmq

QUEUE = "private$\\orders"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000, help="order events to send (default 20000)")
    parser.add_argument("--batch", type=int, default=100, help="messages per transaction (default 100)")
    parser.add_argument("--data-dir", type=Path, default=None, help="data directory (default: a temp dir)")
    args = parser.parse_args()
    if args.messages < 1 or args.batch < 1:
        parser.error("--messages and --batch must be positive")

    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="openmsmq-demo-"))
    try:
        return run(data_dir, args.messages, args.batch)
    finally:
        if args.data_dir is None:
            shutil.rmtree(data_dir, ignore_errors=True)


def run(data_dir: Path, total: int, batch: int) -> int:
    print(f"queue manager data directory: {data_dir}")
    with openmsmq.connect(str(data_dir)) as conn:
        conn.create_queue(QUEUE, transactional=True, exist_ok=True)
        queue = conn.open_queue(QUEUE)

        started = time.perf_counter()
        for first in range(0, total, batch):
            bodies = [
                json.dumps({"order": n, "customer": n % 97, "amount_cents": 100 + n % 1000}).encode()
                for n in range(first, min(first + batch, total))
            ]
            with conn.transaction() as tx:
                queue.send_many(bodies, tx=tx)
        sent_s = time.perf_counter() - started

        seen: list[int] = []
        started = time.perf_counter()
        while len(seen) < total:
            with conn.transaction() as tx:
                got = queue.receive_many(batch, timeout=5, tx=tx)
                seen.extend(json.loads(m.body)["order"] for m in got)
        received_s = time.perf_counter() - started
        left = queue.info().message_count

    duplicates = len(seen) - len(set(seen))
    missing = total - len(set(seen))
    in_order = seen == sorted(seen)
    print(f"sent      {total:>9,} messages, {batch} per transaction: {total / sent_s:>10,.0f} msg/s")
    print(f"received  {len(seen):>9,} messages transactionally:    {len(seen) / received_s:>10,.0f} msg/s")
    print(f"duplicates {duplicates}, missing {missing}, in send order: {in_order}, left in the queue: {left}")
    return 0 if duplicates == 0 and missing == 0 and in_order and left == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
