"""The per-client state of the remote-read service: sessions and what they own.

A :class:`Session` owns its queue handles (:class:`OpenQueueDescriptor`, MS-MQDMPR
3.1.1.16), its transactions (:class:`RemoteTransaction`) and its calls that may wait
(:class:`Waiter`). :class:`~openmsmq.remote.core.RemoteReadCore` keeps the sessions and
runs the MS-MQRR operations on them. Split from :mod:`openmsmq.remote.core`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from dataclasses import dataclass, field

from openmsmq.qm import QueueHandle, Transaction
from openmsmq.remote.auth import Principal
from openmsmq.remote.codes import INFINITE_TIMEOUT_MS, AccessMode, ShareMode
from openmsmq.remote.pending import TxState

__all__ = [
    "OpenQueueDescriptor",
    "RemoteSession",
    "RemoteTransaction",
    "Waiter",
    "share_conflict",
    "timeout_seconds",
]


@dataclass(eq=False)
class OpenQueueDescriptor:
    """OpenQueueDescriptor (MS-MQDMPR 3.1.1.16): a queue context handle of a session."""

    handle: int
    session: RemoteSession
    qm_handle: QueueHandle
    access: AccessMode
    share: ShareMode
    cursors: set[int] = field(default_factory=set)
    closed: bool = False

    @property
    def queue_id(self) -> int:
        """The queue's id in the store."""
        return self.qm_handle.record.queue_id

    @property
    def queue_name(self) -> str:
        """The queue's canonical name (what permissions match)."""
        return self.qm_handle.record.name


@dataclass(eq=False)
class RemoteTransaction:
    """A transaction a session created (R_QMEnlistRemoteTransaction or implicitly): its
    XACTUOW, the QM transaction, and the outcome its pending entries see."""

    uow: bytes
    txn: Transaction
    state: TxState = field(default_factory=TxState)
    #: Memory its buffered sends hold until it ends (counted in the session's
    #: ``pending_bytes``: :class:`openmsmq.remote.pending.PendingBudget`).
    held_bytes: int = 0


@dataclass(eq=False)
class Waiter:
    """A call that may wait in the queue manager; ``event`` set = stop (cancelled)."""

    session: RemoteSession
    handle: int
    request_id: int
    event: threading.Event


@dataclass(eq=False)
class RemoteSession:
    """A client's session: owns handles, transactions and waiting calls."""

    id: str
    principal: Principal
    last_seen: float
    handles: dict[int, OpenQueueDescriptor] = field(default_factory=dict)
    txs: dict[bytes, RemoteTransaction] = field(default_factory=dict)
    ended_txs: OrderedDict[bytes, None] = field(default_factory=OrderedDict)
    waiters: set[Waiter] = field(default_factory=set)
    closed: bool = False
    #: Memory held for its pending receives (each locked message's size plus
    #: :data:`openmsmq.remote.pending.ENTRY_OVERHEAD`) and for the sends buffered in its open
    #: transactions (:class:`openmsmq.remote.pending.PendingBudget`).
    pending_bytes: int = 0


def share_conflict(existing: OpenQueueDescriptor, access: AccessMode, share: ShareMode) -> bool:
    """The sharing table of MS-MQDMPR 3.1.7.1.5 step 5 (MQ_ERROR_SHARING_VIOLATION)."""
    if existing.share == ShareMode.DENY_SHARE and existing.access.can_receive:
        return share == ShareMode.DENY_SHARE or access.can_receive
    if existing.share == ShareMode.DENY_SHARE and existing.access.can_peek:
        return access.can_receive
    if existing.share == ShareMode.DENY_NONE and existing.access.can_receive:
        return share == ShareMode.DENY_SHARE
    return False


def timeout_seconds(timeout_ms: int) -> float | None:
    """ulTimeout (ms, INFINITE = forever) as seconds (None = forever)."""
    return None if timeout_ms == INFINITE_TIMEOUT_MS else timeout_ms / 1000.0
