"""LookupIdentifier ranges, idempotent send and queue statistics (SQL of the Spark and
metrics seams).

A queue's messages sit in the ``messages_order (queue_id, order_key)`` index, where
``order_key = ((7 - priority) << 56) | lookup_id``: eight *priority bands*, each in
LookupIdentifier order. A LookupIdentifier range of one queue is therefore at most eight
index ranges (one per band); a transactional queue (priority always 0) uses one. No
extra index is needed, so these reads cost the send path nothing.

Watermark (why ``lookup_range(...).last`` is stable): LookupIdentifiers are allocated
by the single writer thread inside the SQLite transaction that inserts the messages
(:meth:`openmsmq.store.writes.WriteContext.alloc_lookup_ids`), in increasing order, and
batches commit one after the other. A reader's snapshot therefore holds every message
of every committed batch and nothing of a later one, and a later batch only gets
higher identifiers. Messages moved into a queue (journal, dead-letter) get a new
identifier at the move (:func:`openmsmq.store.ops.apply_removes`). So once a snapshot
shows ``last`` for a queue, no message with a LookupIdentifier <= ``last`` can appear
in that queue later.
"""

from __future__ import annotations

import heapq
import json
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from operator import itemgetter
from typing import Any, NamedTuple

from openmsmq.store.ops import Remove, Send, apply_removes, insert_messages
from openmsmq.store.reads import take_up_to_bytes
from openmsmq.store.records import (
    COL,
    LOOKUP_MASK,
    MESSAGE_COLUMNS,
    PRIORITY0_BAND,
    MessageRecord,
    message_from_row,
)
from openmsmq.store.writes import WriteContext

__all__ = [
    "MAX_IDENTITY_CHARS",
    "LookupRange",
    "QueueStats",
    "fetch_ids_through",
    "fetch_outgoing_rows",
    "fetch_range_through",
    "fetch_rows_through",
    "id_span",
    "lookup_range",
    "lookup_ranges",
    "nth_lookup_id",
    "prune_identities",
    "queue_stats",
    "remove_spans",
    "send_idempotent",
]

#: Longest identity string an idempotent send accepts.
MAX_IDENTITY_CHARS = 255
_MAX_ID = LOOKUP_MASK  # LookupIdentifiers stay below 2**56 (the priority bits sit above)
_TX_FLAGS = COL["tx_flags"]
_SELECT = ", ".join(f"m.{c}" for c in MESSAGE_COLUMNS)
#: The stored size (body, label, extension) of a row of MESSAGE_COLUMNS.
_size_of = itemgetter(MESSAGE_COLUMNS.index("size"))


@dataclass(frozen=True, slots=True)
class LookupRange:
    """Messages of one queue in a LookupIdentifier range: first, last (the stable
    watermark when the range is open-ended) and how many."""

    first: int
    last: int
    count: int
    bytes: int | None = None
    """Total stored size of the range's messages, when asked for (``with_bytes``)."""


class QueueStats(NamedTuple):
    """Depth of one queue for metrics: name, messages, bytes, oldest ArrivedTime (or None)."""

    name: str
    message_count: int
    total_bytes: int
    oldest_arrived_time: int | None


def _bands(after: int, through: int | None, transactional: bool) -> list[tuple[int, int]]:
    """order_key ranges [lo, hi] covering after < lookup_id <= through in every band."""
    lo_id = max(after, 0) + 1
    hi_id = _MAX_ID if through is None else min(through, _MAX_ID)
    if lo_id > hi_id:
        return []
    bands = (7,) if transactional else range(8)  # priority 0 = band 7 << 56 (first 7 - 0)
    return [(b << 56 | lo_id, b << 56 | hi_id) for b in bands]


@contextmanager
def _snapshot(conn: sqlite3.Connection, bands: int) -> Iterator[None]:
    """Run the reads of ``bands`` priority bands in ONE snapshot: a read transaction when
    there are several and ``conn`` is not already in one.

    Bands read in separate snapshots could disagree: a batch committed between two of
    them may add a message to a band already read (missed) and a higher LookupIdentifier
    to a band read later (seen), so a reader that moves past the highest identifier it
    saw would skip the first one for good."""
    if bands < 2 or conn.in_transaction:
        yield
        return
    conn.execute("BEGIN")
    try:
        yield
    finally:
        conn.execute("COMMIT")


