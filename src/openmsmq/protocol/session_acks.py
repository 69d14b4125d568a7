"""Session acknowledgment arithmetic of :class:`~openmsmq.protocol.session.Session`
(MS-MQQB 3.1.1.6.1, 3.1.5.8.7, 3.1.6.4): which persisted recoverable messages one
SessionHeader acknowledges, and which received packets wait for the QM to store them
before they are acknowledged. Pure functions: no I/O, no clock."""

from __future__ import annotations

from openmsmq.protocol.events import UserMessagePacket
from openmsmq.wire.packets import FinalAck, UserMessage

__all__ = ["recoverable_ack_fields", "stored_before_ack"]

_U16 = 0x10000


def recoverable_ack_fields(persisted: set[int]) -> tuple[int, int]:
    """(RecoverableMsgAckSeqNumber, RecoverableMsgAckFlags) of the next SessionHeader for
    the persisted, not yet acknowledged RecoverableMessage numbers ``persisted``: the
    lowest one and the bitmap of the 32 numbers from it (MS-MQMQ 2.2.20.4). The numbers
    it covers are removed from ``persisted``; (0, 0) when it is empty."""
    if not persisted:
        return 0, 0
    base = min(persisted)
    count = len(persisted)
    if count <= 32 and max(persisted) - base == count - 1:
        # The usual set: one contiguous run from base.
        persisted.clear()
        return base, (1 << count) - 1
    flags = 0
    for n in list(persisted):
        offset = (n - base) % _U16
        if offset < 32:
            flags |= 1 << offset
            persisted.discard(n)
    return base, flags


def stored_before_ack(packet: UserMessagePacket, message: UserMessage, recoverable: int) -> int:
    """The RecoverableMessage number of a packet this QM passes on that waits for the QM
    to store it before it is acknowledged: a recoverable non-transactional UserMessage or
    FinalAck (transactional messages and OrderAcks are acknowledged on receipt); else 0."""
    if packet is message:
        return recoverable if message.transaction is None else 0
    return recoverable if isinstance(packet, FinalAck) else 0
