"""Arrow record batches of peeked pages and the executor's paging, without a SparkSession."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from openmsmq.errors import LocalProtocolError
from openmsmq.spark import planning, source
from openmsmq.spark.arrow import ARROW_SCHEMA, page_to_batch
from openmsmq.spark.backend import PeekedMessage, PeekedPage
from openmsmq.spark.planning import (
    FIRST_PAGE,
    PAGE_BYTES,
    PartitionPlan,
    check_page,
    page_limit,
    parse_reader_options,
)
from openmsmq.spark.schema import READ_COLUMNS, message_to_row

SPARK_TYPES: dict[str, DataType] = {
    "BIGINT": LongType(),
    "INT": IntegerType(),
    "STRING": StringType(),
    "BINARY": BinaryType(),
    "TIMESTAMP": TimestampType(),
}


def peeked(lookup_id: int, seq: int | None = None, body: bytes = b"b") -> PeekedMessage:
    return PeekedMessage(
        lookup_id=lookup_id,
        message_id=f"{{G}}\\{lookup_id}",
        label=f"l{lookup_id}",
        body=body,
        message_class=0,
        priority=0,
        correlation_id=bytes([lookup_id % 256]) * 20,
        app_specific=0xFFFFFFFF,
        sent_time=1_700_000_000 + lookup_id,
        arrived_time=1_700_000_100 + lookup_id,
        source_qm="6b1b5d2e-0000-4000-8000-000000000001",
        tx_sequence_id=seq,
        tx_sequence_number=None if seq is None else lookup_id,
    )


def test_arrow_schema_is_what_spark_expects_of_the_read_schema() -> None:
    spark_schema = StructType([StructField(name, SPARK_TYPES[kind]) for name, kind in READ_COLUMNS])
    # Spark's Python worker compares with exactly this (plan_data_source_read.py).
    assert ARROW_SCHEMA.equals(to_arrow_schema(spark_schema, timezone="UTC"))


def test_batch_holds_the_same_values_as_the_row_tuples() -> None:
    # A TxSequenceID with the top bit set is a negative BIGINT (PeekedMessage holds it
    # signed, the page as the wire's u64); no sequence -> nulls.
    messages = [peeked(1), peeked(2, seq=-(1 << 63) + 5), peeked(3, seq=42, body=b"")]
    page = PeekedPage.from_messages(messages)
    assert list(page.tx_sequence_id) == [0, (1 << 63) + 5, 42]
    batch = page_to_batch("private$\\q", page)
    assert batch.schema.equals(ARROW_SCHEMA) and batch.num_rows == 3
    names = [c for c, _ in READ_COLUMNS]
    rows = [tuple(r[n] for n in names) for r in batch.to_pylist()]
    assert rows == [message_to_row("private$\\q", m) for m in messages]
    assert rows[1][names.index("tx_sequence_id")] == -(1 << 63) + 5
    assert rows[0][names.index("tx_sequence_id")] is None
    assert rows[0][names.index("tx_sequence_number")] is None
    assert rows[2][names.index("sent_time")] == datetime.fromtimestamp(1_700_000_003, UTC)


def test_empty_page_is_an_empty_batch() -> None:
    batch = page_to_batch("q", PeekedPage.from_messages([]))
    assert batch.num_rows == 0 and batch.schema.equals(ARROW_SCHEMA)


def test_page_limit_grows_to_fetch_size_and_caps_bytes() -> None:
    assert page_limit(10_000, 0, 0) == FIRST_PAGE
    assert page_limit(10, 0, 0) == 10
    assert page_limit(10_000, 1000, 100_000) == 10_000  # 100-byte bodies
    big = 4 << 20
    assert page_limit(10_000, 2, 2 * big) == PAGE_BYTES // big
    assert page_limit(10_000, 1, 10 * PAGE_BYTES) == 1  # never 0
    assert page_limit(10_000, 5, 0) == 10_000  # empty bodies


def test_check_page_refuses_ids_out_of_range_or_not_rising() -> None:
    check_page([3, 4, 9], 2, 9, "q")
    check_page([], 2, 9, "q")
    for bad in ([2], [3, 3], [4, 3], [10]):
        with pytest.raises(LocalProtocolError, match="outside"):
            check_page(bad, 2, 9, "q")


class FakeBackend:
    """Serves ``peek_page`` from a list of LookupIdentifiers and records each request."""

    def __init__(self, ids: Sequence[int], body: bytes = b"x") -> None:
        self.ids = list(ids)
        self.body = body
        self.requests: list[tuple[int, int, int]] = []
        self.closed = False

    def peek_page(self, queue: str, after: int, through: int, limit: int) -> PeekedPage:
        self.requests.append((after, through, limit))
        got = [i for i in self.ids if after < i <= through][:limit]
        return PeekedPage.from_messages([peeked(i, body=self.body) for i in got])

    def close(self) -> None:
        self.closed = True


def read_all(monkeypatch: pytest.MonkeyPatch, backend: FakeBackend, plan: PartitionPlan, fetch: int) -> Any:
    def fake_open(endpoint: str, options: Mapping[str, str] | None = None) -> FakeBackend:
        return backend

    monkeypatch.setattr(source, "open_backend", fake_open)
    opts = parse_reader_options({"endpoint": "grpc://127.0.0.1:1", "queues": "q", "fetchSize": str(fetch)})
    return list(source.read_partition(opts, {}, plan))


def test_partition_read_pages_through_its_range_only(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = FakeBackend(range(1, 3001, 2))  # odd ids 1..2999
    batches = read_all(monkeypatch, backend, PartitionPlan("q", 100, 2500), fetch=400)
    assert all(isinstance(b, pa.RecordBatch) for b in batches)
    got = [i for b in batches for i in b.column("lookup_id").to_pylist()]
    assert got == list(range(101, 2500, 2))
    assert [r[2] for r in backend.requests] == [400] * len(backend.requests)
    assert backend.requests[0][:2] == (100, 2500) and backend.closed


def test_partition_read_shrinks_pages_of_large_bodies(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(planning, "PAGE_BYTES", 1000)
    backend = FakeBackend(range(1, 11), body=b"x" * 500)
    batches = read_all(monkeypatch, backend, PartitionPlan("q", 0, 10), fetch=3)
    assert [b.num_rows for b in batches] == [3, 2, 2, 2, 1]
    assert [r[2] for r in backend.requests] == [3, 2, 2, 2, 2]


def test_a_page_shorter_than_asked_does_not_end_the_partition(monkeypatch: pytest.MonkeyPatch) -> None:
    # The server stops a reply at 64 MiB of bodies (remote.read_calls.REPLY_BYTES): a short page
    # is not the last. Reading stopped there before: a batch read of 120 messages of 4 MB
    # gave 17 rows, and a streaming batch would have removed the rest unread at commit.
    class Capped(FakeBackend):
        def peek_page(self, queue: str, after: int, through: int, limit: int) -> PeekedPage:
            return super().peek_page(queue, after, through, min(limit, 3))

    backend = Capped(range(1, 21))
    batches = read_all(monkeypatch, backend, PartitionPlan("q", 0, 20), fetch=100)
    assert [i for b in batches for i in b.column("lookup_id").to_pylist()] == list(range(1, 21))
    assert [b.num_rows for b in batches] == [3, 3, 3, 3, 3, 3, 2]


def test_partition_read_fails_on_a_backend_breaking_order(monkeypatch: pytest.MonkeyPatch) -> None:
    class Repeating(FakeBackend):
        def peek_page(self, queue: str, after: int, through: int, limit: int) -> PeekedPage:
            return PeekedPage.from_messages([peeked(5), peeked(5)])

    backend = Repeating([])
    with pytest.raises(LocalProtocolError):
        read_all(monkeypatch, backend, PartitionPlan("q", 0, 10), fetch=100)
    assert backend.closed
