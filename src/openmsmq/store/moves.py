"""Store operations of Move Message (MS-MQRR 3.1.4.10: between a queue and its subqueues)
and of the AbortCount / MoveCount of a message.

A move is one ``UPDATE`` of the message's row: it changes queue, never leaves a copy, so
the message is in exactly one place at every instant, across a crash too (the row is in
the old queue until the transaction that moves it commits). The message keeps its
Identifier, every property and its priority; it gets a new LookupIdentifier, as every
move in this store does (journal, dead letter): a queue then only ever gains messages
above every LookupIdentifier it showed before, so a reader of LookupIdentifier ranges
(the Spark source, whose commit removes everything up to a position) never has a
message appear behind the position it committed.

The counts live in the row's ``tx_flags`` (layout: :data:`openmsmq.store.records.ABORT_SHIFT`
and its neighbours): an abort or a move changes no other column and the hot send and
receive statements stay as they are. ``retry_due`` holds when a message parked in a
``;retry`` subqueue returns (a durable due time, so a return survives a restart).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from openmsmq.errors import HResult, MQError
from openmsmq.store import queues
from openmsmq.store.reads import get_queue
from openmsmq.store.records import ABORT_SHIFT, COUNT_MAX, MOVE_SHIFT, QueueRecord, QueueType, counts_of
from openmsmq.store.writes import WriteContext

__all__ = [
    "AbortedCount",
    "Move",
    "abort_counts",
    "apply_moves",
    "drop_messages",
    "due_returns",
    "ensure_subqueue",
    "move_messages",
]


@dataclass(frozen=True, slots=True)
class Move:
    """Move the message ``lookup_id`` of queue ``source_queue_id`` to ``target_queue_id``;
    ``due_at`` (seconds since 1970) records when it returns from a ``;retry`` subqueue to
    ``return_queue_id``."""

    source_queue_id: int
    target_queue_id: int
    lookup_id: int
    due_at: float | None = None
    return_queue_id: int | None = None


@dataclass(frozen=True, slots=True)
class AbortedCount:
    """A message's counts after an abort was counted."""

    lookup_id: int
    queue_id: int
    abort_count: int
    move_count: int


#: Moves the row, gives it its new LookupIdentifier (?1), sets AbortCount to 0 and adds
#: one to MoveCount (saturating), keeps the First/LastInTransaction bits. ``order_key -
#: lookup_id`` is the priority part of the position ((7 - priority) << 56).
_MOVE_SQL = (
    "UPDATE messages SET queue_id = ?2, order_key = order_key - lookup_id + ?1, lookup_id = ?1,"
    # CASE rather than SQLite's two-argument min(): the same statement runs on PostgreSQL.
    f" tx_flags = (tx_flags & 3) | (CASE WHEN ((tx_flags >> {MOVE_SHIFT}) & {COUNT_MAX}) < {COUNT_MAX}"
    f" THEN ((tx_flags >> {MOVE_SHIFT}) & {COUNT_MAX}) + 1 ELSE {COUNT_MAX} END << {MOVE_SHIFT})"
    " WHERE lookup_id = ?3 AND queue_id = ?4 RETURNING size"
)
_ABORT_SQL = (
    f"UPDATE messages SET tx_flags = CASE WHEN ((tx_flags >> {ABORT_SHIFT}) & {COUNT_MAX}) < {COUNT_MAX}"
    f" THEN tx_flags + {1 << ABORT_SHIFT} ELSE tx_flags END"
    " WHERE lookup_id = ? RETURNING queue_id, tx_flags"
)


def apply_moves(ctx: WriteContext, moves: Sequence[Move]) -> list[int]:
    """Move each message (see the module doc) inside the caller's store transaction;
    returns the new LookupIdentifiers, in order. A message that is not in its source
    queue (received, purged, expired or moved meanwhile): MQ_ERROR_MESSAGE_NOT_FOUND, and
    the whole store transaction fails (nothing of it is written)."""
    if not moves:
        return []
    conn = ctx.conn
    first = ctx.alloc_lookup_ids(len(moves))
    deltas: dict[int, list[int]] = {}
    dues: list[tuple[int, int, float]] = []
    gone: list[int] = []
    out = []
    for i, mv in enumerate(moves):
        new = first + i
        row = conn.execute(_MOVE_SQL, (new, mv.target_queue_id, mv.lookup_id, mv.source_queue_id)).fetchone()
        if row is None:
            raise MQError(
                HResult.MQ_ERROR_MESSAGE_NOT_FOUND,
                f"message {mv.lookup_id} is not in queue {mv.source_queue_id} (received, purged or moved)",
            )
        size = int(row[0])
        for qid, sign in ((mv.source_queue_id, -1), (mv.target_queue_id, 1)):
            d = deltas.setdefault(qid, [0, 0])
            d[0] += sign
            d[1] += sign * size
        gone.append(mv.lookup_id)
        if mv.due_at is not None and mv.return_queue_id is not None:
            dues.append((new, mv.return_queue_id, mv.due_at))
        out.append(new)
    conn.executemany(
        "UPDATE queues SET msg_count = msg_count + ?, total_bytes = total_bytes + ? WHERE queue_id = ?",
        [(c, b, qid) for qid, (c, b) in deltas.items() if c or b],
    )
    # A message that leaves a ;retry subqueue early (a manual move) drops its due time.
    conn.executemany("DELETE FROM retry_due WHERE lookup_id = ?", [(lid,) for lid in gone])
    if dues:
        conn.executemany("INSERT INTO retry_due (lookup_id, queue_id, due_at) VALUES (?, ?, ?)", dues)
    return out


