"""Write operations on outgoing queues' transactional sequences (run by the writer).

TxSequenceID allocation (:func:`new_tx_sequence_id`), the release of what an OrderAck
covered (:func:`release_outgoing`, MS-MQQB 3.1.5.6), the settlement of FinalAcks
(:func:`settle_final_acks`, 3.1.5.7) and the deletion of session-acknowledged
non-transactional messages (:func:`delete_sent`, 3.1.5.5.3). Like the operations of
:mod:`openmsmq.store.ops` (whose removal helpers they use), each builder returns a
callable ``op(ctx)`` for :meth:`openmsmq.store.db.Store.submit`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from openmsmq.store.ops import IN_CHUNK, DeleteMany, Remove, apply_removes, delete_lookup_ids
from openmsmq.store.reads import HEAD_SELECT, HEAD_SIZE, head_record, outgoing_sequence
from openmsmq.store.records import (
    LOOKUP_MASK,
    PRIORITY0_BAND,
    MessageRecord,
    OutgoingSequenceState,
    from_i64,
    to_i64,
)
from openmsmq.store.writes import WriteContext

__all__ = [
    "FinalAckOutcome",
    "delete_sent",
    "new_tx_sequence_id",
    "release_outgoing",
    "release_outgoing_counted",
    "settle_final_acks",
]


def _asked_final_ack(m: MessageRecord) -> bool:
    """Whether the message asked for a FinalAck: JP, JN or TransactionHeader.Flags.FA."""
    return m.final_ack_required or m.positive_journaling or m.negative_journaling


#: ``outgoing_sequences.queue_id`` of the row that remembers the highest TxSequenceID this QM
#: ever issued (queue ids start at 1, so no queue has it; it outlives deleted queues).
_TX_SEQUENCE_HIGH_WATER = 0


def new_tx_sequence_id(conn: sqlite3.Connection, floor: int) -> int:
    """A TxSequenceID this QM never issued before: above every ID any outgoing queue has had,
    and at least ``floor`` (the ID MS-MQQB 3.1.5.6 would pick: TimeStamp | 1 for a new queue,
    Ordinal + 1 for a new sequence).

    An OrderAck names only the TxSequenceID (MS-MQQB 2.2.4.1), so two outgoing queues must
    never share one: a shared ID let an OrderAck for one queue's finished sequence release
    another queue's messages after a sender restart (found by the deterministic simulator,
    seeds 182 and 1541 — `tests/sim/`).
    """
    # The high-water row holds the highest ID issued since it exists (every ID is issued
    # here); a store from before it has none, and then every queue's row is read once.
    row = conn.execute(
        "SELECT tx_sequence_id FROM outgoing_sequences WHERE queue_id = ?", (_TX_SEQUENCE_HIGH_WATER,)
    ).fetchone()
    if row is not None:
        high = from_i64(row[0])
    else:
        rows = conn.execute("SELECT tx_sequence_id FROM outgoing_sequences").fetchall()
        high = max((from_i64(r[0]) for r in rows), default=0)
    new_id = max(floor, high + 1)
    conn.execute(
        "INSERT INTO outgoing_sequences (queue_id, tx_sequence_id, next_tx_sequence_number) VALUES (?, ?, 0)"
        " ON CONFLICT(queue_id) DO UPDATE SET tx_sequence_id = excluded.tx_sequence_id",
        (_TX_SEQUENCE_HIGH_WATER, to_i64(new_id)),
    )
    return new_id


def _first_numbered_above(conn: sqlite3.Connection, queue_id: int, sid: int, up_to_number: int) -> int:
    """The lowest LookupIdentifier at or after which the queue's rows of sequence ``sid``
    are numbered above ``up_to_number`` (one past the highest identifier when none is).

    Numbers are assigned at commit in LookupIdentifier order (ops.CommitWork under the
    writer's lock, store.inserts.insert_numbered), so within ``sid`` they grow with the
    identifier: the rows numbered up to ``up_to_number`` are exactly those below this
    bound. Found by bisection over identifiers, each probe one index seek (about 20 for
    a million rows) instead of a walk over the queue."""
    top = conn.execute("SELECT max(order_key) FROM messages WHERE queue_id = ?", (queue_id,)).fetchone()[0]
    if top is None or top < PRIORITY0_BAND:
        return 1
    probe = (
        "SELECT tx_sequence_number FROM messages WHERE queue_id = ? AND order_key BETWEEN ? AND ?"
        " AND tx_sequence_id = ? AND tx_sequence_number != 0 ORDER BY order_key LIMIT 1"
    )
    lo, hi = 1, (top & LOOKUP_MASK) + 1
    while lo < hi:
        mid = (lo + hi) // 2
        row = conn.execute(probe, (queue_id, PRIORITY0_BAND | mid, top, sid)).fetchone()
        if row is None or row[0] > up_to_number:
            hi = mid
        else:
            lo = mid + 1
    return lo


def release_outgoing(
    queue_id: int, up_to_number: int, awaiting_queue_id: int | None = None, *, return_ids: bool = True
) -> Callable[[WriteContext], tuple[list[int], OutgoingSequenceState]]:
    """:func:`release_outgoing_counted` without the count."""
    op = release_outgoing_counted(queue_id, up_to_number, awaiting_queue_id, return_ids=return_ids)

    def released(ctx: WriteContext) -> tuple[list[int], OutgoingSequenceState]:
        ids, state, _ = op(ctx)
        return ids, state

    return released


def release_outgoing_counted(
    queue_id: int, up_to_number: int, awaiting_queue_id: int | None = None, *, return_ids: bool = True
) -> Callable[[WriteContext], tuple[list[int], OutgoingSequenceState, int]]:
    """An OrderAck covered ``up_to_number``: delete the current sequence's messages numbered
    1..up_to_number; when none of the sequence is left, start a new one (Ordinal + 1,
    number 1 — MS-MQQB 3.1.5.6 steps 6–7). Returns (deleted LookupIdentifiers, new state).

    With ``awaiting_queue_id``, a released message that asked for a FinalAck (JP, JN or
    TransactionHeader.Flags.FA) is moved there instead of deleted: the durable
    AwaitingFinalACKTable (MS-MQQB 3.1.5.6 step 6, 3.1.1.6.2), settled by
    :func:`settle_final_acks`. The third value is how many messages left the queue
    (deleted or moved aside).

    With ``return_ids=False`` (the transfer's path: one release of up to ``max_in_flight``
    messages at the end of a burst) only the moved ones are listed, and the range is
    released set-based in one pass over it: one ``DELETE`` of the rows that asked for
    nothing (``NOT ack_wanted``: the common case), then a look at what is left of the
    range (only rows with ``ack_wanted``) to move the FinalAck ones and delete the rest.
    No RETURNING (SQLite collects every returned row, a large share of the statement), no
    separate scan for ``ack_wanted`` rows before it. Same state as the listed path
    (``tests/qm/test_release_outgoing.py``)."""

    def op(ctx: WriteContext) -> tuple[list[int], OutgoingSequenceState, int]:
        conn = ctx.conn
        state = outgoing_sequence(conn, queue_id)
        sid = to_i64(state.tx_sequence_id)
        # Only the released prefix of the queue is read, not the backlog behind it: with
        # a backlog of N, each release walked all N rows (a long backlog drained in
        # quadratic time, the writer blocked for every row left behind each time).
        where = (
            "queue_id = ? AND order_key BETWEEN ? AND ? AND tx_sequence_id = ?"
            " AND tx_sequence_number BETWEEN 1 AND ?"
        )
        other_band = conn.execute(
            "SELECT 1 FROM messages WHERE queue_id = ? AND order_key < ? AND tx_sequence_id = ? LIMIT 1",
            (queue_id, PRIORITY0_BAND, sid),
        ).fetchone()
        if other_band is None:  # the QM's case: its transactional messages have priority 0
            below = _first_numbered_above(conn, queue_id, sid, up_to_number)
            args: tuple[int, ...] = (
                queue_id,
                PRIORITY0_BAND,
                PRIORITY0_BAND | (below - 1),
                sid,
                up_to_number,
            )
        else:  # rows of the sequence in other bands (written below the QM): every band
            args = (queue_id, 0, PRIORITY0_BAND | LOOKUP_MASK, sid, up_to_number)
        if return_ids:
            moved, deleted = _release_listed(ctx, queue_id, where, args, awaiting_queue_id)
            left_queue = len(moved) + len(deleted)
        else:
            moved, removed = _release_counted(ctx, queue_id, where, args, args[1:3], awaiting_queue_id)
            deleted, left_queue = [], len(moved) + removed
        left = conn.execute(
            "SELECT 1 FROM messages WHERE queue_id = ? AND tx_sequence_number != 0 LIMIT 1", (queue_id,)
        ).fetchone()
        if left is None and state.next_tx_sequence_number > 1:
            seq = state.tx_sequence_id
            ordinal = (seq & 0xFFFFFFFF) + 1
            next_id = (seq & ~0xFFFFFFFF) + ordinal if ordinal <= 0xFFFFFFFF else ((seq >> 32) + 1) << 32 | 1
            new_id = new_tx_sequence_id(conn, next_id)
            conn.execute(
                "UPDATE outgoing_sequences SET tx_sequence_id = ?, next_tx_sequence_number = 1"
                " WHERE queue_id = ?",
                (to_i64(new_id), queue_id),
            )
            state = OutgoingSequenceState(queue_id, new_id, 1)
        return sorted(moved + deleted), state, left_queue

    return op


def _release_listed(
    ctx: WriteContext, queue_id: int, where: str, args: tuple[int, ...], awaiting: int | None
) -> tuple[list[int], list[int]]:
    """:func:`release_outgoing` listing every released row: (moved, deleted) ids."""
    conn = ctx.conn
    keep: list[Remove] = []
    if awaiting is not None:
        # Messages that asked for a FinalAck move to the awaiting queue (rare: only rows
        # with ack_wanted are looked at, in one statement, without their bodies).
        for r in conn.execute(f"SELECT {HEAD_SELECT} FROM messages m WHERE {where} AND ack_wanted", args):
            if _asked_final_ack(head_record(r)):
                keep.append(Remove(queue_id, r[0], r[HEAD_SIZE], awaiting))
        apply_removes(ctx, keep)
    rows = conn.execute(f"DELETE FROM messages WHERE {where} RETURNING lookup_id, size", args).fetchall()
    if rows:
        conn.execute(
            "UPDATE queues SET msg_count = msg_count - ?, total_bytes = total_bytes - ? WHERE queue_id = ?",
            (len(rows), int(sum(r[1] for r in rows)), queue_id),
        )
    return [r.lookup_id for r in keep], [r[0] for r in rows]


def _release_counted(
    ctx: WriteContext,
    queue_id: int,
    where: str,
    args: tuple[int, ...],
    span: tuple[int, ...],
    awaiting: int | None,
) -> tuple[list[int], int]:
    """:func:`release_outgoing` without the id list, in one pass: the moved ids and how
    many were deleted.
    ``span``: the (lowest, highest) order key the range lies in."""
    conn = ctx.conn
    lo_key, hi_key = span
    # Whether the queue holds anything outside the span (a backlog behind the released
    # messages, non-transactional ones of other priorities): then the released bytes
    # are summed over the span first, instead of summing what is left afterwards (which
    # walked the whole backlog on every release). Two index seeks.
    rest = (
        conn.execute(
            "SELECT 1 FROM messages WHERE queue_id = ? AND order_key > ? LIMIT 1", (queue_id, hi_key)
        ).fetchone()
        or conn.execute(
            "SELECT 1 FROM messages WHERE queue_id = ? AND order_key < ? LIMIT 1", (queue_id, lo_key)
        ).fetchone()
    )
    released_bytes = 0
    if rest is not None:
        released_bytes = int(
            conn.execute(
                f"SELECT total(size) FROM messages WHERE {where} AND NOT ack_wanted", args
            ).fetchone()[0]
        )
    # The common case first, one statement: every row of the range that asked for no
    # acknowledgment, journaling or FinalAck goes.
    count = conn.execute(f"DELETE FROM messages WHERE {where} AND NOT ack_wanted", args).rowcount
    # What is left of the range asked for something: a FinalAck (moved aside, as in the
    # listed path) or only acknowledgments, which a release does not raise (deleted).
    # One statement reads them all, without their bodies.
    moves: list[Remove] = []
    deletes: list[int] = []
    for r in conn.execute(f"SELECT {HEAD_SELECT} FROM messages m WHERE {where}", args).fetchall():
        lid, size = r[0], r[HEAD_SIZE]
        if awaiting is not None and _asked_final_ack(head_record(r)):
            moves.append(Remove(queue_id, lid, size, awaiting))
        else:
            deletes.append(lid)
            released_bytes += size
    apply_removes(ctx, moves)
    if deletes:
        delete_lookup_ids(conn, deletes)
        count += len(deletes)
    if count and rest is not None:
        conn.execute(
            "UPDATE queues SET msg_count = msg_count - ?, total_bytes = total_bytes - ? WHERE queue_id = ?",
            (count, released_bytes, queue_id),
        )
    elif count:
        # The range was all the queue held besides what moved (the last OrderAck of a
        # drain): what is left is what moved in (none, or the moves' counters already
        # applied by apply_removes), so no pass over the released rows for their sizes.
        conn.execute(
            "UPDATE queues SET msg_count = msg_count - ?, total_bytes = CASE WHEN msg_count = ?"
            " THEN 0 ELSE CAST((SELECT total(size) FROM messages WHERE queue_id = ?) AS INTEGER) END"
            " WHERE queue_id = ?",
            (count, count, queue_id, queue_id),
        )
    return [r.lookup_id for r in moves], count


@dataclass(frozen=True, slots=True)
class FinalAckOutcome:
    """What :func:`settle_final_acks` did with the message a FinalAck names."""

    #: The message as it waited, without its body (not read: a settlement moves or deletes
    #: the row as it is); None: no waiting message matches, the FinalAck is dropped.
    message: MessageRecord | None
    #: Queue it moved to (journal / transactional dead-letter), or None when deleted.
    target_queue_id: int | None
    #: The waiting message matched, but the caller's ``accept`` refused the FinalAck for it
    #: (it came from a QM the message was not sent to): nothing changed.
    refused: MessageRecord | None = None


def settle_final_acks(
    awaiting_queue_id: int,
    final_acks: Sequence[tuple[int, int, int, int]],
    journal_queue_id: int,
    deadletter_queue_id: int,
    accept: Callable[[int, MessageRecord], bool] | None = None,
) -> Callable[[WriteContext], list[FinalAckOutcome]]:
    """FinalAcks arrived for messages waiting in ``awaiting_queue_id`` (MS-MQQB 3.1.5.7),
    each ``(TxSequenceID, TxSequenceNumber, MessageID, class)``, settled in ONE
    transaction (a burst of FinalAcks, e.g. for messages a deleted queue rejected, costs
    one commit, not one each). Each is matched on (TxSequenceID, TxSequenceNumber,
    MessageID): JP and class AckReceive (0x4000) ⇒ the message moves to
    ``journal_queue_id``; JN and any other class ⇒ to ``deadletter_queue_id`` with the
    FinalAck's class as its Class; otherwise it is deleted. No match ⇒ nothing changes
    for that one (the caller logs and drops it). ``accept(i, message)``: whether the i-th
    FinalAck may settle the message it matched (the sender checks where it came from); a
    refused one changes nothing (``FinalAckOutcome.refused``). One outcome per FinalAck,
    in order."""

    def op(ctx: WriteContext) -> list[FinalAckOutcome]:
        outcomes: list[FinalAckOutcome] = []
        removes: list[Remove] = []
        taken: set[int] = set()
        for i, (tx_sequence_id, tx_sequence_number, message_id, message_class) in enumerate(final_acks):
            # Through the messages_final_ack index (schema 5): a message waiting for its
            # FinalAck asked for one, so ack_wanted is set; the queue is checked per row.
            # Not the body: the message moves or goes by its LookupIdentifier.
            rows = ctx.conn.execute(
                f"SELECT {HEAD_SELECT} FROM messages m WHERE m.tx_sequence_id = ?"
                " AND m.tx_sequence_number = ? AND m.ack_wanted AND +m.queue_id = ?",
                (to_i64(tx_sequence_id), tx_sequence_number, awaiting_queue_id),
            ).fetchall()
            outcome = FinalAckOutcome(None, None)
            for r in rows:
                m = head_record(r)
                if m.id_uniquifier & 0xFFFFFFFF != message_id & 0xFFFFFFFF or m.lookup_id in taken:
                    continue
                if accept is not None and not accept(i, m):
                    outcome = FinalAckOutcome(None, None, m)
                    break
                target: int | None = None
                new_class: int | None = None
                if message_class == 0x4000 and m.positive_journaling:
                    target = journal_queue_id
                elif message_class != 0x4000 and m.negative_journaling:
                    target, new_class = deadletter_queue_id, message_class
                # A repeated FinalAck in the same batch finds the message taken: no match.
                taken.add(m.lookup_id)
                removes.append(Remove(awaiting_queue_id, m.lookup_id, r[HEAD_SIZE], target, new_class))
                outcome = FinalAckOutcome(m, target)
                break
            outcomes.append(outcome)
        if removes:
            apply_removes(ctx, removes)
        return outcomes

    return op


def delete_sent(queue_id: int, lookup_ids: Sequence[int]) -> Callable[[WriteContext], int]:
    """Delete non-transactional messages of an outgoing queue that the next hop
    acknowledged (MS-MQQB 3.1.5.5.3), in one transaction; those already gone (expired,
    purged) are skipped. Returns how many were deleted."""

    def op(ctx: WriteContext) -> int:
        conn = ctx.conn
        found: list[int] = []
        size = 0
        ids = list(lookup_ids)
        for i in range(0, len(ids), IN_CHUNK):
            chunk = ids[i : i + IN_CHUNK]
            marks = ",".join("?" * len(chunk))
            # By LookupIdentifier (the rowid), the queue checked per row: with "queue_id = ?"
            # SQLite walked the queue's whole index for every chunk, so a backlog of N
            # non-transactional messages cost O(N) per SessionAck (+ disables that index).
            sql = f"SELECT lookup_id, size FROM messages WHERE lookup_id IN ({marks}) AND +queue_id = ?"
            for lid, n in conn.execute(sql, [*chunk, queue_id]):
                found.append(lid)
                size += n
        if found:
            apply_removes(ctx, (), [DeleteMany(queue_id, found, size)])
        return len(found)

    return op
