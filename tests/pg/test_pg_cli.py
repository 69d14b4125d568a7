"""The command line on a queue manager whose store is PostgreSQL: ``openmsmq init`` with
``store.backend = "postgresql"`` creates it in the database, the data directory names the
database, and later commands on ``--qm DIR`` use it; bad input names the setting and
leaves the database as it was."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner, Result

from openmsmq.cli.main import cli
from openmsmq.errors import ConfigError
from openmsmq.qm import QueueManager
from openmsmq.qm.options import StoreOptions
from openmsmq.runtime import STORE_FILE, STORE_POINTER
from tests.pgserver import PgServer


def run(*args: str, env: dict[str, str] | None = None, code: int = 0) -> Result:
    result = CliRunner().invoke(cli, list(args), env=env)
    assert result.exit_code == code, (result.output, result.exception)
    return result


def _env(dsn: str) -> dict[str, str]:
    return {"OPENMSMQ_STORE_BACKEND": "postgresql", "OPENMSMQ_STORE_DSN": dsn}


def test_init_on_postgresql_then_commands_on_the_data_directory(tmp_path: Path, pg_dsn: str) -> None:
    data = tmp_path / "qm"
    made = json.loads(run("init", str(data), "--json", env=_env(pg_dsn)).stdout)
    assert not (data / STORE_FILE).exists()  # nothing of the queue manager in SQLite
    pointer = json.loads((data / STORE_POINTER).read_text())
    assert pointer["qm_guid"] == made["qm_guid"]
    assert (data / STORE_POINTER).stat().st_mode & 0o077 == 0  # the DSN may hold a password
    with psycopg.connect(pg_dsn) as conn:
        stored = conn.execute("SELECT encode(qm_guid, 'hex')::uuid::text FROM qm_state").fetchone()
    assert stored == (made["qm_guid"],)
    # Later commands find the store through the data directory, no settings needed.
    run("--qm", str(data), "queue", "create", "private$\\orders", "--transactional")
    run("--qm", str(data), "send", "private$\\orders", "hello", "--transactional")
    got = run("--qm", str(data), "receive", "private$\\orders", "--body-only", "--transactional")
    assert got.stdout.strip() == "hello"
    with psycopg.connect(pg_dsn) as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM queues").fetchall()}
    assert "private$\\orders" in names
    run("init", str(data), env=_env(pg_dsn), code=1)  # once


def test_a_queue_manager_pointed_at_another_ones_database_is_refused(
    tmp_path: Path, pg_server: PgServer, pg_dsn: str
) -> None:
    """Two queue managers, each on its own database; the second one's configuration is
    then pointed at the first one's database (store.dsn): refused at start, naming
    store.dsn and both GUIDs, and the first one's database is left as it was."""
    first = json.loads(run("init", str(tmp_path / "a"), "--json", env=_env(pg_dsn)).stdout)
    other_db = pg_server.new_database()
    second = json.loads(run("init", str(tmp_path / "b"), "--json", env=_env(other_db)).stdout)
    with psycopg.connect(pg_dsn) as conn:
        before = conn.execute("SELECT * FROM qm_state").fetchall()
        queues_before = conn.execute("SELECT * FROM queues ORDER BY queue_id").fetchall()
    with pytest.raises(ConfigError) as info:
        QueueManager(tmp_path / "b", store_options=StoreOptions(backend="postgresql", dsn=pg_dsn))
    assert info.value.key == "store.dsn"
    assert first["qm_guid"] in str(info.value) and second["qm_guid"] in str(info.value)
    with psycopg.connect(pg_dsn) as conn:
        assert conn.execute("SELECT * FROM qm_state").fetchall() == before
        assert conn.execute("SELECT * FROM queues ORDER BY queue_id").fetchall() == queues_before
    result = run("--qm", str(tmp_path / "b"), "status", env=_env(pg_dsn))  # its own database still
    assert second["qm_guid"] in result.output


def test_init_with_an_unreachable_database_names_store_dsn(tmp_path: Path) -> None:
    result = run(
        "init", str(tmp_path / "qm"),
        env=_env("postgresql://openmsmq:s3cr3t-pw@127.0.0.1:1/none?connect_timeout=2"), code=1,
    )  # fmt: skip
    assert "store.dsn" in result.output
    assert "s3cr3t" not in result.output


def test_backup_of_a_postgresql_queue_manager_points_at_the_database_tools(
    tmp_path: Path, pg_dsn: str
) -> None:
    run("init", str(tmp_path / "qm"), env=_env(pg_dsn))
    result = run("--qm", str(tmp_path / "qm"), "backup", str(tmp_path / "copy.db"), code=1)
    assert "PostgreSQL" in result.output and "pg_dump" in result.output
    assert not (tmp_path / "copy.db").exists()
