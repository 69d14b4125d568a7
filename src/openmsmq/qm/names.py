"""Queue path names and the local forms of format names (MS-MQMQ 2.1.1, 2.1.2, 2.1.3).

Names are case-insensitive (ABNF quoted strings, MS-MQMQ 2.1; Expand Format Name
compares case-insensitively): the canonical key of a queue is its case-folded
(``str.casefold``, as :mod:`openmsmq.wire.format_name` compares names)
``private$\\name`` / ``system$;deadletter`` form without the computer part. The
syntax itself is parsed by :mod:`openmsmq.wire.format_name`.
"""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass

from openmsmq.errors import HResult, MQError, quoted
from openmsmq.wire.format_name import (
    DirectFormatName,
    DirectProtocol,
    PrivateFormatName,
    QueueSuffixType,
    parse_format_name,
    parse_path_name,
)

__all__ = [
    "AWAITING_FINAL_ACK",
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
#: The sender's durable AwaitingFinalACKTable (MS-MQQB 3.1.1.3.1, 3.1.5.6 step 6): a
#: transactional message that asked for a FinalAck waits here after its OrderAck.
AWAITING_FINAL_ACK = "private$\\awaiting_final_ack$"

_SYSTEM_KEYS = {
    QueueSuffixType.DEADLETTER: DEADLETTER,
    QueueSuffixType.DEADXACT: DEADXACT,
    QueueSuffixType.JOURNAL: SYSTEM_JOURNAL,
}


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
    #: The subqueue named after ``;`` (canonical, openmsmq.wire.subqueues), else ''; the
    #: key is then ``private$\\name;subqueue``.
    subqueue: str = ""


def _illegal(name: str, why: str) -> MQError:
    return MQError(HResult.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME, f"{quoted(name)}: {why}")


def _local_key(
    full: str, queue_name: str, private: bool, suffix: QueueSuffixType, subqueue: str = ""
) -> tuple[str, str]:
    """(canonical key, path as written) of a queue named by wire.format_name fields.

    Keys are case-folded (``str.casefold``, the rule of :mod:`openmsmq.wire.format_name`)."""
    if not queue_name:  # machine queue: system$;deadletter | deadxact | journal
        key = _SYSTEM_KEYS[suffix]
        return key, key
    if not private:
        raise _illegal(full, "expected private$\\<name> (public queues need a directory service)")
    if suffix is QueueSuffixType.SUBQUEUE:
        sub = ";" + subqueue.casefold()
        return "private$\\" + queue_name.casefold() + sub, "private$\\" + queue_name + ";" + subqueue
    journal = ";journal" if suffix is QueueSuffixType.JOURNAL else ""
    return "private$\\" + queue_name.casefold() + journal, "private$\\" + queue_name + journal


@functools.lru_cache(maxsize=4096)
def parse_name(name: str) -> ParsedName:
    """Parse a path name or a DIRECT= / PRIVATE= format name (memoised: names repeat).

    The syntax is :mod:`openmsmq.wire.format_name`'s (the one parser of names in the
    project); this adds what a local queue manager supports: a path name may omit the
    computer (``private$\\orders``), DIRECT= only over OS: and TCP:, no public queues
    (they need a directory service); a subqueue (``;poison``) gets its own key. Raises
    MQ_ERROR_ILLEGAL_QUEUE_PATHNAME (path names) / MQ_ERROR_ILLEGAL_FORMATNAME (format
    names) on bad syntax.
    """
    text = name.strip()
    if "=" in text.split("\\")[0]:
        parsed = parse_format_name(text)
        if isinstance(parsed, DirectFormatName):
            if parsed.protocol not in (DirectProtocol.OS, DirectProtocol.TCP):
                raise MQError(
                    HResult.MQ_ERROR_ILLEGAL_FORMATNAME, f"{quoted(name)}: only DIRECT=OS: / DIRECT=TCP:"
                )
            key, shown = _local_key(name, parsed.queue_name, parsed.private, parsed.suffix, parsed.subqueue)
            sub = parsed.subqueue.casefold()
            return ParsedName(key, shown, computer=parsed.host, is_format_name=True, subqueue=sub)
        if isinstance(parsed, PrivateFormatName):
            guid, number = parsed.machine_guid, parsed.queue_number
            return ParsedName(None, text, qm_guid=guid, private_number=number, is_format_name=True)
        raise MQError(HResult.MQ_ERROR_ILLEGAL_FORMATNAME, f"{quoted(name)}: unsupported format name")
    folded = text.casefold()
    local = folded.startswith("private$\\") or folded.startswith("system$;")
    try:
        path = parse_path_name(".\\" + text if local else text)
    except MQError as exc:  # MSMQ reports bad path names with their own code
        raise _illegal(name, exc.message) from None
    computer = None if path.computer == "." else path.computer
    key, shown = _local_key(name, path.queue_name, path.private, path.suffix, path.subqueue)
    return ParsedName(key, shown, computer=computer, subqueue=path.subqueue.casefold())
