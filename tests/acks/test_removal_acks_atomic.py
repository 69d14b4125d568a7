"""Acknowledgments of removals other than receives are written in the removal's own
transaction: purge (NACK_Q_PURGED), a PurgePending message deleted at its abort, queue
deletion (NACK_Q_DELETED) and TimeToBeReceived expiry (NACK_RECEIVE_TIMEOUT) — so a
crash can never keep the removal and lose its acknowledgment (MS-MQQB 3.1.7.2).

Two QMs wired in memory (tests/transfer/harness.py): A sends to B with an admin queue at
A; the acknowledgments raised at B are counted in B's store commits: the removal and its
acknowledgments are one COMMIT. A failing acknowledgment insert undoes the removal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from openmsmq.errors import MQError
from openmsmq.qm.manager import QueueManager
from openmsmq.store import ops, queues
from openmsmq.store.records import MessageRecord
from openmsmq.wire.constants import AckRequest, MessageClass
from tests.acks.nodes import acked_node
from tests.transfer.harness import Net, Node

A, B = "127.0.0.1", "127.0.0.2"
ADMIN = f"DIRECT=TCP:{A}\\private$\\admin"
ORDERS = f"DIRECT=TCP:{B}\\private$\\orders"
NR = AckRequest.NEG_RECEIVE


def _pair(net: Net) -> tuple[Node, Node]:
    a = acked_node(net, A)
    b = acked_node(net, B)
    a.qm.create_queue("private$\\admin")
    b.qm.create_queue("private$\\orders", transactional=True, journal=False)
    return a, b


def _send(a: Node, n: int = 2, **attrs: object) -> None:
    with a.qm.begin() as tx:
        for i in range(n):
            m = MessageRecord(body=b"o%d" % i, admin_queue=ADMIN, ack_flags=NR, **attrs)  # type: ignore[arg-type]
            a.qm.send(ORDERS, m, tx)


def _commits(qm: QueueManager) -> list[list[str]]:
    """Record the statements of every transaction of ``qm``'s store writer from now on."""
    txs: list[list[str]] = []

    def trace(sql: str) -> None:
        if sql.startswith("BEGIN"):
            txs.append([])
        elif txs:
            txs[-1].append(sql)

    qm.store._conn.set_trace_callback(trace)
    return txs


def _writes(txs: list[list[str]]) -> list[list[str]]:
    """The transactions that changed something (opening an existing outgoing queue is a
    transaction that only reads)."""
    return [t for t in txs if any(s.split(None, 1)[0] in ("INSERT", "UPDATE", "DELETE") for s in t)]


def _admin_classes(a: Node) -> list[int]:
    return [m.message_class for m in a.qm.peek_range("private$\\admin", 0, 100)]


def _purge(b: Node) -> None:
    assert b.qm.purge_queue("private$\\orders") == 2


def _delete(b: Node) -> None:
    b.qm.delete_queue("private$\\orders")


def _expire(b: Node) -> None:
    assert b.qm.expire(b.qm.clock() + 120) == 2


REMOVALS: dict[str, tuple[Callable[[Node], None], int, dict[str, object]]] = {
    "purge": (_purge, MessageClass.NACK_Q_PURGED, {}),
    "delete": (_delete, MessageClass.NACK_Q_DELETED, {}),
    "expire": (_expire, MessageClass.NACK_RECEIVE_TIMEOUT, {"time_to_be_received": 60}),
}


@pytest.mark.parametrize("name", list(REMOVALS))
def test_the_removal_and_its_acknowledgments_are_one_commit(net: Net, name: str) -> None:
    removal, cls, attrs = REMOVALS[name]
    a, b = _pair(net)
    _send(a, **attrs)
    net.run_until_quiet()
    # Warm up what an acknowledgment needs besides its row (the outgoing queue to A and
    # a block of Identifier uniquifiers): commits of their own, made once.
    b.qm.send(ADMIN, MessageRecord(body=b"warm-up"))
    txs = _commits(b.qm)
    removal(b)
    [tx] = _writes(txs)
    assert any(s.startswith("INSERT INTO messages") for s in tx)  # the NACK rows
    net.run_until_quiet()
    assert _admin_classes(a).count(cls) == 2


def test_a_purge_pending_message_deleted_at_its_abort_is_acknowledged_in_that_commit(net: Net) -> None:
    a, b = _pair(net)
    _send(a, n=1)
    net.run_until_quiet()
    b.qm.send(ADMIN, MessageRecord(body=b"warm-up"))
    tx = b.qm.begin()
    b.qm.receive("private$\\orders", tx=tx)
    assert b.qm.purge_queue("private$\\orders") == 0  # locked: PurgePending
    txs = _commits(b.qm)
    tx.abort()  # the message is deleted now, with its NACK_Q_PURGED
    [tx] = _writes(txs)
    assert any(s.startswith("INSERT INTO messages") for s in tx)
    net.run_until_quiet()
    assert _admin_classes(a).count(MessageClass.NACK_Q_PURGED) == 1
    assert b.qm.peek_range("private$\\orders", 0, 10) == []


def test_a_failing_acknowledgment_insert_undoes_the_purge(net: Net, monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = _pair(net)
    _send(a)
    net.run_until_quiet()

    def fail(ctx: object, events: object, acks: object) -> None:
        raise MQError(0xC00E0027, "acknowledgment insert failed (injected)")

    monkeypatch.setattr(queues, "write_ack_rows", fail)
    with pytest.raises(MQError):
        b.qm.purge_queue("private$\\orders")
    monkeypatch.undo()
    assert len(b.qm.peek_range("private$\\orders", 0, 10)) == 2  # nothing purged
    net.run_until_quiet()
    assert _admin_classes(a) == []  # and nothing acknowledged


def test_removed_messages_other_than_those_prepared_for_are_acknowledged_afterwards(
    net: Net, monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = _pair(net)
    _send(a)
    net.run_until_quiet()
    real = queues.purge_candidates

    def stale(*args: Any) -> Callable[..., object]:
        read = real(*args)

        def one_missing(conn: object) -> list[ops.RemovedMessage]:
            return read(conn)[:1]  # type: ignore[arg-type]  # as if the other arrived just after

        return one_missing

    monkeypatch.setattr(queues, "purge_candidates", stale)
    assert b.qm.purge_queue("private$\\orders") == 2
    net.run_until_quiet()
    # The rows built for one message were not written; both NACKs went the two-commit way.
    assert _admin_classes(a).count(MessageClass.NACK_Q_PURGED) == 2
