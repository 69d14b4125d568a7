"""Pure planning logic of the openmsmq Spark data source (no pyspark import).

Everything here is a function of its arguments: option parsing and validation, the
offset JSON (LookupIdentifier positions per queue), admission control across queues,
the split of a micro-batch into input partitions, and the deterministic identity of a
written row. :mod:`openmsmq.spark.source` wires these into Spark's data source API.

Offsets
    A source offset is ``{"queues": {QUEUE: LOOKUP_ID, ...}}``. ``LOOKUP_ID`` is a
    LookupIdentifier (MS-MQDMPR 3.1.1.12, u64): every message of ``QUEUE`` whose
    LookupIdentifier is at most ``LOOKUP_ID`` belongs to a batch at or before this
    offset. ``0`` means "nothing consumed yet" (LookupIdentifiers start at 1).
    A micro-batch from offset ``s`` to offset ``e`` reads, per queue, the half-open
    LookupIdentifier range ``(s[q], e[q]]``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from openmsmq.errors import ConfigError, LocalProtocolError
from openmsmq.redact import redact

__all__ = [
    "MAX_LOOKUP_ID",
    "PartitionPlan",
    "ReaderOptions",
    "SourceOffset",
    "StartingPosition",
    "WriterOptions",
    "allocate_fairly",
    "check_page",
    "decode_offset",
    "encode_offset",
    "page_limit",
    "parse_reader_options",
    "parse_writer_options",
    "plan_partitions",
    "row_identity",
    "split_range",
]

#: LookupIdentifier is a u64 on the wire, but Spark stores it in a signed LONG column;
#: a QM assigns them from a counter that starts at 1, so 2**63 - 1 is never reached.
MAX_LOOKUP_ID = 2**63 - 1

#: Upper bounds that keep a typo from planning millions of tasks.
MAX_PARTITIONS_PER_QUEUE = 1024
MAX_FETCH_SIZE = 100_000
MAX_SEND_BATCH_SIZE = 100_000

#: Default ``fetchSize``: messages per peek request (bounded further by PAGE_BYTES).
DEFAULT_FETCH_SIZE = 10_000

#: Body bytes a peek request aims at, whatever ``fetchSize`` says: a page of large
#: messages is kept to about this much memory in the QM, the reply and the worker.
PAGE_BYTES = 32 << 20

#: Messages asked for by a partition's first peek, before their size is known.
FIRST_PAGE = 1000

#: Keys Spark itself may put into a data source's options; accepted and ignored.
_SPARK_KEYS = frozenset({"path", "checkpointlocation", "queryname"})

#: Maximum length of a row identity (what the backend must be able to store as a key).
MAX_IDENTITY_LENGTH = 255


# --------------------------------------------------------------------------- options


class StartingPosition(Enum):
    """Where a new streaming query (no checkpoint yet) starts in each queue."""

    EARLIEST = "earliest"
    """Every message in the queue when the query starts, and everything after."""
    LATEST = "latest"
    """Only messages that arrive after the query started."""
    EXPLICIT = "explicit"
    """The positions given as JSON in ``startingOffsets``."""


@dataclass(frozen=True)
class ReaderOptions:
    """Validated options of ``spark.read`` / ``spark.readStream`` ``.format("openmsmq")``."""

    endpoint: str
    """``endpoint``: how executors and the driver reach the queue manager."""
    queues: tuple[str, ...]
    """``queues``: comma-separated queue path names, read together."""
    starting: StartingPosition = StartingPosition.EARLIEST
    """``startingOffsets``: ``earliest`` (default), ``latest`` or an offset JSON."""
    starting_offsets: Mapping[str, int] | None = None
    """The positions of ``startingOffsets`` when it is a JSON offset."""
    max_messages_per_trigger: int | None = None
    """``maxMessagesPerTrigger``: at most this many messages per micro-batch (all queues)."""
    partitions_per_queue: int = 1
    """``partitionsPerQueue``: how many Spark partitions a queue's range is split into."""
    fetch_size: int = DEFAULT_FETCH_SIZE
    """``fetchSize``: at most this many messages per peek request made by an executor."""


@dataclass(frozen=True)
class WriterOptions:
    """Validated options of ``df.write`` / ``df.writeStream`` ``.format("openmsmq")``."""

    endpoint: str
    """``endpoint``: how executors and the driver reach the queue manager."""
    queue: str
    """``queue``: the destination queue (path name or format name) of every row."""
    identity_column: str | None = None
    """``identityColumn``: a string column whose value is the row's message identity."""
    write_id: str | None = None
    """``writeId`` (batch writes): a stable name of this write, to make a re-run idempotent."""
    send_batch_size: int = 500
    """``sendBatchSize``: rows per idempotent send transaction."""


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def _check_known(opts: Mapping[str, str], known: Iterable[str], kind: str) -> None:
    allowed = {k.lower() for k in known} | _SPARK_KEYS
    unknown = sorted(k for k in opts if k not in allowed)
    if unknown:
        raise ConfigError(
            unknown[0],
            f"unknown {kind} option {unknown[0]!r} (known options: {', '.join(sorted(known))})",
        )


