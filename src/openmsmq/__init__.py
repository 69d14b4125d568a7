"""openmsmq: transactional MSMQ-style queue manager."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from openmsmq.client import connect


def __getattr__(name: str) -> Any:
    # ``openmsmq.connect`` is imported on first use so that ``import openmsmq`` stays light.
    if name == "connect":
        from openmsmq.client import connect

        return connect
    raise AttributeError(f"module 'openmsmq' has no attribute {name!r}")


__all__ = ["__version__", "connect"]
