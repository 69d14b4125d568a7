"""The queue manager: queues, messages, local transactions, cursors, expiry.

Reads (receive, peek, cursors, lookups, two-phase receive) live in
:mod:`openmsmq.qm.reads`; LookupIdentifier ranges, idempotent send and queue statistics
(the Spark and metrics seams) in :mod:`openmsmq.qm.ranges`; the MS-MQQB sequence seams
(OrderAck release, FinalAck settlement, incoming acceptance) in
:mod:`openmsmq.qm.sequences`. :class:`QueueManager` inherits all three.

Threading model (details in docs/store.md): every public method is thread-safe and
blocking. Each queue has one :class:`threading.Condition` that guards its in-memory
lock set and wakes waiting receivers on enqueue; the candidate SELECT and the lock
are taken under it, and a lock is released only after the deletion is durable, so a
message can never be handed out twice. Durable writes go through the store's writer
(group commit). asyncio code calls these methods through ``asyncio.to_thread``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from operator import itemgetter
from pathlib import Path
from typing import Any

from openmsmq.datadir import private_dir
from openmsmq.errors import HResult, MQError, quoted
from openmsmq.observability.sink import NULL_METRICS, MetricsSink
from openmsmq.qm import names
from openmsmq.qm.dead_letters import DeadLetterMixin
from openmsmq.qm.handles import CancelToken, CursorAction, LookupAction, QueueHandle, _Cursor, _QueueState
from openmsmq.qm.locks import NACK_Q_PURGED, LocksMixin
from openmsmq.qm.options import StoreOptions
from openmsmq.qm.ranges import DEFAULT_IDENTITY_RETENTION, RangesMixin
from openmsmq.qm.reads import ReadsMixin
from openmsmq.qm.sequences import SequencesMixin
from openmsmq.qm.store_choice import StoreChoice
from openmsmq.qm.transaction import ACK_RECEIVE, Transaction, _Receive
from openmsmq.qm.transfer_codec import check_remote_names
from openmsmq.store import ops, queues, reads
from openmsmq.store.backend import StoreBackend
from openmsmq.store.ops import Remove, RemovedMessage, Send
from openmsmq.store.records import (
    COL,
    INFINITE,
    MAX_MESSAGE_BYTES,
    Message,
    QueueRecord,
    QueueType,
    message_uniquifier,
    stamped_rows,
)
from openmsmq.wire._fast import fast_constructor

__all__ = ["CancelToken", "CursorAction", "LookupAction", "QueueHandle", "QueueManager", "canonical_senders"]

#: Message.Class values used here (MS-MQDMPR 3.1.1.12, MS-MQMQ 2.2.18.1.6).
NACK_REACH_QUEUE_TIMEOUT = 0x8002
NACK_Q_DELETED = 0xC000
NACK_RECEIVE_TIMEOUT = 0xC002

_UNIQUIFIER_BLOCK = 4096
#: Room kept in a 4 MiB MS-MQQB packet (MAX_PACKET_SIZE, MS-MQMQ 2.2.19.1) for the headers
#: of a message sent to a remote queue: 140 fixed bytes (BaseHeader, UserHeader,
#: TransactionHeader, MessagePropertiesHeader), a piggy-backed SessionHeader and the
#: UTF-16 admin and response queue names; the destination name is counted on its own.
_REMOTE_HEADROOM = 4096
_C_ARRIVED = COL["arrived_time"]
_C_SIZE = COL["size"]
#: Most names :meth:`QueueManager._send` remembers (then it starts over).
_SEND_NAMES = 4096


QueueRef = str | QueueHandle
#: Messages deleted per store transaction by a purge of a local queue.
_PURGE_PASS = 20_000


class QueueManager(ReadsMixin, RangesMixin, SequencesMixin, LocksMixin, DeadLetterMixin):
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
        #: Largest message this QM accepts (store.max_message_size; at most 4 MiB).
        self.max_message_bytes = min(opts.max_message_bytes, MAX_MESSAGE_BYTES)
        #: Quota of a queue created without one (store.default_queue_quota), in KB.
        self.default_quota_kb = opts.default_quota_kb
        self.data_dir = private_dir(data_dir)  # 0700: every message body is in it
        self.clock = clock
        #: Seconds an idempotent-send identity is remembered (:meth:`send_idempotent`).
        self.identity_retention = int(identity_retention)
        self.computer_name = (computer_name or socket.gethostname()).casefold()
        self._local_hosts = {self.computer_name, "localhost", "127.0.0.1", "::1", "."}
        choice = StoreChoice(self.data_dir, opts)
        # ``store``: a store opened by the caller (a highly available node opens it fenced
        # with its lease epoch); otherwise the one the data directory and options name.
        if store is None:
            store = choice.open(threaded=threaded, integrity_check=integrity_check)
        self.store = store
        #: Where commits are counted (:class:`~openmsmq.observability.sink.MetricsSink`).
        self.metrics = self.store.metrics = metrics if metrics is not None else NULL_METRICS
        self._lock = threading.RLock()
        self._closed = False
        self._queues: dict[str, _QueueState] = {}
        #: Local queue names (as the caller wrote them) already resolved by a send.
        self._send_names: dict[str, _QueueState] = {}
        self._by_id: dict[int, _QueueState] = {}
        self._cursors: dict[int, _Cursor] = {}
        self._next_handle = 1
        self._uniq_next = 0
        self._uniq_end = 0
        self._listeners: list[Callable[[list[RemovedMessage]], None]] = []
        # Listeners whose acknowledgments for a transaction's receives are written in the
        # transaction's own commit: listener -> its hook (see add_commit_hook).
        self._commit_hooks: dict[
            Callable[[list[RemovedMessage]], None], Callable[[list[RemovedMessage]], list[Send]]
        ] = {}
        try:
            self.guid: uuid.UUID = self.store.write(queues.init_qm_state(uuid.uuid4(), self._now()))
            choice.record(self.guid)
            for rec in self.store.read(reads.list_queues):
                self._add_state(rec)
            self._create_system_queues()
        except BaseException:
            self.store.close()
            raise
        self._stop = threading.Event()
        self._expiry_thread: threading.Thread | None = None
        if expire_interval is not None:
            self._expiry_thread = threading.Thread(
                target=self._expiry_loop, args=(expire_interval,), name="openmsmq-expiry", daemon=True
            )
            self._expiry_thread.start()

    # ---- lifecycle -----------------------------------------------------------------------

    def _now(self) -> int:
        return int(self.clock())

    def close(self) -> None:
        """Stop background work, wake waiters (they fail) and close the store."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            states = list(self._by_id.values())
        self._stop.set()
        if self._expiry_thread is not None:
            self._expiry_thread.join()
        for qs in states:
            with qs.cond:
                qs.cond.notify_all()
        self.store.close()

    def __enter__(self) -> QueueManager:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _expiry_loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                self.expire_due(self.clock())
                if self._stop.is_set():
                    return
                self.prune_identities()
            except MQError:
                continue  # store trouble: try again next round

    def add_removal_listener(self, fn: Callable[[list[RemovedMessage]], None]) -> None:
        """Call ``fn(events)`` after messages that asked for acknowledgments, journaling or a
        FinalAck leave a queue (received, purged, queue deleted, expired) — the seam for
        MS-MQQB 3.1.7.2 / 3.1.7.17 acknowledgment messages."""
        self._listeners.append(fn)

    def add_commit_hook(
        self,
        listener: Callable[[list[RemovedMessage]], None],
        hook: Callable[[list[RemovedMessage]], list[Send]],
    ) -> None:
        """For the receives of a transaction (and a receive outside one), call
        ``hook(events)`` before the commit and write the store rows it returns (stamped
        acknowledgments) in the same store transaction as the removals; ``listener`` (a
        registered removal listener) is then not called for those events. A crash can
        then not separate a receive from its acknowledgment."""
        self._commit_hooks[listener] = hook

    def _emit(self, events: list[RemovedMessage], *, hooked: bool = False) -> None:
        if events:
            for fn in list(self._listeners):
                if hooked and fn in self._commit_hooks:
                    continue
                fn(events)

    # ---- queues --------------------------------------------------------------------------

    def _add_state(self, rec: QueueRecord) -> _QueueState:
        qs = _QueueState(rec)
        self._queues[rec.name] = qs
        self._by_id[rec.queue_id] = qs
        return qs

    def _create_system_queues(self) -> None:
        wanted = [
            (names.DEADLETTER, False, None),
            (names.DEADXACT, True, None),
            (names.SYSTEM_JOURNAL, False, None),
            (names.ORDER_QUEUE, False, names.ORDER_QUEUE_NUMBER),
            (names.AWAITING_FINAL_ACK, True, None),
        ]
        for key, transactional, number in wanted:
            if key not in self._queues:
                rec = self.store.write(
                    queues.create_queue(
                        name=key,
                        display_name=key,
                        queue_type=QueueType.SYSTEM,
                        transactional=transactional,
                        label=key,
                        quota_kb=INFINITE,
                        journal_quota_kb=INFINITE,
                        journal=False,
                        now=self._now(),
                        private_number=number or 0,
                        with_journal=False,
                    )
                )
                self._add_state(rec)

    def _check_open(self) -> None:
        if self._closed:
            raise MQError(HResult.MQ_ERROR_SERVICE_NOT_AVAILABLE, "queue manager is closed")

    def set_local_addresses(self, addresses: Iterable[str]) -> None:
        """The hosts that name this QM in DIRECT=TCP: format names while it serves MS-MQQB
        (listen / advertised address, QM name). When one of them is a loopback address,
        the other loopback addresses name other QMs on this host (two QMs on 127.0.0.1 and
        127.0.0.2): only these addresses (and the computer name) are then local, so an
        acknowledgment for ``DIRECT=TCP:127.0.0.1\\...`` raised on 127.0.0.2 travels."""
        given = {a.casefold() for a in addresses if a}
        loopback = False
        for a in given:
            with contextlib.suppress(ValueError):
                loopback = loopback or ipaddress.ip_address(a).is_loopback
        base = {self.computer_name, "."} if loopback else set(self._local_hosts)
        with self._lock:
            self._local_hosts = base | given
            self._send_names.clear()

    def _is_local_host(self, host: str | None) -> bool:
        return host is None or host.casefold() in self._local_hosts

    def _resolve(self, queue: QueueRef) -> _QueueState:
        self._check_open()
        if isinstance(queue, QueueHandle):
            if queue._state.deleted:
                raise MQError(HResult.MQ_ERROR_QUEUE_DELETED, f"queue {queue.format_name} was deleted")
            return queue._state
        parsed = names.parse_name(queue)
        with self._lock:
            qs: _QueueState | None = None
            if parsed.key is not None and self._is_local_host(parsed.computer):
                qs = self._queues.get(parsed.key)
            elif parsed.private_number is not None and parsed.qm_guid == self.guid:
                qs = next(
                    (
                        s
                        for s in self._by_id.values()
                        if s.record.private_number == parsed.private_number
                        and s.record.queue_type in (QueueType.PRIVATE, QueueType.SYSTEM)
                    ),
                    None,
                )
            elif parsed.is_format_name:
                key = queue.strip().casefold()
                qs = next((s for s in self._by_id.values() if s.record.destination_format_name == key), None)
        if qs is None or qs.deleted:
            raise MQError(HResult.MQ_ERROR_QUEUE_NOT_FOUND, f"no queue {quoted(queue)}")
        return qs

    def _is_remote(self, name: str) -> bool:
        parsed = names.parse_name(name)
        if parsed.private_number is not None:
            return parsed.qm_guid != self.guid
        return parsed.is_format_name and not self._is_local_host(parsed.computer)

    def open_queue(self, queue: str) -> QueueHandle:
        """Open a local queue, or the OutgoingQueue of a remote format name (created on
        first use, MS-MQDMPR 3.1.7.1.5 step 4). Unknown local queue: MQ_ERROR_QUEUE_NOT_FOUND."""
        self._check_open()
        if self._is_remote(queue):
            rec = self.store.write(queues.ensure_outgoing_queue(queue.strip(), self._now()))
            with self._lock:
                qs = self._by_id.get(rec.queue_id) or self._add_state(rec)
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
        if parsed.key is not None and self._is_local_host(parsed.computer):
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
    ) -> QueueRecord:
        """Create a private queue ``private$\\name`` (and its journal queue).

        ``allowed_senders``: the QM GUIDs that may send into it over MS-MQQB (empty: every
        sender); a message from another QM is rejected with NACK_ACCESS_DENIED.
        ``quota_kb`` None: the QM's ``default_quota_kb`` (store.default_queue_quota).
        MQ_ERROR_QUEUE_EXISTS if it exists (names are case-insensitive);
        MQ_ERROR_ILLEGAL_QUEUE_PATHNAME for a bad or non-private name;
        MQ_ERROR_ILLEGAL_PROPERTY_VALUE for a sender that is not a GUID.
        """
        self._check_open()
        parsed = names.parse_name(name)
        if (
            parsed.is_format_name
            or parsed.key is None
            or not parsed.key.startswith("private$\\")
            or parsed.key.endswith(";journal")
            or not self._is_local_host(parsed.computer)
        ):
            raise MQError(
                HResult.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME, f"{quoted(name)}: expected a local private$\\ path"
            )
        if len(label) > 124:
            raise MQError(HResult.MQ_ERROR_LABEL_TOO_LONG, "queue label has at most 124 characters")
        senders = canonical_senders(allowed_senders)
        with self._lock:
            rec = self.store.write(
                queues.create_queue(
                    name=parsed.key,
                    display_name=parsed.display,
                    queue_type=QueueType.PRIVATE,
                    transactional=transactional,
                    label=label,
                    quota_kb=self.default_quota_kb if quota_kb is None else quota_kb,
                    journal_quota_kb=journal_quota_kb,
                    journal=journal,
                    now=self._now(),
                    allowed_senders=senders,
                )
            )
            self._add_state(rec)
            if rec.journal_queue_id is not None:
                self._add_state(self.store.read(lambda c: reads.get_queue(c, rec.journal_queue_id or 0)))
        return rec

    def delete_queue(self, queue: QueueRef) -> None:
        """Delete a private queue with its journal and messages (NackQueueDeleted events).
        Waiting receivers and later calls through a handle get MQ_ERROR_QUEUE_DELETED."""
        qs = self._resolve(queue)
        if qs.record.queue_type not in (QueueType.PRIVATE, QueueType.OUTGOING):
            raise MQError(HResult.MQ_ERROR_ACCESS_DENIED, f"cannot delete system queue {qs.record.name}")
        acks = None
        if self._commit_hooks:  # acknowledgments written with the deletion
            pre = self.store.read(queues.queue_events(qs.record.queue_id, NACK_Q_DELETED))
            acks = self._ack_rows(pre) if pre else None
        with self._lock:
            events = self.store.write(queues.delete_queue(qs.record.queue_id, NACK_Q_DELETED, acks))
            doomed = [qs]
            if qs.record.journal_queue_id in self._by_id:
                doomed.append(self._by_id[qs.record.journal_queue_id or 0])
            for s in doomed:
                self._queues.pop(s.record.name, None)
                self._by_id.pop(s.record.queue_id, None)
                with s.cond:
                    s.deleted = True
                    s.reset_head()
                    s.cond.notify_all()
        self._removal_done(events, acks)

    def list_queues(self, *, include_system: bool = False) -> list[QueueRecord]:
        """Private queues (and, if asked, system, journal and outgoing queues) with counts."""
        self._check_open()
        recs = self.store.read(reads.list_queues)
        if include_system:
            return recs
        return [r for r in recs if r.queue_type == QueueType.PRIVATE]

    def get_queue(self, queue: QueueRef) -> QueueRecord:
        """Current properties of a queue, with its message count and TotalBytes."""
        qs = self._resolve(queue)
        return self.store.read(lambda c: reads.get_queue(c, qs.record.queue_id))

    def set_queue_properties(self, queue: QueueRef, **changes: Any) -> QueueRecord:
        """Set label, quota_kb, journal_quota_kb, journal, base_priority, authenticate,
        privacy_level, allowed_senders (GUIDs; empty = every sender) (ModifyTime is updated);
        other keys: MQ_ERROR_PROPERTY_NOTALLOWED."""
        qs = self._resolve(queue)
        if len(changes.get("label", "")) > 124:
            raise MQError(HResult.MQ_ERROR_LABEL_TOO_LONG, "queue label has at most 124 characters")
        if "allowed_senders" in changes:
            changes["allowed_senders"] = canonical_senders(changes["allowed_senders"])
        rec = self.store.write(queues.update_queue(qs.record.queue_id, changes, self._now()))
        qs.record = rec
        return rec

    def purge_queue(self, queue: QueueRef) -> int:
        """Delete every available message (MS-MQDMPR 3.1.7.1.7); locked ones become
        PurgePending and are deleted when their lock ends. Returns the count deleted now.

        An outgoing queue (named by its destination's format name) is purged with the
        class NACK_DELETED (0x8001), its ``dead_letter`` messages moved to the dead-letter
        queues (:meth:`DeadLetterMixin._purge_outgoing`); not while this store is served."""
        qs = self._resolve(queue)
        if qs.record.queue_type == _OUTGOING:
            return self._purge_outgoing(qs)
        qid = qs.record.queue_id
        bound = self.store.read(queues.purge_bound(qid))
        total = 0
        # Passes of _PURGE_PASS messages, one store transaction each: one transaction
        # for a queue of 500,000 held the writer (every other commit) for about 1 s.
        while True:
            acks = None
            if self._commit_hooks:
                # Acknowledgments written with the pass: built first for its messages.
                with qs.cond:
                    qs.settle()
                    exclude = set(qs.locked)
                pre = self.store.read(
                    queues.purge_candidates(qid, exclude, NACK_Q_PURGED, bound, _PURGE_PASS)
                )
                acks = self._ack_rows(pre)
            with qs.cond:
                qs.settle()
                qs.drop_prefetch()
                exclude = set(qs.locked)
                count, events, more = self.store.write(
                    queues.purge_queue(qid, exclude, NACK_Q_PURGED, bound, _PURGE_PASS, acks)
                )
                qs.purge_pending |= exclude
            self._removal_done(events, acks)
            total += count
            if not more:
                return total

    # ---- sending -------------------------------------------------------------------------

    def _uniquifiers(self, count: int) -> int:
        with self._lock:
            if self._uniq_next + count > self._uniq_end:
                block = max(_UNIQUIFIER_BLOCK, count)
                self._uniq_next = self.store.write(queues.reserve_uniquifiers(block))
                self._uniq_end = self._uniq_next + block
            first = self._uniq_next
            self._uniq_next += count
            return first

    def _prepare(
        self,
        qs: _QueueState,
        messages: Sequence[Message],
        transactional: bool,
        name: str,
        *,
        check_names: bool = True,
    ) -> list[Send]:
        """Validate and stamp the QM-assigned attributes (Identifier, SentTime, source,
        destination; priority 0 and Recoverable for transactional messages) straight into
        the store rows. ``check_names``: refuse a message to a remote queue whose admin or
        response queue cannot travel with it (the acknowledgments a QM writes itself
        pass False: a response queue that cannot travel is left out of their packet)."""
        rec = qs.record
        if rec.queue_type in (QueueType.JOURNAL, QueueType.SYSTEM):
            raise MQError(
                HResult.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION, f"cannot send to system queue {rec.name}"
            )
        if rec.queue_type != QueueType.OUTGOING and rec.transactional != transactional:
            # MS-MQQB 1.3.3: a transactional queue takes only transactional messages and
            # a non-transactional queue only non-transactional ones.
            raise MQError(
                HResult.MQ_ERROR_TRANSACTION_USAGE,
                f"queue {rec.display_name} is {'' if rec.transactional else 'not '}transactional",
            )
        now = self._now()
        first = self._uniquifiers(len(messages))
        # Checks each message (size, label, priority) as it builds its row.
        qid = rec.queue_id
        outgoing = rec.queue_type == QueueType.OUTGOING
        # A message to a remote queue must fit one packet with its headers, or it could
        # never be transferred (and would hold up its sequence): refused here instead.
        limit = self.max_message_bytes
        if outgoing:
            limit = min(limit, MAX_MESSAGE_BYTES - _REMOTE_HEADROOM - 2 * len(name))
        rows = stamped_rows(messages, transactional, self.guid, first, now, name, limit)
        if outgoing and check_names:
            for m in messages:
                if m.admin_queue or m.response_queue:  # they travel in the packet too
                    check_remote_names(m, limit)
        out: list[Send] = []
        append = out.append
        for m, row in zip(messages, rows, strict=True):
            if m.time_to_be_received != INFINITE:
                append(self._send_record(qs, row, m, now))
            elif not outgoing or (ttrq := m.time_to_reach_queue) == INFINITE:
                append(_make_send(qid, row, row[_C_SIZE], None, 0))  # never expires
            else:
                # Into an outgoing queue only TimeToReachQueue runs out (_send_record's
                # case, inline: every message to a remote queue has one, 4 days by default).
                append(_make_send(qid, row, row[_C_SIZE], now + ttrq, NACK_REACH_QUEUE_TIMEOUT))
        return out

    def _send_record(self, qs: _QueueState, row: list[Any], m: Message, sent: int) -> Send:
        """Attach the absolute expiry: TimeToBeReceived in a destination queue
        (NackReceiveTimeout); in an outgoing queue also TimeToReachQueue (NackReachQueueTimeout).
        Times count from ``sent`` (SentTime)."""
        candidates = []
        if m.time_to_be_received != INFINITE:
            candidates.append((sent + m.time_to_be_received, NACK_RECEIVE_TIMEOUT))
        if qs.record.queue_type == QueueType.OUTGOING and m.time_to_reach_queue != INFINITE:
            candidates.append((sent + m.time_to_reach_queue, NACK_REACH_QUEUE_TIMEOUT))
        if not candidates:
            return _make_send(qs.record.queue_id, row, row[_C_SIZE], None, 0)
        at, cls = min(candidates)
        return _make_send(qs.record.queue_id, row, row[_C_SIZE], at, cls)

    def send(self, queue: QueueRef, message: Message, tx: Transaction | None = None) -> Message:
        """Send one message; returns it with its Identifier, SentTime and (outside a
        transaction, where it is durable on return) its LookupIdentifier. See :meth:`send_many`."""
        sends, lookup_ids = self._send(queue, [message], tx)
        stored = sends[0].message
        return replace(stored, lookup_id=lookup_ids[0]) if lookup_ids else stored

    def send_many(
        self, queue: QueueRef, messages: Sequence[Message], tx: Transaction | None = None
    ) -> list[int]:
        """Send messages to a local queue or a remote format name (its outgoing queue).

        Without ``tx`` they are durable when this returns (one commit for all); with
        ``tx`` they are stored at commit. Returns the Identifier uniquifiers (the
        Identifier is ``(qm.guid, uniquifier)``). Errors: MQ_ERROR_QUEUE_NOT_FOUND,
        MQ_ERROR_TRANSACTION_USAGE (transactional mismatch), MQ_ERROR_INSUFFICIENT_RESOURCES
        (quota or > 4 MiB), MQ_ERROR_TRANSACTION_SEQUENCE (ended transaction).
        """
        sends, _ = self._send(queue, messages, tx)
        return _uniquifiers_of(sends)

    def send_many_ids(
        self, queue: QueueRef, messages: Sequence[Message], tx: Transaction | None = None
    ) -> list[tuple[int, int]]:
        """:meth:`send_many` returning ``(uniquifier, LookupIdentifier)`` pairs. Outside a
        transaction the LookupIdentifiers are final (the messages are durable); inside
        ``tx`` they are 0 — :meth:`Transaction.commit` returns them."""
        sends, lookup_ids = self._send(queue, messages, tx)
        uniq = _uniquifiers_of(sends)
        return list(zip(uniq, lookup_ids or [0] * len(uniq), strict=True))

    def _send(
        self, queue: QueueRef, messages: Sequence[Message], tx: Transaction | None
    ) -> tuple[list[Send], list[int]]:
        known = self._send_names.get(queue) if isinstance(queue, str) else None
        if known is not None and not known.deleted and isinstance(queue, str):
            # A name sent to before: a local queue, or a remote one's outgoing queue.
            self._check_open()
            qs, name = known, queue
        else:
            hosts = self._local_hosts
            if isinstance(queue, str) and self._is_remote(queue):
                handle: QueueRef = self.open_queue(queue)
            else:
                handle = queue
            qs = self._resolve(handle)
            name = handle.format_name if isinstance(handle, QueueHandle) else handle
            if isinstance(queue, str):
                # Remember the name: the next send skips parsing and resolving it twice,
                # and for a remote name the store write that makes sure its outgoing
                # queue exists (8 threads sending 1-message transactions to a remote
                # queue made two store batches per commit: 5,900 commits/s instead of
                # 11,700). A deleted queue's state says so (then this path runs again);
                # set_local_addresses forgets every name (not kept if it ran meanwhile).
                with self._lock:
                    if self._local_hosts is hosts:
                        if len(self._send_names) >= _SEND_NAMES:
                            self._send_names.clear()
                        self._send_names[queue] = qs
        if tx is not None:
            tx._check_active()
        sends = self._prepare(qs, messages, tx is not None, name)
        if tx is not None:
            tx._add_sends(qs, sends)
            return sends, []
        lookup_ids = self.store.write(ops.commit_work(sends, []))
        self.metrics.count_committed(len(sends), 0)
        self._notify([qs])
        return sends, lookup_ids

    def _notify(self, states: Iterable[_QueueState]) -> None:
        """Wake the reads waiting on these queues (after messages became available)."""
        for qs in set(states):
            # No read in progress: nobody to wake, skip the condition (qs.readers).
            if qs.readers:
                with qs.cond:
                    qs.cond.notify_all()

    # ---- transactions --------------------------------------------------------------------

    def begin(self) -> Transaction:
        """Start a local transaction."""
        self._check_open()
        return Transaction(self)

    def _removes_for(self, receives: Sequence[_Receive]) -> list[Remove]:
        out = []
        make = _make_remove
        rec = None
        qid = target = None
        for r in receives:
            if r.queue.record is not rec:  # receives come grouped by queue: once per run
                rec = r.queue.record
                qid, target = rec.queue_id, (rec.journal_queue_id if rec.journal else None)
            m = r.message
            size = len(m.body) + 2 * len(m.label) + len(m.extension)  # Message.size, inline
            out.append(make(qid, m.lookup_id, size, target, None))
        return out

    def _commit(
        self,
        sends: list[tuple[_QueueState, list[Send]]],
        received: Sequence[tuple[_QueueState, Sequence[Message]]],
        reasons: dict[int, int] | None = None,
    ) -> list[int]:
        """Transaction Commit (MS-MQDMPR 3.1.7.1.8) as one store operation; ``sends`` holds
        (queue, Sends) per send call, in order; ``received`` (queue, locked messages) per
        receive call, in order; ``reasons`` the DequeueReasons other than AckReceive.

        A batch of received messages costs no object per message unless the queue
        journals (a :class:`Remove` per move): its LookupIdentifiers and total size go to
        the store as one :class:`~openmsmq.store.ops.DeleteMany`, its locks are dropped
        with one ``set.difference_update``.
        """
        self._check_open()
        rows = sends[0][1] if len(sends) == 1 else [s for _, chunk in sends for s in chunk]
        count = len(rows)
        if not received:  # a sending transaction: none of the receive bookkeeping
            stored = self.store.write(ops.commit_work(rows, ()))
            self.metrics.count_committed(count, 0)
            if sends:
                self._notify(map(_first, sends))  # C iteration: no generator frame
            return stored
        held: dict[_QueueState, list[int]] = {}
        events: list[RemovedMessage] = []
        removes: list[Remove] = []
        deletes: list[ops.DeleteMany] = []
        consumed = 0
        for qs, msgs in received:
            if not msgs:
                continue
            ids = [m.lookup_id for m in msgs]
            unlock = held.get(qs)
            if unlock is None:
                unlock = held[qs] = []
            unlock += ids  # a copy: ids also goes to the store in a DeleteMany
            if qs.deleted:
                continue
            rec = qs.record
            qid = rec.queue_id
            if rec.queue_type != _OUTGOING:
                consumed += len(msgs)
            # Messages that asked for acknowledgments, journaling or a FinalAck (locks._acks, inlined).
            wanting = [
                m
                for m in msgs
                if m.ack_flags or m.positive_journaling or m.negative_journaling or m.final_ack_required
            ]
            if wanting:
                events += [
                    RemovedMessage(qid, m, reasons.get(m.lookup_id, ACK_RECEIVE) if reasons else ACK_RECEIVE)
                    for m in wanting
                ]
            target = rec.journal_queue_id if rec.journal else None
            if target is None:
                size = sum([len(m.body) + 2 * len(m.label) + len(m.extension) for m in msgs])  # Message.size
                deletes.append(_make_delete_many(qid, ids, size))
            else:
                removes += self._removes_for([_Receive(qs, m) for m in msgs])
        if events:
            rows = list(rows)
            for hook in list(self._commit_hooks.values()):
                rows += hook(events)
        stored = self.store.write(ops.commit_work(rows, removes, None, deletes))
        self.metrics.count_committed(count, consumed)
        self._unlock_ids(held, removed=True)
        if sends:
            self._notify(map(_first, sends))  # C iteration: no generator frame
        if len(rows) > count:
            self._notify(self._by_id[s.queue_id] for s in rows[count:] if s.queue_id in self._by_id)
        self._emit(events, hooked=True)
        return stored[:count]


