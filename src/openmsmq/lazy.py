"""Names of a package loaded from its submodules on first use (PEP 562).

``openmsmq.wire`` and ``openmsmq.client`` export many names from their submodules; a
process that needs one submodule (a Spark worker, the store) should not import them all.
Each package lists where its names live and takes ``__getattr__`` / ``__dir__`` from
:func:`lazy_exports`.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any


def lazy_exports(
    package: str, submodule_names: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: a name listed under a submodule is
    imported from ``package.<submodule>`` on first access and kept in the package's
    namespace, so later look-ups do not come back here."""
    where = {name: module for module, names in submodule_names.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        vars(sys.modules[package])[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__
