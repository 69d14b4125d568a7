"""TEST BACKEND: a file-backed stand-in for a queue manager, for testing the Spark data source.

This is **not a product feature**. It exists so that the Spark mechanics (offsets,
partitions, peek, commit, idempotent writes, task retries) can be exercised before the
queue manager's remote service exists. Spark executors run in separate Python worker
processes, so the state lives in one SQLite file that the driver and every executor
open (endpoint ``file:///absolute/path.db``); nothing is shared in memory.

It implements the :class:`openmsmq.spark.backend.Backend` contract the simple way:
LookupIdentifiers come from one counter that is advanced inside the same write
transaction that inserts the message, and SQLite serialises write transactions, so ids
become visible in increasing order and the stable watermark is simply the highest id
present (contract 1). Each operation opens its own connection (connections must not
cross the fork of Spark's Python worker daemon), so a database file that disappears
makes the next call fail like an unreachable queue manager would.

(As a test double it runs its own SQL; the product's SQL lives in :mod:`openmsmq.store`.)
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from openmsmq.errors import HResult, MQError
from openmsmq.spark.backend import LookupRange, OutgoingMessage, PeekedMessage

__all__ = ["FileBackend"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS queues (name TEXT PRIMARY KEY, transactional INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS messages (
    lookup_id INTEGER PRIMARY KEY,
    queue TEXT NOT NULL REFERENCES queues(name),
    uniquifier INTEGER NOT NULL,
    label TEXT NOT NULL,
    body BLOB NOT NULL,
    class INTEGER NOT NULL,
    priority INTEGER NOT NULL,
    correlation_id BLOB NOT NULL,
    app_specific INTEGER NOT NULL,
    sent_time INTEGER NOT NULL,
    arrived_time INTEGER NOT NULL,
    tx_sequence_id INTEGER,
    tx_sequence_number INTEGER
);
CREATE INDEX IF NOT EXISTS messages_by_queue ON messages(queue, lookup_id);
CREATE TABLE IF NOT EXISTS seen_identity (
    queue TEXT NOT NULL, identity TEXT NOT NULL, PRIMARY KEY (queue, identity)
) WITHOUT ROWID;
"""

_COLUMNS = (
    "lookup_id, uniquifier, label, body, class, priority, correlation_id, app_specific, "
    "sent_time, arrived_time, tx_sequence_id, tx_sequence_number"
)


