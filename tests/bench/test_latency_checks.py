"""bench/latency.py's refusals: no figure from a run that failed its check (every message
once, in order, nothing left), and no run at all when a peer server cannot start."""

from __future__ import annotations

import importlib.util
import sys
from array import array
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def latency() -> ModuleType:
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("bench_latency", BENCH / "latency.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


def _run(n: int, *, received: int | None = None, bad: int = 0, left: int = 0) -> tuple[dict, dict]:
    sent = array("q", [1_000_000 * (k + 1) for k in range(n)])
    got = array("q", [1_000_000 * (k + 1) + 2_000_000 for k in range(n)])  # 2 ms each
    prod = {"stamps": sent, "late": 0, "max_late_ms": 0.0}
    cons = {"stamps": got, "received": n if received is None else received, "out_of_order": bad, "left": left}
    return prod, cons


def test_a_checked_run_gives_its_percentiles(latency: ModuleType) -> None:
    prod, cons = _run(1000)
    f = latency.figures("x", 1000, 1000, 100, prod, cons)
    assert f.ok and f.recorded == 900
    assert f.p50_ms == pytest.approx(2.0, rel=0.01) and f.max_ms == pytest.approx(2.0, rel=0.01)
    assert "median" in latency.format_figures(f)


@pytest.mark.parametrize(
    "fault",
    [{"received": 999}, {"bad": 1}, {"left": 3}],
    ids=["one missing", "out of order or duplicated", "left in the queue"],
)
def test_a_run_that_failed_its_check_gives_no_figure(latency: ModuleType, fault: dict[str, Any]) -> None:
    prod, cons = _run(1000, **fault)
    f = latency.figures("x", 1000, 1000, 100, prod, cons)
    assert not f.ok
    line = latency.format_figures(f)
    assert "CHECK FAILED" in line and "median" not in line and "p99" not in line


def test_a_message_without_its_consumer_stamp_fails_the_check(latency: ModuleType) -> None:
    prod, cons = _run(1000)
    cons["stamps"][500] = 0
    assert not latency.figures("x", 1000, 1000, 100, prod, cons).ok


def test_a_peer_that_cannot_start_stops_the_run_before_any_measurement(
    latency: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    events: list[str] = []

    def fails(self: Any, rates: list[int]) -> None:
        raise RuntimeError("rabbitmq-server exited with 1 while starting")

    monkeypatch.setattr(latency.OpenmsmqSystem, "start", lambda self, rates: events.append("start openmsmq"))
    monkeypatch.setattr(latency.OpenmsmqSystem, "stop", lambda self: events.append("stop openmsmq"))
    monkeypatch.setattr(latency.OpenmsmqSystem, "run", lambda *a: events.append("run"))
    monkeypatch.setattr(latency.RabbitSystem, "start", fails)
    monkeypatch.setattr(latency.RabbitSystem, "stop", lambda self: events.append("stop rabbitmq"))
    monkeypatch.setattr(latency.peers, "machine_header", lambda: "# machine")
    assert latency.main(["--rates", "1000", "--duration", "1", "--peers", "rabbitmq"]) == 2
    out = capsys.readouterr().out
    assert "REFUSED: RabbitMQ quorum queue could not start" in out
    assert "rabbitmq-server exited with 1" in out
    assert "run" not in events and "median" not in out
    assert events == ["start openmsmq", "stop rabbitmq", "stop openmsmq"]


def test_the_consumer_side_is_split_at_its_receive_and_the_stages_are_printed(latency: ModuleType) -> None:
    prod, cons = _run(1000)
    # Each message taken by a receive that returned 1.5 ms after its send; committed 0.5 ms later.
    cons["received_at"] = array("q", [1_000_000 * (k + 1) + 1_500_000 for k in range(1000)])

    def hist(counts: dict[float, float], total: float, n: float) -> dict[str, Any]:
        return {"buckets": counts, "sum": total, "count": n}

    before = {"store_commit": hist({0.001: 10, 0.01: 10, float("inf"): 10}, 0.01, 10)}
    after = {
        "store_commit": hist({0.001: 10, 0.01: 110, float("inf"): 110}, 0.51, 110),
        "accept_read_to_batch": hist({0.0005: 99, 0.01: 100, float("inf"): 100}, 0.02, 100),
    }
    stages = latency.stages.delta(before, after)
    assert stages["store_commit"]["count"] == 100 and stages["store_commit"]["buckets"][0.01] == 100
    cons["stages"] = {"B": stages}
    f = latency.figures("x", 1000, 1000, 100, prod, cons)
    assert f.split == ((pytest.approx(1.5, rel=0.01), pytest.approx(1.5, rel=0.01)),
                       (pytest.approx(0.5, rel=0.01), pytest.approx(0.5, rel=0.01)))  # fmt: skip
    out = latency.format_figures(f)
    assert "split: confirm returned -> consumer's receive returned: median 1.50 ms" in out
    # 100 commits of 5 ms each (mean), all within the 10 ms bucket; 99 of 100 accept
    # batches within 0.5 ms, the last within 10 ms.
    assert "B store_commit" in out and "mean   5.00 ms  median <=  10.00 ms  p99 <=  10.00 ms" in out
    assert "B accept_read_to_batch" in out and "median <=   0.50 ms  p99 <=   0.50 ms" in out
    assert out.index("accept_read_to_batch") < out.index("store_commit")
