"""Crash test: a child runs transactions and is SIGKILLed at random moments.

After every restart the queue contents must equal the model built from the child's
log: every committed message present exactly once or consumed exactly once by a
committed receive, nothing aborted or uncommitted visible, an in-doubt transaction
(killed inside commit) either wholly applied or not at all, and LookupIdentifiers
never repeated across restarts. ``OPENMSMQ_CRASH_ROUNDS`` sets the number of kills
(default 30, 10 on PostgreSQL; ``make crash ROUNDS=N``). It runs on both store backends: SQLite, and
PostgreSQL (the killed process's connection drops inside its transactions and COMMITs).
"""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from openmsmq.qm import QueueManager
from tests.sigkill import run_and_kill
from tests.store.crash_driver import store_options

DRIVER = Path(__file__).with_name("crash_driver.py")
ROUNDS = int(os.environ.get("OPENMSMQ_CRASH_ROUNDS", "30"))
#: Kills on PostgreSQL in ``make test`` (a round costs it a few times more: a new process
#: connects and opens the schema twice per round); ``OPENMSMQ_CRASH_ROUNDS`` sets both.
PG_ROUNDS = int(os.environ.get("OPENMSMQ_CRASH_ROUNDS", "10"))
QUEUES = ("a", "b", "c", "d")


def _records(path: Path) -> list[dict]:
    if not path.exists():
        return []
    out = []
    for line in path.read_bytes().split(b"\n"):
        try:
            out.append(json.loads(line))
        except ValueError:
            continue  # torn last line
    return out


def _snapshot(data_dir: Path, dsn: str | None) -> dict[str, dict[str, int]]:
    with QueueManager(data_dir, store_options=store_options(dsn)) as qm:
        snap: dict[str, dict[str, int]] = {}
        for q in QUEUES:
            try:
                msgs = qm.peek_range("private$\\" + q, 0, 1_000_000)
            except Exception:  # queue not created yet (killed during setup)
                msgs = []
            tokens = [m.body.decode() for m in msgs]
            assert len(tokens) == len(set(tokens)), f"duplicate message in {q}"
            snap[q] = {m.body.decode(): m.lookup_id for m in msgs}
        return snap


def _apply(model: dict[str, set[str]], rec: dict, applied: bool) -> None:
    if not applied:
        return
    for q, toks in rec.get("add", {}).items():
        model[q].update(toks)
    for q, toks in rec.get("remove", {}).items():
        model[q].difference_update(toks)


def _reconcile(model: dict[str, set[str]], records: list[dict], actual: dict[str, dict[str, int]]) -> None:
    begins: dict[str, dict] = {}
    ends: dict[str, dict] = {}
    for r in records:
        if "kind" in r:
            begins[r["op"]] = r
        else:
            ends[r["op"]] = r
    in_doubt = []
    for op, rec in begins.items():
        if rec["kind"] == "start":
            continue
        end = ends.get(op)
        if rec["kind"] == "nrecv":
            if end is None:
                in_doubt.append(rec)
            elif end.get("removed"):
                model["c"].discard(end["removed"])
            continue
        if end is None:
            in_doubt.append(rec)
        else:
            _apply(model, rec, bool(end.get("done")))
    for rec in in_doubt:
        if rec["kind"] == "nrecv":
            gone = model["c"] - set(actual["c"])
            assert len(gone) <= 1, f"in-doubt receive removed {gone}"
            model["c"] -= gone
            continue
        adds = [(q, t) for q, toks in rec["add"].items() for t in toks]
        removes = [(q, t) for q, toks in rec["remove"].items() for t in toks]
        present = [t in actual[q] for q, t in adds]
        still = [t in actual[q] for q, t in removes]
        applied = (all(present) if adds else not any(still)) and not any(still)
        not_applied = not any(present) and all(still)
        assert applied or not_applied, f"partially applied transaction {rec}"
        _apply(model, rec, applied)


def test_sigkill_rounds(tmp_path: Path, backend: str, request: pytest.FixtureRequest) -> None:
    dsn = request.getfixturevalue("pg_dsn") if backend == "postgresql" else None
    rng = random.Random(int(os.environ.get("OPENMSMQ_CRASH_SEED", "1")))
    data_dir = tmp_path / "qm"
    model: dict[str, set[str]] = {q: set() for q in QUEUES}
    lookup_owner: dict[int, str] = {}
    max_seen = 0
    commits = 0
    rounds = PG_ROUNDS if dsn else ROUNDS
    for rnd in range(rounds):
        log = tmp_path / f"log{rnd}"
        args = [str(data_dir), str(log), str(rnd), str(rng.randrange(1 << 30)), *([dsn] if dsn else [])]
        run_and_kill(DRIVER, args, lambda log=log: len(_records(log)), rng.randint(3, 80))
        records = _records(log)
        assert records, "driver made no progress"
        actual = _snapshot(data_dir, dsn)
        _reconcile(model, records, actual)
        for q in QUEUES:
            missing, unexpected = model[q] - set(actual[q]), set(actual[q]) - model[q]
            assert not missing and not unexpected, f"round {rnd} {q}: missing {missing}, extra {unexpected}"
        # LookupIdentifiers: one owner each, forever; new ones above everything before the restart
        new_ids = [i for r in records for i in r.get("lookups", [])]
        assert all(i > max_seen for i in new_ids), "LookupIdentifier reused after restart"
        for q in QUEUES:
            for tok, lid in actual[q].items():
                assert lookup_owner.setdefault(lid, tok) == tok, f"LookupIdentifier {lid} reused"
        max_seen = max([max_seen, *new_ids, *(lid for q in QUEUES for lid in actual[q].values())])
        commits += sum(1 for r in records if r.get("done"))
    assert commits > rounds, "too few commits to mean anything"
