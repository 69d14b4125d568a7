"""``openmsmq migrate`` in the middle of MS-MQQB transactional sequences between two real
``openmsmq serve`` processes: the migrated queue manager, on PostgreSQL, continues each
sequence where its SQLite store left it.

* The receiver moves: QM B (SQLite) is SIGKILLed while QM A streams a transactional
  sequence into it, migrated, and served again on PostgreSQL; A goes on (resending what B
  had not OrderAck'ed). B must hold every message exactly once and in order, and A's
  outgoing queue must empty: B's incoming sequence state (the last number accepted per
  sender sequence) carried over, so the resent messages are recognised as duplicates and
  the next ones as the continuation, not as a new sequence that does not start at 1.
* The sender moves: QM A (SQLite) has sent a sequence that B stored but has not
  OrderAck'ed yet (A retains every message), A is stopped, migrated and served on
  PostgreSQL; it resends the retained messages in the same sequence, with the same
  numbers, and B accepts none of them twice.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

from openmsmq.cli.main import cli
from openmsmq.qm.manager import QueueManager
from openmsmq.store.records import MessageRecord
from tests.serve_proc import A, B, ServeProcess, free_port, outgoing_count, queue_count, read_only

Q = "private$\\orders"
DEST = f"DIRECT=TCP:{B}\\PRIVATE$\\orders"

pytestmark = pytest.mark.slow


def _migrate(data_dir: Path, dsn: str) -> None:
    result = CliRunner().invoke(cli, ["--qm", str(data_dir), "migrate", "--dsn", dsn])
    assert result.exit_code == 0, (result.output, result.exception)


def _pg_env(dsn: str) -> dict[str, str]:
    """What the migration says to set in the configuration of serve."""
    return {"OPENMSMQ_STORE_BACKEND": "postgresql", "OPENMSMQ_STORE_DSN": dsn}


def _pg_counts(dsn: str) -> tuple[int, int]:
    """(messages in Q, messages in outgoing queues) of the QM in ``dsn``."""
    with psycopg.connect(dsn, connect_timeout=5) as conn:
        row = conn.execute(
            "SELECT coalesce(sum(msg_count) FILTER (WHERE name = %s), 0),"
            " coalesce(sum(msg_count) FILTER (WHERE queue_type = 4), 0) FROM queues",
            (Q,),
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def _bodies(data_dir: Path) -> list[str]:
    with QueueManager(data_dir) as qm:
        return [m.body.decode() for m in qm.peek_range(Q, 0, 100_000)]


def _wait(cond: Callable[[], bool], timeout: float, what: str, *logs: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(what + "\n" + "\n".join(p.read_text()[-3000:] for p in logs if p.exists()))


def test_receiver_migrated_mid_sequence_continues_it_exactly_once(tmp_path: Path, pg_dsn: str) -> None:
    txs, per_tx = 20, 100
    total = txs * per_tx
    port = free_port()
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    with QueueManager(b_dir) as qb:
        qb.create_queue(Q, transactional=True)
    a = ServeProcess(a_dir, A, port, tmp_path / "a.log")
    b = ServeProcess(b_dir, B, port, tmp_path / "b.log")
    b_pg = ServeProcess(b_dir, B, port, tmp_path / "b-pg.log", env=_pg_env(pg_dsn))
    sender_qm = QueueManager(a_dir)
    errors: list[BaseException] = []

    def sender() -> None:
        try:
            for t in range(txs):
                with sender_qm.begin() as tx:
                    sender_qm.send_many(
                        DEST, [MessageRecord(body=f"{t}-{i}".encode()) for i in range(per_tx)], tx
                    )
                time.sleep(0.05)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    try:
        b.start()
        a.start()
        th = threading.Thread(target=sender)
        th.start()
        _wait(lambda: queue_count(b_dir, Q) >= total // 4, 60, "B received nothing", tmp_path / "b.log")
        b.kill()  # in the middle of the sequence
        at_kill = queue_count(b_dir, Q)
        th.join(120)
        assert not errors, errors
        assert 0 < at_kill < total, "the kill did not hit the sequence"
        with read_only(b_dir) as c:
            (last,) = c.execute("SELECT max(tx_sequence_number) FROM incoming_sequences").fetchone()
        assert last == at_kill  # B's incoming sequence stopped there

        _migrate(b_dir, pg_dsn)
        b_pg.start()
        _wait(
            lambda: outgoing_count(a_dir) == 0 and _pg_counts(pg_dsn)[0] >= total,
            120, "A's outgoing queue did not empty into B on PostgreSQL",
            tmp_path / "b-pg.log", tmp_path / "a.log",
        )  # fmt: skip
        assert a.stop() == 0 and b_pg.stop() == 0
    finally:
        sender_qm.close()
        for s in (a, b, b_pg):
            s.close()
    bodies = _bodies(b_dir)  # the data directory now names the database
    assert len(bodies) == len(set(bodies)), "duplicates delivered"
    assert bodies == [f"{t}-{i}" for t in range(txs) for i in range(per_tx)]


def test_sender_migrated_with_retained_messages_resumes_its_sequence(tmp_path: Path, pg_dsn: str) -> None:
    txs, per_tx = 10, 50
    total = txs * per_tx
    port = free_port()
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    with QueueManager(b_dir) as qb:
        qb.create_queue(Q, transactional=True)
    # B OrderAcks late (MaximumOrderAckDelay 60 s): A keeps every message it sent.
    slow_acks = {
        "OPENMSMQ_PROTOCOL_ORDER_ACK_TIMEOUT": "60",
        "OPENMSMQ_PROTOCOL_MAXIMUM_ORDER_ACK_DELAY": "60",
    }
    b_slow = ServeProcess(b_dir, B, port, tmp_path / "b-slow.log", env=slow_acks)
    b = ServeProcess(b_dir, B, port, tmp_path / "b.log")
    a = ServeProcess(a_dir, A, port, tmp_path / "a.log")
    a_pg = ServeProcess(a_dir, A, port, tmp_path / "a-pg.log", env=_pg_env(pg_dsn))
    try:
        with QueueManager(a_dir) as qa:
            for t in range(txs):
                with qa.begin() as tx:
                    qa.send_many(DEST, [MessageRecord(body=f"{t}-{i}".encode()) for i in range(per_tx)], tx)
        b_slow.start()
        a.start()
        _wait(
            lambda: queue_count(b_dir, Q) == total, 60, "B did not receive the sequence", tmp_path / "a.log"
        )
        assert a.stop() == 0
        assert b_slow.stop() == 0
        retained = outgoing_count(a_dir)
        assert retained == total, "A was OrderAck'ed: nothing retained to resume"
        with read_only(a_dir) as c:
            seq = c.execute("SELECT * FROM outgoing_sequences ORDER BY queue_id").fetchall()
        assert max(s[2] for s in seq) == total + 1  # the sequence's next TxSequenceNumber

        _migrate(a_dir, pg_dsn)
        with psycopg.connect(pg_dsn) as conn:
            assert conn.execute("SELECT * FROM outgoing_sequences ORDER BY queue_id").fetchall() == seq
        b.start()
        a_pg.start()
        _wait(
            lambda: _pg_counts(pg_dsn)[1] == 0, 120, "A on PostgreSQL kept its retained messages",
            tmp_path / "a-pg.log", tmp_path / "b.log",
        )  # fmt: skip
        with QueueManager(a_dir) as qa, qa.begin() as tx:  # A goes on, on PostgreSQL
            qa.send_many(DEST, [MessageRecord(body=f"after-{i}".encode()) for i in range(per_tx)], tx)
        _wait(
            lambda: queue_count(b_dir, Q) == total + per_tx and _pg_counts(pg_dsn)[1] == 0, 120,
            "the messages sent after the migration did not arrive", tmp_path / "a-pg.log", tmp_path / "b.log",
        )  # fmt: skip
        assert a_pg.stop() == 0 and b.stop() == 0
    finally:
        for s in (a, a_pg, b, b_slow):
            s.close()
    bodies = _bodies(b_dir)
    assert len(bodies) == len(set(bodies)), "duplicates delivered"
    assert bodies == [f"{t}-{i}" for t in range(txs) for i in range(per_tx)] + [
        f"after-{i}" for i in range(per_tx)
    ]
