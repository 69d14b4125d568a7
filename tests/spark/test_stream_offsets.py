"""MessageStreamReader's offsets against an in-memory backend (no SparkSession, no QM):
what each driver-side call asks the queue manager for."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from openmsmq.client.types import LookupRange, RangeQuery
from openmsmq.spark import source
from openmsmq.spark.planning import parse_reader_options


class FakeQM:
    """Queues as sorted LookupIdentifier lists; counts the range queries."""

    def __init__(self, **queues: list[int]) -> None:
        self.queues = {f"private$\\{q}": ids for q, ids in queues.items()}
        self.range_calls = 0
        self.removed: list[dict[str, int]] = []

    def available_ranges(self, queries: Sequence[RangeQuery]) -> list[LookupRange | None]:
        self.range_calls += 1
        out: list[LookupRange | None] = []
        for q in queries:
            ids = [i for i in self.queues[q.queue] if q.after < i and (q.through is None or i <= q.through)]
            out.append(LookupRange(ids[0], ids[-1], len(ids)) if ids else None)
        return out

    def nth_lookup_id(self, queue: str, after: int, n: int) -> int:
        return [i for i in self.queues[queue] if i > after][n - 1]

    def remove_through(self, positions: Mapping[str, int]) -> int:
        self.removed.append(dict(positions))
        for q, p in positions.items():
            self.queues[q] = [i for i in self.queues[q] if i > p]
        return 0

    def close(self) -> None:
        pass


def _reader(monkeypatch: pytest.MonkeyPatch, qm: FakeQM) -> Any:
    monkeypatch.setattr(source, "open_backend", lambda endpoint, options=None: qm)
    options = {"endpoint": "grpc://127.0.0.1:1", "queues": "private$\\a,private$\\b"}
    return source.MessageStreamReader(parse_reader_options(options), options)


A, B = "private$\\a", "private$\\b"


def test_available_now_without_limit_ends_at_the_target_without_a_range_query(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    qm = FakeQM(a=[3, 5, 9], b=[])
    reader = _reader(monkeypatch, qm)
    reader.prepareForTriggerAvailableNow()
    assert qm.range_calls == 1
    qm.queues[A].append(12)  # arrives after the start: waits for the next run
    qm.queues[B].append(13)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {"queues": {A: 9, B: 0}}
    assert qm.range_calls == 1  # the end is the target: no range query
    assert qm.removed == []
    # The next trigger removes the batch and finds nothing more below the target.
    assert reader.latestOffset(end, ReadAllAvailable()) == end
    assert qm.removed == [{A: 9}]
    assert qm.queues[A] == [12] and qm.range_calls == 1


def test_available_now_with_limit_still_cuts_by_admission(monkeypatch: pytest.MonkeyPatch) -> None:
    qm = FakeQM(a=[3, 5, 9], b=[4])
    reader = _reader(monkeypatch, qm)
    reader.prepareForTriggerAvailableNow()
    end = reader.latestOffset(reader.initialOffset(), ReadMaxRows(2))
    assert end == {"queues": {A: 3, B: 4}}
    end = reader.latestOffset(end, ReadMaxRows(2))
    assert end == {"queues": {A: 9, B: 4}}
    assert qm.range_calls == 3


def test_without_available_now_the_end_is_the_current_watermark(monkeypatch: pytest.MonkeyPatch) -> None:
    qm = FakeQM(a=[3], b=[])
    reader = _reader(monkeypatch, qm)
    end = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    assert end == {"queues": {A: 3, B: 0}}
    qm.queues[A].append(7)
    assert reader.latestOffset(end, ReadAllAvailable()) == {"queues": {A: 7, B: 0}}
    assert qm.removed == [{A: 3}]
