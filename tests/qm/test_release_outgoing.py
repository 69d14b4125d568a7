"""release_outgoing(return_ids=False), the transfer's one-pass range release, against the
listed release (return_ids=True, DELETE … RETURNING after a scan for FinalAck rows):
the same data gives the same state (counters of every queue, what is left of the
outgoing queue, what waits for a FinalAck, the sequence state, the ids moved aside)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from openmsmq.qm import MessageRecord, QueueHandle, QueueManager, names
from openmsmq.store import outgoing

DEST = "DIRECT=TCP:192.0.2.9\\private$\\orders"
OTHER = "DIRECT=TCP:192.0.2.9\\private$\\other"
LOCAL = "private$\\local"


def _outgoing(tmp_path: Path, name: str) -> tuple[QueueManager, QueueHandle]:
    qm = QueueManager(tmp_path / name)
    with qm.begin() as tx:
        qm.send_many(DEST, [MessageRecord(body=b"x" * (i + 1), label="l" * i) for i in range(5)], tx)
    wanted = MessageRecord(body=b"journal", positive_journaling=True)  # moved aside, not deleted
    with qm.begin() as tx:
        qm.send_many(DEST, [wanted, MessageRecord(body=b"last")], tx)
    return qm, qm.open_queue(DEST)


@pytest.mark.parametrize("up_to", [0, 3, 6, 7])
def test_same_result_without_the_id_list(tmp_path: Path, up_to: int) -> None:
    listed, out_l = _outgoing(tmp_path, "listed")
    counted, out_c = _outgoing(tmp_path, "counted")
    try:
        ids, state_l = listed.sequence_store().release_outgoing(out_l, up_to)
        moved, state_c = counted.sequence_store().release_outgoing(out_c, up_to, return_ids=False)
        assert (state_l.next_tx_sequence_number, state_l.tx_sequence_id != 0) == (
            state_c.next_tx_sequence_number,
            state_c.tx_sequence_id != 0,
        )
        assert len(moved) == (1 if up_to >= 6 else 0) and set(moved) <= set(ids)
        rec_l, rec_c = listed.get_queue(out_l), counted.get_queue(out_c)
        assert (rec_c.msg_count, rec_c.total_bytes) == (rec_l.msg_count, rec_l.total_bytes)
        assert rec_c.msg_count == 7 - up_to
        left_l = [m.tx_sequence_number for m in listed.peek_range(out_l)]
        left_c = [m.tx_sequence_number for m in counted.peek_range(out_c)]
        assert left_c == left_l == list(range(up_to + 1, 8))
    finally:
        listed.close()
        counted.close()


# ---- a mixed outgoing queue: every kind of row a release meets -------------------------

#: (kind, message) in commit order; "tx" rows get TxSequenceNumbers 1, 2, ... in order.
_FLAGS: list[dict[str, Any]] = [
    {},
    {"ack_flags": 0x0F},  # acknowledgments only: ack_wanted, but no FinalAck -> deleted
    {"final_ack_required": True},  # TransactionHeader.Flags.FA -> moved aside
    {},
    {"negative_journaling": True},  # JN -> moved aside
    {"positive_journaling": True, "ack_flags": 0x01},
    {},
    {"ack_flags": 0x04},
    {},
    {"final_ack_required": True},
    {},
    {},
]


_FINAL = {"final_ack_required", "positive_journaling", "negative_journaling"}


def _mixed(path: Path) -> tuple[QueueManager, QueueHandle]:
    """An outgoing queue holding transactional messages of every acknowledgment kind, in
    transactions interleaved with non-transactional messages of several priorities to
    the same destination (TxSequenceNumber 0: never released), transactional messages
    to another outgoing queue and a local queue (so the released LookupIdentifiers are
    not one contiguous run)."""
    qm = QueueManager(path)
    qm.create_queue(LOCAL, transactional=True)
    for i in range(0, len(_FLAGS), 3):
        with qm.begin() as tx:
            qm.send_many(
                DEST,
                [
                    MessageRecord(body=b"t%d" % j * (j + 1), label="l" * j, **_FLAGS[j])
                    for j in range(i, i + 3)
                ],
                tx,
            )
        qm.send(DEST, MessageRecord(body=b"n%d" % i, priority=i % 8, ack_flags=1 if i == 3 else 0))
        with qm.begin() as tx:
            qm.send(OTHER, MessageRecord(body=b"o%d" % i), tx)
            qm.send(LOCAL, MessageRecord(body=b"l%d" % i), tx)
    return qm, qm.open_queue(DEST)


def _state(qm: QueueManager, out: QueueHandle) -> dict[str, Any]:
    """Everything a release can change, with LookupIdentifiers where both stores agree."""
    queues = {r.name: (r.msg_count, r.total_bytes) for r in qm.list_queues(include_system=True)}
    awaiting = qm.open_queue(names.AWAITING_FINAL_ACK)
    seq = qm.outgoing_sequence(out)
    return {
        "queues": queues,
        "left": [
            (m.lookup_id, m.tx_sequence_number, m.priority, m.body, m.label) for m in qm.peek_range(out)
        ],
        "awaiting": [
            (m.tx_sequence_number, m.body, m.final_ack_required, m.positive_journaling, m.negative_journaling)
            for m in qm.peek_range(awaiting)
        ],
        "other": [m.body for m in qm.peek_range(qm.open_queue(OTHER))],
        "next_number": seq.next_tx_sequence_number,
    }


@pytest.mark.parametrize("up_to", [0, 1, 2, 3, 5, 6, 9, 11, 12, 13])
@pytest.mark.parametrize("awaiting", [True, False])
def test_mixed_queue_same_state(tmp_path: Path, up_to: int, awaiting: bool) -> None:
    listed, out_l = _mixed(tmp_path / "listed")
    counted, out_c = _mixed(tmp_path / "counted")
    try:
        assert _state(listed, out_l) == _state(counted, out_c)
        before = {m.tx_sequence_number: m.lookup_id for m in listed.peek_range(out_l)}
        # A TxSequenceID holds its creation second: compare how far each one moved.
        start_l, start_c = (
            listed.outgoing_sequence(out_l).tx_sequence_id,
            counted.outgoing_sequence(out_c).tx_sequence_id,
        )
        if awaiting:
            ids, state_l = listed.sequence_store().release_outgoing(out_l, up_to)
            moved, state_c = counted.sequence_store().release_outgoing(out_c, up_to, return_ids=False)
        else:  # the store op without an awaiting queue: every released row is deleted
            ql, qc = listed.get_queue(out_l).queue_id, counted.get_queue(out_c).queue_id
            ids, state_l = listed.store.write(outgoing.release_outgoing(ql, up_to))
            moved, state_c = counted.store.write(outgoing.release_outgoing(qc, up_to, return_ids=False))
        released = [before[n] for n in range(1, min(up_to, len(_FLAGS)) + 1)]
        assert ids == sorted(released)
        final = [before[n + 1] for n, f in enumerate(_FLAGS[:up_to]) if _FINAL & set(f)]
        assert moved == (sorted(final) if awaiting else [])
        assert (state_c.next_tx_sequence_number, state_c.tx_sequence_id - start_c) == (
            state_l.next_tx_sequence_number,
            state_l.tx_sequence_id - start_l,
        )
        got_l, got_c = _state(listed, out_l), _state(counted, out_c)
        assert got_c == got_l
        assert [n for _, n, *_ in got_c["left"] if n] == list(range(up_to + 1, len(_FLAGS) + 1))
        assert len(got_c["awaiting"]) == (len(final) if awaiting else 0)
        # The counters agree with the rows (not only with the other path).
        rec = counted.get_queue(out_c)
        msgs = counted.peek_range(out_c)
        assert (rec.msg_count, rec.total_bytes) == (len(msgs), sum(m.size for m in msgs))
    finally:
        listed.close()
        counted.close()


def test_release_everything_starts_a_new_sequence_and_zeroes_bytes(tmp_path: Path) -> None:
    qm, out = _mixed(tmp_path / "qm")
    try:
        # Take the non-transactional rows away: the release then empties the queue.
        for m in qm.peek_range(out):
            if not m.tx_sequence_number:
                qm.receive_by_lookup_id(out, m.lookup_id)
        old = qm.outgoing_sequence(out).tx_sequence_id
        moved, state = qm.sequence_store().release_outgoing(out, len(_FLAGS), return_ids=False)
        assert len(moved) == 4 and state.next_tx_sequence_number == 1 and state.tx_sequence_id > old
        rec = qm.get_queue(out)
        assert (rec.msg_count, rec.total_bytes) == (0, 0)
        assert len(qm.peek_range(qm.open_queue(names.AWAITING_FINAL_ACK))) == 4
    finally:
        qm.close()


def test_delete_sent_deletes_in_one_transaction_and_skips_what_is_gone(tmp_path: Path) -> None:
    qm = QueueManager(tmp_path / "qm")
    dest = "DIRECT=TCP:127.0.0.9\\PRIVATE$\\plain"
    ids = [lid for _u, lid in qm.send_many_ids(dest, [MessageRecord(body=b"x" * (i + 1)) for i in range(5)])]
    handle = qm.open_queue(dest)
    batches = qm.store.stats.batches
    gone = max(ids) + 1000  # never existed (or expired meanwhile)
    assert qm.sequence_store().delete_sent(handle, [ids[0], ids[2], ids[4], gone]) == 3
    assert qm.store.stats.batches == batches + 1
    rec = qm.get_queue(handle)
    assert (rec.msg_count, rec.total_bytes) == (2, 2 + 4)  # bodies of 2 and 4 bytes remain
    assert [m.lookup_id for m in qm.peek_range(handle, 0, 10)] == [ids[1], ids[3]]
    qm.close()
