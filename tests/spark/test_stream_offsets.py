"""MessageStreamReader's offsets against in-memory queue managers (no SparkSession, no
QM process): what each driver-side call asks the queue managers for, and what it refuses."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

pytest.importorskip("pyspark")

from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows

from openmsmq.client.types import LookupRange, RangeQuery
from openmsmq.errors import ConfigError
from openmsmq.spark import source
from openmsmq.spark.backend import PeekedMessage, PeekedPage
from openmsmq.spark.planning import DataLossError, PartitionPlan, parse_reader_options

G1, G2 = "6f1a8a4e-0000-4000-8000-000000000001", "6f1a8a4e-0000-4000-8000-000000000002"


class FakeQM:
    """Queues as sorted LookupIdentifier lists (each message 10 bytes); counts the calls."""

    def __init__(self, guid: str = G1, **queues: list[int]) -> None:
        self.guid = guid
        self.queues = {f"private$\\{q}": ids for q, ids in queues.items()}
        self.range_calls = 0
        self.removed: list[dict[str, int]] = []

    def available_ranges(self, queries: Sequence[RangeQuery], *, with_bytes: bool = False) -> list[Any]:
        self.range_calls += 1
        out: list[LookupRange | None] = []
        for q in queries:
            ids = [i for i in self.queues[q.queue] if q.after < i and (q.through is None or i <= q.through)]
            size = 10 * len(ids) if with_bytes else None
            out.append(LookupRange(ids[0], ids[-1], len(ids), size) if ids else None)
        return out

    def qm_guid(self) -> str:
        return self.guid

    def nth_lookup_id(self, queue: str, after: int, n: int) -> int:
        return [i for i in self.queues[queue] if i > after][n - 1]

    def remove_through(self, positions: Mapping[str, int]) -> int:
        self.removed.append(dict(positions))
        for q, p in positions.items():
            self.queues[q] = [i for i in self.queues[q] if i > p]
        return 0

    def close(self) -> None:
        pass


def _reader(monkeypatch: pytest.MonkeyPatch, qm: FakeQM, **extra: str) -> Any:
    monkeypatch.setattr(source, "open_backend", lambda endpoint, options=None: qm)
    options = {"endpoint": "grpc://127.0.0.1:1", "queues": "private$\\a,private$\\b", **extra}
    return source.MessageStreamReader(parse_reader_options(options), options)


A, B = "private$\\a", "private$\\b"
QMS = {"": G1}


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
    assert start == {"queues": {A: 0, B: 0}, "qms": QMS}
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {"queues": {A: 9, B: 0}, "qms": QMS}
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
    assert end == {"queues": {A: 3, B: 4}, "qms": QMS, "counts": {A: 1, B: 1}}
    end = reader.latestOffset(end, ReadMaxRows(2))
    assert end == {"queues": {A: 9, B: 4}, "qms": QMS, "counts": {A: 2}}
    assert qm.range_calls == 3


def test_without_available_now_the_end_is_the_current_watermark(monkeypatch: pytest.MonkeyPatch) -> None:
    qm = FakeQM(a=[3], b=[])
    reader = _reader(monkeypatch, qm)
    end = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    assert end == {"queues": {A: 3, B: 0}, "qms": QMS, "counts": {A: 1}}
    qm.queues[A].append(7)
    assert reader.latestOffset(end, ReadAllAvailable())["queues"] == {A: 7, B: 0}
    assert qm.removed == [{A: 3}]


def test_no_new_data_returns_the_start_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark compares the end with the start to see new data: an old checkpoint's offset
    (no GUIDs) must come back as it is, not rewritten."""
    qm = FakeQM(a=[], b=[])
    reader = _reader(monkeypatch, qm)
    old = {"queues": {A: 4, B: 0}}
    assert reader.latestOffset(old, ReadAllAvailable()) is old


def test_min_messages_wait_until_max_trigger_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(source.time, "monotonic", lambda: clock[0])
    qm = FakeQM(a=[3, 4], b=[])
    reader = _reader(monkeypatch, qm, minMessagesPerTrigger="3", maxTriggerDelay="10s")
    start = reader.initialOffset()
    assert reader.latestOffset(start, ReadAllAvailable()) is start  # 2 < 3: wait
    qm.queues[A].append(8)
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end["queues"] == {A: 8, B: 0}  # 3 available: a batch
    qm.queues[B].append(9)
    clock[0] += 9.9
    assert reader.latestOffset(end, ReadAllAvailable()) is end  # 1 < 3, 9.9 s since the batch
    clock[0] += 0.2
    assert reader.latestOffset(end, ReadAllAvailable())["queues"] == {A: 8, B: 9}  # delay passed


def test_progress_reports_lag_behind_the_planned_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    qm = FakeQM(a=[3, 4, 5, 6], b=[7])
    reader = _reader(monkeypatch, qm)
    assert reader.reportLatestOffset() == {
        "queues": {A: 6, B: 7},
        "lag": {A: {"messages": 4, "bytes": 40}, B: {"messages": 1, "bytes": 10}},
    }
    reader.latestOffset(reader.initialOffset(), ReadMaxRows(3))  # a: 3, 4; b: 7
    assert reader.reportLatestOffset() == {
        "queues": {A: 6, B: 7},
        "lag": {A: {"messages": 2, "bytes": 20}, B: {"messages": 0, "bytes": 0}},
    }


