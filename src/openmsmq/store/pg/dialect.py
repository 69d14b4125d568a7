"""The store's statements on a PostgreSQL connection.

The store's operations (:mod:`openmsmq.store.ops`, ``outgoing``, ``queues``, ``ranges``,
``reads``) are written once, as parameterised SQL on a DB-API connection with SQLite's
placeholders (``?`` and ``?N``). :class:`PgConnection` runs them on a psycopg 3
connection: :func:`translate` rewrites a statement once (cached by its text) into
PostgreSQL's form. What differs between the engines:

* placeholders: ``?N`` may repeat and ``?`` takes the next number after the highest
  so far (SQLite's rule); PostgreSQL gets the same numbers as ``$N`` (a raw cursor:
  the parameters bind as they are);
* integers are bound as ``bigint`` (SQLite's INTEGER is 64-bit; psycopg would pick the
  smallest type, and ``(7 - priority) << 56`` in ``int2`` is not the order key) and
  Python booleans as ``bigint`` 0 / 1, the columns' type;
* ``numeric`` results (``sum`` of ``bigint``) come back as ``int``, as SQLite's do;
* the few SQLite-only forms the store uses: ``total(x)`` (``coalesce(sum(x), 0)``),
  ``json_each(?)`` (``json_array_elements_text``), a flag column as a condition
  (``ack_wanted <> 0``), ``cursor.lastrowid`` of a new queue (``RETURNING queue_id``) and
  ``BEGIN`` on a read connection (a REPEATABLE READ snapshot, what SQLite's read
  transaction gives).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import psycopg
from psycopg import adapt, pq
from psycopg.types.numeric import Int8BinaryDumper, Int8Dumper

__all__ = ["PgConnection", "PgCursor", "configure", "translate"]

_INT8_OID = 20


class _BoolAsInt8(adapt.Dumper):
    """Python booleans as ``bigint`` 0 / 1: the store's flag columns are integers."""

    oid = _INT8_OID

    def dump(self, obj: Any) -> bytes:
        return b"1" if obj else b"0"


class _NumericAsNumber(adapt.Loader):
    """``numeric`` (``sum`` over ``bigint``) as ``int`` when integral, else ``float``."""

    def load(self, data: Any) -> Any:
        raw = bytes(data)
        if b"." in raw or b"e" in raw or b"N" in raw:
            return float(raw)
        return int(raw)


def configure(conn: psycopg.Connection[Any]) -> None:
    """Register the store's adaptations on ``conn`` (see the module docstring)."""
    adapters = conn.adapters
    adapters.register_dumper(int, Int8Dumper)
    adapters.register_dumper(int, Int8BinaryDumper)
    adapters.register_dumper(bool, _BoolAsInt8)
    adapters.register_loader("numeric", _NumericAsNumber)


# ---- statement translation ----------------------------------------------------------

_TOKEN = re.compile(r"'(?:[^']|'')*'|\?(\d*)")
_REWRITES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"\btotal\(([^()]*)\)"), r"coalesce(sum(\1), 0)"),
    (
        re.compile(r"SELECT value FROM json_each\(\?\)"),
        "SELECT value::bigint FROM json_array_elements_text(?::json)",
    ),
    (re.compile(r"FROM json_each\(\?\)"), "FROM json_array_elements_text(?::json)"),
    (re.compile(r"\bNOT\s+((?:\w+\.)?ack_wanted)\b"), r"\1 = 0"),
    (re.compile(r"\b(AND|WHERE)\s+((?:\w+\.)?ack_wanted)\b(?!\s*(?:=|!=|<>|<|>))"), r"\1 \2 <> 0"),
    (re.compile(r"\bmax\(((?:\w+\.)?ack_wanted)\)"), r"max(\1)"),
    # An upsert's SET reads the stored row's column by the table's name (unqualified,
    # PostgreSQL finds it ambiguous with ``excluded``).
    (re.compile(r"\bTHEN (sender_address|direct_format_session) ELSE"), r"THEN incoming_sequences.\1 ELSE"),
    # A subquery in FROM needs an alias in PostgreSQL before 16.
    (re.compile(r"\(SELECT min\(t\) FROM \((.*)\)\) END"), r"(SELECT min(t) FROM (\1) AS bands) END"),
)
#: Tables whose new row's key a caller reads as ``cursor.lastrowid``.
_ROWID = {"queues": "queue_id"}
_INSERT_INTO = re.compile(r"^\s*INSERT\s+INTO\s+(\w+)", re.IGNORECASE)


