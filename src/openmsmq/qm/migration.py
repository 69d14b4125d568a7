"""Moving a stopped queue manager from its SQLite store to PostgreSQL (``openmsmq migrate``).

:func:`migrate_to_postgresql` holds the data directory's lock (``serve.lock``: a running
``serve`` holds it, and no ``serve`` can start while the migration runs), copies the
store into the database in one transaction (:func:`openmsmq.store.pg.from_sqlite.copy_store`,
verified before its COMMIT), then records in the data directory that its store is now
that database (:data:`openmsmq.runtime.STORE_POINTER`, as ``openmsmq init`` does on
PostgreSQL) and renames the SQLite file to ``openmsmq.db.migrated``. From then on every
command and ``serve`` on the data directory open the database; the renamed file is kept
for the operator to delete once satisfied, and nothing opens it by mistake (it would
send the outgoing messages the database now owns a second time).

Every refusal comes before anything is written (:class:`MigrationRefused` naming the
setting); a failed copy leaves the database and the data directory as they were.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path

from openmsmq.runtime import (
    STORE_FILE,
    STORE_POINTER,
    holds_queue_manager,
    take_serve_lock,
    write_store_pointer,
)
from openmsmq.store.pg.from_sqlite import CopyReport, MigrationRefused, copy_store

__all__ = ["MIGRATED_SUFFIX", "MigrationResult", "migrate_to_postgresql"]

#: What the SQLite file is renamed to after a migration (``openmsmq.db.migrated``).
MIGRATED_SUFFIX = ".migrated"


@dataclass
class MigrationResult:
    """The copy's report and where the SQLite file went."""

    report: CopyReport
    sqlite_kept_as: Path


def migrate_to_postgresql(data_dir: str | Path, dsn: str, *, replace: bool = False) -> MigrationResult:
    """Move the queue manager in ``data_dir`` (stopped) to the database ``dsn`` (see the
    module docstring). ``replace``: an earlier copy of this same queue manager in the
    database is replaced (never another queue manager's)."""
    d = Path(data_dir)
    if (d / STORE_POINTER).is_file():
        raise MigrationRefused("store.backend", f"{d} keeps its store in PostgreSQL already")
    if not holds_queue_manager(d):
        raise MigrationRefused("qm.data_dir", f"{d} holds no queue manager")
    try:
        lock = take_serve_lock(d)
    except OSError as exc:
        raise MigrationRefused("qm.data_dir", f"cannot take the lock of {d}: {exc.strerror or exc}") from None
    if lock is None:
        raise MigrationRefused(
            "qm.data_dir",
            f"the queue manager in {d} is running (another process holds its serve.lock): stop it",
        )
    try:
        report = copy_store(d / STORE_FILE, dsn, replace=replace)
        # From here the database is the store: name it before the file goes, so that no
        # moment exists where the data directory holds no queue manager.
        write_store_pointer(d, "postgresql", dsn, str(report.qm_guid))
        kept = _set_aside(d / STORE_FILE)
    finally:
        os.close(lock)
    return MigrationResult(report, kept)


def _set_aside(path: Path) -> Path:
    """Rename the SQLite file (and a WAL left beside it) to a free ``*.migrated`` name."""
    target = path.with_name(path.name + MIGRATED_SUFFIX)
    n = 1
    while target.exists():
        n += 1
        target = path.with_name(f"{path.name}{MIGRATED_SUFFIX}.{n}")
    os.replace(path, target)
    for extra in ("-wal", "-shm"):
        side = path.with_name(path.name + extra)
        if side.exists():
            with contextlib.suppress(OSError):
                os.replace(side, target.with_name(target.name + extra))
    return target
