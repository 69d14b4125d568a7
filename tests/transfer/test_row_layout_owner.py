"""The stored row's byte layout has one owner, ``store/``: the transfer reads rows through
``store/rows.py`` and ``store/packet_rows.py`` and never unpacks ``props`` itself; the
remote-read service's packed form takes a row's fields from ``store/rows.py`` too."""

from __future__ import annotations

import ast
from pathlib import Path

import openmsmq.remote
import openmsmq.transfer

TRANSFER = Path(openmsmq.transfer.__file__).parent
REMOTE = Path(openmsmq.remote.__file__).parent


#: What reading a byte layout takes: a struct format of its own, unpacking, packing.
LAYOUT_CALLS = frozenset({"Struct", "unpack", "unpack_from", "pack", "pack_into"})


def _layout_uses(path: Path) -> list[str]:
    """The imports of store/props.py and the struct calls in ``path``."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            # ``from openmsmq.store.props import X`` and ``from openmsmq.store import props``
            modules = [node.module or ""] + [f"{node.module}.{a.name}" for a in node.names]
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


def test_remote_does_not_import_the_props_layout() -> None:
    """remote/ packs its own wire format (struct calls of its own are fine there), but
    the stored ``props`` layout is read by store/rows.py alone."""
    offenders = {
        path.name: [f for f in _layout_uses(path) if "store.props" in f]
        for path in sorted(REMOTE.glob("*.py"))
    }
    assert {name: found for name, found in offenders.items() if found} == {}
