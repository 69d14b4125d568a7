"""Local transactions and two-phase receives (MS-MQDMPR 3.1.1.13–14, 3.1.7.1.8–12).

A :class:`Transaction` buffers its sends in memory and holds in-memory locks on the
messages it received; :meth:`Transaction.commit` makes everything durable in ONE
store operation (one SQL statement per table, one fsync shared with concurrent
commits). Nothing of an unfinished transaction is on disk, so after a crash every
message it had locked is simply back and none of its sends exist (recovery).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

from openmsmq.errors import HResult, MQError
from openmsmq.store.ops import Send
from openmsmq.store.records import COL, Message
from openmsmq.wire._fast import fast_constructor

if TYPE_CHECKING:
    from openmsmq.qm.handles import _QueueState
    from openmsmq.qm.manager import QueueManager

__all__ = ["PendingReceive", "Transaction", "TransactionState"]

_TX_FLAGS = COL["tx_flags"]
_make_send = fast_constructor(Send)


def _with_flag(send: Send, bit: int) -> Send:
    """Copy of a Send whose row has a tx_flags bit set (1 First-, 2 LastInTransaction)."""
    row = list(send.row)
    row[_TX_FLAGS] |= bit
    return _make_send(send.queue_id, row, send.size, send.expire_at, send.expire_class)


#: Message.Class AckReceive: the default DequeueReason (MS-MQDMPR 3.1.1.14).
ACK_RECEIVE = 0x4000


class TransactionState(Enum):
    """Life cycle of a local transaction."""

    ACTIVE = "active"
    COMMITTING = "committing"
    COMMITTED = "committed"
    ABORTED = "aborted"


@dataclass(eq=False)
class _Receive:
    """TransactionalOperation{Dequeue} (MS-MQDMPR 3.1.1.14): a locked message."""

    queue: _QueueState
    message: Message
    reason: int = ACK_RECEIVE


@dataclass(eq=False)
class PendingReceive:
    """A message locked by Dequeue Message Begin (MS-MQDMPR 3.1.7.1.11).

    End it with :meth:`QueueManager.dequeue_end`: delete, or put back. Inside a
    transaction the deletion is decided by commit / abort instead.
    """

    message: Message
    queue: _QueueState
    transaction: Transaction | None
    ended: bool = field(default=False)

    @property
    def lookup_id(self) -> int:
        """LookupIdentifier of the locked message."""
        return self.message.lookup_id


class Transaction:
    """A local (single-phase) transaction: many sends and receives, then commit or abort.

    Use as a context manager: commit on normal exit, abort on exception. Committing or
    aborting an ended transaction raises MQ_ERROR_TRANSACTION_SEQUENCE.
    """

    def __init__(self, qm: QueueManager) -> None:
        self._qm = qm
        self._lock = threading.Lock()
        self.state = TransactionState.ACTIVE
        #: One entry per send call: its queue and its Sends (no tuple per message).
        self._sends: list[tuple[_QueueState, list[Send]]] = []
        self._receives: dict[int, _Receive] = {}

    # ---- called by the QueueManager ----------------------------------------------------

    def _check_active(self) -> None:
        if self.state is not TransactionState.ACTIVE:
            raise MQError(HResult.MQ_ERROR_TRANSACTION_SEQUENCE, f"transaction is {self.state.value}")

    def _add_sends(self, queue: _QueueState, sends: list[Send]) -> None:
        with self._lock:
            self._check_active()
            self._sends.append((queue, sends))

    def _add_receives(self, queue: _QueueState, messages: list[Message]) -> bool:
        """Record locked messages; False if the transaction ended meanwhile (caller unlocks)."""
        with self._lock:
            if self.state is not TransactionState.ACTIVE:
                return False
            for m in messages:
                self._receives[m.lookup_id] = _Receive(queue, m)
            return True

    def _drop_receive(self, lookup_id: int) -> _Receive | None:
        with self._lock:
            return self._receives.pop(lookup_id, None)

    # ---- public ------------------------------------------------------------------------

    @property
    def send_count(self) -> int:
        """Messages sent so far in this transaction."""
        return sum(len(chunk) for _, chunk in self._sends)

    @property
    def receive_count(self) -> int:
        """Messages received (locked) so far in this transaction."""
        return len(self._receives)

    def set_dequeue_reason(self, lookup_id: int, message_class: int) -> None:
        """Set the DequeueReason of a received message (R_SetUserAcknowledgementClass,
        MS-MQRR 3.1.4.14): 0 leaves it, 0xC004 marks it NackReceiveRejected.

        Raises MQ_ERROR_TRANSACTION_USAGE if this transaction did not receive it.
        """
        with self._lock:
            self._check_active()
            op = self._receives.get(lookup_id)
            if op is None:
                raise MQError(
                    HResult.MQ_ERROR_TRANSACTION_USAGE, f"message {lookup_id} is not in this transaction"
                )
            if message_class:
                op.reason = message_class

    def commit(self) -> list[int]:
        """Make every send and receive durable atomically; return the LookupIdentifiers
        of the sent messages, in send order.

        Transaction Prepare marks the first and last sent message FirstInTransaction /
        LastInTransaction (MS-MQDMPR 3.1.7.1.8). On a store failure the transaction is
        aborted (locks released) and the error is raised.
        """
        with self._lock:
            self._check_active()
            self.state = TransactionState.COMMITTING
            sends = list(self._sends)
            receives = list(self._receives.values())
        sends = [(q, chunk) for q, chunk in sends if chunk]
        if sends:
            # Copies, not in-place: the caller's Send rows and lists stay as sent.
            q, chunk = sends[0]
            if len(sends) == 1 and len(chunk) == 1:  # a lone message is first and last
                sends[0] = (q, [_with_flag(chunk[0], 3)])
            else:
                sends[0] = (q, [_with_flag(chunk[0], 1), *chunk[1:]])
                q, chunk = sends[-1]
                sends[-1] = (q, [*chunk[:-1], _with_flag(chunk[-1], 2)])
        try:
            stored = self._qm._commit(sends, receives)
        except BaseException:
            self.state = TransactionState.ABORTED
            self._qm._release(receives)
            raise
        self.state = TransactionState.COMMITTED
        return stored

    def abort(self) -> None:
        """Drop every send; put every received message back where it was."""
        with self._lock:
            self._check_active()
            self.state = TransactionState.ABORTED
            receives = list(self._receives.values())
        self._qm._release(receives)

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if self.state is not TransactionState.ACTIVE:
            return
        if exc_type is None:
            self.commit()
        else:
            self.abort()
