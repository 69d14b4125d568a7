"""Shared fixture of the transfer tests: queue managers wired in memory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .harness import Clock, Net


@pytest.fixture
def net(tmp_path: Path) -> Iterator[Net]:
    """A :class:`Net` on a literal clock; its queue managers are closed afterwards."""
    n = Net(tmp_path, Clock())
    yield n
    for node in n.nodes.values():
        node.qm.close()
