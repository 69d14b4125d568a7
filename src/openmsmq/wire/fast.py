"""Fast construction of frozen value objects by the decoders and the store.

A ``@dataclass(frozen=True, slots=True)`` ``__init__`` stores every field through
``object.__setattr__`` (frozen classes override ``__setattr__`` to raise), a cost per
field that made building the values of one UserMessage a large part of its decode
time. The decoders have already validated what they
pass, so they build values with :func:`fast_constructor` instead.

The constructor fills a *builder* instance: a plain class with exactly the same
``__slots__`` as the frozen class, whose attribute stores are ordinary slot
stores, then assigns ``__class__`` to the frozen class. CPython allows that
assignment only between layout-compatible classes (same base, same slots), and
the result is an ordinary instance of the frozen class: equality, hashing, repr,
pickling and immutability (assigning a field raises
:class:`dataclasses.FrozenInstanceError`) are those of the class itself. When the
interpreter refuses the ``__class__`` assignment, :func:`fast_constructor` falls
back to ``object.__new__`` plus the slots' member descriptors, which is still
about twice as fast as the generated ``__init__``.

What is skipped is only what ``__init__`` would add to the stores: defaults (all
fields must be passed, in field order, unless ``fields`` names the ones passed: the
others then take their plain declared defaults, stored as constants). Classes with a ``__post_init__`` are
refused, so a check added there later cannot be bypassed unnoticed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

__all__ = ["fast_constructor"]

_T = TypeVar("_T")


def _source(names: list[str], swap: bool, params: list[str]) -> str:
    """Python source of ``make(<params>)`` for :func:`fast_constructor` (others: ``_d_<name>``)."""
    lines = [f"def make({', '.join(params)}):"]
    values = {name: name if name in params else f"_d_{name}" for name in names}
    if swap:
        lines.append("    self = _new(_Builder)")
        lines.extend(f"    self.{name} = {values[name]}" for name in names)
        lines.append("    self.__class__ = _cls")
    else:
        lines.append("    self = _new(_cls)")
        lines.extend(f"    _set_{name}(self, {values[name]})" for name in names)
    lines.append("    return self")
    return "\n".join(lines) + "\n"


def fast_constructor(
    cls: type[_T], *, swap: bool = True, fields: Sequence[str] | None = None
) -> Callable[..., _T]:
    """A function ``make(*fields)`` returning an instance of the frozen slots dataclass ``cls``.

    Every field must be passed, positionally, in declaration order; nothing is
    validated. With ``fields``, ``make`` takes exactly those fields, positionally in
    that order, and the others take their declared defaults (a field without a plain
    default, e.g. one with a ``default_factory``, must be listed). ``swap=False``
    forces the member-descriptor strategy (tests use it to cover the fallback).
    """
    if not dataclasses.is_dataclass(cls) or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__} is not a slots dataclass")
    if hasattr(cls, "__post_init__"):
        # Its checks would be skipped silently; decode such a class through __init__.
        raise TypeError(f"{cls.__name__} has a __post_init__ that a fast constructor would skip")
    names = [f.name for f in dataclasses.fields(cls)]
    slots = tuple(cls.__dict__["__slots__"])
    if sorted(names) != sorted(slots):
        raise TypeError(f"{cls.__name__}: fields {names} do not match slots {slots}")
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    params = names if fields is None else list(fields)
    if len(set(params)) != len(params) or not set(params) <= set(names):
        raise TypeError(f"{cls.__name__}: fields {params} are not distinct fields of the class")
    for f in dataclasses.fields(cls):
        if f.name not in params:
            if f.default is dataclasses.MISSING:
                raise TypeError(f"{cls.__name__}.{f.name} has no plain default: pass it in fields")
            namespace[f"_d_{f.name}"] = f.default
    if swap:
        builder = type(f"_{cls.__name__}Builder", (), {"__slots__": slots, "__module__": cls.__module__})
        namespace["_Builder"] = builder
        exec(_source(names, True, params), namespace)  # a fixed template over field names
        make: Callable[..., _T] = namespace["make"]
        try:
            probe = make(*params)
        except TypeError:  # this interpreter refuses the __class__ assignment
            return fast_constructor(cls, swap=False, fields=fields)
        if type(probe) is not cls or [getattr(probe, n) for n in params] != params:
            return fast_constructor(cls, swap=False, fields=fields)
        return make
    for name in names:
        namespace[f"_set_{name}"] = cls.__dict__[name].__set__
    exec(_source(names, False, params), namespace)  # a fixed template over field names
    fallback: Callable[..., _T] = namespace["make"]
    return fallback


def fast_init(cls: type[Any]) -> Callable[..., None]:
    """An ``__init__`` for the frozen slots dataclass ``cls`` equivalent to the generated one
    (same parameters, positional or keyword, in field order; the same defaults and default
    factories) that stores the fields as plain slot stores: the instance takes a builder
    class with the same slots while the fields are set, then ``cls`` back (the same
    ``__class__`` assignment as :func:`fast_constructor`). The generated ``__init__`` calls
    ``object.__setattr__`` per field; for a class of many fields built by applications
    (``Message``: about 45) that was most of the construction's cost.

    An instance of a subclass is built by the generated ``__init__``. Returns ``cls``'s own
    ``__init__`` unchanged when this interpreter refuses the assignment; refuses
    (``TypeError``) classes with ``__post_init__``, keyword-only, init=False or InitVar
    fields, whose generated ``__init__`` does more than store the fields."""
    if not dataclasses.is_dataclass(cls) or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__} is not a slots dataclass")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has a __post_init__")
    fields = dataclasses.fields(cls)
    names = [f.name for f in fields]
    slots = tuple(cls.__dict__["__slots__"])
    if sorted(names) != sorted(slots) or any(not f.init or f.kw_only is True for f in fields):
        raise TypeError(f"{cls.__name__}: fields {names} are not plain init fields matching its slots")
    original = cls.__init__
    builder = type(f"_{cls.__name__}InitBuilder", (), {"__slots__": slots, "__module__": cls.__module__})
    namespace: dict[str, Any] = {
        "_cls": cls, "_Builder": builder, "_set_class": object.__setattr__, "_orig": original,
        "_MISSING": object(),
    }  # fmt: skip
    params, factories = [], []
    for f in fields:
        if f.default is not dataclasses.MISSING:
            namespace[f"_d_{f.name}"] = f.default
            params.append(f"{f.name}=_d_{f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"_f_{f.name}"] = f.default_factory
            params.append(f"{f.name}=_MISSING")
            factories.append(f"    if {f.name} is _MISSING:\n        {f.name} = _f_{f.name}()")
        else:
            params.append(f.name)
    lines = [f"def __init__(self, {', '.join(params)}):"] if params else ["def __init__(self):"]
    lines += factories
    lines.append("    if type(self) is not _cls:")
    lines.append(f"        _orig(self, {', '.join(names)})")
    lines.append("        return")
    lines.append("    _set_class(self, '__class__', _Builder)")
    lines.extend(f"    self.{name} = {name}" for name in names)
    lines.append("    self.__class__ = _cls")
    exec("\n".join(lines) + "\n", namespace)  # a fixed template over field names
    init: Callable[..., None] = namespace["__init__"]
    try:
        probe = object.__new__(cls)
        init(probe, *[object() for _ in names])
    except TypeError:  # this interpreter refuses the __class__ assignment
        return original
    if type(probe) is not cls:
        return original
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = original.__doc__
    return init


__all__ += ["fast_init"]


def slot_builder(cls: type[Any]) -> type | None:
    """The builder class :func:`fast_constructor` fills, for a decoder that builds many
    instances of the frozen slots dataclass ``cls`` in one loop without a call each:
    ``obj = object.__new__(builder)``, one plain slot store per field, then
    ``obj.__class__ = cls``. Every field must be stored (an unset slot raises
    AttributeError when read). None when this interpreter refuses the ``__class__``
    assignment; the caller then builds through :func:`fast_constructor`."""
    if not dataclasses.is_dataclass(cls) or "__slots__" not in cls.__dict__:
        raise TypeError(f"{cls.__name__} is not a slots dataclass")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"{cls.__name__} has a __post_init__ that a builder would skip")
    names = [f.name for f in dataclasses.fields(cls)]
    slots = tuple(cls.__dict__["__slots__"])
    if sorted(names) != sorted(slots):
        raise TypeError(f"{cls.__name__}: fields {names} do not match slots {slots}")
    builder = type(f"_{cls.__name__}SlotBuilder", (), {"__slots__": slots, "__module__": cls.__module__})
    probe: Any = object.__new__(builder)
    for name in names:
        setattr(probe, name, name)
    try:
        probe.__class__ = cls
    except TypeError:  # this interpreter refuses the __class__ assignment
        return None
    if type(probe) is not cls or [getattr(probe, n) for n in names] != names:
        return None
    return builder


__all__ += ["slot_builder"]
