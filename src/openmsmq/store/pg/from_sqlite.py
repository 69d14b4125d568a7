"""Moving a queue manager's store from its SQLite file into a PostgreSQL database.

:func:`copy_store` reads every table of a SQLite store (:mod:`openmsmq.store.schema`)
inside one read transaction that also holds SQLite's write lock (nothing else writes the
file meanwhile), and writes them into the PostgreSQL database inside ONE transaction:
the schema when the database has none (:mod:`openmsmq.store.pg.schema`), every row
(``COPY``), the identity of ``queues`` moved past the copied ids, and a verification
that compares the rows of every table and the messages of every queue on both sides.
Any failure, a mismatch included, rolls the transaction back: the database is left as
it was, and the SQLite file is never written.

Every table of the SQLite schema has a rule in :data:`TABLE_RULES` (a test fails when a
table has none), so a table added to the schema cannot be forgotten here. The rows are
copied as they are: the PostgreSQL store runs the SQLite store's statements over the
same columns and row layout (``props`` packed the same way), so LookupIdentifiers,
SequentialID, message ids, AbortCount / MoveCount, retry due times, TxSequenceID and
numbers, and the incoming sequences' last accepted numbers all carry over.

What the target may hold: nothing (an empty database, or an openmsmq schema without
rows). A database holding rows is refused unless ``replace`` is given, and even then
only when those rows are an earlier copy of the SAME queue manager (same QM GUID) that
no process serves (no unexpired lease): two queue managers never share a database.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from openmsmq.errors import ConfigError, OpenMSMQError
from openmsmq.store.pg.db import DSN_KEY, describe_dsn
from openmsmq.store.pg.dialect import configure
from openmsmq.store.pg.schema import PG_SCHEMA_VERSION, ForeignDatabase, found_version, migrate
from openmsmq.store.schema import APPLICATION_ID, SCHEMA_VERSION

__all__ = [
    "PG_ONLY_TABLES",
    "TABLE_RULES",
    "CopyReport",
    "MigrationFailed",
    "MigrationRefused",
    "copy_store",
    "sqlite_tables",
]

#: What happens to each table of the SQLite store. ``copy``: every row, every column.
#: qm_state: the QM GUID (its identity), SequentialID (last LookupIdentifier), the
#: message-id ordinal, the next private queue number; queues: every property (subqueues,
#: journals, retry policy, quotas, senders allowed), with msg_count / total_bytes;
#: messages: every message of every queue (local, outgoing with their retained
#: unacknowledged ones, dead letters, journals, subqueues, acknowledgments waiting to be
#: sent) with its ids and flags; outgoing_sequences (MS-MQQB 3.1.1.3.1, TxSequenceID and
#: the next number); incoming_sequences (last accepted number per sender sequence, where
#: its FinalAcks go); send_identities (idempotent sends); retry_due (when a message in a
#: ;retry subqueue returns).
TABLE_RULES: dict[str, str] = {
    "qm_state": "copy",
    "queues": "copy",
    "messages": "copy",
    "outgoing_sequences": "copy",
    "incoming_sequences": "copy",
    "send_identities": "copy",
    "retry_due": "copy",
}
#: Tables of the PostgreSQL store that SQLite has not: the schema version (written by the
#: schema step) and the lease of a highly available QM (empty until a ``serve`` takes it).
PG_ONLY_TABLES = ("openmsmq_schema", "qm_lease")
#: Seconds to wait for SQLite's write lock (another process writing the file).
_LOCK_WAIT = 5.0


class MigrationRefused(ConfigError):
    """The migration was refused before anything was written (``key``: the setting or
    option at fault)."""


class MigrationFailed(OpenMSMQError):
    """The copy or its verification failed; its transaction was rolled back (nothing was
    written)."""


@dataclass
class CopyReport:
    """What was copied: rows per table and, per queue, (name, messages, bytes), each as
    read back from PostgreSQL after the COMMIT."""

    qm_guid: uuid.UUID
    target: str
    tables: dict[str, int] = field(default_factory=dict)
    queues: list[tuple[str, int, int]] = field(default_factory=list)
    replaced: bool = False


def _tables(conn: sqlite3.Connection) -> list[str]:
    rows = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
    ).fetchall()
    return [str(r[0]) for r in rows]


def sqlite_tables(path: str | Path) -> list[str]:
    """The tables of the SQLite store at ``path`` (read only)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return _tables(conn)
    finally:
        conn.close()


