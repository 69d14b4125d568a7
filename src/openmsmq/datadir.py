"""The data directory at rest: readable by the queue manager's user only.

Every message body lives in the data directory (the SQLite database, its WAL), so the
directory is created ``0700`` and every file the queue manager creates in it ``0600``
(``openmsmq.db`` — SQLite gives its ``-wal`` and ``-shm`` files the database's mode —,
``runtime.json``, ``serve.lock``, the space reserve), whatever the process's umask.

A directory or file that exists with a looser mode (group or other bits) is left as it is
and named in one WARNING at start, with the ``chmod`` that tightens it: an operator may
have opened it on purpose (a backup group, say), and changing modes behind their back would
surprise them; but they are told (docs/operations.md, "Files and permissions").

Only the standard library is imported here.
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from pathlib import Path

__all__ = ["DIR_MODE", "FILE_MODE", "check_private", "private_dir", "private_file", "write_private"]

log = logging.getLogger("openmsmq.datadir")

#: Mode of the data directory the queue manager creates.
DIR_MODE = 0o700
#: Mode of every file it creates there.
FILE_MODE = 0o600


def private_dir(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` (and missing parents, with the usual mode) as a ``0700`` directory;
    an existing one is kept as it is."""
    p = Path(path)
    if not p.is_dir():
        p.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            p.mkdir(mode=DIR_MODE)
        os.chmod(p, DIR_MODE)  # mkdir's mode passes through the umask
    return p


def private_file(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` empty with mode ``0600`` unless it exists (kept as it is), so that a
    library creating it next (SQLite) keeps that mode."""
    p = Path(path)
    with contextlib.suppress(FileExistsError):
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
        os.fchmod(fd, FILE_MODE)
        os.close(fd)
    return p


def write_private(path: str | os.PathLike[str], data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (a temporary file, then a rename), mode ``0600``.
    OSError on failure, with no temporary file left."""
    p = Path(path)
    tmp = p.with_suffix(".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        try:
            os.fchmod(fd, FILE_MODE)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)
        os.replace(tmp, p)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


def check_private(directory: str | os.PathLike[str], names: tuple[str, ...] = ()) -> list[str]:
    """Log one WARNING naming ``directory`` and those of its files ``names`` that other users
    may read or enter (group or other mode bits); returns their descriptions (empty when
    all are private). Modes are not changed (see the module docstring)."""
    d = Path(directory)
    loose = []
    for p in (d, *(d / n for n in names)):
        try:
            mode = stat.S_IMODE(os.stat(p).st_mode)
        except OSError:
            continue
        if mode & 0o077:
            loose.append(f"{p} ({mode:04o})")
    if loose:
        log.warning(
            "the data directory is open to other users, who can read every message in it: %s;"
            " run chmod 700 %s && chmod 600 %s/* (docs/operations.md)",
            ", ".join(loose), d, d,
        )  # fmt: skip
    return loose
