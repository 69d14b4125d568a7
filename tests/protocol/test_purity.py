"""protocol/ is sans-I/O: it never imports a clock, sockets, SQL, asyncio or threads."""

from __future__ import annotations

import ast
from pathlib import Path

import openmsmq.protocol

FORBIDDEN = {"time", "socket", "sqlite3", "asyncio", "threading", "selectors", "datetime", "random"}


def test_protocol_imports_no_io_modules() -> None:
    root = Path(openmsmq.protocol.__file__).parent
    files = sorted(root.glob("*.py"))
    assert len(files) >= 4
    for path in files:
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] not in FORBIDDEN, f"{path.name} imports {name}"
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("openmsmq."):
                layer = node.module.split(".")[1]
                assert layer in {"errors", "wire", "protocol"}, f"{path.name} imports upward: {node.module}"