class FileBackend:
    """TEST BACKEND over one SQLite file (see the module docstring)."""

    def __init__(self, path: str, *, now: int = 1_700_000_000) -> None:
        """Open an existing test database at ``path`` (create it with :meth:`create`)."""
        self.path = path
        self.now = now
        """SentTime / ArrivalTime stamped on messages enqueued through this instance."""
        self._closed = False

    # ----------------------------------------------------------------- test setup helpers

    @classmethod
    def create(cls, path: str, *, now: int = 1_700_000_000) -> FileBackend:
        """Create (or open) the test database file at ``path`` and return a backend on it."""
        conn = sqlite3.connect(path)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.executescript(_SCHEMA)
            conn.execute(
                "INSERT OR IGNORE INTO meta VALUES ('qm_guid', ?), ('next_lookup_id', '1')",
                (str(uuid.uuid4()).upper(),),
            )
            conn.commit()
        finally:
            conn.close()
        return cls(path, now=now)

    def create_queue(self, name: str, *, transactional: bool = True) -> None:
        """Create a queue (no-op if it exists)."""
        with self._write() as conn:
            conn.execute("INSERT OR IGNORE INTO queues VALUES (?, ?)", (name, int(transactional)))

    def send(self, queue: str, bodies: Sequence[bytes], *, label: str = "", priority: int = 3) -> list[int]:
        """Enqueue plain messages in one transaction (test input); returns their LookupIdentifiers."""
        msgs = [OutgoingMessage(identity="", body=b, label=label, priority=priority) for b in bodies]
        with self._write() as conn:
            return [self._insert(conn, queue, m) for m in msgs]

    def lookup_ids(self, queue: str) -> list[int]:
        """LookupIdentifiers of every message in ``queue``, ascending."""
        with self._read() as conn:
            rows = conn.execute("SELECT lookup_id FROM messages WHERE queue=? ORDER BY lookup_id", (queue,))
            return [r[0] for r in rows]

    def bodies(self, queue: str) -> list[bytes]:
        """Bodies of every message in ``queue`` in LookupIdentifier order."""
        with self._read() as conn:
            rows = conn.execute("SELECT body FROM messages WHERE queue=? ORDER BY lookup_id", (queue,))
            return [bytes(r[0]) for r in rows]

    # ----------------------------------------------------------------- Backend protocol

    def queue_exists(self, queue: str) -> bool:
        """True if ``queue`` exists."""
        with self._read() as conn:
            return conn.execute("SELECT 1 FROM queues WHERE name=?", (queue,)).fetchone() is not None

    def available_range(self, queue: str, after: int = 0, through: int | None = None) -> LookupRange | None:
        """Oldest, newest and count of the messages in ``(after, through]``; None if none."""
        upper = 2**63 - 1 if through is None else through
        with self._read() as conn:
            self._check_queue(conn, queue)
            first, last, count = conn.execute(
                "SELECT MIN(lookup_id), MAX(lookup_id), COUNT(*) FROM messages "
                "WHERE queue=? AND lookup_id>? AND lookup_id<=?",
                (queue, after, upper),
            ).fetchone()
        return None if count == 0 else LookupRange(first, last, count)

    def nth_lookup_id(self, queue: str, after: int, n: int) -> int:
        """LookupIdentifier of the n-th message after ``after``."""
        if n < 1:
            raise MQError(HResult.MQ_ERROR_INVALID_PARAMETER, f"n must be >= 1, got {n}")
        with self._read() as conn:
            self._check_queue(conn, queue)
            row = conn.execute(
                "SELECT lookup_id FROM messages WHERE queue=? AND lookup_id>? "
                "ORDER BY lookup_id LIMIT 1 OFFSET ?",
                (queue, after, n - 1),
            ).fetchone()
        if row is None:
            raise MQError(
                HResult.MQ_ERROR_MESSAGE_NOT_FOUND, f"fewer than {n} messages after {after} in {queue!r}"
            )
        return int(row[0])

    def peek_range(self, queue: str, after: int, through: int, limit: int) -> list[PeekedMessage]:
        """Up to ``limit`` messages in ``(after, through]``, without removing them."""
        with self._read() as conn:
            self._check_queue(conn, queue)
            guid = conn.execute("SELECT value FROM meta WHERE key='qm_guid'").fetchone()[0]
            rows = conn.execute(
                f"SELECT {_COLUMNS} FROM messages WHERE queue=? AND lookup_id>? AND lookup_id<=? "
                "ORDER BY lookup_id LIMIT ?",
                (queue, after, through, limit),
            ).fetchall()
        return [
            PeekedMessage(
                lookup_id=r[0],
                message_id=f"{{{guid}}}\\{r[1]}",
                label=r[2],
                body=bytes(r[3]),
                message_class=r[4],
                priority=r[5],
                correlation_id=bytes(r[6]),
                app_specific=r[7],
                sent_time=r[8],
                arrived_time=r[9],
                source_qm=guid,
                tx_sequence_id=r[10],
                tx_sequence_number=r[11],
            )
            for r in rows
        ]

    def remove_through(self, positions: Mapping[str, int]) -> int:
        """Remove messages with LookupIdentifier <= position per queue, in one transaction."""
        removed = 0
        with self._write() as conn:
            for queue, through in positions.items():
                self._check_queue(conn, queue)
                removed += conn.execute(
                    "DELETE FROM messages WHERE queue=? AND lookup_id<=?", (queue, through)
                ).rowcount
        return removed

    def send_idempotent(self, queue: str, messages: Sequence[OutgoingMessage]) -> int:
        """Enqueue the messages whose identity ``queue`` has not seen, in one transaction."""
        sent = 0
        with self._write() as conn:
            self._check_queue(conn, queue)
            for m in messages:
                if not m.identity:
                    raise MQError(HResult.MQ_ERROR_INVALID_PARAMETER, "send_idempotent needs an identity")
                fresh = conn.execute(
                    "INSERT OR IGNORE INTO seen_identity VALUES (?, ?)", (queue, m.identity)
                ).rowcount
                if fresh:
                    self._insert(conn, queue, m)
                    sent += 1
        return sent

    def close(self) -> None:
        """Mark the backend closed (connections are per call)."""
        self._closed = True

    # ----------------------------------------------------------------- internals

    def _connect(self) -> sqlite3.Connection:
        if self._closed:
            raise MQError(HResult.MQ_ERROR_INVALID_HANDLE, "backend is closed")
        if not os.path.exists(self.path):
            raise MQError(
                HResult.MQ_ERROR_REMOTE_MACHINE_NOT_AVAILABLE, f"test backend database {self.path!r} is gone"
            )
        try:
            conn = sqlite3.connect(f"file:{self.path}?mode=rw", uri=True, timeout=30, isolation_level=None)
        except sqlite3.Error as exc:
            raise MQError(HResult.MQ_ERROR_REMOTE_MACHINE_NOT_AVAILABLE, f"{self.path}: {exc}") from exc
        return conn

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        conn = self._connect()
        try:
            conn.execute("BEGIN")
            yield conn
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise MQError(HResult.MQ_ERROR_REMOTE_MACHINE_NOT_AVAILABLE, f"{self.path}: {exc}") from exc
        finally:
            conn.close()

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        conn = self._connect()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise MQError(HResult.MQ_ERROR_MESSAGE_STORAGE_FAILED, f"{self.path}: {exc}") from exc
        finally:
            conn.close()

    @staticmethod
    def _check_queue(conn: sqlite3.Connection, queue: str) -> None:
        if conn.execute("SELECT 1 FROM queues WHERE name=?", (queue,)).fetchone() is None:
            raise MQError(HResult.MQ_ERROR_QUEUE_NOT_FOUND, f"queue {queue!r} does not exist")

    def _insert(self, conn: sqlite3.Connection, queue: str, m: OutgoingMessage) -> int:
        row = conn.execute("SELECT transactional FROM queues WHERE name=?", (queue,)).fetchone()
        if row is None:
            raise MQError(HResult.MQ_ERROR_QUEUE_NOT_FOUND, f"queue {queue!r} does not exist")
        transactional = bool(row[0])
        (nxt,) = conn.execute("SELECT value FROM meta WHERE key='next_lookup_id'").fetchone()
        lookup_id = int(nxt)
        conn.execute("UPDATE meta SET value=? WHERE key='next_lookup_id'", (str(lookup_id + 1),))
        corr = m.correlation_id if m.correlation_id is not None else bytes(20)
        if len(corr) != 20:
            raise MQError(HResult.MQ_ERROR_ILLEGAL_PROPERTY_SIZE, "correlation_id must be 20 bytes")
        conn.execute(
            f"INSERT INTO messages ({_COLUMNS}, queue) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                lookup_id,
                lookup_id,  # uniquifier of the message's OBJECTID
                m.label,
                m.body,
                0,
                0 if transactional else m.priority,  # transactional messages carry priority 0
                corr,
                m.app_specific,
                self.now,
                self.now,
                # A single test sequence per QM: TxSequenceID 1, numbers = LookupIdentifier.
                1 if transactional else None,
                lookup_id if transactional else None,
                queue,
            ),
        )
        return lookup_id
