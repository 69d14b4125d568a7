"""Structured logging on the standard :mod:`logging` module: one line per event.

A line carries the standard fields ``ts`` (ISO 8601 UTC, milliseconds), ``level``,
``logger`` and ``event``, then the event's own fields, then ``exc`` when an exception
is attached. Two formats (``[log] format`` in the configuration):

``kv``::

    ts=2026-11-22T04:25:38.123Z level=info logger=openmsmq.net event=session_opened peer=10.0.0.5:1801

``json`` (one object per line, same keys)::

    {"ts": "2026-11-22T04:25:38.123Z", "level": "info", "logger": "openmsmq.net", "event": "...", ...}

Code emits events with :func:`log_event` (or a :class:`BoundLogger` from :func:`bind`
that carries context such as ``peer`` and ``session``)::

    log = logging.getLogger("openmsmq.transfer")
    log_event(log, "order_ack_sent", peer=peer, tx_sequence_id=seq, tx_sequence_number=n)

Both check ``logger.isEnabledFor(level)`` before building anything, so a disabled
debug event costs one method call. Fields whose value is ``None`` are left out.
Records logged the classic way (``log.info("connection from %s", peer)``) are
formatted too: the rendered message is their ``event``, and the context fields of
:data:`CONTEXT_FIELDS` given through ``extra=`` are picked up.

Only the standard library and :mod:`openmsmq.redact` are imported here.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import re
import sys
import time
import uuid
from collections.abc import Mapping
from enum import Enum
from typing import IO, Any

from openmsmq.redact import redact

__all__ = [
    "CONTEXT_FIELDS",
    "BoundLogger",
    "StructuredFormatter",
    "bind",
    "configure_logging",
    "format_kv",
    "log_event",
]

#: Context fields understood everywhere (also picked up from ``extra=`` of classic calls):
#: the peer address, the MS-MQQB session, the queue (format name), the message
#: Identifier, the transactional sequence (TxSequenceID, TxSequenceNumber) and an
#: MS-MQMQ 2.4 HRESULT.
CONTEXT_FIELDS: tuple[str, ...] = (
    "peer",
    "session",
    "queue",
    "message_id",
    "tx_sequence_id",
    "tx_sequence_number",
    "hresult",
)

#: Attribute of a LogRecord that holds the fields of a :func:`log_event` call.
_FIELDS_ATTR = "openmsmq_fields"
_STANDARD = ("ts", "level", "logger", "event")
_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING}
_LEVELS.update({"error": logging.ERROR, "critical": logging.CRITICAL})
#: The handler installed by :func:`configure_logging` (replaced on reconfiguration).
_HANDLER_MARK = "_openmsmq_structured"


# --------------------------------------------------------------------------------------------------
# Rendering values
# --------------------------------------------------------------------------------------------------


def _plain(key: str, value: Any) -> Any:
    """A JSON-ready value: str / int / float / bool / list / dict."""
    cls = type(value)
    if cls is str or (cls is int and key != "hresult"):
        return value
    if isinstance(value, bool) or value is None:
        return value
    if key == "hresult" and isinstance(value, int):
        # HRESULTs read best in the spec's hex spelling (MS-MQMQ 2.4).
        return f"0x{int(value) & 0xFFFFFFFF:08X}"
    if isinstance(value, Enum):
        return value.name
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, uuid.UUID):
        return "{" + str(value) + "}"
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(key, v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _plain(str(k), v) for k, v in value.items()}
    return str(value)


@functools.lru_cache(maxsize=1024)
def _key_text(key: str) -> str:
    """Keys are identifiers: anything but ``[A-Za-z0-9_.-]`` becomes ``_`` (memoised: keys repeat)."""
    return _KEY_BAD.sub("_", key) or "_"


_KEY_BAD = re.compile(r"[^A-Za-z0-9_.\-]")
#: Printable ASCII except space, ``"``, ``=`` and ``\``: such a value needs no quotes.
_BARE = re.compile(r"[!#-<>-\[\]-~]+")


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
_ESCAPE_RE = re.compile(r'["\\\x00-\x1f\x7f]')


def _escape_char(c: str) -> str:
    if c in _ESCAPES:
        return _ESCAPES[c]
    code = ord(c)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _kv_value(value: Any) -> str:
    """A value as it appears after ``key=``: bare when safe, else double-quoted with escapes."""
    if type(value) is str:
        text = value
    elif value is True:
        return "true"
    elif value is False:
        return "false"
    elif isinstance(value, (int, float)):
        return repr(value)
    elif isinstance(value, (list, dict)):
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    else:
        text = str(value)
    if _BARE.fullmatch(text) or (
        text and not text.isascii() and all(c.isprintable() and c not in ' "=\\' for c in text)
    ):
        return text
    text = _ESCAPE_RE.sub(lambda m: _escape_char(m.group()), text)
    if not text.isprintable():  # rare: non-ASCII control or format characters
        text = "".join(c if c.isprintable() else _escape_char(c) for c in text)
    return '"' + text + '"'


def format_kv(fields: Mapping[str, Any]) -> str:
    """``key=value`` pairs separated by one space, values quoted where needed.

    A value is quoted when it is empty or holds a space, ``"``, ``=``, ``\\`` or a
    non-printable character; inside quotes ``"`` and ``\\`` are backslash-escaped,
    newline / CR / tab are ``\\n`` / ``\\r`` / ``\\t`` and other control characters
    ``\\xNN`` / ``\\uNNNN``.
    """
    return " ".join(f"{_key_text(k)}={_kv_value(_plain(k, v))}" for k, v in fields.items() if v is not None)


# --------------------------------------------------------------------------------------------------
# The formatter
# --------------------------------------------------------------------------------------------------


def _timestamp(created: float) -> str:
    seconds = int(created)
    millis = int((created - seconds) * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


class StructuredFormatter(logging.Formatter):
    """Formats every record as one ``kv`` or ``json`` line (see the module docstring)."""

    def __init__(self, fmt: str = "kv") -> None:
        super().__init__()
        if fmt not in ("kv", "json"):
            raise ValueError(f"log format must be 'kv' or 'json', got {fmt!r}")
        self.fmt = fmt

    def fields_of(self, record: logging.LogRecord) -> dict[str, Any]:
        """The ordered fields of a record: standard ones, event fields, then ``exc``."""
        out: dict[str, Any] = {
            "ts": _timestamp(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        given: Mapping[str, Any] | None = getattr(record, _FIELDS_ATTR, None)
        if given is None:
            for name in CONTEXT_FIELDS:
                value = getattr(record, name, None)
                if value is not None:
                    out[name] = value
        else:
            for name, value in given.items():
                if value is not None:
                    # An event field never hides a standard one.
                    out[name if name not in _STANDARD else name + "_"] = value
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exc"] = record.exc_text
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return out

    def format(self, record: logging.LogRecord) -> str:
        """One line, without the trailing newline (the handler adds it); secrets such as a
        bearer token in a target URL are masked (:func:`openmsmq.redact.redact`)."""
        fields = self.fields_of(record)
        if self.fmt == "json":
            return redact(json.dumps({k: _plain(k, v) for k, v in fields.items()}, ensure_ascii=False))
        return redact(format_kv(fields))


# --------------------------------------------------------------------------------------------------
# Configuration and emitting events
# --------------------------------------------------------------------------------------------------


def _level(level: str | int) -> int:
    if isinstance(level, int):
        return level
    try:
        return _LEVELS[level.strip().lower()]
    except KeyError:
        raise ValueError(f"unknown log level {level!r}; levels: {', '.join(_LEVELS)}") from None


def configure_logging(
    level: str | int = "info",
    fmt: str = "kv",
    stream: IO[str] | None = None,
    *,
    logger: str = "",
) -> logging.Handler:
    """Send log records of ``logger`` (default: the root logger, so libraries' records
    too) at ``level`` and above to ``stream`` (default stderr), one structured line each.

    ``level`` is a name of ``[log] level`` (``debug`` … ``critical``) or a number;
    ``fmt`` is ``"kv"`` or ``"json"``. Calling it again replaces the handler it
    installed before (handlers installed by others are left alone). Returns the handler.
    """
    numeric = _level(level)
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(StructuredFormatter(fmt))
    setattr(handler, _HANDLER_MARK, True)
    target = logging.getLogger(logger)
    for old in list(target.handlers):
        if getattr(old, _HANDLER_MARK, False):
            target.removeHandler(old)
            old.close()
    target.addHandler(handler)
    target.setLevel(numeric)
    return handler


def log_event(
    logger: logging.Logger,
    event: str,
    /,
    level: int = logging.INFO,
    *,
    exc_info: Any = None,
    **fields: Any,
) -> None:
    """Log ``event`` (a short snake_case name such as ``session_opened``) with ``fields``.

    Nothing is built when ``level`` is disabled for ``logger``. ``exc_info=True`` (or an
    exception) attaches a traceback as the ``exc`` field.
    """
    if logger.isEnabledFor(level):
        logger.log(level, "%s", event, exc_info=exc_info, extra={_FIELDS_ATTR: fields}, stacklevel=2)


class BoundLogger:
    """A logger with context fields bound once (``peer``, ``session``, ``queue`` …).

    ``log = bind(logging.getLogger("openmsmq.net"), peer="10.0.0.5:1801")`` then
    ``log.info("session_opened", role="initiator")``; :meth:`bind` adds more context.
    Event fields override bound ones of the same name.
    """

    __slots__ = ("context", "logger")

    def __init__(self, logger: logging.Logger, context: Mapping[str, Any]) -> None:
        self.logger = logger
        self.context = dict(context)

    def bind(self, **context: Any) -> BoundLogger:
        """A new BoundLogger with more context."""
        return BoundLogger(self.logger, {**self.context, **context})

    def is_enabled(self, level: int) -> bool:
        """True if events at ``level`` would be emitted (guard costly field values)."""
        return self.logger.isEnabledFor(level)

    def log(self, level: int, event: str, /, *, exc_info: Any = None, **fields: Any) -> None:
        """Log ``event`` at ``level`` with the bound context and ``fields``."""
        if self.logger.isEnabledFor(level):
            merged = {**self.context, **fields} if fields else self.context
            self.logger.log(level, "%s", event, exc_info=exc_info, extra={_FIELDS_ATTR: merged}, stacklevel=3)

    def debug(self, event: str, /, **fields: Any) -> None:
        """Log at DEBUG."""
        self.log(logging.DEBUG, event, **fields)

    def info(self, event: str, /, **fields: Any) -> None:
        """Log at INFO."""
        self.log(logging.INFO, event, **fields)

    def warning(self, event: str, /, **fields: Any) -> None:
        """Log at WARNING."""
        self.log(logging.WARNING, event, **fields)

    def error(self, event: str, /, **fields: Any) -> None:
        """Log at ERROR."""
        self.log(logging.ERROR, event, **fields)

    def exception(self, event: str, /, **fields: Any) -> None:
        """Log at ERROR with the current exception's traceback (call from ``except``)."""
        self.log(logging.ERROR, event, exc_info=True, **fields)


def bind(logger: logging.Logger | str, **context: Any) -> BoundLogger:
    """A :class:`BoundLogger` over ``logger`` (a Logger or a logger name) with ``context``."""
    if isinstance(logger, str):
        logger = logging.getLogger(logger)
    return BoundLogger(logger, context)
