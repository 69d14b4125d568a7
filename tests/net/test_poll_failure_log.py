"""The MS-MQQB node's poll of the outgoing queues while its store is out of reach (a real
PostgreSQL stopped, then started again): one traceback for the whole outage, one-line
counts after it, and a line when polling works again; not a traceback per poll."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest

from openmsmq.net import MQQBNode, NetConfig
from openmsmq.qm.manager import QueueManager
from openmsmq.store.pg.db import PgStore
from openmsmq.transfer.engine import Transfer, TransferConfig
from tests.pgserver import PgServer
from tests.serve_proc import A, free_port

POLLING = "polling the outgoing queues"


def _polling(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "openmsmq.net" and r.getMessage().startswith(POLLING)]


async def _until(pred, what: str, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not pred():
        assert loop.time() < deadline, what
        await asyncio.sleep(0.02)


def test_a_store_outage_logs_one_traceback_then_counts_then_recovery(
    tmp_path: Path, pg_server: PgServer, pg_dsn: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="openmsmq.net")

    async def main() -> None:
        qm = QueueManager(tmp_path / "qm", store=PgStore(pg_dsn, reconnect_wait=0.2))
        transfer = Transfer(qm, TransferConfig(local_addresses=(A,)), asyncio.get_running_loop().time())
        # Every failure after the first is summed up at once (interval 0): the records
        # show what each failure logged, whatever the timing.
        node = MQQBNode(
            transfer, NetConfig(host=A, port=free_port(A), poll_interval=0.01, failure_log_interval=0)
        )
        await node.start()
        try:
            pg_server.stop_immediate()
            try:
                await _until(lambda: len(_polling(caplog)) >= 6, "the polls did not fail")
            finally:
                pg_server.restart()
            await _until(lambda: "works again" in _polling(caplog)[-1].getMessage(), "no recovery line")
        finally:
            await node.stop()
            qm.close()

    asyncio.run(main())
    records = _polling(caplog)
    assert records[0].getMessage() == f"{POLLING} failed" and records[0].exc_info is not None
    summaries, recovered = records[1:-1], records[-1]
    assert len(summaries) >= 5
    assert all(r.exc_info is None and "still failing: 1 more failure(s)" in r.getMessage() for r in summaries)
    assert all("database unreachable" in r.getMessage() for r in summaries)  # the last error, one line
    failures = 1 + len(summaries)
    assert recovered.exc_info is None and recovered.levelno == logging.WARNING
    assert recovered.getMessage().startswith(f"{POLLING} works again after {failures} failure(s)")
