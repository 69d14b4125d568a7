"""Move Message beside plain transactional receive on the same queue manager.

    .venv/bin/python bench/poison.py [--messages 20000] [--single 2000] [--batch 100] [--repeat 3]

Measures, on one QueueManager in a temporary data directory (SQLite, the default
``synchronous``): messages per second of

- transactional receive, one message per transaction and ``--batch`` per transaction;
- Move Message to a subqueue, one per call (each durable on return) and ``--batch`` moves
  in one transaction;
- aborted transactional receives (each counted durably in AbortCount), one per transaction.

Each round measures them back to back; figures are medians over ``--repeat`` rounds
with their range, and the ratios of the moves to the receives of the same shape.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from openmsmq.qm import MessageRecord, QueueManager

BODY = bytes(256)
Q = "private$\\bench"


def _fill(qm: QueueManager, n: int) -> list[int]:
    """``n`` messages in Q (1000 per transaction); their LookupIdentifiers."""
    ids: list[int] = []
    for start in range(0, n, 1000):
        tx = qm.begin()
        qm.send_many(Q, [MessageRecord(body=BODY)] * min(1000, n - start), tx)
        ids += tx.commit()
    return ids


def _rate(n: int, fn: Callable[[], None]) -> float:
    start = time.perf_counter()
    fn()
    return n / (time.perf_counter() - start)


def receive_single(qm: QueueManager, n: int) -> float:
    _fill(qm, n)

    def run() -> None:
        for _ in range(n):
            with qm.begin() as tx:
                qm.receive(Q, tx=tx)

    return _rate(n, run)


def receive_batched(qm: QueueManager, n: int, batch: int) -> float:
    _fill(qm, n)

    def run() -> None:
        for _ in range(n // batch):
            with qm.begin() as tx:
                qm.receive_many(Q, batch, tx=tx)

    return _rate(n // batch * batch, run)


def move_single(qm: QueueManager, n: int) -> float:
    ids = _fill(qm, n)

    def run() -> None:
        for lid in ids:
            qm.move_message(Q, lid, "poison")

    rate = _rate(n, run)
    qm.purge_queue(Q + ";poison")
    return rate


def move_batched(qm: QueueManager, n: int, batch: int) -> float:
    ids = _fill(qm, n)

    def run() -> None:
        for start in range(0, len(ids) - batch + 1, batch):
            with qm.begin() as tx:
                for lid in ids[start : start + batch]:
                    qm.move_message(Q, lid, "poison", tx)

    rate = _rate(n // batch * batch, run)
    qm.purge_queue(Q + ";poison")
    qm.purge_queue(Q)
    return rate


def abort_single(qm: QueueManager, n: int) -> float:
    _fill(qm, 1)

    def run() -> None:
        for _ in range(n):
            tx = qm.begin()
            qm.receive(Q, tx=tx)
            tx.abort()

    rate = _rate(n, run)
    qm.purge_queue(Q)
    return rate


def _fmt(xs: list[float]) -> str:
    return f"{statistics.median(xs):>10,.0f} msgs/s  (range {min(xs):,.0f}-{max(xs):,.0f})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--messages", type=int, default=20_000, help="messages of the batched runs")
    ap.add_argument("--single", type=int, default=2_000, help="messages of the one-per-call runs")
    ap.add_argument("--batch", type=int, default=100, help="messages per transaction of the batched runs")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print("$ " + shlex.join([sys.executable, *sys.argv]))
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    results: dict[str, list[float]] = {}
    for _ in range(args.repeat):
        with (
            tempfile.TemporaryDirectory(prefix="openmsmq-bench-poison-") as d,
            QueueManager(Path(d) / "qm") as qm,
        ):
            qm.create_queue(Q, transactional=True)
            for key, fn in (
                ("receive, 1 per transaction", lambda: receive_single(qm, args.single)),
                ("move, 1 per call", lambda: move_single(qm, args.single)),
                (
                    f"receive, {args.batch} per transaction",
                    lambda: receive_batched(qm, args.messages, args.batch),
                ),
                (
                    f"move, {args.batch} per transaction",
                    lambda: move_batched(qm, args.messages, args.batch),
                ),
                ("aborted receive (counted), 1 per transaction", lambda: abort_single(qm, args.single)),
            ):
                results.setdefault(key, []).append(fn())
    for key, xs in results.items():
        print(f"{key:<48} {_fmt(xs)}")
    med = {k: statistics.median(v) for k, v in results.items()}
    single = med["move, 1 per call"] / med["receive, 1 per transaction"]
    print(f"ratio move/receive, 1 per transaction:   {single:.2f}")
    batched = f"{args.batch} per transaction"
    print(f"ratio move/receive, {batched}: {med['move, ' + batched] / med['receive, ' + batched]:.2f}")


if __name__ == "__main__":
    main()
