"""The lease core (openmsmq.ha.lease), step by step: its inputs are the driver's, its outputs
the actions a driver runs; time is whatever the test passes."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import openmsmq.ha.lease as lease_module
from openmsmq.ha.lease import (
    AcquireLease,
    LeaseConfig,
    LeaseCore,
    LeaseSeen,
    ReadLease,
    ReleaseLease,
    RenewLease,
    Role,
    StartServing,
    StopServing,
)

CFG = LeaseConfig(duration=3.0, renew_interval=0.5, margin=0.75, poll_interval=0.25,
                  retry_interval=0.25, request_timeout=1.0)  # fmt: skip


def _active(core: LeaseCore, t: float = 0.0, seen_epoch: int = 4) -> float:
    """Drive ``core`` from start to active with epoch seen_epoch + 1; returns the time."""
    (read,) = core.start(t)
    assert isinstance(read, ReadLease)
    (acq,) = core.handle_seen(t + 0.01, read.request_id, LeaseSeen(seen_epoch, None, -1.0))
    assert isinstance(acq, AcquireLease)
    assert (acq.expected_epoch, acq.new_epoch, acq.holder) == (seen_epoch, seen_epoch + 1, core.holder)
    assert core.role is Role.ACQUIRING and core.fencing_epoch(t + 0.01) is None
    actions = core.handle_granted(t + 0.02, acq.request_id)
    assert actions == [StartServing(seen_epoch + 1)]
    assert core.role is Role.ACTIVE
    return t + 0.02


def test_the_lease_module_is_sans_io() -> None:
    tree = ast.parse(Path(lease_module.__file__).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in names:
                assert name.split(".")[0] in {"__future__", "enum", "dataclasses"}, name


def test_a_standby_waits_while_the_lease_is_held_and_polls() -> None:
    core = LeaseCore(CFG, "b")
    (read,) = core.start(10.0)
    assert core.handle_seen(10.01, read.request_id, LeaseSeen(7, "a", 2.5)) == []
    assert core.role is Role.STANDBY and core.epoch == 7
    assert core.get_timer() == pytest.approx(10.26)
    assert core.handle_timer(10.2) == []
    (again,) = core.handle_timer(10.26)
    assert isinstance(again, ReadLease)


def test_takeover_proposes_the_next_epoch_and_fences_with_it() -> None:
    core = LeaseCore(CFG, "b")
    t = _active(core)
    assert core.epoch == 5 and core.fencing_epoch(t) == 5


def test_the_deadline_counts_from_the_request_not_the_answer() -> None:
    core = LeaseCore(CFG, "b")
    (read,) = core.start(0.0)
    (acq,) = core.handle_seen(0.0, read.request_id, LeaseSeen(0, None, 0.0))
    core.handle_granted(0.9, acq.request_id)  # a slow answer
    assert core.safe_until == pytest.approx(0.0 + 3.0 - 0.75)
    assert core.fencing_epoch(2.24) == 1 and core.fencing_epoch(2.25) is None


def test_renewals_move_the_deadline_from_when_they_were_sent() -> None:
    core = LeaseCore(CFG, "a")
    _active(core)
    assert core.handle_timer(0.3) == []
    (renew,) = core.handle_timer(0.51)  # sent_at (0.01) + renew_interval
    assert isinstance(renew, RenewLease) and renew.epoch == 5
    assert core.handle_renewed(0.6, renew.request_id) == []
    assert core.safe_until == pytest.approx(0.51 + 2.25)
    assert core.get_timer() == pytest.approx(1.01)


def test_an_active_that_cannot_renew_stops_before_its_lease_can_expire() -> None:
    core = LeaseCore(CFG, "a")
    _active(core)
    (renew,) = core.handle_timer(0.51)
    # The database does not answer; the request times out and is retried, failing again.
    assert core.handle_failure(0.8, renew.request_id) == []
    (retry,) = core.handle_timer(1.05)
    assert isinstance(retry, RenewLease)
    assert core.handle_timer(2.0) == []  # still outstanding, not timed out yet
    assert core.fencing_epoch(2.2599) == 5 and core.fencing_epoch(2.26) is None
    actions = core.handle_timer(2.26)  # the grant was sent at 0.01: 0.01 + 3.0 - 0.75
    assert actions == [StopServing(5, "the lease could not be renewed in time")]
    assert core.role is Role.STEPPING_DOWN
    # The renewal that answers late changes nothing: stepping down is final.
    assert core.handle_renewed(2.3, retry.request_id) == []
    assert core.fencing_epoch(2.3) is None
    # Once the queue manager is closed the lease is released, then the node polls again.
    (release,) = core.handle_stopped(2.4)
    assert release == ReleaseLease(release.request_id, 5, "a")
    assert core.role is Role.STANDBY
    assert core.handle_released(2.41, release.request_id) == []
    (read,) = core.handle_timer(2.65)
    assert isinstance(read, ReadLease)


def test_a_refused_renewal_steps_down_without_releasing() -> None:
    core = LeaseCore(CFG, "a")
    _active(core)
    (renew,) = core.handle_timer(0.51)
    (stop,) = core.handle_refused(0.52, renew.request_id, LeaseSeen(6, "b", 2.9))
    assert isinstance(stop, StopServing) and "taken over (epoch 6, holder b)" in stop.reason
    (read,) = core.handle_stopped(0.6) or [None]
    assert read is None  # nothing to release; the next read waits for the poll interval
    assert core.get_timer() == pytest.approx(0.85)


def test_a_fenced_write_steps_down_once() -> None:
    core = LeaseCore(CFG, "a")
    t = _active(core)
    assert core.handle_fenced(t, 4) == []  # an older term's refusal is not this one's
    (stop,) = core.handle_fenced(t, 5)
    assert isinstance(stop, StopServing) and stop.epoch == 5
    assert core.handle_fenced(t, 5) == []


def test_a_refused_takeover_returns_to_standby() -> None:
    core = LeaseCore(CFG, "b")
    (read,) = core.start(0.0)
    (acq,) = core.handle_seen(0.0, read.request_id, LeaseSeen(3, None, 0.0))
    assert core.handle_seen(0.01, acq.request_id, LeaseSeen(4, "c", 3.0)) == []
    assert core.role is Role.STANDBY and core.epoch == 4


def test_a_takeover_whose_outcome_is_unknown_is_not_taken_for_granted() -> None:
    core = LeaseCore(CFG, "b")
    (read,) = core.start(0.0)
    (acq,) = core.handle_seen(0.0, read.request_id, LeaseSeen(3, None, 0.0))
    assert core.handle_timer(1.0) == []  # request timeout: the grant may or may not have run
    assert core.role is Role.STANDBY
    assert core.handle_granted(1.1, acq.request_id) == []  # too late: ignored
    assert core.fencing_epoch(1.1) is None
    (read2,) = core.handle_timer(1.25)
    # The row names this holder: it is not free, the node waits for it to expire.
    assert core.handle_seen(1.26, read2.request_id, LeaseSeen(4, "b", 2.0)) == []
    assert core.role is Role.STANDBY


def test_shutdown_of_an_active_releases_after_the_stop() -> None:
    core = LeaseCore(CFG, "a")
    _active(core)
    (stop,) = core.shutdown(1.0)
    assert isinstance(stop, StopServing) and stop.reason == "shut down"
    (release,) = core.handle_stopped(1.1)
    assert isinstance(release, ReleaseLease)
    assert not core.finished
    assert core.handle_released(1.2, release.request_id) == []
    assert core.finished and core.get_timer() is None


def test_a_grant_that_arrives_after_shutdown_is_handed_back() -> None:
    core = LeaseCore(CFG, "b")
    (read,) = core.start(0.0)
    (acq,) = core.handle_seen(0.0, read.request_id, LeaseSeen(3, None, 0.0))
    assert core.shutdown(0.01) == []
    (release,) = core.handle_granted(0.02, acq.request_id)
    assert release == ReleaseLease(release.request_id, 4, "b")
    assert core.role is Role.STANDBY and core.fencing_epoch(0.02) is None


@pytest.mark.parametrize(
    "kwargs",
    [
        {"duration": 0},
        {"margin": 3.0},
        {"renew_interval": 2.25},
        {"request_timeout": 4.0},
        {"poll_interval": -1},
    ],
)
def test_inconsistent_timings_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=r"ha\.lease"):
        LeaseConfig(**kwargs)


def test_a_node_that_cannot_serve_gives_the_lease_up() -> None:
    core = LeaseCore(CFG, "a")
    t = _active(core)
    assert core.give_up(t, 4, "x") == []
    (stop,) = core.give_up(t, 5, "cannot serve: address in use")
    assert isinstance(stop, StopServing) and core.fencing_epoch(t) is None
    (release,) = core.handle_stopped(t + 0.1)
    assert isinstance(release, ReleaseLease) and release.epoch == 5
    core.handle_released(t + 0.2, release.request_id)
    assert core.get_timer() == pytest.approx(t + 0.1 + CFG.duration)  # the others try first
