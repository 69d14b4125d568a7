"""The retry policy of a transactional queue: what happens to a message whose receive
keeps being aborted (a poison message).

The policy follows the MSMQ binding of WCF, which .NET teams know by its four settings:

- ``receive_retry_count``: immediate retries. A message whose AbortCount passes it
  (``receive_retry_count + 1`` aborted receives) leaves the queue for its ``;retry``
  subqueue.
- ``retry_cycle_delay``: seconds a message waits in ``;retry`` before it returns to the
  queue (a *retry cycle*: one move to ``;retry`` and one back, two MoveCounts).
- ``max_retry_cycles``: cycles before the final handling. A message is attempted at most
  ``(max_retry_cycles + 1) * (receive_retry_count + 1)`` times.
- ``receive_error_handling``: the final handling: ``move`` it to ``;poison``, ``reject``
  it (dead-letter queue, with a negative acknowledgment to the sender when it asked for
  one), ``drop`` it (a log line and a counter), or ``fault`` (leave it where it is; a
  consumer that receives it gets :class:`PoisonMessageError`).

AbortCount counts the aborted receives since the message last moved; a move sets it to 0
and adds 1 to MoveCount (the SubqueueHeader's AbortCounter, "consecutive failed
attempts", and MoveCounter, MS-MQRR 2.2.5). The decision is a pure function of the
two counts (:meth:`RetryPolicy.decide`), the one rule the queue manager (at each abort)
and the client library's consumer (before handing a message over) both apply.

A policy is stored with its queue as one short text (:meth:`RetryPolicy.encode`); the
empty text is "no policy": aborted messages stay in the queue forever, as in MSMQ itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from openmsmq.errors import HResult, MQError, quoted

__all__ = [
    "MAX_RETRY_COUNT",
    "MAX_RETRY_CYCLES",
    "MAX_RETRY_CYCLE_DELAY",
    "Disposition",
    "ReceiveErrorHandling",
    "RetryPolicy",
]

#: Upper bounds of the settings: beyond them a value is a mistake, not a policy (a
#: million immediate retries of one message would block its queue for days).
MAX_RETRY_COUNT = 10_000
MAX_RETRY_CYCLES = 10_000
#: Thirty days, in seconds.
MAX_RETRY_CYCLE_DELAY = 30 * 24 * 3600.0


class ReceiveErrorHandling(StrEnum):
    """What happens to a message after its last retry cycle (WCF's ReceiveErrorHandling)."""

    FAULT = "fault"
    DROP = "drop"
    REJECT = "reject"
    MOVE = "move"


class Disposition(StrEnum):
    """The outcome of :meth:`RetryPolicy.decide` for a message just aborted."""

    #: Stays in its queue for the next immediate retry.
    STAY = "stay"
    #: Moves to the ``;retry`` subqueue, back after ``retry_cycle_delay``.
    RETRY = "retry"
    #: Moves to the ``;poison`` subqueue.
    POISON = "poison"
    #: Goes to the dead-letter queue as rejected (NackReceiveRejected).
    REJECT = "reject"
    #: Is deleted, with a log line and a counter.
    DROP = "drop"
    #: Stays where it is; a consumer that receives it gets PoisonMessageError.
    FAULT = "fault"


_FINAL = {
    ReceiveErrorHandling.MOVE: Disposition.POISON,
    ReceiveErrorHandling.REJECT: Disposition.REJECT,
    ReceiveErrorHandling.DROP: Disposition.DROP,
    ReceiveErrorHandling.FAULT: Disposition.FAULT,
}


def _bad(name: str, value: object, why: str) -> MQError:
    return MQError(HResult.MQ_ERROR_ILLEGAL_PROPERTY_VALUE, f"retry policy {name}={quoted(value)}: {why}")


def _count(name: str, value: object, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _bad(name, value, "must be a whole number")
    if not 0 <= value <= high:
        raise _bad(name, value, f"must be 0..{high}")
    return value


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """A queue's (or a consumer's) retry policy; every value is checked at construction
    (MQ_ERROR_ILLEGAL_PROPERTY_VALUE naming the setting). The defaults are WCF's, except
    ``receive_error_handling``: ``move``, so that the queue keeps flowing."""

    receive_retry_count: int = 5
    max_retry_cycles: int = 2
    #: Seconds.
    retry_cycle_delay: float = 1800.0
    receive_error_handling: ReceiveErrorHandling = ReceiveErrorHandling.MOVE

    def __post_init__(self) -> None:
        _count("receive_retry_count", self.receive_retry_count, MAX_RETRY_COUNT)
        _count("max_retry_cycles", self.max_retry_cycles, MAX_RETRY_CYCLES)
        delay = self.retry_cycle_delay
        if isinstance(delay, bool) or not isinstance(delay, int | float):
            raise _bad("retry_cycle_delay", delay, "must be a number of seconds")
        if not math.isfinite(delay) or not 0 <= delay <= MAX_RETRY_CYCLE_DELAY:
            raise _bad("retry_cycle_delay", delay, f"must be 0..{MAX_RETRY_CYCLE_DELAY:.0f} seconds")
        handling = self.receive_error_handling
        if not isinstance(handling, ReceiveErrorHandling):
            try:
                handling = ReceiveErrorHandling(str(handling).strip().lower())
            except ValueError:
                raise _bad(
                    "receive_error_handling", handling, "must be one of fault, drop, reject, move"
                ) from None
            object.__setattr__(self, "receive_error_handling", handling)
        object.__setattr__(self, "retry_cycle_delay", float(delay))

    @property
    def max_attempts(self) -> int:
        """Receives of one message before its final handling."""
        return (self.max_retry_cycles + 1) * (self.receive_retry_count + 1)

    def decide(self, abort_count: int, move_count: int) -> Disposition:
        """Where a message goes whose AbortCount (aborted receives since its last move,
        this abort included) and MoveCount are these.

        Up to ``receive_retry_count`` aborts it stays. Past them, a message that has
        completed fewer than ``max_retry_cycles`` cycles (a cycle is two moves: to
        ``;retry`` and back) moves to ``;retry``; otherwise it gets the final handling."""
        if abort_count <= self.receive_retry_count:
            return Disposition.STAY
        if move_count // 2 < self.max_retry_cycles:
            return Disposition.RETRY
        return _FINAL[self.receive_error_handling]

    def encode(self) -> str:
        """The stored form: ``count,cycles,delay,handling`` (``5,2,1800,move``)."""
        delay = self.retry_cycle_delay
        shown = str(int(delay)) if delay == int(delay) else repr(delay)
        return (
            f"{self.receive_retry_count},{self.max_retry_cycles},{shown},{self.receive_error_handling.value}"
        )

    @classmethod
    def decode(cls, text: str) -> RetryPolicy | None:
        """Inverse of :meth:`encode`; the empty text is None (no policy)."""
        if not text:
            return None
        parts = text.split(",")
        if len(parts) != 4:
            raise _bad("policy", text, "expected count,cycles,delay,handling")
        try:
            count, cycles, delay = int(parts[0]), int(parts[1]), float(parts[2])
        except ValueError:
            raise _bad("policy", text, "count and cycles are whole numbers, delay seconds") from None
        return cls(count, cycles, delay, parts[3])  # type: ignore[arg-type]  # checked by __post_init__

    @classmethod
    def from_settings(
        cls,
        base: RetryPolicy | None = None,
        *,
        receive_retry_count: object = None,
        max_retry_cycles: object = None,
        retry_cycle_delay: object = None,
        receive_error_handling: object = None,
    ) -> RetryPolicy:
        """``base`` (default: the defaults) with the settings that are not None changed;
        text values (from a command line or a request) are converted and checked."""
        start = base or cls()
        return cls(
            _as_int("receive_retry_count", receive_retry_count, start.receive_retry_count),
            _as_int("max_retry_cycles", max_retry_cycles, start.max_retry_cycles),
            _as_seconds(retry_cycle_delay, start.retry_cycle_delay),
            start.receive_error_handling if receive_error_handling is None else receive_error_handling,  # type: ignore[arg-type]  # checked by __post_init__
        )


def _as_int(name: str, value: object, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            raise _bad(name, value, "must be a whole number") from None
    return value  # type: ignore[return-value]  # checked by __post_init__


def _as_seconds(value: object, default: float) -> float:
    if value is None:
        return default
    if isinstance(value, str):
        text = value.strip().lower()
        scale = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}.get(text[-1:])
        try:
            return float(text[:-1]) * scale if scale else float(text)
        except ValueError:
            raise _bad("retry_cycle_delay", value, "must be seconds (or 30s, 5m, 2h, 1d)") from None
    return value  # type: ignore[return-value]  # checked by __post_init__