# Send / Remove are frozen dataclasses; built once per message on the hot paths, so
# through the wire layer's fast constructor (every field, in order).
_make_send = fast_constructor(Send)


def _uniquifiers_of(sends: Sequence[Send]) -> list[int]:
    """Identifier uniquifiers of Sends stamped by one :meth:`QueueManager._prepare`: they
    are consecutive from the first (u32, wrapping to 1), so only the first is read."""
    if not sends:
        return []
    first = message_uniquifier(sends[0].row)
    if first + len(sends) - 1 <= 0xFFFFFFFF:
        return list(range(first, first + len(sends)))
    return [message_uniquifier(s.row) for s in sends]  # the run wraps


_make_remove = fast_constructor(Remove)
_make_delete_many = fast_constructor(ops.DeleteMany)
_OUTGOING = QueueType.OUTGOING
#: The queue of a (queue, Sends) pair of a transaction.
_first = itemgetter(0)


__all__ += ["ACK_RECEIVE"]


def canonical_senders(senders: Iterable[str | uuid.UUID] | str) -> str:
    """The stored form of a queue's sender allowlist: unique lower-case GUIDs, sorted,
    comma-separated ('' = every sender). A string is split at commas and white space.
    Raises MQ_ERROR_ILLEGAL_PROPERTY_VALUE for anything that is not a GUID."""
    items = senders.replace(",", " ").split() if isinstance(senders, str) else list(senders)
    out = set()
    for item in items:
        try:
            out.add(str(item if isinstance(item, uuid.UUID) else uuid.UUID(str(item).strip("{}"))))
        except ValueError:
            raise MQError(
                HResult.MQ_ERROR_ILLEGAL_PROPERTY_VALUE, f"allowed sender {quoted(item)} is not a QM GUID"
            ) from None
    return ",".join(sorted(out))
