"""The PySpark data source ``openmsmq`` (batch and streaming, read and write).

This is the only module of openmsmq that imports pyspark; ``import openmsmq`` and
``import openmsmq.spark`` do not load it. Register the source with :func:`register`::

    from openmsmq.spark import register
    register(spark)
    df = spark.readStream.format("openmsmq").option("endpoint", url).option("queues", "a,b").load()

Which Spark methods are implemented, and why, is written down in ``docs/spark.md``.
Everything that can be decided without Spark lives in :mod:`openmsmq.spark.planning`
and :mod:`openmsmq.spark.schema`; everything said to a queue manager goes through the
:class:`~openmsmq.spark.backend.Backend` opened from the ``endpoint`` option.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from pyspark import TaskContext
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from openmsmq.errors import ConfigError, LocalProtocolError, OpenMSMQError
from openmsmq.redact import redact
from openmsmq.spark.arrow import page_to_batch
from openmsmq.spark.backend import (
    Backend,
    LookupRange,
    RangeQuery,
    WriterMessage,
    open_backend,
)
from openmsmq.spark.planning import (
    DataLossError,
    OptionError,
    PartitionPlan,
    ReaderOptions,
    SourceOffset,
    StartingPosition,
    WriterOptions,
    allocate_fairly,
    check_monotonic,
    check_offset_qms,
    check_offset_queues,
    check_page,
    check_user_identity,
    decode_offset,
    page_limit,
    parse_reader_options,
    parse_writer_options,
    plan_partitions,
    row_identity,
    split_range,
)
from openmsmq.spark.schema import READ_SCHEMA_DDL, check_write_schema, row_to_message

if TYPE_CHECKING:  # pyarrow.compute is loaded by executors only (see read_partition)
    from openmsmq.spark.packed_arrow import ArrowPage

__all__ = ["SHORT_NAME", "OpenMSMQDataSource", "SendReport", "register"]

SHORT_NAME = "openmsmq"

log = logging.getLogger("openmsmq.spark")
T = TypeVar("T")

#: Local properties Spark's MicroBatchExecution sets on every task of a micro-batch.
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


def register(spark: SparkSession) -> None:
    """Register the data source with ``spark`` under the format name ``openmsmq``."""
    spark.dataSource.register(OpenMSMQDataSource)


def _plain_errors(fn: Callable[..., T]) -> Callable[..., T]:
    """Raise an openmsmq error of ``fn`` without its traceback: Spark prints the
    traceback of an exception raised in a data source method under its
    PYTHON_DATA_SOURCE_ERROR, so a bad option shows as one frame and its message."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> T:
        try:
            return fn(*args, **kwargs)
        except ConfigError as exc:
            plain = exc if isinstance(exc, OptionError) else OptionError(exc.key, exc.message)
            raise plain.with_traceback(None) from None
        except OpenMSMQError as exc:
            raise exc.with_traceback(None) from None

    return run


def _check_queues_exist(
    endpoint: str, options: Mapping[str, str], names: Mapping[str, str], key: str
) -> None:
    """Open the backend of ``endpoint`` on the driver and fail with the option's name for
    a queue that does not exist (``names``: key as given -> queue name on that QM)."""
    backend = open_backend(endpoint, options)
    try:
        for given, queue in names.items():
            if not backend.queue_exists(queue):
                raise OptionError(
                    key, f"option {key!r}: queue {given!r} does not exist at {redact(endpoint)}"
                )
    finally:
        backend.close()


def _check_reader_queues(opts: ReaderOptions, options: Mapping[str, str]) -> None:
    for name, keys in opts.keys_by_qm().items():
        if keys:
            _check_queues_exist(opts.endpoints[name], options, {k: opts.queue_of(k) for k in keys}, "queues")


