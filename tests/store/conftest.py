"""The store tests' backend fixture: tests that take ``open_store`` run once on SQLite
and once on PostgreSQL (a real server, :mod:`tests.pgserver`, a fresh database per test).

``open_store(**options)`` opens (again) the same store: the test's SQLite file or its
database. Tests of what only one backend has (SQLite's file format, WAL, page and disk
limits, its migrations) open :class:`~openmsmq.store.db.Store` directly and say so.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from openmsmq.qm.options import StoreOptions
from openmsmq.store.backend import StoreBackend

#: Opens the test's store (again), with backend options.
Opener = Callable[..., Any]


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(request: pytest.FixtureRequest) -> str:
    """The store backend under test."""
    return str(request.param)


@pytest.fixture
def open_store(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> Opener:
    """A function opening the test's store on ``backend`` (see the module docstring)."""
    if backend == "sqlite":
        from openmsmq.store.db import Store

        path = tmp_path / "s.db"

        def sqlite(**options: Any) -> StoreBackend:
            return Store(path, **options)

        return sqlite
    dsn = request.getfixturevalue("pg_dsn")
    from openmsmq.store.pg.db import PgStore

    def postgresql(**options: Any) -> StoreBackend:
        return PgStore(dsn, **options)

    return postgresql


@pytest.fixture
def qm_store(backend: str, request: pytest.FixtureRequest) -> StoreOptions:
    """The store options of a QueueManager on ``backend`` (a fresh database for PostgreSQL)."""
    if backend == "sqlite":
        return StoreOptions()
    return StoreOptions(backend="postgresql", dsn=request.getfixturevalue("pg_dsn"))
