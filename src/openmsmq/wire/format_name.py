"""MSMQ queue names: path names and format names (MS-MQMQ 2.1, 2.2.6, 2.2.7, 2.2.11).

``parse_format_name(s)`` turns a format name into a typed, frozen value; ``str(value)``
prints its canonical form and ``parse_format_name(str(value)) == value``.
``parse_path_name(s)`` does the same for queue path names (``mq01\\private$\\orders``).

Forms (MS-MQMQ 2.1.2–2.1.7)::

    DIRECT=TCP:192.0.2.10\\PRIVATE$\\orders[;JOURNAL | ;<subqueue>]   DirectFormatName
    DIRECT=OS:mq01\\orders                                          (public queue path)
    DIRECT=TCP:192.0.2.10\\SYSTEM$;DEADXACT                          (machine queue path)
    DIRECT=HTTP://host[:port]/MSMQ\\PRIVATE$\\orders                   (also HTTPS)
    PRIVATE=<guid>\\0000000a[;JOURNAL]                                PrivateFormatName
    PUBLIC=<guid>[;JOURNAL]                                          PublicFormatName
    MACHINE=<guid>[;JOURNAL | ;DEADLETTER | ;DEADXACT]               MachineFormatName
    CONNECTOR=<guid>[;XACTONLY]                                      ConnectorFormatName
    DL=<guid>[@domain]                                               DistributionListFormatName
    MULTICAST=224.1.2.3:8001                                         MulticastFormatName
    <element>,<element>,...                                          MultipleElementFormatName

Decisions the spec leaves open:

* **Case.** ABNF literals are case-insensitive (RFC 5234) and Expand Format Name
  (MS-MQDMPR 3.1.7.1.5) de-duplicates case-insensitively, so two format names are equal
  (``==``, ``hash``) when their canonical strings are equal after ``str.casefold()``
  (``.key``). Queue and computer names keep their case when printed. Keywords match
  ASCII case-insensitively only (``dırect=`` is not ``DIRECT=``).
* **Canonical spelling.** Keywords upper case as the ABNF of 2.1.2 writes them
  (``DIRECT=TCP:``, ``PRIVATE$``, ``SYSTEM$``, ``;JOURNAL``); GUIDs lower case without
  braces; private queue numbers as 8 lower-case hex digits; IP addresses in
  :mod:`ipaddress` normal form; HTTP as ``//host[:port]/MSMQ\\...`` (``/`` separators are
  accepted on input). Path names (2.1.1) print ``private$`` / ``system$`` as 2.1.1 does.
* **Suffixes** follow QUEUE_SUFFIX_TYPE (2.2.11): ``;JOURNAL`` on direct, public, private
  and machine names; ``;DEADLETTER`` / ``;DEADXACT`` only on machine queues (``MACHINE=``
  or ``DIRECT=...\\SYSTEM$;``); ``;XACTONLY`` only on ``CONNECTOR=``; any other ``;name``
  after a direct queue path is a subqueue (MSMQ 4.0+), e.g. ``;poison``. JOURNAL,
  DEADLETTER, DEADXACT and XACTONLY are not accepted as subqueue names.
* **Characters.** Queue names follow the MSMQ 2.0+ ABNF (no ``\\ ; + , "``, nothing at or
  below 0x20, at most 124; subqueues at most 32); printable non-ASCII characters are
  accepted too, as MSMQ carries names in UTF-16. ``,`` always separates elements.
* **Errors.** Every syntax error raises ``MQError(HResult.MQ_ERROR_ILLEGAL_FORMATNAME)``
  naming the offending token and its position; no other exception escapes. Constructing
  a value with inconsistent fields raises the same error (values are validated by
  printing and re-parsing them, then keep the normalized fields).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from uuid import UUID

from openmsmq.errors import quoted
from openmsmq.wire.name_syntax import (  # the lexical rules (MS-MQMQ 2.1), shared with path names
    DEC_RE,
    HEX8_RE,
    MAX_DOMAIN,
    MAX_QUEUE_NAME,
    MAX_SUBQUEUE,
    RESERVED_WORDS,
    SYSTEM_SUFFIXES,
    DirectProtocol,
    QueueFormatType,
    QueueSuffixType,
    adopt,
    build,
    check_computer,
    check_name,
    fail,
    invalid,
    kw,
    norm_ip,
    parse_guid,
    printed,
)

__all__ = [
    "ORDER_QUEUE_NAME",
    "ORDER_QUEUE_PRIVATE_ID",
    "ConnectorFormatName",
    "DirectFormatName",
    "DirectProtocol",
    "DistributionListFormatName",
    "FormatName",
    "FormatNameBase",
    "LocalIdentity",
    "MachineFormatName",
    "MulticastFormatName",
    "MultipleElementFormatName",
    "PrivateFormatName",
    "PublicFormatName",
    "QueueFormatType",
    "QueuePathName",
    "QueueSuffixType",
    "SingleFormatName",
    "order_queue_direct",
    "order_queue_private",
    "parse_direct_id",
    "parse_format_name",
    "parse_path_name",
]

#: Queue name of the order acknowledgment queue (MS-MQQB 1.3.3.1, 3.1.7.17).
ORDER_QUEUE_NAME = "order_queue$"
#: Private queue number of the order acknowledgment queue (MS-MQQB 3.1.7.17).
ORDER_QUEUE_PRIVATE_ID = 0x00000004


# --------------------------------------------------------------------------------------------------
# Local identity: what "this queue manager" answers to
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LocalIdentity:
    """What designates the local queue manager in a name (MS-MQDMPR 3.1.7.1.5 step 4).

    ``addresses``: the IP addresses the QM serves (compared in normal form); ``names``:
    its computer names (compared case-insensitively). The OS name ``.`` is always local.
    """

    qm_guid: UUID
    addresses: frozenset[str] = frozenset()
    names: frozenset[str] = frozenset()

    def has_address(self, address: str) -> bool:
        """True if ``address`` is one of our IP addresses."""
        norm = norm_ip(address)
        return norm is not None and norm in {norm_ip(a) for a in self.addresses}

    def has_name(self, name: str) -> bool:
        """True if ``name`` is ``.`` or one of our computer names."""
        folded = name.casefold()
        return folded == "." or folded in {n.casefold() for n in self.names}


# --------------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------------


class FormatNameBase:
    """What every format name shares: canonical text, case-insensitive equality, kinds."""

    __slots__ = ()

    def __post_init__(self) -> None:
        # Constructed values are validated like parsed ones: print, re-parse, compare.
        text = printed(self)
        adopt(self, parse_format_name(text), text)

    @property
    def key(self) -> str:
        """The comparison key: the canonical string, case-folded."""
        return str(self).casefold()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FormatNameBase):
            return NotImplemented
        return type(self) is type(other) and self.key == other.key

    def __hash__(self) -> int:
        return hash(self.key)

    @property
    def suffix_type(self) -> QueueSuffixType:
        """The QUEUE_SUFFIX_TYPE of this name (MS-MQMQ 2.2.11)."""
        return QueueSuffixType.NONE

    @property
    def is_journal(self) -> bool:
        """A queue journal or computer journal (``;JOURNAL``)."""
        return self.suffix_type is QueueSuffixType.JOURNAL

    @property
    def is_dead_letter(self) -> bool:
        """A computer's non-transactional dead-letter queue (``;DEADLETTER``)."""
        return self.suffix_type is QueueSuffixType.DEADLETTER

    @property
    def is_transactional_dead_letter(self) -> bool:
        """A computer's transactional dead-letter queue (``;DEADXACT``)."""
        return self.suffix_type is QueueSuffixType.DEADXACT

    @property
    def is_read_only(self) -> bool:
        """Journals and dead-letter queues: no sending, no place in a multiple-element name."""
        return self.suffix_type in SYSTEM_SUFFIXES

    @property
    def is_order_queue(self) -> bool:
        """The order acknowledgment queue (``order_queue$`` / private id 4, MS-MQQB 3.1.7.17)."""
        return False

    @property
    def is_system(self) -> bool:
        """A system queue: journals, dead-letter queues, the order queue (MS-MQDMPR 3.1.3)."""
        return self.is_read_only or self.is_order_queue

    def is_local_to(self, local: LocalIdentity) -> bool:
        """True if the name designates a queue of the QM ``local`` (MS-MQDMPR 3.1.7.1.5 step 4).

        Public, connector, DL, multicast and multiple-element names need a directory or fan
        out, so they are never local by name alone.
        """
        return False


