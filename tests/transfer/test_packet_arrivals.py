"""B's store work on received packets (``plain_packet_rows`` into ``accept_arrival_rows``,
else ``store_packet_messages``, as ``StoreWorkQueue.run`` runs them) stores exactly what
``store_arrivals`` stores from the converted messages: the same rows, counters and
incoming sequence state, through the rows path when every packet is plain and through
``store_arrivals`` otherwise; a deleted queue or a quota fails the whole group."""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path
from typing import Any

import pytest

from openmsmq.errors import HResult, MQError
from openmsmq.qm import QueueManager
from openmsmq.qm.sequences import SequenceStore
from openmsmq.store import ops
from openmsmq.store.records import IncomingSequenceState, MessageRecord
from openmsmq.transfer.arrival import ArrivalResult, plain_packet_rows, store_arrivals, store_packet_messages
from openmsmq.transfer.codec import arrival_rows, message_from_packet, packet_from_message
from openmsmq.wire import PacketDecoder, encode_packets
from openmsmq.wire.packets import UserMessage

WIRE = "TCP:127.0.0.2\\PRIVATE$\\q"
SENDER = uuid.UUID(int=0x5A)
SEQ = (1_700_000_000 << 32) | 7


def _packets(n: int, **fields: object) -> list[UserMessage]:
    """``n`` transactional messages of one sequence (bodies of 101 bytes and more, 2 KiB
    or more in all) as B's decoder gives them."""
    common = {"transactional": True, "tx_sequence_id": SEQ, "destination_queue": "DIRECT=" + WIRE,
              "sent_time": 1_700_000_000, "id_lineage": SENDER, "source_machine": SENDER,
              **fields}  # fmt: skip
    ms = [
        MessageRecord(body=bytes([i % 256]) * (100 + i), tx_sequence_number=i,
                      tx_previous_sequence_number=i - 1, id_uniquifier=i, final_ack_required=i % 2 == 0,
                      **common)  # type: ignore[arg-type]
        for i in range(1, n + 1)
    ]  # fmt: skip
    out = list(PacketDecoder().feed(encode_packets([packet_from_message(m, WIRE, SENDER) for m in ms])))
    assert all(isinstance(p, UserMessage) for p in out)
    return out  # type: ignore[return-value]


def _state(number: int) -> IncomingSequenceState:
    return IncomingSequenceState(
        SENDER, "direct=" + WIRE.lower(), None, SEQ, number, 0, 1.7e9, "127.0.0.1", True
    )


def _stored(qm: QueueManager, queue: str) -> tuple[object, ...]:
    """Counters and every stored message with its QM-assigned attributes cleared."""
    rec = qm.get_queue(queue)
    ms = [dataclasses.replace(m, lookup_id=0) for m in qm.peek_range(queue, 0, 1000)]
    return rec.msg_count, rec.total_bytes, ms


def store_packet_arrivals(
    qm: QueueManager,
    seqs: SequenceStore,
    queue: str,
    packets: list[UserMessage],
    destination: str,
    state: IncomingSequenceState,
) -> ArrivalResult:
    """One accepted run as B's store work stores it: the rows path when
    ``plain_packet_rows`` gives rows, else the packets as messages."""
    rows = plain_packet_rows(qm, queue, packets, destination)
    if rows is not None:
        return ArrivalResult(tuple(seqs.accept_arrival_rows(queue, rows, state)), (), 0, 0)
    return store_packet_messages(qm, seqs, queue, packets, destination, state)


