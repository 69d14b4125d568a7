"""Where a benchmark's latency went inside the serve processes: their stage histograms
(``openmsmq_stage_duration_seconds{stage}``, ``openmsmq_store_commit_duration_seconds``)
scraped from each process's metrics endpoint before and after a run and subtracted.

A histogram gives bucket counts, not samples: a percentile is reported as the upper bound
of the bucket it falls in ("<= 2 ms"), the mean as sum / count. Each observation is one
batch (a commit, an accept batch, a write of packets), not one message.
"""

from __future__ import annotations

import math
import time
import urllib.request
from pathlib import Path
from typing import Any

__all__ = ["delta", "format_stages", "metrics_url", "scrape"]

#: (metric family, label value or None) -> the name printed.
_FAMILIES = {
    "openmsmq_stage_duration_seconds": "stage",
    "openmsmq_store_commit_duration_seconds": None,
}
#: Printing order; a stage a QM never observed is left out.
_ORDER = (
    "outgoing_commit_to_write",
    "accept_read_to_batch",
    "accept_batch_to_stored",
    "stored_to_reader",
    "store_queue_wait",
    "store_commit",
)

Hist = dict[str, Any]  # {"buckets": {le: cumulative count}, "sum": s, "count": n}


def metrics_url(data: Path) -> str:
    """The metrics endpoint the serve process over ``data`` published in its runtime.json
    (waited for up to 30 s while it starts)."""
    from openmsmq.runtime import read_runtime

    deadline = time.monotonic() + 30
    info = read_runtime(data)
    while (info is None or not info.get("metrics")) and time.monotonic() < deadline:
        time.sleep(0.05)
        info = read_runtime(data)
    if info is None or not info.get("metrics"):
        raise RuntimeError(f"no metrics endpoint in {data / 'runtime.json'}")
    return str(info["metrics"])


def scrape(data: Path) -> dict[str, Hist]:
    """The stage histograms of the serve process over ``data``, by stage name."""
    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(metrics_url(data), timeout=30) as resp:
        text = resp.read().decode()
    out: dict[str, Hist] = {}
    for family in text_string_to_metric_families(text):
        if family.name not in _FAMILIES:
            continue
        label = _FAMILIES[family.name]
        for sample in family.samples:
            stage = sample.labels.get(label, "") if label else "store_commit"
            h = out.setdefault(stage, {"buckets": {}, "sum": 0.0, "count": 0.0})
            if sample.name.endswith("_bucket"):
                h["buckets"][float(sample.labels["le"])] = sample.value
            elif sample.name.endswith("_sum"):
                h["sum"] = sample.value
            elif sample.name.endswith("_count"):
                h["count"] = sample.value
    return out


def delta(before: dict[str, Hist], after: dict[str, Hist]) -> dict[str, Hist]:
    """``after`` - ``before``: what the run observed."""
    out: dict[str, Hist] = {}
    for stage, h in after.items():
        b = before.get(stage, {"buckets": {}, "sum": 0.0, "count": 0.0})
        out[stage] = {
            "buckets": {le: n - b["buckets"].get(le, 0.0) for le, n in h["buckets"].items()},
            "sum": h["sum"] - b["sum"],
            "count": h["count"] - b["count"],
        }
    return out


def _percentile(h: Hist, q: float) -> float:
    """The upper bound (s) of the bucket holding the ``q`` quantile (inf: beyond the last)."""
    need = q * h["count"]
    for le in sorted(h["buckets"]):
        if h["buckets"][le] >= need:
            return le
    return math.inf


def _ms(seconds: float) -> str:
    return "  >1 s" if math.isinf(seconds) else f"{seconds * 1000:6.2f}"


def format_stages(per_qm: dict[str, dict[str, Hist]]) -> str:
    """One line per QM and stage: batches observed, mean, median and p99 bucket bounds."""
    lines = []
    for qm, hists in per_qm.items():
        for stage in _ORDER:
            h = hists.get(stage)
            if h is None or h["count"] <= 0:
                continue
            mean = h["sum"] / h["count"]
            lines.append(
                f"    {qm} {stage:<26} {int(h['count']):>8,} batches  mean {mean * 1000:6.2f} ms"
                f"  median <= {_ms(_percentile(h, 0.5))} ms  p99 <= {_ms(_percentile(h, 0.99))} ms"
            )
    return "\n".join(lines)
