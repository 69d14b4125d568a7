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

import uuid
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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

from openmsmq.errors import ConfigError, LocalProtocolError
from openmsmq.redact import redact
from openmsmq.spark.arrow import page_to_batch
from openmsmq.spark.backend import (
    Backend,
    LookupRange,
    OutgoingMessage,
    RangeQuery,
    open_backend,
)
from openmsmq.spark.planning import (
    PartitionPlan,
    ReaderOptions,
    SourceOffset,
    StartingPosition,
    WriterOptions,
    allocate_fairly,
    check_monotonic,
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

if TYPE_CHECKING:  # pyarrow.compute is loaded by executors only (see _read_partition)
    from openmsmq.spark.packed_arrow import ArrowPage

__all__ = ["SHORT_NAME", "OpenMSMQDataSource", "SendReport", "register"]

SHORT_NAME = "openmsmq"

#: Local properties Spark's MicroBatchExecution sets on every task of a micro-batch.
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


def register(spark: SparkSession) -> None:
    """Register the data source with ``spark`` under the format name ``openmsmq``."""
    spark.dataSource.register(OpenMSMQDataSource)


def _open_checked(endpoint: str, options: Mapping[str, str], queues: Sequence[str], key: str) -> Backend:
    """Open the backend on the driver and fail with the option's name for an unknown queue."""
    backend = open_backend(endpoint, options)
    try:
        for queue in queues:
            if not backend.queue_exists(queue):
                raise ConfigError(
                    key, f"option {key!r}: queue {queue!r} does not exist at {redact(endpoint)}"
                )
    except BaseException:
        backend.close()
        raise
    return backend


def _read_partition(opts: ReaderOptions, options: Mapping[str, str], plan: PartitionPlan) -> Iterator[Any]:
    """Peek every message of ``plan`` page by page, one Arrow record batch per page
    (runs on an executor; see :mod:`openmsmq.spark.arrow`).

    The next page is requested as soon as the current one has arrived, on a helper
    thread, so that the QM reads it while this page is converted and handed to Spark
    (at most two pages in memory). Pages only decide round trips: rows and their order
    are the same whatever the page sizes. A backend with ``peek_arrow`` (the gRPC one)
    returns each page already as a record batch decoded from the packed reply
    (:mod:`openmsmq.spark.packed_arrow`); others return columns (``peek_page``).
    """
    from openmsmq.spark.packed_arrow import ArrowPage

    backend = open_backend(opts.endpoint, options)
    peek_arrow = getattr(backend, "peek_arrow", None)

    def peek(after: int, limit: int) -> ArrowPage:
        if peek_arrow is not None:
            got: ArrowPage = peek_arrow(plan.queue, after, plan.through, limit)
            return got
        page = backend.peek_page(plan.queue, after, plan.through, limit)
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
                return
            check_page(page.lookup_id, after, plan.through, plan.queue)
            after = page.lookup_id[-1]
            seen += len(page)
            seen_bytes += page.body_bytes
            # A page may be shorter than asked without being the last: the server stops
            # a reply at 64 MiB of bodies (openmsmq.remote.reads.REPLY_BYTES). Only an
            # empty page (above) or reaching ``through`` ends the partition.
            if after < plan.through:
                limit = page_limit(opts.fetch_size, seen, seen_bytes)
                pending = pool.submit(peek, after, limit)
            yield page.batch
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        backend.close()


class OpenMSMQDataSource(DataSource):
    """``format("openmsmq")``: messages of openmsmq queues as rows, rows as messages."""

    @classmethod
    def name(cls) -> str:
        """The short format name."""
        return SHORT_NAME

    def schema(self) -> str:
        """The fixed read schema (see :data:`openmsmq.spark.schema.READ_COLUMNS`).

        Spark asks for it in ``load()``, on the driver: the reader options and the queues
        are validated here so that a bad option fails ``load()`` itself.
        """
        opts = parse_reader_options(self.options)
        _open_checked(opts.endpoint, self.options, opts.queues, "queues").close()
        return READ_SCHEMA_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        """Batch read: a snapshot of the queues, peeked, nothing removed."""
        opts = parse_reader_options(self.options)
        _open_checked(opts.endpoint, self.options, opts.queues, "queues").close()
        return SnapshotReader(opts, dict(self.options))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """Streaming read: micro-batches of LookupIdentifier ranges, removed on commit."""
        opts = parse_reader_options(self.options)
        _open_checked(opts.endpoint, self.options, opts.queues, "queues").close()
        return MessageStreamReader(opts, dict(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        """Batch write: every row becomes one message, sent idempotently."""
        opts = self._writer_options(schema, overwrite)
        # One id for the whole job, fixed on the driver: every attempt of a task sees it.
        write_id = opts.write_id or uuid.uuid4().hex
        return BatchWriter(opts, dict(self.options), schema.fieldNames(), write_id)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        """Streaming write: identities from (query id, batch id, partition, row)."""
        opts = self._writer_options(schema, overwrite)
        return StreamWriter(opts, dict(self.options), schema.fieldNames())

    def _writer_options(self, schema: StructType, overwrite: bool) -> WriterOptions:
        opts = parse_writer_options(self.options)
        if overwrite:
            raise ConfigError(
                "mode", "a queue cannot be overwritten; use mode 'append' (or outputMode 'append')"
            )
        check_write_schema({f.name: f.dataType.simpleString() for f in schema.fields}, opts.identity_column)
        _open_checked(opts.endpoint, self.options, [opts.queue], "queue").close()
        return opts


# --------------------------------------------------------------------------- readers


class SnapshotReader(DataSourceReader):
    """``spark.read``: the messages present at planning time, read without removal."""

    def __init__(self, opts: ReaderOptions, options: Mapping[str, str]) -> None:
        self.opts = opts
        self.options = dict(options)

    def partitions(self) -> Sequence[InputPartition]:
        """Fix the snapshot: each queue's range up to its stable watermark, split by LookupIdentifier."""
        backend = open_backend(self.opts.endpoint, self.options)
        try:
            plans: list[InputPartition] = []
            ranges = backend.available_ranges([RangeQuery(q) for q in self.opts.queues])
            for queue, found in zip(self.opts.queues, ranges, strict=True):
                if found is None:
                    continue
                for lo, hi in split_range(found.first - 1, found.last, self.opts.partitions_per_queue):
                    plans.append(InputPartition(PartitionPlan(queue, lo, hi)))
            return plans
        finally:
            backend.close()

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Peek the partition's LookupIdentifier range (Arrow record batches)."""
        plan = partition.value
        if plan is None:  # Spark's placeholder partition when the snapshot is empty
            return iter(())
        return _read_partition(self.opts, self.options, plan)


class MessageStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream``: peeked LookupIdentifier ranges; ``commit(end)`` removes them."""

    def __init__(self, opts: ReaderOptions, options: Mapping[str, str]) -> None:
        self.opts = opts
        self.options = dict(options)
        self._target: SourceOffset | None = None
        self._backend: Backend | None = None
        self._removed: dict[str, int] = {}

    def __getstate__(self) -> dict[str, Any]:
        # The reader is pickled to executors for read(); a driver connection stays behind.
        state = dict(self.__dict__)
        state["_backend"] = None
        return state

    def _driver_backend(self) -> Backend:
        if self._backend is None:
            self._backend = open_backend(self.opts.endpoint, self.options)
        return self._backend

    def _watermarks(self) -> SourceOffset:
        found = self._driver_backend().available_ranges([RangeQuery(q) for q in self.opts.queues])
        pairs = zip(self.opts.queues, found, strict=True)
        return SourceOffset({q: 0 if r is None else r.last for q, r in pairs})

    def _decode(self, value: Mapping[str, Any]) -> SourceOffset:
        offset = decode_offset(value, origin="checkpoint offset")
        check_offset_queues(offset, self.opts.queues, "checkpoint offset")
        return offset

    def initialOffset(self) -> dict[str, Any]:
        """Where a query without a checkpoint starts (option ``startingOffsets``)."""
        if self.opts.starting is StartingPosition.LATEST:
            return self._watermarks().to_json_dict()
        given = self.opts.starting_offsets or {}
        return SourceOffset({q: given.get(q, 0) for q in self.opts.queues}).to_json_dict()

    def getDefaultReadLimit(self) -> ReadLimit:
        """``maxMessagesPerTrigger`` as a ReadMaxRows limit, else everything available."""
        if self.opts.max_messages_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.opts.max_messages_per_trigger)

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow: fix the target at today's watermarks; later messages wait."""
        self._target = self._watermarks()

    def reportLatestOffset(self) -> dict[str, Any]:
        """The current watermarks, for the query progress report."""
        return self._watermarks().to_json_dict()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        """The next micro-batch's end: up to the watermark (or AvailableNow target), admission-limited."""
        begin = self._decode(start)
        # Spark asks for the next batch's end only once the batch ending at ``start`` is
        # done and recorded in the commit log (MicroBatchExecution runs one batch at a time
        # and re-runs an unfinished one without asking), so ``start`` is committed: remove
        # it now. Spark itself calls commit(end) only when it constructs a batch with data,
        # which would leave the last batch in the queue until more data arrives.
        self._remove_through(begin)
        if self._target is not None and not isinstance(limit, ReadMaxRows):
            # Trigger.AvailableNow without an admission limit: the end is the target
            # itself. Each queue's target is the LookupIdentifier of a message present at
            # prepareForTriggerAvailableNow, which only this query removes (and only at or
            # below a committed offset), so the range query below would answer exactly
            # that; it counts the range on the QM, about 0.1 us a message.
            target = self._target
            ends = {q: max(begin.get(q), target.get(q)) for q in self.opts.queues}
            return SourceOffset(ends).to_json_dict()
        backend = self._driver_backend()
        ranges: dict[str, LookupRange | None] = {q: None for q in self.opts.queues}
        queries = []
        for queue in self.opts.queues:
            through = None if self._target is None else self._target.get(queue)
            if through is None or through > begin.get(queue):
                queries.append(RangeQuery(queue, begin.get(queue), through))
        # One round trip for every queue's range.
        for query, found in zip(queries, backend.available_ranges(queries), strict=True):
            ranges[query.queue] = found
        end = {q: begin.get(q) for q in self.opts.queues}
        if isinstance(limit, ReadMaxRows):
            pending = {q: (r.count, r.first) for q, r in ranges.items() if r is not None}
            grants = allocate_fairly(pending, limit.max_rows)
        else:
            grants = {q: r.count for q, r in ranges.items() if r is not None}
        for queue, take in grants.items():
            found = ranges[queue]
            assert found is not None
            if take == found.count:
                end[queue] = found.last
            elif take > 0:
                end[queue] = backend.nth_lookup_id(queue, begin.get(queue), take)
        return SourceOffset(end).to_json_dict()

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        """LookupIdentifier sub-ranges of ``(start, end]`` per queue; a function of the offsets only."""
        begin, finish = self._decode(start), self._decode(end)
        check_monotonic(begin, finish)
        plans = plan_partitions(begin, finish, self.opts.queues, self.opts.partitions_per_queue)
        return [InputPartition(p) for p in plans]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Peek one partition's range as Arrow record batches (executor side; stateless)."""
        return _read_partition(self.opts, self.options, partition.value)

    def commit(self, end: dict[str, Any]) -> None:
        """Spark has durably processed everything up to ``end``: remove it, one QM transaction."""
        self._remove_through(self._decode(end))

    def _remove_through(self, done: SourceOffset) -> None:
        """Remove every message at or below ``done`` (one QM transaction for all queues),
        skipping queues already removed that far by this reader."""
        positions = {q: p for q, p in done.positions.items() if p > self._removed.get(q, 0)}
        if positions:
            self._driver_backend().remove_through(positions)
            self._removed.update(positions)

    def stop(self) -> None:
        """Close the driver connection."""
        if self._backend is not None:
            self._backend.close()
            self._backend = None


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
    batch: list[OutgoingMessage] = []
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