class _QueueManagers:
    """The driver's backends of a reader, one per queue manager, opened on first use, and
    the range calls over them (one round trip per queue manager)."""

    def __init__(self, opts: ReaderOptions, options: Mapping[str, str]) -> None:
        self.opts = opts
        self.options = dict(options)
        self._open: dict[str, Backend] = {}
        self._guids: dict[str, str] | None = None

    def backend(self, name: str) -> Backend:
        found = self._open.get(name)
        if found is None:
            found = self._open[name] = open_backend(self.opts.endpoints[name], self.options)
        return found

    def guids(self) -> dict[str, str]:
        """Each queue manager's GUID as it answers now (asked once per reader)."""
        if self._guids is None:
            self._guids = {name: self.backend(name).qm_guid() for name in self.opts.endpoints}
        return self._guids

    def ranges(
        self, queries: Sequence[tuple[str, int, int | None]], *, with_bytes: bool = False
    ) -> list[LookupRange | None]:
        """The range of each ``(key, after, through)``, in order: one call per queue manager."""
        out: list[LookupRange | None] = [None] * len(queries)
        by_qm: dict[str, list[int]] = {}
        for i, (key, _, _) in enumerate(queries):
            by_qm.setdefault(self.opts.qm_of(key), []).append(i)
        for name, indices in by_qm.items():
            asked = [
                RangeQuery(self.opts.queue_of(queries[i][0]), queries[i][1], queries[i][2]) for i in indices
            ]
            found = self.backend(name).available_ranges(asked, with_bytes=with_bytes)
            for i, got in zip(indices, found, strict=True):
                out[i] = got
        return out

    def nth_lookup_id(self, key: str, after: int, n: int) -> int:
        return self.backend(self.opts.qm_of(key)).nth_lookup_id(self.opts.queue_of(key), after, n)

    def remove_through(self, positions: Mapping[str, int]) -> None:
        """Remove through ``positions`` (queue key -> LookupIdentifier): one transaction
        per queue manager (all of its queues); queue managers one after the other."""
        by_qm: dict[str, dict[str, int]] = {}
        for key, pos in positions.items():
            by_qm.setdefault(self.opts.qm_of(key), {})[self.opts.queue_of(key)] = pos
        for name, queues in by_qm.items():
            self.backend(name).remove_through(queues)

    def close(self) -> None:
        for backend in self._open.values():
            backend.close()
        self._open.clear()


def _counted(qms: _QueueManagers, plans: Sequence[PartitionPlan]) -> list[PartitionPlan]:
    """``plans`` with ``expected``: how many messages each range holds now."""
    found = qms.ranges([(p.queue, p.after, p.through) for p in plans])
    return [
        dataclasses.replace(p, expected=0 if r is None else r.count)
        for p, r in zip(plans, found, strict=True)
    ]


def _data_loss(opts: ReaderOptions, message: str) -> None:
    """A planned message is gone: fail (``failOnDataLoss``, the default) or log it."""
    if opts.fail_on_data_loss:
        raise DataLossError(
            f"{message}; someone else received them or they expired. Set option 'failOnDataLoss' "
            "to false to go on without them"
        )
    log.warning("openmsmq data source lost messages: %s (failOnDataLoss is false: going on)", message)


def read_partition(opts: ReaderOptions, options: Mapping[str, str], plan: PartitionPlan) -> Iterator[Any]:
    """Peek every message of ``plan`` page by page, one Arrow record batch per page
    (runs on an executor; see :mod:`openmsmq.spark.arrow`).

    The next page is requested as soon as the current one has arrived, on a helper
    thread, so that the QM reads it while this page is converted and handed to Spark
    (at most two pages in memory). Pages only decide round trips: rows and their order
    are the same whatever the page sizes. A backend with ``peek_arrow`` (the gRPC one)
    returns each page already as a record batch decoded from the packed reply
    (:mod:`openmsmq.spark.packed_arrow`); others return columns (``peek_page``).
    A partition that finds fewer messages than were planned (``plan.expected``) has
    lost some (:func:`_data_loss`).
    """
    from openmsmq.spark.packed_arrow import ArrowPage

    backend = open_backend(opts.endpoint_of(plan.queue), options)
    queue = opts.queue_of(plan.queue)
    peek_arrow = getattr(backend, "peek_arrow", None)

    def peek(after: int, limit: int) -> ArrowPage:
        if peek_arrow is not None:
            got: ArrowPage = peek_arrow(queue, after, plan.through, limit, plan.queue)
            return got
        page = backend.peek_page(queue, after, plan.through, limit)
        return ArrowPage(page_to_batch(plan.queue, page), list(page.lookup_id), page.body_bytes)

    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="openmsmq-peek")
    try:
        after = plan.after
        seen = seen_bytes = 0
        limit = page_limit(opts.fetch_size, seen, seen_bytes)
        pending: Future[ArrowPage] | None = None
        if after < plan.through:
            pending = pool.submit(peek, after, limit)
        # Each page advances ``after`` strictly (check_page), so at most (through - after) pages.
        while pending is not None:
            page = pending.result()
            pending = None
            if not len(page):
                break
            check_page(page.lookup_id, after, plan.through, plan.queue)
            after = page.lookup_id[-1]
            seen += len(page)
            seen_bytes += page.body_bytes
            # A page may be shorter than asked without being the last: the server stops
            # a reply at 64 MiB of bodies (openmsmq.remote.read_calls.REPLY_BYTES). Only an
            # empty page (above) or reaching ``through`` ends the partition.
            if after < plan.through:
                limit = page_limit(opts.fetch_size, seen, seen_bytes)
                pending = pool.submit(peek, after, limit)
            yield page.batch
        if plan.expected is not None and seen < plan.expected:
            _data_loss(
                opts,
                f"queue {plan.queue!r}: {plan.expected - seen} of the {plan.expected} messages planned in "
                f"LookupIdentifiers ({plan.after}, {plan.through}] are gone",
            )
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        backend.close()


