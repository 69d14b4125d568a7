"""Structured logging: kv and JSON lines, escaping, context fields, level filtering."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator

import pytest

from openmsmq.errors import HResult
from openmsmq.observability.logging import (
    StructuredFormatter,
    bind,
    configure_logging,
    format_kv,
    log_event,
)

NAME = "openmsmq.test.obs"


@pytest.fixture
def capture() -> Iterator[tuple[io.StringIO, logging.Logger]]:
    """A private logger (not the root) so that other tests' handlers are untouched."""
    stream = io.StringIO()
    log = logging.getLogger(NAME)
    log.propagate = False
    configure_logging("info", "kv", stream, logger=NAME)
    yield stream, log
    for h in list(log.handlers):
        log.removeHandler(h)
    log.propagate = True


def lines(stream: io.StringIO) -> list[str]:
    return stream.getvalue().splitlines()


def test_kv_line_has_standard_then_event_fields(capture) -> None:
    stream, log = capture
    log_event(
        log,
        "order_ack_sent",
        peer="127.0.0.1:1801",
        tx_sequence_id="1a2b:7",
        tx_sequence_number=42,
        skipped=None,
        ok=True,
    )
    (line,) = lines(stream)
    assert re.fullmatch(
        r"ts=\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z level=info logger=openmsmq\.test\.obs "
        r"event=order_ack_sent peer=127\.0\.0\.1:1801 tx_sequence_id=1a2b:7 tx_sequence_number=42 ok=true",
        line,
    ), line


def test_kv_escaping() -> None:
    text = format_kv(
        {
            "queue": "private$\\orders",
            "label": 'say "hi"=now',
            "empty": "",
            "multi": "a\nb\tc\r",
            "ctl": "x\x01y",
            "uni": "café",
            "sep": "a\u2028b c",
            "bad key!": 1,
            "hresult": HResult.MQ_ERROR_QUEUE_NOT_FOUND,
            "body": b"\x00\xff",
            "f": 0.25,
        }
    )
    assert text == (
        'queue="private$\\\\orders" label="say \\"hi\\"=now" empty="" multi="a\\nb\\tc\\r" '
        'ctl="x\\x01y" uni=café sep="a\\u2028b c" bad_key_=1 hresult=0xC00E0003 body=00ff f=0.25'
    )


def test_json_lines_round_trip(capture) -> None:
    stream, log = capture
    configure_logging("debug", "json", stream, logger=NAME)
    log_event(log, "message_rejected", logging.WARNING, queue='q "x"\n', hresult=0xC00E0003, n=3)
    bind(log, peer="10.0.0.5:1801", session=7).debug("session_opened", role="initiator", session=8)
    first, second = (json.loads(x) for x in lines(stream))
    assert list(first)[:4] == ["ts", "level", "logger", "event"]
    assert first["level"] == "warning" and first["event"] == "message_rejected"
    assert first["queue"] == 'q "x"\n' and first["hresult"] == "0xC00E0003" and first["n"] == 3
    assert second["level"] == "debug" and second["peer"] == "10.0.0.5:1801"
    assert second["session"] == 8 and second["role"] == "initiator"  # event fields win over bound ones


def test_level_filtering_builds_nothing(capture) -> None:
    stream, log = capture

    class Boom:
        def __str__(self) -> str:  # would be called only if the event were formatted
            raise AssertionError("formatted a disabled event")

    log_event(log, "noisy", logging.DEBUG, value=Boom())
    bind(log, queue=Boom()).debug("noisy")
    assert not bind(log).is_enabled(logging.DEBUG)
    log_event(log, "kept", logging.ERROR)
    assert [line.split(" event=")[1] for line in lines(stream)] == ["kept"]


def test_classic_records_and_exceptions(capture) -> None:
    stream, log = capture
    log.info("connection from %s", "127.0.0.2", extra={"peer": "127.0.0.2:5000", "unrelated": 1})
    try:
        raise ValueError("bad\nthing")
    except ValueError:
        bind(log, session=3).exception("session_failed")
    first, second = lines(stream)
    assert first.endswith('event="connection from 127.0.0.2" peer=127.0.0.2:5000')
    assert "unrelated" not in first
    assert ' event=session_failed session=3 exc="Traceback' in second
    assert "ValueError: bad\\nthing" in second and "\n" not in second


def test_standard_fields_not_hidden_and_reconfigure_replaces_handler(capture) -> None:
    stream, log = capture
    other = io.StringIO()
    configure_logging("info", "kv", other, logger=NAME)
    ours = [h for h in log.handlers if isinstance(h.formatter, StructuredFormatter)]
    assert [h.stream for h in ours if isinstance(h, logging.StreamHandler)] == [other]
    log_event(log, "e", ts="x", event="y", logger="fake")
    assert stream.getvalue() == ""
    assert " logger=openmsmq.test.obs event=e ts_=x event_=y logger_=fake" in other.getvalue()


def test_bad_arguments() -> None:
    with pytest.raises(ValueError):
        StructuredFormatter("xml")
    with pytest.raises(ValueError):
        configure_logging("loud")
