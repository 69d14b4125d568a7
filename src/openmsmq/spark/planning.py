"""Pure planning logic of the openmsmq Spark data source (no pyspark import).

Everything here is a function of its arguments: option parsing and validation, the
offset JSON (LookupIdentifier positions per queue), admission control across queues,
the split of a micro-batch into input partitions, and the deterministic identity of a
written row. :mod:`openmsmq.spark.source` wires these into Spark's data source API.

Queues and queue managers
    A query reads queues of one queue manager (option ``endpoint``, queue names as they
    are) or of several (option ``endpoints`` = ``NAME=URL,...``, queues named
    ``NAME/QUEUE``). The name a queue is given in ``queues`` is its *key*: it names the
    queue in offsets and in the ``queue`` column of every row.

Offsets
    A source offset is ``{"queues": {KEY: LOOKUP_ID, ...}, "qms": {NAME: GUID, ...},
    "counts": {KEY: N, ...}}``. ``LOOKUP_ID`` is a LookupIdentifier (MS-MQDMPR
    3.1.1.12, u64): every message of the queue whose LookupIdentifier is at most
    ``LOOKUP_ID`` belongs to a batch at or before this offset. ``0`` means "nothing
    consumed yet" (LookupIdentifiers start at 1). A micro-batch from offset ``s`` to
    offset ``e`` reads, per queue, the half-open LookupIdentifier range ``(s[q], e[q]]``.
    ``qms`` records the GUID of each queue manager (QueueManager.Identifier, MS-MQDMPR
    3.1.1.1) the offsets belong to (the single-endpoint name is ``""``); ``counts`` how
    many messages ``(s[q], e[q]]`` held when the batch was planned, to detect data loss.
    Both are optional (checkpoints written before them hold ``queues`` only).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from openmsmq.errors import ConfigError, LocalProtocolError, OpenMSMQError
from openmsmq.redact import redact

__all__ = [
    "MAX_LOOKUP_ID",
    "DataLossError",
    "OptionError",
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

#: Default ``maxTriggerDelay`` (seconds), as the Kafka source's.
DEFAULT_MAX_TRIGGER_DELAY = 15 * 60.0

#: A queue manager's name in option ``endpoints`` (and before ``/`` in a queue key).
_QM_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$", re.IGNORECASE)
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


class OptionError(ConfigError):
    """A bad data source option (or checkpoint): its text is the message alone, which
    names the option, so that Spark's error shows it without a ``configuration`` prefix."""

    def __str__(self) -> str:
        return f"openmsmq data source: {self.message}"

    def __reduce__(self) -> tuple[Any, ...]:
        return (OptionError, (self.key, self.message))


class DataLossError(OpenMSMQError):
    """Messages of a planned range are gone (someone else received them, or they expired)
    and option ``failOnDataLoss`` is true."""


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

    endpoints: Mapping[str, str]
    """Queue manager name -> endpoint: ``{"": endpoint}`` for option ``endpoint``, the
    pairs of option ``endpoints`` otherwise."""
    queues: tuple[str, ...]
    """``queues``: the queue keys, read together (``NAME/QUEUE`` with ``endpoints``)."""
    starting: StartingPosition = StartingPosition.EARLIEST
    """``startingOffsets``: ``earliest`` (default), ``latest`` or an offset JSON."""
    starting_offsets: Mapping[str, int] | None = None
    """The positions of ``startingOffsets`` when it is a JSON offset."""
    ending_offsets: Mapping[str, int] | None = None
    """``endingOffsets`` (batch reads): positions to read through; None = ``latest``."""
    max_messages_per_trigger: int | None = None
    """``maxMessagesPerTrigger`` (or ``maxOffsetsPerTrigger``): at most this many messages
    per micro-batch (all queues)."""
    min_messages_per_trigger: int | None = None
    """``minMessagesPerTrigger``: a trigger with fewer messages available starts no batch,
    until ``maxTriggerDelay`` has passed since the last batch."""
    max_trigger_delay: float = DEFAULT_MAX_TRIGGER_DELAY
    """``maxTriggerDelay`` in seconds (with ``minMessagesPerTrigger``)."""
    fail_on_data_loss: bool = True
    """``failOnDataLoss``: fail a batch whose planned messages are gone (else log it)."""
    partitions_per_queue: int = 1
    """``partitionsPerQueue``: how many Spark partitions a queue's range is split into."""
    fetch_size: int = DEFAULT_FETCH_SIZE
    """``fetchSize``: at most this many messages per peek request made by an executor."""

    @property
    def endpoint(self) -> str:
        """The endpoint of a single-endpoint query (the first one otherwise)."""
        return next(iter(self.endpoints.values()))

    def qm_of(self, key: str) -> str:
        """The queue manager name of queue key ``key`` (``""`` for option ``endpoint``)."""
        return split_key(key, multi="" not in self.endpoints)[0]

    def queue_of(self, key: str) -> str:
        """The queue name on its queue manager of queue key ``key``."""
        return split_key(key, multi="" not in self.endpoints)[1]

    def endpoint_of(self, key: str) -> str:
        """The endpoint of the queue manager holding queue key ``key``."""
        return self.endpoints[self.qm_of(key)]

    def keys_by_qm(self) -> dict[str, list[str]]:
        """The queue keys grouped by queue manager name, in option order."""
        out: dict[str, list[str]] = {name: [] for name in self.endpoints}
        for key in self.queues:
            out[self.qm_of(key)].append(key)
        return out


def split_key(key: str, multi: bool) -> tuple[str, str]:
    """``(qm name, queue name)`` of a queue key: ``NAME/QUEUE`` when ``multi``, else
    ``("", key)``."""
    if not multi:
        return "", key
    name, sep, queue = key.partition("/")
    if not sep:
        raise OptionError(
            "queues", f"option 'queues' entry {key!r} must be NAME/QUEUE with option 'endpoints'"
        )
    return name, queue


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
        raise OptionError(
            unknown[0],
            f"unknown {kind} option {unknown[0]!r} (known options: {', '.join(sorted(known))})",
        )


def _require(opts: Mapping[str, str], key: str, hint: str) -> str:
    value = opts.get(key.lower(), "").strip()
    if not value:
        raise OptionError(key, f"option {key!r} is required: {hint}")
    return value


def _bool_option(opts: Mapping[str, str], key: str, default: bool) -> bool:
    raw = opts.get(key.lower(), "").strip().lower()
    if raw == "":
        return default
    if raw in ("true", "false"):
        return raw == "true"
    raise OptionError(key, f"option {key!r} must be true or false, got {opts[key.lower()]!r}")


def _duration_option(opts: Mapping[str, str], key: str, default: float) -> float:
    """Seconds of a duration such as ``15m``, ``30s``, ``500ms`` or ``2h`` (a bare number:
    seconds)."""
    raw = opts.get(key.lower())
    if raw is None or raw.strip() == "":
        return default
    match = _DURATION.match(raw)
    if match is None:
        raise OptionError(key, f"option {key!r} must be a duration such as 30s, 15m or 500ms, got {raw!r}")
    return float(match.group(1)) * _DURATION_UNITS[(match.group(2) or "s").lower()]


def _int_option(opts: Mapping[str, str], key: str, default: int | None, lo: int, hi: int) -> int | None:
    raw = opts.get(key.lower())
    if raw is None or raw.strip() == "":
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise OptionError(key, f"option {key!r} must be an integer, got {raw!r}") from None
    if not lo <= value <= hi:
        raise OptionError(key, f"option {key!r} must be between {lo} and {hi}, got {value}")
    return value


def _check_endpoint(endpoint: str, key: str = "endpoint") -> str:
    if "://" not in endpoint and not endpoint.startswith("/"):
        raise OptionError(
            key,
            f"option {key!r} must be a URL such as grpc://host:port or the absolute path of "
            f"a running queue manager's data directory, got {redact(endpoint)!r}",
        )
    return endpoint


def _check_queue_name(name: str, key: str) -> str:
    if not name or any(ord(c) < 0x20 for c in name):
        raise OptionError(key, f"option {key!r} holds an invalid queue name {name!r}")
    return name


def _parse_endpoints(opts: Mapping[str, str]) -> dict[str, str]:
    """``{"": endpoint}`` or the ``NAME=URL`` pairs of option ``endpoints`` (exactly one
    of the two options)."""
    single = opts.get("endpoint", "").strip()
    many = opts.get("endpoints", "").strip()
    if single and many:
        raise OptionError("endpoints", "give option 'endpoint' (one queue manager) or 'endpoints', not both")
    if not many:
        return {"": _check_endpoint(_require(opts, "endpoint", "the URL of the queue manager"))}
    out: dict[str, str] = {}
    for item in many.split(","):
        name, sep, url = (part.strip() for part in item.partition("="))
        if not sep or not _QM_NAME.match(name):
            raise OptionError(
                "endpoints",
                f"option 'endpoints' entry {item.strip()!r} must be NAME=URL (NAME: letters, digits, "
                "'_', '-', '.')",
            )
        if name in out:
            raise OptionError("endpoints", f"option 'endpoints' names queue manager {name!r} twice")
        out[name] = _check_endpoint(url, "endpoints")
    return out


