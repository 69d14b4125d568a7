"""Read queries of the store: queue rows, sequence state and messages in queue or
LookupIdentifier order.

Each function takes a connection (a reader's from :meth:`openmsmq.store.db.Store.read`,
or the writer's inside an operation) and runs parameterised ``SELECT`` statements only;
the write operations live in :mod:`openmsmq.store.ops`.
"""

from __future__ import annotations

import json
import sqlite3
import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

from openmsmq.errors import HResult, MQError
from openmsmq.store.records import (
    KEYED_COLUMNS,
    KEYED_SELECT,
    LOOKUP_MASK,
    MESSAGE_COLUMNS,
    QUEUE_COLUMNS,
    IncomingSequenceState,
    MessageRecord,
    OutgoingSequenceState,
    QueueRecord,
    from_i64,
    keyed_messages,
    message_from_row,
    queue_from_row,
)

__all__ = [
    "HEAD_SELECT",
    "HEAD_SIZE",
    "MSG_SELECT",
    "QUEUE_SELECT",
    "WALL_CLOCK_FLOOR",
    "ack_wanted",
    "exclude_clause",
    "fetch_available",
    "fetch_by_lookup",
    "fetch_expired",
    "fetch_for_dead_letter",
    "fetch_for_purge",
    "fetch_heads",
    "get_queue",
    "head_record",
    "incoming_sequences",
    "list_queues",
    "load_qm_state",
    "max_lookup_id",
    "outgoing_sequence",
    "take_up_to_bytes",
]

#: The message columns of a ``SELECT ... FROM messages m`` (:data:`MESSAGE_COLUMNS` order).
MSG_SELECT = ", ".join(f"m.{c}" for c in MESSAGE_COLUMNS)
#: Every message column but the body (the last one): what a release, a FinalAck settlement
#: or a deletion decides on (the flags JP, JN, FA; the MessageID; the destination a
#: FinalAck's origin is checked against) and what the message counted (``size``). They
#: move or delete the row by its LookupIdentifier and never send the message anywhere, so
#: they do not read the body's pages (a large body lives in overflow pages of its own).
HEAD_SELECT = ", ".join(f"m.{c}" for c in MESSAGE_COLUMNS[:-1])
assert MESSAGE_COLUMNS[-1] == "body"
#: The stored size in a row read with :data:`HEAD_SELECT`.
HEAD_SIZE = MESSAGE_COLUMNS.index("size")


def head_record(row: tuple[Any, ...]) -> MessageRecord:
    """The :class:`MessageRecord` of a row read with :data:`HEAD_SELECT`, its body empty
    (its stored size is the row's ``size``, not ``MessageRecord.size``)."""
    return message_from_row((*row, b""))


#: ``SELECT`` of every :data:`QUEUE_COLUMNS` column of ``queues``.
QUEUE_SELECT = "SELECT " + ", ".join(QUEUE_COLUMNS) + " FROM queues"
_ACK_WANTED = "m.ack_wanted != 0"
_SIZE = "m.size"


# ---- QM state, queues, sequences ---------------------------------------------------


def load_qm_state(conn: sqlite3.Connection) -> tuple[uuid.UUID, int] | None:
    """(QM GUID, SequentialID) or None for a fresh store."""
    row = conn.execute("SELECT qm_guid, sequential_id FROM qm_state WHERE id = 1").fetchone()
    return (uuid.UUID(bytes=row[0]), int(row[1])) if row else None


def list_queues(conn: sqlite3.Connection) -> list[QueueRecord]:
    """Every queue, system, journal and outgoing queues included."""
    return [queue_from_row(r) for r in conn.execute(QUEUE_SELECT + " ORDER BY queue_id")]


def get_queue(conn: sqlite3.Connection, queue_id: int) -> QueueRecord:
    """The queue row (raises MQ_ERROR_QUEUE_DELETED if it is gone)."""
    row = conn.execute(QUEUE_SELECT + " WHERE queue_id = ?", (queue_id,)).fetchone()
    if row is None:
        raise MQError(HResult.MQ_ERROR_QUEUE_DELETED, f"queue #{queue_id} was deleted")
    return queue_from_row(row)