@dataclass(frozen=True, eq=False)
class DirectFormatName(FormatNameBase):
    """``DIRECT=<protocol>:<address>\\[PRIVATE$\\]<queue>[;suffix]`` (MS-MQMQ 2.1.2).

    ``queue_name`` is empty for a machine queue (``\\SYSTEM$;JOURNAL|DEADLETTER|DEADXACT``).
    ``subqueue`` is set exactly when ``suffix`` is SUBQUEUE.
    """

    protocol: DirectProtocol
    address: str
    queue_name: str
    private: bool = False
    suffix: QueueSuffixType = QueueSuffixType.NONE
    subqueue: str = ""

    def __str__(self) -> str:
        proto = DirectProtocol(self.protocol)
        if proto in (DirectProtocol.HTTP, DirectProtocol.HTTPS):
            head = f"DIRECT={proto.value}://{self.address}/MSMQ\\"
        else:
            head = f"DIRECT={proto.value}:{self.address}\\"
        return head + _queue_path_text(self.queue_name, self.private, self.suffix, self.subqueue, upper=True)

    @property
    def direct_id(self) -> str:
        """The name without ``DIRECT=``, as DirectQueueFormatName / m_pDirectID carry it."""
        return str(self)[len("DIRECT=") :]

    @property
    def queue_format_type(self) -> QueueFormatType:
        """DIRECT, or SUBQUEUE when a subqueue is named (MS-MQMQ 2.2.6)."""
        return QueueFormatType.SUBQUEUE if self.subqueue else QueueFormatType.DIRECT

    @property
    def suffix_type(self) -> QueueSuffixType:
        return self.suffix

    @property
    def is_machine_queue(self) -> bool:
        """``...\\SYSTEM$;...``: a computer's journal or dead-letter queue."""
        return not self.queue_name

    @property
    def is_poison(self) -> bool:
        """The ``;poison`` subqueue (case-insensitive)."""
        return self.subqueue.casefold() == "poison"

    @property
    def is_order_queue(self) -> bool:
        return self.private and not self.subqueue and self.queue_name.casefold() == ORDER_QUEUE_NAME

    @property
    def host(self) -> str:
        """The computer part of the address (HTTP/HTTPS: without port and brackets)."""
        if self.protocol in (DirectProtocol.HTTP, DirectProtocol.HTTPS):
            return _split_authority(self.address)[0]
        return self.address

    @property
    def port(self) -> int | None:
        """HTTP/HTTPS port (default 80 / 443, MS-MQMQ 2.1.2); None for other protocols."""
        default = {DirectProtocol.HTTP: 80, DirectProtocol.HTTPS: 443}.get(self.protocol)
        if default is None:
            return None
        port = _split_authority(self.address)[1]
        return default if port is None else port

    @property
    def queue_path(self) -> str:
        """The queue's path on its host, without computer and suffix: ``private$\\orders``,
        ``orders``; machine queues give ``system$;DEADXACT`` etc. (MS-MQMQ 2.1.1)."""
        return _queue_path_text(self.queue_name, self.private, QueueSuffixType.NONE if self.queue_name else
                                self.suffix, "", upper=False)  # fmt: skip

    @property
    def path_name(self) -> QueuePathName:
        """The path name (MS-MQMQ 2.1.1) with the host as computer name."""
        return build(QueuePathName, computer=self.host, queue_name=self.queue_name, private=self.private,
                      suffix=self.suffix, subqueue=self.subqueue)  # fmt: skip

    def base(self) -> DirectFormatName:
        """The queue itself, without ``;JOURNAL`` or subqueue (machine queues: unchanged)."""
        if not self.queue_name:
            return self
        return build(DirectFormatName, protocol=self.protocol, address=self.address,
                      queue_name=self.queue_name, private=self.private, suffix=QueueSuffixType.NONE,
                      subqueue="")  # fmt: skip

    def journal(self) -> DirectFormatName:
        """The queue journal of this queue (``;JOURNAL``); machine queues: the computer journal."""
        return build(DirectFormatName, protocol=self.protocol, address=self.address,
                      queue_name=self.queue_name, private=self.private, suffix=QueueSuffixType.JOURNAL,
                      subqueue="")  # fmt: skip

    def is_local_to(self, local: LocalIdentity) -> bool:
        if self.protocol is DirectProtocol.TCP:
            return local.has_address(self.address)
        if self.protocol is DirectProtocol.IPX:
            return False
        return local.has_name(self.host) or local.has_address(self.host)