def _parse_queue_keys(opts: Mapping[str, str], endpoints: Mapping[str, str]) -> tuple[str, ...]:
    raw = _require(opts, "queues", "a comma-separated list of queue names")
    multi = "" not in endpoints
    keys: list[str] = []
    for item in raw.split(","):
        key = _check_queue_name(item.strip(), "queues")
        if multi:
            name, queue = split_key(key, multi=True)
            if name not in endpoints:
                raise OptionError(
                    "queues",
                    f"option 'queues' entry {key!r} names queue manager {name!r}, which option "
                    f"'endpoints' does not name (it names {', '.join(sorted(endpoints))})",
                )
            key = f"{name}/{_check_queue_name(queue.strip(), 'queues')}"
        keys.append(key)
    if len(set(keys)) != len(keys):
        raise OptionError("queues", f"option 'queues' names a queue twice: {raw!r}")
    return tuple(keys)


def _option_positions(opts: Mapping[str, str], key: str, queues: Sequence[str]) -> dict[str, int]:
    """The positions of an offset JSON given in option ``key`` (queues of ``queues`` only)."""
    decoded = decode_offset(opts[key.lower()].strip(), origin=f"option {key!r}")
    if decoded.qms or decoded.counts:
        raise OptionError(key, f'option {key!r} takes {{"queues": {{"QUEUE": LOOKUP_ID}}}} only')
    extra = sorted(set(decoded.positions) - set(queues))
    if extra:
        raise OptionError(key, f"option {key!r} names queue {extra[0]!r}, which is not in option 'queues'")
    return dict(decoded.positions)


READER_OPTION_KEYS = (
    "endpoint",
    "endpoints",
    "queues",
    "startingOffsets",
    "endingOffsets",
    "maxMessagesPerTrigger",
    "maxOffsetsPerTrigger",
    "minMessagesPerTrigger",
    "maxTriggerDelay",
    "failOnDataLoss",
    "partitionsPerQueue",
    "fetchSize",
)

WRITER_OPTION_KEYS = ("endpoint", "queue", "identityColumn", "writeId", "sendBatchSize")


def parse_reader_options(options: Mapping[str, str]) -> ReaderOptions:
    """Validate reader options; raise :class:`OptionError` naming the first bad option.

    Keys are case-insensitive, as Spark's are. Unknown keys are rejected so that a typo
    (``maxMessagePerTrigger``) fails the query at start instead of being ignored.
    """
    opts = _lower(options)
    _check_known(opts, READER_OPTION_KEYS, "reader")
    endpoints = _parse_endpoints(opts)
    queues = _parse_queue_keys(opts, endpoints)
    starting = StartingPosition.EARLIEST
    starting_offsets: dict[str, int] | None = None
    raw_start = opts.get("startingoffsets", "").strip()
    if raw_start.lower() in ("", "earliest"):
        starting = StartingPosition.EARLIEST
    elif raw_start.lower() == "latest":
        starting = StartingPosition.LATEST
    else:
        starting = StartingPosition.EXPLICIT
        starting_offsets = _option_positions(opts, "startingOffsets", queues)
    ending_offsets: dict[str, int] | None = None
    raw_end = opts.get("endingoffsets", "").strip()
    if raw_end.lower() == "earliest":
        raise OptionError("endingOffsets", "option 'endingOffsets' must be 'latest' or an offset JSON")
    if raw_end and raw_end.lower() != "latest":
        ending_offsets = _option_positions(opts, "endingOffsets", queues)
    max_messages = _int_option(opts, "maxMessagesPerTrigger", None, 1, MAX_LOOKUP_ID)
    alias = _int_option(opts, "maxOffsetsPerTrigger", None, 1, MAX_LOOKUP_ID)
    if max_messages is not None and alias is not None and alias != max_messages:
        raise OptionError(
            "maxOffsetsPerTrigger",
            "options 'maxMessagesPerTrigger' and 'maxOffsetsPerTrigger' (its alias) disagree: give one",
        )
    max_messages = max_messages if max_messages is not None else alias
    min_messages = _int_option(opts, "minMessagesPerTrigger", None, 1, MAX_LOOKUP_ID)
    if min_messages is not None and max_messages is not None and min_messages > max_messages:
        raise OptionError(
            "minMessagesPerTrigger",
            f"option 'minMessagesPerTrigger' ({min_messages}) exceeds 'maxMessagesPerTrigger' "
            f"({max_messages})",
        )
    if "maxtriggerdelay" in opts and min_messages is None:
        raise OptionError("maxTriggerDelay", "option 'maxTriggerDelay' needs 'minMessagesPerTrigger'")
    delay = _duration_option(opts, "maxTriggerDelay", DEFAULT_MAX_TRIGGER_DELAY)
    partitions = _int_option(opts, "partitionsPerQueue", 1, 1, MAX_PARTITIONS_PER_QUEUE)
    fetch_size = _int_option(opts, "fetchSize", DEFAULT_FETCH_SIZE, 1, MAX_FETCH_SIZE)
    assert partitions is not None and fetch_size is not None
    return ReaderOptions(
        endpoints=endpoints,
        queues=queues,
        starting=starting,
        starting_offsets=starting_offsets,
        ending_offsets=ending_offsets,
        max_messages_per_trigger=max_messages,
        min_messages_per_trigger=min_messages,
        max_trigger_delay=delay,
        fail_on_data_loss=_bool_option(opts, "failOnDataLoss", True),
        partitions_per_queue=partitions,
        fetch_size=fetch_size,
    )