class Translated:
    """A statement in PostgreSQL's form (``$N`` placeholders)."""

    __slots__ = ("returns_rowid", "sql")

    def __init__(self, sql: str, returns_rowid: bool) -> None:
        self.sql = sql
        self.returns_rowid = returns_rowid


_cache: dict[str, Translated] = {}


def translate(sql: str) -> Translated:
    """``sql`` (SQLite's form, as the store writes it) in PostgreSQL's form; cached.

    ``?N`` becomes ``$N`` and ``?`` the next number after the highest so far (SQLite's
    rule), so the parameters bind as they are, without reordering."""
    got = _cache.get(sql)
    if got is not None:
        return got
    text = sql
    for pattern, repl in _REWRITES:
        text = pattern.sub(repl, text)
    highest = 0
    out: list[str] = []
    pos = 0
    for m in _TOKEN.finditer(text):
        tok = m.group(0)
        out.append(text[pos : m.start()])
        pos = m.end()
        if tok.startswith("?"):
            n = int(m.group(1)) if m.group(1) else highest + 1
            highest = max(highest, n)
            out.append(f"${n}")
        else:
            out.append(tok)  # a string literal, as it is
    out.append(text[pos:])
    pg = "".join(out)
    returns_rowid = False
    head = _INSERT_INTO.match(pg)
    if head and head.group(1) in _ROWID and "RETURNING" not in pg.upper():
        pg += f" RETURNING {_ROWID[head.group(1)]}"
        returns_rowid = True
    got = Translated(pg, returns_rowid)
    if len(_cache) > 4096:
        _cache.clear()
    _cache[sql] = got
    return got


# ---- connection and cursor ----------------------------------------------------------


class PgCursor:
    """The part of a DB-API cursor the store uses, over a psycopg cursor."""

    __slots__ = ("_cur", "lastrowid", "rowcount")

    def __init__(self, cur: psycopg.Cursor[Any], rowcount: int, lastrowid: int | None = None) -> None:
        self._cur = cur
        self.rowcount = rowcount
        self.lastrowid = lastrowid

    def fetchone(self) -> Any:
        return self._cur.fetchone()

    def fetchall(self) -> list[Any]:
        return self._cur.fetchall()

    def fetchmany(self, size: int = 1) -> list[Any]:
        return self._cur.fetchmany(size)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._cur)


class PgConnection:
    """A psycopg connection (autocommit: the store opens its transactions itself) with
    the ``execute`` / ``executemany`` / ``in_transaction`` of ``sqlite3.Connection`` that
    the store's operations use. ``reader``: a read connection, whose ``BEGIN`` opens a
    REPEATABLE READ snapshot (the consistent view of SQLite's read transaction).

    ``statements`` counts the statements sent: round trips, for the benchmarks and the
    tests that keep the hot path free of per-message ones (``executemany`` sends its rows
    in one pipeline, counted once)."""

    def __init__(self, raw: psycopg.Connection[Any], *, reader: bool = False) -> None:
        self.raw = raw
        self.reader = reader
        self.statements = 0

    @property
    def in_transaction(self) -> bool:
        return self.raw.info.transaction_status != pq.TransactionStatus.IDLE

    @property
    def broken(self) -> bool:
        return self.raw.closed or self.raw.broken

    def execute(self, sql: str, params: Sequence[Any] | None = None) -> PgCursor:
        if self.reader and sql == "BEGIN":
            sql = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
        tr = translate(sql)
        self.statements += 1
        # A raw cursor binds $N as they are: psycopg parses no placeholders (and caches no
        # parse of the long multi-row INSERTs).
        cur = psycopg.RawCursor(self.raw)
        cur.execute(tr.sql, params)
        if tr.returns_rowid:
            row = cur.fetchone()
            return PgCursor(cur, cur.rowcount, int(row[0]) if row else None)
        return PgCursor(cur, cur.rowcount)

    def begin_with(self, sql: str) -> Any:
        """``BEGIN`` and the parameterless query ``sql`` (PostgreSQL's form) in ONE round
        trip (the simple query protocol runs both); the query's first row."""
        self.statements += 1
        cur = psycopg.RawCursor(self.raw)
        cur.execute(f"BEGIN; {sql}")
        cur.nextset()
        return cur.fetchone()

    def executemany(self, sql: str, seq: Iterable[Sequence[Any]]) -> PgCursor:
        tr = translate(sql)
        rows = list(seq)
        cur = psycopg.RawCursor(self.raw)
        self.statements += 1
        if rows:
            cur.executemany(tr.sql, rows)
        return PgCursor(cur, cur.rowcount if rows else 0)

    def close(self) -> None:
        self.raw.close()
