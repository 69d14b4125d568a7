"""qm.names over wire.format_name: local keys, computer parts, error codes."""

from __future__ import annotations

import uuid

import pytest

from openmsmq.errors import HResult, MQError
from openmsmq.qm.names import DEADLETTER, DEADXACT, parse_name


@pytest.mark.parametrize(
    ("text", "key", "computer", "fmt"),
    [
        ("private$\\Orders", "private$\\orders", None, False),
        (".\\PRIVATE$\\Orders;JOURNAL", "private$\\orders;journal", None, False),
        ("Host1\\private$\\orders", "private$\\orders", "Host1", False),
        ("system$;DEADLETTER", DEADLETTER, None, False),
        ("host1\\SYSTEM$;deadxact", DEADXACT, "host1", False),
        ("DIRECT=OS:host1\\private$\\Orders", "private$\\orders", "host1", True),
        ("direct=tcp:192.0.2.1\\PRIVATE$\\orders;journal", "private$\\orders;journal", "192.0.2.1", True),
        ("DIRECT=TCP:192.0.2.1\\SYSTEM$;DEADXACT", DEADXACT, "192.0.2.1", True),
        # one case rule, the format-name parser's: casefold ("ß" folds to "ss")
        ("private$\\Straße", "private$\\strasse", None, False),
    ],
)
def test_local_keys(text: str, key: str, computer: str | None, fmt: bool) -> None:
    parsed = parse_name(text)
    assert (parsed.key, parsed.computer, parsed.is_format_name) == (key, computer, fmt)


def test_private_format_name() -> None:
    guid = uuid.uuid4()
    parsed = parse_name(f"PRIVATE={guid}\\0000001a")
    assert (parsed.qm_guid, parsed.private_number, parsed.key) == (guid, 0x1A, None)


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("private$\\", HResult.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME),
        ("private$\\a;" + "x" * 33, HResult.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME),  # subqueue name too long
        ("host\\orders", HResult.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME),  # public queue
        ("orders", HResult.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME),
        ("system$;nope", HResult.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME),
        ("private$\\" + "x" * 125, HResult.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME),
        ("DIRECT=HTTP://host/msmq\\private$\\q", HResult.MQ_ERROR_ILLEGAL_FORMATNAME),
        ("PUBLIC=" + str(uuid.UUID(int=1)), HResult.MQ_ERROR_ILLEGAL_FORMATNAME),
        ("DIRECT=TCP:\\private$\\q", HResult.MQ_ERROR_ILLEGAL_FORMATNAME),
        ("PRIVATE=not-a-guid\\1", HResult.MQ_ERROR_ILLEGAL_FORMATNAME),
        ("DIRECT=OS:host\\orders", HResult.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME),
    ],
)
def test_errors(text: str, code: HResult) -> None:
    with pytest.raises(MQError) as info:
        parse_name(text)
    assert info.value.hresult == code