def parse_writer_options(options: Mapping[str, str]) -> WriterOptions:
    """Validate writer options; raise :class:`OptionError` naming the first bad option."""
    opts = _lower(options)
    _check_known(opts, WRITER_OPTION_KEYS, "writer")
    endpoint = _check_endpoint(_require(opts, "endpoint", "the URL of the queue manager"))
    queue = _check_queue_name(_require(opts, "queue", "the destination queue name"), "queue")
    identity_column = opts.get("identitycolumn", "").strip() or None
    write_id = opts.get("writeid", "").strip() or None
    if write_id is not None and (len(write_id) > 128 or "/" in write_id):
        raise OptionError("writeId", "option 'writeId' must be at most 128 characters without '/'")
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
    """A position per queue key: every message with LookupIdentifier <= position is
    consumed; with the GUIDs of the queue managers (``qms``) and, for a batch's end, the
    number of messages its ranges held when it was planned (``counts``)."""

    positions: Mapping[str, int]
    qms: Mapping[str, str] = field(default_factory=dict)
    """Queue manager name (``""`` for option ``endpoint``) -> its GUID."""
    counts: Mapping[str, int] = field(default_factory=dict)
    """Queue key -> messages in the batch ending at this offset, when known."""

    def get(self, queue: str) -> int:
        """The position of ``queue`` (0 when the offset does not name it)."""
        return self.positions.get(queue, 0)

    def to_json_dict(self) -> dict[str, Any]:
        """The dict handed to Spark (which stores it as JSON in the checkpoint)."""
        out: dict[str, Any] = {"queues": {q: self.positions[q] for q in sorted(self.positions)}}
        if self.qms:
            out["qms"] = {n: self.qms[n] for n in sorted(self.qms)}
        if self.counts:
            out["counts"] = {q: self.counts[q] for q in sorted(self.counts)}
        return out


def encode_offset(offset: SourceOffset) -> str:
    """The canonical JSON text of ``offset`` (sorted keys, so equal offsets compare equal)."""
    return json.dumps(offset.to_json_dict(), sort_keys=True, separators=(",", ":"))