def outgoing_sequence(conn: sqlite3.Connection, queue_id: int) -> OutgoingSequenceState:
    """The persisted OutgoingTxSequenceID / next OutgoingTxSequenceNumber of an outgoing queue."""
    row = conn.execute(
        "SELECT tx_sequence_id, next_tx_sequence_number FROM outgoing_sequences WHERE queue_id = ?",
        (queue_id,),
    ).fetchone()
    if row is None:
        raise MQError(HResult.MQ_ERROR_QUEUE_NOT_FOUND, f"queue #{queue_id} is not an outgoing queue")
    return OutgoingSequenceState(queue_id, from_i64(row[0]), int(row[1]))


#: LastAccessTime values below this (2001-09-09) are not wall-clock times: rows written
#: before LastAccessTime was persisted as wall-clock seconds held the transfer driver's
#: monotonic clock. They read as 0.0 (unknown) and are overwritten on the next access.
WALL_CLOCK_FLOOR = 1_000_000_000.0


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


# ---- messages ------------------------------------------------------------------------


def ack_wanted(
    conn: sqlite3.Connection, where: str, params: Sequence[Any]
) -> list[tuple[int, MessageRecord]]:
    rows = conn.execute(
        f"SELECT m.queue_id, {MSG_SELECT} FROM messages m WHERE {where} AND {_ACK_WANTED}", params
    )
    return [(r[0], message_from_row(r[1:])) for r in rows]


#: Up to this many locked messages are skipped in Python rather than in SQL.
_EXCLUDE_IN_PYTHON = 512
#: The body's column in a row of KEYED_COLUMNS (fetch_available's max_bytes).
_BODY = KEYED_COLUMNS.index("body")


def exclude_clause(exclude: Collection[int]) -> tuple[str, list[Any]]:
    if not exclude:
        return "", []
    return " AND m.lookup_id NOT IN (SELECT value FROM json_each(?))", [json.dumps(list(exclude))]


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
    one_band: bool = False,
    max_bytes: int | None = None,
) -> list[tuple[int, MessageRecord]]:
    """Unexpired messages of a queue in queue order, as (order_key, message).

    ``max_bytes``: stop after the message whose body brings the total to it (one at
    least): rows are stepped one at a time then, so a batch of large messages is never
    read whole (a remote reply must fit one gRPC message).

    ``exclude`` holds the LookupIdentifiers locked in memory (never returned);
    ``after_key`` / ``from_key`` / ``before_key`` bound the position; ``descending``
    walks from the tail (SeekLast / SeekPrevious).

    ``head_key`` (a head read: no other bound) says that every message of its priority
    band (``head_key >> 56``) with an order_key below it is locked or expired: the read
    then skips that prefix with one index seek instead of stepping over the locked rows.
    Messages of higher priority bands (smaller keys) are still read from the start, so
    a message sent later with a higher priority is found — unless ``one_band`` says the
    queue holds priority 0 only (a transactional private queue), which saves a statement.
    """
    if head_key is not None:
        return _fetch_head(conn, queue_id, now, limit, exclude, head_key, one_band, max_bytes)
    sql = f"SELECT {KEYED_SELECT} FROM messages m WHERE m.queue_id = ?"
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
    if max_bytes is not None:
        params.append(limit + len(exclude))
        cursor = conn.execute(sql + order, params)
        return keyed_messages(take_up_to_bytes(cursor, max_bytes, _body_size, limit, exclude)[0])
    if len(exclude) > _EXCLUDE_IN_PYTHON:
        clause, extra = exclude_clause(exclude)
        params += [*extra, limit]
        return keyed_messages(conn.execute(sql + clause + order, params))
    if not exclude:
        params.append(limit)
        return keyed_messages(conn.execute(sql + order, params))
    # Few locked messages: at least ``limit`` unlocked rows are among the first
    # ``limit + len(exclude)``; step through them lazily, skipping the locked ones here
    # before decoding, and stop at ``limit``. Cheaper than a per-query NOT IN
    # (json_each(...)) temporary index.
    params.append(limit + len(exclude))
    kept = []
    mask = LOOKUP_MASK
    for r in conn.execute(sql + order, params):
        if (r[0] & mask) not in exclude:
            kept.append(r)
            if len(kept) == limit:
                break
    return keyed_messages(kept)