@dataclass(frozen=True, eq=False)
class PrivateFormatName(FormatNameBase):
    """``PRIVATE=<computer guid>\\<hex queue number>[;JOURNAL]`` (MS-MQMQ 2.1.4)."""

    machine_guid: UUID
    queue_number: int
    journal_suffix: bool = False

    queue_format_type = QueueFormatType.PRIVATE

    def __str__(self) -> str:
        tail = ";JOURNAL" if self.journal_suffix else ""
        return f"PRIVATE={self.machine_guid}\\{self.queue_number:08x}{tail}"

    @property
    def suffix_type(self) -> QueueSuffixType:
        return QueueSuffixType.JOURNAL if self.journal_suffix else QueueSuffixType.NONE

    @property
    def is_order_queue(self) -> bool:
        return self.queue_number == ORDER_QUEUE_PRIVATE_ID and not self.journal_suffix

    def base(self) -> PrivateFormatName:
        """The queue itself (without ``;JOURNAL``)."""
        return PrivateFormatName(self.machine_guid, self.queue_number)

    def journal(self) -> PrivateFormatName:
        """The queue journal of this queue."""
        return PrivateFormatName(self.machine_guid, self.queue_number, True)

    def is_local_to(self, local: LocalIdentity) -> bool:
        return self.machine_guid == local.qm_guid


