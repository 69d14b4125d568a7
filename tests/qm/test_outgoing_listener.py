"""QueueManager.add_outgoing_listener: the transfer driver's wake-up after a commit into an
outgoing queue (docs/transfer.md, "Load")."""

from __future__ import annotations

from pathlib import Path

from openmsmq.qm.manager import QueueManager
from openmsmq.store.records import MessageRecord

DEST = "DIRECT=TCP:127.0.0.2\\PRIVATE$\\orders"


def test_commits_into_outgoing_queues_call_the_listener_with_the_queue(tmp_path: Path) -> None:
    with QueueManager(tmp_path / "qm", integrity_check=False) as qm:
        qm.create_queue("private$\\local", transactional=True)
        calls: list[int] = []
        qm.add_outgoing_listener(calls.append)
        tx = qm.begin()
        qm.send("private$\\local", MessageRecord(body=b"here"), tx=tx)
        tx.commit()
        assert calls == []  # a local queue is no transfer's business
        tx = qm.begin()
        qm.send_many(DEST, [MessageRecord(body=b"a"), MessageRecord(body=b"b")], tx)
        assert calls == []  # nothing before the commit
        tx.commit()
        outgoing = [r.queue_id for r in qm.list_queues(include_system=True) if r.queue_type == 4]
        assert calls == outgoing and len(outgoing) == 1
        qm.send(DEST, MessageRecord(body=b"c"))  # outside a transaction (a non-transactional message)
        assert calls == outgoing * 2
        qm.remove_outgoing_listener(calls.append)
        qm.remove_outgoing_listener(calls.append)  # twice: no error
        tx = qm.begin()
        qm.send(DEST, MessageRecord(body=b"d"), tx=tx)
        tx.commit()
        assert calls == outgoing * 2