_HEAD_SQL = (
    f"SELECT {KEYED_SELECT} FROM messages m WHERE m.queue_id = ? AND m.order_key >= ?"
    " AND m.order_key < ? AND (m.expire_at IS NULL OR m.expire_at > ?) ORDER BY m.order_key LIMIT ?"
)


def _fetch_head(
    conn: sqlite3.Connection,
    queue_id: int,
    now: int,
    limit: int,
    exclude: Collection[int],
    head_key: int,
    one_band: bool = False,
    max_bytes: int | None = None,
) -> list[tuple[int, MessageRecord]]:
    """:func:`fetch_available` from the head, skipping the locked prefix below ``head_key``.

    Two index ranges: the higher-priority bands ``[0, band start)`` (empty in a
    transactional queue, whose messages all have priority 0), then ``[head_key, end)``.
    Locked rows met are stepped over here, before decoding. In the last band (priority 0)
    only locked LookupIdentifiers >= the hint's can lie at or after it, so the others do
    not count toward the over-read.
    """
    band_start = head_key >> 56 << 56
    kept: list[Any] = []
    tail_exclude: Collection[int] = exclude
    if band_start == 7 << 56:
        floor = head_key - band_start
        tail_exclude = [lid for lid in exclude if lid >= floor] if exclude else ()
    higher = 0 if one_band else band_start  # one band: no higher-priority range to read
    used = 0  # body bytes kept (max_bytes)
    for lo, hi, skip in ((0, higher, exclude), (head_key, 1 << 62, tail_exclude)):
        if hi <= lo:
            continue
        want = limit - len(kept)
        rows = conn.execute(_HEAD_SQL, (queue_id, lo, hi, now, want + len(skip)))
        if max_bytes is not None:
            got, used = take_up_to_bytes(rows, max_bytes, _body_size, want, exclude, used)
            kept += got
            if len(kept) == limit or used >= max_bytes:
                break
            continue
        if not exclude:  # nothing locked: every row of the LIMIT is wanted
            kept += rows.fetchall()
            if len(kept) == limit:
                break
            continue
        mask = LOOKUP_MASK
        for r in rows:
            if (r[0] & mask) not in exclude:
                kept.append(r)
                if len(kept) == limit:
                    return keyed_messages(kept)
    # Decoded once, after the reads: one call for the batch (records.keyed_messages).
    return keyed_messages(kept)


def take_up_to_bytes(
    rows: Iterable[tuple[Any, ...]],
    max_bytes: int,
    size_of: Callable[[tuple[Any, ...]], int],
    limit: int | None = None,
    exclude: Collection[int] = (),
    used: int = 0,
) -> tuple[list[tuple[Any, ...]], int]:
    """Rows of ``rows``, stepped one at a time, up to the one whose ``size_of`` brings
    ``used`` to ``max_bytes`` (one row at least, whatever its size) and at most ``limit``;
    rows whose LookupIdentifier (the first column, under the priority bits) is in
    ``exclude`` are skipped. Returns them and the new ``used``. The byte bound of batched
    reads: the rows beyond it are never fetched."""
    kept: list[tuple[Any, ...]] = []
    mask = LOOKUP_MASK
    for r in rows:
        if exclude and (r[0] & mask) in exclude:
            continue
        kept.append(r)
        used += size_of(r)
        if len(kept) == limit or used >= max_bytes:
            break
    return kept, used


def _body_size(row: tuple[Any, ...]) -> int:
    return len(row[_BODY])


def fetch_by_lookup(
    conn: sqlite3.Connection, queue_id: int, lookup_id: int
) -> tuple[int, MessageRecord] | None:
    """The message with this LookupIdentifier in this queue (expired or not), or None."""
    row = conn.execute(
        f"SELECT m.order_key, {MSG_SELECT} FROM messages m WHERE m.lookup_id = ? AND m.queue_id = ?",
        (lookup_id, queue_id),
    ).fetchone()
    return (row[0], message_from_row(row[1:])) if row else None


