"""Planning logic of the Spark data source, without Spark (this module must not import pyspark)."""

from __future__ import annotations

import itertools
import json
import subprocess
import sys

import pytest

from openmsmq.errors import ConfigError
from openmsmq.spark.backend import PeekedMessage
from openmsmq.spark.planning import (
    PartitionPlan,
    SourceOffset,
    StartingPosition,
    allocate_fairly,
    check_monotonic,
    check_offset_qms,
    check_offset_queues,
    check_user_identity,
    decode_offset,
    encode_offset,
    parse_reader_options,
    parse_writer_options,
    plan_partitions,
    row_identity,
    split_range,
)
from openmsmq.spark.schema import READ_COLUMNS, check_write_schema, message_to_row, row_to_message

EP = "file:///tmp/x.db"
G1, G2 = "6f1a8a4e-0000-4000-8000-000000000001", "6f1a8a4e-0000-4000-8000-000000000002"


# ------------------------------------------------------------------ options


def test_reader_options_defaults_and_case_insensitive_keys() -> None:
    opts = parse_reader_options({"ENDPOINT": EP, "Queues": " private$\\a , b "})
    assert opts.endpoint == EP
    assert opts.queues == ("private$\\a", "b")
    assert opts.starting is StartingPosition.EARLIEST
    assert opts.max_messages_per_trigger is None
    assert opts.partitions_per_queue == 1
    assert opts.fetch_size == 10_000


def test_reader_options_all_set() -> None:
    opts = parse_reader_options(
        {
            "endpoint": EP,
            "queues": "a,b",
            "startingOffsets": '{"queues": {"a": 7}}',
            "maxMessagesPerTrigger": "10",
            "partitionsPerQueue": "4",
            "fetchSize": "50",
            "checkpointLocation": "/ck",
        }
    )
    assert opts.starting is StartingPosition.EXPLICIT
    assert opts.starting_offsets == {"a": 7}
    assert (opts.max_messages_per_trigger, opts.partitions_per_queue, opts.fetch_size) == (10, 4, 50)
    assert parse_reader_options({"endpoint": EP, "queues": "a", "startingOffsets": "LATEST"}).starting is (
        StartingPosition.LATEST
    )


