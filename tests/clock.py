"""A settable clock for a QueueManager's SentTime / ArrivedTime in tests (``clock=``)."""

from __future__ import annotations


class Clock:
    """Returns ``now`` (seconds since 1970) until a test moves it."""

    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
