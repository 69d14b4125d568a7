"""B's store work on received packets (``store_packet_arrivals``) stores exactly what
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
from openmsmq.qm.arrival import store_arrivals, store_packet_arrivals
from openmsmq.qm.transfer_codec import arrival_rows, message_from_packet, packet_from_message
from openmsmq.store import ops
from openmsmq.store.records import IncomingSequenceState, Message
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
        Message(body=bytes([i % 256]) * (100 + i), tx_sequence_number=i, tx_previous_sequence_number=i - 1,
                id_uniquifier=i, final_ack_required=i % 2 == 0, **common)  # type: ignore[arg-type]
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
        real = qm.accept_arrival_rows

        def spy(*args: Any) -> list[int]:
            rows_path.append(1)
            return real(*args)

        monkeypatch.setattr(qm, "accept_arrival_rows", spy)
        fast = store_packet_arrivals(qm, "private$\\a", packets, dest, _state(20))
        # Only the plain messages take the rows path (a Label still does: arrival_rows
        # converts that row through the reference path).
        assert bool(rows_path) == (fields in ({}, {"label": "hello"}, {"priority": 3}))
        state_fast = qm.incoming_sequences()
        ref = store_arrivals(qm, "private$\\b", [message_from_packet(p, dest) for p in packets], _state(20))
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
            qm.accept_arrival_rows("private$\\q", arrival_rows(packets, "DIRECT=" + WIRE), _state(20))
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
        res = store_packet_arrivals(qm, "private$\\q", packets, "DIRECT=" + WIRE, _state(20))
        assert len(res.stored) + len(res.rejected) == 20 and res.rejected
