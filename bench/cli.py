"""Start-up time of the ``openmsmq`` command: ``--help``, ``status`` and ``send`` on a
stopped queue manager (in this process), each run ``--runs`` times as a new process; the
median and the spread of the wall time.

    python bench/cli.py [--runs 20] [--src DIR]

``--src`` puts another checkout's ``src`` first on the path (with this interpreter and
its installed dependencies), to compare two versions on one machine, before and after a
change (``docs/cli.md``, "Start-up").
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _time(argv: list[str], env: dict[str, str], runs: int) -> tuple[list[float], list[float]]:
    """Wall times and CPU times (user + system of the child) of ``runs`` runs. The CPU
    time moves far less than the wall time with the machine's load."""
    times: list[float] = []
    cpu: list[float] = []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, check=False)
        times.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)}: status {done.returncode}: {done.stderr.decode()[-500:]}")
    return times, cpu


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--src", type=Path, default=None, help="a checkout's src directory to run instead")
    args = parser.parse_args()
    env = dict(os.environ)
    # An installed package has its bytecode compiled (pip compiles wheels at install); a
    # shell that sets PYTHONDONTWRITEBYTECODE would instead time the compiler on every
    # call. Each case also runs once untimed first, so the cache exists.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if args.src is not None:
        env["PYTHONPATH"] = str(args.src.resolve())
    cmd = [sys.executable, "-m", "openmsmq"]
    with tempfile.TemporaryDirectory() as tmp:
        data = str(Path(tmp) / "qm")
        subprocess.run([*cmd, "init", data], env=env, check=True, capture_output=True)
        create = [*cmd, "--qm", data, "queue", "create", "private$\\bench"]
        subprocess.run(create, env=env, check=True, capture_output=True)
        cases = {
            "openmsmq --help": [*cmd, "--help"],
            "openmsmq status": [*cmd, "--qm", data, "status"],
            "openmsmq send": [*cmd, "--qm", data, "send", "private$\\bench", "hello"],
        }
        where = args.src or Path(__file__).resolve().parents[1] / "src"
        print(f"{args.runs} runs each, Python {sys.version.split()[0]}, src {where}")
        print(f"load average {os.getloadavg()[0]:.2f}")
        print(f"{'command':<18} {'median':>8} {'min':>8} {'max':>8} {'CPU median':>11}")
        for name, argv in cases.items():
            _time(argv, env, 1)  # writes the bytecode cache
            times, cpu = _time(argv, env, args.runs)
            print(
                f"{name:<18} {statistics.median(times) * 1000:>6.0f}ms {min(times) * 1000:>6.0f}ms"
                f" {max(times) * 1000:>6.0f}ms {statistics.median(cpu) * 1000:>9.0f}ms"
            )


if __name__ == "__main__":
    main()
