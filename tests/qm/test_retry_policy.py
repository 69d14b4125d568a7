"""The retry policy as a pure object: WCF's counting, its stored form, and every bad value
refused with the setting named."""

from __future__ import annotations

import math

import pytest

from openmsmq.errors import HResult, MQError
from openmsmq.retry_policy import Disposition, ReceiveErrorHandling, RetryPolicy


def _walk(policy: RetryPolicy) -> list[Disposition]:
    """Abort a message until its final handling, moving it as the decisions say (a move
    resets AbortCount and adds one MoveCount; a return from ;retry is one more move)."""
    aborts = moves = 0
    out = []
    for _ in range(1000):
        aborts += 1
        d = policy.decide(aborts, moves)
        out.append(d)
        if d is Disposition.RETRY:
            moves += 2  # to ;retry, and back after the delay
            aborts = 0
        elif d is not Disposition.STAY:
            return out
    raise AssertionError("no final handling")


@pytest.mark.parametrize("count,cycles", [(0, 0), (0, 1), (5, 2), (3, 0), (2, 4)])
def test_attempts_are_wcf_formula(count: int, cycles: int) -> None:
    policy = RetryPolicy(count, cycles, 10, ReceiveErrorHandling.MOVE)
    steps = _walk(policy)
    assert len(steps) == (cycles + 1) * (count + 1) == policy.max_attempts
    assert steps.count(Disposition.RETRY) == cycles
    assert steps[-1] is Disposition.POISON


@pytest.mark.parametrize(
    "handling,final",
    [
        ("move", Disposition.POISON),
        ("reject", Disposition.REJECT),
        ("drop", Disposition.DROP),
        ("fault", Disposition.FAULT),
    ],
)
def test_final_handling(handling: str, final: Disposition) -> None:
    policy = RetryPolicy(1, 1, 0, handling)  # type: ignore[arg-type]
    assert policy.decide(1, 0) is Disposition.STAY
    assert policy.decide(2, 0) is Disposition.RETRY
    assert policy.decide(2, 1) is Disposition.RETRY  # moved to ;retry only: no cycle done
    assert policy.decide(2, 2) is final


def test_encode_decode_round_trip() -> None:
    for p in [
        RetryPolicy(),
        RetryPolicy(0, 0, 0.5, ReceiveErrorHandling.FAULT),
        RetryPolicy(7, 3, 90, "drop"),
    ]:  # type: ignore[arg-type]
        assert RetryPolicy.decode(p.encode()) == p
    assert RetryPolicy.decode("") is None
    assert RetryPolicy().encode() == "5,2,1800,move"


def test_from_settings_text_values() -> None:
    p = RetryPolicy.from_settings(
        receive_retry_count="3", retry_cycle_delay="5m", receive_error_handling="Reject"
    )
    assert (p.receive_retry_count, p.max_retry_cycles, p.retry_cycle_delay) == (3, 2, 300.0)
    assert p.receive_error_handling is ReceiveErrorHandling.REJECT
    q = RetryPolicy.from_settings(p, max_retry_cycles=0)
    assert (q.receive_retry_count, q.max_retry_cycles) == (3, 0)


@pytest.mark.parametrize(
    "kwargs,named",
    [
        ({"receive_retry_count": -1}, "receive_retry_count"),
        ({"receive_retry_count": 10**9}, "receive_retry_count"),
        ({"receive_retry_count": 1.5}, "receive_retry_count"),
        ({"receive_retry_count": True}, "receive_retry_count"),
        ({"max_retry_cycles": -3}, "max_retry_cycles"),
        ({"max_retry_cycles": 10**7}, "max_retry_cycles"),
        ({"retry_cycle_delay": -1}, "retry_cycle_delay"),
        ({"retry_cycle_delay": math.inf}, "retry_cycle_delay"),
        ({"retry_cycle_delay": math.nan}, "retry_cycle_delay"),
        ({"retry_cycle_delay": 10**12}, "retry_cycle_delay"),
        ({"retry_cycle_delay": "soon"}, "retry_cycle_delay"),
        ({"receive_error_handling": "explode"}, "receive_error_handling"),
    ],
)
def test_bad_values_are_typed_and_named(kwargs: dict[str, object], named: str) -> None:
    with pytest.raises(MQError) as err:
        RetryPolicy(**kwargs)  # type: ignore[arg-type]
    assert err.value.hresult == HResult.MQ_ERROR_ILLEGAL_PROPERTY_VALUE
    assert named in str(err.value)


@pytest.mark.parametrize("text", ["1,2,3", "a,b,c,move", "1,2,3,nope", "-1,2,3,move"])
def test_bad_stored_text(text: str) -> None:
    with pytest.raises(MQError):
        RetryPolicy.decode(text)
