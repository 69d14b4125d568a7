"""Write operations on the QM state and on queues: create, update, delete, purge.

Built here, run by the writer (:meth:`openmsmq.store.db.Store.submit`); message writes
(sends, receives, transfer) live in :mod:`openmsmq.store.ops`.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Collection
from typing import Any

from openmsmq.errors import HResult, MQError
from openmsmq.store.ops import AckRows, RemovedMessage, write_ack_rows
from openmsmq.store.outgoing import new_tx_sequence_id
from openmsmq.store.reads import QUEUE_SELECT, ack_wanted, exclude_clause, get_queue
from openmsmq.store.records import INFINITE, QueueRecord, QueueType, queue_from_row, to_i64
from openmsmq.store.writes import WriteContext

__all__ = [
    "FIRST_PRIVATE_NUMBER",
    "OUTGOING_NAME_PREFIX",
    "create_queue",
    "delete_queue",
    "ensure_outgoing_queue",
    "init_qm_state",
    "purge_bound",
    "purge_candidates",
    "purge_queue",
    "queue_events",
    "reserve_uniquifiers",
    "update_queue",
]

#: First PrivateQueueNumber given to application queues; lower numbers are reserved for
#: system private queues (order_queue$ = 4, MS-MQQB 3.1.7.17).
FIRST_PRIVATE_NUMBER = 0x10


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
        return get_queue(conn, qid)

    return op


#: An OutgoingQueue's ``name`` is this and its destination format name, case-folded.
OUTGOING_NAME_PREFIX = "outgoing:"


def ensure_outgoing_queue(format_name: str, now: int) -> Callable[[WriteContext], QueueRecord]:
    """The OutgoingQueue for a destination format name, created on first use
    (MS-MQDMPR 3.1.7.1.5 step 4) with OutgoingTxSequenceID = {Ordinal 1, TimeStamp now}
    and OutgoingTxSequenceNumber = 1 (MS-MQQB 3.1.3.2)."""
    key = format_name.casefold()  # names compare case-insensitively (casefold, as wire.format_name)

    def op(ctx: WriteContext) -> QueueRecord:
        conn = ctx.conn
        row = conn.execute(QUEUE_SELECT + " WHERE destination_format_name = ?", (key,)).fetchone()
        if row:
            return queue_from_row(row)
        qid = _insert_queue(
            conn,
            name=OUTGOING_NAME_PREFIX + key,
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
        first_id = new_tx_sequence_id(conn, ((now & 0xFFFFFFFF) << 32) | 1)
        conn.execute(
            "INSERT INTO outgoing_sequences (queue_id, tx_sequence_id, next_tx_sequence_number)"
            " VALUES (?, ?, 1)",
            (qid, to_i64(first_id)),
        )
        return get_queue(conn, qid)

    return op


_MUTABLE_QUEUE_PROPS = frozenset(
    {
        "retry_policy",
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
        get_queue(ctx.conn, queue_id)
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
        return get_queue(ctx.conn, queue_id)

    return op


def delete_queue(
    queue_id: int, reason: int, acks: AckRows | None = None
) -> Callable[[WriteContext], list[RemovedMessage]]:
    """Delete a queue, its journal queue, its subqueues and their messages (NackQueueDeleted
    events); ``acks``: their acknowledgments, in the same transaction
    (:class:`~openmsmq.store.ops.AckRows`)."""

    def op(ctx: WriteContext) -> list[RemovedMessage]:
        conn = ctx.conn
        get_queue(conn, queue_id)
        ids = [queue_id, *_children(conn, queue_id)]
        events = [
            RemovedMessage(qid, m, reason) for qid, m in ack_wanted(conn, _IN_FAMILY, (queue_id, queue_id))
        ]
        write_ack_rows(ctx, events, acks)  # before the queue row goes (it may be a destination)
        conn.executemany("DELETE FROM messages WHERE queue_id = ?", [(i,) for i in ids])
        conn.execute("DELETE FROM retry_due WHERE queue_id = ?", (queue_id,))
        conn.execute("DELETE FROM send_identities WHERE queue_id = ?", (queue_id,))
        conn.executemany("DELETE FROM queues WHERE queue_id = ?", [(i,) for i in ids])
        conn.execute("DELETE FROM outgoing_sequences WHERE queue_id = ?", (queue_id,))
        return events

    return op


#: A queue and the queues whose parent it is (its journal, its subqueues).
_IN_FAMILY = "(m.queue_id = ? OR m.queue_id IN (SELECT queue_id FROM queues WHERE parent_queue_id = ?))"


def _children(conn: sqlite3.Connection, queue_id: int) -> list[int]:
    """QueueIdentifiers of a queue's journal and subqueues."""
    return [
        int(r[0]) for r in conn.execute("SELECT queue_id FROM queues WHERE parent_queue_id = ?", (queue_id,))
    ]


