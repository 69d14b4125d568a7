"""Administration calls of the remote-read service: queue properties and the suspension
of outgoing queues (``openmsmq queue set``, ``openmsmq outgoing suspend|resume``).

MS-MQRR has no method for these (MSMQ administers queues through MQSetQueueProperties
and its management interfaces); they are here so that a running queue manager, whose
store only its own process writes, can be administered from the command line. Each
needs the "admin" permission on the queue it names (:mod:`openmsmq.remote.auth`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from openmsmq.errors import HResult, MQError, quoted
from openmsmq.qm import QueueManager, QueueRecord, QueueType
from openmsmq.remote.auth import Permission, Principal
from openmsmq.remote.limits import check_name

__all__ = ["OutgoingControl", "set_outgoing_state", "set_queue_properties"]

#: Suspends (True) or resumes (False) the outgoing queue of a destination format name in
#: the running transfer; ``openmsmq serve`` provides it.
OutgoingControl = Callable[[str, bool], None]


def _admin_on(qm: QueueManager, principal: Principal, name: str) -> QueueRecord:
    rec = qm.get_queue(check_name(name))  # MQ_ERROR_QUEUE_NOT_FOUND for an unknown name
    if not principal.allows(rec.name, Permission.ADMIN):
        raise MQError(HResult.MQ_ERROR_ACCESS_DENIED, f"{principal.name} may not administer {quoted(name)}")
    return rec


def set_queue_properties(
    qm: QueueManager, principal: Principal, name: str, changes: Mapping[str, Any]
) -> QueueRecord:
    """Change the properties in ``changes`` of queue ``name`` (see
    :meth:`QueueManager.set_queue_properties`); returns the queue as it is then."""
    rec = _admin_on(qm, principal, name)
    if rec.queue_type != QueueType.PRIVATE:
        raise MQError(
            HResult.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION,
            f"{quoted(name)} is not a private queue: only those have settable properties",
        )
    if changes:
        qm.set_queue_properties(name, **changes)
    return qm.get_queue(name)


def set_outgoing_state(
    qm: QueueManager, principal: Principal, name: str, suspended: bool, control: OutgoingControl | None
) -> QueueRecord:
    """Suspend or resume the outgoing queue ``name`` (a destination format name, as
    ``status`` lists it) in the running transfer."""
    rec = _admin_on(qm, principal, name)
    if rec.queue_type != QueueType.OUTGOING:
        raise MQError(
            HResult.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION, f"{quoted(name)} is not an outgoing queue"
        )
    if control is None:
        raise MQError(HResult.MQ_ERROR_SERVICE_NOT_AVAILABLE, "no MS-MQQB transfer runs in this QM")
    control(rec.destination_format_name or name, suspended)
    return rec
