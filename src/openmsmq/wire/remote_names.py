"""Admin and response queue names that travel in a UserHeader (MS-MQMQ 2.2.19.2).

A message to a remote queue carries its admin and response queue format names in its
packet; only a ``DIRECT=`` name or a ``PRIVATE=<QM GUID>\\<number>`` name can be carried.
The local queue manager checks them when a message is sent to an outgoing queue, and
the transfer encodes them: both use this module, so the queue manager needs nothing
from the transfer.
"""

from __future__ import annotations

import struct
import uuid

from openmsmq.errors import HResult, MQError, quoted
from openmsmq.wire.format_name import PrivateFormatName, parse_format_name
from openmsmq.wire.userheader import DirectQueueFormatName, PrivateQueueFormatName, direct_queue_wire

__all__ = ["check_remote_names", "private_name", "wire_queue"]


def private_name(format_name: str) -> tuple[uuid.UUID, int] | None:
    """``PRIVATE=<guid>\\<hex number>`` → (QM GUID, PrivateQueueIdentifier); None for any
    other name (a journal suffix included: journals do not travel)."""
    if format_name[:8].upper() != "PRIVATE=":
        return None
    try:
        parsed = parse_format_name(format_name)
    except MQError:
        return None
    if not isinstance(parsed, PrivateFormatName) or parsed.journal_suffix:
        return None
    return parsed.machine_guid, parsed.queue_number


def wire_queue(format_name: str) -> DirectQueueFormatName | PrivateQueueFormatName | None:
    """An admin / response queue format name as its UserHeader field (MS-MQMQ 2.2.19.2):
    ``DIRECT=…`` as a DirectQueueFormatName (type 0x7), ``PRIVATE=<guid>\\<hex>`` as a
    PrivateQueueFormatName (0x6, which names the hosting QM whoever sends). None for a
    name that cannot travel (a path name, ``PUBLIC=``, a journal): the send path refuses
    those for remote queues (:func:`check_remote_names`)."""
    if format_name[:7].upper() == "DIRECT=":
        return DirectQueueFormatName(format_name[7:])
    private = private_name(format_name)
    if private is None:
        return None
    return PrivateQueueFormatName(private[0], private[1])


def check_remote_names(admin_queue: str, response_queue: str, size: int, max_bytes: int) -> None:
    """Refuse (MQError) a message of ``size`` bytes to a remote queue whose admin or
    response queue name cannot travel in its packet (:func:`wire_queue`:
    MQ_ERROR_ILLEGAL_FORMATNAME), or whose packet would exceed the 4 MiB PacketSize limit
    once those names, UTF-16 in the UserHeader, are added to what ``max_bytes`` already
    allows for (MQ_ERROR_INSUFFICIENT_RESOURCES). Called only for messages that have such
    a name."""
    names = 0
    for what, name in (("admin", admin_queue), ("response", response_queue)):
        if not name:
            continue
        q = wire_queue(name)
        if q is None:
            raise MQError(
                HResult.MQ_ERROR_ILLEGAL_FORMATNAME,
                f"{what} queue {quoted(name)}: a message to a remote queue carries only a DIRECT= or"
                " PRIVATE=<QM GUID>\\<number> admin or response queue",
            )
        if isinstance(q, DirectQueueFormatName):
            try:
                names += len(direct_queue_wire(q))
            except struct.error:  # over the u16 Count of the field
                raise MQError(
                    HResult.MQ_ERROR_ILLEGAL_FORMATNAME,
                    f"{what} queue name of {len(name)} characters is too long",
                ) from None
        else:
            names += 20  # a PrivateQueueFormatName: GUID and PrivateQueueIdentifier
    total = size + names
    if total > max_bytes:
        raise MQError(
            HResult.MQ_ERROR_INSUFFICIENT_RESOURCES,
            f"message of {size} bytes with {names} bytes of admin and response queue names"
            f" exceeds the {max_bytes:,} bytes a message to a remote queue may have (its"
            " MS-MQQB packet, headers included, is at most 4 MiB)",
        )
