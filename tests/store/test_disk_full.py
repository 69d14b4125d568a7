"""A full disk, for real: the data directory on a small tmpfs that the test mounts.

As found: with the disk full, receives, purges and queue deletions failed too (SQLite
writes a delete to its WAL), so an operator could not drain a queue to make room, a sender
could not release what its peer had OrderAck'ed, and the failures were not logged. With
``store.disk_reserve`` the store gives its reserve back on the first SQLITE_FULL and goes on
with everything that removes, refuses what adds, logs each failure with its cause, and
takes sends again once the space is back.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from openmsmq.errors import HResult, MQError
from openmsmq.net import MQQBNode, NetConfig
from openmsmq.qm import MessageRecord, QueueManager, QueueType
from openmsmq.qm.options import StoreOptions
from openmsmq.store.space import RESERVE_FILE
from openmsmq.transfer.engine import Transfer, TransferConfig
from tests.serve_proc import free_port

#: SQLite only: the SQLite file on a full disk and its space reserve (PostgreSQL's disk is
#: the database server's).
pytestmark = pytest.mark.sqlite_only

RESERVE = 1 << 20
BODY = os.urandom(2000)
Q = "private$\\q"


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """An 8 MiB tmpfs mounted for the test (root only), unmounted after it."""
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def _fill(qm: QueueManager, queue: str) -> int:
    """Send transactional messages until the store refuses; how many were committed."""
    for n in range(100_000):  # bounded: 8 MiB hold a few thousand
        try:
            with qm.begin() as t:
                qm.send(queue, MessageRecord(body=BODY), t)
        except MQError as exc:
            assert exc.hresult == HResult.MQ_ERROR_INSUFFICIENT_RESOURCES, exc
            return n
    raise AssertionError("the disk never filled")


def test_removals_run_on_a_full_disk_and_sends_come_back_with_the_space(
    small_disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data = small_disk / "data"
    with caplog.at_level(logging.WARNING, logger="openmsmq.store"):
        qm = QueueManager(data, store_options=StoreOptions(disk_reserve=RESERVE))
        try:
            qm.create_queue(Q, transactional=True)
            qm.create_queue("private$\\spare")
            qm.create_queue("private$\\purged")
            qm.send("private$\\purged", MessageRecord(body=b"p"))
            assert os.path.getsize(data / RESERVE_FILE) == RESERVE
            n = _fill(qm, Q)
            assert n > 100 and os.path.getsize(data / RESERVE_FILE) == 0
            # Sends are refused with a typed error that says why.
            with pytest.raises(MQError) as err:
                qm.send("private$\\spare", MessageRecord(body=b"late"))
            assert err.value.hresult == HResult.MQ_ERROR_INSUFFICIENT_RESOURCES
            assert "the disk is full" in str(err.value)
            # Everything that removes goes on: receive, purge, delete a queue, drain.
            assert qm.receive(Q, timeout=0).body == BODY
            assert qm.purge_queue("private$\\purged") == 1
            qm.delete_queue("private$\\spare")
            got = 1
            for _ in range(n):
                with qm.begin() as t:
                    batch = qm.receive_many(Q, 100, tx=t, timeout=0) if qm.get_queue(Q).msg_count else []
                got += len(batch)
                if not batch:
                    break
            assert got == n and qm.get_queue(Q).msg_count == 0  # nothing lost, nothing twice
            # The space the removals freed comes back: the reserve is taken again (the store
            # tries about once a second, before a write) and sends are accepted.
            for _ in range(100):  # bounded: a few seconds
                try:
                    with qm.begin() as t:
                        qm.send(Q, MessageRecord(body=b"after"), t)
                    break
                except MQError:
                    time.sleep(0.05)
            assert [m.body for m in qm.peek_range(Q, 0, 10)] == [b"after"]
            assert os.path.getsize(data / RESERVE_FILE) == RESERVE
        finally:
            qm.close()
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "is full (database or disk is full): released the 1,048,576-byte space reserve" in text
    assert "disk space of" in text and "is back" in text


def test_a_sender_whose_disk_filled_releases_what_its_peer_acknowledged(
    small_disk: Path, tmp_path: Path
) -> None:
    """A's outgoing queue filled A's disk while B was down. With the reserve, A releases
    every message B OrderAcks (a delete, written to the WAL of a full disk), so its outgoing
    queue empties and B has every message once, in order."""
    port = free_port()
    a_addr, b_addr = "127.0.0.1", "127.0.0.2"
    dest = f"DIRECT=TCP:{b_addr}\\PRIVATE$\\orders"

    async def node(qm: QueueManager, address: str) -> MQQBNode:
        loop = asyncio.get_running_loop()
        transfer = Transfer(qm, TransferConfig(local_addresses=(address,)), loop.time())
        n = MQQBNode(transfer, NetConfig(host=address, port=port, backoff_min=0.05, backoff_max=0.2,
                                         poll_interval=0.02))  # fmt: skip
        await n.start()
        return n

    async def main() -> None:
        qa = QueueManager(
            small_disk / "a", integrity_check=False, store_options=StoreOptions(disk_reserve=RESERVE)
        )
        qb = QueueManager(tmp_path / "b", integrity_check=False)
        qb.create_queue("private$\\orders", transactional=True)
        try:
            a = await node(qa, a_addr)
            n = _fill(qa, dest)  # B is down: everything waits in A's outgoing queue
            assert shutil.disk_usage(small_disk).free < 2 * RESERVE
            b = await node(qb, b_addr)
            loop = asyncio.get_running_loop()
            end = loop.time() + 60
            outgoing = n
            while loop.time() < end:
                outgoing = sum(
                    r.msg_count
                    for r in qa.list_queues(include_system=True)
                    if r.queue_type == QueueType.OUTGOING
                )
                if outgoing == 0 and qb.get_queue("private$\\orders").msg_count == n:
                    break
                await asyncio.sleep(0.05)
            assert outgoing == 0, f"{outgoing} of {n} still in A's outgoing queue"
            bodies = [m.body for m in qb.peek_range("private$\\orders", 0, n + 10)]
            assert len(bodies) == n and set(bodies) == {BODY}
            await b.stop()
            await a.stop()
        finally:
            qa.close()
            qb.close()

    asyncio.run(asyncio.wait_for(main(), 120))
