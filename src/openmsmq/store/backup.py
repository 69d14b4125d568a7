"""A consistent copy of a queue manager's store while it runs (``openmsmq backup``).

SQLite's online backup API copies every page of the database inside one read transaction
when it is asked for all pages in one step: in WAL mode that reader does not block the
queue manager's writer, and the copy holds exactly the transactions committed when it
began. Copying the files instead (``cp``) can tear them (docs/operations.md, "Backup").

The copy is written beside its destination, checked (``PRAGMA quick_check``), made
durable, then renamed into place: a destination that exists is never overwritten, and a
copy cut short leaves no file that looks whole.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from openmsmq.errors import HResult, StorageError, quoted

__all__ = ["backup_database"]


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def backup_database(source: Path, destination: Path) -> int:
    """Copy the store ``source`` (an ``openmsmq.db``) to ``destination``, consistent while
    a queue manager writes it; returns the copy's size in bytes. ``destination`` must not
    exist (:class:`FileExistsError`); SQLite failures are :class:`StorageError`."""
    if destination.exists():
        raise FileExistsError(17, "exists already: choose a new name", str(destination))
    partial = destination.with_name(destination.name + ".partial")
    partial.unlink(missing_ok=True)
    try:
        src = sqlite3.connect(source)
        try:
            src.execute("PRAGMA query_only = 1")
            out = sqlite3.connect(partial)
            try:
                src.backup(out)  # every page in one step: one read transaction
                check = out.execute("PRAGMA quick_check").fetchone()[0]
                if check != "ok":
                    raise StorageError(
                        HResult.MQ_ERROR_MESSAGE_STORAGE_FAILED, f"the copy failed its check: {check}"
                    )
            finally:
                out.close()
        finally:
            src.close()
        _fsync(partial)
        os.replace(partial, destination)
        _fsync(destination.parent)
    except sqlite3.Error as exc:
        partial.unlink(missing_ok=True)
        raise StorageError(
            HResult.MQ_ERROR_MESSAGE_STORAGE_FAILED, f"backup of {quoted(str(source))} failed: {exc}"
        ) from exc
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return destination.stat().st_size