def lookup_range(
    conn: sqlite3.Connection,
    queue_id: int,
    transactional: bool,
    after: int = 0,
    through: int | None = None,
    with_bytes: bool = False,
) -> LookupRange | None:
    """(first, last, count) of the messages with after < LookupIdentifier <= through
    (None: no bound), locked and expired ones included; None when there is none. With
    ``with_bytes`` also their total stored size (a pass over the rows, not only the
    ``messages_order`` index: asked for by lag reports, not by every range query)."""
    first: int | None = None
    last = 0
    count = 0
    nbytes = 0
    bands = _bands(after, through, transactional)
    what = "min(order_key), max(order_key), count(*)" + (", total(size)" if with_bytes else "")
    with _snapshot(conn, len(bands)):
        for lo, hi in bands:
            row = conn.execute(
                f"SELECT {what} FROM messages WHERE queue_id = ? AND order_key BETWEEN ? AND ?",
                (queue_id, lo, hi),
            ).fetchone()
            if row[2]:
                lo_id, hi_id = row[0] & _MAX_ID, row[1] & _MAX_ID
                first = lo_id if first is None else min(first, lo_id)
                last = max(last, hi_id)
                count += row[2]
                if with_bytes:
                    nbytes += int(row[3])
    if first is None:
        return None
    return LookupRange(first, last, count, nbytes if with_bytes else None)


def lookup_ranges(
    conn: sqlite3.Connection, queues: Sequence[tuple[int, bool]], with_bytes: bool = False
) -> list[LookupRange | None]:
    """:func:`lookup_range` (whole queue) of each ``(queue_id, transactional)``, all read
    in ONE snapshot (one read transaction on ``conn``)."""
    conn.execute("BEGIN")
    try:
        return [
            lookup_range(conn, queue_id, transactional, with_bytes=with_bytes)
            for queue_id, transactional in queues
        ]
    finally:
        conn.execute("COMMIT")


def nth_lookup_id(
    conn: sqlite3.Connection,
    queue_id: int,
    transactional: bool,
    after: int,
    n: int,
    through: int | None = None,
) -> int | None:
    """LookupIdentifier of the ``n``-th message (n >= 1) with LookupIdentifier > ``after``
    (and <= ``through``), or None when fewer exist."""
    if n < 1:
        return None
    bands = _bands(after, through, transactional)
    if len(bands) == 1:
        lo, hi = bands[0]
        row = conn.execute(
            "SELECT order_key FROM messages WHERE queue_id = ? AND order_key BETWEEN ? AND ?"
            " ORDER BY order_key LIMIT 1 OFFSET ?",
            (queue_id, lo, hi, n - 1),
        ).fetchone()
        return None if row is None else int(row[0]) & _MAX_ID
    with _snapshot(conn, len(bands)):
        runs = [
            [
                r[0] & _MAX_ID
                for r in conn.execute(
                    "SELECT order_key FROM messages WHERE queue_id = ? AND order_key BETWEEN ? AND ?"
                    " ORDER BY order_key LIMIT ?",
                    (queue_id, lo, hi, n),
                )
            ]
            for lo, hi in bands
        ]
    for i, lid in enumerate(heapq.merge(*runs), 1):
        if i == n:
            return int(lid)
    return None


def fetch_range_through(
    conn: sqlite3.Connection,
    queue_id: int,
    transactional: bool,
    after: int,
    through: int | None,
    limit: int,
) -> list[MessageRecord]:
    """Up to ``limit`` messages with after < LookupIdentifier <= through, in
    LookupIdentifier order, locked and expired ones included (non-destructive)."""
    rows = fetch_rows_through(conn, queue_id, transactional, after, through, limit)
    return [message_from_row(r) for r in rows]


def fetch_rows_through(
    conn: sqlite3.Connection,
    queue_id: int,
    transactional: bool,
    after: int,
    through: int | None,
    limit: int,
    max_bytes: int | None = None,
) -> list[tuple[Any, ...]]:
    """:func:`fetch_range_through` as the stored rows (:data:`ROW_COLUMNS` order; decode
    with :func:`~openmsmq.store.records.message_from_row`), for readers that need no
    :class:`MessageRecord` per row. ``max_bytes``: no rows after the one whose size brings the
    total to it (one at least), stepped one at a time, so large messages are never read
    a whole ``limit`` at once."""
    bands = _bands(after, through, transactional)
    select = f"SELECT {_SELECT} FROM messages m WHERE m.queue_id = ? AND m.order_key BETWEEN ? AND ?"
    if len(bands) == 1:  # one band is already in LookupIdentifier order
        lo, hi = bands[0]
        rows = conn.execute(select + " ORDER BY m.order_key LIMIT ?", (queue_id, lo, hi, limit))
        return rows.fetchall() if max_bytes is None else take_up_to_bytes(rows, max_bytes, _size_of)[0]
    out: list[tuple[Any, ...]] = []
    with _snapshot(conn, len(bands)):
        for lo, hi in bands:
            rows = conn.execute(select + " ORDER BY m.order_key LIMIT ?", (queue_id, lo, hi, limit))
            out.extend(rows if max_bytes is None else take_up_to_bytes(rows, max_bytes, _size_of)[0])
    out.sort(key=itemgetter(0))  # lookup_id
    return out[:limit] if max_bytes is None else take_up_to_bytes(out[:limit], max_bytes, _size_of)[0]


