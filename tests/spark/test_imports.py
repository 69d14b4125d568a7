"""What Spark's Python processes load of openmsmq: only what the data source uses.

Spark starts a Python process for every streaming query (the source runner, which
imports :mod:`openmsmq.spark.source` and opens the gRPC backend) and planner and
executor workers that do the same; whatever these imports load is paid before a query's
first trigger (docs/spark.md, "Query start"). Each check runs in a fresh interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: Never needed by the data source: the store (and SQLite), the queue manager, the
#: MS-MQQB codecs and transfer, the client's connection API and in-process transport.
NOT_LOADED = (
    "sqlite3",
    "openmsmq.store",
    "openmsmq.qm",
    "openmsmq.protocol",
    "openmsmq.net",
    "openmsmq.wire.packets",
    "openmsmq.wire.message",
    "openmsmq.client.connection",
    "openmsmq.client.inproc",
)


def _loaded_after(*statements: str) -> list[str]:
    code = "\n".join([*statements, "import json, sys", "print(json.dumps(sorted(sys.modules)))"])
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded: list[str] = json.loads(out.stdout)
    return loaded


def _offending(loaded: list[str]) -> list[str]:
    return [m for m in loaded if any(m == n or m.startswith(n + ".") for n in NOT_LOADED)]


def test_source_runner_imports_load_neither_store_nor_queue_manager() -> None:
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    loaded = _loaded_after(
        "import openmsmq.spark.source",  # the runner unpickles the data source class
        "import openmsmq.client.grpc_transport",  # open_backend connects
        "import openmsmq.spark.packed_arrow",  # an executor's read()
    )
    assert "openmsmq.spark.source" in loaded
    assert _offending(loaded) == []


def test_client_types_and_messages_load_neither_store_nor_connection() -> None:
    loaded = _loaded_after("from openmsmq.client.types import LookupRange, RangeQuery, INFINITE",
                           "import openmsmq.client.message")  # fmt: skip
    assert _offending(loaded) == []


def test_public_client_names_still_import() -> None:
    loaded = _loaded_after("from openmsmq.client import connect, Access, OutgoingMessage, Seek, Message")
    assert "openmsmq.client.connection" in loaded
