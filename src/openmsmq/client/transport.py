"""The transport interface under the client API: one method per MS-MQRR operation.

:class:`Transport` is what :class:`~openmsmq.client.Connection` calls. The in-process
implementation (:mod:`openmsmq.client.inproc`) calls a :class:`~openmsmq.qm.QueueManager`
directly; a network implementation (``client/grpc_transport.py``) carries the
same calls to a remote-read service. Rules every implementation keeps:

* Arguments and results are values (ints, strings, frozen dataclasses of
  :mod:`openmsmq.client.types` and :mod:`openmsmq.client.message`), so they can cross a
  process boundary.
* Failures raise :class:`~openmsmq.errors.MQError` with the HRESULT of the operation
  (MS-MQRR 3.1.4, MS-MQDMPR 3.1.7); a network transport re-raises the server's HRESULT
  unchanged, and reports an unreachable server as MQ_ERROR_REMOTE_MACHINE_NOT_AVAILABLE.
* Batches are one call: :meth:`Transport.send` takes many messages and :meth:`Transport.read`
  returns up to ``max_count`` — one hop, one commit.
* Handles (queue handles, cursors, request ids) are small ints chosen by the transport;
  transaction ids are :class:`~openmsmq.client.types.TransactionId` (an XACTUOW).
* :data:`SINGLE_MESSAGE` as ``tx`` means "in a transaction of its own" (MSMQ's
  MQ_SINGLE_MESSAGE): one transaction for the whole call.
* Timeouts are seconds (float); ``None`` waits forever (MSMQ INFINITE).
* Arguments are checked before any work with :mod:`openmsmq.client.checks`, which owns
  those checks and their errors, so every implementation refuses alike.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, Final

from openmsmq.client.message import Message, PendingMessage
from openmsmq.client.types import (
    INFINITE,
    Access,
    Ack,
    LookupRange,
    OutgoingMessage,
    QueueInfo,
    RangeQuery,
    ReadAction,
    SendReceipt,
    ShareMode,
    TransactionId,
)
from openmsmq.errors import HResult, MQError, quoted
from openmsmq.remote.status import QMStatus

__all__ = ["SINGLE_MESSAGE", "Transport"]

#: ``tx`` value meaning "a transaction of its own for this call" (MSMQ MQ_SINGLE_MESSAGE).
SINGLE_MESSAGE: Final = TransactionId(uuid.UUID(int=3))


class Transport(ABC):
    """One client's link to one queue manager (thread-safe; one instance per Connection)."""

    #: What :func:`openmsmq.connect` was given (a path, ``file://`` URL or ``grpc://`` URL).
    target: str
    #: True when this transport opened the queue manager of a data directory in this
    #: process: no ``openmsmq serve`` runs there (it would have been reached through its
    #: runtime.json), so nothing transfers its outgoing queues meanwhile.
    in_process: bool = False

    # ---- queue administration --------------------------------------------------------

    @abstractmethod
    def create_queue(
        self,
        path: str,
        *,
        transactional: bool = False,
        label: str = "",
        quota_kb: int | None = None,
        journal: bool = False,
        journal_quota_kb: int = INFINITE,
        allowed_senders: Sequence[str] = (),
    ) -> QueueInfo:
        """Create a private queue; MQ_ERROR_QUEUE_EXISTS if it exists."""

    @abstractmethod
    def delete_queue(self, name: str) -> None:
        """Delete a queue with its messages; MQ_ERROR_QUEUE_NOT_FOUND if there is none."""

    @abstractmethod
    def list_queues(self, *, include_system: bool = False) -> list[QueueInfo]:
        """Every private queue (and system, journal, outgoing ones when asked)."""

    @abstractmethod
    def queue_info(self, name: str) -> QueueInfo:
        """Properties and counts of one queue."""

    # ---- handles (R_OpenQueue, R_CloseQueue, R_CreateCursor, R_CloseCursor) -------------

    @abstractmethod
    def open_queue(self, name: str, access: Access, share: ShareMode = ShareMode.DENY_NONE) -> int:
        """Open a queue by path or format name; returns a queue handle.

        MQ_ERROR_QUEUE_NOT_FOUND, MQ_ERROR_SHARING_VIOLATION (MS-MQDMPR 3.1.7.1.5 step 5),
        MQ_ERROR_UNSUPPORTED_ACCESS_MODE, MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION.
        """

    @abstractmethod
    def close_queue(self, handle: int) -> None:
        """Close a handle: its cursors close and its pending two-phase receives are NACKed
        (the rundown of MS-MQRR 3.1.6)."""

    @abstractmethod
    def create_cursor(self, handle: int) -> int:
        """Open a cursor on the handle's queue (positioned before the first message)."""

    @abstractmethod
    def close_cursor(self, handle: int, cursor: int) -> None:
        """Close a cursor; MQ_ERROR_INVALID_HANDLE if unknown."""

    # ---- messages ------------------------------------------------------------------------

    @abstractmethod
    def purge(self, handle: int) -> int:
        """R_PurgeQueue: delete every available message; needs RECEIVE access. Returns the count."""

    def purge_outgoing(self, format_name: str) -> int:
        """Purge this QM's outgoing queue to ``format_name`` (a remote queue): each message
        leaves it with the class NACK_DELETED (0x8001), those sent with ``dead_letter`` for
        the dead-letter queues (:meth:`QueueManager.purge_queue`). Only on a stopped queue
        manager's data directory; not abstract: the default raises
        MQ_ERROR_UNSUPPORTED_OPERATION saying so."""
        raise MQError(
            HResult.MQ_ERROR_UNSUPPORTED_OPERATION,
            f"purging the outgoing queue {quoted(format_name)} needs the queue manager stopped: stop"
            " `openmsmq serve` and run the command again with --qm <its data directory>",
        )

    @abstractmethod
    def send(
        self, handle: int, messages: Sequence[OutgoingMessage], tx: TransactionId | None = None
    ) -> list[SendReceipt]:
        """Send messages in one commit (without ``tx``) or into transaction ``tx``."""

    @abstractmethod
    def read(
        self,
        handle: int,
        action: ReadAction = ReadAction.RECEIVE,
        *,
        lookup_id: int = 0,
        cursor: int = 0,
        timeout: float | None = 0.0,
        tx: TransactionId | None = None,
        max_count: int = 1,
    ) -> list[Message]:
        """R_StartReceive + R_EndReceive(ACK) in one call, batched: up to ``max_count``
        messages (waits ``timeout`` for the first only; never returns an empty list).

        Parameter rules of MS-MQRR 3.1.4.7: lookup actions take ``lookup_id`` and no cursor
        or batch; PEEK_NEXT needs a cursor (else MQ_ERROR_ILLEGAL_CURSOR_ACTION); a peek
        inside a transaction is MQ_ERROR_TRANSACTION_USAGE. Nothing waiting:
        MQ_ERROR_IO_TIMEOUT; no message for a lookup: MQ_ERROR_MESSAGE_NOT_FOUND.
        """

    @abstractmethod
    def start_receive(
        self,
        handle: int,
        action: ReadAction = ReadAction.RECEIVE,
        *,
        lookup_id: int = 0,
        timeout: float | None = 0.0,
        tx: TransactionId | None = None,
    ) -> PendingMessage:
        """First phase of a receive (R_StartReceive / R_StartTransactionalReceive): the
        message is locked for this handle until :meth:`end_receive` (or close)."""

    @abstractmethod
    def end_receive(self, handle: int, request_id: int, ack: Ack, transactional: bool | None = None) -> None:
        """R_EndReceive (``transactional`` False: ACK removes the message now) or
        R_EndTransactionalReceive (True: ACK leaves it to the transaction's commit); NACK
        makes it available again. A receive ended with the method that does not match how
        it started is MQ_ERROR_TRANSACTION_USAGE and stays pending; None: the method that
        matches."""

    def ready_receive(self, handle: int, tx: TransactionId) -> PendingMessage | None:
        """:meth:`start_receive` of one message from the head in ``tx`` when the transport
        already holds it, without blocking (an event loop may call it); None: call
        :meth:`start_receive`."""
        return None

    def hold_end(self, handle: int, request_id: int, ack: Ack, transactional: bool | None = None) -> bool:
        """:meth:`end_receive` when the transport can carry it with a later call (an RR_ACK
        of a transactional receive, with its commit), without blocking; False: call
        :meth:`end_receive`."""
        return False

    @abstractmethod
    def set_ack_class(self, tx: TransactionId, lookup_id: int, message_class: int) -> None:
        """R_SetUserAcknowledgementClass (MS-MQRR 3.1.4.14): 0xC004 marks a message
        received in ``tx`` as rejected (NACK_RECEIVE_REJECTED at commit)."""

    def move_message(
        self,
        handle: int,
        lookup_id: int,
        to: str,
        tx: TransactionId | None = None,
        return_after: float | None = None,
    ) -> int:
        """R_MoveMessage (MS-MQRR 3.1.4.10): move message ``lookup_id`` of the handle's queue
        (opened with RECEIVE access) to ``to``: a subqueue name, ``;subqueue``, the queue
        itself or a format name of one of them. ``return_after`` (seconds, a move to a
        subqueue): the queue manager moves it back then (a retry cycle). Returns the new
        LookupIdentifier (0 inside ``tx``: the move happens at its commit)."""
        raise _unsupported("moving messages")

    # ---- transactions --------------------------------------------------------------------

    @abstractmethod
    def begin(self) -> TransactionId:
        """Start a transaction. Never waits for I/O (the remote transport picks the
        XACTUOW locally), so an event loop may call it."""

    @abstractmethod
    def commit(self, tx: TransactionId) -> None:
        """Commit: durable when this returns; MQ_ERROR_TRANSACTION_SEQUENCE if ``tx`` ended."""

    @abstractmethod
    def abort(self, tx: TransactionId) -> None:
        """Abort: sends dropped, received messages back in place."""

    # ---- LookupIdentifier ranges (the Spark data source's seams, docs/spark.md) ----------
    #
    # Not abstract, so that a transport written before them keeps working: the defaults
    # raise MQ_ERROR_UNSUPPORTED_OPERATION. Queues are named, not opened; a remote
    # transport checks the caller's permission on each (peek for reads, receive for
    # removal, send for the idempotent send). Each call is one round trip.

    def lookup_ranges(
        self, queries: Sequence[RangeQuery], *, with_bytes: bool = False
    ) -> list[LookupRange | None]:
        """(first, last, count) of each query's messages, in order; None where there is
        none. An open-ended query's ``last`` is a stable watermark. ``with_bytes``: also
        each range's total stored size (``LookupRange.bytes``)."""
        raise _unsupported("lookup_ranges")

    def nth_lookup_id(self, queue: str, after: int, n: int, through: int | None = None) -> int:
        """LookupIdentifier of the ``n``-th message (n >= 1) of ``queue`` after ``after``
        (and <= ``through``); MQ_ERROR_MESSAGE_NOT_FOUND when fewer exist."""
        raise _unsupported("nth_lookup_id")

    def peek_range(
        self, queue: str, after: int = 0, through: int | None = None, max_count: int = 1000
    ) -> list[Message]:
        """Up to ``max_count`` messages with ``after`` < LookupIdentifier <= ``through``, in
        LookupIdentifier order, locked ones included; nothing is removed or locked."""
        raise _unsupported("peek_range")

    def remove_through(self, positions: Mapping[str, int]) -> int:
        """Remove every message with LookupIdentifier <= ``positions[queue]`` from each
        queue, all queues in ONE transaction; idempotent. Returns how many were removed."""
        raise _unsupported("remove_through")

    def send_idempotent(
        self, queue: str, messages: Sequence[OutgoingMessage], identities: Sequence[str]
    ) -> list[int | None]:
        """Send ``messages`` to a local queue in ONE transaction, each with an identity (1-255
        characters); a message whose identity the queue already accepted is skipped.
        Returns each message's LookupIdentifier, None where skipped."""
        raise _unsupported("send_idempotent")

    # ---- status (openmsmq status) ----------------------------------------------------------

    def status(self) -> QMStatus:
        """The queue manager's status: identity, queue depths, outgoing and incoming
        transactional sequences (:mod:`openmsmq.remote.status`). Live transfer state
        (connected, retrying, in flight, last OrderAck'ed) needs a running queue manager;
        an in-process transport gives the stored state. Not abstract: the default raises
        MQ_ERROR_UNSUPPORTED_OPERATION."""
        raise _unsupported("status")

    def reset_incoming_sequence(
        self, source_qm: str, destination: str, tx_sequence_id: int, tx_sequence_number: int
    ) -> tuple[tuple[int, int], tuple[int, int]]:
        """Reset the incoming transactional sequence of QM ``source_qm`` for ``destination``
        (as :meth:`status` lists it) to IncomingTxSequenceID ``tx_sequence_id`` (u64) and
        IncomingTxSequenceNumber ``tx_sequence_number``; ``0, 0`` forgets its state (the
        next message that starts a sequence is accepted). An operator's repair after
        checking the sender (docs/operations.md). Returns (ID, number) before and after.
        Not abstract: the default raises MQ_ERROR_UNSUPPORTED_OPERATION."""
        raise _unsupported("reset_incoming_sequence")

    # ---- administration (openmsmq queue set, openmsmq outgoing) --------------------------

    def set_queue_properties(self, name: str, **changes: Any) -> QueueInfo:
        """Change properties of the private queue ``name``: ``label``, ``quota_kb``,
        ``journal``, ``journal_quota_kb``, ``base_priority``, ``allowed_senders`` (only those
        given). Returns the queue as it is then. Not abstract: the default raises
        MQ_ERROR_UNSUPPORTED_OPERATION."""
        raise _unsupported("set_queue_properties")

    def set_outgoing_state(self, format_name: str, suspended: bool) -> QueueInfo:
        """Suspend (``suspended``) or resume the outgoing queue to ``format_name`` in the
        running transfer (held in memory: a restarted QM sends from every outgoing queue).
        Not abstract: the default raises MQ_ERROR_UNSUPPORTED_OPERATION."""
        raise _unsupported("set_outgoing_state")

    # ---- lifecycle -----------------------------------------------------------------------

    @abstractmethod
    def close(self) -> None:
        """Close every handle, abort every open transaction, release the connection."""


def _unsupported(what: str) -> MQError:
    return MQError(HResult.MQ_ERROR_UNSUPPORTED_OPERATION, f"this transport has no {what}")