@dataclass(frozen=True, eq=False)
class PublicFormatName(FormatNameBase):
    """``PUBLIC=<queue guid>[;JOURNAL]`` (MS-MQMQ 2.1.3; ``;JOURNAL`` per 2.2.11)."""

    queue_guid: UUID
    journal_suffix: bool = False

    queue_format_type = QueueFormatType.PUBLIC

    def __str__(self) -> str:
        return f"PUBLIC={self.queue_guid}" + (";JOURNAL" if self.journal_suffix else "")

    @property
    def suffix_type(self) -> QueueSuffixType:
        return QueueSuffixType.JOURNAL if self.journal_suffix else QueueSuffixType.NONE


@dataclass(frozen=True, eq=False)
class MachineFormatName(FormatNameBase):
    """``MACHINE=<computer guid>[;JOURNAL|;DEADLETTER|;DEADXACT]`` (MS-MQMQ 2.1.6, 2.2.11).

    Never opened for sending (MS-MQDMPR 3.1.7.1.5 step 3).
    """

    machine_guid: UUID
    suffix: QueueSuffixType = QueueSuffixType.NONE

    queue_format_type = QueueFormatType.MACHINE

    def __str__(self) -> str:
        suffix = QueueSuffixType(self.suffix)
        return f"MACHINE={self.machine_guid}" + ("" if suffix is QueueSuffixType.NONE else f";{suffix.name}")

    @property
    def suffix_type(self) -> QueueSuffixType:
        return self.suffix

    def is_local_to(self, local: LocalIdentity) -> bool:
        return self.machine_guid == local.qm_guid


@dataclass(frozen=True, eq=False)
class ConnectorFormatName(FormatNameBase):
    """``CONNECTOR=<guid>[;XACTONLY]`` (MS-MQMQ 2.1.6, 2.2.11)."""

    connector_guid: UUID
    xact_only: bool = False

    queue_format_type = QueueFormatType.CONNECTOR

    def __str__(self) -> str:
        return f"CONNECTOR={self.connector_guid}" + (";XACTONLY" if self.xact_only else "")

    @property
    def suffix_type(self) -> QueueSuffixType:
        return QueueSuffixType.XACTONLY if self.xact_only else QueueSuffixType.NONE


@dataclass(frozen=True, eq=False)
class DistributionListFormatName(FormatNameBase):
    """``DL=<guid>[@domain]`` (MS-MQMQ 2.1.5); resolved by Expand Format Name."""

    dl_guid: UUID
    domain: str = ""

    queue_format_type = QueueFormatType.DL

    def __str__(self) -> str:
        return f"DL={self.dl_guid}" + (f"@{self.domain}" if self.domain else "")


@dataclass(frozen=True, eq=False)
class MulticastFormatName(FormatNameBase):
    """``MULTICAST=<a.b.c.d>:<port>``, first octet 224–239, port 0–65535 (MS-MQMQ 2.1.6)."""

    address: str
    port: int

    queue_format_type = QueueFormatType.MULTICAST

    def __str__(self) -> str:
        return f"MULTICAST={self.address}:{self.port}"


SingleFormatName = (
    DirectFormatName
    | PrivateFormatName
    | PublicFormatName
    | MachineFormatName
    | ConnectorFormatName
    | DistributionListFormatName
    | MulticastFormatName
)


