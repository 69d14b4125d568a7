"""The store interface and its two backends.

What the queue manager and the transfer engine call on a store is
:class:`StoreBackend`: write operations (callables ``op(ctx)`` over a
:class:`~openmsmq.store.writes.WriteContext`, built by :mod:`openmsmq.store.ops`,
:mod:`~openmsmq.store.outgoing`, :mod:`~openmsmq.store.queues`,
:mod:`~openmsmq.store.ranges`), each durable when its call returns or its future
completes, grouped with concurrent ones into one commit; and reads (callables
``fn(conn)`` from :mod:`openmsmq.store.reads` and friends). Two classes implement it:

* :class:`openmsmq.store.db.Store`: SQLite, embedded, one file in the data directory
  (``store.backend = "sqlite"``, the default);
* :class:`openmsmq.store.pg.db.PgStore`: PostgreSQL (``store.backend = "postgresql"``
  with ``store.dsn``), the store of a queue manager that can fail over to another host.

:func:`open_store` opens the one a configuration names. psycopg is imported only for
PostgreSQL.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Protocol, TypeVar

from openmsmq.errors import ConfigError
from openmsmq.observability.sink import MetricsSink
from openmsmq.store.writes import StoreStats, WriteContext

__all__ = ["BACKENDS", "StoreBackend", "open_store"]

T = TypeVar("T")

#: The values of ``store.backend``.
BACKENDS = ("sqlite", "postgresql")


class StoreBackend(Protocol):
    """A durable store of one queue manager (see the module docstring)."""

    #: Where the store is, for messages: a file, or ``user@host:port/dbname`` (no secret).
    path: Any
    threaded: bool
    stats: StoreStats
    metrics: MetricsSink
    max_batch_ops: int
    qm_quota: int | None

    def submit(self, fn: Callable[[WriteContext], T]) -> Future[T]:
        """Queue a write operation; the future completes once it is durable (or failed)."""
        ...

    def write(self, fn: Callable[[WriteContext], T]) -> T:
        """Run a write operation; return its result once it is durable."""
        ...

    def write_many(self, fns: Sequence[Callable[[WriteContext], Any]]) -> list[Future[Any]]:
        """Submit several operations at once (they usually share one commit)."""
        ...

    def write_each(self, fns: Sequence[Callable[[WriteContext], Any]]) -> list[Any]:
        """Run independent operations: each one's result or the MQError it failed with."""
        ...

    def wait_for_queued(self) -> None:
        """Return once every write operation queued or running when it was called has
        committed or failed (at once when none is)."""
        ...

    def read(self, fn: Callable[[Any], T]) -> T:
        """Run a read on a read connection; database errors become StorageError."""
        ...

    def read_idle(self, fn: Callable[[Any], T]) -> T:
        """:meth:`read`, on the write connection when that is cheaper and safe."""
        ...

    def close(self) -> None:
        """Close after every accepted operation completed; refuse new ones."""
        ...


def open_store(
    backend: str,
    *,
    path: str | Path | None = None,
    dsn: str | None = None,
    threaded: bool = True,
    max_batch_ops: int = 1024,
    max_commit_wait: float = 0.002,
    qm_quota: int | None = None,
    expected_guid: uuid.UUID | None = None,
    sqlite_options: dict[str, Any] | None = None,
) -> StoreBackend:
    """Open the store ``backend`` names: SQLite at ``path`` or PostgreSQL at ``dsn``
    (``expected_guid``: the QM the database must belong to). ConfigError names the
    setting that is wrong."""
    if backend == "sqlite":
        if path is None:
            raise ConfigError("store.backend", "the SQLite store needs a data directory")
        from openmsmq.store.db import Store

        return Store(
            path,
            threaded=threaded,
            max_batch_ops=max_batch_ops,
            max_commit_wait=max_commit_wait,
            qm_quota=qm_quota,
            **(sqlite_options or {}),
        )
    if backend == "postgresql":
        if not dsn:
            raise ConfigError(
                "store.dsn", 'store.backend = "postgresql" needs store.dsn (a libpq DSN or URI)'
            )
        try:
            from openmsmq.store.pg.db import PgStore
        except ImportError as exc:
            raise ConfigError(
                "store.backend", f"PostgreSQL needs psycopg: pip install 'openmsmq[postgresql]' ({exc})"
            ) from exc
        return PgStore(
            dsn,
            threaded=threaded,
            max_batch_ops=max_batch_ops,
            max_commit_wait=max_commit_wait,
            qm_quota=qm_quota,
            expected_guid=expected_guid,
        )
    raise ConfigError("store.backend", f"{backend!r} is no store backend (one of {', '.join(BACKENDS)})")
