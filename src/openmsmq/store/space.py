"""Disk space: blocks held back so that removals still run on a full disk.

SQLite writes a delete to its WAL like anything else: on a file system with no byte free a
receive, a purge, a queue deletion and the release of OrderAck'ed messages all fail, so an
operator could not drain a queue to make room. The store keeps ``openmsmq.reserve``, a
file of preallocated blocks (``posix_fallocate``; blocks actually allocated, not a sparse
file), in the data directory. When a write fails with SQLITE_FULL the store truncates it —
the blocks go back to the file system at once — and runs on in *low-space mode*: writes
that add messages (sends, arrivals) are refused with MQ_ERROR_INSUFFICIENT_RESOURCES before
they take any room, everything else (receives, purges, deletions, releases, sequence state,
acknowledgments) uses the freed blocks. The store tries to take the reserve back about
once a second; it leaves low-space mode when that succeeds (space was freed: files
removed, the disk grown, or its own WAL checkpointed after the removals).

:class:`SpaceReserve` owns the file, :class:`SpaceGuard` the mode and when to spend and
take back the reserve; :class:`~openmsmq.store.db.Store` asks the guard.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from openmsmq.store.writes import is_full

__all__ = ["RESERVE_FILE", "RETRY_INTERVAL", "SpaceGuard", "SpaceReserve"]

log = logging.getLogger("openmsmq.store")

#: Seconds between tries to take the reserve back in low-space mode.
RETRY_INTERVAL = 1.0

#: Name of the reserve file next to the database.
RESERVE_FILE = "openmsmq.reserve"
#: Bytes written per call when the file system cannot preallocate.
_CHUNK = 1 << 20


class SpaceReserve:
    """The reserve file ``path`` of ``size`` bytes.

    ``size`` None: keep whatever reserve the file holds (a process that opens the data
    directory of a stopped ``serve`` — the command line — may spend it; it creates none);
    0: no reserve (the file is removed); N: hold N bytes. Not thread-safe: the store's
    batch lock serialises the calls.
    """

    def __init__(self, path: str | os.PathLike[str], size: int | None) -> None:
        self.path = Path(path)
        if size is None:
            try:
                size = os.stat(self.path).st_size
            except FileNotFoundError:
                size = 0
        elif size == 0:
            self.path.unlink(missing_ok=True)
        #: Bytes the reserve should hold.
        self.size = size
        #: Bytes it holds now (0 after :meth:`release`, until :meth:`fill` succeeds).
        self.held = 0

    def fill(self) -> bool:
        """Allocate the reserve's blocks; True when it holds :attr:`size` bytes (or is
        empty by configuration). On a full file system nothing stays allocated: False."""
        if self.size <= 0:
            return True
        if self.held == self.size:
            return True
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            os.fchmod(fd, 0o600)
            try:
                os.posix_fallocate(fd, 0, self.size)
            except OSError as exc:
                if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):
                    raise
                self._write_zeros(fd)  # a file system without preallocation
            os.fsync(fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            self.held = 0
            return False
        finally:
            os.close(fd)
        self.held = self.size
        return True

    def _write_zeros(self, fd: int) -> None:
        zeros = bytes(_CHUNK)
        os.lseek(fd, 0, os.SEEK_SET)
        left = self.size
        while left > 0:
            left -= os.write(fd, zeros[: min(left, _CHUNK)])

    def release(self) -> int:
        """Give the blocks back to the file system; returns how many bytes were held."""
        held, self.held = self.held, 0
        with contextlib.suppress(FileNotFoundError):
            os.truncate(self.path, 0)
        return held


class SpaceGuard:
    """Low-space mode of one store (see the module docstring): :meth:`spend` on a failed
    write, :attr:`low` for the write context, :meth:`recover` before each batch.

    ``clock``: monotonic seconds (tests drive it). Not thread-safe: the store's batch lock
    serialises the calls.
    """

    def __init__(self, reserve: SpaceReserve, clock: Callable[[], float] = time.monotonic) -> None:
        self.reserve = reserve
        self._clock = clock
        #: True while writes that add messages are refused (the reserve was spent or could
        #: not be taken).
        self.low = False
        self._next_try = 0.0

    def open(self) -> None:
        """Take the reserve at start; on a full disk start in low-space mode (a QM must
        still start, to send out or hand over what filled its disk)."""
        if not self.reserve.fill():
            self.low = True
            self._next_try = self._clock() + RETRY_INTERVAL
            log.warning(
                "cannot allocate the %s-byte space reserve %s (disk full?): sends and arrivals are"
                " refused until space is freed; receives, purges and deletions go on",
                f"{self.reserve.size:,}", self.reserve.path,
            )  # fmt: skip

    def spend(self, exc: BaseException) -> bool:
        """A write failed with ``exc``: when it is SQLITE_FULL and the reserve is held, give
        the reserve back to the file system and enter low-space mode; True when the caller
        should run its batch again (once: the reserve is spent only once)."""
        if not is_full(exc) or self.reserve.held <= 0:
            return False
        freed = self.reserve.release()
        self.low = True
        self._next_try = self._clock() + RETRY_INTERVAL
        log.warning(
            "the disk of %s is full (%s): released the %s-byte space reserve so that receives,"
            " purges, deletions and releases go on; sends and arrivals are refused with"
            " MQ_ERROR_INSUFFICIENT_RESOURCES until space is freed (docs/operations.md, A full disk)",
            self.reserve.path.parent, exc, f"{freed:,}",
        )  # fmt: skip
        return True

    def recover(self, conn: sqlite3.Connection) -> None:
        """In low-space mode, at most every :data:`RETRY_INTERVAL` s (call it outside a
        transaction): give the WAL's space back to the file system (a TRUNCATE checkpoint;
        after removals most of the WAL is free), then try to take the reserve again; leave
        low-space mode when it is held."""
        if not self.low or self._clock() < self._next_try:
            return
        self._next_try = self._clock() + RETRY_INTERVAL
        with contextlib.suppress(sqlite3.Error):
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        if self.reserve.fill():
            self.low = False
            log.warning(
                "disk space of %s is back: the space reserve is held again, sends and arrivals"
                " are accepted", self.reserve.path.parent,
            )  # fmt: skip
