"""A data directory as other programs see it: whether it holds a queue manager, and the
runtime file through which a running queue manager tells them where it listens.

A data directory holds a queue manager once ``openmsmq.db`` (:data:`STORE_FILE`, the
SQLite store with the QM's identity) or ``openmsmq.pg.json`` (:data:`STORE_POINTER`: the
QM keeps its store in PostgreSQL; the file names the database and the QM GUID it must
hold) is in it: :func:`holds_queue_manager`. Only
``openmsmq init`` and ``openmsmq serve`` (and a library user's own
:class:`~openmsmq.qm.QueueManager`) create one; the client commands refuse a directory
without it, so that a mistyped ``--qm`` is an error instead of a new queue manager.

``openmsmq serve`` writes ``<data_dir>/runtime.json`` once its services are up and removes
it at a clean stop::

    {"pid": 4242, "qm_guid": "...", "mqqb": "127.0.0.1:1801",
     "remote": "grpc://127.0.0.1:2105", "metrics": "http://127.0.0.1:9181/metrics"}

:func:`openmsmq.connect` uses it so that a program given a data directory whose queue
manager is running talks to that queue manager through its remote-read service instead
of opening the store beside it: one process owns a data directory's store.
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any

from openmsmq.datadir import FILE_MODE, private_dir, write_private

__all__ = [
    "RUNTIME_FILE",
    "SERVE_LOCK",
    "STORE_FILE",
    "STORE_POINTER",
    "holds_queue_manager",
    "live_runtime",
    "read_runtime",
    "read_store_pointer",
    "remove_runtime",
    "take_serve_lock",
    "write_runtime",
    "write_store_pointer",
]

#: The store of a queue manager, inside its data directory.
STORE_FILE = "openmsmq.db"
#: The file naming the PostgreSQL store of a queue manager (store.backend = "postgresql"):
#: ``{"backend": "postgresql", "dsn": ..., "qm_guid": ...}``, mode 0600 (the DSN may
#: carry a password, as the SQLite file carries every message).
STORE_POINTER = "openmsmq.pg.json"
#: Name of the file, inside the data directory, that describes a running queue manager.
RUNTIME_FILE = "runtime.json"
#: The file a serving process holds an exclusive lock on, inside its data directory.
SERVE_LOCK = "serve.lock"


def holds_queue_manager(data_dir: str | Path) -> bool:
    """True when ``data_dir`` holds a queue manager's store, or names its PostgreSQL
    store (created by ``openmsmq init`` or ``openmsmq serve``)."""
    return (Path(data_dir) / STORE_FILE).is_file() or (Path(data_dir) / STORE_POINTER).is_file()


def read_store_pointer(data_dir: str | Path) -> dict[str, str] | None:
    """The PostgreSQL store ``data_dir`` names (``backend``, ``dsn``, ``qm_guid``), or None
    when it names none. ValueError for a file that is not one."""
    try:
        text = (Path(data_dir) / STORE_POINTER).read_text()
    except FileNotFoundError:
        return None
    data = json.loads(text)
    if not isinstance(data, dict) or not all(
        isinstance(data.get(k), str) for k in ("backend", "dsn", "qm_guid")
    ):
        raise ValueError(f"{STORE_POINTER} names no store")
    return {k: data[k] for k in ("backend", "dsn", "qm_guid")}


def write_store_pointer(data_dir: str | Path, backend: str, dsn: str, qm_guid: str) -> None:
    """Record in ``data_dir`` that its queue manager's store is the database ``dsn``."""
    info = {"backend": backend, "dsn": dsn, "qm_guid": qm_guid}
    write_private(Path(data_dir) / STORE_POINTER, (json.dumps(info, indent=2) + "\n").encode())


def take_serve_lock(data_dir: str | Path) -> int | None:
    """Take the exclusive lock of ``data_dir`` (``serve.lock``) without waiting: the
    open descriptor (closing it, or the process's end, releases the lock), or None
    when another process holds it. OSError when the lock file cannot be created."""
    path = private_dir(data_dir)
    fd = os.open(path / SERVE_LOCK, os.O_RDWR | os.O_CREAT, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd


def write_runtime(data_dir: str | Path, info: dict[str, Any]) -> bool:
    """Write ``runtime.json`` atomically (a reader never sees half a file). Returns False
    when it cannot be written (a full disk, say: the file is small, but a queue manager
    must still start to send out what fills its disk); what was there is left as it was
    and no partial file remains. Other programs then open the store directly (SQLite
    shares it safely) instead of going through the remote-read service."""
    try:
        write_private(Path(data_dir) / RUNTIME_FILE, (json.dumps(info, indent=2) + "\n").encode())
    except OSError:
        return False
    return True


def remove_runtime(data_dir: str | Path) -> None:
    """Remove ``runtime.json`` (at a clean stop)."""
    (Path(data_dir) / RUNTIME_FILE).unlink(missing_ok=True)


def read_runtime(data_dir: str | Path) -> dict[str, Any] | None:
    """What ``openmsmq serve`` over ``data_dir`` published, or None (even if stale)."""
    try:
        data = json.loads((Path(data_dir) / RUNTIME_FILE).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def live_runtime(data_dir: str | Path) -> dict[str, Any] | None:
    """Like :func:`read_runtime`, but None when the process it names is gone (a file left by
    a killed queue manager)."""
    info = read_runtime(data_dir)
    if info is None:
        return None
    pid = info.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        return info  # alive, owned by another user
    return info
