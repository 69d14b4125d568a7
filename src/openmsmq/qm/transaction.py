"""Local transactions and two-phase receives (MS-MQDMPR 3.1.1.13–14, 3.1.7.1.8–12).

A :class:`Transaction` buffers its sends in memory and holds in-memory locks on the
messages it received; :meth:`Transaction.commit` makes everything durable in ONE
store operation (one SQL statement per table, one fsync shared with concurrent
commits). Nothing of an unfinished transaction is on disk, so after a crash every
message it had locked is simply back and none of its sends exist (recovery).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from operator import itemgetter
from typing import TYPE_CHECKING

from openmsmq.errors import HResult, MQError
from openmsmq.store.ops import Send
from openmsmq.store.records import COL, MessageRecord
from openmsmq.wire.fast import fast_constructor

if TYPE_CHECKING:
    from openmsmq.qm.handles import QueueState

#: The commit of a transaction's work: (queue, Sends) per send call, (queue, locked
#: messages) per receive call, the DequeueReasons other than AckReceive -> the stored
#: LookupIdentifiers of the sends.
CommitWork = Callable[
    [
        list[tuple["QueueState", list[Send]]],
        Sequence[tuple["QueueState", Sequence[MessageRecord]]],
        dict[int, int] | None,
    ],
    list[int],
]

__all__ = ["PendingReceive", "Transaction", "TransactionState"]

_TX_FLAGS = COL["tx_flags"]
_make_send = fast_constructor(Send)
#: The Sends of a (queue, Sends) pair.
_chunk = itemgetter(1)


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
class Receive:
    """TransactionalOperation{Dequeue} (MS-MQDMPR 3.1.1.14): a locked message."""

    queue: QueueState
    message: MessageRecord
    reason: int = ACK_RECEIVE


@dataclass(eq=False)
class PendingReceive:
    """A message locked by Dequeue Message Begin (MS-MQDMPR 3.1.7.1.11).

    End it with :meth:`QueueManager.dequeue_end`: delete, or put back. Inside a
    transaction the deletion is decided by commit / abort instead.
    """

    message: MessageRecord
    queue: QueueState
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

    def __init__(self, commit: CommitWork, release: Callable[[Sequence[Receive]], None]) -> None:
        #: Writes the transaction's work in one store operation (the QueueManager's commit).
        self._commit_work = commit
        #: Puts locked messages back (the lock table's release).
        self._release = release
        self._lock = threading.Lock()
        self.state = TransactionState.ACTIVE
        #: One entry per send call: its queue and its Sends (no tuple per message).
        self._sends: list[tuple[QueueState, list[Send]]] = []
        #: One entry per receive call: its queue and the messages it locked (no object
        #: per message) — until a call needs single receives (:meth:`_indexed`).
        self._batches: list[tuple[QueueState, list[MessageRecord]]] = []
        #: The receives by LookupIdentifier once :meth:`_indexed` built it (then used
        #: instead of ``_batches``), else None.
        self._receives: dict[int, Receive] | None = None

    # ---- called by the QueueManager and its reader -------------------------------------

    def check_active(self) -> None:
        if self.state is not TransactionState.ACTIVE:
            raise MQError(HResult.MQ_ERROR_TRANSACTION_SEQUENCE, f"transaction is {self.state.value}")

    def add_sends(self, queue: QueueState, sends: list[Send]) -> None:
        with self._lock:
            self.check_active()
            self._sends.append((queue, sends))

    def add_receives(self, queue: QueueState, messages: list[MessageRecord]) -> bool:
        """Record locked messages; False if the transaction ended meanwhile (caller unlocks)."""
        with self._lock:
            if self.state is not TransactionState.ACTIVE:
                return False
            index = self._receives
            if index is None:
                # A copy: the caller hands the same list to the application.
                self._batches.append((queue, list(messages)))
            else:
                for m in messages:
                    index[m.lookup_id] = Receive(queue, m)
            return True

    def _indexed(self) -> dict[int, Receive]:
        """The receives by LookupIdentifier (call under ``_lock``). Built from the batches,
        in receive order, by the first call that needs one receive (a DequeueReason, an
        RR_NACK); later receives go straight into it."""
        index = self._receives
        if index is None:
            index = self._receives = {m.lookup_id: Receive(q, m) for q, ms in self._batches for m in ms}
            self._batches = []
        return index

    def drop_receive(self, lookup_id: int) -> Receive | None:
        with self._lock:
            return self._indexed().pop(lookup_id, None)

    def _held(self) -> tuple[list[tuple[QueueState, list[MessageRecord]]], dict[int, int] | None]:
        """(call under ``_lock``) The receives as (queue, messages) runs in receive order,
        and the DequeueReasons that are not AckReceive (None when there is none)."""
        index = self._receives
        if index is None:
            return list(self._batches), None
        runs: list[tuple[QueueState, list[MessageRecord]]] = []
        reasons: dict[int, int] = {}
        for r in index.values():
            if runs and runs[-1][0] is r.queue:
                runs[-1][1].append(r.message)
            else:
                runs.append((r.queue, [r.message]))
            if r.reason != ACK_RECEIVE:
                reasons[r.message.lookup_id] = r.reason
        return runs, reasons or None

    # ---- public ------------------------------------------------------------------------

    @property
    def send_count(self) -> int:
        """Messages sent so far in this transaction."""
        return sum(len(chunk) for _, chunk in self._sends)

    @property
    def receive_count(self) -> int:
        """Messages received (locked) so far in this transaction."""
        index = self._receives
        return len(index) if index is not None else sum(len(ms) for _, ms in self._batches)

    def set_dequeue_reason(self, lookup_id: int, message_class: int) -> None:
        """Set the DequeueReason of a received message (R_SetUserAcknowledgementClass,
        MS-MQRR 3.1.4.14): 0 leaves it, 0xC004 marks it NackReceiveRejected.

        Raises MQ_ERROR_TRANSACTION_USAGE if this transaction did not receive it.
        """
        with self._lock:
            self.check_active()
            op = self._indexed().get(lookup_id)
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
            self.check_active()
            self.state = TransactionState.COMMITTING
            sends = list(self._sends)
            if self._receives is None:  # _held(), inline: receives kept as batches
                received: list[tuple[QueueState, list[MessageRecord]]] = list(self._batches)
                reasons = None
            else:
                received, reasons = self._held()
        if not all(map(_chunk, sends)):  # C iteration; rebuilt only if a send call was empty
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
            stored = self._commit_work(sends, received, reasons)
        except BaseException:
            self.state = TransactionState.ABORTED
            self._release([Receive(q, m) for q, ms in received for m in ms])
            raise
        self.state = TransactionState.COMMITTED
        return stored

    def abort(self) -> None:
        """Drop every send; put every received message back where it was."""
        with self._lock:
            self.check_active()
            self.state = TransactionState.ABORTED
            received, _ = self._held()
        self._release([Receive(q, m) for q, ms in received for m in ms])

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if self.state is not TransactionState.ACTIVE:
            return
        if exc_type is None:
            self.commit()
        else:
            self.abort()
