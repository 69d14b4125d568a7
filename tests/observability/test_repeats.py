"""RepeatedEvents: the first event of a kind is logged at once, its repeats summed up."""

from __future__ import annotations

import logging

import pytest

from openmsmq.errors import HResult, StorageError
from openmsmq.observability.repeats import FailureStreak, RepeatedEvents, flush_all


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "test.repeats"]


@pytest.fixture
def events(caplog: pytest.LogCaptureFixture) -> tuple[RepeatedEvents, _Clock]:
    caplog.set_level(logging.INFO, logger="test.repeats")
    clock = _Clock()
    return RepeatedEvents(logging.getLogger("test.repeats"), interval=10.0, clock=clock), clock


def test_first_of_a_kind_at_once_repeats_summed_when_the_next_comes_after_the_interval(
    events: tuple[RepeatedEvents, _Clock], caplog: pytest.LogCaptureFixture
) -> None:
    rep, clock = events
    for i in range(1000):
        rep.log("q1", logging.INFO, "message %d rejected", i)
        clock.now += 0.005  # 1,000 in 5 s
    assert _lines(caplog) == ["message 0 rejected"]
    clock.now += 6.0  # the interval ended: the next one brings the summary, then itself
    rep.log("q1", logging.INFO, "message %d rejected", 1000)
    assert _lines(caplog) == [
        "message 0 rejected",
        "999 more in 10 s like: message 999 rejected",
        "message 1000 rejected",
    ]


def test_kinds_are_independent_and_flush_writes_ended_intervals_only(
    events: tuple[RepeatedEvents, _Clock], caplog: pytest.LogCaptureFixture
) -> None:
    rep, clock = events
    rep.log("a", logging.WARNING, "a %s", 1)
    rep.log("b", logging.WARNING, "b %s", 1)
    rep.log("a", logging.WARNING, "a %s", 2)
    rep.log("a", logging.WARNING, "a %s", 3)
    assert _lines(caplog) == ["a 1", "b 1"]
    rep.flush()  # the interval has not ended: nothing yet
    assert len(_lines(caplog)) == 2
    clock.now += 10.0
    flush_all()  # every instance; "b" had no repeat: no line, and it is forgotten
    assert _lines(caplog) == ["a 1", "b 1", "2 more in 10 s like: a 3"]
    assert [r.levelno for r in caplog.records if r.name == "test.repeats"][-1] == logging.WARNING
    rep.log("b", logging.WARNING, "b %s", 2)  # a new interval: logged at once
    assert _lines(caplog)[-1] == "b 2"


def test_a_disabled_level_costs_nothing_and_counts_nothing(
    events: tuple[RepeatedEvents, _Clock], caplog: pytest.LogCaptureFixture
) -> None:
    rep, clock = events
    rep.log("d", logging.DEBUG, "d %s", 1)
    rep.log("d", logging.DEBUG, "d %s", 2)
    clock.now += 20.0
    rep.flush()
    assert _lines(caplog) == []


def test_a_final_flush_sums_up_every_interval_at_once(
    events: tuple[RepeatedEvents, _Clock], caplog: pytest.LogCaptureFixture
) -> None:
    """At a stop the repeats counted so far are written, whether or not their interval
    ended (serve's graceful stop calls it)."""
    rep, clock = events
    for i in range(3):
        rep.log("k", logging.INFO, "k %d", i)
    clock.now += 1.0
    rep.flush(final=True)
    assert _lines(caplog) == ["k 0", "2 more in 1 s like: k 2"]


def test_a_failure_streak_logs_one_traceback_then_counts_and_says_when_it_recovers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A poll failing every 62.5 ms for 65 s: the first failure with its traceback, one line
    per 30 s with the count (no traceback), one line when it works again; a second streak
    starts over with a traceback."""
    caplog.set_level(logging.INFO, logger="test.repeats")
    clock = _Clock()
    streak = FailureStreak(logging.getLogger("test.repeats"), "polling the outgoing queues", 30.0, clock)
    streak.succeeded()  # no streak: nothing to say
    for i in range(1040):
        try:
            raise StorageError(HResult.MQ_ERROR_MESSAGE_STORAGE_FAILED, f"database unreachable {i}\nmore")
        except StorageError as exc:
            streak.failed(exc)
        clock.now += 0.0625
    streak.succeeded()
    records = [r for r in caplog.records if r.name == "test.repeats"]
    assert [r.exc_info is not None for r in records] == [True, False, False, False]
    assert [r.levelno for r in records] == [logging.ERROR] * 3 + [logging.WARNING]
    assert records[0].getMessage() == "polling the outgoing queues failed"
    summary = "polling the outgoing queues still failing: 480 more failure(s) in 30 s, {} since the first"
    assert records[1].getMessage().startswith(summary.format(481))
    assert records[2].getMessage().startswith(summary.format(961))
    last = "last: StorageError: MQ_ERROR_MESSAGE_STORAGE_FAILED (0xC00E002A): database unreachable 960"
    assert records[2].getMessage().endswith(last)
    assert records[3].getMessage() == "polling the outgoing queues works again after 1,040 failure(s) in 65 s"
    streak.succeeded()
    try:
        raise StorageError(HResult.MQ_ERROR_MESSAGE_STORAGE_FAILED, "again")
    except StorageError as exc:
        streak.failed(exc)
    assert len(caplog.records) == 5 and caplog.records[-1].exc_info is not None
