"""The store's write operations on messages (run by the writer); those of outgoing queues'
transactional sequences live in :mod:`openmsmq.store.outgoing`, the reads in
:mod:`openmsmq.store.reads`.

Write operations are built by the functions here and handed to
:meth:`openmsmq.store.db.Store.submit`; each returns a callable ``op(ctx)``. Rows go
in with ``executemany`` (one prepared statement for many rows), never one round trip
per message.
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from operator import attrgetter, itemgetter
from typing import Any

from openmsmq.errors import HResult, MQError
from openmsmq.store.inserts import insert_numbered, insert_plain, insert_rows
from openmsmq.store.reads import ack_wanted
from openmsmq.store.records import (
    COL,
    INFINITE,
    IncomingSequenceState,
    MessageRecord,
    QueueType,
    from_i64,
    to_i64,
)
from openmsmq.store.sends import Send
from openmsmq.store.writes import WriteContext

__all__ = [
    "AckRows",
    "CommitWork",
    "DeleteMany",
    "Remove",
    "RemovedMessage",
    "Send",
    "accept_incoming",
    "commit_work",
    "expire_messages",
    "expiry_events",
    "order_key",
    "record_incoming",
    "record_reject_counts",
    "update_incoming",
    "write_ack_rows",
]

_ROW = attrgetter("row")
_EXPIRY = attrgetter("expire_at", "expire_class")
_QUEUE_ID = attrgetter("queue_id")
_SIZE = attrgetter("size")
_ROW_SIZE = itemgetter(COL["size"])
_TRANSACTIONAL = COL["transactional"]
_ROW_TRANSACTIONAL = itemgetter(_TRANSACTIONAL)
_TX_SEQ_ID = COL["tx_sequence_id"]
_TX_SEQ_NO = COL["tx_sequence_number"]
_TX_PREV_NO = COL["tx_previous_sequence_number"]
_ARRIVED = COL["arrived_time"]


def order_key(priority: int, lookup_id: int) -> int:
    """Queue position: priority (higher first), then LookupIdentifier (MS-MQDMPR 3.1.1.2)."""
    return ((7 - priority) << 56) | lookup_id


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
class DeleteMany:
    """Delete messages of one queue (a transaction's receives that are not journaled):
    their LookupIdentifiers and their total size, one record for the batch where
    :class:`Remove` takes one per message."""

    queue_id: int
    lookup_ids: list[int]
    #: Sum of the messages' sizes (Message.size), taken off the queue's TotalBytes.
    size: int


@dataclass(frozen=True, slots=True)
class RemovedMessage:
    """A message removed from a queue with a reason class (MS-MQDMPR 3.1.7.2.1).

    Reported only for messages that asked for acknowledgments, journaling or a FinalAck
    — the seam for acknowledgment and FinalAck messages (MS-MQQB 3.1.7.2, 3.1.7.17).
    """

    queue_id: int
    message: MessageRecord
    reason: int


class AckRows:
    """Acknowledgment rows built for a removal before it runs (MS-MQQB 3.1.7.2), to be
    inserted in the removal's own transaction.

    ``expected`` holds the LookupIdentifiers of the messages they acknowledge. The removal
    inserts ``sends`` only if the messages it removes that asked for acknowledgments are
    exactly those (:func:`write_ack_rows`) and sets ``written``; otherwise (something
    changed in between) it inserts nothing and the caller sends them the two-commit way.
    """

    __slots__ = ("expected", "sends", "written")

    def __init__(self, expected: Iterable[int], sends: Sequence[Send]) -> None:
        self.expected = frozenset(expected)
        self.sends = sends
        self.written = False


def write_ack_rows(ctx: WriteContext, events: Sequence[RemovedMessage], acks: AckRows | None) -> None:
    """Insert ``acks.sends`` in the current transaction when ``events`` are the removals
    they were built for (see :class:`AckRows`)."""
    if acks is None or {ev.message.lookup_id for ev in events} != acks.expected:
        return
    insert_messages(ctx, acks.sends, None, qm_quota=False)
    acks.written = True


# ---- messages ------------------------------------------------------------------------


def insert_messages(
    ctx: WriteContext, sends: Sequence[Send], arrived_time: int | None, *, qm_quota: bool = True
) -> list[int]:
    """Insert ``sends`` in order; assign LookupIdentifiers and, for transactional messages
    to an outgoing queue, TxSequenceNumber / PreviousTxSequenceNumber (MS-MQQB 3.1.7.1.3
    done at commit: numbers are stored in the same transaction as the message).
    ``qm_quota``: check the QueueManagerQuota (not for the acknowledgments a removal
    writes). Returns the LookupIdentifiers in order."""
    if not sends:
        return []
    conn = ctx.conn
    if len(sends) == 1:
        s = sends[0]
        added = {s.queue_id: (1, s.size)}
    elif len(qids := set(map(_QUEUE_ID, sends))) == 1:  # counters without a step per message
        added = {qids.pop(): (len(sends), sum(map(_SIZE, sends)))}
    else:
        counts: dict[int, list[int]] = {}
        for s in sends:
            a = counts.get(s.queue_id)
            if a is None:
                a = counts[s.queue_id] = [0, 0]
            a[0] += 1
            a[1] += s.size
        added = {qid: (a[0], a[1]) for qid, a in counts.items()}
    seqs: dict[int, list[int]] = {}
    for qid, (count, nbytes) in added.items():
        # One statement per queue: bump the counters, learn quota and type; a deleted
        # queue has no row (MQ_ERROR_QUEUE_DELETED). Over quota: the savepoint undoes it.
        queue_type, _display, _allowed = _add_to_queue(conn, qid, count, nbytes)
        if queue_type == QueueType.OUTGOING:
            row = conn.execute(
                "SELECT tx_sequence_id, next_tx_sequence_number FROM outgoing_sequences WHERE queue_id = ?",
                (qid,),
            ).fetchone()
            seqs[qid] = [from_i64(row[0]), int(row[1])]
    if qm_quota:
        _check_qm_quota(ctx)
    first = ctx.alloc_lookup_ids(len(sends))
    # LookupIdentifiers and order keys are filled in by the INSERT itself (inserts._insert_sql):
    # the local send path binds the Send rows as they are.
    rows: list[list[Any]]
    if not seqs and arrived_time is None:
        rows = [sends[0].row] if len(sends) == 1 else list(map(_ROW, sends))
    elif not seqs:
        # Arrivals (accept_incoming): ArrivedTime is now.
        rows = []
        for s in sends:
            r = s.row.copy()
            r[_ARRIVED] = arrived_time
            rows.append(r)
    elif (
        arrived_time is None
        and len(added) == 1
        and all(map(_ROW_TRANSACTIONAL, rows := list(map(_ROW, sends))))
        and len(expiry := set(map(_EXPIRY, sends))) == 1
    ):
        # The usual commit into an outgoing queue: SQLite numbers the rows as it inserts
        # them (inserts._insert_sql "numbered"), no copy of each row to number it.
        qid, numbering = next(iter(seqs.items()))
        insert_numbered(conn, first, rows, qid, expiry.pop(), to_i64(numbering[0]), numbering[1])
        numbering[1] += len(sends)
        _update_sequences(conn, seqs)
        return list(range(first, first + len(sends)))
    else:
        rows = []
        for s in sends:
            r = list(s.row)
            seq = seqs.get(s.queue_id)
            if seq is not None and r[_TRANSACTIONAL]:
                r[_TX_SEQ_ID] = to_i64(seq[0])
                r[_TX_SEQ_NO] = seq[1]
                r[_TX_PREV_NO] = seq[1] - 1
                seq[1] += 1
            if arrived_time is not None:
                r[_ARRIVED] = arrived_time
            rows.append(r)
    insert_rows(conn, first, rows, sends, next(iter(added)) if len(added) == 1 else None)
    if seqs:
        _update_sequences(conn, seqs)
    return list(range(first, first + len(sends)))


def _update_sequences(conn: sqlite3.Connection, seqs: dict[int, list[int]]) -> None:
    """Store each outgoing queue's next TxSequenceNumber (``seqs``: queue -> [TxSequenceID,
    next number])."""
    conn.executemany(
        "UPDATE outgoing_sequences SET next_tx_sequence_number = ? WHERE queue_id = ?",
        [(nxt, qid) for qid, (_sid, nxt) in seqs.items()],
    )


#: A run of at least this many consecutive LookupIdentifiers is deleted as one range.
_MIN_RUN = 4
#: Most bound parameters per ``IN (?, ...)`` statement (SQLite's limit is 32,766).
IN_CHUNK = 2000


def delete_lookup_ids(conn: sqlite3.Connection, lookup_ids: list[int]) -> None:
    """Delete the messages with these LookupIdentifiers, set-based.

    LookupIdentifiers are integers, so a run of consecutive ones ``a..b`` (a batch sent in
    one transaction and received in one) is exactly ``lookup_id BETWEEN a AND b``: one
    rowid range, whatever else the table holds. The rest go in ``IN (?, ...)``
    statements: cheaper than a DELETE per row or ``IN (json_each(?))``, and a
    ``BETWEEN`` is the cheapest of all.
    """
    ids = sorted(lookup_ids)
    n = len(ids)
    if n >= _MIN_RUN and ids[-1] - ids[0] == n - 1 and len(set(ids)) == n:
        # One run (distinct, sorted, spanning n ids): the usual 100-message receive,
        # without walking the ids in Python.
        conn.execute("DELETE FROM messages WHERE lookup_id BETWEEN ? AND ?", (ids[0], ids[-1]))
        return
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
    for i in range(0, len(singles), IN_CHUNK):
        chunk = singles[i : i + IN_CHUNK]
        conn.execute(f"DELETE FROM messages WHERE lookup_id IN ({','.join('?' * len(chunk))})", chunk)


def apply_removes(ctx: WriteContext, removes: Sequence[Remove], many: Sequence[DeleteMany] = ()) -> None:
    """Delete removed messages, or move them (journal, dead-letter) under a NEW
    LookupIdentifier: a message then only ever appears in a queue with an identifier
    above every one that queue showed before, which keeps the per-queue watermark of
    :func:`openmsmq.store.ranges.lookup_range` stable (nothing appears below it later).
    ``many`` are deleted with them (the same DELETE statements and counter UPDATE)."""
    if not removes and not many:
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

    deletes: list[int] = []
    moves = []
    for d in many:
        bump(d.queue_id, -len(d.lookup_ids), -d.size)
        deletes += d.lookup_ids
    if removes:
        # Counters of the source queue, per run of removes from one queue (the usual case
        # is one run: a transaction received from one queue).
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
        delete_lookup_ids(conn, deletes)
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
    """One local transaction's work: insert ``sends``, delete or move ``removes``,
    delete ``deletes`` (receives as :class:`DeleteMany`, one per queue and batch).

    Calling it returns the LookupIdentifiers given to ``sends``, in order. The writer
    merges consecutive CommitWork operations of a batch (:meth:`merge`) so that a group
    commit of N transactions still costs one INSERT, one DELETE and one counter UPDATE.
    """

    __slots__ = ("arrived_time", "deletes", "removes", "sends")

    def __init__(
        self,
        sends: Sequence[Send],
        removes: Sequence[Remove],
        arrived_time: int | None = None,
        deletes: Sequence[DeleteMany] = (),
    ) -> None:
        self.sends = sends
        self.removes = removes
        self.arrived_time = arrived_time
        self.deletes = deletes

    def __call__(self, ctx: WriteContext) -> list[int]:
        apply_removes(ctx, self.removes, self.deletes)
        return insert_messages(ctx, self.sends, self.arrived_time)

    @staticmethod
    def merge(works: Sequence[CommitWork]) -> Callable[[WriteContext], list[list[int]]]:
        """One operation doing all of ``works``; returns each one's result. If it fails the
        writer runs them one by one, so a failing transaction fails alone."""

        def op(ctx: WriteContext) -> list[list[int]]:
            apply_removes(ctx, [r for w in works for r in w.removes], [d for w in works for d in w.deletes])
            out: list[list[int]] = []
            sends = [s for w in works if w.arrived_time is None for s in w.sends]
            ids = iter(insert_messages(ctx, sends, None))
            for w in works:
                if w.arrived_time is None:
                    out.append([next(ids) for _ in w.sends])
                else:
                    out.append(insert_messages(ctx, w.sends, w.arrived_time))
            return out

        return op


def commit_work(
    sends: Sequence[Send],
    removes: Sequence[Remove],
    arrived_time: int | None = None,
    deletes: Sequence[DeleteMany] = (),
) -> CommitWork:
    """The write operation of one local transaction (see :class:`CommitWork`)."""
    return CommitWork(sends, removes, arrived_time, deletes)


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


def _check_qm_quota(ctx: WriteContext) -> None:
    """MQ_ERROR_INSUFFICIENT_RESOURCES when all queues together now hold more than the
    QueueManagerQuota (MS-MQDMPR 3.1.7.1.9 status 2; the caller's savepoint undoes the
    enqueue). One indexed sum over the queue rows, only when a quota is set. Also while
    the disk is full (low-space mode): the space reserve is for removals."""
    if ctx.low_space:
        raise MQError(
            HResult.MQ_ERROR_INSUFFICIENT_RESOURCES,
            "the disk is full: messages are not taken until space is freed (receives, purges and"
            " deletions go on, with the space reserve, store.disk_reserve)",
        )
    quota = ctx.qm_quota
    if quota is None:
        return
    total = ctx.conn.execute("SELECT COALESCE(SUM(total_bytes), 0) FROM queues").fetchone()[0]
    if total > quota:
        raise MQError(
            HResult.MQ_ERROR_INSUFFICIENT_RESOURCES,
            f"queue manager quota of {quota:,} bytes exceeded (MS-MQDMPR 3.1.7.1.9 status 2)",
        )


def _add_to_queue(conn: sqlite3.Connection, qid: int, count: int, nbytes: int) -> tuple[int, str, str]:
    """Add ``count`` messages of ``nbytes`` to queue ``qid``'s counters in one statement
    and return its (queue_type, display name, allowed senders): MQ_ERROR_QUEUE_DELETED
    when the queue has no row, MQ_ERROR_INSUFFICIENT_RESOURCES over its quota (the
    caller's savepoint undoes the UPDATE)."""
    got = conn.execute(
        "UPDATE queues SET msg_count = msg_count + ?, total_bytes = total_bytes + ? WHERE queue_id = ?"
        " RETURNING total_bytes, quota_kb, queue_type, display_name, allowed_senders",
        (count, nbytes, qid),
    ).fetchone()
    if got is None:
        raise MQError(HResult.MQ_ERROR_QUEUE_DELETED, f"queue #{qid} was deleted")
    total, quota_kb, queue_type, display, allowed = got
    if quota_kb != INFINITE and total > quota_kb * 1024:
        raise MQError(
            HResult.MQ_ERROR_INSUFFICIENT_RESOURCES,
            f"queue {display}: quota of {quota_kb} KB exceeded (MS-MQDMPR 3.1.7.1.9 status 1)",
        )
    return queue_type, display, allowed


def accept_incoming(
    sends: Sequence[Send], states: Sequence[IncomingSequenceState], arrived_time: int
) -> Callable[[WriteContext], list[int]]:
    """Store accepted incoming messages and advance their incoming sequence state atomically.

    DESIGN invariant 4 / seed 002: the receiver stores a message and its sequence state
    in one durable transaction, so a crash can neither lose an acknowledged message nor
    accept it twice. Returns the local LookupIdentifiers.
    """

    def op(ctx: WriteContext) -> list[int]:
        stored = insert_messages(ctx, sends, arrived_time)
        _upsert_incoming(ctx.conn, states)
        return stored

    return op


def accept_incoming_rows(
    queue_id: int, rows: list[list[Any]], states: Sequence[IncomingSequenceState], arrived_time: int
) -> Callable[[WriteContext], list[int]]:
    """:func:`accept_incoming` of rows for one queue that never expire (no ``expire_at``),
    without a :class:`Send` per row: the rows (fresh, owned by the op) get their
    ArrivedTime in place. Same statements, same checks (deleted queue, quota) and the same
    atomicity (DESIGN invariant 4). Returns the local LookupIdentifiers.

    The caller decided on the rows from the queue's properties as its process holds them
    (``QueueManager.queue_properties``, no statement); the queue row the counter UPDATE
    returns (no statement more) is checked again here, inside the transaction: a sender
    allowlist set since (by another process on the data directory) fails the op with
    MQ_ERROR_ACCESS_DENIED and nothing is stored (the caller reads the queue again and
    applies the arrival rules)."""

    def op(ctx: WriteContext) -> list[int]:
        if not rows:
            _upsert_incoming(ctx.conn, states)
            return []
        conn = ctx.conn
        queue_type, display, allowed = _add_to_queue(conn, queue_id, len(rows), sum(map(_ROW_SIZE, rows)))
        _check_qm_quota(ctx)
        if queue_type == QueueType.OUTGOING:  # outgoing queues number their rows: the general path
            raise MQError(HResult.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME, f"queue {display} is an outgoing queue")
        if allowed:  # the arrival rules decide per sender (MS-MQQB 3.1.5.8.4): not these rows
            raise MQError(
                HResult.MQ_ERROR_ACCESS_DENIED, f"queue {display} takes messages of listed senders only"
            )
        first = ctx.alloc_lookup_ids(len(rows))
        for r in rows:
            r[_ARRIVED] = arrived_time
        insert_plain(conn, first, rows, queue_id)
        _upsert_incoming(conn, states)
        return list(range(first, first + len(rows)))

    return op


def record_incoming(states: Sequence[IncomingSequenceState]) -> Callable[[WriteContext], None]:
    """Persist incoming sequence state alone (e.g. a rejected duplicate's RejectCount)."""

    def op(ctx: WriteContext) -> None:
        _upsert_incoming(ctx.conn, states)

    return op


def update_incoming(
    deletes: Sequence[IncomingSequenceState],
    writes: Sequence[tuple[IncomingSequenceState, IncomingSequenceState]],
) -> Callable[[WriteContext], int]:
    """Delete incoming sequence rows and rewrite others (``(expected, new)`` pairs), in one
    transaction. Each changes a row only while it still holds the TxSequenceID and
    TxSequenceNumber given (``expected``; 0 / 0: no row yet): a sequence accepted again
    since keeps its newer state. Returns the rows changed."""

    def op(ctx: WriteContext) -> int:
        conn = ctx.conn
        changed = 0
        for s in deletes:
            cur = conn.execute(
                "DELETE FROM incoming_sequences WHERE sender_qm = ? AND destination = ?"
                " AND tx_sequence_id = ? AND tx_sequence_number = ?",
                (s.sender_qm.bytes, s.destination.lower(), to_i64(s.tx_sequence_id), s.tx_sequence_number),
            )
            changed += cur.rowcount
        for old, new in writes:
            key = (old.sender_qm.bytes, old.destination.lower())
            if old.tx_sequence_id == 0 and old.tx_sequence_number == 0:
                # A row at position 0 holds only the RejectCount of a sequence that
                # accepted nothing yet: still "no row" for a reset.
                found = conn.execute(
                    "SELECT 1 FROM incoming_sequences WHERE sender_qm = ? AND destination = ?"
                    " AND (tx_sequence_id != 0 OR tx_sequence_number != 0)",
                    key,
                ).fetchone()
                if found is None:
                    _upsert_incoming(conn, [new])
                    changed += 1
                continue
            cur = conn.execute(
                "UPDATE incoming_sequences SET tx_sequence_id = ?, tx_sequence_number = ?, reject_count = 0,"
                " last_access_time = ? WHERE sender_qm = ? AND destination = ? AND tx_sequence_id = ?"
                " AND tx_sequence_number = ?",
                (to_i64(new.tx_sequence_id), new.tx_sequence_number, new.last_access_time, *key,
                 to_i64(old.tx_sequence_id), old.tx_sequence_number),
            )  # fmt: skip
            changed += cur.rowcount
        return changed

    return op


def record_reject_counts(
    rejects: Sequence[tuple[uuid.UUID, str, int, float]],
) -> Callable[[WriteContext], None]:
    """Persist IncomingTransactionalTransferInfo.RejectCount and LastAccessTime of incoming
    sequences whose last message was rejected (MS-MQQB 3.1.5.8.6): ``(sender QM,
    destination, RejectCount, LastAccessTime)``. The sequence position is left as stored
    (a rejection does not move it; a row that does not exist yet gets position 0)."""

    def op(ctx: WriteContext) -> None:
        ctx.conn.executemany(
            "INSERT INTO incoming_sequences (sender_qm, destination, queue_id, tx_sequence_id,"
            " tx_sequence_number, reject_count, last_access_time) VALUES (?, ?, NULL, 0, 0, ?, ?)"
            " ON CONFLICT (sender_qm, destination) DO UPDATE"
            " SET reject_count = excluded.reject_count, last_access_time = excluded.last_access_time",
            [(qm.bytes, destination.lower(), count, at) for qm, destination, count, at in rejects],
        )

    return op


def expire_messages(
    removes: Sequence[Remove], acks: AckRows | None = None
) -> Callable[[WriteContext], list[RemovedMessage]]:
    """Move expired messages to the dead-letter queues with their Nack class recorded;
    ``acks``: their acknowledgments, in the same transaction (:class:`AckRows`)."""

    def op(ctx: WriteContext) -> list[RemovedMessage]:
        events = _expiry_events(ctx.conn, removes)
        apply_removes(ctx, removes)
        write_ack_rows(ctx, events, acks)
        return events

    return op


def expiry_events(removes: Sequence[Remove]) -> Callable[[sqlite3.Connection], list[RemovedMessage]]:
    """A read: the events :func:`expire_messages` of ``removes`` reports (to build their
    acknowledgments before it runs)."""
    return lambda conn: _expiry_events(conn, removes)


#: LookupIdentifiers per statement of :func:`_expiry_events` (SQLite binds at most 32,766
#: parameters; 500 keeps each statement's IN list small).
_EVENTS_CHUNK = 500


def _expiry_events(conn: sqlite3.Connection, removes: Sequence[Remove]) -> list[RemovedMessage]:
    """The removed messages that asked for acknowledgments, journaling or a FinalAck, in
    ``removes`` order. One statement per chunk of LookupIdentifiers, not one per message:
    a FinalAck settlement or an expiry pass of thousands of messages runs inside the
    store's write transaction, where every other committer of the QM waits for it."""
    wanted: dict[int, tuple[int, MessageRecord]] = {}
    for i in range(0, len(removes), _EVENTS_CHUNK):
        chunk = [r.lookup_id for r in removes[i : i + _EVENTS_CHUNK]]
        marks = ",".join("?" * len(chunk))
        for qid, m in ack_wanted(conn, f"m.lookup_id IN ({marks})", chunk):
            wanted[m.lookup_id] = (qid, m)
    events = []
    if wanted:
        for r in removes:
            got = wanted.get(r.lookup_id)
            if got is not None and got[0] == r.queue_id:
                events.append(RemovedMessage(r.queue_id, got[1], r.new_class or 0))
    return events
