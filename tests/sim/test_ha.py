"""The lease world of the simulator (tests/sim/ha.py, docs/simulation.md "The lease world").

* every seed of the CI set keeps the invariants (one active per epoch, no stale commit, the
  local stop before expiry, liveness and the takeover after the active dies);
* each planted bug (a test-side variant of the lease core, or the fence switched off in the
  database model) is caught by a seed of that set, by the check that names it;
* a seed replays identically; every kind of fault is injected.
"""

from __future__ import annotations

import pytest

from .ha import HA_BUGS, HaFaults, run_ha

#: The CI seed set (``make test``); ``make sim SEEDS=N`` runs as many as asked.
CI_SEEDS = range(300)

#: Which check each planted bug must trip.
EXPECTED_CHECK = {
    "ha-no-fence": "stale-commit",
    "ha-deadline-from-reply": "local-stop",
    "ha-same-epoch": "one-active-per-epoch",
}


def test_every_ci_seed_keeps_the_invariants() -> None:
    failed = [r for r in map(run_ha, CI_SEEDS) if not r.ok]
    assert not failed, "\n".join(r.report() for r in failed[:3])


@pytest.mark.parametrize("bug", sorted(HA_BUGS))
def test_planted_bug_is_caught(bug: str) -> None:
    for seed in CI_SEEDS:
        result = run_ha(seed, bug=bug)
        if not result.ok:
            assert result.failure is not None and result.failure.check == EXPECTED_CHECK[bug], result.report()
            assert result.report().startswith(f"ha seed {seed}: FAILED") and result.trace
            return
    raise AssertionError(f"planted bug {bug!r} not caught by any of {len(CI_SEEDS)} seeds")


def test_the_fence_is_what_stops_a_resumed_active() -> None:
    """Over the CI seeds the fence refuses writes of a node that was frozen after it decided
    to write (the local stop alone cannot catch those), and commits are made throughout."""
    fenced = commits = 0
    for seed in range(60):
        result = run_ha(seed)
        assert result.ok, result.report()
        fenced += result.stats.fenced
        commits += result.stats.commits
    assert fenced > 0 and commits > 10_000


def test_a_seed_replays_identically() -> None:
    first, second = run_ha(11), run_ha(11)
    assert first.ok and second.ok
    assert first.stats == second.stats and first.trace == second.trace
    assert first.stats.takeover > 0


def test_faults_of_every_kind_are_injected() -> None:
    kinds: set[str] = set()
    for seed in range(20):
        kinds |= set(run_ha(seed).stats.faults)
    assert kinds == {"pause", "partition", "crash", "conn-crash", "db-restart"}


def test_without_faults_one_node_serves_and_the_standby_takes_over() -> None:
    quiet = HaFaults(pause_rate=1e-9, partition_rate=1e-9, crash_rate=1e-9, conn_crash_rate=1e-9,
                     db_restart_rate=1e-9, slow=0.0)  # fmt: skip
    result = run_ha(3, quiet)
    assert result.ok, result.report()
    assert result.stats.grants == 2 and not result.stats.step_downs and result.stats.fenced == 0
    assert 0 < result.stats.takeover <= quiet.lease.duration + quiet.lease.poll_interval + 2.0
