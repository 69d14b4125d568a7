"""Shared set-up of the store tests."""

from __future__ import annotations

from openmsmq.store import INFINITE, QueueType, Store, queues
from openmsmq.store.records import QueueRecord


def private_queue(
    store: Store, name: str = "private$\\q", *, transactional: bool = False, quota_kb: int = INFINITE,
    now: int = 1000,
) -> QueueRecord:  # fmt: skip
    """Create the private queue ``name`` (the store's QM state must exist)."""
    return store.write(
        queues.create_queue(
            name=name,
            display_name=name,
            queue_type=QueueType.PRIVATE,
            transactional=transactional,
            label="",
            quota_kb=quota_kb,
            journal_quota_kb=INFINITE,
            journal=False,
            now=now,
        )
    )
