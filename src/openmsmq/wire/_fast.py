"""Fast construction of frozen value objects by the decoders (a private helper).

A ``@dataclass(frozen=True, slots=True)`` ``__init__`` stores every field through
``object.__setattr__`` (frozen classes override ``__setattr__`` to raise), which
costs about 0.1 µs per field: building the five values of one UserMessage took
about half of its decode time. The decoders have already validated what they
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
