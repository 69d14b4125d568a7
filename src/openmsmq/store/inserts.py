"""Multi-row INSERT statements of message rows (used by :mod:`openmsmq.store.ops`).

Rows are bound as built (:func:`openmsmq.store.records.message_to_row` order); SQLite
computes LookupIdentifiers, order keys and, for an outgoing queue, TxSequenceNumbers
from a few per-statement parameters.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from itertools import chain
from operator import attrgetter, itemgetter
from typing import TYPE_CHECKING, Any

from openmsmq.store.records import COL, MESSAGE_COLUMNS

if TYPE_CHECKING:
    from openmsmq.store.sends import Send

__all__ = ["insert_numbered", "insert_plain", "insert_rows"]

_TX_SEQ_ID = COL["tx_sequence_id"]
_TX_SEQ_NO = COL["tx_sequence_number"]
_TX_PREV_NO = COL["tx_previous_sequence_number"]
_MSG_COLS = ", ".join(MESSAGE_COLUMNS)
_ROW_WIDTH = len(MESSAGE_COLUMNS)
_PRIORITY_AT = COL["priority"]
#: Columns a batch of rows usually shares (a send_many of messages with the same
#: attributes): the "uniform" forms bind them once per statement. Binding is what a
#: multi-row INSERT spends most on per value (``sqlite3`` enters the connection's mutex
#: for each), so fewer values bound per row make a cheaper send (docs/store.md).
_SHARED = tuple(
    COL[c]
    for c in (
        "priority", "message_class", "transactional", "tx_sequence_id", "tx_sequence_number",
        "tx_previous_sequence_number", "arrived_time", "ack_wanted",
    )
)  # fmt: skip
#: The shared columns of the "numbered" form (SQLite numbers the sequence columns).
_SHARED_NUMBERED = tuple(
    COL[c] for c in ("priority", "message_class", "transactional", "arrived_time", "ack_wanted")
)
#: What each row binds in the uniform forms: tx_flags (First/LastInTransaction differ
#: within a transaction), size, props and body.
_OWN_COLS = tuple(COL[c] for c in ("tx_flags", "size", "props", "body"))
#: The forms that bind shared columns once: form -> (shared columns, each row's own).
_SPLIT = {
    "uniform": (_SHARED, _OWN_COLS),
    "numbered uniform": (_SHARED_NUMBERED, _OWN_COLS),
}
_shared_of = itemgetter(*_SHARED)
_shared_numbered_of = itemgetter(*_SHARED_NUMBERED)
_own_of = itemgetter(*_OWN_COLS)
#: Rows per multi-row INSERT statement (then one statement of the 1-7 rows left): few
#: distinct statements, so each stays in the connection's statement cache.
_CHUNKS = (64, 32, 16, 8)


def _insert_sql(n: int, form: str) -> str:
    """``INSERT`` of ``n`` message rows. Parameters: ``?1`` the first row's
    LookupIdentifier, then by ``form``:

    * ``"multi"``: the ``n`` rows (:data:`ROW_COLUMNS` each, flattened), then
      ``(queue_id, expire_at, expire_class)`` of each row;
    * ``"plain"`` (one queue, nothing expires): ``?2`` the queue, then the rows;
      ``expire_at`` / ``expire_class`` keep their defaults (NULL, 0): binding None costs
      ``sqlite3`` its adapter lookup per value;
    * ``"numbered"`` (one outgoing queue, transactional rows sharing one expiry):
      ``?2`` the queue, ``?3`` / ``?4`` expire_at / expire_class, ``?5`` the
      TxSequenceID, ``?6`` the first row's TxSequenceNumber, then the rows. Row ``j``
      gets TxSequenceNumber ``?6 + j`` and PreviousTxSequenceNumber ``?6 + j - 1``
      (MS-MQQB 3.1.7.1.3, numbered at commit);
    * ``"uniform"`` / ``"numbered uniform"``: as ``"plain"`` / ``"numbered"`` for rows
      that agree in every column of :data:`_SHARED` (``_SHARED_NUMBERED``): those are
      bound once, after the form's own parameters, and each row binds only
      :data:`_OWN_COLS` (tx_flags, size, props, body).

    Row ``j`` gets LookupIdentifier ``?1 + j`` and its order key ``((7 - priority) << 56)
    | (?1 + j)`` from SQLite, so Python binds the rows as they are, without a copy or a
    fill-in per row (the slots SQLite computes are bound but not used)."""
    numbered = form.startswith("numbered")
    head = 2 if form == "multi" else 7 if numbered else 3
    split = _SPLIT.get(form)
    at_shared: dict[int, str] = {}
    own: tuple[int, ...] = ()
    if split is not None:
        # The shared columns' parameters, then each row's own.
        shared, own = split
        at_shared = {col: f"?{head + i}" for i, col in enumerate(shared)}
        head += len(shared)
    values = []
    for j in range(n):
        lid = f"(?1 + {j})" if j else "?1"
        if split is not None:
            at = head + len(own) * j
            cols = [lid]
            for k in range(1, _ROW_WIDTH):
                if k in at_shared:
                    cols.append(at_shared[k])
                elif k in own:
                    cols.append(f"?{at + own.index(k)}")
                else:  # a sequence column of the numbered form: set below
                    cols.append("NULL")
        else:
            at = head + _ROW_WIDTH * j
            cols = [lid, *(f"?{at + k}" for k in range(1, _ROW_WIDTH))]
        key = f"((7 - {cols[_PRIORITY_AT]}) << 56) | {lid}"
        if numbered:
            cols[_TX_SEQ_ID] = "?5"
            cols[_TX_SEQ_NO] = f"(?6 + {j})"
            cols[_TX_PREV_NO] = f"(?6 + {j - 1})"
            cols += ["?2", key, "?3", "?4"]
        elif form != "multi":
            cols += ["?2", key]
        else:
            tail = head + _ROW_WIDTH * n + 3 * j
            cols += [f"?{tail}", key, f"?{tail + 1}", f"?{tail + 2}"]
        values.append(f"({', '.join(cols)})")
    extra = "queue_id, order_key"
    if form not in ("plain", "uniform"):
        extra += ", expire_at, expire_class"
    return f"INSERT INTO messages ({_MSG_COLS}, {extra}) VALUES {', '.join(values)}"


_SIZES = (*_CHUNKS, 7, 6, 5, 4, 3, 2, 1)
_INSERT_MULTI = {n: _insert_sql(n, "multi") for n in _SIZES}
_INSERT_PLAIN = {n: _insert_sql(n, "plain") for n in _SIZES}
_INSERT_NUMBERED = {n: _insert_sql(n, "numbered") for n in _SIZES}
_INSERT_UNIFORM = {n: _insert_sql(n, "uniform") for n in _SIZES}
_INSERT_NUMBERED_UNIFORM = {n: _insert_sql(n, "numbered uniform") for n in _SIZES}
#: One row, every value bound as it is (LookupIdentifier and order key from Python);
#: the plain form without the expiry columns.
_INSERT_ONE = (
    f"INSERT INTO messages ({_MSG_COLS}, queue_id, order_key, expire_at, expire_class)"
    f" VALUES ({', '.join('?' * (_ROW_WIDTH + 4))})"
)
_INSERT_ONE_PLAIN = (
    f"INSERT INTO messages ({_MSG_COLS}, queue_id, order_key) VALUES ({', '.join('?' * (_ROW_WIDTH + 2))})"
)
_EXPIRY = attrgetter("expire_at", "expire_class")
#: The expiry of every Send of a plain INSERT: the columns' defaults.
_NO_EXPIRY = {(None, 0)}
_TAIL = attrgetter("queue_id", "expire_at", "expire_class")


def _chunks(n: int) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` of the rows of each statement inserting ``n`` rows: chunks of
    64/32/16/8 rows, then one statement of the 1-7 rows left."""
    i = 0
    while i < n:
        left = n - i
        j = i + (left if left <= 7 else next(c for c in _CHUNKS if c <= left))
        yield i, j
        i = j