class OpenMSMQDataSource(DataSource):
    """``format("openmsmq")``: messages of openmsmq queues as rows, rows as messages."""

    @classmethod
    def name(cls) -> str:
        """The short format name."""
        return SHORT_NAME

    @_plain_errors
    def schema(self) -> str:
        """The fixed read schema (see :data:`openmsmq.spark.schema.READ_COLUMNS`).

        Spark asks for it in ``load()``, on the driver: the reader options and the queues
        are validated here so that a bad option fails ``load()`` itself.
        """
        opts = parse_reader_options(self.options)
        _check_reader_queues(opts, self.options)
        return READ_SCHEMA_DDL

    @_plain_errors
    def reader(self, schema: StructType) -> DataSourceReader:
        """Batch read: a snapshot of the queues, peeked, nothing removed."""
        opts = parse_reader_options(self.options)
        if opts.starting is StartingPosition.LATEST:
            raise OptionError(
                "startingOffsets", "option 'startingOffsets' cannot be 'latest' for a batch read (spark.read)"
            )
        _check_reader_queues(opts, self.options)
        return SnapshotReader(opts, dict(self.options))

    @_plain_errors
    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """Streaming read: micro-batches of LookupIdentifier ranges, removed on commit."""
        opts = parse_reader_options(self.options)
        if opts.ending_offsets is not None:
            raise OptionError(
                "endingOffsets", "option 'endingOffsets' applies to batch reads (spark.read) only"
            )
        _check_reader_queues(opts, self.options)
        return MessageStreamReader(opts, dict(self.options))

    @_plain_errors
    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """Batch write: every row becomes one message, sent idempotently."""
        opts = self._writer_options(schema, overwrite)
        # One id for the whole job, fixed on the driver: every attempt of a task sees it.
        write_id = opts.write_id or uuid.uuid4().hex
        return BatchWriter(opts, dict(self.options), schema.fieldNames(), write_id)

    @_plain_errors
    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """Streaming write: identities from (query id, batch id, partition, row)."""
        opts = self._writer_options(schema, overwrite)
        return StreamWriter(opts, dict(self.options), schema.fieldNames())

    def _writer_options(self, schema: StructType, overwrite: bool) -> WriterOptions:
        opts = parse_writer_options(self.options)
        if overwrite:
            raise OptionError(
                "mode", "a queue cannot be overwritten; use mode 'append' (or outputMode 'append')"
            )
        check_write_schema({f.name: f.dataType.simpleString() for f in schema.fields}, opts.identity_column)
        _check_queues_exist(opts.endpoint, self.options, {opts.queue: opts.queue}, "queue")
        return opts


# --------------------------------------------------------------------------- readers


