"""The Spark source reads a subqueue like a queue (AbortCount / MoveCount columns), and
the documented recipe moves rows a streaming job cannot parse to ``;poison`` instead of
failing the query (docs/spark.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from openmsmq.client import Access
from openmsmq.spark.poison import move_to_poison

from .conftest import QM

pytestmark = pytest.mark.spark


def test_batch_read_of_a_subqueue_has_the_counts(spark: Any, qm: QM) -> None:
    (a,) = qm.new_queues("sub")
    ids = qm.send(a, [b"x", b"y"])
    with qm.conn.open_queue(a, Access.RECEIVE) as q:
        with qm.conn.transaction() as tx:  # one aborted receive of x
            q.receive(timeout=0, tx=tx)
            tx.abort()
        q.move(ids[0], "poison")
    rows = (
        spark.read.format("openmsmq").option("endpoint", qm.endpoint).option("queues", a + ";poison").load()
    )
    got = [(bytes(r.body), r.abort_count, r.move_count, r.queue) for r in rows.collect()]
    assert got == [(b"x", 0, 1, a + ";poison")]
    plain = spark.read.format("openmsmq").option("endpoint", qm.endpoint).option("queues", a).load().collect()
    assert [(bytes(r.body), r.abort_count, r.move_count) for r in plain] == [(b"y", 0, 0)]


def test_unparseable_rows_go_to_poison_and_the_query_goes_on(spark: Any, qm: QM, tmp_path: Path) -> None:
    (src,) = qm.new_queues("orders")
    good = [json.dumps({"id": i}).encode() for i in range(5)]
    qm.send(src, [good[0], b"{not json", good[1], good[2], b"", good[3], good[4]])
    endpoint = qm.endpoint
    parsed: list[int] = []

    # The recipe of docs/spark.md: parse; write what parses; move the rest last (every
    # action on the batch reads it from the queue: the moved rows must still be there).
    def handle(df: Any, batch_id: int) -> None:
        from pyspark.sql.functions import col, from_json

        rows = df.withColumn("order", from_json(col("body").cast("string"), "id INT")).persist()
        try:
            parsed.extend(r.order.id for r in rows.filter(col("order.id").isNotNull()).collect())
            bad = [r.lookup_id for r in rows.filter(col("order.id").isNull()).select("lookup_id").collect()]
            move_to_poison(endpoint, src, bad)
        finally:
            rows.unpersist()

    query = (
        spark.readStream.format("openmsmq").option("endpoint", endpoint).option("queues", src)
        .option("maxMessagesPerTrigger", 3).load()
        .writeStream.foreachBatch(handle).option("checkpointLocation", str(tmp_path / "ck"))
        .trigger(availableNow=True).start()
    )  # fmt: skip
    query.awaitTermination(120)
    assert not query.isActive and query.exception() is None
    assert sorted(parsed) == [0, 1, 2, 3, 4]
    assert qm.bodies(src) == []
    assert qm.bodies(src + ";poison") == [b"{not json", b""]