@dataclass(frozen=True, eq=False)
class MultipleElementFormatName(FormatNameBase):
    """``<element>,<element>,...`` (MS-MQMQ 2.1.7): at least two elements, none read-only
    and none ``MACHINE=``. Equality is element-wise case-insensitive and order-sensitive."""

    elements: tuple[SingleFormatName, ...]

    queue_format_type = QueueFormatType.UNKNOWN

    def __post_init__(self) -> None:
        object.__setattr__(self, "elements", tuple(self.elements))
        if len(self.elements) < 2:
            invalid("a multiple-element format name needs at least two elements")
        text = printed(self)
        adopt(self, parse_format_name(text), text)

    def __str__(self) -> str:
        return ",".join(str(e) for e in self.elements)

    def unique_elements(self) -> tuple[SingleFormatName, ...]:
        """Elements without case-insensitive duplicates, first kept (MS-MQDMPR 3.1.7.1.5)."""
        seen: set[str] = set()
        out: list[SingleFormatName] = []
        for element in self.elements:
            if element.key not in seen:
                seen.add(element.key)
                out.append(element)
        return tuple(out)


FormatName = SingleFormatName | MultipleElementFormatName


# --------------------------------------------------------------------------------------------------
# Path names (MS-MQMQ 2.1.1)
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class QueuePathName:
    """A queue path name (MS-MQMQ 2.1.1): ``computer\\[private$\\]queue[;subqueue|;JOURNAL]``
    or ``computer\\system$;JOURNAL|DEADLETTER|DEADXACT`` (then ``queue_name`` is empty).

    The computer ``.`` means the local computer. ``==`` is exact; compare ``.key`` for
    MSMQ's case-insensitive rule.
    """

    computer: str
    queue_name: str
    private: bool = False
    suffix: QueueSuffixType = QueueSuffixType.NONE
    subqueue: str = ""

    def __post_init__(self) -> None:
        text = printed(self)
        adopt(self, parse_path_name(text), text)

    def __str__(self) -> str:
        path = _queue_path_text(self.queue_name, self.private, self.suffix, self.subqueue, upper=False)
        return f"{self.computer}\\{path}"

    @property
    def key(self) -> str:
        """The case-folded text."""
        return str(self).casefold()

    @property
    def queue_path(self) -> str:
        """The path without the computer: ``private$\\orders``."""
        return str(self)[len(self.computer) + 1 :]

    def to_direct(self, protocol: DirectProtocol = DirectProtocol.OS, address: str | None = None) -> (
        DirectFormatName
    ):  # fmt: skip
        """The direct format name of this queue, by default ``DIRECT=OS:<computer>\\...``."""
        return DirectFormatName(protocol, self.computer if address is None else address, self.queue_name,
                                self.private, self.suffix, self.subqueue)  # fmt: skip


def _queue_path_text(name: str, private: bool, suffix: QueueSuffixType, subqueue: str, *, upper: bool) -> str:
    suffix = QueueSuffixType(suffix)
    if not name:
        return ("SYSTEM$;" if upper else "system$;") + suffix.name
    path = (("PRIVATE$\\" if upper else "private$\\") + name) if private else name
    if suffix is QueueSuffixType.SUBQUEUE:
        return f"{path};{subqueue}"
    return path if suffix is QueueSuffixType.NONE else f"{path};{suffix.name}"


def _parse_queue_tail(
    text: str, pos: int, tail: str, *, http: bool = False
) -> tuple[str, bool, QueueSuffixType, str]:
    """Parse ``[PRIVATE$\\]name[;suffix]`` or ``SYSTEM$;X`` found at ``pos`` of ``text``.

    Returns (queue_name, private, suffix, subqueue); queue_name is "" for SYSTEM$.
    """
    if kw(tail[:7]) == "system$":
        if tail[7:8] != ";":
            fail(text, pos + 7, "expected ';JOURNAL', ';DEADLETTER' or ';DEADXACT' after SYSTEM$")
        word = kw(tail[8:])
        if word not in ("journal", "deadletter", "deadxact"):
            expected = "expected JOURNAL, DEADLETTER, DEADXACT"
            fail(text, pos + 8, f"unknown system queue {quoted(tail[8:68])} ({expected})")
        return "", False, QueueSuffixType[word.upper()], ""
    private = False
    start = 0
    if kw(tail[:8]) == "private$" and (tail[8:9] == "\\" or (http and tail[8:9] == "/")):
        private, start = True, 9
    name, semi, sub = tail[start:].partition(";")
    name_pos = pos + start
    if not private and kw(name) in ("private$", "system$"):
        fail(text, name_pos + len(name), f"missing queue name after {name}")
    check_name(text, name_pos, name, "queue name", MAX_QUEUE_NAME)
    if not semi:
        return name, private, QueueSuffixType.NONE, ""
    sub_pos = name_pos + len(name) + 1
    if kw(sub) == "journal":
        return name, private, QueueSuffixType.JOURNAL, ""
    if kw(sub) in RESERVED_WORDS:
        fail(text, sub_pos, f"suffix ;{sub.upper()} not allowed after a queue name (only on machine queues)")
    check_name(text, sub_pos, sub, "subqueue name", MAX_SUBQUEUE)
    return name, private, QueueSuffixType.SUBQUEUE, sub


