"""Crash test: no purged or expired message loses its acknowledgment.

A child (removal_crash_driver.py) sends messages that ask for negative receive
acknowledgments, purges and expires them, and is SIGKILLed at random moments. After
every kill the store must show each removal with its acknowledgment: every message the
child saw sent is still in the queue or has exactly one NACK (NACK_Q_PURGED or
NACK_RECEIVE_TIMEOUT, whose body is the message's) in the admin queue, and no message
both. With the acknowledgments written in a commit after the removal's, a kill between
the two leaves a removed message without one. ``OPENMSMQ_CRASH_ROUNDS`` sets the number
of kills (default 20).
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from pathlib import Path

from openmsmq.qm import QueueManager
from openmsmq.wire.constants import MessageClass
from tests.sigkill import run_and_kill

DRIVER = Path(__file__).with_name("removal_crash_driver.py")
ROUNDS = int(os.environ.get("OPENMSMQ_CRASH_ROUNDS", "20"))
NACKS = {MessageClass.NACK_Q_PURGED, MessageClass.NACK_RECEIVE_TIMEOUT}


def _sent(path: Path) -> list[str]:
    out: list[str] = []
    if path.exists():
        for line in path.read_bytes().split(b"\n"):
            try:
                out += json.loads(line)["sent"]
            except ValueError:
                continue  # torn last line
    return out


def _state(data_dir: Path) -> tuple[set[str], Counter[str]]:
    """(tokens in the source queue, acknowledged tokens with their NACK counts)."""
    with QueueManager(data_dir) as qm:
        names = {r.name for r in qm.list_queues()}
        if "private$\\src" not in names or "private$\\admin" not in names:
            return set(), Counter()
        queued = {m.body.decode() for m in qm.peek_range("private$\\src", 0, 1_000_000)}
        acks = qm.peek_range("private$\\admin", 0, 1_000_000)
        assert all(m.message_class in NACKS for m in acks), "an unexpected acknowledgment class"
        return queued, Counter(m.body.decode() for m in acks)


def test_sigkill_during_purges_and_expiry(tmp_path: Path) -> None:
    rng = random.Random(int(os.environ.get("OPENMSMQ_CRASH_SEED", "1")))
    data_dir = tmp_path / "qm"
    sent: list[str] = []
    removed_total = 0
    for rnd in range(ROUNDS):
        log = tmp_path / f"log{rnd}"
        args = [str(data_dir), str(log), str(rnd), str(rng.randrange(1 << 30))]
        # The pause lands the kill anywhere in the step after the last log line.
        run_and_kill(
            DRIVER, args, lambda log=log: len(_sent(log)), rng.randint(2, 40), pause=rng.random() * 0.01
        )
        round_sent = _sent(log)
        assert round_sent, "driver made no progress"
        sent += round_sent
        queued, acked = _state(data_dir)
        twice = [t for t, n in acked.items() if n > 1]
        assert not twice, f"round {rnd}: acknowledged more than once: {twice[:5]}"
        both = queued & set(acked)
        assert not both, f"round {rnd}: acknowledged but still queued: {sorted(both)[:5]}"
        lost = [t for t in sent if t not in queued and t not in acked]
        assert not lost, f"round {rnd}: removed without its acknowledgment: {lost[:5]}"
        removed_total = len(acked)
    assert removed_total > ROUNDS, "too few removals to mean anything"
