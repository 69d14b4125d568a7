"""The stored row's byte layout has one owner, ``store/``: the transfer reads rows through
``store/rows.py`` and ``store/packet_rows.py`` and never unpacks ``props`` itself."""

from __future__ import annotations

import ast
from pathlib import Path

import openmsmq.transfer

TRANSFER = Path(openmsmq.transfer.__file__).parent


#: What reading a byte layout takes: a struct format of its own, unpacking, packing.
LAYOUT_CALLS = frozenset({"Struct", "unpack", "unpack_from", "pack", "pack_into"})


def _layout_uses(path: Path) -> list[str]:
    """The imports of store/props.py and the struct calls in ``path``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            modules = [node.module or ""]
        elif isinstance(node, ast.Import):
            modules = [a.name for a in node.names]
        else:
            modules = []
        if "openmsmq.store.props" in modules:
            found.append(f"line {getattr(node, 'lineno', 0)}: imports openmsmq.store.props")
        elif isinstance(node, ast.Attribute) and node.attr in LAYOUT_CALLS:
            found.append(f"line {node.lineno}: .{node.attr}")
    return found


def test_transfer_does_not_know_the_props_layout() -> None:
    offenders = {path.name: _layout_uses(path) for path in sorted(TRANSFER.glob("*.py"))}
    assert {name: found for name, found in offenders.items() if found} == {}
