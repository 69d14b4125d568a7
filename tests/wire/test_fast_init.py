"""fast_init: an __init__ for frozen slots dataclasses equivalent to the generated one."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from openmsmq.store.records import MessageRecord
from openmsmq.wire.fast import fast_init


@dataclasses.dataclass(frozen=True, slots=True)
class _Sample:
    required: int
    label: str = "x"
    tags: list[str] = dataclasses.field(default_factory=list)


_reference_init = _Sample.__init__
_Sample.__init__ = fast_init(_Sample)  # type: ignore[method-assign]


def _reference(*args: object, **kwargs: object) -> _Sample:
    obj = object.__new__(_Sample)
    _reference_init(obj, *args, **kwargs)  # type: ignore[arg-type]
    return obj


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        ((1,), {}),
        ((1, "y"), {}),
        ((1, "y", ["a"]), {}),
        ((), {"required": 2, "tags": ["b"]}),
        ((3,), {"label": ""}),
    ],
)
def test_same_values_as_the_generated_init(args: tuple[object, ...], kwargs: dict[str, object]) -> None:
    got = _Sample(*args, **kwargs)  # type: ignore[arg-type]
    assert type(got) is _Sample
    assert got == _reference(*args, **kwargs)
    # dataclasses.replace goes through __init__ too.
    assert dataclasses.replace(got, label="q") == _reference(got.required, "q", got.tags)


def test_default_factory_called_per_instance() -> None:
    a, b = _Sample(1), _Sample(2)
    assert a.tags == [] and a.tags is not b.tags


def test_still_frozen_and_errors_as_the_generated_init() -> None:
    s = _Sample(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.label = "z"  # type: ignore[misc]
    with pytest.raises(TypeError):
        _Sample()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        _Sample(1, nope=2)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        _Sample(1, "a", [], 4)  # type: ignore[call-arg]


def test_subclass_built_by_the_generated_init() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Sub(_Sample):
        extra: int = 7

    s = Sub(1, extra=3)
    assert type(s) is Sub and (s.required, s.extra, s.tags) == (1, 3, [])


def test_message_equal_to_the_generated_init() -> None:
    src = uuid.UUID(int=5)
    fields = {"body": b"abc", "label": "l", "priority": 3, "id_lineage": src, "transactional": True}
    m = MessageRecord(**fields)  # type: ignore[arg-type]
    ref = object.__new__(MessageRecord)
    for f in dataclasses.fields(MessageRecord):
        value = fields.get(f.name, f.default if f.default is not dataclasses.MISSING else f.default_factory())  # type: ignore[misc]
        object.__setattr__(ref, f.name, value)
    assert type(m) is MessageRecord and m == ref and hash(m) == hash(ref)
    assert dataclasses.replace(m, label="x").label == "x"
    assert MessageRecord(b"positional").body == b"positional"


def test_refuses_classes_whose_init_does_more() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Post:
        a: int

        def __post_init__(self) -> None:
            pass

    @dataclasses.dataclass(frozen=True, slots=True)
    class KwOnly:
        a: int = dataclasses.field(kw_only=True)

    for cls in (Post, KwOnly):
        with pytest.raises(TypeError):
            fast_init(cls)
