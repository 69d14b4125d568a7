"""How a configuration key is declared: a dataclass field of a section whose ``metadata``
holds its kind, documentation, bounds, choices and spec section.

:func:`key` declares one; :func:`key_meta` reads a declaration back for the loader, and
:class:`KeyInfo` describes a key for ``docs/configuration.md`` and ``config show`` (its
environment variable and flag spellings). The sections themselves are declared in
:mod:`openmsmq.config.sections`. Only the standard library is imported here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

__all__ = ["ENV_PREFIX", "KeyInfo", "key", "key_meta"]

ENV_PREFIX = "OPENMSMQ_"


def key(
    default: Any,
    kind: str,
    doc: str,
    *,
    lo: float | None = None,
    hi: float | None = None,
    choices: tuple[str, ...] = (),
    spec: str = "",
) -> Any:
    """Declare a configuration key: a dataclass field whose metadata drives the loader."""
    meta = {"kind": kind, "doc": doc, "lo": lo, "hi": hi, "choices": choices, "spec": spec}
    return field(default=default, metadata=meta)


def key_meta(section: type[Any], name: str) -> Mapping[str, Any] | None:
    """The declaration of key ``name`` of the section dataclass ``section``; None if it has none."""
    for f in fields(section):
        if f.name == name:
            return f.metadata
    return None


@dataclass(frozen=True)
class KeyInfo:
    """One configuration key, for docs and ``config show``."""

    section: str
    name: str
    kind: str
    default: Any
    doc: str
    spec: str

    @property
    def dotted(self) -> str:
        """``section.name``."""
        return f"{self.section}.{self.name}"

    @property
    def env_var(self) -> str:
        """``OPENMSMQ_SECTION_NAME``."""
        return f"{ENV_PREFIX}{self.section.upper()}_{self.name.upper()}"

    @property
    def flag(self) -> str:
        """``--section-name``, the CLI flag spelling."""
        return "--" + self.dotted.replace(".", "-").replace("_", "-")