def _require(opts: Mapping[str, str], key: str, hint: str) -> str:
    value = opts.get(key.lower(), "").strip()
    if not value:
        raise ConfigError(key, f"option {key!r} is required: {hint}")
    return value


def _int_option(opts: Mapping[str, str], key: str, default: int | None, lo: int, hi: int) -> int | None:
    raw = opts.get(key.lower())
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigError(key, f"option {key!r} must be an integer, got {raw!r}") from None
    if not lo <= value <= hi:
        raise ConfigError(key, f"option {key!r} must be between {lo} and {hi}, got {value}")
    return value


def _check_endpoint(endpoint: str) -> str:
    if "://" not in endpoint and not endpoint.startswith("/"):
        raise ConfigError(
            "endpoint",
            "option 'endpoint' must be a URL such as grpc://host:port or the absolute path of "
            f"a running queue manager's data directory, got {redact(endpoint)!r}",
        )
    return endpoint


def _check_queue_name(name: str, key: str) -> str:
    if not name or any(ord(c) < 0x20 for c in name):
        raise ConfigError(key, f"option {key!r} holds an invalid queue name {name!r}")
    return name


READER_OPTION_KEYS = (
    "endpoint",
    "queues",
    "startingOffsets",
    "maxMessagesPerTrigger",
    "partitionsPerQueue",
    "fetchSize",
)

WRITER_OPTION_KEYS = ("endpoint", "queue", "identityColumn", "writeId", "sendBatchSize")


def parse_reader_options(options: Mapping[str, str]) -> ReaderOptions:
    """Validate reader options; raise :class:`ConfigError` naming the first bad option.

    Keys are case-insensitive, as Spark's are. Unknown keys are rejected so that a typo
    (``maxMessagePerTrigger``) fails the query at start instead of being ignored.
    """
    opts = _lower(options)
    _check_known(opts, READER_OPTION_KEYS, "reader")
    endpoint = _check_endpoint(_require(opts, "endpoint", "the URL of the queue manager"))
    raw_queues = _require(opts, "queues", "a comma-separated list of queue names")
    queues = tuple(_check_queue_name(q.strip(), "queues") for q in raw_queues.split(","))
    if len(set(queues)) != len(queues):
        raise ConfigError("queues", f"option 'queues' names a queue twice: {raw_queues!r}")
    starting = StartingPosition.EARLIEST
    starting_offsets: dict[str, int] | None = None
    raw_start = opts.get("startingoffsets", "").strip()
    if raw_start.lower() in ("", "earliest"):
        starting = StartingPosition.EARLIEST
    elif raw_start.lower() == "latest":
        starting = StartingPosition.LATEST
    else:
        starting = StartingPosition.EXPLICIT
        decoded = decode_offset(raw_start, origin="option 'startingOffsets'")
        extra = sorted(set(decoded.positions) - set(queues))
        if extra:
            raise ConfigError(
                "startingOffsets",
                f"option 'startingOffsets' names queue {extra[0]!r}, which is not in option 'queues'",
            )
        starting_offsets = dict(decoded.positions)
    max_messages = _int_option(opts, "maxMessagesPerTrigger", None, 1, MAX_LOOKUP_ID)
    partitions = _int_option(opts, "partitionsPerQueue", 1, 1, MAX_PARTITIONS_PER_QUEUE)
    fetch_size = _int_option(opts, "fetchSize", DEFAULT_FETCH_SIZE, 1, MAX_FETCH_SIZE)
    assert partitions is not None and fetch_size is not None
    return ReaderOptions(
        endpoint=endpoint,
        queues=queues,
        starting=starting,
        starting_offsets=starting_offsets,
        max_messages_per_trigger=max_messages,
        partitions_per_queue=partitions,
        fetch_size=fetch_size,
    )


def parse_writer_options(options: Mapping[str, str]) -> WriterOptions:
    """Validate writer options; raise :class:`ConfigError` naming the first bad option."""
    opts = _lower(options)
    _check_known(opts, WRITER_OPTION_KEYS, "writer")
    endpoint = _check_endpoint(_require(opts, "endpoint", "the URL of the queue manager"))
    queue = _check_queue_name(_require(opts, "queue", "the destination queue name"), "queue")
    identity_column = opts.get("identitycolumn", "").strip() or None
    write_id = opts.get("writeid", "").strip() or None
    if write_id is not None and (len(write_id) > 128 or "/" in write_id):
        raise ConfigError("writeId", "option 'writeId' must be at most 128 characters without '/'")
    batch = _int_option(opts, "sendBatchSize", 500, 1, MAX_SEND_BATCH_SIZE)
    assert batch is not None
    return WriterOptions(
        endpoint=endpoint,
        queue=queue,
        identity_column=identity_column,
        write_id=write_id,
        send_batch_size=batch,
    )


