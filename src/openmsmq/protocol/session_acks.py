"""Session acknowledgment arithmetic of :class:`~openmsmq.protocol.session.Session`
(MS-MQQB 3.1.1.6.1, 3.1.5.8.7, 3.1.6.4): which persisted recoverable messages one
SessionHeader acknowledges, how many sent messages an AckSequenceNumber covers, which
received packets wait for the QM to store them before they are acknowledged, and the
entries (with their sizes) that await an acknowledgment. No I/O, no clock."""

from __future__ import annotations

from dataclasses import dataclass

from openmsmq.protocol.events import UserMessagePacket
from openmsmq.wire.packets import FinalAck, OrderAck, UserMessage

__all__ = ["AwaitingAck", "covered_by_ack", "recoverable_ack_fields", "stored_before_ack"]

_U16 = 0x10000


@dataclass(slots=True)
class AwaitingAck:
    """An entry awaiting a session acknowledgment (part of OutgoingMessagePosition)."""

    sequence_number: int  # session number, mod 2**16
    #: RecoverableMessage number, 0..0xFFFF (0 is a valid number after the 16-bit wrap);
    #: None for an express message.
    recoverable_number: int | None
    transactional: bool
    handle: int
    size: int  # encoded bytes (Session.unacked_bytes)
    #: Messages of the entry: more than 1 for a run of encoded transactional messages
    #: sent together (numbered from ``sequence_number`` and ``recoverable_number`` on).
    count: int = 1
    #: A run's running byte totals (``ends[i]``: the bytes of its first i + 1 messages)
    #: and how many of them an acknowledgment already took off its front.
    ends: list[int] | None = None
    offset: int = 0


def covered_by_ack(ack_sequence_number: int, first: int | None, awaiting: int, sent_count: int) -> int | None:
    """How many of the ``awaiting`` oldest sent messages (the first numbered ``first``;
    None when none awaits) a SessionHeader's AckSequenceNumber covers (MS-MQQB 3.1.5.5.1):
    0 for a stale acknowledgment, None for one beyond MessageSentCount ``sent_count``."""
    if first is not None:
        covered = (ack_sequence_number - first + 1) % _U16
        if covered <= awaiting:
            return covered
        # Either a stale ack (covers nothing new) or one beyond what was sent.
        behind = (first - 1 - ack_sequence_number) % _U16
        return None if behind >= _U16 // 2 else 0
    if ack_sequence_number != sent_count and (sent_count - ack_sequence_number) % _U16 >= _U16 // 2:
        return None
    return 0


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


def stored_before_ack(packet: UserMessagePacket, message: UserMessage, recoverable: int | None) -> int | None:
    """The RecoverableMessage number of a packet this QM passes on that waits for the QM
    to store it before it is acknowledged: a recoverable non-transactional UserMessage,
    OrderAck or FinalAck (transactional messages are acknowledged on receipt: their sender
    keeps them until the OrderAck); else None. 0 is a number like any other (the one
    after 0xFFFF). An express OrderAck (UserHeader.DM 0, as MS-MQQB 2.2.4 lays it out)
    passes on in memory."""
    if packet is message:
        return recoverable if message.transaction is None else None
    return recoverable if isinstance(packet, FinalAck | OrderAck) else None
