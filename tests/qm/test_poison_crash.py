"""Crash test of moves, aborted receives under a retry policy and retry-cycle returns: a
child (poison_crash_driver.py) does them at random and is SIGKILLed, again and again.

After every restart: every message is in exactly one place (the queue or one of its
subqueues) or was consumed by a committed receive; nothing is lost or duplicated; no
LookupIdentifier repeats; a message's MoveCount is never lower than the moves that
committed, and while it has not moved since, its AbortCount is never lower than the
aborts that committed. Only the operation the kill interrupted may have happened or not.
``OPENMSMQ_POISON_CRASH_ROUNDS`` sets the number of kills (default 6).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from openmsmq.errors import MQError
from openmsmq.qm import QueueManager
from tests.sigkill import run_and_kill

DRIVER = Path(__file__).with_name("poison_crash_driver.py")
ROUNDS = int(os.environ.get("OPENMSMQ_POISON_CRASH_ROUNDS", "6"))
Q = "private$\\p"
PLACES = (Q, Q + ";retry", Q + ";poison", Q + ";side")


def _records(path: Path) -> list[dict]:
    out = []
    if path.exists():
        for line in path.read_bytes().split(b"\n"):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue  # the torn last line
    return out


def _actual(data: Path) -> dict[str, tuple[str, int, int, int]]:
    found: dict[str, tuple[str, int, int, int]] = {}
    ids: set[int] = set()
    with QueueManager(data) as qm:
        for place in PLACES:
            try:
                msgs = qm.peek_range(place, 0, 1_000_000)
            except MQError:
                continue
            for m in msgs:
                token = m.body.decode()
                assert token not in found, f"{token} in {found[token][0]} and in {place}"
                assert m.lookup_id not in ids, f"LookupIdentifier {m.lookup_id} twice"
                ids.add(m.lookup_id)
                found[token] = (place, m.lookup_id, m.abort_count, m.move_count)
    return found


def _check(records: list[dict], actual: dict[str, tuple[str, int, int, int]]) -> int:
    """Compare the store after a kill with the last state the driver logged; returns the
    number of operations that completed."""
    sent = next((r["tokens"] for r in records if r.get("op") == "sent"), None)
    if sent is None:
        return 0  # killed during setup: the send committed wholly or not at all
    dones = [r for r in records if r.get("done")]
    state: dict[str, list] = dones[-1]["state"] if dones else {t: [Q, 0, 0] for t in sent}
    last = dones[-1]["op"] if dones else -1
    begun = [r for r in records if r.get("begin") and r["op"] != "sent"]
    doubt = begun[-1] if begun and begun[-1]["op"] != last else None
    touched = set() if doubt is None else {doubt["token"]}
    returning = doubt is not None and doubt["kind"] in ("return", "abort", "move")
    for token, (place, abort, move) in state.items():
        got = actual.get(token)
        if got is None:
            assert doubt is not None and doubt["kind"] == "consume" and token in touched, f"{token} lost"
            continue
        a_place, _lid, a_abort, a_move = got
        assert a_move >= move, f"{token}: MoveCount {a_move} < {move} committed"
        if a_move == move:
            assert a_abort >= abort, f"{token}: AbortCount {a_abort} < {abort} committed"
            if token not in touched and not (returning and place.endswith(";retry")):
                assert a_place == place, f"{token} in {a_place}, committed in {place}"
    for token in actual:
        assert token in state, f"{token} consumed by a committed receive, but back"
    return len(dones)


def test_sigkill_around_moves_aborts_and_returns(tmp_path: Path) -> None:
    data, log = tmp_path / "data", tmp_path / "log.jsonl"
    completed = 0
    for round_no in range(ROUNDS):
        want = completed + 15 + 7 * round_no
        run_and_kill(
            DRIVER,
            [str(data), str(log), str(round_no)],
            lambda: sum(1 for r in _records(log) if r.get("done")),
            want,
            pause=0.001 * (round_no % 4),
        )
        completed = _check(_records(log), _actual(data))
    records = _records(log)
    kinds = {r["kind"] for r in records if r.get("begin")}
    # The run exercised every operation, and the policy moved messages both ways.
    assert {"abort", "move", "return", "consume"} <= kinds
    final = _actual(data)
    assert any(v[3] >= 2 for v in final.values()), "no message completed a retry cycle"
