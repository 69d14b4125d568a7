"""Subqueue naming rules: canonical keys, and every bad name refused with a typed error."""

from __future__ import annotations

import pytest

from openmsmq.errors import HResult, MQError
from openmsmq.wire.subqueues import check_subqueue_name, split_key, subqueue_key


def test_keys() -> None:
    assert subqueue_key("private$\\orders", "Poison") == "private$\\orders;poison"
    assert split_key("private$\\orders;poison") == ("private$\\orders", "poison")
    assert split_key("private$\\orders") == ("private$\\orders", None)
    assert split_key("private$\\orders;journal") == ("private$\\orders;journal", None)
    assert split_key("system$;deadletter") == ("system$;deadletter", None)
    assert check_subqueue_name("x" * 32) == "x" * 32


@pytest.mark.parametrize(
    "name", ["", "x" * 33, "a;b", "a\\b", "a+b", "a,b", 'a"b', "a b", "a\x00", "journal", "DeadLetter"]
)
def test_bad_names(name: str) -> None:
    with pytest.raises(MQError) as err:
        check_subqueue_name(name)
    assert err.value.hresult == HResult.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME
