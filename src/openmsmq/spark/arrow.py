"""Peeked pages as Arrow record batches, built column by column (imports pyarrow, not pyspark).

PySpark 4 lets ``DataSourceReader.read()`` / ``DataSourceStreamReader.read()`` yield
``pyarrow.RecordBatch`` objects instead of row tuples; the Python worker then hands them
to the JVM as they are, instead of converting every value of every row in Python
(``pyspark/sql/worker/plan_data_source_read.py``: ``records_to_arrow_batches``). Spark
checks that a batch's schema equals ``to_arrow_schema(<read schema>, timezone="UTC")``
exactly, so :data:`ARROW_SCHEMA` spells that schema out; ``tests/spark`` compares the two.

The columns are built from whole lists: numbers through numpy (TxSequenceID's u64
reinterpreted as Spark's signed BIGINT, nulls where a message has no transactional
sequence), times as microseconds, the constant ``queue`` column by repetition.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from openmsmq.spark.pages import PeekedPage
from openmsmq.spark.schema import READ_COLUMNS

__all__ = ["ARROW_SCHEMA", "page_to_batch"]

_ARROW_TYPES: dict[str, pa.DataType] = {
    "BIGINT": pa.int64(),
    "INT": pa.int32(),
    "STRING": pa.string(),
    "BINARY": pa.binary(),
    # Spark's TIMESTAMP: microseconds, session-independent UTC instants.
    "TIMESTAMP": pa.timestamp("us", tz="UTC"),
}

#: The Arrow schema of a read batch: :data:`~openmsmq.spark.schema.READ_COLUMNS`, all nullable.
ARROW_SCHEMA = pa.schema([pa.field(name, _ARROW_TYPES[kind], nullable=True) for name, kind in READ_COLUMNS])

_TIMESTAMP = _ARROW_TYPES["TIMESTAMP"]


def _times(seconds: object) -> pa.Array:
    micros = np.asarray(seconds, dtype=np.int64) * 1_000_000
    return pa.array(micros, type=_TIMESTAMP)


def page_to_batch(queue: str, page: PeekedPage) -> pa.RecordBatch:
    """The record batch of ``page`` read from ``queue``, in :data:`ARROW_SCHEMA`.

    ``tx_sequence_id`` is the u64 TxSequenceID (MS-MQMQ 2.2.18.1.2) reinterpreted as a
    signed 64-bit value (what Spark's BIGINT holds); it and ``tx_sequence_number`` are
    null where the TxSequenceID is 0 (no transactional sequence).
    """
    n = len(page)
    seq_u64 = np.asarray(page.tx_sequence_id, dtype=np.uint64)
    no_seq = seq_u64 == 0
    columns = [
        pa.array(np.asarray(page.lookup_id, dtype=np.int64), type=pa.int64()),
        pa.array(page.message_id, type=pa.string()),
        pa.repeat(pa.scalar(queue, type=pa.string()), n),
        pa.array(page.label, type=pa.string()),
        pa.array(page.body, type=pa.binary()),
        pa.array(np.asarray(page.message_class, dtype=np.int32), type=pa.int32()),
        pa.array(np.asarray(page.priority, dtype=np.int32), type=pa.int32()),
        pa.array(page.correlation_id, type=pa.binary()),
        pa.array(np.asarray(page.app_specific, dtype=np.int64), type=pa.int64()),
        _times(page.sent_time),
        _times(page.arrived_time),
        pa.array(page.source_qm, type=pa.string()),
        pa.array(seq_u64.view(np.int64), mask=no_seq, type=pa.int64()),
        pa.array(np.asarray(page.tx_sequence_number, dtype=np.int64), mask=no_seq, type=pa.int64()),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=ARROW_SCHEMA)