def parse_path_name(text: str) -> QueuePathName:
    """Parse a queue path name (MS-MQMQ 2.1.1), e.g. ``.\\private$\\orders`` or ``mq01\\orders``.

    Raises ``MQError(MQ_ERROR_ILLEGAL_FORMATNAME)`` like the format-name parser (MSMQ
    reports MQ_ERROR_ILLEGAL_QUEUE_PATHNAME for path names; callers convert if they need to).
    """
    if not isinstance(text, str):
        invalid(f"path name must be a string, not {type(text).__name__}")
    computer, sep, tail = text.partition("\\")
    if not sep:
        fail(text, len(text), "expected '\\' between computer name and queue name")
    check_computer(text, 0, computer)
    name, private, suffix, sub = _parse_queue_tail(text, len(computer) + 1, tail)
    return build(QueuePathName, computer=computer, queue_name=name, private=private, suffix=suffix,
                  subqueue=sub)  # fmt: skip


# --------------------------------------------------------------------------------------------------
# Format-name parser
# --------------------------------------------------------------------------------------------------


def _split_authority(authority: str) -> tuple[str, int | None]:
    """``host[:port]`` or ``[v6][:port]`` -> (host, port or None); authority already checked."""
    if authority.startswith("["):
        end = authority.index("]")
        host, port = authority[1:end], authority[end + 2 :]
    elif ":" in authority:
        host, _, port = authority.rpartition(":")
    else:
        host, port = authority, ""
    return host, int(port) if port else None


def _check_authority(text: str, pos: int, authority: str) -> None:
    """``Host [":" Port]`` of an HTTP/HTTPS direct name (MS-MQMQ 2.1.2)."""
    if authority.startswith("["):
        end = authority.find("]")
        v6 = authority[1:end]
        if end < 0 or ":" not in v6 or "%" in v6 or not v6.isascii() or norm_ip(v6) is None:
            fail(text, pos, f"bad bracketed IPv6 host {quoted(authority[:60])}")
        rest = authority[end + 1 :]
        if rest and not rest.startswith(":"):
            fail(text, pos + end + 1, "expected ':port' after ']'")
        port, port_pos = rest[1:], pos + end + 2
    else:
        host, _, port = authority.rpartition(":") if ":" in authority else (authority, "", "")
        check_computer(text, pos, host, "HTTP host")
        port_pos = pos + len(host) + 1
    if port and not (DEC_RE.fullmatch(port) and int(port) <= 65535):
        fail(text, port_pos, f"HTTP port {quoted(port[:20])} is not a number 0..65535")


