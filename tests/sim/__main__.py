"""Run many seeds of the simulator and print a summary (``make sim SEEDS=N``).

    python -m tests.sim --seeds 1000            # seeds 0..999 on every core
    python -m tests.sim --seed 42 --trace       # one seed, with its trace
    python -m tests.sim --seeds 300 --bug ack-before-durable   # does the checker catch it?
    python -m tests.sim --seeds 300 --bug ha-no-fence          # the lease world's checker

Each seed runs the transfer world (three queue managers, tests/sim/world.py) and the lease
world (active/standby nodes of one queue manager, tests/sim/ha.py); ``--world`` picks one.

Exit status 1 if a seed failed (without ``--bug``), or if ``--bug`` was not caught.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor

from .ha import HA_BUGS, HaResult, HaStats, run_ha
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
    p.add_argument("--bug", choices=["ack-before-durable", "accept-duplicate", *HA_BUGS], help="plant a bug")
    p.add_argument(
        "--world", choices=["both", "transfer", "ha"], default="both", help="which world(s) to run"
    )
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
    ha_bug = a.bug in HA_BUGS
    transfer_bug = a.bug is not None and not ha_bug
    status = 0
    if ha_bug or (a.world in ("both", "ha") and not transfer_bug):
        status |= _run_ha(seeds, a.bug if ha_bug else None, a.jobs, a.trace)
    if not ha_bug and a.world in ("both", "transfer"):
        status |= _run_transfer(a, seeds)
    return status


def _one_ha(args: tuple[int, str | None]) -> HaResult:
    seed, bug = args
    return run_ha(seed, bug=bug)


def _run_ha(seeds: list[int], bug: str | None, jobs: int, trace: bool) -> int:
    """The lease world over ``seeds``; returns the exit status."""
    t0 = time.perf_counter()
    args = [(s, bug) for s in seeds]
    if jobs > 1 and len(args) > 1:
        with ProcessPoolExecutor(jobs) as pool:
            results = list(pool.map(_one_ha, args, chunksize=16))
    else:
        results = [_one_ha(x) for x in args]
    total = HaStats()
    failed = [r for r in results if not r.ok]
    for r in results:
        total.add(r.stats)
        if trace or (not r.ok and bug is None):
            print(r.report())
    print(
        f"lease world: runs: {len(results)}   failures: {len(failed)}   wall: {time.perf_counter() - t0:.1f}s"
    )
    if bug:
        print(f"planted bug: {bug}")
    by_check: dict[str, list[int]] = {}
    for r in failed:
        by_check.setdefault(r.failure.check if r.failure else "?", []).append(r.seed)
    for check, ss in sorted(by_check.items()):
        shown = " ".join(map(str, ss[:20])) + (" ..." if len(ss) > 20 else "")
        print(f"  failed {check}: {len(ss)} seeds: {shown}")
    print("  faults injected: " + ", ".join(f"{k} {v}" for k, v in sorted(total.faults.items())))
    print(
        f"  writes accepted: {total.commits}   writes fenced off: {total.fenced}"
        f"   terms granted: {total.grants}   longest final takeover: {total.takeover:.2f} simulated s"
    )
    print("  step-downs: " + ", ".join(f"{k}: {v}" for k, v in sorted(total.step_downs.items())))
    if bug:
        return 0 if failed else 1
    return 1 if failed else 0


def _run_transfer(a: argparse.Namespace, seeds: list[int]) -> int:
    """The transfer world over ``seeds``; returns the exit status."""
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