def _open_source(path: Path) -> sqlite3.Connection:
    """The SQLite store at ``path``, checked, inside BEGIN IMMEDIATE (its write lock)."""
    if not path.is_file():
        raise MigrationRefused("qm.data_dir", f"{path} does not exist: no SQLite store to migrate")
    try:
        conn = sqlite3.connect(f"file:{path}?mode=rw", uri=True, isolation_level=None, timeout=_LOCK_WAIT)
    except sqlite3.Error as exc:
        raise MigrationRefused("qm.data_dir", f"cannot open {path}: {exc}") from None
    try:
        app = int(conn.execute("PRAGMA application_id").fetchone()[0])
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        if app != APPLICATION_ID:
            raise MigrationRefused("qm.data_dir", f"{path} is not an openmsmq store")
        if version > SCHEMA_VERSION:
            raise MigrationRefused(
                "qm.data_dir",
                f"{path} was written by a newer openmsmq (store schema {version}; this version reads up"
                f" to {SCHEMA_VERSION}): migrate it with that version or a later one",
            )
        if version < SCHEMA_VERSION:
            raise MigrationRefused(
                "qm.data_dir",
                f"{path} has store schema {version}, an older one: open it once with this version"
                " (e.g. openmsmq --qm DIR queue list) so that it is upgraded, then migrate",
            )
        conn.execute("BEGIN IMMEDIATE")
    except sqlite3.Error as exc:
        conn.close()
        why = "is in use by another process" if "locked" in str(exc) else "cannot be read"
        raise MigrationRefused("qm.data_dir", f"{path} {why} ({exc})") from None
    except BaseException:
        conn.close()
        raise
    return conn


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [str(r[1]) for r in conn.execute(f"PRAGMA table_info({table})")]


def _pg_columns(conn: psycopg.Connection[Any], table: str) -> set[str]:
    rows = conn.execute(
        "SELECT column_name FROM information_schema.columns"
        " WHERE table_schema = current_schema() AND table_name = %s",
        (table,),
    ).fetchall()
    return {str(r[0]) for r in rows}


def _connect(dsn: str) -> psycopg.Connection[Any]:
    where = describe_dsn(dsn)
    try:
        psycopg.conninfo.conninfo_to_dict(dsn)
    except psycopg.Error:
        raise MigrationRefused(
            DSN_KEY, "not a PostgreSQL connection string (libpq key=value or URI)"
        ) from None
    try:
        conn = psycopg.connect(dsn, autocommit=True, connect_timeout=10, application_name="openmsmq migrate")
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise MigrationRefused(DSN_KEY, f"cannot connect to PostgreSQL at {where}: {reason}") from None
    configure(conn)
    return conn