class SnapshotReader(DataSourceReader):
    """``spark.read``: the messages present at planning time, read without removal:
    per queue ``(startingOffsets, endingOffsets]``, by default everything up to the
    queue's stable watermark."""

    def __init__(self, opts: ReaderOptions, options: Mapping[str, str]) -> None:
        self.opts = opts
        self.options = dict(options)

    def partitions(self) -> Sequence[InputPartition]:
        """Fix the snapshot: each queue's range up to its watermark (or ``endingOffsets``),
        split by LookupIdentifier, each part counted."""
        qms = _QueueManagers(self.opts, self.options)
        try:
            starts = self.opts.starting_offsets or {}
            ends = self.opts.ending_offsets
            queries = [(k, starts.get(k, 0), None if ends is None else ends.get(k)) for k in self.opts.queues]
            plans: list[PartitionPlan] = []
            for (key, after, _), found in zip(queries, qms.ranges(queries), strict=True):
                if found is None:
                    continue
                for lo, hi in split_range(after, found.last, self.opts.partitions_per_queue):
                    plans.append(PartitionPlan(key, lo, hi))
            return [InputPartition(p) for p in _counted(qms, plans)]
        finally:
            qms.close()

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Peek the partition's LookupIdentifier range (Arrow record batches)."""
        plan = partition.value
        if plan is None:  # Spark's placeholder partition when the snapshot is empty
            return iter(())
        return read_partition(self.opts, self.options, plan)


class MessageStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream``: peeked LookupIdentifier ranges; ``commit(end)`` removes them."""

    def __init__(self, opts: ReaderOptions, options: Mapping[str, str]) -> None:
        self.opts = opts
        self.options = dict(options)
        self._target: SourceOffset | None = None
        self._qms: _QueueManagers | None = None
        self._removed: dict[str, int] = {}
        self._end: SourceOffset | None = None
        # minMessagesPerTrigger waits at most maxTriggerDelay from here, then from each batch.
        self._last_batch = time.monotonic()

    def __getstate__(self) -> dict[str, Any]:
        # The reader is pickled to executors for read(); driver connections stay behind.
        state = dict(self.__dict__)
        state["_qms"] = None
        return state

    @property
    def qms(self) -> _QueueManagers:
        """The driver's queue managers (opened on first use)."""
        if self._qms is None:
            self._qms = _QueueManagers(self.opts, self.options)
        return self._qms

    def _watermarks(self) -> SourceOffset:
        found = self.qms.ranges([(q, 0, None) for q in self.opts.queues])
        positions = {q: 0 if r is None else r.last for q, r in zip(self.opts.queues, found, strict=True)}
        return SourceOffset(positions, self.qms.guids())

    def _decode(self, value: Mapping[str, Any]) -> SourceOffset:
        """A checkpointed offset, checked against the options: the same queues, the same
        queue managers (GUIDs), before anything is read or removed."""
        offset = decode_offset(value, origin="checkpoint offset")
        check_offset_queues(offset, self.opts.queues, "checkpoint offset")
        check_offset_qms(offset, self.qms.guids(), self.opts.endpoints)
        return offset

    @_plain_errors
    def initialOffset(self) -> dict[str, Any]:
        """Where a query without a checkpoint starts (option ``startingOffsets``)."""
        if self.opts.starting is StartingPosition.LATEST:
            return self._watermarks().to_json_dict()
        given = self.opts.starting_offsets or {}
        return SourceOffset({q: given.get(q, 0) for q in self.opts.queues}, self.qms.guids()).to_json_dict()

    def getDefaultReadLimit(self) -> ReadLimit:
        """``maxMessagesPerTrigger`` as a ReadMaxRows limit, else everything available."""
        if self.opts.max_messages_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.opts.max_messages_per_trigger)

    @_plain_errors
    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow: fix the target at today's watermarks; later messages wait."""
        self._target = self._watermarks()

    @_plain_errors
    def reportLatestOffset(self) -> dict[str, Any]:
        """For the query progress (``sources[].latestOffset``): each queue's watermark and
        its lag behind the batch just planned, ``{"queues": {KEY: WATERMARK}, "lag":
        {KEY: {"messages": N, "bytes": B}}}`` (one range call per queue manager)."""
        end = self._end if self._end is not None else SourceOffset({})
        found = self.qms.ranges([(q, end.get(q), None) for q in self.opts.queues], with_bytes=True)
        watermarks: dict[str, int] = {}
        lag: dict[str, dict[str, int]] = {}
        for key, got in zip(self.opts.queues, found, strict=True):
            watermarks[key] = end.get(key) if got is None else got.last
            lag[key] = {"messages": 0 if got is None else got.count, "bytes": (got and got.bytes) or 0}
        return {"queues": watermarks, "lag": lag}

    @_plain_errors
    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """The next micro-batch's end: up to the watermark (or AvailableNow target),
        admission-limited (``maxMessagesPerTrigger``; ``minMessagesPerTrigger`` may hold
        the batch back); ``start`` itself when there is nothing to read."""
        begin = self._decode(start)
        # Spark asks for the next batch's end only once the batch ending at ``start`` is
        # done and recorded in the commit log (MicroBatchExecution runs one batch at a time
        # and re-runs an unfinished one without asking), so ``start`` is committed: remove
        # it now. Spark itself calls commit(end) only when it constructs a batch with data,
        # which would leave the last batch in the queue until more data arrives.
        self._remove_through(begin)
        self._end = begin
        if self._target is not None and not isinstance(limit, ReadMaxRows):
            # Trigger.AvailableNow without an admission limit: the end is the target
            # itself. Each queue's target is the LookupIdentifier of a message present at
            # prepareForTriggerAvailableNow, which only this query removes (and only at or
            # below a committed offset), so the range query below would answer exactly
            # that; it counts the range on the QM, a cost per message of the range.
            target = self._target
            ends = {q: max(begin.get(q), target.get(q)) for q in self.opts.queues}
            return self._next(start, begin, ends, {})
        queries = []
        for queue in self.opts.queues:
            through = None if self._target is None else self._target.get(queue)
            if through is None or through > begin.get(queue):
                queries.append((queue, begin.get(queue), through))
        # One round trip per queue manager for every queue's range.
        ranges = {q[0]: r for q, r in zip(queries, self.qms.ranges(queries), strict=True) if r is not None}
        if isinstance(limit, ReadMaxRows):
            grants = allocate_fairly({q: (r.count, r.first) for q, r in ranges.items()}, limit.max_rows)
        else:
            grants = {q: r.count for q, r in ranges.items()}
        wanted = self.opts.min_messages_per_trigger
        if (
            wanted is not None
            and self._target is None
            and sum(grants.values()) < wanted
            and time.monotonic() - self._last_batch < self.opts.max_trigger_delay
        ):
            return start  # minMessagesPerTrigger: wait for more, up to maxTriggerDelay
        ends = {q: begin.get(q) for q in self.opts.queues}
        counts: dict[str, int] = {}
        for queue, take in grants.items():
            found = ranges[queue]
            if take == found.count:
                ends[queue] = found.last
            elif take > 0:
                ends[queue] = self.qms.nth_lookup_id(queue, begin.get(queue), take)
            if take > 0:
                counts[queue] = take
        return self._next(start, begin, ends, counts)

    def _next(
        self, start: dict[str, Any], begin: SourceOffset, ends: Mapping[str, int], counts: Mapping[str, int]
    ) -> dict[str, Any]:
        """The offset ending the next batch: ``start`` unchanged when no queue moves (so
        that Spark sees no new data), else the new positions with the queue managers' GUIDs."""
        if all(ends[q] == begin.get(q) for q in self.opts.queues):
            return start
        self._last_batch = time.monotonic()
        end = SourceOffset(dict(ends), self.qms.guids(), dict(counts))
        self._end = end
        return end.to_json_dict()

    @_plain_errors
    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """LookupIdentifier sub-ranges of ``(start, end]`` per queue, a function of the
        offsets only, each counted: a queue holding fewer messages in the range than when
        the batch was planned has lost some (``failOnDataLoss``)."""
        begin, finish = self._decode(start), self._decode(end)
        check_monotonic(begin, finish)
        plans = _counted(
            self.qms, plan_partitions(begin, finish, self.opts.queues, self.opts.partitions_per_queue)
        )
        for queue, planned in finish.counts.items():
            now = sum(p.expected or 0 for p in plans if p.queue == queue)
            if now < planned:
                _data_loss(
                    self.opts,
                    f"queue {queue!r}: {planned - now} of the {planned} messages of the batch in "
                    f"LookupIdentifiers ({begin.get(queue)}, {finish.get(queue)}] are gone",
                )
        return [InputPartition(p) for p in plans]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Peek one partition's range as Arrow record batches (executor side; stateless)."""
        return read_partition(self.opts, self.options, partition.value)

    @_plain_errors
    def commit(self, end: dict[str, Any]) -> None:
        """Spark has durably processed everything up to ``end``: remove it (one QM
        transaction per queue manager)."""
        self._remove_through(self._decode(end))

    def _remove_through(self, done: SourceOffset) -> None:
        """Remove every message at or below ``done``, skipping queues already removed that
        far by this reader."""
        positions = {q: p for q, p in done.positions.items() if p > self._removed.get(q, 0)}
        if positions:
            self.qms.remove_through(positions)
            self._removed.update(positions)

    def stop(self) -> None:
        """Close the driver connections."""
        if self._qms is not None:
            self._qms.close()
            self._qms = None


