"""Run many seeds of the simulator and print a summary (``make sim SEEDS=N``).

    python -m tests.sim --seeds 1000            # seeds 0..999 on every core
    python -m tests.sim --seed 42 --trace       # one seed, with its trace
    python -m tests.sim --seeds 300 --bug ack-before-durable   # does the checker catch it?

Exit status 1 if a seed failed (without ``--bug``), or if ``--bug`` was not caught.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from .model import FaultConfig, SimStats
from .world import RunResult, run


def _one(args: tuple[int, str | None, bool, int | None]) -> tuple[RunResult, float]:
    seed, bug, strict, window = args
    t0 = time.perf_counter()
    faults = FaultConfig(check_release=strict)
    if window is not None:
        faults = FaultConfig(check_release=strict, max_in_flight=window, batch_size=window // 3 + 1)
    result = run(seed, faults, bug)
    return result, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    p = argparse.ArgumentParser(prog="python -m tests.sim", description=__doc__.splitlines()[0])
    p.add_argument("--seeds", type=int, default=100, help="how many seeds (default 100)")
    p.add_argument("--start", type=int, default=0, help="first seed (default 0)")
    p.add_argument("--seed", type=int, help="run only this seed")
    p.add_argument("--bug", choices=["ack-before-durable", "accept-duplicate"], help="plant a bug")
    p.add_argument(
        "--no-release-check",
        action="store_true",
        help="judge by end-to-end outcomes only (no release-after-durable oracle)",
    )
    p.add_argument(
        "--window",
        type=int,
        metavar="N",
        help="max_in_flight N and batch_size N//3+1 per outgoing queue (default: production)",
    )
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes")
    p.add_argument("--trace", action="store_true", help="print the trace of every run, not only failures")
    a = p.parse_args(argv)
    seeds = [a.seed] if a.seed is not None else list(range(a.start, a.start + a.seeds))
    jobs = [(s, a.bug, not a.no_release_check, a.window) for s in seeds]
    total = SimStats()
    failed: list[RunResult] = []
    longest: tuple[float, int, float, int] = (0.0, -1, 0.0, 0)  # sim time, seed, wall, events
    t0 = time.perf_counter()
    if a.jobs > 1 and len(jobs) > 1:
        with ProcessPoolExecutor(a.jobs) as pool:
            results = list(pool.map(_one, jobs, chunksize=4))
    else:
        results = [_one(j) for j in jobs]
    for result, wall in results:
        total.add(result.stats)
        if result.stats.sim_time > longest[0]:
            longest = (result.stats.sim_time, result.seed, wall, result.stats.events)
        if not result.ok:
            failed.append(result)
        if a.trace or (not result.ok and a.bug is None):
            print(result.report())
    wall_all = time.perf_counter() - t0
    print(f"runs: {len(results)}   failures: {len(failed)}   wall: {wall_all:.1f}s ({a.jobs} jobs)")
    if a.bug:
        print(f"planted bug: {a.bug}")
    if failed:
        by_check: dict[str, list[int]] = {}
        for r in failed:
            by_check.setdefault(r.failure.check if r.failure else "?", []).append(r.seed)
        for check, ss in sorted(by_check.items()):
            shown = " ".join(map(str, ss[:20])) + (" ..." if len(ss) > 20 else "")
            print(f"  failed {check}: {len(ss)} seeds: {shown}")
    print("faults injected: " + ", ".join(f"{k} {v}" for k, v in sorted(total.faults.items())))
    print(
        f"messages checked: {total.messages_checked}   committed sender transactions: {total.committed_tx}"
        f"   aborted or lost: {total.aborted_tx}"
    )
    print("receive outcomes: " + ", ".join(f"{k} {v}" for k, v in sorted(total.receives.items())))
    print(
        f"longest run: seed {longest[1]}: {longest[0]:.1f} simulated s, {longest[3]} events, "
        f"{longest[2]:.2f} s wall; longest drain after the faults: {total.drain_time:.1f} simulated s"
    )
    if a.bug:
        return 0 if failed else 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
