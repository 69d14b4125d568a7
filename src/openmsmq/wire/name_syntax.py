"""Lexical rules shared by queue path names and format names (MS-MQMQ 2.1.1-2.1.7, 2.2.6, 2.2.11).

The enums a name carries (QUEUE_FORMAT_TYPE, QUEUE_SUFFIX_TYPE, the direct protocols),
the length limits of the ABNF, character checks, GUID parsing and the error helpers that
raise ``MQError(MQ_ERROR_ILLEGAL_FORMATNAME)`` with the offending position. The values and
the parser live in :mod:`openmsmq.wire.format_name`, which re-exports the public names.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import fields
from enum import Enum, IntEnum, StrEnum
from typing import Any, NoReturn, TypeVar
from uuid import UUID

from openmsmq.errors import HResult, MQError, quoted

MAX_QUEUE_NAME = 124  # MS-MQMQ 2.1.1: QueueName = 1*124(...)
MAX_SUBQUEUE = 32  # MS-MQMQ 2.1.1: Subqueue = 1*32(...)
MAX_COMPUTER = 256  # MS-MQMQ 2.1.1: Computer = 1*256(VCHAR)
MAX_DOMAIN = 255  # MS-MQMQ 2.1.5: DomainName = 1*255(VCHAR)
_GUID_RE = re.compile(r"[0-9A-Fa-f]{8}-(?:[0-9A-Fa-f]{4}-){3}[0-9A-Fa-f]{12}")
HEX8_RE = re.compile(r"[0-9A-Fa-f]{1,8}")
DEC_RE = re.compile(r"0|[1-9][0-9]{0,4}")
_QUEUE_EXCLUDED = frozenset('\\;+,"')  # MS-MQMQ 2.1.1 (MSMQ 2.0+)


class QueueFormatType(IntEnum):
    """QUEUE_FORMAT_TYPE, the ``m_qft`` discriminant of QUEUE_FORMAT (MS-MQMQ 2.2.6)."""

    UNKNOWN = 0  #: No queue (MS-MQMQ 2.2.6); used here for multiple-element names.
    PUBLIC = 1  #: ``PUBLIC=`` (MS-MQMQ 2.1.3).
    PRIVATE = 2  #: ``PRIVATE=`` (MS-MQMQ 2.1.4).
    DIRECT = 3  #: ``DIRECT=`` without a subqueue (MS-MQMQ 2.1.2).
    MACHINE = 4  #: ``MACHINE=`` (MS-MQMQ 2.1.6).
    CONNECTOR = 5  #: ``CONNECTOR=`` (MS-MQMQ 2.1.6).
    DL = 6  #: ``DL=`` (MS-MQMQ 2.1.5).
    MULTICAST = 7  #: ``MULTICAST=`` (MS-MQMQ 2.1.6).
    SUBQUEUE = 8  #: ``DIRECT=`` naming a ``;subqueue`` (MS-MQMQ 2.2.6, MSMQ 4.0+).


class QueueSuffixType(IntEnum):
    """QUEUE_SUFFIX_TYPE, the low nibble of ``m_SuffixAndFlags`` (MS-MQMQ 2.2.11, 2.2.7)."""

    NONE = 0  #: No suffix (MS-MQMQ 2.2.11).
    JOURNAL = 1  #: The queue journal, or a computer's journal (MS-MQMQ 2.2.11).
    DEADLETTER = 2  #: A computer's non-transactional dead-letter queue (MS-MQMQ 2.2.11).
    DEADXACT = 3  #: A computer's transactional dead-letter queue (MS-MQMQ 2.2.11).
    XACTONLY = 4  #: The transacted connector queue (MS-MQMQ 2.2.11).
    SUBQUEUE = 5  #: A subqueue of a direct name (MS-MQMQ 2.2.11).

    @property
    def system_flag(self) -> int:
        """The high nibble of ``m_SuffixAndFlags``: 0x80 for system queues (MS-MQMQ 2.2.7)."""
        return 0x80 if self in SYSTEM_SUFFIXES else 0x00


SYSTEM_SUFFIXES = frozenset({QueueSuffixType.JOURNAL, QueueSuffixType.DEADLETTER, QueueSuffixType.DEADXACT})
RESERVED_WORDS = frozenset({"journal", "deadletter", "deadxact", "xactonly"})


class DirectProtocol(StrEnum):
    """The ``Protocol`` of a direct format name (MS-MQMQ 2.1.2)."""

    TCP = "TCP"  #: Address: an IPv4 or IPv6 address.
    OS = "OS"  #: Address: any computer name (NetBIOS or DNS); ``.`` is the local computer.
    HTTP = "HTTP"  #: Address: ``host[:port]`` from ``//host[:port]/MSMQ`` (default port 80).
    HTTPS = "HTTPS"  #: Address: ``host[:port]`` from ``//host[:port]/MSMQ`` (default port 443).
    IPX = "IPX"  #: Address: ``network:host`` in hex (legacy SPX).


# --------------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------------


def fail(text: str, pos: int, message: str) -> NoReturn:
    shown = text if len(text) <= 200 else text[:200] + "..."
    raise MQError(HResult.MQ_ERROR_ILLEGAL_FORMATNAME, f"{message} at position {pos} in {quoted(shown)}")


def invalid(message: str) -> NoReturn:
    raise MQError(HResult.MQ_ERROR_ILLEGAL_FORMATNAME, message)


def kw(token: str) -> str:
    """ASCII-only case folding for keywords; non-ASCII text never matches a keyword."""
    return token.lower() if token.isascii() else "\x00"


def _name_char_ok(ch: str) -> bool:
    """A QueueName / Subqueue character (MS-MQMQ 2.1.1), or printable non-ASCII."""
    o = ord(ch)
    if o < 0x80:
        return o > 0x20 and ch not in _QUEUE_EXCLUDED
    return ch.isprintable() and not ch.isspace()


def _vchar_ok(ch: str) -> bool:
    """VCHAR %x21-7E (MS-MQMQ 2.1.1), or printable non-ASCII."""
    o = ord(ch)
    if o < 0x80:
        return 0x21 <= o <= 0x7E
    return ch.isprintable() and not ch.isspace()


def check_name(text: str, pos: int, name: str, what: str, limit: int) -> None:
    if not name:
        fail(text, pos, f"empty {what}")
    if len(name) > limit:
        fail(text, pos, f"{what} longer than {limit} characters")
    for i, ch in enumerate(name):
        if not _name_char_ok(ch):
            fail(text, pos + i, f"character {quoted(ch)} not allowed in {what}")


def check_computer(
    text: str, pos: int, name: str, what: str = "computer name", limit: int = MAX_COMPUTER
) -> None:
    if not name:
        fail(text, pos, f"empty {what}")
    if len(name) > limit:
        fail(text, pos, f"{what} longer than {limit} characters")
    for i, ch in enumerate(name):
        if not _vchar_ok(ch) or ch in "\\,":
            fail(text, pos + i, f"character {quoted(ch)} not allowed in {what}")


def parse_guid(text: str, pos: int, token: str, what: str) -> UUID:
    if not _GUID_RE.fullmatch(token):
        hint = " (write it without braces)" if token.startswith("{") else ""
        fail(
            text, pos, f"{what} {quoted(token[:60])} is not a GUID xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx{hint}"
        )
    return UUID(token)


def norm_ip(address: str) -> str | None:
    try:
        return str(ipaddress.ip_address(address))
    except ValueError:
        return None


_T = TypeVar("_T")


def build(cls: type[_T], **values: Any) -> _T:
    """Create a frozen value without running its validation (the parser already did)."""
    obj = object.__new__(cls)
    for name, value in values.items():
        object.__setattr__(obj, name, value)
    return obj


def adopt(self: object, parsed: Any, text: str) -> None:
    """Validation by round trip: ``parsed`` came from ``str(self)``. Every field must agree
    (enum fields may be given as their values; ``address`` may differ by normalization);
    then the value keeps the parsed, normalized fields."""
    names = [f.name for f in fields(parsed)]
    if type(parsed) is not type(self):
        invalid(f"fields of {type(self).__name__} print as {quoted(text[:200])}, a {type(parsed).__name__}")
    for name in names:
        mine, theirs = getattr(self, name), getattr(parsed, name)
        if name != "address":
            same_type = type(mine) is type(theirs) or isinstance(theirs, Enum)
            if not same_type or mine != theirs:
                invalid(
                    f"{type(self).__name__}.{name}: got {quoted(mine)}, which prints as {quoted(text[:200])}"
                )
        object.__setattr__(self, name, theirs)


def printed(self: object) -> str:
    try:
        return str(self)
    except (AttributeError, TypeError, ValueError) as exc:
        invalid(f"bad {type(self).__name__} field: {exc}")
