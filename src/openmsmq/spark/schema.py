"""Row layouts of the openmsmq data source (pure Python, no pyspark import).

:data:`READ_SCHEMA_DDL` is the schema of ``spark.read(Stream).format("openmsmq")``;
:func:`message_to_row` turns a peeked message into a row tuple in that column order.
:func:`check_write_schema` validates the columns of a DataFrame to be written and
:func:`row_to_message` turns one of its rows into an :class:`OutgoingMessage`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from openmsmq.errors import ConfigError
from openmsmq.spark.pages import PeekedMessage, WriterMessage

__all__ = [
    "READ_COLUMNS",
    "READ_SCHEMA_DDL",
    "WRITE_COLUMNS",
    "check_write_schema",
    "message_to_row",
    "row_to_message",
]

#: (column, Spark SQL type) of every row read; the order is the row tuple order.
READ_COLUMNS: tuple[tuple[str, str], ...] = (
    ("lookup_id", "BIGINT"),
    ("message_id", "STRING"),
    ("queue", "STRING"),
    ("label", "STRING"),
    ("body", "BINARY"),
    ("class", "INT"),
    ("priority", "INT"),
    ("correlation_id", "BINARY"),
    ("app_specific", "BIGINT"),
    ("sent_time", "TIMESTAMP"),
    ("arrived_time", "TIMESTAMP"),
    ("source_qm", "STRING"),
    ("tx_sequence_id", "BIGINT"),
    ("tx_sequence_number", "BIGINT"),
)

READ_SCHEMA_DDL = ", ".join(f"{name} {kind}" for name, kind in READ_COLUMNS)

#: Columns a written DataFrame may have: (name, accepted Spark type names, required).
WRITE_COLUMNS: tuple[tuple[str, frozenset[str], bool], ...] = (
    ("body", frozenset({"binary", "string"}), True),
    ("label", frozenset({"string"}), False),
    ("priority", frozenset({"tinyint", "smallint", "int", "bigint"}), False),
    ("correlation_id", frozenset({"binary"}), False),
    ("app_specific", frozenset({"tinyint", "smallint", "int", "bigint"}), False),
)


def _ts(seconds: int) -> datetime:
    return datetime.fromtimestamp(seconds, tz=UTC)


def message_to_row(queue: str, m: PeekedMessage) -> tuple[Any, ...]:
    """The output row of one peeked message, in :data:`READ_COLUMNS` order."""
    return (
        m.lookup_id,
        m.message_id,
        queue,
        m.label,
        m.body,
        m.message_class,
        m.priority,
        m.correlation_id,
        m.app_specific,
        _ts(m.sent_time),
        _ts(m.arrived_time),
        m.source_qm,
        m.tx_sequence_id,
        m.tx_sequence_number,
    )


def check_write_schema(columns: Mapping[str, str], identity_column: str | None) -> None:
    """Validate a DataFrame to be written, given ``{column name: Spark simpleString type}``.

    Raises :class:`ConfigError` at query start for a missing ``body``, a column of the
    wrong type, a column the writer would silently drop, or a bad ``identityColumn``.
    """
    allowed = {name: kinds for name, kinds, _ in WRITE_COLUMNS}
    if "body" not in columns:
        raise ConfigError("body", "the DataFrame to write needs a 'body' column (binary or string)")
    for name, kind in columns.items():
        if name == identity_column:
            if kind != "string":
                raise ConfigError(
                    "identityColumn",
                    f"column {name!r} named by option 'identityColumn' must be a string, not {kind}",
                )
            continue
        if name not in allowed:
            raise ConfigError(
                name,
                f"column {name!r} is not a message property; allowed columns: {', '.join(allowed)} "
                "(plus the column named by option 'identityColumn')",
            )
        if kind not in allowed[name]:
            raise ConfigError(
                name, f"column {name!r} has type {kind}; expected one of {sorted(allowed[name])}"
            )
    if identity_column is not None and identity_column not in columns:
        raise ConfigError(
            "identityColumn", f"option 'identityColumn' names column {identity_column!r}, which is missing"
        )


def row_to_message(
    row: Mapping[str, Any] | Sequence[Any], fields: Sequence[str], identity: str
) -> WriterMessage:
    """Build the :class:`OutgoingMessage` of one written row (``fields`` names its values)."""
    values = dict(row) if isinstance(row, Mapping) else dict(zip(fields, row, strict=True))
    body = values.get("body")
    if body is None:
        raise ValueError(f"row {identity}: 'body' is null")
    if isinstance(body, str):
        body = body.encode("utf-8")
    priority = values.get("priority")
    if priority is not None and not 0 <= int(priority) <= 7:
        raise ValueError(f"row {identity}: priority {priority} is outside 0-7")
    corr = values.get("correlation_id")
    if corr is not None and len(corr) != 20:
        raise ValueError(f"row {identity}: correlation_id must be 20 bytes, got {len(corr)}")
    app = values.get("app_specific")
    if app is not None and not 0 <= int(app) <= 0xFFFFFFFF:
        raise ValueError(f"row {identity}: app_specific {app} is outside 0-4294967295")
    return WriterMessage(
        identity=identity,
        body=bytes(body),
        label=values.get("label") or "",
        priority=3 if priority is None else int(priority),
        correlation_id=None if corr is None else bytes(corr),
        app_specific=0 if app is None else int(app),
    )
