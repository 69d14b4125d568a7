"""The floor of any Python streaming data source on this Spark: a source that reads nothing.

``bench/spark.py --floor`` registers :class:`FloorSource` (format ``openmsmq-floor``) and
runs it beside the openmsmq source and the rate source. It has no queue manager, no
network and no offsets to check: ``read()`` yields Arrow record batches built in memory.
So its time is what Spark's Python data source path costs by itself (starting the Python
streaming source runner, the planner and reader workers, the JVM turning Arrow batches
into rows and writing Parquet). Two shapes:

* ``columns`` = ``rate``: the rate source's schema (``timestamp``, ``value``);
* ``columns`` = ``openmsmq``: the openmsmq source's 14 read columns
  (:data:`openmsmq.spark.schema.READ_SCHEMA_DDL`), with values of the sizes a 100-byte
  message has (an OBJECTID text, a GUID text, a 20-byte CorrelationId).

Spark's Python workers import this module by name, so ``bench/`` must be on their
``PYTHONPATH`` (``bench/spark.py`` sets it).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from openmsmq.spark.schema import READ_SCHEMA_DDL

RATE_SCHEMA_DDL = "timestamp TIMESTAMP, value BIGINT"
_GUID = "0f2b6e3c-8a41-4c55-9d1e-7b0c1a2d3e4f"
_PAGE = 10_000  # rows per Arrow batch, as the openmsmq source's fetchSize default


class _FloorStreamReader(DataSourceStreamReader):
    """Offsets ``{"rows": n}``; the whole backlog of ``rows`` is available at once."""

    def __init__(self, schema: StructType, rows: int, partitions: int, columns: str, body_size: int) -> None:
        self.read_schema = schema
        self.rows = rows
        self.parts = partitions
        self.columns = columns
        self.body_size = body_size

    def initialOffset(self) -> dict[str, Any]:
        return {"rows": 0}

    def latestOffset(self) -> dict[str, Any]:
        return {"rows": self.rows}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        first, last = int(start["rows"]), int(end["rows"])
        if last <= first:
            return []
        step = -(-(last - first) // self.parts)
        return [InputPartition((a, min(a + step, last))) for a in range(first, last, step)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        schema = to_arrow_schema(self.read_schema, timezone="UTC")
        first, last = partition.value
        stamp = datetime(2026, 11, 25, tzinfo=UTC)
        for lo in range(first, last, _PAGE):
            k = min(_PAGE, last - lo)
            ids = pa.array(range(lo + 1, lo + 1 + k), pa.int64())
            times = pa.array([stamp] * k, pa.timestamp("us", tz="UTC"))
            if self.columns == "rate":
                columns = [times, ids]
            else:
                zeros32, zeros64 = pa.array([0] * k, pa.int32()), pa.array([0] * k, pa.int64())
                columns = [
                    ids,
                    pa.array([f"{{{_GUID}}}\\{n}" for n in range(lo + 1, lo + 1 + k)]),
                    pa.array(["private$\\floor"] * k),
                    pa.array([""] * k),
                    pa.array([b"x" * self.body_size] * k, pa.binary()),
                    zeros32,
                    zeros32,
                    pa.array([bytes(20)] * k, pa.binary()),
                    zeros64,
                    times,
                    times,
                    pa.array([_GUID] * k),
                    ids,
                    ids,
                ]
            yield pa.RecordBatch.from_arrays(columns, schema=schema)


class FloorSource(DataSource):
    """Format ``openmsmq-floor``: options ``rows``, ``partitions`` (2), ``columns``
    (``rate`` or ``openmsmq``), ``bodySize`` (100)."""

    @classmethod
    def name(cls) -> str:
        return "openmsmq-floor"

    def schema(self) -> str:
        return RATE_SCHEMA_DDL if self.options.get("columns") == "rate" else READ_SCHEMA_DDL

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return _FloorStreamReader(
            schema,
            int(self.options["rows"]),
            int(self.options.get("partitions", 2)),
            "rate" if self.options.get("columns") == "rate" else "openmsmq",
            int(self.options.get("bodySize", 100)),
        )