def _parse_direct(element: str, pos: int, text: str) -> DirectFormatName:
    """Parse the direct name ``element`` (it starts with ``DIRECT=``) found at ``pos`` of ``text``."""
    body_pos = pos + 7
    proto_token, colon, rest = element[7:].partition(":")
    try:
        protocol = DirectProtocol(kw(proto_token).upper())
    except ValueError:
        expected = "expected TCP, OS, HTTP, HTTPS, IPX"
        fail(text, body_pos, f"unknown direct protocol {quoted(proto_token[:40])} ({expected})")
    if not colon:
        fail(text, body_pos + len(proto_token), "expected ':' after the direct protocol")
    addr_pos = body_pos + len(proto_token) + 1
    http = protocol in (DirectProtocol.HTTP, DirectProtocol.HTTPS)
    if http:
        if not rest.startswith("//"):
            fail(text, addr_pos, "expected '//host[:port]/MSMQ' after HTTP: / HTTPS:")
        after = rest[2:]
        cut = min((i for i in (after.find("/"), after.find("\\")) if i >= 0), default=-1)
        if cut < 0:
            fail(text, addr_pos + 2 + len(after), "expected '/MSMQ' after the HTTP host")
        _check_authority(text, addr_pos + 2, after[:cut])
        host, port = _split_authority(after[:cut])
        host = f"[{norm_ip(host)}]" if after.startswith("[") else host
        address = host if port is None else f"{host}:{port}"
        if kw(after[cut + 1 : cut + 5]) != "msmq" or after[cut + 5 : cut + 6] not in ("\\", "/"):
            fail(text, addr_pos + 2 + cut, "expected '/MSMQ\\' (or '/MSMQ/') after the HTTP host")
        tail_pos, tail = addr_pos + 2 + cut + 6, after[cut + 6 :]
    else:
        address, sep, tail = rest.partition("\\")
        if not sep:
            fail(text, addr_pos + len(address), "expected '\\' between address and queue name")
        tail_pos = addr_pos + len(address) + 1
        if protocol is DirectProtocol.TCP:
            # No IPv6 zone ("%eth0"): the ABNF asks for an IP address, nothing more.
            norm = norm_ip(address) if address.isascii() and "%" not in address else None
            if norm is None:
                fail(text, addr_pos, f"TCP address {quoted(address[:60])} is not an IPv4 or IPv6 address")
            address = norm
        elif protocol is DirectProtocol.IPX:
            net, c, node = address.partition(":")
            if not (c and HEX8_RE.fullmatch(net) and re.fullmatch(r"[0-9A-Fa-f]{1,12}", node)):
                fail(text, addr_pos, f"IPX address {quoted(address[:60])} is not 'network:host' in hex")
            address = f"{net.lower()}:{node.lower()}"
        else:
            check_computer(text, addr_pos, address)
    name, private, suffix, sub = _parse_queue_tail(text, tail_pos, tail, http=http)
    return build(DirectFormatName, protocol=protocol, address=address, queue_name=name, private=private,
                  suffix=suffix, subqueue=sub)  # fmt: skip


def _parse_multicast(body: str, pos: int, text: str) -> MulticastFormatName:
    addr, colon, port = body.rpartition(":")
    if not colon:
        fail(text, pos + len(body), "expected ':port' after the multicast address")
    octets = addr.split(".")
    if len(octets) != 4 or not all(DEC_RE.fullmatch(o) and int(o) <= 255 for o in octets):
        fail(text, pos, f"multicast address {quoted(addr[:40])} is not a dotted IPv4 address")
    if not 224 <= int(octets[0]) <= 239:
        fail(text, pos, f"multicast address {quoted(addr)} is outside 224.0.0.0-239.255.255.255")
    if not DEC_RE.fullmatch(port) or int(port) > 65535:
        fail(text, pos + len(addr) + 1, f"multicast port {quoted(port[:20])} is not a number 0..65535")
    return build(MulticastFormatName, address=addr, port=int(port))


def _split_suffix(
    body: str, pos: int, text: str, allowed: tuple[QueueSuffixType, ...]
) -> tuple[str, QueueSuffixType]:
    head, semi, word = body.partition(";")
    if not semi:
        return head, QueueSuffixType.NONE
    for suffix in allowed:
        if kw(word) == suffix.name.lower():
            return head, suffix
    names = ", ".join(";" + s.name for s in allowed)
    fail(text, pos + len(head) + 1, f"suffix {quoted(word[:40])} not allowed here (allowed: {names})")


_JOURNAL_ONLY = (QueueSuffixType.JOURNAL,)
_MACHINE_SUFFIXES = (QueueSuffixType.JOURNAL, QueueSuffixType.DEADLETTER, QueueSuffixType.DEADXACT)