def max_lookup_id(conn: sqlite3.Connection) -> int:
    """The highest LookupIdentifier stored (0 when no message is): one seek to the end
    of the rowid tree."""
    return int(conn.execute("SELECT max(lookup_id) FROM messages").fetchone()[0] or 0)


def fetch_expired(conn: sqlite3.Connection, now: int, limit: int) -> list[tuple[int, int, int, bool, int]]:
    """Expired messages: (queue_id, lookup_id, size, transactional, expire_class)."""
    rows = conn.execute(
        f"SELECT m.queue_id, m.lookup_id, {_SIZE}, m.transactional, m.expire_class FROM messages m"
        " WHERE m.expire_at IS NOT NULL AND m.expire_at <= ? ORDER BY m.expire_at LIMIT ?",
        (now, limit),
    )
    return [(r[0], r[1], r[2], bool(r[3]), r[4]) for r in rows]


def fetch_for_purge(
    conn: sqlite3.Connection, queue_id: int, message_class: int, limit: int, exclude: Collection[int] = ()
) -> list[tuple[int, int, int, bool, int, bool]]:
    """The first ``limit`` messages of ``queue_id`` outside ``exclude``, in queue order (the
    queue's index: no sort of the whole queue per pass), in the shape of
    :func:`fetch_expired` with ``message_class`` as the class to record, plus whether
    each asked for negative source journaling (``dead_letter``)."""
    clause, extra = exclude_clause(exclude)
    rows = conn.execute(
        f"SELECT m.lookup_id, {_SIZE}, m.transactional, m.ack_wanted FROM messages m"
        f" WHERE m.queue_id = ?{clause} ORDER BY m.order_key LIMIT ?",
        [queue_id, *extra, limit],
    ).fetchall()
    flagged = [r[0] for r in rows if r[3]]
    journaled: set[int] = set()
    for i in range(0, len(flagged), 500):
        chunk = flagged[i : i + 500]
        marks = ",".join("?" * len(chunk))
        got = ack_wanted(conn, f"m.lookup_id IN ({marks}) AND +m.queue_id = ?", [*chunk, queue_id])
        journaled.update(m.lookup_id for _, m in got if m.negative_journaling)
    return [(queue_id, r[0], r[1], bool(r[2]), message_class, r[0] in journaled) for r in rows]


def fetch_heads(
    conn: sqlite3.Connection, queue_id: int, lookup_ids: list[int]
) -> list[tuple[MessageRecord, int]]:
    """The messages ``lookup_ids`` of ``queue_id`` still stored (any order), each without
    its body (:data:`HEAD_SELECT`), with its stored size."""
    out: list[tuple[MessageRecord, int]] = []
    for i in range(0, len(lookup_ids), 500):
        chunk = lookup_ids[i : i + 500]
        marks = ",".join("?" * len(chunk))
        rows = conn.execute(
            f"SELECT {HEAD_SELECT} FROM messages m WHERE m.lookup_id IN ({marks}) AND +m.queue_id = ?",
            [*chunk, queue_id],
        )
        out += [(head_record(r), r[HEAD_SIZE]) for r in rows]
    return out


def fetch_for_dead_letter(
    conn: sqlite3.Connection, queue_id: int, lookup_ids: list[int], message_class: int
) -> list[tuple[int, int, int, bool, int]]:
    """The messages ``lookup_ids`` of ``queue_id`` still stored, in the shape of
    :func:`fetch_expired` with ``message_class`` as the class to record."""
    out: list[tuple[int, int, int, bool, int]] = []
    for i in range(0, len(lookup_ids), 500):
        chunk = lookup_ids[i : i + 500]
        marks = ",".join("?" * len(chunk))
        # By LookupIdentifier (the rowid), the queue checked per row: "m.queue_id = ?"
        # would let SQLite walk the whole queue's index for the IN list (+ disables it).
        rows = conn.execute(
            f"SELECT m.queue_id, m.lookup_id, {_SIZE}, m.transactional FROM messages m"
            f" WHERE m.lookup_id IN ({marks}) AND +m.queue_id = ?",
            [*chunk, queue_id],
        )
        out += [(r[0], r[1], r[2], bool(r[3]), message_class) for r in rows]
    return out
