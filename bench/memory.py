"""Resident memory of a queue manager holding many messages (bodies live on disk).

    .venv/bin/python bench/memory.py [--messages 1000000] [--batch 1000]

Fills one transactional queue with 256-byte messages, ``--batch`` per transaction,
then prints the fill time, the resident set size (VmRSS) and its peak (VmHWM) — the
aim is under 200 MB for 1,000,000 messages — and checks a receive still works.
"""

from __future__ import annotations

import argparse
import shlex
import sys
import tempfile
import time
from pathlib import Path

from openmsmq.qm import MessageRecord, QueueManager


def rss_mb() -> tuple[float, float]:
    """(VmRSS, VmHWM) of this process in MB, from /proc/self/status."""
    values = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) / 1024
    return values["VmRSS"], values["VmHWM"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=1000)
    ap.add_argument("--dir", default=None, help="directory for the store (default: a temp dir)")
    args = ap.parse_args()
    print("$", shlex.join([sys.executable, *sys.argv]))
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        before = rss_mb()[0]
        with QueueManager(Path(tmp) / "qm") as qm:
            q = "private$\\memory"
            qm.create_queue(q, transactional=True)
            batch = [MessageRecord(body=bytes(256))] * args.batch
            start = time.perf_counter()
            for _ in range(args.messages // args.batch):
                with qm.begin() as tx:
                    qm.send_many(q, batch, tx)
            fill = time.perf_counter() - start
            held = qm.get_queue(q).msg_count
            rss, peak = rss_mb()
            with qm.begin() as tx:
                first = qm.receive(q, tx=tx)
            size_mb = sum(p.stat().st_size for p in (Path(tmp) / "qm").iterdir()) / 1e6
        print(f"messages held:   {held:,} of 256 bytes (store files {size_mb:,.0f} MB)")
        print(f"fill time:       {fill:.1f} s ({held / fill:,.0f} msgs/s, {args.batch} per transaction)")
        print(f"resident memory: {rss:.0f} MB now, {peak:.0f} MB peak (was {before:.0f} MB before opening)")
        print(f"first message:   LookupIdentifier {first.lookup_id}, {len(first.body)} bytes")
        print("PASS" if peak < 200 else "FAIL", "(aim: peak under 200 MB)")


if __name__ == "__main__":
    main()
