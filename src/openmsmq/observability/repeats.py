"""Log lines for events that come in bursts: the first at once, the repeats summed up.

Some events are per message and can come by the hundred thousand: every message of a
backlog rejected on arrival because its queue was deleted, every FinalAck for one of
them. One line each floods the log (and costs the process its time writing them), so
:class:`RepeatedEvents` logs the first event of a *kind* (a key chosen by the caller,
e.g. queue and NACK class) as it comes, counts the repeats of that kind for
``interval`` seconds, then logs one line with their number and the last one::

    event="message 6B07…:76898 for PRIVATE$\\orders rejected on arrival: NACK_BAD_DST_Q (0x8000)"
    event="12,345 more in 10 s like: message 6B07…:89243 for PRIVATE$\\orders rejected …"

A summary is written when the next event of its kind comes after the interval, or by
:meth:`RepeatedEvents.flush` / :func:`flush_all` (the MS-MQQB driver calls it on each
poll of the outgoing queues). Counters in
:mod:`openmsmq.observability.metrics` keep the exact totals.

:class:`FailureStreak` does the same for one recurring operation that fails again and
again for a while (a poll of the store while the database is down, every few tens of
milliseconds): the first failure with its traceback, then one line at most every
``interval`` seconds with the number of failures since, and one line when it works again.

Only the standard library is imported here.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass

__all__ = ["FailureStreak", "RepeatedEvents", "flush_all"]

#: Every RepeatedEvents made, for flush_all.
_ALL: weakref.WeakSet[RepeatedEvents] = weakref.WeakSet()


@dataclass(slots=True)
class _Window:
    """One kind's current interval: when it ends, repeats counted, the last repeat."""

    started: float
    level: int
    repeats: int = 0
    last_msg: str = ""
    last_args: tuple[object, ...] = ()


class RepeatedEvents:
    """Logs to ``logger`` the first event of each kind at once and one summary line per
    kind and ``interval`` seconds for the repeats. Thread-safe."""

    def __init__(
        self, logger: logging.Logger, interval: float = 10.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.logger = logger
        self.interval = interval
        self._clock = clock
        self._lock = threading.Lock()
        self._windows: dict[Hashable, _Window] = {}
        _ALL.add(self)

    def log(self, key: Hashable, level: int, msg: str, *args: object) -> None:
        """An event of kind ``key``: logged now (``msg % args`` at ``level``) if it is
        the first of its kind in ``interval`` seconds, else counted."""
        if not self.logger.isEnabledFor(level):
            return
        now = self._clock()
        with self._lock:
            w = self._windows.get(key)
            if w is not None and now - w.started < self.interval:
                w.repeats += 1
                w.last_msg, w.last_args = msg, args
                return
            self._windows[key] = _Window(now, level)
        if w is not None and w.repeats:
            self._summary(w, now)
        self.logger.log(level, msg, *args)

    def flush(self, *, final: bool = False) -> None:
        """Write the summaries of the intervals that ended (``final``: of every interval,
        e.g. at a stop); forget quiet kinds."""
        if not self._windows:
            return
        now = self._clock()
        done: list[_Window] = []
        with self._lock:
            for key, w in list(self._windows.items()):
                if final or now - w.started >= self.interval:
                    del self._windows[key]
                    if w.repeats:
                        done.append(w)
        for w in done:
            self._summary(w, now)

    def _summary(self, w: _Window, now: float) -> None:
        seconds = min(now - w.started, self.interval)
        self.logger.log(
            w.level, "%s more in %.0f s like: " + w.last_msg, f"{w.repeats:,}", seconds, *w.last_args
        )


def flush_all(*, final: bool = False) -> None:
    """:meth:`RepeatedEvents.flush` every instance (cheap when nothing is pending)."""
    for r in list(_ALL):
        r.flush(final=final)


class FailureStreak:
    """The log of one recurring operation (``what``, e.g. "polling the outgoing queues")
    that may fail on every try for a while: :meth:`failed` in the ``except`` block,
    :meth:`succeeded` after a try that worked.

    The first failure of a streak is logged at ERROR with its traceback; the next ones
    are counted, and one ERROR line without a traceback says how many failed and the last
    error, at most every ``interval`` seconds; the first success after a streak logs a
    WARNING line with the streak's length and duration. Not thread-safe: one caller (the
    event loop) owns it."""

    def __init__(
        self,
        logger: logging.Logger,
        what: str,
        interval: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.logger = logger
        self.what = what
        self.interval = interval
        self._clock = clock
        #: Failures in the current streak (0: none), since it began, and not yet summed up.
        self.failures = 0
        self._began = 0.0
        self._unreported = 0
        self._reported_at = 0.0

    def failed(self, exc: BaseException) -> None:
        """A try failed with ``exc``."""
        now = self._clock()
        self.failures += 1
        if self.failures == 1:
            self._began = self._reported_at = now
            self.logger.error("%s failed", self.what, exc_info=exc)
            return
        self._unreported += 1
        if now - self._reported_at >= self.interval:
            self.logger.error(
                "%s still failing: %s more failure(s) in %.0f s, %s since the first; last: %s",
                self.what, f"{self._unreported:,}", now - self._reported_at, f"{self.failures:,}",
                _one_line(exc),
            )  # fmt: skip
            self._unreported = 0
            self._reported_at = now

    def succeeded(self) -> None:
        """A try worked: a streak of failures, if one was on, ended."""
        if not self.failures:
            return
        now = self._clock()
        self.logger.warning(
            "%s works again after %s failure(s) in %.0f s", self.what, f"{self.failures:,}", now - self._began
        )
        self.failures = 0
        self._unreported = 0


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