#: Lowest order key of the priority-0 band (band 7): bands 0-6 (priorities 7..1) lie below it.
_BAND0 = PRIORITY0_BAND


def fetch_outgoing_rows(
    conn: sqlite3.Connection, queue_id: int, after: int, limit: int
) -> list[tuple[Any, ...]]:
    """:func:`fetch_rows_through` of a queue whose messages usually all have priority 0
    (an outgoing queue: every transactional message has priority 0, MS-MQDMPR; a
    non-transactional one may have any): up to ``limit`` rows with LookupIdentifier >
    ``after``, in LookupIdentifier order. Two statements instead of eight: the
    priority-0 band's range read, then one indexed probe whether any row of the other
    bands exists at all; only then are all eight bands read, in ONE read transaction.

    Why the probe may come after the read, each in its own snapshot: LookupIdentifiers
    are allocated increasing at commit, so a row committed after the read's snapshot
    has a higher identifier than every row that read saw; a row of another band that
    the read should have merged in was committed before it and is still there for the
    probe (or was deleted meanwhile: then nobody needs it)."""
    lo = max(after, 0) + 1
    if lo > _MAX_ID:
        return []
    rows = conn.execute(
        f"SELECT {_SELECT} FROM messages m WHERE m.queue_id = ? AND m.order_key BETWEEN ? AND ?"
        " ORDER BY m.order_key LIMIT ?",
        (queue_id, _BAND0 | lo, _BAND0 | _MAX_ID, limit),
    ).fetchall()
    other = conn.execute(
        "SELECT 1 FROM messages WHERE queue_id = ? AND order_key < ? LIMIT 1", (queue_id, _BAND0)
    ).fetchone()
    if other is None:
        return rows
    # Some message has a priority above 0: merge every band, from one snapshot
    # (fetch_rows_through reads them in one read transaction, see _snapshot).
    return fetch_rows_through(conn, queue_id, False, after, None, limit)


def fetch_ids_through(
    conn: sqlite3.Connection, queue_id: int, transactional: bool, through: int
) -> list[tuple[int, int, int]]:
    """(LookupIdentifier, size, acknowledgment wanted: 0 or 1) of every message <= ``through``
    (the rows as SQLite returns them: no Python per row, this runs for every message a
    Spark micro-batch commits)."""
    out: list[tuple[int, int, int]] = []
    for lo, hi in _bands(0, through, transactional):
        out.extend(
            conn.execute(
                "SELECT lookup_id, size, ack_wanted FROM messages"
                " WHERE queue_id = ? AND order_key BETWEEN ? AND ?",
                (queue_id, lo, hi),
            )
        )
    return out


def id_span(
    conn: sqlite3.Connection, queue_id: int, transactional: bool, through: int
) -> tuple[int, int, int] | None:
    """(lowest, highest LookupIdentifier, count) of the queue's messages <= ``through``,
    or None when there is none: per priority band a min, a max and a count over the
    queue index alone (no table row read; the fast path of
    ``QueueManager.remove_through``)."""
    got = lookup_range(conn, queue_id, transactional, 0, through)
    return None if got is None else (got.first, got.last, got.count)


_SPAN_WHERE = "queue_id = ? AND order_key BETWEEN ? AND ?"


def remove_spans(
    spans: Sequence[tuple[int, bool, int, int]],
    removes: Sequence[Remove],
    counts: dict[int, int] | None = None,
) -> Callable[[WriteContext], int | None]:
    """Delete every message of queue ``q`` with ``first`` <= LookupIdentifier <= ``last``
    for each ``(q, transactional, first, last)`` of ``spans`` (``transactional``: the
    queue holds priority 0 only, one band), and apply ``removes`` (as
    :func:`openmsmq.store.ops.commit_work` does), in one transaction; returns how many
    messages were removed.

    Set-based: per span and priority band one aggregate read (byte total, whether any
    message asked for acknowledgments) and one ``DELETE`` of the order_key range, then
    the queue's counters from the DELETEs' row counts; no Python object per message.
    When a message of a span asked for acknowledgments, journaling or a FinalAck
    (``ack_wanted``: its removal raises an AckReceive event, which needs the message)
    nothing is changed and None is returned: the caller removes per message. ``counts``
    receives how many messages each span's queue lost (set, not added to: the same if the
    writer runs the operation again).

    The DELETE goes by order_key range (cheaper than by rowid range with ``+queue_id``);
    the aggregate that checks the span costs a fraction of it.
    """

    def op(ctx: WriteContext) -> int | None:
        conn = ctx.conn
        work: list[tuple[int, list[tuple[int, int]], int]] = []
        for qid, one, first, last in spans:
            bands = _bands(first - 1, last, one)
            nbytes = 0
            for lo, hi in bands:
                size, ack = conn.execute(
                    f"SELECT total(size), max(ack_wanted) FROM messages WHERE {_SPAN_WHERE}", (qid, lo, hi)
                ).fetchone()
                if ack:
                    return None
                nbytes += int(size)
            work.append((qid, bands, nbytes))
        apply_removes(ctx, removes)
        removed = len(removes)
        for qid, bands, nbytes in work:
            count = sum(
                conn.execute(f"DELETE FROM messages WHERE {_SPAN_WHERE}", (qid, lo, hi)).rowcount
                for lo, hi in bands
            )
            if count:
                conn.execute(
                    "UPDATE queues SET msg_count = msg_count - ?, total_bytes = total_bytes - ?"
                    " WHERE queue_id = ?",
                    (count, nbytes, qid),
                )
            if counts is not None:
                counts[qid] = count
            removed += count
        return removed

    return op