def insert_rows(
    conn: sqlite3.Connection, first: int, rows: list[list[Any]], sends: Sequence[Send], queue_id: int | None
) -> None:
    """INSERT message rows in order, LookupIdentifiers from ``first``, as multi-row
    ``INSERT … VALUES (…), (…)`` statements (:func:`_insert_sql`, :func:`_chunks`).
    ``rows[j]`` is the row of ``sends[j]`` (queue, expiry); ``queue_id`` is the queue of
    all of them, if they share one.

    ``executemany`` steps its statement once per row (Python's sqlite3 releasing and
    retaking the GIL around each step); a multi-row statement binds all values and steps
    once, which is cheaper for large batches and no dearer for small ones
    (docs/benchmarks.md). The parameters are gathered by C iterators (``chain``,
    ``attrgetter``): no Python step per row.
    """
    if len(rows) == 1:
        s = sends[0]
        if s.expire_at is None and not s.expire_class:
            insert_plain(conn, first, rows, s.queue_id)
        else:
            row = rows[0]
            key = ((7 - row[_PRIORITY_AT]) << 56) | first  # order_key
            conn.execute(_INSERT_ONE, [first, *row[1:], s.queue_id, key, s.expire_at, s.expire_class])
        return
    if queue_id is not None and set(map(_EXPIRY, sends)) == _NO_EXPIRY:
        insert_plain(conn, first, rows, queue_id)
        return
    for i, j in _chunks(len(rows)):
        params = [first + i]
        params += chain.from_iterable(rows[i:j])
        params += chain.from_iterable(map(_TAIL, sends[i:j]))
        conn.execute(_INSERT_MULTI[j - i], params)


