"""Rows a streaming job cannot use, moved to the source queue's ``;poison`` subqueue
instead of failing the query (docs/spark.md, "Rows that cannot be parsed").

Called on the driver from ``foreachBatch`` with the ``lookup_id`` of each bad row of the
micro-batch: the messages move in one transaction of the queue manager, before the batch
commits and removes its range, so a bad row is neither lost nor read again. A replayed
batch finds them gone (already in ``;poison``); moving them again is not attempted.
"""

from __future__ import annotations

from collections.abc import Iterable

from openmsmq.client.connection import connect
from openmsmq.client.types import Access
from openmsmq.errors import HResult, MQError

__all__ = ["move_to_poison"]


def move_to_poison(endpoint: str, queue: str, lookup_ids: Iterable[int], subqueue: str = "poison") -> int:
    """Move the messages ``lookup_ids`` of ``queue`` (a queue of the source, at
    ``endpoint``) to ``queue;subqueue`` in one transaction; returns how many moved. A
    message no longer in the queue (moved by an earlier run of the same batch) is
    skipped."""
    ids = sorted(set(lookup_ids))
    if not ids:
        return 0
    moved = 0
    with connect(endpoint) as conn, conn.open_queue(queue, Access.RECEIVE) as q, conn.transaction() as tx:
        for lid in ids:
            try:
                q.move(lid, subqueue, tx=tx)
            except MQError as exc:
                if exc.hresult != HResult.MQ_ERROR_MESSAGE_NOT_FOUND:
                    raise
                continue
            moved += 1
    return moved
