"""Fixtures shared by every test package: one real PostgreSQL server per test session
(:mod:`tests.pgserver`), started on first use and stopped at the end, and a fresh
database per test that asks for one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.pgserver import PgServer


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """The session's PostgreSQL server (initdb in a temporary directory, loopback port)."""
    server = PgServer()
    try:
        server.start()
        yield server
    finally:
        server.cleanup()


@pytest.fixture
def pg_dsn(pg_server: PgServer) -> Iterator[str]:
    """The DSN of a new, empty database on the session's server (dropped afterwards)."""
    if not pg_server.running:  # a test stopped it and failed before starting it again
        pg_server.start()
    dsn = pg_server.new_database()
    yield dsn
    if pg_server.running:
        pg_server.drop_database(dsn)
