"""Queue path names and the local forms of format names (MS-MQMQ 2.1.1, 2.1.2, 2.1.3).

Names are case-insensitive (ABNF quoted strings, MS-MQMQ 2.1; Expand Format Name
compares case-insensitively): the canonical key of a queue is its lower-cased
``private$\\name`` / ``system$;deadletter`` form without the computer part.
"""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass

from openmsmq.errors import HResult, MQError

__all__ = [
    "DEADLETTER",
    "DEADXACT",
    "ORDER_QUEUE",
    "ORDER_QUEUE_NUMBER",
    "SYSTEM_JOURNAL",
    "ParsedName",
    "parse_name",
]

#: SystemDeadletterQueue (MS-MQDMPR 3.1.1.1), QUEUE_SUFFIX_TYPE_DEADLETTER.
DEADLETTER = "system$;deadletter"
#: SystemTransactionalDeadletterQueue, QUEUE_SUFFIX_TYPE_DEADXACT.
DEADXACT = "system$;deadxact"
#: SystemJournalQueue (computer journal), QUEUE_SUFFIX_TYPE_JOURNAL.
SYSTEM_JOURNAL = "system$;journal"
#: Order acknowledgment queue (MS-MQQB 3.1.7.17): private queue number 4.
ORDER_QUEUE = "private$\\order_queue$"
ORDER_QUEUE_NUMBER = 0x00000004

_BAD_CHARS = set('\\;+,"')
_SYSTEM_SUFFIXES = {"deadletter": DEADLETTER, "deadxact": DEADXACT, "journal": SYSTEM_JOURNAL}


@dataclass(frozen=True, slots=True)
class ParsedName:
    """A queue name resolved as far as the names alone allow.

    ``key`` is the canonical local key (or None); ``computer`` the computer part
    (None when absent or ``.``); ``private_number`` is set for ``PRIVATE=guid\\n``
    names (with ``qm_guid``); ``remote`` is True for a format name that cannot be
    local (the caller routes it to an outgoing queue).
    """

    key: str | None
    display: str
    computer: str | None = None
    qm_guid: uuid.UUID | None = None
    private_number: int | None = None
    is_format_name: bool = False


def _illegal(name: str, why: str) -> MQError:
    return MQError(HResult.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME, f"{name!r}: {why}")


def _check_queue_name(full: str, qname: str) -> None:
    if not 1 <= len(qname) <= 124:
        raise _illegal(full, "a queue name has 1 to 124 characters (MS-MQMQ 2.1.1)")
    if any(c in _BAD_CHARS for c in qname):
        raise _illegal(full, 'a queue name may not contain \\ ; + , or " (MS-MQMQ 2.1.1)')


def _parse_path(full: str, path: str) -> tuple[str | None, str, str]:
    """Split ``[computer\\]private$\\name[;journal]`` / ``[computer\\]system$;x``."""
    computer: str | None = None
    low = path.lower()
    if not (low.startswith("private$\\") or low.startswith("system$;")):
        head, sep, rest = path.partition("\\")
        if not sep:
            raise _illegal(full, "expected private$\\<name> (public queues need a directory service)")
        computer = None if head in (".", "") else head
        path, low = rest, rest.lower()
    if low.startswith("system$;"):
        suffix = low[len("system$;") :]
        if suffix not in _SYSTEM_SUFFIXES:
            raise _illegal(full, "unknown system queue (journal, deadletter, deadxact)")
        return computer, _SYSTEM_SUFFIXES[suffix], path
    if not low.startswith("private$\\"):
        raise _illegal(full, "expected private$\\<name> (public queues need a directory service)")
    qname = path[len("private$\\") :]
    journal = False
    if qname.lower().endswith(";journal"):
        qname, journal = qname[: -len(";journal")], True
    _check_queue_name(full, qname)
    key = "private$\\" + qname.lower() + (";journal" if journal else "")
    return computer, key, path


@functools.lru_cache(maxsize=4096)
def parse_name(name: str) -> ParsedName:
    """Parse a path name or a DIRECT= / PRIVATE= format name (memoised: names repeat).

    Raises MQ_ERROR_ILLEGAL_QUEUE_PATHNAME / MQ_ERROR_ILLEGAL_FORMATNAME on bad syntax.
    """
    text = name.strip()
    upper = text.upper()
    if upper.startswith("DIRECT="):
        proto, sep, rest = text[len("DIRECT=") :].partition(":")
        if not sep or proto.upper() not in ("OS", "TCP"):
            raise MQError(HResult.MQ_ERROR_ILLEGAL_FORMATNAME, f"{name!r}: only DIRECT=OS: and DIRECT=TCP:")
        host, sep, path = rest.partition("\\")
        if not sep or not host:
            raise MQError(HResult.MQ_ERROR_ILLEGAL_FORMATNAME, f"{name!r}: expected <address>\\<queue>")
        _, key, shown = _parse_path(name, path)
        return ParsedName(key, shown, computer=host, is_format_name=True)
    if upper.startswith("PRIVATE="):
        guid_text, sep, number = text[len("PRIVATE=") :].partition("\\")
        try:
            guid = uuid.UUID(guid_text)
            num = int(number.split(";")[0], 16)
        except ValueError as exc:
            raise MQError(HResult.MQ_ERROR_ILLEGAL_FORMATNAME, f"{name!r}: {exc}") from exc
        return ParsedName(None, text, qm_guid=guid, private_number=num, is_format_name=True)
    if "=" in text.split("\\")[0]:
        raise MQError(HResult.MQ_ERROR_ILLEGAL_FORMATNAME, f"{name!r}: unsupported format name")
    computer, key, shown = _parse_path(name, text)
    return ParsedName(key, shown, computer=computer)
