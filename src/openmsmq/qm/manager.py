"""The queue manager: queues, messages, local transactions, cursors, expiry.

Reads (receive, peek, cursors, lookups, two-phase receive) live in
:mod:`openmsmq.qm.reader`; LookupIdentifier ranges, idempotent send and queue statistics
(the Spark and metrics seams) in :mod:`openmsmq.qm.range_reader`; the MS-MQQB sequence seams
(OrderAck release, FinalAck settlement, incoming acceptance) in
:mod:`openmsmq.qm.sequences`, which the transfer owns. :class:`QueueManager` is a façade
over these collaborators.

Threading model (details in docs/store.md): every public method is thread-safe and
blocking. Each queue has one :class:`threading.Condition` that guards its in-memory
lock set and wakes waiting receivers on enqueue; the candidate SELECT and the lock
are taken under it, and a lock is released only after the deletion is durable, so a
message can never be handed out twice. Durable writes go through the store's writer
(group commit). asyncio code calls these methods through ``asyncio.to_thread``.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from openmsmq.datadir import private_dir
from openmsmq.errors import HResult, MQError
from openmsmq.observability.sink import NULL_METRICS, MetricsSink
from openmsmq.qm import names
from openmsmq.qm.admin import QueueAdmin, canonical_senders
from openmsmq.qm.dead_letters import DeadLetters, Expirer
from openmsmq.qm.handles import CancelToken, CursorAction, LookupAction, QueueHandle, QueueState
from openmsmq.qm.locks import LockTable
from openmsmq.qm.options import StoreOptions
from openmsmq.qm.poison import Poison
from openmsmq.qm.range_reader import DEFAULT_IDENTITY_RETENTION, LookupRange, QueueStats, RangeReader
from openmsmq.qm.reader import Reader
from openmsmq.qm.registry import QueueRef, QueueRegistry
from openmsmq.qm.removals import CommitHook, Listener, RemovalEvents
from openmsmq.qm.sending import Sender
from openmsmq.qm.sequences import SequenceStore
from openmsmq.qm.store_choice import StoreChoice
from openmsmq.qm.transaction import ACK_RECEIVE, PendingReceive, Transaction
from openmsmq.retry_policy import RetryPolicy
from openmsmq.store import ops, queues, reads
from openmsmq.store.backend import StoreBackend
from openmsmq.store.ops import RemovedMessage, Send
from openmsmq.store.records import (
    INFINITE,
    MAX_MESSAGE_BYTES,
    IncomingSequenceState,
    MessageRecord,
    OutgoingSequenceState,
    QueueRecord,
    message_uniquifier,
)

__all__ = ["CancelToken", "CursorAction", "LookupAction", "QueueHandle", "QueueManager", "canonical_senders"]


class QueueManager:
    """A queue manager over a data directory (``openmsmq.db`` inside it).

    ``threaded=False`` runs the store without its writer thread (deterministic
    simulation); ``clock`` gives seconds since 1970 for SentTime / ArrivedTime and
    expiry checks on receive; ``expire_interval`` starts a thread running
    :meth:`expire` (and :meth:`prune_identities`) periodically; ``identity_retention``
    is how long idempotent-send identities are remembered (default 7 days); ``metrics``
    receives the counts of commits, dead letters and store commits (no-op by default;
    ``openmsmq serve`` passes its :class:`~openmsmq.observability.metrics.Metrics`).
    """

    def __init__(
        self,
        data_dir: str | Path,
        *,
        threaded: bool = True,
        clock: Callable[[], float] = time.time,
        computer_name: str | None = None,
        integrity_check: bool = True,
        expire_interval: float | None = None,
        identity_retention: float = DEFAULT_IDENTITY_RETENTION,
        metrics: MetricsSink | None = None,
        store_options: StoreOptions | None = None,
        store: StoreBackend | None = None,
    ) -> None:
        opts = store_options or StoreOptions()
        self.data_dir = private_dir(data_dir)  # 0700: every message body is in it
        self._clock = clock
        self.computer_name = (computer_name or socket.gethostname()).casefold()
        choice = StoreChoice(self.data_dir, opts)
        # ``store``: a store opened by the caller (a highly available node opens it fenced
        # with its lease epoch); otherwise the one the data directory and options name.
        self.store: StoreBackend = (
            store if store is not None else choice.open(threaded=threaded, integrity_check=integrity_check)
        )
        #: Where commits are counted (:class:`~openmsmq.observability.sink.MetricsSink`).
        self.metrics = self.store.metrics = metrics if metrics is not None else NULL_METRICS
        self._uniq_next = 0
        self._uniq_end = 0
        try:
            self.guid: uuid.UUID = self.store.write(queues.init_qm_state(uuid.uuid4(), self._now()))
            choice.record(self.guid)
        except BaseException:
            self.store.close()
            raise
        #: The queues in memory (:class:`~openmsmq.qm.registry.QueueRegistry`).
        self.queues = QueueRegistry(self.guid, self.computer_name)
        self._lock = self.queues.lock
        #: Removal listeners and commit hooks (:class:`~openmsmq.qm.removals.RemovalEvents`).
        self.removals = RemovalEvents(self.queues)
        #: Locks of received messages (:class:`~openmsmq.qm.locks.LockTable`).
        self.locks = LockTable(self.store, self.queues, self.removals)
        self._stop = threading.Event()
        #: Expiry, dead letters, outgoing purges (:class:`~openmsmq.qm.dead_letters.DeadLetters`).
        self.dead_letters = DeadLetters(
            self.store, self.metrics, self.queues, self.removals, self.locks, self._stop
        )
        #: Stamping, sends and commits (:class:`~openmsmq.qm.sending.Sender`).
        self.sender = Sender(
            self.store,
            self.metrics,
            self.queues,
            self.locks,
            self.removals,
            self.guid,
            clock,
            self.open_queue,
            min(opts.max_message_bytes, MAX_MESSAGE_BYTES),
        )
        #: Receive, peek, cursors, two-phase receive (:class:`~openmsmq.qm.reader.Reader`).
        self.reader = Reader(self.store, self.queues, self.locks, clock, self.sender.commit, self.metrics)
        #: Subqueues, Move Message, AbortCount and retry policies (:class:`~openmsmq.qm.poison.Poison`).
        self.poison = Poison(
            self.store,
            self.metrics,
            self.queues,
            self.locks,
            self.dead_letters,
            self._lock_for_move,
            self.sender.commit,
            clock,
        )
        #: Ranges, idempotent send, statistics (:class:`~openmsmq.qm.range_reader.RangeReader`).
        self.ranges = RangeReader(
            self.store,
            self.metrics,
            self.queues,
            self.locks,
            self.removals,
            clock,
            self.sender.prepare,
            int(identity_retention),
        )
        #: Create, delete, list, change and purge queues (:class:`~openmsmq.qm.admin.QueueAdmin`).
        self.admin = QueueAdmin(
            self.store,
            self.queues,
            self.removals,
            self.dead_letters,
            self.poison,
            self._now,
            opts.default_quota_kb,
        )
        try:
            for rec in self.store.read(reads.list_queues):
                self.queues.add(rec)
            self.admin.create_system_queues()
        except BaseException:
            self.store.close()
            raise
        self._expirer: Expirer | None = None
        if expire_interval is not None:
            self._expirer = Expirer(self.dead_letters, clock, self._periodic, self._stop, expire_interval)
            self._expirer.start()

    # ---- lifecycle -----------------------------------------------------------------------

    def _now(self) -> int:
        return int(self._clock())

    @property
    def clock(self) -> Callable[[], float]:
        """Seconds since 1970: SentTime, ArrivedTime, expiry."""
        return self._clock

    @clock.setter
    def clock(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        for user in (self.sender, self.reader, self.ranges, self.poison):
            user.clock = clock
        if self._expirer is not None:
            self._expirer.clock = clock

    @property
    def max_message_bytes(self) -> int:
        """Largest message this QM accepts (store.max_message_size; at most 4 MiB)."""
        return self.sender.max_message_bytes

    @property
    def identity_retention(self) -> int:
        """Seconds an idempotent-send identity is remembered (:meth:`send_idempotent`)."""
        return self.ranges.identity_retention

    def now(self) -> int:
        """The QM's clock in whole seconds since 1970 (SentTime, ArrivedTime, expiry)."""
        return int(self._clock())

    def close(self) -> None:
        """Stop background work, wake waiters (they fail) and close the store."""
        with self._lock:
            if self.queues.closed:
                return
            self.queues.closed = True
            states = list(self.queues.by_id.values())
        self._stop.set()
        if self._expirer is not None:
            self._expirer.join()
        for qs in states:
            with qs.cond:
                qs.cond.notify_all()
        self.store.close()

    def __enter__(self) -> QueueManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add_outgoing_listener(self, fn: Callable[[int], None]) -> None:
        """Call ``fn(queue_id)`` after a commit put messages into an outgoing queue, in the
        thread that committed: the transfer driver loads them at once instead of at its
        next poll of the outgoing queues (commits of other processes are seen by that poll
        only). ``fn`` must be cheap and thread-safe."""
        self.queues.add_outgoing_listener(fn)

    def remove_outgoing_listener(self, fn: Callable[[int], None]) -> None:
        """Undo :meth:`add_outgoing_listener` (no error if ``fn`` was not added)."""
        self.queues.remove_outgoing_listener(fn)

    def add_removal_listener(self, fn: Callable[[list[RemovedMessage]], None]) -> None:
        """Call ``fn(events)`` after messages that asked for acknowledgments, journaling or a
        FinalAck leave a queue (received, purged, queue deleted, expired) — the seam for
        MS-MQQB 3.1.7.2 / 3.1.7.17 acknowledgment messages."""
        self.removals.add_listener(fn)

    def add_commit_hook(self, listener: Listener, hook: CommitHook) -> None:
        """For the receives of a transaction (and a receive outside one), call
        ``hook(events)`` before the commit and write the store rows it returns (stamped
        acknowledgments) in the same store transaction as the removals; ``listener`` (a
        registered removal listener) is then not called for those events. A crash can
        then not separate a receive from its acknowledgment."""
        self.removals.add_commit_hook(listener, hook)

    # ---- queues --------------------------------------------------------------------------

    def _check_open(self) -> None:
        self.queues.check_open()

    def set_local_addresses(self, addresses: Iterable[str]) -> None:
        """The hosts that name this QM in DIRECT=TCP: format names while it serves MS-MQQB
        (listen / advertised address, QM name). When one of them is a loopback address,
        the other loopback addresses name other QMs on this host (two QMs on 127.0.0.1 and
        127.0.0.2): only these addresses (and the computer name) are then local, so an
        acknowledgment for ``DIRECT=TCP:127.0.0.1\\...`` raised on 127.0.0.2 travels."""
        self.queues.set_local_addresses(addresses)

    def _resolve(self, queue: QueueRef) -> QueueState:
        return self.queues.resolve(queue)

    def _is_remote(self, name: str) -> bool:
        return self.queues.is_remote(name)

    def queue_by_id(self, queue_id: int) -> QueueHandle | None:
        """A handle of the queue with this QueueIdentifier, None when there is none."""
        qs = self.queues.get(queue_id)
        return None if qs is None else QueueHandle(qs, qs.record.name)

    def open_queue(self, queue: str) -> QueueHandle:
        """Open a local queue, or the OutgoingQueue of a remote format name (created on
        first use, MS-MQDMPR 3.1.7.1.5 step 4). Unknown local queue: MQ_ERROR_QUEUE_NOT_FOUND."""
        self._check_open()
        if self._is_remote(queue):
            # An outgoing queue this QM holds already is opened without the store: the
            # transactional receive of a message that wants an acknowledgment or a
            # FinalAck opens its destination in every commit, and a store write there
            # waited for the writer once more before the commit's own.
            known = self.queues.by_name.get(queues.OUTGOING_NAME_PREFIX + queue.strip().casefold())
            if known is not None and not known.deleted:
                return QueueHandle(known, queue)
            rec = self.store.write(queues.ensure_outgoing_queue(queue.strip(), self._now()))
            with self._lock:
                qs = self.queues.by_id.get(rec.queue_id) or self.queues.add(rec)
            return QueueHandle(qs, queue)
        return QueueHandle(self._resolve(queue), queue)

    def queue_key(self, queue: str) -> str:
        """The name :meth:`open_queue` would give ``queue``'s record (what permissions
        match: ``private$\\orders``, ``outgoing:direct=tcp:10.0.0.5\\private$\\orders``),
        found without writing anything: a caller checks its rules on this before
        :meth:`open_queue` creates the outgoing queue of a remote format name. Spellings
        of one local queue (``.\\PRIVATE$\\Orders``, ``DIRECT=OS:<this host>\\…``) give
        one key; an unknown ``PRIVATE=`` queue of this QM: MQ_ERROR_QUEUE_NOT_FOUND."""
        self._check_open()
        if self._is_remote(queue):
            return queues.OUTGOING_NAME_PREFIX + queue.strip().casefold()
        parsed = names.parse_name(queue)
        if parsed.key is not None and self.queues.is_local_host(parsed.computer):
            return parsed.key
        return self._resolve(queue).record.name

    def find_queue(self, queue: str) -> QueueHandle | None:
        """A handle of the local queue ``queue`` names, or None when there is none (no
        store read, and a remote name is never opened: nothing is created). A name that
        is not a queue name at all (from the network: anything) is no queue either."""
        try:
            if self._is_remote(queue):
                return None
            return QueueHandle(self._resolve(queue), queue)
        except MQError:
            return None

    def create_queue(
        self,
        name: str,
        *,
        transactional: bool = False,
        label: str = "",
        quota_kb: int | None = None,
        journal: bool = False,
        journal_quota_kb: int = INFINITE,
        allowed_senders: Iterable[str | uuid.UUID] = (),
        retry_policy: RetryPolicy | None = None,
    ) -> QueueRecord:
        """See :meth:`~openmsmq.qm.admin.QueueAdmin.create_queue`."""
        return self.admin.create_queue(
            name,
            transactional=transactional,
            label=label,
            quota_kb=quota_kb,
            journal=journal,
            journal_quota_kb=journal_quota_kb,
            allowed_senders=allowed_senders,
            retry_policy=retry_policy,
        )

    def delete_queue(self, queue: QueueRef) -> None:
        """See :meth:`~openmsmq.qm.admin.QueueAdmin.delete_queue`."""
        self.admin.delete_queue(queue)

    def list_queues(self, *, include_system: bool = False) -> list[QueueRecord]:
        """See :meth:`~openmsmq.qm.admin.QueueAdmin.list_queues`."""
        return self.admin.list_queues(include_system=include_system)

    def get_queue(self, queue: QueueRef) -> QueueRecord:
        """See :meth:`~openmsmq.qm.admin.QueueAdmin.get_queue`."""
        return self.admin.get_queue(queue)

    def queue_properties(self, queue: QueueRef) -> QueueRecord:
        """A queue's properties as this QM holds them, without a statement: its record as
        read at open or creation, or as last changed through this QM
        (:meth:`set_queue_properties`) or refreshed by
        :meth:`SequenceStore.accept_arrival_rows_many`. Its ``msg_count`` and
        ``total_bytes`` are not current (:meth:`get_queue` reads them)."""
        return self._resolve(queue).record

    def set_queue_properties(self, queue: QueueRef, **changes: Any) -> QueueRecord:
        """See :meth:`~openmsmq.qm.admin.QueueAdmin.set_queue_properties`."""
        return self.admin.set_queue_properties(queue, **changes)

    def purge_queue(self, queue: QueueRef) -> int:
        """See :meth:`~openmsmq.qm.admin.QueueAdmin.purge_queue`."""
        return self.admin.purge_queue(queue)

    @property
    def default_quota_kb(self) -> int:
        """Quota of a queue created without one (store.default_queue_quota), in KB."""
        return self.admin.default_quota_kb

    # ---- expiry and dead letters (DeadLetters) --------------------------------------------

    def expire(self, now: float, limit: int = 10000) -> int:
        """See :meth:`DeadLetters.expire`."""
        return self.dead_letters.expire(now, limit)

    def expire_due(self, now: float) -> int:
        """See :meth:`DeadLetters.expire_due`."""
        return self.dead_letters.expire_due(now)

    def dead_letter(self, queue: QueueRef, lookup_ids: Sequence[int], message_class: int) -> int:
        """See :meth:`DeadLetters.dead_letter`."""
        return self.dead_letters.dead_letter(queue, lookup_ids, message_class)

    # ---- MS-MQQB sequence states -----------------------------------------------------------
    def sequence_store(self) -> SequenceStore:
        """The store operations of the transfer's sequences over this queue manager's queues
        (:class:`~openmsmq.qm.sequences.SequenceStore`): the transfer, and the acknowledgment
        listener, make one each and own it."""
        return SequenceStore(self.store, self.metrics, self.queues, self.sender, self.now)

    def outgoing_sequence(self, queue: QueueRef) -> OutgoingSequenceState:
        """Persisted OutgoingTxSequenceID / next OutgoingTxSequenceNumber of an outgoing queue."""
        qid = self._resolve(queue).record.queue_id
        return self.store.read(lambda c: reads.outgoing_sequence(c, qid))

    def update_incoming_sequences(
        self,
        deletes: Sequence[IncomingSequenceState],
        writes: Sequence[tuple[IncomingSequenceState, IncomingSequenceState]] = (),
    ) -> int:
        """Delete persisted incoming sequences and rewrite others (``(expected, new)``: an
        operator's reset), in one store transaction; each only while it still holds the
        state given (TxSequenceID and number; 0 / 0 for "no row"), so a sequence that
        accepted a message since keeps its newer state. Returns how many rows changed."""
        self._check_open()
        changed: int = self.store.write(ops.update_incoming(deletes, writes))
        return changed

    def incoming_sequences(self) -> list[IncomingSequenceState]:
        """Every persisted incoming sequence (restore the receiver state at start)."""
        self._check_open()
        return self.store.read(reads.incoming_sequences)

    def settle_outgoing(self, queue: QueueRef, settles: Sequence[tuple[int, int, int]]) -> int:
        """See :meth:`DeadLetters.settle_outgoing`."""
        return self.dead_letters.settle_outgoing(queue, settles)

    # ---- reads (Reader) -------------------------------------------------------------------

    def receive(
        self,
        queue: QueueRef,
        *,
        tx: Transaction | None = None,
        timeout: float | None = 0.0,
        cursor: int | None = None,
        cancel: CancelToken | None = None,
    ) -> MessageRecord:
        """See :meth:`~openmsmq.qm.reader.Reader.receive`."""
        return self.reader.receive(queue, tx=tx, timeout=timeout, cursor=cursor, cancel=cancel)

    def receive_many(
        self,
        queue: QueueRef,
        max_count: int,
        *,
        tx: Transaction | None = None,
        timeout: float | None = 0.0,
        cancel: CancelToken | None = None,
        max_bytes: int | None = None,
    ) -> list[MessageRecord]:
        """See :meth:`~openmsmq.qm.reader.Reader.receive_many`."""
        return self.reader.receive_many(
            queue, max_count, tx=tx, timeout=timeout, cancel=cancel, max_bytes=max_bytes
        )

    def peek(
        self,
        queue: QueueRef,
        *,
        timeout: float | None = 0.0,
        cursor: int | None = None,
        action: CursorAction = CursorAction.CURRENT,
        cancel: CancelToken | None = None,
    ) -> MessageRecord:
        """See :meth:`~openmsmq.qm.reader.Reader.peek`."""
        return self.reader.peek(queue, timeout=timeout, cursor=cursor, action=action, cancel=cancel)

    def read_through_cursor(
        self,
        queue: QueueRef,
        cursor: int,
        n: int,
        *,
        receive: bool,
        advance: bool = False,
        tx: Transaction | None = None,
        timeout: float | None = 0.0,
        first_read: Callable[[Callable[[float | None], MessageRecord]], MessageRecord] | None = None,
        max_bytes: int | None = None,
    ) -> list[MessageRecord]:
        """See :meth:`~openmsmq.qm.reader.Reader.read_through_cursor`."""
        return self.reader.read_through_cursor(
            queue,
            cursor,
            n,
            receive=receive,
            advance=advance,
            tx=tx,
            timeout=timeout,
            first_read=first_read,
            max_bytes=max_bytes,
        )

    def peek_many(
        self,
        queue: QueueRef,
        max_count: int,
        *,
        timeout: float | None = 0.0,
        cursor: int | None = None,
        action: CursorAction = CursorAction.CURRENT,
        cancel: CancelToken | None = None,
        max_bytes: int | None = None,
    ) -> list[MessageRecord]:
        """See :meth:`~openmsmq.qm.reader.Reader.peek_many`."""
        return self.reader.peek_many(
            queue,
            max_count,
            timeout=timeout,
            cursor=cursor,
            action=action,
            cancel=cancel,
            max_bytes=max_bytes,
        )

    def create_cursor(self, queue: QueueRef) -> int:
        """See :meth:`~openmsmq.qm.reader.Reader.create_cursor`."""
        return self.reader.create_cursor(queue)

    def close_cursor(self, handle: int) -> None:
        """See :meth:`~openmsmq.qm.reader.Reader.close_cursor`."""
        return self.reader.close_cursor(handle)

    def peek_by_lookup_id(
        self, queue: QueueRef, lookup_id: int, action: LookupAction = LookupAction.CURRENT
    ) -> MessageRecord:
        """See :meth:`~openmsmq.qm.reader.Reader.peek_by_lookup_id`."""
        return self.reader.peek_by_lookup_id(queue, lookup_id, action)

    def receive_by_lookup_id(
        self,
        queue: QueueRef,
        lookup_id: int,
        action: LookupAction = LookupAction.CURRENT,
        *,
        tx: Transaction | None = None,
    ) -> MessageRecord:
        """See :meth:`~openmsmq.qm.reader.Reader.receive_by_lookup_id`."""
        return self.reader.receive_by_lookup_id(queue, lookup_id, action, tx=tx)

    def dequeue_begin(
        self,
        queue: QueueRef,
        *,
        tx: Transaction | None = None,
        timeout: float | None = 0.0,
        lookup_id: int | None = None,
        action: LookupAction = LookupAction.CURRENT,
        cancel: CancelToken | None = None,
    ) -> PendingReceive:
        """See :meth:`~openmsmq.qm.reader.Reader.dequeue_begin`."""
        return self.reader.dequeue_begin(
            queue, tx=tx, timeout=timeout, lookup_id=lookup_id, action=action, cancel=cancel
        )

    def dequeue_begin_many(
        self,
        queue: QueueRef,
        max_count: int,
        *,
        tx: Transaction | None = None,
        timeout: float | None = 0.0,
        cancel: CancelToken | None = None,
        max_bytes: int | None = None,
    ) -> list[PendingReceive]:
        """See :meth:`~openmsmq.qm.reader.Reader.dequeue_begin_many`."""
        return self.reader.dequeue_begin_many(
            queue, max_count, tx=tx, timeout=timeout, cancel=cancel, max_bytes=max_bytes
        )

    def dequeue_end(self, pending: PendingReceive, delete: bool) -> None:
        """See :meth:`~openmsmq.qm.reader.Reader.dequeue_end`."""
        return self.reader.dequeue_end(pending, delete)

    def abort_receive(self, pending: PendingReceive) -> None:
        """End a transactional two-phase receive as aborted: the message leaves its
        transaction and is put back with its AbortCount one higher (and where its queue's
        retry policy sends it) — what the remote-read service's pending-request cleanup
        timer does with a transactional receive nobody ended. Outside a transaction it is
        Dequeue Message End without deletion. A second end: MQ_ERROR_TRANSACTION_SEQUENCE."""
        tx = pending.transaction
        if tx is None:
            self.reader.dequeue_end(pending, False)
            return
        if pending.ended:
            raise MQError(HResult.MQ_ERROR_TRANSACTION_SEQUENCE, "receive already ended")
        pending.ended = True
        dropped = tx.drop_receive(pending.lookup_id)
        if dropped is not None:
            self.poison.abort([dropped])

    # ---- LookupIdentifier ranges, idempotent send, statistics (RangeReader) --------------

    def lookup_range(
        self, queue: QueueRef, after: int = 0, through: int | None = None, with_bytes: bool = False
    ) -> LookupRange | None:
        """See :meth:`~openmsmq.qm.range_reader.RangeReader.lookup_range`."""
        return self.ranges.lookup_range(queue, after, through, with_bytes)

    def lookup_ranges(
        self, queues: Iterable[QueueRef], with_bytes: bool = False
    ) -> dict[QueueRef, LookupRange | None]:
        """See :meth:`~openmsmq.qm.range_reader.RangeReader.lookup_ranges`."""
        return self.ranges.lookup_ranges(queues, with_bytes)

    def nth_lookup_id(self, queue: QueueRef, after: int, n: int, through: int | None = None) -> int:
        """See :meth:`~openmsmq.qm.range_reader.RangeReader.nth_lookup_id`."""
        return self.ranges.nth_lookup_id(queue, after, n, through)

    def peek_range(
        self, queue: QueueRef, after_lookup_id: int = 0, limit: int = 1000, through: int | None = None
    ) -> list[MessageRecord]:
        """See :meth:`~openmsmq.qm.range_reader.RangeReader.peek_range`."""
        return self.ranges.peek_range(queue, after_lookup_id, limit, through)

    def peek_range_rows(
        self,
        queue: QueueRef,
        after_lookup_id: int = 0,
        limit: int = 1000,
        through: int | None = None,
        max_bytes: int | None = None,
    ) -> list[tuple[Any, ...]]:
        """See :meth:`~openmsmq.qm.range_reader.RangeReader.peek_range_rows`."""
        return self.ranges.peek_range_rows(queue, after_lookup_id, limit, through, max_bytes)

    def peek_range_limited(
        self, queue: QueueRef, after_lookup_id: int, limit: int, through: int | None, max_bytes: int
    ) -> list[MessageRecord]:
        """See :meth:`~openmsmq.qm.range_reader.RangeReader.peek_range_limited`."""
        return self.ranges.peek_range_limited(queue, after_lookup_id, limit, through, max_bytes)

    def high_lookup_id(self) -> int:
        """See :meth:`~openmsmq.qm.range_reader.RangeReader.high_lookup_id`."""
        return self.ranges.high_lookup_id()

    def committed_lookup_id(self) -> int:
        """See :meth:`~openmsmq.qm.range_reader.RangeReader.committed_lookup_id`."""
        return self.ranges.committed_lookup_id()

    def peek_outgoing_rows(self, queue: QueueRef, after_lookup_id: int, limit: int) -> list[tuple[Any, ...]]:
        """See :meth:`~openmsmq.qm.range_reader.RangeReader.peek_outgoing_rows`."""
        return self.ranges.peek_outgoing_rows(queue, after_lookup_id, limit)

    def remove_through(self, positions: Mapping[QueueRef, int]) -> int:
        """See :meth:`~openmsmq.qm.range_reader.RangeReader.remove_through`."""
        return self.ranges.remove_through(positions)

    def send_idempotent(
        self, queue: QueueRef, messages: Sequence[MessageRecord], identities: Sequence[str]
    ) -> list[int | None]:
        """See :meth:`~openmsmq.qm.range_reader.RangeReader.send_idempotent`."""
        return self.ranges.send_idempotent(queue, messages, identities)

    def prune_identities(self, now: float | None = None, limit: int = 10000) -> int:
        """See :meth:`~openmsmq.qm.range_reader.RangeReader.prune_identities`."""
        return self.ranges.prune_identities(now, limit)

    def queue_stats(self) -> list[QueueStats]:
        """See :meth:`~openmsmq.qm.range_reader.RangeReader.queue_stats`."""
        return self.ranges.queue_stats()

    def message_counts(self) -> dict[str, tuple[int, int]]:
        """Messages that entered and left each queue since the queue manager opened
        (:attr:`QueueState.messages_in` / ``messages_out``), by display name, read from
        memory (no store access): the console turns them into rates, the metrics expose
        them as counters."""
        with self._lock:
            states = list(self.queues.by_id.values())
        return {qs.record.display_name: (qs.messages_in, qs.messages_out) for qs in states}

    # ---- subqueues, Move Message, retry policies (Poison) --------------------------------

    def _lock_for_move(self, qs: QueueState, lookup_id: int) -> MessageRecord:
        """Lock message ``lookup_id`` of ``qs`` for a move (Dequeue Message Begin by
        LookupIdentifier, no transaction)."""
        try:
            return self.reader.dequeue_begin(QueueHandle(qs, qs.record.name), lookup_id=lookup_id).message
        except MQError as exc:
            if exc.hresult == HResult.MQ_ERROR_TRANSACTION_USAGE:  # locked by someone else
                raise MQError(
                    HResult.MQ_ERROR_MESSAGE_LOCKED_UNDER_TRANSACTION,
                    f"message {lookup_id} of {qs.record.display_name} is held by another transaction"
                    " or reader",
                ) from None
            raise

    def move_message(
        self,
        queue: QueueRef,
        lookup_id: int,
        to: str,
        tx: Transaction | None = None,
        *,
        return_after: float | None = None,
    ) -> int:
        """See :meth:`~openmsmq.qm.poison.Poison.move`."""
        return self.poison.move(queue, lookup_id, to, tx, return_after=return_after)

    def subqueues(self, queue: QueueRef) -> list[QueueRecord]:
        """The subqueues of a queue that exist (created by the first move into each)."""
        return [s.record for s in self.poison.subqueues_of(self.poison.parent_of(self._resolve(queue)))]

    def retry_policy(self, queue: QueueRef) -> RetryPolicy | None:
        """The retry policy of a queue (of a subqueue's queue), None when it has none."""
        return self.poison.policy_of(self.poison.parent_of(self._resolve(queue)))

    def return_due(self, now: float | None = None) -> int:
        """See :meth:`~openmsmq.qm.poison.Poison.return_due`."""
        return self.poison.return_due(now)

    def _periodic(self) -> None:
        """The expiry thread's other work: retry-cycle returns, old send identities."""
        self.poison.return_due()
        self.prune_identities()

    # ---- sending -------------------------------------------------------------------------

    def prepare_sends(
        self,
        qs: QueueState,
        messages: Sequence[MessageRecord],
        transactional: bool,
        name: str,
        *,
        check_names: bool = True,
    ) -> list[Send]:
        """See :meth:`~openmsmq.qm.sending.Sender.prepare`."""
        return self.sender.prepare(qs, messages, transactional, name, check_names=check_names)

    def _send_record(self, qs: QueueState, row: list[Any], m: MessageRecord, sent: int) -> Send:
        return self.sender.send_record(qs, row, m, sent)

    def send(self, queue: QueueRef, message: MessageRecord, tx: Transaction | None = None) -> MessageRecord:
        """Send one message; returns it with its Identifier, SentTime and (outside a
        transaction, where it is durable on return) its LookupIdentifier. See :meth:`send_many`."""
        sends, lookup_ids = self.sender.send(queue, [message], tx)
        stored = sends[0].message
        return replace(stored, lookup_id=lookup_ids[0]) if lookup_ids else stored

    def send_many(
        self, queue: QueueRef, messages: Sequence[MessageRecord], tx: Transaction | None = None
    ) -> list[int]:
        """Send messages to a local queue or a remote format name (its outgoing queue).

        Without ``tx`` they are durable when this returns (one commit for all); with
        ``tx`` they are stored at commit. Returns the Identifier uniquifiers (the
        Identifier is ``(qm.guid, uniquifier)``). Errors: MQ_ERROR_QUEUE_NOT_FOUND,
        MQ_ERROR_TRANSACTION_USAGE (transactional mismatch), MQ_ERROR_INSUFFICIENT_RESOURCES
        (quota or > 4 MiB), MQ_ERROR_TRANSACTION_SEQUENCE (ended transaction).
        """
        sends, _ = self.sender.send(queue, messages, tx)
        return _uniquifiers_of(sends)

    def send_many_ids(
        self, queue: QueueRef, messages: Sequence[MessageRecord], tx: Transaction | None = None
    ) -> list[tuple[int, int]]:
        """:meth:`send_many` returning ``(uniquifier, LookupIdentifier)`` pairs. Outside a
        transaction the LookupIdentifiers are final (the messages are durable); inside
        ``tx`` they are 0 — :meth:`Transaction.commit` returns them."""
        sends, lookup_ids = self.sender.send(queue, messages, tx)
        uniq = _uniquifiers_of(sends)
        return list(zip(uniq, lookup_ids or [0] * len(uniq), strict=True))

    def _notify(self, states: Iterable[QueueState]) -> None:
        self.queues.notify(states)

    # ---- transactions --------------------------------------------------------------------

    def begin(self) -> Transaction:
        """Start a local transaction."""
        self._check_open()
        return Transaction(self.sender.commit, self.locks.release, self.poison)

    def _commit(
        self,
        sends: list[tuple[QueueState, list[Send]]],
        received: Sequence[tuple[QueueState, Sequence[MessageRecord]]],
        reasons: dict[int, int] | None = None,
    ) -> list[int]:
        return self.sender.commit(sends, received, reasons)


def _uniquifiers_of(sends: Sequence[Send]) -> list[int]:
    """Identifier uniquifiers of Sends stamped by one :meth:`QueueManager.prepare_sends`:
    they are consecutive from the first (u32, wrapping to 1), so only the first is read."""
    if not sends:
        return []
    first = message_uniquifier(sends[0].row)
    if first + len(sends) - 1 <= 0xFFFFFFFF:
        return list(range(first, first + len(sends)))
    return [message_uniquifier(s.row) for s in sends]  # the run wraps


__all__ += ["ACK_RECEIVE"]
