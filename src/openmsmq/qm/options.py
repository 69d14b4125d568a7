"""The ``[store]`` settings a :class:`~openmsmq.qm.manager.QueueManager` applies."""

from __future__ import annotations

from dataclasses import dataclass

from openmsmq.store.records import INFINITE, MAX_MESSAGE_BYTES

__all__ = ["StoreOptions"]


@dataclass(frozen=True)
class StoreOptions:
    """The ``[store]`` settings a :class:`QueueManager` applies (docs/configuration.md)."""

    #: store.backend: "sqlite" (a file in the data directory) or "postgresql" (``dsn``).
    #: A data directory created on PostgreSQL names its database (runtime.STORE_POINTER),
    #: which is used when no ``dsn`` is given.
    backend: str = "sqlite"
    #: store.dsn: the PostgreSQL database (libpq DSN or URI).
    dsn: str = ""
    #: SQLite ``PRAGMA synchronous``: FULL / EXTRA keep every commit durable.
    synchronous: str = "FULL"
    #: Longest wait (s) of a group commit for the committers of the previous batch.
    max_commit_wait: float = 0.002
    #: Largest message accepted (bytes; at most 4 MiB, MSMQ's limit).
    max_message_bytes: int = MAX_MESSAGE_BYTES
    #: Quota (KB) of a queue created without one; INFINITE = none.
    default_quota_kb: int = INFINITE
    #: Most operations committed by one store transaction (one fsync).
    max_batch_ops: int = 1024
    #: QueueManagerQuota: bytes all queues may hold together (None: none).
    qm_quota_bytes: int | None = None
    #: Bytes of disk held back so that removals run on a full disk (store.disk_reserve;
    #: None: keep the reserve file a ``serve`` left, create none; 0: none).
    disk_reserve: int | None = None
