"""The checks every :class:`~openmsmq.client.transport.Transport` makes on its arguments
before any work, and their errors: one owner, so that a caller gets the same error from
every transport. A hot path tests inline (``if max_count < 1: raise too_few(...)``) and
calls here only to build the error."""

from __future__ import annotations

from openmsmq.client.types import INFINITE, OutgoingMessage, ReadAction
from openmsmq.errors import HResult, MQError

__all__ = ["check_outgoing", "check_two_phase", "connection_closed", "too_few"]


def connection_closed() -> MQError:
    """The error of a call on a closed transport."""
    return MQError(HResult.MQ_ERROR_SERVICE_NOT_AVAILABLE, "connection is closed")


def too_few(name: str, value: int) -> MQError:
    """The error for a count argument below 1 (``max_count`` of a batch, ``n`` of
    ``Transport.nth_lookup_id``)."""
    return MQError(HResult.MQ_ERROR_INVALID_PARAMETER, f"{name} must be at least 1, got {value}")


def check_two_phase(action: ReadAction) -> ReadAction:
    """``action`` as a :class:`ReadAction` when it may start a two-phase receive
    (:meth:`~openmsmq.client.transport.Transport.start_receive`): a receive, not a peek."""
    action = ReadAction(action)
    if action.is_peek:
        raise MQError(HResult.MQ_ERROR_INVALID_PARAMETER, "a two-phase read is a receive action")
    return action


def check_outgoing(m: OutgoingMessage) -> None:
    """The values of a message to send that no transport can carry: a CorrelationID of more
    than its 20 bytes (MQ_ERROR_ILLEGAL_PROPERTY_SIZE), an AppSpecific or time limit
    outside the u32 of its header field (MQ_ERROR_ILLEGAL_PROPERTY_VALUE; MS-MQMQ
    2.2.19.1-2.2.19.3)."""
    if len(m.correlation_id) > 20:
        raise MQError(HResult.MQ_ERROR_ILLEGAL_PROPERTY_SIZE, "correlation id has at most 20 bytes")
    if not 0 <= m.app_specific <= 0xFFFFFFFF:
        raise MQError(HResult.MQ_ERROR_ILLEGAL_PROPERTY_VALUE, "app_specific must be a u32")
    for name in ("time_to_reach_queue", "time_to_be_received"):
        if not 0 <= getattr(m, name) <= INFINITE:
            raise MQError(HResult.MQ_ERROR_ILLEGAL_PROPERTY_VALUE, f"{name} must be a u32 of seconds")