def move_messages(moves: Sequence[Move]) -> Callable[[WriteContext], list[int]]:
    """The write operation of :func:`apply_moves` alone (a move outside a transaction)."""

    def op(ctx: WriteContext) -> list[int]:
        return apply_moves(ctx, moves)

    return op


def abort_counts(
    lookup_ids: Sequence[int], decide: Callable[[list[AbortedCount]], list[Move]]
) -> Callable[[WriteContext], tuple[list[AbortedCount], list[int]]]:
    """The write operation of aborted transactional receives: AbortCount + 1 for each
    message still stored (saturating), then the moves ``decide`` returns for the new
    counts (a retry policy's), in the same store transaction: an abort that sends a
    message to ``;retry`` is counted exactly when the move happens. Returns the counts and
    the moved messages' new LookupIdentifiers."""

    def op(ctx: WriteContext) -> tuple[list[AbortedCount], list[int]]:
        conn = ctx.conn
        counted = []
        for lid in lookup_ids:
            row = conn.execute(_ABORT_SQL, (lid,)).fetchone()
            if row is not None:  # gone meanwhile (purged while locked): nothing to count
                aborts, moves = counts_of(int(row[1]))
                counted.append(AbortedCount(lid, int(row[0]), aborts, moves))
        return counted, apply_moves(ctx, decide(counted))

    return op


def due_returns(
    now: float, limit: int, exclude: Collection[int] = ()
) -> Callable[[WriteContext], list[tuple[int, int, int]]]:
    """The write operation of the retry-cycle returns due at ``now``: each message of a
    ``;retry`` subqueue whose time has come moves back to its queue (MoveCount + 1).
    Returns ``(source queue, target queue, new LookupIdentifier)`` per returned message;
    due times of messages that left the subqueue otherwise (received, purged) are dropped.
    Messages in ``exclude`` (locked by a reader of the subqueue) wait for a later pass."""

    def op(ctx: WriteContext) -> list[tuple[int, int, int]]:
        conn = ctx.conn
        due = conn.execute(
            "SELECT d.lookup_id, d.queue_id, m.queue_id FROM retry_due d"
            " LEFT JOIN messages m ON m.lookup_id = d.lookup_id"
            " WHERE d.due_at <= ? ORDER BY d.due_at, d.lookup_id LIMIT ?",
            (now, limit),
        ).fetchall()
        stale = [(lid,) for lid, _, src in due if src is None]
        conn.executemany("DELETE FROM retry_due WHERE lookup_id = ?", stale)
        moves = [Move(src, back, lid) for lid, back, src in due if src is not None and lid not in exclude]
        new = apply_moves(ctx, moves)
        return [(m.source_queue_id, m.target_queue_id, n) for m, n in zip(moves, new, strict=True)]

    return op


def drop_messages(queue_id: int, lookup_ids: Sequence[int]) -> Callable[[WriteContext], int]:
    """The write operation deleting messages of a queue without an acknowledgment (a
    retry policy's ``drop``); returns how many were still there."""

    def op(ctx: WriteContext) -> int:
        conn = ctx.conn
        count = size = 0
        for lid in lookup_ids:
            row = conn.execute(
                "DELETE FROM messages WHERE lookup_id = ? AND queue_id = ? RETURNING size", (lid, queue_id)
            ).fetchone()
            if row is not None:
                count += 1
                size += int(row[0])
        conn.execute(
            "UPDATE queues SET msg_count = msg_count - ?, total_bytes = total_bytes - ? WHERE queue_id = ?",
            (count, size, queue_id),
        )
        return count

    return op


def ensure_subqueue(
    parent: QueueRecord, subqueue: str, display_name: str, now: int
) -> Callable[[WriteContext], QueueRecord]:
    """The write operation returning subqueue ``subqueue`` (a canonical name) of queue
    ``parent``, created when missing: a queue of kind SUBQUEUE named ``<queue>;<subqueue>``
    whose ``parent_queue_id`` is the queue's, transactional as it is, without quota or
    journal of its own (its messages are the queue's)."""
    name = f"{parent.name};{subqueue}"

    def op(ctx: WriteContext) -> QueueRecord:
        conn = ctx.conn
        row = conn.execute("SELECT queue_id FROM queues WHERE name = ?", (name,)).fetchone()
        if row is None:
            rec = queues.create_queue(
                name=name,
                display_name=display_name,
                queue_type=QueueType.SUBQUEUE,
                transactional=parent.transactional,
                label="",
                quota_kb=0xFFFFFFFF,
                journal_quota_kb=0xFFFFFFFF,
                journal=False,
                now=now,
                private_number=parent.private_number,
                with_journal=False,
            )(ctx)
            conn.execute(
                "UPDATE queues SET parent_queue_id = ? WHERE queue_id = ?", (parent.queue_id, rec.queue_id)
            )
            qid = rec.queue_id
        else:
            qid = int(row[0])
        return get_queue(conn, qid)

    return op