def test_checkpoint_of_another_queue_manager_fails_before_anything_is_removed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    qm = FakeQM(guid=G2, a=[3, 4], b=[])
    reader = _reader(monkeypatch, qm)
    written = {"queues": {A: 3, B: 0}, "qms": {"": G1}}
    with pytest.raises(ConfigError, match=f"answers with GUID {G2}") as info:
        reader.latestOffset(written, ReadAllAvailable())
    assert info.value.key == "endpoint"
    with pytest.raises(ConfigError, match=f"answers with GUID {G2}"):
        reader.partitions({"queues": {A: 0, B: 0}, "qms": {"": G1}}, written)
    with pytest.raises(ConfigError, match="names queue 'private\\$\\\\\\\\b', which checkpoint"):
        reader.latestOffset({"queues": {A: 3}}, ReadAllAvailable())
    assert qm.removed == [] and qm.queues[A] == [3, 4]


def test_data_loss_in_a_planned_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    qm = FakeQM(a=[3, 4, 5], b=[])
    reader = _reader(monkeypatch, qm)
    start = reader.initialOffset()
    end = reader.latestOffset(start, ReadAllAvailable())
    assert [p.value.expected for p in reader.partitions(start, end)] == [3]
    qm.queues[A].remove(4)  # someone else received it
    with pytest.raises(DataLossError, match=r"1 of the 3 messages .* are gone.*failOnDataLoss"):
        reader.partitions(start, end)
    lenient = _reader(monkeypatch, qm, failOnDataLoss="false")
    assert [p.value.expected for p in lenient.partitions(start, end)] == [2]


def test_several_queue_managers_one_call_each(monkeypatch: pytest.MonkeyPatch) -> None:
    qm1, qm2 = FakeQM(G1, a=[3, 9]), FakeQM(G2, a=[2])
    by_url = {"grpc://h1:1": qm1, "grpc://h2:1": qm2}
    monkeypatch.setattr(source, "open_backend", lambda endpoint, options=None: by_url[endpoint])
    options = {"endpoints": "one=grpc://h1:1,two=grpc://h2:1", "queues": "one/private$\\a,two/private$\\a"}
    reader = source.MessageStreamReader(parse_reader_options(options), options)
    start = reader.initialOffset()
    assert start["qms"] == {"one": G1, "two": G2}
    end = reader.latestOffset(start, ReadMaxRows(2))
    assert end["queues"] == {"one/private$\\a": 3, "two/private$\\a": 2}
    assert (qm1.range_calls, qm2.range_calls) == (1, 1)
    plans = [p.value for p in reader.partitions(start, end)]
    assert [(p.queue, p.after, p.through, p.expected) for p in plans] == [
        ("one/private$\\a", 0, 3, 1),
        ("two/private$\\a", 0, 2, 1),
    ]
    reader.latestOffset(end, ReadMaxRows(2))
    assert qm1.removed == [{A: 3}] and qm2.removed == [{A: 2}]

    # A queue manager that is down fails the call (and so the batch): nothing is skipped.
    def down(self: FakeQM, *args: Any, **kwargs: Any) -> Any:
        raise ConnectionError("down")

    monkeypatch.setattr(FakeQM, "available_ranges", down)
    with pytest.raises(ConnectionError):
        reader.latestOffset(end, ReadMaxRows(2))


class PagedQM(FakeQM):
    """A FakeQM whose messages can be peeked (for an executor's partition read)."""

    def peek_page(self, queue: str, after: int, through: int, limit: int) -> PeekedPage:
        ids = [i for i in self.queues[queue] if after < i <= through][:limit]
        return PeekedPage.from_messages(
            [PeekedMessage(i, "{0}\\1", "", b"m", 0, 0, bytes(20), 0, 0, 0, "0") for i in ids]
        )


def test_a_partition_that_reads_fewer_than_planned_has_lost_messages(monkeypatch: pytest.MonkeyPatch) -> None:
    qm = PagedQM(a=[3, 5, 9])
    monkeypatch.setattr(source, "open_backend", lambda endpoint, options=None: qm)
    strict = parse_reader_options({"endpoint": "grpc://h:1", "queues": A})
    plan = PartitionPlan(A, 0, 9, expected=3)
    assert sum(b.num_rows for b in source.read_partition(strict, {}, plan)) == 3
    qm.queues[A].remove(5)  # received by someone else between planning and reading
    with pytest.raises(DataLossError, match=r"1 of the 3 messages planned in LookupIdentifiers \(0, 9\]"):
        list(source.read_partition(strict, {}, plan))
    lenient = parse_reader_options({"endpoint": "grpc://h:1", "queues": A, "failOnDataLoss": "false"})
    assert sum(b.num_rows for b in source.read_partition(lenient, {}, plan)) == 2