def queue_events(queue_id: int, reason: int) -> Callable[[sqlite3.Connection], list[RemovedMessage]]:
    """A read: the events of every message of the queue (and of its journal and subqueues)
    that asked for acknowledgments (what :func:`delete_queue` reports), to build them
    before it runs."""
    return lambda conn: [
        RemovedMessage(qid, m, reason) for qid, m in ack_wanted(conn, _IN_FAMILY, (queue_id, queue_id))
    ]


def purge_bound(queue_id: int) -> Callable[[sqlite3.Connection], int]:
    """A read: the queue's highest LookupIdentifier (0 when empty): a purge removes no
    message sent after it started."""

    def read(conn: sqlite3.Connection) -> int:
        row = conn.execute("SELECT max(lookup_id) FROM messages WHERE queue_id = ?", (queue_id,)).fetchone()
        return int(row[0] or 0)

    return read


def _purge_pass(
    conn: sqlite3.Connection, queue_id: int, exclude: Collection[int], bound: int, limit: int
) -> tuple[str, list[Any], bool]:
    """(WHERE clause, its parameters, whether messages may be left after it) of one purge
    pass: the first ``limit`` messages in queue order up to LookupIdentifier ``bound``,
    outside ``exclude``, found by a walk of the queue's index (no sort)."""
    clause, extra = exclude_clause(exclude)
    where = "m.queue_id = ? AND m.lookup_id <= ?" + clause
    params: list[Any] = [queue_id, bound, *extra]
    last = conn.execute(
        f"SELECT m.order_key FROM messages m WHERE {where} ORDER BY m.order_key LIMIT 1 OFFSET ?",
        [*params, limit - 1],
    ).fetchone()
    if last is None:  # fewer than limit: the whole rest
        return where, params, False
    return where + " AND m.order_key <= ?", [*params, last[0]], True


def purge_candidates(
    queue_id: int, exclude: Collection[int], reason: int, bound: int, limit: int
) -> Callable[[sqlite3.Connection], list[RemovedMessage]]:
    """A read: the NackQueuePurged events of the messages the :func:`purge_queue` pass
    with the same arguments removes, so that the acknowledgments can be built before it
    runs."""

    def read(conn: sqlite3.Connection) -> list[RemovedMessage]:
        where, params, _more = _purge_pass(conn, queue_id, exclude, bound, limit)
        return [RemovedMessage(qid, m, reason) for qid, m in ack_wanted(conn, where, params)]

    return read


def purge_queue(
    queue_id: int,
    exclude: Collection[int],
    reason: int,
    bound: int,
    limit: int,
    acks: AckRows | None = None,
) -> Callable[[WriteContext], tuple[int, list[RemovedMessage], bool]]:
    """One pass of a purge: delete the first ``limit`` messages of the queue (queue order)
    up to LookupIdentifier ``bound``, except ``exclude`` (locked: PurgePending); ``acks``:
    their acknowledgments, in the same transaction (:class:`~openmsmq.store.ops.AckRows`).
    The queue's counters move by what the pass deleted (recounting the queue each pass
    would make a purge quadratic).

    MS-MQDMPR 3.1.7.1.7; returns (count, NackQueuePurged events, whether messages may be
    left for another pass).
    """

    def op(ctx: WriteContext) -> tuple[int, list[RemovedMessage], bool]:
        conn = ctx.conn
        get_queue(conn, queue_id)
        where, params, more = _purge_pass(conn, queue_id, exclude, bound, limit)
        events = [RemovedMessage(qid, m, reason) for qid, m in ack_wanted(conn, where, params)]
        size = conn.execute(
            f"SELECT coalesce(sum(m.size), 0) FROM messages m WHERE {where}", params
        ).fetchone()[0]
        cur = conn.execute(f"DELETE FROM messages AS m WHERE {where}", params)
        conn.execute(
            "UPDATE queues SET msg_count = msg_count - ?, total_bytes = total_bytes - ? WHERE queue_id = ?",
            (cur.rowcount, size, queue_id),
        )
        write_ack_rows(ctx, events, acks)
        return cur.rowcount, events, more

    return op
