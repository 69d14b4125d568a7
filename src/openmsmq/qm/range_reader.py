"""LookupIdentifier ranges, idempotent send and queue statistics: the seams of the Spark
data source (:mod:`openmsmq.spark.backend` contract) and of the metrics collector.

The :class:`RangeReader` of a :class:`~openmsmq.qm.manager.QueueManager`; the queue
manager delegates to it.

- *Stable watermark*: :meth:`RangeReader.lookup_range` reports ``last`` such that no
  message with a LookupIdentifier <= ``last`` can appear in that queue later (why: see
  :mod:`openmsmq.store.ranges`).
- Range reads ignore locks and expiry: they show what is stored (a Spark micro-batch is
  what was committed, whoever holds a lock on it).
- :meth:`RangeReader.remove_through` removes ranges of several queues in ONE transaction.
  Messages another transaction holds locked are not removed under it: they become
  PurgePending (MS-MQDMPR 3.1.7.1.7), i.e. deleted when that transaction aborts, and
  deleted by it when it commits. Either way they are gone once the lock ends, and a
  message is never deleted while someone else may still commit its receive (which
  would count it twice). The Spark source assumes nobody else receives from its queues,
  so it normally finds nothing locked.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from functools import partial
from typing import Any

from openmsmq.errors import HResult, MQError
from openmsmq.observability.sink import MetricsSink
from openmsmq.qm.handles import QueueHandle, QueueState
from openmsmq.qm.locks import LockTable
from openmsmq.qm.registry import QueueRef, QueueRegistry
from openmsmq.qm.removals import RemovalEvents
from openmsmq.qm.transaction import ACK_RECEIVE
from openmsmq.store import ops, ranges, reads
from openmsmq.store.backend import StoreBackend
from openmsmq.store.ops import Remove, RemovedMessage, Send
from openmsmq.store.ranges import MAX_IDENTITY_CHARS, LookupRange, QueueStats
from openmsmq.store.records import MessageRecord, QueueType, message_from_row
from openmsmq.wire.fast import fast_constructor

__all__ = ["LookupRange", "Prepare", "QueueStats", "RangeReader"]

#: Stamps messages for a queue into store rows: (queue, messages, transactional, name).
Prepare = Callable[[QueueState, Sequence[MessageRecord], bool, str], list[Send]]

#: remove_through's set-based path locks every id of a span; it is taken only while the
#: span holds fewer than twice its message count plus this many ids.
_SPAN_SLACK = 4096

#: Default time an idempotent-send identity is remembered (seconds): 7 days.
DEFAULT_IDENTITY_RETENTION = 7 * 24 * 3600


def _one_band(qs: QueueState) -> bool:
    """True when every message of the queue has priority 0 (a transactional private
    queue: MS-MQDMPR forces PR to 0 with a TransactionHeader), so one band suffices."""
    rec = qs.record
    return rec.transactional and rec.queue_type == QueueType.PRIVATE


def _ids_through(c: Any, *, qid: int, one: bool, through: int) -> list[tuple[int, int, int]]:
    return ranges.fetch_ids_through(c, qid, one, through)


class RangeReader:
    """LookupIdentifier-range reads and removal, idempotent send, queue statistics.

    ``prepare(queue, messages, transactional, name)`` stamps messages into store rows
    (:meth:`QueueManager.prepare_sends`); ``identity_retention`` is how long (seconds) an
    idempotent-send identity is remembered."""

    def __init__(
        self,
        store: StoreBackend,
        metrics: MetricsSink,
        queues: QueueRegistry,
        locks: LockTable,
        removals: RemovalEvents,
        clock: Callable[[], float],
        prepare: Prepare,
        identity_retention: int,
    ) -> None:
        self._store = store
        self._metrics = metrics
        self._queues = queues
        self._locks = locks
        self._removals = removals
        #: Seconds since 1970 (the QueueManager sets it when its clock changes).
        self.clock = clock
        self._prepare = prepare
        self.identity_retention = identity_retention

    def _now(self) -> int:
        return int(self.clock())

    # ---- reads by LookupIdentifier range -------------------------------------------------

    def lookup_range(
        self, queue: QueueRef, after: int = 0, through: int | None = None, with_bytes: bool = False
    ) -> LookupRange | None:
        """``(first, last, count)`` of the messages with ``after`` < LookupIdentifier <=
        ``through`` (None: up to the newest), locked and expired ones included; None when
        there is none. With ``through=None``, ``last`` is a stable watermark: no message
        with a LookupIdentifier <= ``last`` can appear in the queue later. ``with_bytes``:
        also their total stored size (``LookupRange.bytes``)."""
        qs = self._queues.resolve(queue)
        return self._store.read(
            lambda c: ranges.lookup_range(c, qs.record.queue_id, _one_band(qs), after, through, with_bytes)
        )

    def lookup_ranges(
        self, queues: Iterable[QueueRef], with_bytes: bool = False
    ) -> dict[QueueRef, LookupRange | None]:
        """:meth:`lookup_range` (whole queue) of several queues from ONE read snapshot."""
        states = [(q, self._queues.resolve(q)) for q in queues]
        specs = [(qs.record.queue_id, _one_band(qs)) for _, qs in states]
        got = self._store.read(partial(ranges.lookup_ranges, queues=specs, with_bytes=with_bytes))
        return {ref: r for (ref, _), r in zip(states, got, strict=True)}

    def nth_lookup_id(self, queue: QueueRef, after: int, n: int, through: int | None = None) -> int:
        """LookupIdentifier of the ``n``-th message (n >= 1) with LookupIdentifier >
        ``after`` (and <= ``through``); MQ_ERROR_MESSAGE_NOT_FOUND when fewer exist."""
        qs = self._queues.resolve(queue)
        got = self._store.read(
            lambda c: ranges.nth_lookup_id(c, qs.record.queue_id, _one_band(qs), after, n, through)
        )
        if got is None:
            raise MQError(
                HResult.MQ_ERROR_MESSAGE_NOT_FOUND,
                f"fewer than {n} messages after {after} in {qs.record.name}",
            )
        return got

    def peek_range(
        self, queue: QueueRef, after_lookup_id: int = 0, limit: int = 1000, through: int | None = None
    ) -> list[MessageRecord]:
        """Up to ``limit`` messages with ``after_lookup_id`` < LookupIdentifier (<= ``through``
        when given) in LookupIdentifier order, locked ones included; neither removes nor
        locks (Spark micro-batches, outgoing-queue transmission)."""
        qs = self._queues.resolve(queue)
        qid = qs.record.queue_id
        # Read per priority band in order-key order (the messages_order index): a single
        # "ORDER BY lookup_id" over the queue sorted the whole queue for every page.
        return self._store.read(
            lambda c: ranges.fetch_range_through(c, qid, _one_band(qs), after_lookup_id, through, limit)
        )

    def peek_range_rows(
        self,
        queue: QueueRef,
        after_lookup_id: int = 0,
        limit: int = 1000,
        through: int | None = None,
        max_bytes: int | None = None,
    ) -> list[tuple[Any, ...]]:
        """:meth:`peek_range` as the stored rows, in the same order
        (:data:`openmsmq.store.records.ROW_COLUMNS`; ``message_from_row`` gives the
        :class:`MessageRecord`): for the remote-read service's packed reply, which needs no
        Message per row."""
        qs = self._queues.resolve(queue)
        qid = qs.record.queue_id
        one = _one_band(qs)
        return self._store.read(
            lambda c: ranges.fetch_rows_through(c, qid, one, after_lookup_id, through, limit, max_bytes)
        )

    def peek_range_limited(
        self, queue: QueueRef, after_lookup_id: int, limit: int, through: int | None, max_bytes: int
    ) -> list[MessageRecord]:
        """:meth:`peek_range` with no message after the one whose size brings the total
        read past ``max_bytes`` (the remote-read reply's bound)."""
        return [
            message_from_row(r)
            for r in self.peek_range_rows(queue, after_lookup_id, limit, through, max_bytes)
        ]

    def high_lookup_id(self) -> int:
        """The highest LookupIdentifier of any stored message (0 when none): it grows with
        every commit that stores a message, in any process on this data directory."""
        return self._store.read(reads.max_lookup_id)

    def committed_lookup_id(self) -> int:
        """The last LookupIdentifier handed out by a committed transaction of this
        process's store writer (``StoreStats.committed_lookup_id``; no statement): it
        moves with every commit of this process that stores a message, and is updated
        only after the commit is visible to readers."""
        return self._store.stats.committed_lookup_id

    def peek_outgoing_rows(self, queue: QueueRef, after_lookup_id: int, limit: int) -> list[tuple[Any, ...]]:
        """:meth:`peek_range_rows` (no upper bound) for a queue whose messages usually all
        have priority 0, an outgoing queue's case (the transfer's reads): two statements per
        read while no message of another priority is in the queue, instead of one per
        priority band (:func:`openmsmq.store.ranges.fetch_outgoing_rows`)."""
        qs = self._queues.resolve(queue)
        qid = qs.record.queue_id
        if _one_band(qs):
            return self._store.read(
                lambda c: ranges.fetch_rows_through(c, qid, True, after_lookup_id, None, limit)
            )
        return self._store.read(lambda c: ranges.fetch_outgoing_rows(c, qid, after_lookup_id, limit))

    # ---- removal by range ------------------------------------------------------------------

    def remove_through(self, positions: Mapping[QueueRef, int]) -> int:
        """Remove every message with LookupIdentifier <= ``positions[queue]`` from each
        queue, all queues in ONE durable transaction (a consuming read: AckReceive events,
        journaling as for a receive). Idempotent: removing again removes nothing more.
        Messages locked by another transaction become PurgePending (see the module doc).
        Returns how many messages this call removed.

        Fast path (the Spark source's usual case): a queue that does not journal, has no
        locked message in the range and whose span of LookupIdentifiers is not much
        wider than its messages (``_SPAN_SLACK``) is removed by span, set-based
        (:func:`openmsmq.store.ranges.remove_spans`), without reading the ids. If a
        message of a span turns out to want acknowledgments, nothing is removed and the
        call is redone per message (the path every other queue takes)."""
        targets = sorted(
            ((self._queues.resolve(q), int(through)) for q, through in positions.items()),
            key=lambda x: x[0].record.queue_id,
        )
        got = self._remove_through(targets, fast=True)
        if got is None:
            got = self._remove_through(targets, fast=False)
        # Durable now: the range reader's position (a gauge per queue) shows how far it
        # has committed, whether this call removed anything or repeated an earlier one.
        self._metrics.range_removed({qs.record.name: through for qs, through in targets})
        return got or 0

    def _remove_through(self, targets: list[tuple[QueueState, int]], *, fast: bool) -> int | None:
        """One attempt of :meth:`remove_through`; None (nothing changed) when a span of
        the fast path held a message that wants acknowledgments."""
        # Locked ids per queue: plain ints (a range for a span), no Message per id (this
        # runs for every message a Spark micro-batch commits).
        held: list[tuple[QueueState, Collection[int]]] = []
        spans: list[tuple[int, bool, int, int]] = []
        removes: list[Remove] = []
        marked: list[tuple[QueueState, int]] = []
        acks: list[tuple[QueueState, int]] = []
        for qs, through in targets:
            qid = qs.record.queue_id
            rec = qs.record
            one = _one_band(qs)
            target = rec.journal_queue_id if rec.journal else None
            taken: list[int] = []
            with qs.cond:
                qs.settle()
                qs.drop_prefetch()
                locked = qs.locked
                if fast and target is None:
                    span = self._store.read(
                        partial(ranges.id_span, queue_id=qid, transactional=one, through=through)
                    )
                    if span is None:
                        continue
                    first, last, count = span
                    # A span much wider than its messages (a queue fed slowly beside
                    # busy ones) would lock too many ids: per message then.
                    narrow = last - first < 2 * count + _SPAN_SLACK
                    if narrow and not any(first <= lid <= last for lid in locked):
                        # Lock the whole span, as the per-message path locks each id, so
                        # that no receive, expiry or purge takes one of its messages before
                        # the DELETE is durable. Ids of the span that are not this queue's
                        # are locked here harmlessly: a message never enters a queue under
                        # an id it had before (ops.apply_removes gives moves a new one).
                        span_ids = range(first, last + 1)
                        locked.update(span_ids)
                        held.append((qs, span_ids))
                        spans.append((qid, one, first, last))
                        continue
                rows = self._store.read(partial(_ids_through, qid=qid, one=one, through=through))
                for lookup_id, size, ack in rows:
                    if lookup_id in locked:
                        if lookup_id not in qs.purge_pending:
                            qs.purge_pending.add(lookup_id)
                            marked.append((qs, lookup_id))
                        continue
                    taken.append(lookup_id)
                    removes.append(_make_remove(qid, lookup_id, size, target, None))
                    if ack:
                        acks.append((qs, lookup_id))
                locked.update(taken)
            if taken:
                held.append((qs, taken))
        if not removes and not spans:
            return 0
        removed: int | None = None
        by_span: dict[int, int] = {}
        try:
            events = self._ack_events(acks)
            if spans:
                removed = self._store.write(ranges.remove_spans(spans, removes, by_span))
            else:
                self._store.write(ops.commit_work([], removes))
                removed = len(removes)
            if removed is not None:
                self._metrics.count_committed(0, removed)
                self._count_removed(removes, by_span)
        finally:
            for qs, ids in held:
                with qs.cond:
                    if removed is None:
                        # The messages stay: a receive that ran meanwhile may have moved
                        # the head hint past them (they were locked), so drop it, as
                        # QueueManager._unlock does for an abort.
                        qs.reset_head()
                    qs.locked.difference_update(ids)
                    if qs.purge_pending:
                        qs.purge_pending.difference_update(ids)
            if removed is None:
                for qs, lookup_id in marked:
                    with qs.cond:
                        qs.purge_pending.discard(lookup_id)
        if removed is None:
            return None
        self._queues.notify(
            self._resolve_id(qs.record.journal_queue_id) for qs, _ in targets if qs.record.journal
        )
        self._removals.emit(events)
        return removed

    def _count_removed(self, removes: list[Remove], by_span: dict[int, int]) -> None:
        """Add a durable removal to the queues' :attr:`QueueState.messages_out` (and their
        journals' ``messages_in``): per queue for a span, per message otherwise."""
        by_id = self._queues.by_id
        for qid, n in by_span.items():
            qs = by_id.get(qid)
            if qs is not None:
                qs.messages_out += n
        self._queues.count_moves((r.queue_id, r.target_queue_id) for r in removes)

    def _resolve_id(self, queue_id: int | None) -> QueueState:
        return self._queues.by_id[queue_id or 0]

    def _ack_events(self, acks: list[tuple[QueueState, int]]) -> list[RemovedMessage]:
        """AckReceive events of removed messages that asked for acknowledgments (read
        before the removal, while they are locked)."""
        out = []
        for qs, lookup_id in acks:
            qid = qs.record.queue_id
            ref = self._store.read(partial(reads.fetch_by_lookup, queue_id=qid, lookup_id=lookup_id))
            if ref is not None:
                out.append(RemovedMessage(qs.record.queue_id, ref[1], ACK_RECEIVE))
        return out

    # ---- idempotent send -------------------------------------------------------------------

    def send_idempotent(
        self, queue: QueueRef, messages: Sequence[MessageRecord], identities: Sequence[str]
    ) -> list[int | None]:
        """Send ``messages`` to a local queue in ONE durable transaction, each with a
        client-chosen identity (1–255 characters); a message whose (queue, identity) was
        already accepted — by an earlier call, concurrently, or earlier in this batch —
        is skipped, not an error. Returns each message's LookupIdentifier, None where
        skipped. Identities are remembered for ``identity_retention`` seconds."""
        if len(messages) != len(identities):
            raise MQError(HResult.MQ_ERROR_ILLEGAL_PROPERTY_VALUE, "one identity per message")
        for ident in identities:
            if not isinstance(ident, str) or not 1 <= len(ident) <= MAX_IDENTITY_CHARS:
                raise MQError(
                    HResult.MQ_ERROR_ILLEGAL_PROPERTY_VALUE,
                    f"an identity is a string of 1 to {MAX_IDENTITY_CHARS} characters",
                )
        if isinstance(queue, str) and self._queues.is_remote(queue):
            raise MQError(
                HResult.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION, "idempotent send needs a local queue"
            )
        qs = self._queues.resolve(queue)
        if qs.record.queue_type == QueueType.OUTGOING:
            raise MQError(
                HResult.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION, "idempotent send needs a local queue"
            )
        name = queue.format_name if isinstance(queue, QueueHandle) else queue
        sends = self._prepare(qs, messages, qs.record.transactional, name)
        now = self._now()
        got = self._store.write(
            ranges.send_idempotent(
                qs.record.queue_id,
                sends,
                identities,
                now,
                int(self.identity_retention),
                mark_transaction=qs.record.transactional,
            )
        )
        accepted = sum(g is not None for g in got)
        self._metrics.count_committed(accepted, 0)
        qs.messages_in += accepted
        if accepted:
            self._queues.notify([qs])
        return got

    def prune_identities(self, now: float | None = None, limit: int = 10000) -> int:
        """Forget up to ``limit`` idempotent-send identities older than the retention
        window; returns how many. (Each idempotent send also prunes a few.)"""
        self._queues.check_open()
        at = self._now() if now is None else int(now)
        return self._store.write(ranges.prune_identities(at - int(self.identity_retention), limit))

    # ---- statistics ------------------------------------------------------------------------

    def queue_stats(self) -> list[QueueStats]:
        """``(name, message_count, total_bytes, oldest_arrived_time)`` of every queue
        (system, journal and outgoing queues included), in ONE SQL statement over the
        counters every commit keeps — cheap enough for every metrics scrape."""
        self._queues.check_open()
        return self._store.read(ranges.queue_stats)


_make_remove = fast_constructor(Remove)