def _parse_single(element: str, pos: int, text: str) -> SingleFormatName:
    """Parse one element of a format name found at ``pos`` of ``text``."""
    eq = element.find("=")
    if eq < 0:
        hint = " (a path name? write DIRECT=OS:<computer>\\...)" if "\\" in element else ""
        fail(text, pos, f"expected '<TYPE>=' at the start of a format name{hint}")
    kind, body_pos, body = kw(element[:eq]), pos + eq + 1, element[eq + 1 :]
    if kind == "direct":
        return _parse_direct(element, pos, text)
    if kind == "public":
        guid_text, suffix = _split_suffix(body, body_pos, text, _JOURNAL_ONLY)
        return build(PublicFormatName, queue_guid=parse_guid(text, body_pos, guid_text, "queue GUID"),
                      journal_suffix=suffix is QueueSuffixType.JOURNAL)  # fmt: skip
    if kind == "private":
        guid_text, sep, number = body.partition("\\")
        if not sep:
            fail(text, body_pos + len(body), "expected '\\<hex queue number>' after the computer GUID")
        guid = parse_guid(text, body_pos, guid_text, "computer GUID")
        num_pos = body_pos + len(guid_text) + 1
        number, suffix = _split_suffix(number, num_pos, text, _JOURNAL_ONLY)
        if not HEX8_RE.fullmatch(number):
            fail(text, num_pos, f"private queue number {quoted(number[:20])} is not 1 to 8 hex digits")
        return build(PrivateFormatName, machine_guid=guid, queue_number=int(number, 16),
                      journal_suffix=suffix is QueueSuffixType.JOURNAL)  # fmt: skip
    if kind == "machine":
        guid_text, suffix = _split_suffix(body, body_pos, text, _MACHINE_SUFFIXES)
        return build(MachineFormatName, machine_guid=parse_guid(text, body_pos, guid_text, "computer GUID"),
                      suffix=suffix)  # fmt: skip
    if kind == "connector":
        guid_text, suffix = _split_suffix(body, body_pos, text, (QueueSuffixType.XACTONLY,))
        guid = parse_guid(text, body_pos, guid_text, "connector GUID")
        return build(ConnectorFormatName, connector_guid=guid, xact_only=suffix is QueueSuffixType.XACTONLY)
    if kind == "dl":
        guid_text, at, domain = body.partition("@")
        guid = parse_guid(text, body_pos, guid_text, "distribution list GUID")
        if at:
            check_computer(text, body_pos + len(guid_text) + 1, domain, "domain name", MAX_DOMAIN)
        return build(DistributionListFormatName, dl_guid=guid, domain=domain)
    if kind == "multicast":
        return _parse_multicast(body, body_pos, text)
    fail(text, pos, f"unknown format name type {quoted(element[:eq][:40])} "
          "(expected DIRECT=, PUBLIC=, PRIVATE=, MACHINE=, CONNECTOR=, DL=, MULTICAST=)")  # fmt: skip


def parse_format_name(text: str) -> FormatName:
    """Parse a format name (MS-MQMQ 2.1.2–2.1.7), single or multiple-element.

    Raises ``MQError(HResult.MQ_ERROR_ILLEGAL_FORMATNAME, ...)`` naming the offending
    token and its position; never any other exception.
    """
    if not isinstance(text, str):
        invalid(f"format name must be a string, not {type(text).__name__}")
    if not text:
        fail(text, 0, "empty format name")
    elements: list[SingleFormatName] = []
    pos = 0
    parts = text.split(",")
    for part in parts:
        if not part:
            fail(text, pos, "empty element in a multiple-element format name")
        element = _parse_single(part, pos, text)
        if len(parts) > 1 and (isinstance(element, MachineFormatName) or element.is_read_only):
            machine = isinstance(element, MachineFormatName)
            what = "a MACHINE= name" if machine else "a journal or dead-letter queue"
            fail(text, pos, f"{what} cannot be an element of a multiple-element format name (MS-MQMQ 2.1.7)")
        elements.append(element)
        pos += len(part) + 1
    if len(elements) == 1:
        return elements[0]
    return build(MultipleElementFormatName, elements=tuple(elements))


def parse_direct_id(direct_id: str) -> DirectFormatName:
    """Parse a wire DirectQueueFormatName / m_pDirectID (a direct name without ``DIRECT=``)."""
    if not isinstance(direct_id, str):
        invalid(f"direct name must be a string, not {type(direct_id).__name__}")
    result = parse_format_name("DIRECT=" + direct_id)
    if not isinstance(result, DirectFormatName):
        invalid(f"{quoted(direct_id[:200])} is not a single direct format name")
    return result


def order_queue_direct(address: str, protocol: DirectProtocol = DirectProtocol.TCP) -> DirectFormatName:
    """``DIRECT=TCP:<address>\\PRIVATE$\\order_queue$``: the sender's order queue named on a
    direct session (MS-MQQB 3.1.7.17)."""
    return DirectFormatName(protocol, address, ORDER_QUEUE_NAME, private=True)


def order_queue_private(qm_guid: UUID) -> PrivateFormatName:
    """``PRIVATE=<QM GUID>\\00000004``: the sender's order queue on a routed session
    (MS-MQQB 3.1.7.17)."""
    return PrivateFormatName(qm_guid, ORDER_QUEUE_PRIVATE_ID)
