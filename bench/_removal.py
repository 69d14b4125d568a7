"""The timing loop shared by ``bench/remove_through.py`` and ``bench/release.py``.

Each round fills a fresh backlog, then times one removal of all of it with
``time.process_time()`` (the whole process: the calling thread and the store's writer
thread) and the wall clock; one more removal runs under cProfile for its Python calls
(calling thread only, a figure machine load does not move; the count includes the one
call of the script's own ``remove`` function).
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shlex
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

from openmsmq.qm import QueueManager


def arguments(doc: str, body_size: int) -> argparse.Namespace:
    """``--messages``, ``--body-size`` (default ``body_size``) and ``--repeat``."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=100_000)
    ap.add_argument("--body-size", type=int, default=body_size)
    ap.add_argument("--repeat", type=int, default=3)
    return ap.parse_args()


def run_rounds(
    args: argparse.Namespace,
    setup: Callable[[QueueManager], None],
    fill: Callable[[QueueManager, int, bytes], Any],
    remove: Callable[[QueueManager, Any], Any],
    check: Callable[[QueueManager, Any, Any], int],
    verb: str,
    noun: str,
) -> None:
    """Print the command, then per round ``round i: <verb> N: x us CPU/msg, y ms wall``,
    the Python calls of one more ``noun``, and the load average before and after.
    ``fill`` returns the backlog that ``remove`` (the timed call) takes; ``check`` (not
    timed) gets the backlog and what ``remove`` returned, asserts the outcome and returns
    how many messages were removed."""
    body = b"x" * args.body_size
    print("$ .venv/bin/python " + shlex.join(sys.argv))
    print("load average at start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
    with tempfile.TemporaryDirectory() as d, QueueManager(d + "/qm") as qm:
        setup(qm)
        for i in range(args.repeat):
            backlog = fill(qm, args.messages, body)
            c0, w0 = time.process_time(), time.perf_counter()
            result = remove(qm, backlog)
            c1, w1 = time.process_time(), time.perf_counter()
            n = check(qm, backlog, result)
            cpu_us, wall_ms = (c1 - c0) * 1e6 / n, (w1 - w0) * 1e3
            print(f"round {i + 1}: {verb} {n:,}: {cpu_us:.2f} us CPU/msg, {wall_ms:.0f} ms wall")
        backlog = fill(qm, args.messages, body)
        prof = cProfile.Profile()
        prof.enable()
        remove(qm, backlog)
        prof.disable()
        print(f"Python calls of one {noun} (cProfile, calling thread): {pstats.Stats(prof).total_calls:,}")
    print("load average at end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