def _check_target(conn: psycopg.Connection[Any], guid: uuid.UUID, where: str, replace: bool) -> bool:
    """Refuse a target that is not empty (see the module docstring); True when it holds
    an earlier copy of this queue manager that ``replace`` allows to be replaced."""
    try:
        version = found_version(conn)
    except ForeignDatabase as exc:
        raise MigrationRefused(DSN_KEY, f"the database {where} is not an openmsmq store ({exc})") from None
    if version > PG_SCHEMA_VERSION:
        raise MigrationRefused(
            DSN_KEY,
            f"the database {where} was written by a newer openmsmq (store schema {version}; this version"
            f" writes {PG_SCHEMA_VERSION})",
        )
    users = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        " AND application_name = 'openmsmq' AND pid <> pg_backend_pid()"
    ).fetchone()
    if users is not None and int(users[0]):
        raise MigrationRefused(
            DSN_KEY,
            f"a queue manager is using the database {where} ({int(users[0])} connection(s) of openmsmq):"
            " stop it first",
        )
    if version == 0:
        return False
    row = conn.execute("SELECT qm_guid FROM qm_state WHERE id = 1").fetchone()
    if row is not None and bytes(row[0]) != guid.bytes:
        raise MigrationRefused(
            DSN_KEY,
            f"the database {where} holds another queue manager ({uuid.UUID(bytes=bytes(row[0]))}), not"
            f" {guid}: give this QM a database of its own",
        )
    counts = {t: _count(conn, t) for t in (*TABLE_RULES, "qm_lease")}
    held = {t: n for t, n in counts.items() if n}
    if not held:
        return False
    if not replace:
        what = ", ".join(f"{t} {n}" for t, n in sorted(held.items()))
        raise MigrationRefused(
            DSN_KEY,
            f"the database {where} is not empty ({what} rows"
            f"{'; this queue manager, migrated before' if row is not None else ''}): give an empty database,"
            " or --replace to replace an earlier copy of this same queue manager",
        )
    live = conn.execute("SELECT count(*) FROM qm_lease WHERE expires_at > now()").fetchone()
    if live is not None and int(live[0]):
        raise MigrationRefused(
            DSN_KEY,
            f"a queue manager is serving from the database {where} (its lease is held): stop it first",
        )
    return True


def _count(conn: psycopg.Connection[Any], table: str) -> int:
    row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
    return int(row[0]) if row else 0


def _rows(conn: sqlite3.Connection, table: str, cols: list[str]) -> Iterator[tuple[Any, ...]]:
    cur = conn.execute(f"SELECT {', '.join(cols)} FROM {table}")
    while True:
        chunk = cur.fetchmany(2048)
        if not chunk:
            return
        yield from chunk


#: Per queue: messages, their bytes, and the sum of their LookupIdentifiers (a row moved
#: to another queue or renumbered changes it).
_QUEUE_CHECK = (
    "SELECT q.queue_id, q.name, q.msg_count, q.total_bytes,"
    " (SELECT count(*) FROM messages m WHERE m.queue_id = q.queue_id),"
    " (SELECT coalesce(sum(m.size), 0) FROM messages m WHERE m.queue_id = q.queue_id),"
    " (SELECT coalesce(sum(m.lookup_id), 0) FROM messages m WHERE m.queue_id = q.queue_id)"
    " FROM queues q"
)
_STATE_CHECK = (
    "SELECT qm_guid, sequential_id, message_id_ordinal, next_private_number, created_time FROM qm_state"
)
_SEQUENCE_CHECKS = (
    "SELECT queue_id, tx_sequence_id, next_tx_sequence_number FROM outgoing_sequences",
    "SELECT sender_qm, destination, tx_sequence_id, tx_sequence_number FROM incoming_sequences",
)


def _snapshot(run: Any) -> dict[str, Any]:
    """What the verification compares, with ``run(sql)`` returning the rows."""

    def norm(rows: Any) -> list[tuple[Any, ...]]:
        # Sorted here, not by ORDER BY: PostgreSQL orders text by the database's collation,
        # SQLite by bytes.
        out = [tuple(bytes(v) if isinstance(v, memoryview) else v for v in r) for r in rows]
        return sorted(out, key=repr)

    out: dict[str, Any] = {t: norm(run(f"SELECT count(*) FROM {t}")) for t in TABLE_RULES}
    out["queue checks"] = norm(run(_QUEUE_CHECK))
    out["qm state"] = norm(run(_STATE_CHECK))
    for i, sql in enumerate(_SEQUENCE_CHECKS):
        out[f"sequences {i}"] = norm(run(sql))
    return out