# --------------------------------------------------------------------------- writers


@dataclass(frozen=True)
class SendReport(WriterCommitMessage):
    """What one write task did: rows seen, messages enqueued, duplicates skipped."""

    partition_id: int
    rows: int
    sent: int

    @property
    def skipped(self) -> int:
        """Rows whose identity the queue had already seen (a retried or replayed task)."""
        return self.rows - self.sent


def _send_rows(
    opts: WriterOptions,
    options: Mapping[str, str],
    fields: Sequence[str],
    prefix: Sequence[str | int],
    rows: Iterator[Any],
) -> SendReport:
    """Send a task's rows in idempotent batches of ``sendBatchSize`` (runs on an executor)."""
    ctx = TaskContext.get()
    partition_id = ctx.partitionId() if ctx is not None else 0
    backend = open_backend(opts.endpoint, options)
    total = sent = 0
    batch: list[WriterMessage] = []
    try:
        for index, row in enumerate(rows):
            values = dict(zip(fields, row, strict=True))
            if opts.identity_column is not None:
                identity = check_user_identity(values.pop(opts.identity_column), opts.identity_column)
            else:
                identity = row_identity(prefix, partition_id, index)
            batch.append(row_to_message(values, fields, identity))
            total += 1
            if len(batch) >= opts.send_batch_size:
                sent += backend.send_idempotent(opts.queue, batch)
                batch = []
        if batch:
            sent += backend.send_idempotent(opts.queue, batch)
    finally:
        backend.close()
    return SendReport(partition_id, total, sent)


class BatchWriter(DataSourceWriter):
    """``df.write``: rows become messages; identities ``(writeId, partition, row)``."""

    def __init__(
        self, opts: WriterOptions, options: Mapping[str, str], fields: Sequence[str], write_id: str
    ) -> None:
        self.opts = opts
        self.options = dict(options)
        self.fields = list(fields)
        self.write_id = write_id

    def write(self, iterator: Iterator[Any]) -> SendReport:
        """Send this task's rows; a retried attempt skips what an earlier attempt sent."""
        return _send_rows(self.opts, self.options, self.fields, (self.write_id,), iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to do: each task's sends are already committed in the QM."""

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to undo; re-running with the same ``writeId`` completes the write, no duplicates."""


class StreamWriter(DataSourceStreamWriter):
    """``df.writeStream``: identities ``(query id, batch id, partition, row)``."""

    def __init__(self, opts: WriterOptions, options: Mapping[str, str], fields: Sequence[str]) -> None:
        self.opts = opts
        self.options = dict(options)
        self.fields = list(fields)

    def write(self, iterator: Iterator[Any]) -> SendReport:
        """Send this task's rows; a replayed batch or retried task enqueues nothing twice."""
        ctx = TaskContext.get()
        query_id = ctx.getLocalProperty(QUERY_ID_PROPERTY) if ctx is not None else None
        batch_id = ctx.getLocalProperty(BATCH_ID_PROPERTY) if ctx is not None else None
        if not query_id or batch_id is None:
            raise LocalProtocolError(
                "streaming write task without Spark local properties "
                f"{QUERY_ID_PROPERTY!r} / {BATCH_ID_PROPERTY!r}"
            )
        return _send_rows(self.opts, self.options, self.fields, (query_id, int(batch_id)), iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: each task's sends are already committed in the QM."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to undo: the replay of this batch skips what was already sent."""
