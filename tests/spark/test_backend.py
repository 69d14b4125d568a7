"""The Backend contract, checked on the file-backed TEST BACKEND (no pyspark)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from openmsmq.errors import ConfigError, MessageNotFoundError, MQError, QueueNotFoundError
from openmsmq.spark.backend import Backend, LookupRange, OutgoingMessage, open_backend
from openmsmq.spark.testbackend import FileBackend


@pytest.fixture
def qm(tmp_path: Path) -> FileBackend:
    backend = FileBackend.create(str(tmp_path / "qm.db"))
    backend.create_queue("a")
    backend.create_queue("b", transactional=False)
    return backend


def test_open_backend_by_endpoint(qm: FileBackend) -> None:
    backend = open_backend(f"file://{qm.path}")
    assert isinstance(backend, Backend)
    assert backend.queue_exists("a") and not backend.queue_exists("zz")
    backend.close()
    with pytest.raises(ConfigError, match="not available in this version"):
        open_backend("grpc://127.0.0.1:1")
    with pytest.raises(ConfigError, match="unsupported scheme"):
        open_backend("http://127.0.0.1:1")
    with pytest.raises(ConfigError, match="absolute"):
        open_backend("file://host/x.db")


def test_ranges_peek_and_nth(qm: FileBackend) -> None:
    a_ids = qm.send("a", [b"a1", b"a2"])
    b_ids = qm.send("b", [b"b1"], priority=6)
    a_ids += qm.send("a", [b"a3"])
    assert a_ids == [1, 2, 4] and b_ids == [3]  # one LookupIdentifier counter per QM
    assert qm.available_range("a") == LookupRange(1, 4, 3)
    assert qm.available_range("a", after=2) == LookupRange(4, 4, 1)
    assert qm.available_range("a", after=0, through=2) == LookupRange(1, 2, 2)
    assert qm.available_range("a", after=4) is None
    assert qm.nth_lookup_id("a", 0, 3) == 4
    with pytest.raises(MessageNotFoundError):
        qm.nth_lookup_id("a", 0, 4)
    page = qm.peek_range("a", 1, 4, 10)
    assert [(m.lookup_id, m.body, m.priority) for m in page] == [(2, b"a2", 0), (4, b"a3", 0)]
    assert page[0].tx_sequence_number == 2 and page[0].message_id.endswith("\\2")
    (b_msg,) = qm.peek_range("b", 0, 10, 10)
    assert b_msg.priority == 6 and b_msg.tx_sequence_id is None
    assert qm.peek_range("a", 0, 4, 1)[0].lookup_id == 1
    assert qm.lookup_ids("a") == [1, 2, 4]  # peek removed nothing
    with pytest.raises(QueueNotFoundError):
        qm.available_range("nope")


def test_remove_through_is_one_transaction_and_idempotent(qm: FileBackend) -> None:
    qm.send("a", [b"1", b"2", b"3"])
    qm.send("b", [b"4"])
    assert qm.remove_through({"a": 2, "b": 4}) == 3
    assert qm.lookup_ids("a") == [3] and qm.lookup_ids("b") == []
    assert qm.remove_through({"a": 2, "b": 4}) == 0
    with pytest.raises(QueueNotFoundError):
        qm.remove_through({"a": 3, "nope": 1})
    assert qm.lookup_ids("a") == [3]  # the failed call removed nothing


def test_send_idempotent_skips_seen_identities(qm: FileBackend) -> None:
    msgs = [OutgoingMessage(f"id{i}", f"m{i}".encode(), label="L", app_specific=i) for i in range(3)]
    assert qm.send_idempotent("a", msgs[:2]) == 2
    assert qm.send_idempotent("a", msgs) == 1
    assert qm.send_idempotent("a", msgs) == 0
    assert qm.bodies("a") == [b"m0", b"m1", b"m2"]
    assert qm.send_idempotent("b", msgs[:1]) == 1  # identities are per queue
    # A failing message rolls back the whole call, identities included.
    bad = [OutgoingMessage("id9", b"x"), OutgoingMessage("id10", b"y", correlation_id=b"short")]
    with pytest.raises(MQError):
        qm.send_idempotent("a", bad)
    assert qm.send_idempotent("a", bad[:1]) == 1


def test_vanished_database_is_an_unreachable_qm(qm: FileBackend, tmp_path: Path) -> None:
    qm.send("a", [b"1"])
    os.rename(qm.path, tmp_path / "moved.db")
    with pytest.raises(MQError, match="MQ_ERROR_REMOTE_MACHINE_NOT_AVAILABLE"):
        qm.peek_range("a", 0, 10, 10)
    os.rename(tmp_path / "moved.db", qm.path)
    assert len(qm.peek_range("a", 0, 10, 10)) == 1
    qm.close()
    with pytest.raises(MQError):
        qm.queue_exists("a")