# --------------------------------------------------------------------------- offsets


@dataclass(frozen=True)
class SourceOffset:
    """A position per queue: every message with LookupIdentifier <= position is consumed."""

    positions: Mapping[str, int]

    def get(self, queue: str) -> int:
        """The position of ``queue`` (0 when the offset does not name it)."""
        return self.positions.get(queue, 0)

    def to_json_dict(self) -> dict[str, Any]:
        """The dict handed to Spark (which stores it as JSON in the checkpoint)."""
        return {"queues": {q: self.positions[q] for q in sorted(self.positions)}}


def encode_offset(offset: SourceOffset) -> str:
    """The canonical JSON text of ``offset`` (sorted keys, so equal offsets compare equal)."""
    return json.dumps(offset.to_json_dict(), sort_keys=True, separators=(",", ":"))


def decode_offset(value: str | Mapping[str, Any], origin: str = "checkpoint offset") -> SourceOffset:
    """Parse and validate an offset given as JSON text or as an already-decoded dict.

    ``origin`` names where the value came from (``"option 'startingOffsets'"`` or the
    checkpoint) and is put into the :class:`ConfigError` raised for a bad value.
    """
    key = "startingOffsets" if "startingOffsets" in origin else "checkpoint"
    data: Any = value
    if isinstance(value, str):
        try:
            data = json.loads(value)
        except ValueError as exc:
            raise ConfigError(key, f"{origin} is not valid JSON ({exc}): {value!r}") from None
    if not isinstance(data, Mapping) or set(data) != {"queues"} or not isinstance(data["queues"], Mapping):
        raise ConfigError(key, f'{origin} must look like {{"queues": {{"QUEUE": LOOKUP_ID}}}}, got {data!r}')
    positions: dict[str, int] = {}
    for queue, pos in data["queues"].items():
        if not isinstance(queue, str) or not queue:
            raise ConfigError(key, f"{origin} has an invalid queue name {queue!r}")
        if isinstance(pos, bool) or not isinstance(pos, int) or not 0 <= pos <= MAX_LOOKUP_ID:
            raise ConfigError(
                key,
                f"{origin} has position {pos!r} for queue {queue!r}; "
                f"expected a LookupIdentifier between 0 and {MAX_LOOKUP_ID}",
            )
        positions[queue] = pos
    return SourceOffset(positions)


def check_offset_queues(offset: SourceOffset, queues: Sequence[str], origin: str) -> None:
    """Fail when a checkpointed offset names a queue that option ``queues`` dropped.

    Adding a queue to ``queues`` is allowed (it starts at its starting position);
    dropping one is not, because its uncommitted messages would be silently abandoned.
    """
    missing = sorted(set(offset.positions) - set(queues))
    if missing:
        raise ConfigError(
            "queues",
            f"{origin} holds queue {missing[0]!r}, which option 'queues' no longer names; "
            "restore the option or start the query with a new checkpoint location",
        )


def check_monotonic(start: SourceOffset, end: SourceOffset) -> None:
    """Fail when ``end`` is behind ``start`` for some queue (a corrupted checkpoint)."""
    for queue, pos in start.positions.items():
        if end.get(queue) < pos:
            raise ConfigError(
                "checkpoint",
                f"checkpoint offsets go backwards for queue {queue!r}: {pos} then {end.get(queue)}",
            )


# --------------------------------------------------------------------------- admission control


def allocate_fairly(pending: Mapping[str, tuple[int, int]], budget: int) -> dict[str, int]:
    """Split ``budget`` messages across queues: max-min fair, oldest message first for the rest.

    ``pending`` maps a queue to ``(count, first_lookup_id)``: how many messages it has
    after the batch's start and the LookupIdentifier of the oldest one. Each queue gets
    an equal share, a queue needing less than its share gives the rest to the others
    (water-filling). Units that cannot be split evenly go to the queues whose oldest
    pending message has the lowest LookupIdentifier (arrived first; LookupIdentifiers
    come from one per-QM counter, MS-MQDMPR 3.1.7.1.9), so no queue is starved even with
    ``budget`` smaller than the number of queues.
    """
    if budget < 0:
        raise ValueError("budget must be >= 0")
    grant = {q: 0 for q in pending}
    want = {q: c for q, (c, _) in pending.items() if c > 0}
    left = budget
    # Every round either satisfies a queue completely or uses the whole budget: bounded.
    for _ in range(len(want) + 1):
        if left == 0 or not want:
            break
        share = left // len(want)
        if share == 0:
            break
        satisfied = [q for q, c in want.items() if c <= share]
        if satisfied:
            for q in satisfied:
                grant[q] += want.pop(q)
                left -= grant[q]
            continue
        for q in want:
            grant[q] += share
            want[q] -= share
        left -= share * len(want)
    if left and want:
        # Fewer units than hungry queues: oldest first pending message wins a unit each.
        for q in sorted(want, key=lambda name: (pending[name][1], name))[:left]:
            grant[q] += 1
    return grant