@pytest.mark.parametrize(
    ("options", "key", "fragment"),
    [
        ({"queues": "a"}, "endpoint", "option 'endpoint' is required"),
        ({"endpoint": "  ", "queues": "a"}, "endpoint", "required"),
        ({"endpoint": "localhost:1801", "queues": "a"}, "endpoint", "must be a URL"),
        ({"endpoint": EP}, "queues", "option 'queues' is required"),
        ({"endpoint": EP, "queues": "a,,b"}, "queues", "invalid queue name"),
        ({"endpoint": EP, "queues": "a,a"}, "queues", "twice"),
        ({"endpoint": EP, "queues": "a", "maxMessagesPerTrigger": "0"}, "maxMessagesPerTrigger", "between"),
        ({"endpoint": EP, "queues": "a", "maxMessagesPerTrigger": "ten"}, "maxMessagesPerTrigger", "integer"),
        ({"endpoint": EP, "queues": "a", "partitionsPerQueue": "5000"}, "partitionsPerQueue", "between"),
        ({"endpoint": EP, "queues": "a", "fetchSize": "-1"}, "fetchSize", "between"),
        ({"endpoint": EP, "queues": "a", "maxMessagePerTrigger": "5"}, "maxmessagepertrigger", "unknown"),
        ({"endpoint": EP, "queues": "a", "startingOffsets": "{bad"}, "startingOffsets", "not valid JSON"),
        (
            {"endpoint": EP, "queues": "a", "startingOffsets": '{"queues": {"z": 1}}'},
            "startingOffsets",
            "'z'",
        ),
    ],
)
def test_reader_options_errors_name_the_option(options: dict[str, str], key: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_reader_options(options)
    assert info.value.key == key
    assert fragment in str(info.value)


def test_several_queue_managers_by_name() -> None:
    opts = parse_reader_options(
        {"endpoints": "qm1=grpc://h1:2105, qm-2=grpc://h2:2105?token=t", "queues": "qm1/private$\\a,qm-2/b"}
    )
    assert opts.endpoints == {"qm1": "grpc://h1:2105", "qm-2": "grpc://h2:2105?token=t"}
    assert opts.queues == ("qm1/private$\\a", "qm-2/b")
    assert [opts.queue_of(k) for k in opts.queues] == ["private$\\a", "b"]
    assert opts.endpoint_of("qm-2/b") == "grpc://h2:2105?token=t"
    assert opts.keys_by_qm() == {"qm1": ["qm1/private$\\a"], "qm-2": ["qm-2/b"]}
    # One endpoint: queue names are keys as they are, a '/' included.
    single = parse_reader_options({"endpoint": EP, "queues": "a/b"})
    assert (single.qm_of("a/b"), single.queue_of("a/b"), single.endpoint_of("a/b")) == ("", "a/b", EP)


@pytest.mark.parametrize(
    ("options", "key", "fragment"),
    [
        ({"endpoint": EP, "endpoints": f"q={EP}", "queues": "q/a"}, "endpoints", "not both"),
        ({"endpoints": "q", "queues": "q/a"}, "endpoints", "NAME=URL"),
        ({"endpoints": f"q r={EP}", "queues": "q/a"}, "endpoints", "NAME=URL"),
        ({"endpoints": f"q={EP},q={EP}", "queues": "q/a"}, "endpoints", "twice"),
        ({"endpoints": "q=localhost:1", "queues": "q/a"}, "endpoints", "must be a URL"),
        ({"endpoints": f"q={EP}", "queues": "a"}, "queues", "NAME/QUEUE"),
        ({"endpoints": f"q={EP}", "queues": "z/a"}, "queues", "names queue manager 'z'"),
        ({"endpoints": f"q={EP}", "queues": "q/a, q/a"}, "queues", "twice"),
        ({"endpoint": EP, "queues": "a", "endingOffsets": "earliest"}, "endingOffsets", "latest"),
        ({"endpoint": EP, "queues": "a", "endingOffsets": '{"queues": {"b": 1}}'}, "endingOffsets", "'b'"),
        (
            {
                "endpoint": EP,
                "queues": "a",
                "startingOffsets": f'{{"queues": {{"a": 1}}, "qms": {{"": "{G1}"}}}}',
            },
            "startingOffsets",
            "only",
        ),
        ({"endpoint": EP, "queues": "a", "failOnDataLoss": "yes"}, "failOnDataLoss", "true or false"),
        (
            {"endpoint": EP, "queues": "a", "maxTriggerDelay": "5m"},
            "maxTriggerDelay",
            "minMessagesPerTrigger",
        ),
        (
            {"endpoint": EP, "queues": "a", "minMessagesPerTrigger": "5", "maxTriggerDelay": "soon"},
            "maxTriggerDelay",
            "duration",
        ),
        (
            {"endpoint": EP, "queues": "a", "minMessagesPerTrigger": "50", "maxMessagesPerTrigger": "10"},
            "minMessagesPerTrigger",
            "exceeds",
        ),
        (
            {"endpoint": EP, "queues": "a", "maxMessagesPerTrigger": "5", "maxOffsetsPerTrigger": "6"},
            "maxOffsetsPerTrigger",
            "disagree",
        ),
    ],
)
def test_kafka_like_and_endpoints_option_errors(options: dict[str, str], key: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_reader_options(options)
    assert info.value.key == key
    assert fragment in str(info.value)
    assert str(info.value).startswith("openmsmq data source: ")


def test_kafka_like_options() -> None:
    opts = parse_reader_options(
        {
            "endpoint": EP,
            "queues": "a,b",
            "maxOffsetsPerTrigger": "100",
            "minMessagesPerTrigger": "10",
            "maxTriggerDelay": "90s",
            "failOnDataLoss": "False",
            "endingOffsets": '{"queues": {"a": 42}}',
        }
    )
    assert (opts.max_messages_per_trigger, opts.min_messages_per_trigger, opts.max_trigger_delay) == (
        100,
        10,
        90,
    )
    assert opts.fail_on_data_loss is False and opts.ending_offsets == {"a": 42}
    defaults = parse_reader_options({"endpoint": EP, "queues": "a"})
    assert defaults.fail_on_data_loss is True and defaults.max_trigger_delay == 900
    assert defaults.ending_offsets is None and defaults.min_messages_per_trigger is None
    for text, seconds in (("500ms", 0.5), ("2m", 120), ("1h", 3600), ("7", 7)):
        got = parse_reader_options(
            {"endpoint": EP, "queues": "a", "minMessagesPerTrigger": "1", "maxTriggerDelay": text}
        )
        assert got.max_trigger_delay == seconds


def test_writer_options() -> None:
    opts = parse_writer_options(
        {"endpoint": EP, "queue": "out", "identityColumn": "id", "sendBatchSize": "7"}
    )
    assert (opts.queue, opts.identity_column, opts.send_batch_size, opts.write_id) == ("out", "id", 7, None)
    with pytest.raises(ConfigError, match="option 'queue' is required") as info:
        parse_writer_options({"endpoint": EP})
    assert info.value.key == "queue"
    with pytest.raises(ConfigError, match="writeId"):
        parse_writer_options({"endpoint": EP, "queue": "q", "writeId": "a/b"})
    with pytest.raises(ConfigError, match="unknown writer option 'queues'"):
        parse_writer_options({"endpoint": EP, "queue": "q", "queues": "q"})


# ------------------------------------------------------------------ offsets


def test_offset_round_trip_is_canonical() -> None:
    off = SourceOffset({"b": 5, "private$\\orders": 1234})
    text = encode_offset(off)
    assert json.loads(text) == {"queues": {"b": 5, "private$\\orders": 1234}}
    assert decode_offset(text) == off
    assert decode_offset(json.loads(text)) == off
    assert encode_offset(SourceOffset({"private$\\orders": 1234, "b": 5})) == text
    assert off.get("missing") == 0


@pytest.mark.parametrize(
    "bad",
    [
        "[1, 2]",
        '{"queue": {"a": 1}}',
        '{"queues": {"a": 1}, "extra": 0}',
        '{"queues": {"a": -1}}',
        '{"queues": {"a": 1.5}}',
        '{"queues": {"a": true}}',
        '{"queues": {"a": "12"}}',
        '{"queues": {"a": 9223372036854775808}}',
        '{"queues": {"": 1}}',
        "not json",
    ],
)
def test_bad_checkpoint_offsets_are_rejected_naming_the_checkpoint(bad: str) -> None:
    with pytest.raises(ConfigError) as info:
        decode_offset(bad)
    assert info.value.key == "checkpoint"
    assert "checkpoint offset" in str(info.value)


def test_offset_queue_set_and_monotonic_checks() -> None:
    check_offset_queues(SourceOffset({"a": 1, "b": 0}), ["a", "b"], "checkpoint offset")
    with pytest.raises(ConfigError, match="no longer names") as info:
        check_offset_queues(SourceOffset({"a": 1, "gone": 3}), ["a"], "checkpoint offset")
    assert info.value.key == "queues"
    # A checkpoint belongs to one set of queues: an added queue fails too, naming it.
    with pytest.raises(ConfigError, match="names queue 'b', which checkpoint offset does not hold") as info:
        check_offset_queues(SourceOffset({"a": 1}), ["a", "b"], "checkpoint offset")
    assert info.value.key == "queues"
    check_monotonic(SourceOffset({"a": 1}), SourceOffset({"a": 1, "b": 9}))
    with pytest.raises(ConfigError, match="backwards"):
        check_monotonic(SourceOffset({"a": 5}), SourceOffset({"a": 4}))


def test_offsets_carry_queue_manager_guids_and_batch_counts() -> None:
    off = SourceOffset({"qm1/a": 5, "qm2/b": 0}, {"qm2": G2, "qm1": G1}, {"qm1/a": 3})
    text = encode_offset(off)
    assert json.loads(text) == {
        "queues": {"qm1/a": 5, "qm2/b": 0},
        "qms": {"qm1": G1, "qm2": G2},
        "counts": {"qm1/a": 3},
    }
    assert decode_offset(text) == off
    # A checkpoint written before GUIDs and counts were recorded still reads.
    assert decode_offset('{"queues": {"a": 4}}') == SourceOffset({"a": 4})
    for bad in ('{"queues": {"a": 1}, "qms": {"": "nope"}}', '{"queues": {"a": 1}, "counts": {"b": 1}}'):
        with pytest.raises(ConfigError) as info:
            decode_offset(bad)
        assert info.value.key == "checkpoint"


def test_checkpoint_of_other_queue_managers_fails_naming_the_option() -> None:
    eps = {"qm1": "grpc://h1:1", "qm2": "grpc://h2:1"}
    off = SourceOffset({"qm1/a": 1, "qm2/b": 1}, {"qm1": G1, "qm2": G2})
    check_offset_qms(off, {"qm1": G1, "qm2": G2}, eps)
    check_offset_qms(SourceOffset({"qm1/a": 1}), {"qm1": G2, "qm2": G1}, eps)  # old checkpoint: no GUIDs
    with pytest.raises(ConfigError, match=r"queue manager 'qm2' at grpc://h2:1 answers with GUID") as info:
        check_offset_qms(off, {"qm1": G1, "qm2": G1}, eps)
    assert info.value.key == "endpoints"
    with pytest.raises(ConfigError, match="one set of queue managers") as info:
        check_offset_qms(off, {"qm1": G1}, {"qm1": "grpc://h1:1"})
    assert info.value.key == "endpoints"
    with pytest.raises(ConfigError, match="the queue manager answers with GUID") as info:
        check_offset_qms(SourceOffset({"a": 1}, {"": G1}), {"": G2}, {"": "grpc://h:1"})
    assert info.value.key == "endpoint"


# ------------------------------------------------------------------ admission control


def test_allocate_takes_everything_when_budget_suffices() -> None:
    assert allocate_fairly({"a": (3, 10), "b": (2, 11)}, 100) == {"a": 3, "b": 2}


def test_allocate_is_max_min_fair() -> None:
    # b needs little; a and c split what is left evenly.
    assert allocate_fairly({"a": (100, 1), "b": (2, 2), "c": (100, 3)}, 12) == {"a": 5, "b": 2, "c": 5}


def test_allocate_remainder_goes_to_oldest_first_message() -> None:
    grant = allocate_fairly({"a": (10, 50), "b": (10, 20), "c": (10, 30)}, 2)
    assert grant == {"a": 0, "b": 1, "c": 1}
    assert allocate_fairly({"a": (10, 50), "b": (10, 20)}, 5) == {"a": 2, "b": 3}


def test_allocate_edge_cases() -> None:
    assert allocate_fairly({}, 5) == {}
    assert allocate_fairly({"a": (0, 0), "b": (4, 1)}, 3) == {"a": 0, "b": 3}
    assert allocate_fairly({"a": (4, 1)}, 0) == {"a": 0}
    with pytest.raises(ValueError):
        allocate_fairly({"a": (1, 1)}, -1)


@pytest.mark.parametrize("budget", [1, 2, 3, 7, 20, 1000])
def test_allocate_never_exceeds_budget_or_need(budget: int) -> None:
    pending = {"a": (1, 5), "b": (9, 1), "c": (4, 9), "d": (0, 0)}
    grant = allocate_fairly(pending, budget)
    assert sum(grant.values()) == min(budget, 14)
    assert all(0 <= grant[q] <= pending[q][0] for q in pending)


def test_no_queue_starves_across_successive_batches() -> None:
    # Budget 1 per batch, two busy queues: the oldest pending message wins each time,
    # so both queues make progress (simulate with consecutive LookupIdentifiers).
    ids = {"a": [1, 3, 5, 7], "b": [2, 4, 6, 8]}
    taken: list[str] = []
    for _ in range(8):
        pending = {q: (len(v), v[0]) for q, v in ids.items() if v}
        grant = allocate_fairly(pending, 1)
        (q,) = [q for q, g in grant.items() if g]
        taken.append(q)
        ids[q].pop(0)
    assert taken == ["a", "b"] * 4


# ------------------------------------------------------------------ partitions


def test_split_range_covers_exactly_once() -> None:
    parts = split_range(10, 110, 3)
    assert parts == [(10, 43), (43, 76), (76, 110)]
    assert split_range(5, 5, 4) == []
    assert split_range(5, 7, 4) == [(5, 6), (6, 7)]
    huge = split_range(0x0700000000000000, 0x0700000000000100, 8)
    assert huge[0][0] == 0x0700000000000000 and huge[-1][1] == 0x0700000000000100
    assert all(a[1] == b[0] for a, b in itertools.pairwise(huge))


def test_plan_partitions_several_queues_and_deterministic() -> None:
    start = SourceOffset({"a": 0, "b": 100})
    end = SourceOffset({"a": 10, "b": 100, "c": 4})
    plans = plan_partitions(start, end, ["a", "b", "c"], 2)
    assert plans == [
        PartitionPlan("a", 0, 5),
        PartitionPlan("a", 5, 10),
        PartitionPlan("c", 0, 2),
        PartitionPlan("c", 2, 4),
    ]
    assert plan_partitions(start, end, ["a", "b", "c"], 2) == plans


# ------------------------------------------------------------------ identity and rows


def test_row_identity_is_deterministic_and_distinct() -> None:
    a = row_identity(("q-123", 4), 1, 0)
    assert a == "spark/q-123/4/1/0"
    assert row_identity(("q-123", 4), 1, 0) == a
    seen = {row_identity(("q", b), p, r) for b in range(3) for p in range(3) for r in range(3)}
    assert len(seen) == 27
    with pytest.raises(ValueError):
        row_identity(("a/b",), 0, 0)
    with pytest.raises(ValueError):
        row_identity(("x" * 300,), 0, 0)


def test_user_identity_validation() -> None:
    assert check_user_identity("order-1", "id") == "order-1"
    for bad in (None, "", 5, "x" * 256):
        with pytest.raises(ConfigError):
            check_user_identity(bad, "id")


def test_message_to_row_matches_schema_order() -> None:
    m = PeekedMessage(
        lookup_id=7,
        message_id="{G}\\7",
        label="l",
        body=b"b",
        message_class=0,
        priority=0,
        correlation_id=bytes(20),
        app_specific=9,
        sent_time=1_700_000_000,
        arrived_time=1_700_000_001,
        source_qm="G",
        tx_sequence_id=1,
        tx_sequence_number=7,
    )
    row = message_to_row("q", m)
    assert len(row) == len(READ_COLUMNS)
    named = dict(zip([c for c, _ in READ_COLUMNS], row, strict=True))
    assert named["lookup_id"] == 7 and named["queue"] == "q" and named["body"] == b"b"
    assert named["arrived_time"].timestamp() == 1_700_000_001
    assert named["tx_sequence_number"] == 7


def test_write_schema_checks() -> None:
    check_write_schema({"body": "binary", "label": "string", "id": "string"}, "id")
    check_write_schema({"body": "string", "priority": "int"}, None)
    with pytest.raises(ConfigError, match="'body'"):
        check_write_schema({"label": "string"}, None)
    with pytest.raises(ConfigError, match="not a message property"):
        check_write_schema({"body": "binary", "value": "string"}, None)
    with pytest.raises(ConfigError, match="type int"):
        check_write_schema({"body": "binary", "label": "int"}, None)
    with pytest.raises(ConfigError, match="missing"):
        check_write_schema({"body": "binary"}, "id")


def test_row_to_message() -> None:
    m = row_to_message({"body": "hé", "priority": 5, "app_specific": 3}, [], "k")
    assert (m.identity, m.body, m.priority, m.app_specific, m.label) == ("k", "hé".encode(), 5, 3, "")
    assert row_to_message((b"x", "lab"), ["body", "label"], "k").label == "lab"
    for bad in ({"body": None}, {"body": b"", "priority": 9}, {"body": b"", "correlation_id": b"123"}):
        with pytest.raises(ValueError):
            row_to_message(bad, [], "k")


def test_importing_openmsmq_spark_does_not_import_pyspark() -> None:
    code = (
        "import sys, openmsmq, openmsmq.spark, openmsmq.spark.planning, openmsmq.spark.schema, "
        "openmsmq.spark.backend; "
        "assert 'pyspark' not in sys.modules, 'pyspark was imported'"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
