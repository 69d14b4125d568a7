"""Test support for highly available queue managers: a QM on a real PostgreSQL served by
several ``openmsmq serve`` processes (same DSN, same listen address), and looks at its
database. Every wait is bounded."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Any

import psycopg

from openmsmq.qm.manager import QueueManager
from openmsmq.runtime import live_runtime
from openmsmq.store.pg.db import PgStore
from tests.serve_proc import ServeProcess

#: Lease timing of the test nodes (short, so that takeovers are quick).
HA_ENV = {
    "OPENMSMQ_HA_LEASE_DURATION": "2",
    "OPENMSMQ_HA_RENEW_INTERVAL": "0.3",
    "OPENMSMQ_HA_POLL_INTERVAL": "0.2",
}


def create_pg_qm(dsn: str, scratch: Path, *queues: str) -> None:
    """Create the QM in the database ``dsn`` with transactional ``queues``."""
    with QueueManager(scratch, store=PgStore(dsn)) as qm:
        for q in queues:
            qm.create_queue(q, transactional=True)


def ha_node(root: Path, name: str, address: str, port: int, dsn: str, **env: str) -> ServeProcess:
    """One serve process of the QM in ``dsn`` (its own data directory for runtime files)."""
    full = {"OPENMSMQ_STORE_BACKEND": "postgresql", "OPENMSMQ_STORE_DSN": dsn, **HA_ENV, **env}
    return ServeProcess(root / name, address, port, root / f"{name}.log", env=full)


def role(node: ServeProcess) -> dict[str, Any] | None:
    """The ``ha`` block of a running node's runtime document (None: not running)."""
    info = live_runtime(node.data_dir)
    if info is None:
        return None
    ha = info.get("ha")
    return ha if isinstance(ha, dict) else None


def wait_role(
    node: ServeProcess, wanted: str, timeout: float = 30.0, epoch: int | None = None
) -> dict[str, Any]:
    """Wait until ``node`` reports role ``wanted`` (and lease ``epoch``); its ha block."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = role(node)
        if got is not None and got.get("role") == wanted and (epoch is None or got.get("epoch") == epoch):
            return got
        time.sleep(0.02)
    raise AssertionError(
        f"{node.data_dir.name} is not {wanted}: {role(node)}\n{node.log.read_text()[-3000:]}"
    )


def accepts(address: str, port: int) -> bool:
    """Something accepts TCP connections on ``address:port``."""
    try:
        with socket.create_connection((address, port), timeout=0.2):
            return True
    except OSError:
        return False


def queue_bodies(dsn: str, queue: str) -> list[bytes]:
    """The bodies in ``queue`` of the QM in ``dsn``, in LookupIdentifier order."""
    with psycopg.connect(dsn, connect_timeout=10) as conn:
        rows = conn.execute(
            "SELECT m.body FROM messages m JOIN queues q ON q.queue_id = m.queue_id"
            " WHERE q.name = %s ORDER BY m.lookup_id",
            (queue,),
        ).fetchall()
    return [bytes(r[0]) for r in rows]


def store_state(dsn: str) -> tuple[int, int, int, int]:
    """(lease epoch, messages stored, SequentialID, messages counted by the queues), read
    in one statement: what any commit of the QM changes."""
    with psycopg.connect(dsn, connect_timeout=10, autocommit=True) as conn:
        row = conn.execute(
            "SELECT (SELECT max(epoch) FROM qm_lease), (SELECT count(*) FROM messages),"
            " (SELECT sequential_id FROM qm_state WHERE id = 1),"
            " (SELECT coalesce(sum(msg_count), 0) FROM queues)"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2]), int(row[3])


def dump(*nodes: ServeProcess) -> str:
    """The last lines of each node's log (for failure messages)."""
    return "\n".join(f"--- {n.log.name}\n{n.log.read_text()[-2500:]}" for n in nodes if n.log.exists())


def runtime_json(node: ServeProcess) -> dict[str, Any]:
    """The node's runtime document as written."""
    return dict(json.loads((node.data_dir / "runtime.json").read_text()))