# --------------------------------------------------------------------------- partitions


@dataclass(frozen=True)
class PartitionPlan:
    """One Spark input partition: the messages of ``queue`` with after < LookupIdentifier <= through."""

    queue: str
    after: int
    through: int


def split_range(after: int, through: int, parts: int) -> list[tuple[int, int]]:
    """Split the LookupIdentifier range ``(after, through]`` into at most ``parts`` sub-ranges.

    The split is by LookupIdentifier value, so it depends only on the offsets and the
    options: a replayed batch gets exactly the same partitions, which keeps the row
    identities of a downstream openmsmq writer stable. Sub-ranges may hold no message
    (LookupIdentifiers of one queue are not dense).
    """
    if through <= after:
        return []
    width = through - after
    n = max(1, min(parts, width))
    bounds = [after + (width * i) // n for i in range(n + 1)]
    return [(bounds[i], bounds[i + 1]) for i in range(n)]


def plan_partitions(
    start: SourceOffset, end: SourceOffset, queues: Sequence[str], partitions_per_queue: int
) -> list[PartitionPlan]:
    """The input partitions of the micro-batch from ``start`` to ``end`` (queue order kept)."""
    plans: list[PartitionPlan] = []
    for queue in queues:
        for lo, hi in split_range(start.get(queue), end.get(queue), partitions_per_queue):
            plans.append(PartitionPlan(queue, lo, hi))
    return plans


def check_page(lookup_ids: Sequence[int], after: int, through: int, queue: str) -> None:
    """Fail unless a peeked page's LookupIdentifiers rise strictly within ``(after, through]``.

    A backend that broke this would make a partition skip or repeat messages; the
    batch fails instead (:class:`LocalProtocolError`).
    """
    prev = after
    for lookup_id in lookup_ids:
        if not prev < lookup_id <= through:
            raise LocalProtocolError(
                f"backend returned LookupIdentifier {lookup_id} outside ({prev}, {through}] "
                f"of queue {queue!r}"
            )
        prev = lookup_id


def page_limit(fetch_size: int, seen: int, seen_bytes: int) -> int:
    """How many messages a partition's next peek asks for, after ``seen`` messages of
    ``seen_bytes`` body bytes: ``fetchSize``, fewer when the average body seen so far
    would make the page larger than :data:`PAGE_BYTES`; the first page asks for at
    most :data:`FIRST_PAGE`. Always at least 1. Pages only decide round trips: the rows
    and their order are the same whatever the page sizes."""
    if seen <= 0:
        return max(1, min(fetch_size, FIRST_PAGE))
    average = max(1, seen_bytes // seen)
    return max(1, min(fetch_size, PAGE_BYTES // average))


# --------------------------------------------------------------------------- row identity


def row_identity(prefix: Sequence[str | int], partition_id: int, row_index: int) -> str:
    """The deterministic message identity of a written row.

    ``prefix`` is ``(query_id, batch_id)`` for a streaming write or ``(write_id,)`` for a
    batch write; with the Spark partition id and the row's index inside the partition it
    names the row the same way in every attempt of the task and every replay of the batch.
    """
    parts = [*map(str, prefix), str(partition_id), str(row_index)]
    if any("/" in p for p in parts[:-2]):
        raise ValueError(f"identity prefix parts may not contain '/': {prefix!r}")
    identity = "spark/" + "/".join(parts)
    if len(identity) > MAX_IDENTITY_LENGTH:
        raise ValueError(f"identity longer than {MAX_IDENTITY_LENGTH} characters: {identity!r}")
    return identity


def check_user_identity(value: object, column: str) -> str:
    """Validate the value of the ``identityColumn`` of one row."""
    if not isinstance(value, str) or not value:
        raise ConfigError(
            "identityColumn",
            f"column {column!r} named by option 'identityColumn' must hold non-empty strings, got {value!r}",
        )
    if len(value) > MAX_IDENTITY_LENGTH:
        raise ConfigError(
            "identityColumn",
            f"column {column!r}: identity longer than {MAX_IDENTITY_LENGTH} characters",
        )
    return value
