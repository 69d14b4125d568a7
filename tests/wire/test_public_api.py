"""openmsmq.wire re-exports the format-name API; names it already used keep their meaning."""

from __future__ import annotations

import openmsmq.wire as wire
from openmsmq.wire import constants, format_name

#: format_name names that openmsmq.wire already exports with another meaning.
CLASHES = {"QueueFormatType", "ORDER_QUEUE_NAME"}


def test_format_names_are_re_exported() -> None:
    for name in format_name.__all__:
        if name in CLASHES:
            continue
        assert name in wire.__all__, name
        assert getattr(wire, name) is getattr(format_name, name), name


def test_clashing_names_keep_their_wire_meaning() -> None:
    assert wire.QueueFormatType is constants.QueueFormatType
    assert wire.ORDER_QUEUE_NAME == constants.ORDER_QUEUE_NAME == "PRIVATE$\\order_queue$"
    assert format_name.ORDER_QUEUE_NAME == "order_queue$"


def test_all_is_importable_and_unique() -> None:
    assert len(wire.__all__) == len(set(wire.__all__))
    for name in wire.__all__:
        assert getattr(wire, name) is not None, name
    parsed = wire.parse_format_name("DIRECT=TCP:10.0.0.2\\PRIVATE$\\orders")
    assert isinstance(parsed, wire.DirectFormatName)


def test_lazy_table_names_exactly_all() -> None:
    # openmsmq.wire imports its submodules on first use (PEP 562); its table of where
    # each name lives must list exactly the exported names.
    assert {n for names in wire._SUBMODULE_NAMES.values() for n in names} == set(wire.__all__)
    assert sorted(dir(wire)) == dir(wire) and set(wire.__all__) <= set(dir(wire))
