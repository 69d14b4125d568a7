"""docs/architecture.md draws the layer table of tests/test_layers.py: its table of allowed
imports and its mermaid graph list exactly the packages and dependencies of ``MAY_IMPORT``,
so the picture a newcomer reads is the rule ``make test`` enforces."""

from __future__ import annotations

import re
from pathlib import Path

from tests.test_layers import BASE, MAY_IMPORT

DOC = Path(__file__).resolve().parent.parent / "docs" / "architecture.md"

#: The rows of MAY_IMPORT that are packages of layers (the base modules and the root package
#: are described in prose).
PACKAGES = [name for name in MAY_IMPORT if name not in BASE | {"__main__"}]


def expected(name: str) -> frozenset[str]:
    """The packages ``name`` may import, base modules left out unless the row lacks some."""
    allowed = MAY_IMPORT[name]
    return allowed - BASE if allowed >= BASE else allowed


def doc_table(text: str) -> dict[str, frozenset[str]]:
    start = text.index("<!-- may-import:begin -->")
    end = text.index("<!-- may-import:end -->")
    rows: dict[str, frozenset[str]] = {}
    for line in text[start:end].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 2 or not cells[0].startswith("`"):
            continue
        rows[cells[0].strip("`")] = frozenset(re.findall(r"`([a-z_]+)`", cells[1]))
    return rows


def doc_graph(text: str) -> dict[str, frozenset[str]]:
    block = re.search(r"```mermaid\n(.*?)```", text, re.S)
    assert block is not None, "docs/architecture.md has no mermaid graph"
    edges: dict[str, set[str]] = {}
    for line in block.group(1).splitlines():
        line = line.strip()
        if not line or line.startswith("flowchart"):
            continue
        source, _, targets = line.partition("-->")
        edges.setdefault(source.strip(), set())
        if targets:
            edges[source.strip()].update(t.strip() for t in targets.split("&"))
    return {k: frozenset(v) for k, v in edges.items()}


def test_the_table_is_may_import() -> None:
    table = doc_table(DOC.read_text())
    assert table == {name: expected(name) for name in PACKAGES}


def test_the_graph_is_may_import() -> None:
    graph = doc_graph(DOC.read_text())
    assert graph == {name: expected(name) - BASE for name in PACKAGES}


def test_a_changed_rule_shows() -> None:
    """The parsers see a dependency the doc lacks (the check can fail)."""
    text = DOC.read_text().replace("| `spark` | `client`, `remote` |", "| `spark` | `client` |")
    assert doc_table(text)["spark"] != expected("spark")
