"""Shared fixture of the acknowledgment tests: queue managers wired in memory (the
transfer tests' ``net``)."""

from __future__ import annotations

from tests.transfer.conftest import net

__all__ = ["net"]