def copy_store(sqlite_path: str | Path, dsn: str, *, replace: bool = False) -> CopyReport:
    """Copy the SQLite store at ``sqlite_path`` into the PostgreSQL database ``dsn`` in one
    transaction, verified before its COMMIT (see the module docstring). The caller keeps
    the queue manager stopped. :class:`MigrationRefused` (naming the setting) before
    anything is written; nothing is written either when the copy or its verification
    fails."""
    path = Path(sqlite_path)
    src = _open_source(path)
    try:
        tables = _tables(src)
        unknown = [t for t in tables if t not in TABLE_RULES]
        if unknown:  # a table this version does not know how to move: never half a QM
            raise MigrationRefused(
                "qm.data_dir", f"{path} has table(s) {', '.join(unknown)} of no migrate rule"
            )
        state = src.execute("SELECT qm_guid FROM qm_state WHERE id = 1").fetchone()
        if state is None:
            raise MigrationRefused("qm.data_dir", f"{path} holds no queue manager state")
        guid = uuid.UUID(bytes=bytes(state[0]))
        where = describe_dsn(dsn)
        pg = _connect(dsn)
        try:
            replaced = _check_target(pg, guid, where, replace)
            try:
                _copy_in_one_transaction(src, pg, tables, replaced)
            except psycopg.Error as exc:
                raise MigrationFailed(
                    f"copying into {where} ({DSN_KEY}) failed: {exc}; nothing was written"
                ) from exc
            except sqlite3.Error as exc:
                raise MigrationFailed(f"reading {path} failed: {exc}; nothing was written") from exc
            return _report(pg, guid, where, replaced)
        finally:
            pg.close()
    finally:
        src.execute("ROLLBACK")
        src.close()


def _copy_in_one_transaction(
    src: sqlite3.Connection, pg: psycopg.Connection[Any], tables: list[str], replaced: bool
) -> None:
    with pg.transaction():
        migrate(pg)  # the schema, when the database has none (a savepoint of this transaction)
        if replaced:
            pg.execute("TRUNCATE " + ", ".join((*TABLE_RULES, "qm_lease")) + " RESTART IDENTITY")
        _copy_tables(src, pg, tables)
        before = _snapshot(lambda sql: src.execute(sql).fetchall())
        after = _snapshot(lambda sql: pg.execute(sql).fetchall())
        if before != after:
            diff = [k for k in before if before[k] != after.get(k)]
            raise MigrationFailed(f"verification failed ({', '.join(diff)} differ); nothing was written")


def _copy_tables(src: sqlite3.Connection, pg: psycopg.Connection[Any], tables: list[str]) -> None:
    for table in tables:
        cols = _columns(src, table)
        missing = set(cols) - _pg_columns(pg, table)
        if missing:
            raise MigrationFailed(
                f"the PostgreSQL table {table} has no column(s) {', '.join(sorted(missing))}"
            )
        with pg.cursor() as cur, cur.copy(f"COPY {table} ({', '.join(cols)}) FROM STDIN") as copy:
            for row in _rows(src, table, cols):
                copy.write_row(row)
    # New queues take ids above the copied ones (queues.queue_id is an identity column).
    pg.execute(
        "SELECT setval(pg_get_serial_sequence('queues', 'queue_id'),"
        " coalesce((SELECT max(queue_id) FROM queues), 1), (SELECT count(*) > 0 FROM queues))"
    )


def _report(pg: psycopg.Connection[Any], guid: uuid.UUID, where: str, replaced: bool) -> CopyReport:
    """The counts, read back after the COMMIT."""
    report = CopyReport(guid, where, replaced=replaced)
    for table in TABLE_RULES:
        report.tables[table] = _count(pg, table)
    rows = pg.execute(
        "SELECT q.name, count(m.lookup_id), coalesce(sum(m.size), 0) FROM queues q"
        " LEFT JOIN messages m ON m.queue_id = q.queue_id GROUP BY q.queue_id, q.name ORDER BY q.name"
    ).fetchall()
    report.queues = [(str(r[0]), int(r[1]), int(r[2])) for r in rows]
    return report
