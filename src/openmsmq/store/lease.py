"""The lease statements of a highly available queue manager on PostgreSQL (``qm_lease``).

One row per queue manager (keyed by ``str(qm_guid)``): the epoch of the current term, its
holder (a name unique to one process start; NULL once released), when it expires and
since when the holder holds it, both on the **database's** clock. Every decision about
time is taken by the database (``now()``), so the nodes' clocks never meet; the HA core
(:mod:`openmsmq.ha.lease`) only measures its own intervals.

* :meth:`PgLease.read` — the row (free with epoch 0 when the QM has none yet: the first
  takeover creates it, so that a node that only reads writes nothing);
* :meth:`PgLease.acquire` — compare-and-set: takes the lease only if its epoch is still the
  one the caller saw and it is free (released or expired), in one statement;
* :meth:`PgLease.renew` — moves the expiry if the caller still holds an unexpired lease;
* :meth:`PgLease.release` — frees it if the caller still holds it.

An UPDATE of the row waits for every write transaction of the store that holds it
``FOR SHARE`` (the fence, :mod:`openmsmq.store.pg.db`): a takeover therefore commits only
after the former active's last fenced commit, and every later one of those fails.

The statements run on one dedicated connection (asyncio, psycopg 3) with a statement and a
lock timeout, so a request can never hang past the lease; a failed connection is dropped
and the next request connects again.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import uuid
from dataclasses import dataclass
from typing import Any

import psycopg

from openmsmq.errors import HResult, MQError, StorageError

__all__ = ["LeaseRow", "PgLease", "describe_holder", "holder_settings"]


@dataclass(frozen=True, slots=True)
class LeaseRow:
    """The lease as the database shows it; ``remaining``: seconds to its expiry on the
    database's clock (zero or less: expired)."""

    epoch: int
    holder: str | None
    remaining: float
    since: dt.datetime | None


def describe_holder(node: str, pid: int, settings: dict[str, str] | None = None) -> str:
    """A holder name unique to one process start: the node, the pid and a random part,
    then ``key=value`` for each of ``settings`` (what every node of the QM must share, so
    that a standby can compare its own before it does anything)."""
    name = f"{node}:{pid}:{uuid.uuid4().hex[:8]}"
    extra = "".join(f" {k}={v}" for k, v in sorted((settings or {}).items()))
    return name + extra


def holder_settings(holder: str | None) -> dict[str, str]:
    """The ``key=value`` settings of a holder name (see :func:`describe_holder`)."""
    if not holder:
        return {}
    out: dict[str, str] = {}
    for part in holder.split(" ")[1:]:
        key, eq, value = part.partition("=")
        if eq:
            out[key] = value
    return out


_ENSURE = (
    "INSERT INTO qm_lease (qm_guid, epoch, holder, expires_at, since)"
    " VALUES (%(g)s, 0, NULL, now(), NULL) ON CONFLICT (qm_guid) DO NOTHING"
)
_READ = (
    "SELECT epoch, holder, EXTRACT(EPOCH FROM (expires_at - now()))::float8, since"
    " FROM qm_lease WHERE qm_guid = %(g)s"
)
_ACQUIRE = (
    "UPDATE qm_lease SET epoch = %(new)s, holder = %(holder)s,"
    " expires_at = now() + make_interval(secs => %(d)s), since = now()"
    " WHERE qm_guid = %(g)s AND epoch = %(expected)s AND (holder IS NULL OR expires_at <= now())"
)
_RENEW = (
    "UPDATE qm_lease SET expires_at = now() + make_interval(secs => %(d)s)"
    " WHERE qm_guid = %(g)s AND epoch = %(epoch)s AND holder = %(holder)s AND expires_at > now()"
)
_RELEASE = (
    "UPDATE qm_lease SET holder = NULL, expires_at = now()"
    " WHERE qm_guid = %(g)s AND epoch = %(epoch)s AND holder = %(holder)s"
)


class PgLease:
    """The lease of queue manager ``qm_guid`` in the store at ``dsn`` (see the module
    docstring). The store's schema must exist (the PostgreSQL store creates it).
    Database errors raise :class:`~openmsmq.errors.StorageError`."""

    def __init__(
        self,
        dsn: str,
        qm_guid: uuid.UUID,
        *,
        statement_timeout: float = 1.0,
        connect_timeout: float = 2.0,
    ) -> None:
        self.dsn = dsn
        self.key = str(qm_guid)
        self.statement_timeout = statement_timeout
        self.connect_timeout = connect_timeout
        self._conn: psycopg.AsyncConnection[Any] | None = None
        self._ensured = False

    async def _connection(self) -> psycopg.AsyncConnection[Any]:
        if self._conn is None or self._conn.closed:
            ms = max(1, int(self.statement_timeout * 1000))
            self._conn = await psycopg.AsyncConnection.connect(
                self.dsn,
                autocommit=True,
                connect_timeout=max(1, round(self.connect_timeout)),
                application_name="openmsmq-lease",
                options=f"-c statement_timeout={ms} -c lock_timeout={ms}",
            )
        return self._conn

    async def _execute(
        self, sql: str, params: dict[str, Any], ensure: bool = False
    ) -> psycopg.AsyncCursor[Any]:
        try:
            conn = await self._connection()
            if ensure and not self._ensured:
                await conn.execute(_ENSURE, {"g": self.key})
                self._ensured = True
            return await conn.execute(sql, {"g": self.key, **params})
        except psycopg.Error as exc:
            await self.close()
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            err = MQError(HResult.MQ_ERROR_MESSAGE_STORAGE_FAILED, f"lease of {self.key}: {reason}")
            assert isinstance(err, StorageError)
            raise err from exc

    async def read(self) -> LeaseRow:
        """The lease row."""
        cur = await self._execute(_READ, {})
        row = await cur.fetchone()
        if row is None:  # nobody ever took it: free, epoch 0 (created by the first takeover)
            return LeaseRow(0, None, 0.0, None)
        epoch, holder, remaining, since = row
        return LeaseRow(int(epoch), holder, float(remaining if remaining is not None else 0.0), since)

    async def acquire(
        self, expected_epoch: int, new_epoch: int, holder: str, duration: float
    ) -> LeaseRow | None:
        """Take the lease (None) or, when it was not free or its epoch moved on, the row."""
        cur = await self._execute(
            _ACQUIRE, {"new": new_epoch, "holder": holder, "d": duration, "expected": expected_epoch}, True
        )
        if cur.rowcount == 1:
            return None
        return await self.read()

    async def renew(self, epoch: int, holder: str, duration: float) -> LeaseRow | None:
        """Renew (None) or, when the lease is no longer this holder's, the row."""
        cur = await self._execute(_RENEW, {"epoch": epoch, "holder": holder, "d": duration})
        if cur.rowcount == 1:
            return None
        return await self.read()

    async def release(self, epoch: int, holder: str) -> bool:
        """Free the lease if ``holder`` still holds ``epoch``; whether it did."""
        cur = await self._execute(_RELEASE, {"epoch": epoch, "holder": holder})
        return cur.rowcount == 1

    async def close(self) -> None:
        """Close the connection (the next request opens another)."""
        conn, self._conn = self._conn, None
        if conn is not None and not conn.closed:
            with contextlib.suppress(psycopg.Error):
                await conn.close()
