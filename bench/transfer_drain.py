"""Drain of a committed backlog: the transfer alone, without the sending application.

    .venv/bin/python bench/transfer_drain.py [--messages 100000] [--body-size 256] [--repeat 3]

``bench/transfer.py`` runs the sender beside the two ``serve`` processes on the same
cores, so its figures move with how fast the sender commits. Here the messages
(``--per-tx`` 100 per transaction) are committed into A's data directory *before*
``serve`` A starts; then ``serve`` A (127.0.0.1) transfers them to ``serve`` B
(127.0.0.2), both started as ``bench/transfer.py`` starts them. Printed per run, from the
start of ``serve`` A (its start-up included): *all stored at B*, *last OrderAck* (A's
outgoing queue is empty), the CPU per message of each ``serve`` process and its peak
resident memory (VmHWM).
``OPENMSMQ_*`` variables reach both processes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import transfer as tb  # bench/transfer.py: the same serve start-up and readers


def _peak_mb(p: tb.Proc) -> float:
    """Peak resident memory (VmHWM) of a running process, MB (0.0 where unknown)."""
    try:
        for line in Path(f"/proc/{p.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


Figures = tuple[float, float, dict[str, float], dict[str, float]]


def drain_once(n: int, body_size: int, per_tx: int) -> Figures:
    """(stored s, acked s, CPU µs/msg and peak MB per serve process) of one run."""
    from openmsmq.qm import QueueManager
    from openmsmq.store.records import MessageRecord

    work = Path(tempfile.mkdtemp(prefix="openmsmq-bench-drain-"))
    a_dir, b_dir = work / "a", work / "b"
    procs: list[tb.Proc] = []
    try:
        with QueueManager(b_dir) as qb:
            qb.create_queue(tb.QUEUE, transactional=True)
        body = bytes(body_size)
        with QueueManager(a_dir) as qa:
            for start in range(0, n, per_tx):
                tx = qa.begin()
                qa.send_many(tb.DEST, [MessageRecord(body=body) for _ in range(min(per_tx, n - start))], tx)
                tx.commit()
        port = tb._free_port()
        b = tb._serve("serve-b", work, b_dir, tb.B, port, "none")
        procs.append(b)
        cb = tb._ro(b_dir)
        t0 = time.monotonic()
        a = tb._serve("serve-a", work, a_dir, tb.A, port, "none")
        procs.append(a)
        ca = tb._ro(a_dir)
        cpu0 = {p.name: p.cpu_seconds() for p in procs}
        t_stored = None
        while True:
            now = time.monotonic()
            if now - t0 > 600:
                raise TimeoutError("drain not finished after 600 s")
            if t_stored is None:
                row = cb.execute("SELECT msg_count FROM queues WHERE name = ?", (tb.QUEUE,)).fetchone()
                if row and row[0] >= n:
                    t_stored = now
            if t_stored is not None:
                outgoing = "SELECT coalesce(sum(msg_count), 0) FROM queues WHERE queue_type = 4"
                row = ca.execute(outgoing).fetchone()
                if row[0] == 0:
                    t_acked = now
                    break
            for p in procs:
                p.check()
            time.sleep(0.005)
        cpu = {p.name: (p.cpu_seconds() - cpu0[p.name]) / n * 1e6 for p in procs}
        peak = {p.name: _peak_mb(p) for p in procs}
        ca.close()
        cb.close()
        return t_stored - t0, t_acked - t0, cpu, peak
    finally:
        for p in procs:
            p.stop()
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--body-size", type=int, default=256)
    ap.add_argument("--per-tx", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    settings = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("OPENMSMQ_"))
    print(f"# {settings + ' ' if settings else ''}.venv/bin/python bench/transfer_drain.py"
          f" --messages {args.messages} --repeat {args.repeat}")  # fmt: skip
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime())} UTC  load={os.getloadavg()[0]:.2f}")
    for _ in range(max(1, args.repeat)):
        stored, acked, cpu, peak = drain_once(args.messages, args.body_size, args.per_tx)
        print(f"drained {args.messages:,}: all stored at B {stored:.2f} s, last OrderAck {acked:.2f} s"
              f" ({args.messages / acked:,.0f} msgs/s); CPU per message serve-a {cpu['serve-a']:.1f} us,"
              f" serve-b {cpu['serve-b']:.1f} us; peak RSS serve-a {peak['serve-a']:.0f} MB,"
              f" serve-b {peak['serve-b']:.0f} MB; load {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
