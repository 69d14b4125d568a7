"""One headless Chromium for every browser test of the console (starting one takes a
while); each test module signs in on its own."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .browser import chromium


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    yield from chromium()
