"""Every SQL statement of openmsmq: write operations (run by the writer) and reads.

Write operations are built by the functions here and handed to
:meth:`openmsmq.store.db.Store.submit`; each returns a callable ``op(ctx)``. Rows go
in with ``executemany`` (one prepared statement for many rows), never one round trip
per message.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from openmsmq.errors import HResult, MQError
from openmsmq.store.db import WriteContext
from openmsmq.store.records import (
    COL,
    INFINITE,
    MESSAGE_COLUMNS,
    QUEUE_COLUMNS,
    IncomingSequenceState,
    Message,
    OutgoingSequenceState,
    QueueRecord,
    QueueType,
    from_i64,
    message_from_row,
    message_to_row,
    queue_from_row,
    to_i64,
)

__all__ = [
    "FIRST_PRIVATE_NUMBER",
    "CommitWork",
    "FinalAckOutcome",
    "Remove",
    "RemovedMessage",
    "Send",
    "accept_incoming",
    "commit_work",
    "create_queue",
    "delete_queue",
    "ensure_outgoing_queue",
    "expire_messages",
    "fetch_available",
    "fetch_by_lookup",
    "fetch_expired",
    "fetch_range",
    "get_queue",
    "incoming_sequences",
    "init_qm_state",
    "list_queues",
    "load_qm_state",
    "order_key",
    "outgoing_sequence",
    "purge_queue",
    "record_incoming",
    "release_outgoing",
    "reserve_uniquifiers",
    "settle_final_ack",
    "update_queue",
]

#: First PrivateQueueNumber given to application queues; lower numbers are reserved for
#: system private queues (order_queue$ = 4, MS-MQQB 3.1.7.17).
FIRST_PRIVATE_NUMBER = 0x10

_MSG_COLS = ", ".join(MESSAGE_COLUMNS)
_MSG_SELECT = ", ".join(f"m.{c}" for c in MESSAGE_COLUMNS)
_INSERT_MSG = (
    f"INSERT INTO messages ({_MSG_COLS}, queue_id, order_key, expire_at, expire_class) "
    f"VALUES ({', '.join('?' * (len(MESSAGE_COLUMNS) + 4))})"
)
_QUEUE_SELECT = "SELECT " + ", ".join(QUEUE_COLUMNS) + " FROM queues"
_ACK_WANTED = "m.ack_wanted != 0"
_LOOKUP = COL["lookup_id"]
_TRANSACTIONAL = COL["transactional"]
_TX_SEQ_ID = COL["tx_sequence_id"]
_TX_SEQ_NO = COL["tx_sequence_number"]
_TX_PREV_NO = COL["tx_previous_sequence_number"]
_ARRIVED = COL["arrived_time"]
_PRIORITY = COL["priority"]
_SIZE = "m.size"


def order_key(priority: int, lookup_id: int) -> int:
    """Queue position: priority (higher first), then LookupIdentifier (MS-MQDMPR 3.1.1.2)."""
    return ((7 - priority) << 56) | lookup_id


@dataclass(frozen=True, slots=True)
class Send:
    """A message to insert in ``queue_id``, already as a row (:func:`message_to_row`).

    The op fills the LookupIdentifier (and ArrivedTime / sequence numbers) into the row
    at commit; build one with :meth:`of`.
    """

    queue_id: int
    row: list[Any]
    size: int
    #: Absolute expiry (s since 1970) or None; ``expire_class`` is the Nack class then.
    expire_at: int | None = None
    expire_class: int = 0

    @classmethod
    def of(cls, queue_id: int, message: Message, expire_at: int | None = None, expire_class: int = 0) -> Send:
        """A Send of ``message``."""
        return cls(queue_id, message_to_row(message), message.size, expire_at, expire_class)

    @property
    def message(self) -> Message:
        """The message as it is (or will be) stored."""
        return message_from_row(self.row)


@dataclass(frozen=True, slots=True)
class Remove:
    """Delete a message, or move it to ``target_queue_id`` (journal / dead-letter)."""

    queue_id: int
    lookup_id: int
    size: int
    target_queue_id: int | None = None
    #: New Message.Class for a move (e.g. NackReceiveTimeout into a dead-letter queue).
    new_class: int | None = None


@dataclass(frozen=True, slots=True)
class RemovedMessage:
    """A message removed from a queue with a reason class (MS-MQDMPR 3.1.7.2.1).

    Reported only for messages that asked for acknowledgments, journaling or a FinalAck
    — the seam for acknowledgment and FinalAck messages (MS-MQQB 3.1.7.2, 3.1.7.17).
    """

    queue_id: int
    message: Message
    reason: int


# ---- QM state and queues -------------------------------------------------------------


def init_qm_state(guid: uuid.UUID, now: int) -> Callable[[WriteContext], uuid.UUID]:
    """Create the QM state row if missing; return the persisted QM GUID."""

    def op(ctx: WriteContext) -> uuid.UUID:
        row = ctx.conn.execute("SELECT qm_guid FROM qm_state WHERE id = 1").fetchone()
        if row:
            return uuid.UUID(bytes=row[0])
        ctx.conn.execute(
            "INSERT INTO qm_state (id, qm_guid, sequential_id, message_id_ordinal, next_private_number,"
            " created_time) VALUES (1, ?, 0, 1, ?, ?)",
            (guid.bytes, FIRST_PRIVATE_NUMBER, now),
        )
        return guid

    return op


def load_qm_state(conn: sqlite3.Connection) -> tuple[uuid.UUID, int] | None:
    """(QM GUID, SequentialID) or None for a fresh store."""
    row = conn.execute("SELECT qm_guid, sequential_id FROM qm_state WHERE id = 1").fetchone()
    return (uuid.UUID(bytes=row[0]), int(row[1])) if row else None


def reserve_uniquifiers(count: int) -> Callable[[WriteContext], int]:
    """Reserve ``count`` Identifier uniquifiers (u32, wrapping, never 0); return the first.

    The QM hands them out from memory; a crash skips the rest of the block.
    """

    def op(ctx: WriteContext) -> int:
        first = int(ctx.conn.execute("SELECT message_id_ordinal FROM qm_state WHERE id = 1").fetchone()[0])
        nxt = first + count
        if nxt > 0xFFFFFFFF:  # MessageIdOrdinal may wrap (MS-MQQB 3.1.1.3); skip 0
            first, nxt = 1, 1 + count
        ctx.conn.execute("UPDATE qm_state SET message_id_ordinal = ? WHERE id = 1", (nxt,))
        return first

    return op


def list_queues(conn: sqlite3.Connection) -> list[QueueRecord]:
    """Every queue, system, journal and outgoing queues included."""
    return [queue_from_row(r) for r in conn.execute(_QUEUE_SELECT + " ORDER BY queue_id")]


def _queue(conn: sqlite3.Connection, queue_id: int) -> QueueRecord:
    row = conn.execute(_QUEUE_SELECT + " WHERE queue_id = ?", (queue_id,)).fetchone()
    if row is None:
        raise MQError(HResult.MQ_ERROR_QUEUE_DELETED, f"queue #{queue_id} was deleted")
    return queue_from_row(row)


def get_queue(conn: sqlite3.Connection, queue_id: int) -> QueueRecord:
    """The queue row (raises MQ_ERROR_QUEUE_DELETED if it is gone)."""
    return _queue(conn, queue_id)


def _insert_queue(
    conn: sqlite3.Connection,
    *,
    name: str,
    display_name: str,
    queue_type: QueueType,
    private_number: int,
    transactional: bool,
    label: str,
    quota_kb: int,
    journal_quota_kb: int,
    journal: bool,
    parent_queue_id: int | None,
    now: int,
    destination_format_name: str | None = None,
    allowed_senders: str = "",
) -> int:
    if conn.execute("SELECT 1 FROM queues WHERE name = ?", (name,)).fetchone():
        raise MQError(HResult.MQ_ERROR_QUEUE_EXISTS, f"queue {display_name} already exists")
    cur = conn.execute(
        "INSERT INTO queues (name, display_name, queue_type, private_number, transactional, label, quota_kb,"
        " journal_quota_kb, journal, parent_queue_id, base_priority, authenticate, privacy_level,"
        " created_time, modify_time, destination_format_name, allowed_senders)"
        " VALUES (?,?,?,?,?,?,?,?,?,?,0,0,1,?,?,?,?)",
        (
            name,
            display_name,
            int(queue_type),
            private_number,
            transactional,
            label,
            quota_kb,
            journal_quota_kb,
            journal,
            parent_queue_id,
            now,
            now,
            destination_format_name,
            allowed_senders,
        ),
    )
    assert cur.lastrowid is not None
    return cur.lastrowid


def create_queue(
    *,
    name: str,
    display_name: str,
    queue_type: QueueType,
    transactional: bool,
    label: str,
    quota_kb: int,
    journal_quota_kb: int,
    journal: bool,
    now: int,
    private_number: int | None = None,
    with_journal: bool = True,
    allowed_senders: str = "",
) -> Callable[[WriteContext], QueueRecord]:
    """Create a queue (and its journal queue ``<name>;journal``); MQ_ERROR_QUEUE_EXISTS if taken.

    ``private_number`` None allocates the next PrivateQueueNumber for a private queue;
    ``allowed_senders`` is the canonical sender allowlist (see ``QueueRecord``).
    """

    def op(ctx: WriteContext) -> QueueRecord:
        conn = ctx.conn
        number = private_number or 0
        if queue_type == QueueType.PRIVATE and private_number is None:
            number = int(conn.execute("SELECT next_private_number FROM qm_state").fetchone()[0])
            conn.execute("UPDATE qm_state SET next_private_number = ?", (number + 1,))
        qid = _insert_queue(
            conn,
            name=name,
            display_name=display_name,
            queue_type=queue_type,
            private_number=number,
            transactional=transactional,
            label=label,
            quota_kb=quota_kb,
            journal_quota_kb=journal_quota_kb,
            journal=journal,
            parent_queue_id=None,
            now=now,
            allowed_senders=allowed_senders,
        )
        if with_journal:
            jid = _insert_queue(
                conn,
                name=name + ";journal",
                display_name=display_name + ";journal",
                queue_type=QueueType.JOURNAL,
                private_number=number,
                transactional=False,
                label="",
                quota_kb=journal_quota_kb,
                journal_quota_kb=journal_quota_kb,
                journal=False,
                parent_queue_id=qid,
                now=now,
            )
            conn.execute("UPDATE queues SET journal_queue_id = ? WHERE queue_id = ?", (jid, qid))
        return _queue(conn, qid)

    return op


def ensure_outgoing_queue(format_name: str, now: int) -> Callable[[WriteContext], QueueRecord]:
    """The OutgoingQueue for a destination format name, created on first use
    (MS-MQDMPR 3.1.7.1.5 step 4) with OutgoingTxSequenceID = {Ordinal 1, TimeStamp now}
    and OutgoingTxSequenceNumber = 1 (MS-MQQB 3.1.3.2)."""
    key = format_name.casefold()  # names compare case-insensitively (casefold, as wire.format_name)

    def op(ctx: WriteContext) -> QueueRecord:
        conn = ctx.conn
        row = conn.execute(_QUEUE_SELECT + " WHERE destination_format_name = ?", (key,)).fetchone()
        if row:
            return queue_from_row(row)
        qid = _insert_queue(
            conn,
            name="outgoing:" + key,
            display_name=format_name,
            queue_type=QueueType.OUTGOING,
            private_number=0,
            transactional=False,
            label=format_name,
            quota_kb=INFINITE,
            journal_quota_kb=INFINITE,
            journal=False,
            parent_queue_id=None,
            now=now,
            destination_format_name=key,
        )
        first_id = _new_tx_sequence_id(conn, ((now & 0xFFFFFFFF) << 32) | 1)
        conn.execute(
            "INSERT INTO outgoing_sequences (queue_id, tx_sequence_id, next_tx_sequence_number)"
            " VALUES (?, ?, 1)",
            (qid, to_i64(first_id)),
        )
        return _queue(conn, qid)

    return op


_MUTABLE_QUEUE_PROPS = frozenset(
    {
        "label",
        "quota_kb",
        "journal_quota_kb",
        "journal",
        "base_priority",
        "authenticate",
        "privacy_level",
        "allowed_senders",
    }
)


def update_queue(queue_id: int, changes: dict[str, Any], now: int) -> Callable[[WriteContext], QueueRecord]:
    """Set queue properties (Label, Quota, JournalQuota, Journaling, …); ModifyTime = now."""
    bad = set(changes) - _MUTABLE_QUEUE_PROPS
    if bad:
        raise MQError(HResult.MQ_ERROR_PROPERTY_NOTALLOWED, f"cannot set queue properties {sorted(bad)}")

    def op(ctx: WriteContext) -> QueueRecord:
        _queue(ctx.conn, queue_id)
        names = sorted(changes)
        sets = ", ".join(f"{n} = ?" for n in names)
        ctx.conn.execute(
            f"UPDATE queues SET {sets}, modify_time = ? WHERE queue_id = ?",
            [changes[n] for n in names] + [now, queue_id],
        )
        if "journal_quota_kb" in changes:
            ctx.conn.execute(
                "UPDATE queues SET quota_kb = ? WHERE parent_queue_id = ?",
                (changes["journal_quota_kb"], queue_id),
            )
        return _queue(ctx.conn, queue_id)

    return op


def _ack_wanted(conn: sqlite3.Connection, where: str, params: Sequence[Any]) -> list[tuple[int, Message]]:
    rows = conn.execute(
        f"SELECT m.queue_id, {_MSG_SELECT} FROM messages m WHERE {where} AND {_ACK_WANTED}", params
    )
    return [(r[0], message_from_row(r[1:])) for r in rows]


def delete_queue(queue_id: int, reason: int) -> Callable[[WriteContext], list[RemovedMessage]]:
    """Delete a queue, its journal queue and their messages (NackQueueDeleted events)."""

    def op(ctx: WriteContext) -> list[RemovedMessage]:
        conn = ctx.conn
        q = _queue(conn, queue_id)
        events = [
            RemovedMessage(qid, m, reason) for qid, m in _ack_wanted(conn, "m.queue_id = ?", (queue_id,))
        ]
        ids = [queue_id] + ([q.journal_queue_id] if q.journal_queue_id is not None else [])
        conn.executemany("DELETE FROM messages WHERE queue_id = ?", [(i,) for i in ids])
        conn.execute("DELETE FROM send_identities WHERE queue_id = ?", (queue_id,))
        conn.executemany("DELETE FROM queues WHERE queue_id = ?", [(i,) for i in ids])
        conn.execute("DELETE FROM outgoing_sequences WHERE queue_id = ?", (queue_id,))
        return events

    return op


#: Up to this many locked messages are skipped in Python rather than in SQL.
_EXCLUDE_IN_PYTHON = 512


def _exclude_clause(exclude: Collection[int]) -> tuple[str, list[Any]]:
    if not exclude:
        return "", []
    return " AND m.lookup_id NOT IN (SELECT value FROM json_each(?))", [json.dumps(list(exclude))]


def _refresh_stats(conn: sqlite3.Connection, queue_id: int) -> None:
    conn.execute(
        f"UPDATE queues SET (msg_count, total_bytes) = (SELECT count(*), coalesce(sum({_SIZE}), 0)"
        " FROM messages m WHERE m.queue_id = ?) WHERE queue_id = ?",
        (queue_id, queue_id),
    )


def purge_queue(
    queue_id: int, exclude: Collection[int], reason: int
) -> Callable[[WriteContext], tuple[int, list[RemovedMessage]]]:
    """Delete every message of the queue except ``exclude`` (locked: PurgePending).

    MS-MQDMPR 3.1.7.1.7; returns (count, NackQueuePurged events).
    """

    def op(ctx: WriteContext) -> tuple[int, list[RemovedMessage]]:
        conn = ctx.conn
        _queue(conn, queue_id)
        clause, extra = _exclude_clause(exclude)
        events = [
            RemovedMessage(qid, m, reason)
            for qid, m in _ack_wanted(conn, "m.queue_id = ?" + clause, [queue_id, *extra])
        ]
        cur = conn.execute(f"DELETE FROM messages AS m WHERE m.queue_id = ?{clause}", [queue_id, *extra])
        _refresh_stats(conn, queue_id)
        return cur.rowcount, events

    return op


# ---- messages ------------------------------------------------------------------------


def _insert_messages(ctx: WriteContext, sends: Sequence[Send], arrived_time: int | None) -> list[int]:
    """Insert ``sends`` in order; assign LookupIdentifiers and, for transactional messages
    to an outgoing queue, TxSequenceNumber / PreviousTxSequenceNumber (MS-MQQB 3.1.7.1.3
    done at commit: numbers are stored in the same transaction as the message).
    Returns the LookupIdentifiers in order."""
    if not sends:
        return []
    conn = ctx.conn
    added: dict[int, list[int]] = {}
    for s in sends:
        a = added.get(s.queue_id)
        if a is None:
            a = added[s.queue_id] = [0, 0]
        a[0] += 1
        a[1] += s.size
    seqs: dict[int, list[int]] = {}
    for qid, (count, nbytes) in added.items():
        # One statement per queue: bump the counters, learn quota and type; a deleted
        # queue has no row (MQ_ERROR_QUEUE_DELETED). Over quota: the savepoint undoes it.
        got = conn.execute(
            "UPDATE queues SET msg_count = msg_count + ?, total_bytes = total_bytes + ? WHERE queue_id = ?"
            " RETURNING total_bytes, quota_kb, queue_type, display_name",
            (count, nbytes, qid),
        ).fetchone()
        if got is None:
            raise MQError(HResult.MQ_ERROR_QUEUE_DELETED, f"queue #{qid} was deleted")
        total, quota_kb, queue_type, display = got
        if quota_kb != INFINITE and total > quota_kb * 1024:
            raise MQError(
                HResult.MQ_ERROR_INSUFFICIENT_RESOURCES,
                f"queue {display}: quota of {quota_kb} KB exceeded (MS-MQDMPR 3.1.7.1.9 status 1)",
            )
        if queue_type == QueueType.OUTGOING:
            row = conn.execute(
                "SELECT tx_sequence_id, next_tx_sequence_number FROM outgoing_sequences WHERE queue_id = ?",
                (qid,),
            ).fetchone()
            seqs[qid] = [from_i64(row[0]), int(row[1])]
    first = ctx.alloc_lookup_ids(len(sends))
    rows = []
    for i, s in enumerate(sends):
        lid = first + i
        r = list(s.row)
        r[_LOOKUP] = lid
        seq = seqs.get(s.queue_id)
        if seq is not None and r[_TRANSACTIONAL]:
            r[_TX_SEQ_ID] = to_i64(seq[0])
            r[_TX_SEQ_NO] = seq[1]
            r[_TX_PREV_NO] = seq[1] - 1
            seq[1] += 1
        if arrived_time is not None:
            r[_ARRIVED] = arrived_time
        r += (s.queue_id, order_key(r[_PRIORITY], lid), s.expire_at, s.expire_class)
        rows.append(r)
    conn.executemany(_INSERT_MSG, rows)
    if seqs:
        conn.executemany(
            "UPDATE outgoing_sequences SET next_tx_sequence_number = ? WHERE queue_id = ?",
            [(nxt, qid) for qid, (_sid, nxt) in seqs.items()],
        )
    return list(range(first, first + len(sends)))


#: A run of at least this many consecutive LookupIdentifiers is deleted as one range.
_MIN_RUN = 4
#: Most bound parameters per ``IN (?, ...)`` statement (SQLite's limit is 32,766).
_IN_CHUNK = 2000


def _delete_lookup_ids(conn: sqlite3.Connection, lookup_ids: list[int]) -> None:
    """Delete the messages with these LookupIdentifiers, set-based.

    LookupIdentifiers are integers, so a run of consecutive ones ``a..b`` (a batch sent in
    one transaction and received in one) is exactly ``lookup_id BETWEEN a AND b``: one
    rowid range, whatever else the table holds. The rest go in ``IN (?, ...)``
    statements. Measured on SQLite 3.40 (500 rows, 256-byte bodies): one
    ``executemany`` DELETE per row 1.1–1.2 ms, ``IN (json_each(?))`` 0.7 ms,
    ``IN (?, ...)`` 0.55 ms, one ``BETWEEN`` 0.25–0.37 ms.
    """
    ids = sorted(lookup_ids)
    runs: list[tuple[int, int]] = []
    singles: list[int] = []
    start = prev = ids[0]
    for lid in [*ids[1:], -1]:  # -1 closes the last run
        if lid == prev + 1:
            prev = lid
            continue
        if prev - start + 1 >= _MIN_RUN:
            runs.append((start, prev))
        else:
            singles.extend(range(start, prev + 1))
        start = prev = lid
    if runs:
        conn.executemany("DELETE FROM messages WHERE lookup_id BETWEEN ? AND ?", runs)
    for i in range(0, len(singles), _IN_CHUNK):
        chunk = singles[i : i + _IN_CHUNK]
        conn.execute(f"DELETE FROM messages WHERE lookup_id IN ({','.join('?' * len(chunk))})", chunk)


def _apply_removes(ctx: WriteContext, removes: Sequence[Remove]) -> None:
    """Delete removed messages, or move them (journal, dead-letter) under a NEW
    LookupIdentifier: a message then only ever appears in a queue with an identifier
    above every one that queue showed before, which keeps the per-queue watermark of
    :func:`openmsmq.store.ranges.lookup_range` stable (nothing appears below it later)."""
    if not removes:
        return
    conn = ctx.conn
    deltas: dict[int, list[int]] = {}

    def bump(qid: int, count: int, nbytes: int) -> None:
        d = deltas.get(qid)
        if d is None:
            deltas[qid] = [count, nbytes]
        else:
            d[0] += count
            d[1] += nbytes

    deletes = []
    moves = []
    # Counters of the source queue, per run of removes from one queue (the usual case is
    # one run: a transaction received from one queue).
    run_qid, run_count, run_bytes = removes[0].queue_id, 0, 0
    for r in removes:
        if r.queue_id != run_qid:
            bump(run_qid, -run_count, -run_bytes)
            run_qid, run_count, run_bytes = r.queue_id, 0, 0
        run_count += 1
        run_bytes += r.size
        if r.target_queue_id is None:
            deletes.append(r.lookup_id)
        else:
            bump(r.target_queue_id, 1, r.size)
            moves.append((r.target_queue_id, r.new_class, r.lookup_id))
    bump(run_qid, -run_count, -run_bytes)
    if deletes:
        _delete_lookup_ids(conn, deletes)
    if moves:
        first = ctx.alloc_lookup_ids(len(moves))
        # order_key - lookup_id is the priority part ((7 - priority) << 56).
        conn.executemany(
            "UPDATE messages SET queue_id = ?1, message_class = coalesce(?2, message_class),"
            " expire_at = NULL, order_key = order_key - lookup_id + ?4, lookup_id = ?4 WHERE lookup_id = ?3",
            [(t, c, lid, first + i) for i, (t, c, lid) in enumerate(moves)],
        )
    conn.executemany(
        "UPDATE queues SET msg_count = msg_count + ?, total_bytes = total_bytes + ? WHERE queue_id = ?",
        [(c, b, qid) for qid, (c, b) in deltas.items()],
    )


class CommitWork:
    """One local transaction's work: insert ``sends``, delete or move ``removes``.

    Calling it returns the LookupIdentifiers given to ``sends``, in order. The writer
    merges consecutive CommitWork operations of a batch (:meth:`merge`) so that a group
    commit of N transactions still costs one INSERT, one DELETE and one counter UPDATE.
    """

    __slots__ = ("arrived_time", "removes", "sends")

    def __init__(
        self, sends: Sequence[Send], removes: Sequence[Remove], arrived_time: int | None = None
    ) -> None:
        self.sends = sends
        self.removes = removes
        self.arrived_time = arrived_time

    def __call__(self, ctx: WriteContext) -> list[int]:
        _apply_removes(ctx, self.removes)
        return _insert_messages(ctx, self.sends, self.arrived_time)

    @staticmethod
    def merge(works: Sequence[CommitWork]) -> Callable[[WriteContext], list[list[int]]]:
        """One operation doing all of ``works``; returns each one's result. If it fails the
        writer runs them one by one, so a failing transaction fails alone."""

        def op(ctx: WriteContext) -> list[list[int]]:
            _apply_removes(ctx, [r for w in works for r in w.removes])
            out: list[list[int]] = []
            sends = [s for w in works if w.arrived_time is None for s in w.sends]
            ids = iter(_insert_messages(ctx, sends, None))
            for w in works:
                if w.arrived_time is None:
                    out.append([next(ids) for _ in w.sends])
                else:
                    out.append(_insert_messages(ctx, w.sends, w.arrived_time))
            return out

        return op


def commit_work(
    sends: Sequence[Send], removes: Sequence[Remove], arrived_time: int | None = None
) -> CommitWork:
    """The write operation of one local transaction (see :class:`CommitWork`)."""
    return CommitWork(sends, removes, arrived_time)


def _upsert_incoming(conn: sqlite3.Connection, states: Iterable[IncomingSequenceState]) -> None:
    conn.executemany(
        "INSERT INTO incoming_sequences (sender_qm, destination, queue_id, tx_sequence_id,"
        " tx_sequence_number, reject_count, last_access_time, sender_address, direct_format_session)"
        " VALUES (?,?,?,?,?,?,?,?,?)"
        " ON CONFLICT (sender_qm, destination) DO UPDATE"
        " SET queue_id = excluded.queue_id, tx_sequence_id = excluded.tx_sequence_id,"
        " tx_sequence_number = excluded.tx_sequence_number, reject_count = excluded.reject_count,"
        " last_access_time = excluded.last_access_time,"
        " sender_address = CASE WHEN excluded.sender_address = '' THEN sender_address"
        " ELSE excluded.sender_address END,"
        " direct_format_session = CASE WHEN excluded.sender_address = '' THEN direct_format_session"
        " ELSE excluded.direct_format_session END",
        [
            (
                s.sender_qm.bytes,
                s.destination.lower(),
                s.queue_id,
                to_i64(s.tx_sequence_id),
                s.tx_sequence_number,
                s.reject_count,
                s.last_access_time,
                s.sender_address,
                int(s.direct_format_session),
            )
            for s in states
        ],
    )


def accept_incoming(
    sends: Sequence[Send], states: Sequence[IncomingSequenceState], arrived_time: int
) -> Callable[[WriteContext], list[int]]:
    """Store accepted incoming messages and advance their incoming sequence state atomically.

    DESIGN invariant 4 / seed 002: the receiver stores a message and its sequence state
    in one durable transaction, so a crash can neither lose an acknowledged message nor
    accept it twice. Returns the local LookupIdentifiers.
    """

    def op(ctx: WriteContext) -> list[int]:
        stored = _insert_messages(ctx, sends, arrived_time)
        _upsert_incoming(ctx.conn, states)
        return stored

    return op


def record_incoming(states: Sequence[IncomingSequenceState]) -> Callable[[WriteContext], None]:
    """Persist incoming sequence state alone (e.g. a rejected duplicate's RejectCount)."""

    def op(ctx: WriteContext) -> None:
        _upsert_incoming(ctx.conn, states)

    return op


def incoming_sequences(conn: sqlite3.Connection) -> list[IncomingSequenceState]:
    """Every persisted incoming sequence (to restore the protocol state at start)."""
    rows = conn.execute(
        "SELECT sender_qm, destination, queue_id, tx_sequence_id, tx_sequence_number, reject_count,"
        " last_access_time, sender_address, direct_format_session FROM incoming_sequences"
        " ORDER BY sender_qm, destination"
    )
    return [
        IncomingSequenceState(
            uuid.UUID(bytes=r[0]),
            r[1],
            r[2],
            from_i64(r[3]),
            r[4],
            r[5],
            r[6] if r[6] >= WALL_CLOCK_FLOOR else 0.0,
            r[7],
            bool(r[8]),
        )
        for r in rows
    ]


#: LastAccessTime values below this (2001-09-09) are not wall-clock times: rows written
#: before LastAccessTime was persisted as wall-clock seconds held the transfer driver's
#: monotonic clock. They read as 0.0 (unknown) and are overwritten on the next access.
WALL_CLOCK_FLOOR = 1_000_000_000.0


def outgoing_sequence(conn: sqlite3.Connection, queue_id: int) -> OutgoingSequenceState:
    """The persisted OutgoingTxSequenceID / next OutgoingTxSequenceNumber of an outgoing queue."""
    row = conn.execute(
        "SELECT tx_sequence_id, next_tx_sequence_number FROM outgoing_sequences WHERE queue_id = ?",
        (queue_id,),
    ).fetchone()
    if row is None:
        raise MQError(HResult.MQ_ERROR_QUEUE_NOT_FOUND, f"queue #{queue_id} is not an outgoing queue")
    return OutgoingSequenceState(queue_id, from_i64(row[0]), int(row[1]))


#: ``outgoing_sequences.queue_id`` of the row that remembers the highest TxSequenceID this QM
#: ever issued (queue ids start at 1, so no queue has it; it outlives deleted queues).
_TX_SEQUENCE_HIGH_WATER = 0


def _new_tx_sequence_id(conn: sqlite3.Connection, floor: int) -> int:
    """A TxSequenceID this QM never issued before: above every ID any outgoing queue has had,
    and at least ``floor`` (the ID MS-MQQB 3.1.5.6 would pick: TimeStamp | 1 for a new queue,
    Ordinal + 1 for a new sequence).

    An OrderAck names only the TxSequenceID (MS-MQQB 2.2.4.1), so two outgoing queues must
    never share one: a shared ID let an OrderAck for one queue's finished sequence release
    another queue's messages after a sender restart (found by the deterministic simulator,
    seeds 182 and 1541 — `tests/sim/`).
    """
    rows = conn.execute("SELECT tx_sequence_id FROM outgoing_sequences").fetchall()
    high = max((from_i64(r[0]) for r in rows), default=0)
    new_id = max(floor, high + 1)
    conn.execute(
        "INSERT INTO outgoing_sequences (queue_id, tx_sequence_id, next_tx_sequence_number) VALUES (?, ?, 0)"
        " ON CONFLICT(queue_id) DO UPDATE SET tx_sequence_id = excluded.tx_sequence_id",
        (_TX_SEQUENCE_HIGH_WATER, to_i64(new_id)),
    )
    return new_id


def release_outgoing(
    queue_id: int, up_to_number: int, awaiting_queue_id: int | None = None
) -> Callable[[WriteContext], tuple[list[int], OutgoingSequenceState]]:
    """An OrderAck covered ``up_to_number``: delete the current sequence's messages numbered
    1..up_to_number; when none of the sequence is left, start a new one (Ordinal + 1,
    number 1 — MS-MQQB 3.1.5.6 steps 6–7). Returns (deleted LookupIdentifiers, new state).

    With ``awaiting_queue_id``, a released message that asked for a FinalAck (JP, JN or
    TransactionHeader.Flags.FA) is moved there instead of deleted: the durable
    AwaitingFinalACKTable (MS-MQQB 3.1.5.6 step 6, 3.1.1.6.2), settled by
    :func:`settle_final_ack`."""

    def op(ctx: WriteContext) -> tuple[list[int], OutgoingSequenceState]:
        conn = ctx.conn
        state = outgoing_sequence(conn, queue_id)
        sid = to_i64(state.tx_sequence_id)
        where = "queue_id = ? AND tx_sequence_id = ? AND tx_sequence_number BETWEEN 1 AND ?"
        args = (queue_id, sid, up_to_number)
        moved: list[int] = []
        if awaiting_queue_id is not None:
            # Messages that asked for a FinalAck move to the awaiting queue (rare: only
            # rows with ack_wanted are looked at).
            keep = []
            for lid, size in conn.execute(
                f"SELECT lookup_id, size FROM messages WHERE {where} AND ack_wanted", args
            ).fetchall():
                got = _ack_wanted(conn, "m.lookup_id = ?", (lid,))
                m = got[0][1] if got else None
                if m is not None and (m.final_ack_required or m.positive_journaling or m.negative_journaling):
                    keep.append(Remove(queue_id, lid, size, awaiting_queue_id))
            _apply_removes(ctx, keep)
            moved = [r.lookup_id for r in keep]
        # The rest goes with one range DELETE (an OrderAck releases many messages at
        # once): no per-row statement, no Remove record per message.
        rows = conn.execute(f"DELETE FROM messages WHERE {where} RETURNING lookup_id, size", args).fetchall()
        if rows:
            conn.execute(
                "UPDATE queues SET msg_count = msg_count - ?, total_bytes = total_bytes - ?"
                " WHERE queue_id = ?",
                (len(rows), sum(r[1] for r in rows), queue_id),
            )
        left = conn.execute(
            "SELECT 1 FROM messages WHERE queue_id = ? AND tx_sequence_number != 0 LIMIT 1", (queue_id,)
        ).fetchone()
        if left is None and state.next_tx_sequence_number > 1:
            seq = state.tx_sequence_id
            ordinal = (seq & 0xFFFFFFFF) + 1
            next_id = (seq & ~0xFFFFFFFF) + ordinal if ordinal <= 0xFFFFFFFF else ((seq >> 32) + 1) << 32 | 1
            new_id = _new_tx_sequence_id(conn, next_id)
            conn.execute(
                "UPDATE outgoing_sequences SET tx_sequence_id = ?, next_tx_sequence_number = 1"
                " WHERE queue_id = ?",
                (to_i64(new_id), queue_id),
            )
            state = OutgoingSequenceState(queue_id, new_id, 1)
        return sorted(moved + [r[0] for r in rows]), state

    return op


@dataclass(frozen=True, slots=True)
class FinalAckOutcome:
    """What :func:`settle_final_ack` did with the message a FinalAck names."""

    #: The message as it waited (None: no waiting message matches: the FinalAck is dropped).
    message: Message | None
    #: Queue it moved to (journal / transactional dead-letter), or None when deleted.
    target_queue_id: int | None


def settle_final_ack(
    awaiting_queue_id: int,
    tx_sequence_id: int,
    tx_sequence_number: int,
    message_id: int,
    message_class: int,
    journal_queue_id: int,
    deadletter_queue_id: int,
) -> Callable[[WriteContext], FinalAckOutcome]:
    """A FinalAck arrived for a message waiting in ``awaiting_queue_id`` (MS-MQQB 3.1.5.7):
    matched on (TxSequenceID, TxSequenceNumber, MessageID). JP and class AckReceive
    (0x4000) ⇒ move it to ``journal_queue_id``; JN and any other class ⇒ move it to
    ``deadletter_queue_id`` with the FinalAck's class as its Class; otherwise delete it.
    No match ⇒ nothing changes (the caller logs and drops the FinalAck)."""

    def op(ctx: WriteContext) -> FinalAckOutcome:
        rows = ctx.conn.execute(
            f"SELECT {_MSG_SELECT} FROM messages m WHERE m.queue_id = ? AND m.tx_sequence_id = ?"
            " AND m.tx_sequence_number = ?",
            (awaiting_queue_id, to_i64(tx_sequence_id), tx_sequence_number),
        ).fetchall()
        for r in rows:
            m = message_from_row(r)
            if m.id_uniquifier & 0xFFFFFFFF != message_id & 0xFFFFFFFF:
                continue
            target: int | None = None
            new_class: int | None = None
            if message_class == 0x4000 and m.positive_journaling:
                target = journal_queue_id
            elif message_class != 0x4000 and m.negative_journaling:
                target, new_class = deadletter_queue_id, message_class
            _apply_removes(ctx, [Remove(awaiting_queue_id, m.lookup_id, m.size, target, new_class)])
            return FinalAckOutcome(m, target)
        return FinalAckOutcome(None, None)

    return op


def expire_messages(removes: Sequence[Remove]) -> Callable[[WriteContext], list[RemovedMessage]]:
    """Move expired messages to the dead-letter queues with their Nack class recorded."""

    def op(ctx: WriteContext) -> list[RemovedMessage]:
        conn = ctx.conn
        events = []
        for r in removes:
            got = _ack_wanted(conn, "m.lookup_id = ? AND m.queue_id = ?", (r.lookup_id, r.queue_id))
            events += [RemovedMessage(qid, m, r.new_class or 0) for qid, m in got]
        _apply_removes(ctx, removes)
        return events

    return op


# ---- reads ---------------------------------------------------------------------------


def fetch_available(
    conn: sqlite3.Connection,
    queue_id: int,
    *,
    now: int,
    limit: int = 1,
    exclude: Collection[int] = (),
    after_key: int | None = None,
    before_key: int | None = None,
    from_key: int | None = None,
    descending: bool = False,
    head_key: int | None = None,
) -> list[tuple[int, Message]]:
    """Unexpired messages of a queue in queue order, as (order_key, message).

    ``exclude`` holds the LookupIdentifiers locked in memory (never returned);
    ``after_key`` / ``from_key`` / ``before_key`` bound the position; ``descending``
    walks from the tail (SeekLast / SeekPrevious).

    ``head_key`` (a head read: no other bound) says that every message of its priority
    band (``head_key >> 56``) with an order_key below it is locked or expired: the read
    then skips that prefix with one index seek instead of stepping over the locked rows.
    Messages of higher priority bands (smaller keys) are still read from the start, so
    a message sent later with a higher priority is found.
    """
    if head_key is not None:
        return _fetch_head(conn, queue_id, now, limit, exclude, head_key)
    sql = f"SELECT m.order_key, {_MSG_SELECT} FROM messages m WHERE m.queue_id = ?"
    params: list[Any] = [queue_id]
    if after_key is not None:
        sql += " AND m.order_key > ?"
        params.append(after_key)
    if from_key is not None:
        sql += " AND m.order_key >= ?"
        params.append(from_key)
    if before_key is not None:
        sql += " AND m.order_key < ?"
        params.append(before_key)
    sql += " AND (m.expire_at IS NULL OR m.expire_at > ?)"
    params.append(now)
    order = f" ORDER BY m.order_key {'DESC' if descending else 'ASC'} LIMIT ?"
    if len(exclude) > _EXCLUDE_IN_PYTHON:
        clause, extra = _exclude_clause(exclude)
        params += [*extra, limit]
        return [(r[0], message_from_row(r[1:])) for r in conn.execute(sql + clause + order, params)]
    if not exclude:
        params.append(limit)
        return [(r[0], message_from_row(r[1:])) for r in conn.execute(sql + order, params)]
    # Few locked messages: at least ``limit`` unlocked rows are among the first
    # ``limit + len(exclude)``; step through them lazily, skipping the locked ones here
    # before decoding, and stop at ``limit``. Cheaper than a per-query NOT IN
    # (json_each(...)) temporary index.
    params.append(limit + len(exclude))
    out = []
    for r in conn.execute(sql + order, params):
        if r[1] not in exclude:
            out.append((r[0], message_from_row(r[1:])))
            if len(out) == limit:
                break
    return out


_HEAD_SQL = (
    f"SELECT m.order_key, {_MSG_SELECT} FROM messages m WHERE m.queue_id = ? AND m.order_key >= ?"
    " AND m.order_key < ? AND (m.expire_at IS NULL OR m.expire_at > ?) ORDER BY m.order_key LIMIT ?"
)


def _fetch_head(
    conn: sqlite3.Connection, queue_id: int, now: int, limit: int, exclude: Collection[int], head_key: int
) -> list[tuple[int, Message]]:
    """:func:`fetch_available` from the head, skipping the locked prefix below ``head_key``.

    Two index ranges: the higher-priority bands ``[0, band start)`` (empty in a
    transactional queue, whose messages all have priority 0), then ``[head_key, end)``.
    Locked rows met are stepped over here, before decoding. In the last band (priority 0)
    only locked LookupIdentifiers >= the hint's can lie at or after it, so the others do
    not count toward the over-read.
    """
    band_start = head_key >> 56 << 56
    out: list[tuple[int, Message]] = []
    tail_exclude: Collection[int] = exclude
    if band_start == 7 << 56:
        floor = head_key - band_start
        tail_exclude = [lid for lid in exclude if lid >= floor] if exclude else ()
    for lo, hi, skip in ((0, band_start, exclude), (head_key, 1 << 62, tail_exclude)):
        if hi <= lo:
            continue
        want = limit - len(out)
        rows = conn.execute(_HEAD_SQL, (queue_id, lo, hi, now, want + len(skip)))
        for r in rows:
            if r[1] not in exclude:
                out.append((r[0], message_from_row(r[1:])))
                if len(out) == limit:
                    return out
    return out


def fetch_by_lookup(conn: sqlite3.Connection, queue_id: int, lookup_id: int) -> tuple[int, Message] | None:
    """The message with this LookupIdentifier in this queue (expired or not), or None."""
    row = conn.execute(
        f"SELECT m.order_key, {_MSG_SELECT} FROM messages m WHERE m.lookup_id = ? AND m.queue_id = ?",
        (lookup_id, queue_id),
    ).fetchone()
    return (row[0], message_from_row(row[1:])) if row else None


def fetch_range(conn: sqlite3.Connection, queue_id: int, after_lookup_id: int, limit: int) -> list[Message]:
    """Messages with LookupIdentifier > ``after_lookup_id`` in LookupIdentifier order."""
    rows = conn.execute(
        f"SELECT {_MSG_SELECT} FROM messages m WHERE m.queue_id = ? AND m.lookup_id > ?"
        " ORDER BY m.lookup_id LIMIT ?",
        (queue_id, after_lookup_id, limit),
    )
    return [message_from_row(r) for r in rows]


def fetch_expired(conn: sqlite3.Connection, now: int, limit: int) -> list[tuple[int, int, int, bool, int]]:
    """Expired messages: (queue_id, lookup_id, size, transactional, expire_class)."""
    rows = conn.execute(
        f"SELECT m.queue_id, m.lookup_id, {_SIZE}, m.transactional, m.expire_class FROM messages m"
        " WHERE m.expire_at IS NOT NULL AND m.expire_at <= ? ORDER BY m.expire_at LIMIT ?",
        (now, limit),
    )
    return [(r[0], r[1], r[2], bool(r[3]), r[4]) for r in rows]
