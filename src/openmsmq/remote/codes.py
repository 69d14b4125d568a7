"""MS-MQRR constants used by the remote-read service (remote-read.md §3)."""

from __future__ import annotations

import uuid
from enum import IntEnum, IntFlag
from typing import Final

__all__ = [
    "HRESULT_KEY",
    "INFINITE_TIMEOUT_MS",
    "NACK_RECEIVE_REJECTED",
    "SESSION_KEY",
    "SINGLE_MESSAGE_UOW",
    "UNKNOWN_STEP_OP",
    "AccessMode",
    "Action",
    "RemoteAck",
    "ShareMode",
]

#: Trailing-metadata key carrying a failed call's HRESULT (8 hex digits, e.g. ``C00E0007``).
HRESULT_KEY: Final = "openmsmq-hresult"
#: Request-metadata key carrying the caller's session id.
SESSION_KEY: Final = "openmsmq-session"

#: Details of the MQ_ERROR_INVALID_PARAMETER answering a step op the server does not know
#: (a server older than the op): the client sends that call as its unary rpc instead.
UNKNOWN_STEP_OP: Final = "a step op names no call"

#: ulTimeout meaning "wait forever" (MSMQ INFINITE).
INFINITE_TIMEOUT_MS: Final = 0xFFFFFFFF

#: MQMSG_CLASS_NACK_RECEIVE_REJECTED, the one non-zero usClass of
#: R_SetUserAcknowledgementClass (MS-MQRR 3.1.4.14).
NACK_RECEIVE_REJECTED: Final = 0xC004

#: XACTUOW meaning "a transaction of its own for this call" (MSMQ MQ_SINGLE_MESSAGE); the
#: same value as :data:`openmsmq.client.transport.SINGLE_MESSAGE`.
SINGLE_MESSAGE_UOW: Final = uuid.UUID(int=3).bytes


class AccessMode(IntFlag):
    """dwAccess of R_OpenQueue (MS-MQRR 2.2.1), plus MQ_SEND_ACCESS for Send."""

    #: RECEIVE_ACCESS (MS-MQRR 2.2.1): peek, receive and purge.
    RECEIVE = 0x00000001
    #: MQ_SEND_ACCESS (MSMQ API; not an MS-MQRR value): send.
    SEND = 0x00000002
    #: PEEK_ACCESS (MS-MQRR 2.2.1): peek only.
    PEEK = 0x00000020

    @property
    def can_receive(self) -> bool:
        """True when the handle may receive and purge."""
        return bool(self & AccessMode.RECEIVE)

    @property
    def can_peek(self) -> bool:
        """True when the handle may peek (RECEIVE implies PEEK)."""
        return bool(self & (AccessMode.RECEIVE | AccessMode.PEEK))


class ShareMode(IntEnum):
    """dwShareMode of R_OpenQueue (MS-MQRR 2.2.1; QueueShareMode, MS-MQDMPR 3.1.1.16)."""

    #: MQ_DENY_NONE.
    DENY_NONE = 0x00000000
    #: MQ_DENY_SHARE (QueueShareMode.DenyReceive).
    DENY_SHARE = 0x00000001


class Action(IntEnum):
    """ulAction of R_StartReceive / R_StartTransactionalReceive (MS-MQRR 2.2.1, 3.1.4.7).

    FIRST / LAST lookups are the MSMQ 3.0 seek actions (MS-MQDMPR 3.1.7.3.3 SeekFirst /
    SeekLast); MS-MQRR itself lists only CURRENT / NEXT / PREV.
    """

    #: MQ_ACTION_RECEIVE (MS-MQRR 2.2.1).
    RECEIVE = 0x00000000
    #: MQ_ACTION_PEEK_CURRENT (MS-MQRR 2.2.1).
    PEEK_CURRENT = 0x80000000
    #: MQ_ACTION_PEEK_NEXT (MS-MQRR 2.2.1): needs a cursor.
    PEEK_NEXT = 0x80000001
    #: MQ_LOOKUP_PEEK_CURRENT (MS-MQRR 2.2.1).
    LOOKUP_PEEK_CURRENT = 0x40000010
    #: MQ_LOOKUP_PEEK_NEXT (MS-MQRR 2.2.1).
    LOOKUP_PEEK_NEXT = 0x40000011
    #: MQ_LOOKUP_PEEK_PREV (MS-MQRR 2.2.1).
    LOOKUP_PEEK_PREV = 0x40000012
    #: MQ_LOOKUP_PEEK_FIRST (MSMQ 3.0, MS-MQDMPR SeekFirst).
    LOOKUP_PEEK_FIRST = 0x40000014
    #: MQ_LOOKUP_PEEK_LAST (MSMQ 3.0, MS-MQDMPR SeekLast).
    LOOKUP_PEEK_LAST = 0x40000018
    #: MQ_LOOKUP_RECEIVE_CURRENT (MS-MQRR 2.2.1).
    LOOKUP_RECEIVE_CURRENT = 0x40000020
    #: MQ_LOOKUP_RECEIVE_NEXT (MS-MQRR 2.2.1).
    LOOKUP_RECEIVE_NEXT = 0x40000021
    #: MQ_LOOKUP_RECEIVE_PREV (MS-MQRR 2.2.1).
    LOOKUP_RECEIVE_PREV = 0x40000022
    #: MQ_LOOKUP_RECEIVE_FIRST (MSMQ 3.0).
    LOOKUP_RECEIVE_FIRST = 0x40000024
    #: MQ_LOOKUP_RECEIVE_LAST (MSMQ 3.0).
    LOOKUP_RECEIVE_LAST = 0x40000028

    @property
    def is_peek(self) -> bool:
        """True for the peek actions (MS-MQRR 3.1.4.7: everything but the receive actions)."""
        return self not in _RECEIVE_ACTIONS

    @property
    def is_lookup(self) -> bool:
        """True for the MQ_LOOKUP_* actions (selected by LookupIdentifier)."""
        return bool(self & 0x40000000)

    @property
    def needs_lookup_id(self) -> bool:
        """True for lookups relative to a LookupIdentifier (all but FIRST / LAST)."""
        return self.is_lookup and not (self & 0x0C)


_RECEIVE_ACTIONS = frozenset(
    {
        Action.RECEIVE,
        Action.LOOKUP_RECEIVE_CURRENT,
        Action.LOOKUP_RECEIVE_NEXT,
        Action.LOOKUP_RECEIVE_PREV,
        Action.LOOKUP_RECEIVE_FIRST,
        Action.LOOKUP_RECEIVE_LAST,
    }
)


class RemoteAck(IntEnum):
    """dwAck of R_EndReceive / R_EndTransactionalReceive (MS-MQRR 2.2.1)."""

    #: RR_NACK: the packet was not received; the message becomes available again.
    RR_NACK = 0x00000001
    #: RR_ACK: the packet was received; removed now, or at commit in a transaction.
    RR_ACK = 0x00000002