@pytest.mark.parametrize(
    "fields", [{}, {"ack_flags": 0x4}, {"label": "hello"}, {"time_to_be_received": 3600}, {"priority": 3}]
)
def test_packet_arrivals_store_what_store_arrivals_stores(
    tmp_path: Path, fields: dict[str, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    dest = "DIRECT=" + WIRE
    with QueueManager(tmp_path / "qm", clock=lambda: 1_700_000_100.0) as qm:
        qm.create_queue("private$\\a", transactional=True)
        qm.create_queue("private$\\b", transactional=True)
        packets = _packets(20, **fields)
        rows_path: list[int] = []
        seqs = qm.sequence_store()
        real = seqs.accept_arrival_rows

        def spy(*args: Any) -> list[int]:
            rows_path.append(1)
            return real(*args)

        monkeypatch.setattr(seqs, "accept_arrival_rows", spy)
        fast = store_packet_arrivals(qm, seqs, "private$\\a", packets, dest, _state(20))
        # Only the plain messages take the rows path (a Label still does: arrival_rows
        # converts that row through the reference path).
        assert bool(rows_path) == (fields in ({}, {"label": "hello"}, {"priority": 3}))
        state_fast = qm.incoming_sequences()
        ref = store_arrivals(
            qm,
            qm.sequence_store(),
            "private$\\b",
            [message_from_packet(p, dest) for p in packets],
            _state(20),
        )
        assert len(fast.stored) == len(ref.stored) == 20
        assert (fast.rejected, fast.acks_sent) == (ref.rejected, ref.acks_sent)
        assert _stored(qm, "private$\\a") == _stored(qm, "private$\\b")
        assert [(s.tx_sequence_id, s.tx_sequence_number, s.queue_id) for s in state_fast] == [
            (SEQ, 20, qm.get_queue("private$\\a").queue_id)
        ]


def test_rows_path_checks_quota_and_deleted_queue_in_its_transaction(tmp_path: Path) -> None:
    with QueueManager(tmp_path / "qm") as qm:
        qid = qm.create_queue("private$\\q", transactional=True).queue_id
        packets = _packets(20)
        qm.set_queue_properties("private$\\q", quota_kb=1)
        with pytest.raises(MQError) as err:
            qm.sequence_store().accept_arrival_rows(
                "private$\\q", arrival_rows(packets, "DIRECT=" + WIRE), _state(20)
            )
        assert err.value.hresult == HResult.MQ_ERROR_INSUFFICIENT_RESOURCES
        with pytest.raises(MQError) as err:
            qm.store.write(
                ops.accept_incoming_rows(qid + 1000, arrival_rows(packets, "DIRECT=" + WIRE), [], 0)
            )
        assert err.value.hresult == HResult.MQ_ERROR_QUEUE_DELETED
        # Nothing of either is stored: neither messages nor the sequence state.
        assert qm.get_queue("private$\\q").msg_count == 0
        assert qm.incoming_sequences() == []
        # The plain path is not taken with a quota: store_arrivals applies the arrival rule.
        res = store_packet_arrivals(
            qm, qm.sequence_store(), "private$\\q", packets, "DIRECT=" + WIRE, _state(20)
        )
        assert len(res.stored) + len(res.rejected) == 20 and res.rejected


def test_runs_of_many_sequences_share_one_commit_and_fail_alone(tmp_path: Path) -> None:
    """accept_arrival_rows_many: runs for 20 queues (20 sequences) are submitted together
    and share a commit or two instead of 20 fsyncs; a run whose queue was deleted (or
    went over its quota) fails alone, stores nothing, and the others are stored with their
    sequence state. release_outgoing_many does the same for OrderAck releases."""
    from openmsmq.store.records import IncomingSequenceState as State

    with QueueManager(tmp_path / "qm") as qm:
        names_ = [f"private$\\q{i}" for i in range(20)]
        for n in names_:
            qm.create_queue(n, transactional=True)
        qm.set_queue_properties(names_[7], quota_kb=1)
        packets = _packets(20)
        runs = [
            (
                n,
                arrival_rows(packets, "DIRECT=" + WIRE),
                State(SENDER, "direct=" + n, None, SEQ, 20, 0, 1.7e9, "", True),
            )
            for n in names_
        ]
        qm.delete_queue(names_[3])
        batches = qm.store.stats.batches
        out = qm.sequence_store().accept_arrival_rows_many(runs)
        assert qm.store.stats.batches - batches <= 3
        assert [i for i, o in enumerate(out) if o is not None] == [3, 7]
        assert all(isinstance(o, MQError) for o in out if o is not None)
        assert qm.get_queue(names_[7]).msg_count == 0
        assert all(qm.get_queue(n).msg_count == 20 for i, n in enumerate(names_) if i not in (3, 7))
        stored = {s.destination for s in qm.incoming_sequences()}
        assert stored == {"direct=" + n for i, n in enumerate(names_) if i not in (3, 7)}
        # OrderAck releases of several outgoing queues, one of them unknown.
        dests = [f"DIRECT=TCP:192.0.2.9\\private$\\o{i}" for i in range(10)]
        for d in dests:
            with qm.begin() as tx:
                qm.send_many(d, [MessageRecord(body=b"x")] * 5, tx)
        batches = qm.store.stats.batches
        res = qm.sequence_store().release_outgoing_many(
            [(d, 3) for d in dests] + [("DIRECT=TCP:192.0.2.9\\private$\\none", 1)]
        )
        assert qm.store.stats.batches - batches <= 3
        assert res[:10] == [None] * 10 and isinstance(res[10], MQError)
        assert [qm.get_queue(qm.open_queue(d)).msg_count for d in dests] == [2] * 10


def test_a_failed_run_fails_the_later_runs_of_its_sequence_in_the_same_batch(tmp_path: Path) -> None:
    """The store work of an AcceptBatch stores runs of different sequences together, but
    a sequence's runs in order: when the first run of a sequence fails (here its write
    fails as on a full disk), the next run of that sequence in the batch fails too
    (storing it would move the sequence past the missing messages); another sequence is
    stored."""
    from openmsmq.protocol.incoming import SequenceKey
    from openmsmq.store.records import IncomingSequenceState as State
    from openmsmq.transfer.engine import Transfer, TransferConfig
    from openmsmq.transfer.state import AcceptBatch, AcceptGroup

    full, other = "private$\\full", "private$\\other"
    with QueueManager(tmp_path / "qm", clock=lambda: 1_700_000_100.0) as qm:
        qm.create_queue(full, transactional=True)
        qm.create_queue(other, transactional=True)
        transfer = Transfer(qm, TransferConfig(local_addresses=("127.0.0.2",)), 0.0)
        first, second = _packets(40)[:20], _packets(40)[20:]
        k_full, k_other = SequenceKey(SENDER, "direct=a"), SequenceKey(SENDER, "direct=b")

        def group(queue: str, key: SequenceKey, packets: list[UserMessage], n: int) -> AcceptGroup:
            state = State(SENDER, key.destination, None, SEQ, n, 0, 1.7e9, "", True)
            return AcceptGroup(queue, key, tuple(packets), (), state)

        real = transfer.sequence_store.accept_arrival_rows_many
        calls: list[list[str]] = []

        def full_fails(runs: Any) -> list[BaseException | None]:
            calls.append([r[0] for r in runs])
            done = iter(real([r for r in runs if r[0] != full]))
            return [
                MQError(HResult.MQ_ERROR_INSUFFICIENT_RESOURCES, "full") if r[0] == full else next(done)
                for r in runs
            ]

        transfer.sequence_store.accept_arrival_rows_many = full_fails  # type: ignore[method-assign]
        out = transfer.run_store_work(
            AcceptBatch(
                (
                    group(full, k_full, first, 20),
                    group(other, k_other, first, 20),
                    group(full, k_full, second, 40),
                )
            )
        )
        assert calls == [[full, other]]  # stored together; the second run of "full" never tried
        assert isinstance(out[0], MQError) and out[1] is None
        assert "earlier batch of this sequence failed" in str(out[2])
        assert qm.get_queue(full).msg_count == 0
        assert qm.get_queue(other).msg_count == 20
        assert {s.destination for s in qm.incoming_sequences()} == {"direct=b"}


def test_a_store_that_cannot_be_read_refuses_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The destination queue's record cannot be read (a store failure, a database
    restarting): the arrival raises StorageError and stores nothing, so the sender sends
    the messages again. Taken for "no such queue", a read failure stored the run as
    NACK_BAD_DST_Q rejections, and the sending QM dead-lettered messages that B would
    have taken a moment later."""
    from openmsmq.errors import StorageError

    with QueueManager(tmp_path / "qm") as qm:
        qm.create_queue("private$\\b", transactional=True)
        messages = [message_from_packet(p, "DIRECT=" + WIRE) for p in _packets(3)]

        def unreadable(queue: object) -> object:
            raise MQError(HResult.MQ_ERROR_MESSAGE_STORAGE_FAILED, "store: database unreachable")

        monkeypatch.setattr(qm, "get_queue", unreadable)
        with pytest.raises(StorageError):
            store_arrivals(qm, qm.sequence_store(), "private$\\b", messages, _state(3))
        # The rows path reads no queue row (the properties the QM holds): it decides
        # without the store, whose write then fails or not on its own.
        assert plain_packet_rows(qm, "private$\\b", _packets(3), "DIRECT=" + WIRE) is not None
        monkeypatch.undo()
        assert qm.get_queue("private$\\b").msg_count == 0
        assert qm.incoming_sequences() == []  # no sequence state moved
        assert [q.name for q in qm.list_queues(include_system=True) if q.msg_count] == []


def test_the_rows_path_reads_no_queue_row_per_batch(tmp_path: Path) -> None:
    """B decides whether a run takes the rows path from the queue's properties as the QM
    holds them: no read of the queue's row per stored batch (the store operation checks
    the row inside its transaction, from its counter UPDATE)."""
    with QueueManager(tmp_path / "qm") as qm:
        qm.create_queue("private$\\q", transactional=True)
        seqs = qm.sequence_store()
        statements: list[str] = []
        qm.store.reader().set_trace_callback(statements.append)
        packets = _packets(30)
        for k in range(3):
            batch = packets[10 * k : 10 * k + 10]
            rows = plain_packet_rows(qm, "private$\\q", batch, "DIRECT=" + WIRE)
            assert rows is not None
            seqs.accept_arrival_rows("private$\\q", rows, _state(10 * k + 10))
        qm.store.reader().set_trace_callback(None)
        assert [s for s in statements if "FROM queues" in s] == []
        assert qm.get_queue("private$\\q").msg_count == 30


def test_a_sender_allowlist_set_since_is_applied_to_the_next_batch(tmp_path: Path) -> None:
    """The properties the QM holds follow a change made through it at once, and one made
    by another process on the data directory as soon as a store operation finds it
    (inside its transaction): no message of a sender the queue no longer lists is stored
    through the rows path."""
    other_sender = uuid.uuid4()
    with QueueManager(tmp_path / "qm") as qm:
        qm.create_queue("private$\\q", transactional=True)
        qm.create_queue("private$\\r", transactional=True)
        seqs = qm.sequence_store()
        packets = _packets(20)
        dest = "DIRECT=" + WIRE
        first = store_packet_arrivals(qm, seqs, "private$\\q", packets[:10], dest, _state(10))
        assert len(first.stored) == 10
        # Through this QM: the next batch takes the arrival rules at once.
        qm.set_queue_properties("private$\\q", allowed_senders=[other_sender])
        assert plain_packet_rows(qm, "private$\\q", packets[10:], dest) is None
        res = store_packet_arrivals(qm, seqs, "private$\\q", packets[10:], dest, _state(20))
        assert res.stored == () and len(res.rejected) == 10
        # Through another process on the same directory: the rows path's transaction
        # finds the allowlist and stores nothing; the QM reads the queue again and the
        # retry takes the arrival rules.
        other = QueueManager(qm.data_dir, threaded=False)
        try:
            other.set_queue_properties("private$\\r", allowed_senders=[other_sender])
        finally:
            other.close()
        outcomes: list[object] = []
        for _ in range(2):
            try:
                outcomes.append(
                    store_packet_arrivals(qm, seqs, "private$\\r", packets[:10], dest, _state(10))
                )
            except MQError as exc:
                outcomes.append(exc.hresult)
        assert outcomes[0] == HResult.MQ_ERROR_ACCESS_DENIED
        last = outcomes[-1]
        assert isinstance(last, ArrivalResult) and last.stored == () and len(last.rejected) == 10
        assert qm.get_queue("private$\\r").msg_count == 0