def _lookup_id(value: Any, what: str, key: str, origin: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_LOOKUP_ID:
        raise OptionError(key, f"{origin} has {what}; expected an integer between 0 and {MAX_LOOKUP_ID}")
    return value


def decode_offset(value: str | Mapping[str, Any], origin: str = "checkpoint offset") -> SourceOffset:
    """Parse and validate an offset given as JSON text or as an already-decoded dict.

    ``origin`` names where the value came from (``"option 'startingOffsets'"`` or the
    checkpoint) and is put into the :class:`OptionError` raised for a bad value.
    """
    key = origin.split("'")[1] if origin.startswith("option '") else "checkpoint"
    data: Any = value
    if isinstance(value, str):
        try:
            data = json.loads(value)
        except ValueError as exc:
            raise OptionError(key, f"{origin} is not valid JSON ({exc}): {value!r}") from None
    if (
        not isinstance(data, Mapping)
        or "queues" not in data
        or not set(data) <= {"queues", "qms", "counts"}
        or not all(isinstance(v, Mapping) for v in data.values())
    ):
        raise OptionError(key, f'{origin} must look like {{"queues": {{"QUEUE": LOOKUP_ID}}}}, got {data!r}')
    positions: dict[str, int] = {}
    for queue, pos in data["queues"].items():
        if not isinstance(queue, str) or not queue:
            raise OptionError(key, f"{origin} has an invalid queue name {queue!r}")
        positions[queue] = _lookup_id(pos, f"position {pos!r} for queue {queue!r}", key, origin)
    qms: dict[str, str] = {}
    for name, guid in data.get("qms", {}).items():
        try:
            qms[str(name)] = str(uuid.UUID(str(guid)))
        except ValueError:
            raise OptionError(key, f"{origin} has GUID {guid!r} for queue manager {name!r}") from None
    counts: dict[str, int] = {}
    for queue, n in data.get("counts", {}).items():
        if queue not in positions:
            raise OptionError(key, f"{origin} counts queue {queue!r}, which it has no position for")
        counts[queue] = _lookup_id(n, f"count {n!r} for queue {queue!r}", key, origin)
    return SourceOffset(positions, qms, counts)


def check_offset_queues(offset: SourceOffset, queues: Sequence[str], origin: str) -> None:
    """Fail unless a checkpointed offset names exactly the queues of option ``queues``.

    A checkpoint belongs to one set of queues: a dropped queue's uncommitted messages
    would be abandoned silently, and a queue added to a running query would start at a
    position nobody chose. Either way the query fails at start; a new checkpoint
    location with ``startingOffsets`` carries positions over.
    """
    missing = sorted(set(offset.positions) - set(queues))
    if missing:
        raise OptionError(
            "queues",
            f"{origin} holds queue {missing[0]!r}, which option 'queues' no longer names; "
            "restore the option or start the query with a new checkpoint location",
        )
    added = [q for q in queues if q not in offset.positions]
    if added:
        raise OptionError(
            "queues",
            f"option 'queues' names queue {added[0]!r}, which {origin} does not hold (the checkpoint "
            "belongs to another set of queues); to add a queue, start with a new checkpoint location "
            "and give the old positions in 'startingOffsets'",
        )


def check_offset_qms(offset: SourceOffset, live: Mapping[str, str], endpoints: Mapping[str, str]) -> None:
    """Fail unless the queue managers an offset was written for (``offset.qms``: name ->
    GUID) are the ones the options reach now (``live``: name -> GUID each answered with).

    An offset without ``qms`` (a checkpoint written before they were recorded) passes.
    The error names option ``endpoint`` or ``endpoints`` and the queue manager.
    """
    if not offset.qms:
        return
    key = "endpoint" if "" in endpoints else "endpoints"
    if set(offset.qms) != set(endpoints):
        raise OptionError(
            key,
            f"the checkpoint was written reading queue managers {sorted(offset.qms)}, option {key!r} "
            f"names {sorted(endpoints)}: a checkpoint belongs to one set of queue managers",
        )
    for name, guid in offset.qms.items():
        if live[name] != guid:
            what = f"queue manager {name!r} at {redact(endpoints[name])}" if name else "the queue manager"
            raise OptionError(
                key,
                f"option {key!r}: {what} answers with GUID {live[name]}, but the checkpoint was written "
                f"reading GUID {guid}: another queue manager, whose LookupIdentifiers mean other messages",
            )


def check_monotonic(start: SourceOffset, end: SourceOffset) -> None:
    """Fail when ``end`` is behind ``start`` for some queue (a corrupted checkpoint)."""
    for queue, pos in start.positions.items():
        if end.get(queue) < pos:
            raise OptionError(
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
    """One Spark input partition: the messages of queue key ``queue`` with after <
    LookupIdentifier <= through."""

    queue: str
    after: int
    through: int
    expected: int | None = None
    """How many messages the range held when it was planned (None: not counted); a
    partition that reads fewer has lost some (option ``failOnDataLoss``)."""


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
        raise OptionError(
            "identityColumn",
            f"column {column!r} named by option 'identityColumn' must hold non-empty strings, got {value!r}",
        )
    if len(value) > MAX_IDENTITY_LENGTH:
        raise OptionError(
            "identityColumn",
            f"column {column!r}: identity longer than {MAX_IDENTITY_LENGTH} characters",
        )
    return value