def insert_plain(conn: sqlite3.Connection, first: int, rows: Sequence[list[Any]], queue_id: int) -> None:
    """:func:`insert_rows` of rows of one queue that never expire (``expire_at`` /
    ``expire_class`` keep their defaults): the queue is bound once per statement, and so
    are the columns all the rows share (the "uniform" form), when they share them."""
    if len(rows) == 1:
        # One row binds its values directly: the computed form costs more for a 1-row
        # INSERT than plain parameters (it pays off from a few rows on).
        row = rows[0]
        key = ((7 - row[_PRIORITY_AT]) << 56) | first  # order_key
        conn.execute(_INSERT_ONE_PLAIN, [first, *row[1:], queue_id, key])
        return
    # The usual batch: one send_many of messages alike but for their bodies. A receiving
    # QM's run of one incoming sequence differs in its sequence numbers: the first and
    # last rows tell, before the check of every row.
    head, tail = rows[0], rows[-1]
    uniform = (
        head[_TX_SEQ_NO] == tail[_TX_SEQ_NO]
        and head[_TX_PREV_NO] == tail[_TX_PREV_NO]
        and len(set(map(_shared_of, rows))) == 1
    )
    statements, shared = (_INSERT_UNIFORM, _shared_of(head)) if uniform else (_INSERT_PLAIN, ())
    for i, j in _chunks(len(rows)):
        params = [first + i, queue_id, *shared]
        params += _bound(rows[i:j], uniform)
        conn.execute(statements[j - i], params)


def insert_numbered(
    conn: sqlite3.Connection,
    first: int,
    rows: Sequence[list[Any]],
    queue_id: int,
    expiry: tuple[int | None, int],
    tx_sequence_id: int,
    first_number: int,
) -> None:
    """INSERT transactional rows of one outgoing queue that share an expiry, in order:
    LookupIdentifiers from ``first``, TxSequenceNumbers from ``first_number`` in
    ``tx_sequence_id`` (signed 64-bit as stored), numbered by SQLite (:func:`_insert_sql`
    ``"numbered"``): the rows are bound as they are, not copied to be numbered, and the
    queue and expiry once per statement instead of once per row (:func:`_chunks`), and
    the columns the rows share too when they do (the "numbered uniform" form)."""
    expire_at, expire_class = expiry
    uniform = len(rows) > 1 and len(set(map(_shared_numbered_of, rows))) == 1
    statements, shared = (
        (_INSERT_NUMBERED_UNIFORM, _shared_numbered_of(rows[0])) if uniform else (_INSERT_NUMBERED, ())
    )
    for i, j in _chunks(len(rows)):
        params = [first + i, queue_id, expire_at, expire_class, tx_sequence_id, first_number + i, *shared]
        params += _bound(rows[i:j], uniform)
        conn.execute(statements[j - i], params)


def _bound(rows: Sequence[list[Any]], uniform: bool) -> Iterator[Any]:
    """What ``rows`` bind after a statement's own parameters: every value of each row, or
    in a uniform form only each row's :data:`_OWN_COLS`."""
    return chain.from_iterable(map(_own_of, rows) if uniform else rows)
