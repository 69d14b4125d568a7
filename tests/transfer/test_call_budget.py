"""Python calls per transferred message: a bound on the interpreter's work per message that
the machine's load does not move (``bench/transfer_cpu.py --calls`` measures the same on
10,000 messages; docs/performance.md, "CPU per transferred message").

The harness is deterministic (no threads, a fake clock), so the count of one run is the
same on every machine: a change that adds calls per message on the hot path (the
application's send, A's load / encode / window, B's decode / receipt / rows) fails here.
"""

from __future__ import annotations

import cProfile
import pstats
from pathlib import Path

from openmsmq.store.records import MessageRecord

from .harness import Net, outgoing_count

DEST = "DIRECT=TCP:127.0.0.2\\PRIVATE$\\bench"
MESSAGES = 2_000
#: Calls per message the whole round may take (send on A, the transfer A -> B, the
#: OrderAck's release): a third under the 105 of the reference codecs alone.
BUDGET = 61


def _round(net: Net, n: int) -> None:
    a = net.nodes["127.0.0.1"]
    body = bytes(256)
    for _ in range(0, n, 100):
        tx = a.qm.begin()
        a.qm.send_many(DEST, [MessageRecord(body=body) for _ in range(100)], tx)
        tx.commit()
    net.settle(100_000)
    net.clock.now += 0.6  # OrderAckTimeout
    for node in net.nodes.values():
        node.transfer.handle_timer(net.clock.now)
    net.settle(100_000)


def test_python_calls_per_transferred_message(tmp_path: Path, net: Net) -> None:
    a, b = net.add("127.0.0.1"), net.add("127.0.0.2")
    b.qm.create_queue("private$\\bench", transactional=True)
    _round(net, 200)  # sessions open, memo caches filled: the steady state is measured
    profile = cProfile.Profile()
    profile.enable()
    _round(net, MESSAGES)
    profile.disable()
    assert outgoing_count(a.qm) == 0
    assert len(b.qm.peek_range("private$\\bench", 0, MESSAGES + 201)) == MESSAGES + 200
    calls: int = pstats.Stats(profile).total_calls  # type: ignore[attr-defined]
    assert calls / MESSAGES <= BUDGET, f"{calls / MESSAGES:.1f} Python calls per message"