def send_idempotent(
    queue_id: int,
    sends: Sequence[Send],
    identities: Sequence[str],
    now: int,
    retention: int,
    *,
    mark_transaction: bool = False,
) -> Callable[[WriteContext], list[int | None]]:
    """Insert the ``sends`` whose (queue, identity) was not accepted before, in one
    transaction; return each one's LookupIdentifier, or None where it was skipped.

    The check and the insert are ONE statement (``INSERT … ON CONFLICT DO NOTHING
    RETURNING``, the primary key on (queue_id, identity)) in the same SQLite transaction
    as the messages, so concurrent attempts cannot both succeed and a failed send leaves
    no identity behind. A repeated identity inside the batch keeps its first message.
    Identities older than ``retention`` seconds are pruned in bounded batches.
    ``mark_transaction`` sets FirstInTransaction / LastInTransaction on the first and
    last message actually inserted (MS-MQDMPR 3.1.7.1.8).
    """

    def op(ctx: WriteContext) -> list[int | None]:
        conn = ctx.conn
        new = {
            r[0]
            for r in conn.execute(
                "INSERT INTO send_identities (queue_id, identity, created_time)"
                " SELECT ?, value, ? FROM json_each(?) WHERE true ON CONFLICT DO NOTHING RETURNING identity",
                (queue_id, now, json.dumps(list(identities))),
            )
        }
        keep: list[Send] = []
        slots: list[bool] = []
        for s, ident in zip(sends, identities, strict=True):
            fresh = ident in new
            if fresh:
                new.discard(ident)  # a second copy in this batch is a duplicate
                keep.append(s)
            slots.append(fresh)
        if mark_transaction and keep:
            keep[0] = _with_tx_flag(keep[0], 1)
            keep[-1] = _with_tx_flag(keep[-1], 2)
        ids = iter(insert_messages(ctx, keep, None))
        _prune(conn, now - retention, 2 * len(sends) + 64)
        return [next(ids) if fresh else None for fresh in slots]

    return op


def _with_tx_flag(send: Send, bit: int) -> Send:
    row = list(send.row)
    row[_TX_FLAGS] |= bit
    return replace(send, row=row)


def _prune(conn: sqlite3.Connection, before: int, limit: int) -> int:
    cur = conn.execute(
        "DELETE FROM send_identities WHERE (queue_id, identity) IN (SELECT queue_id, identity"
        " FROM send_identities WHERE created_time < ? ORDER BY created_time LIMIT ?)",
        (before, limit),
    )
    return cur.rowcount


def prune_identities(before: int, limit: int = 10000) -> Callable[[WriteContext], int]:
    """Delete up to ``limit`` idempotent-send identities created before ``before``."""
    return lambda ctx: _prune(ctx.conn, before, limit)


def queue_stats(conn: sqlite3.Connection) -> list[QueueStats]:
    """Every queue's depth in ONE statement: counters kept by every commit, and the
    ArrivedTime of the first message of each priority band (eight index seeks a queue).

    That is the oldest message of the queue as long as arrival follows LookupIdentifier
    order, i.e. except in dead-letter and journal queues, where moved messages keep their
    original ArrivedTime (there it is the arrival of the message moved in first)."""
    bands = " UNION ALL ".join(
        f"SELECT (SELECT m.arrived_time FROM messages m WHERE m.queue_id = q.queue_id"
        f" AND m.order_key BETWEEN {b << 56} AND {(b << 56) | _MAX_ID} ORDER BY m.order_key LIMIT 1) AS t"
        for b in range(8)
    )
    rows = conn.execute(
        f"SELECT q.display_name, q.msg_count, q.total_bytes,"
        f" CASE WHEN q.msg_count > 0 THEN (SELECT min(t) FROM ({bands})) END"
        " FROM queues q ORDER BY q.queue_id"
    )
    return [QueueStats(r[0], r[1], r[2], r[3]) for r in rows]
