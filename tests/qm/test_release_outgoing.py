"""release_outgoing(return_ids=False), the transfer's cheaper range release: the same
rows go, the same counters and sequence state result as with the listed release."""

from __future__ import annotations

from pathlib import Path

import pytest

from openmsmq.qm import Message, QueueHandle, QueueManager

DEST = "DIRECT=TCP:192.0.2.9\\private$\\orders"


def _outgoing(tmp_path: Path, name: str) -> tuple[QueueManager, QueueHandle]:
    qm = QueueManager(tmp_path / name)
    with qm.begin() as tx:
        qm.send_many(DEST, [Message(body=b"x" * (i + 1), label="l" * i) for i in range(5)], tx)
    wanted = Message(body=b"journal", positive_journaling=True)  # moved aside, not deleted
    with qm.begin() as tx:
        qm.send_many(DEST, [wanted, Message(body=b"last")], tx)
    return qm, qm.open_queue(DEST)


@pytest.mark.parametrize("up_to", [0, 3, 6, 7])
def test_same_result_without_the_id_list(tmp_path: Path, up_to: int) -> None:
    listed, out_l = _outgoing(tmp_path, "listed")
    counted, out_c = _outgoing(tmp_path, "counted")
    try:
        ids, state_l = listed.release_outgoing(out_l, up_to)
        moved, state_c = counted.release_outgoing(out_c, up_to, return_ids=False)
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
