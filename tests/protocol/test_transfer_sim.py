"""Seeded end-to-end transfer through the three protocol pieces: exactly once, in order.

Sender QM: OutgoingSequence + Session (initiator). Receiver QM: IncomingSequences +
Session (acceptor) + a toy store that commits accepted messages in acceptance order and
reports durability late and out of order. The simulated network cuts connections in
the middle of packets; either QM may crash, losing everything not committed. After a
calm period every committed message must be in the destination exactly once, in
commit order, and the sender must have released all of them (DESIGN invariants 1, 3, 4).
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field

import pytest

from openmsmq.protocol.events import (
    EstablishmentComplete,
    OrderAckReceived,
    Role,
    TransactionalMessageAccepted,
)
from openmsmq.protocol.incoming import IncomingSequences, IncomingSequenceSnapshot, SequenceKey
from openmsmq.protocol.outgoing import OutgoingSequence, Released, ResendConfig, RetainedMessage, Transmit
from openmsmq.protocol.session import Session
from openmsmq.wire.headers import TransactionHeader
from openmsmq.wire.ids import TxSequenceId
from openmsmq.wire.packets import UserMessage
from openmsmq.wire.userheader import PrivateQueueFormatNameId

QM_A = uuid.UUID(int=0xA1)
QM_B = uuid.UUID(int=0xB2)
FAST = ResendConfig(short=1.0, medium=2.0, long=3.0, final=4.0)


def packet(m: RetainedMessage) -> UserMessage:
    return UserMessage.build(
        source_qm=QM_A,
        message_id=m.message_id,
        destination_queue=PrivateQueueFormatNameId(1),
        body=m.message_id.to_bytes(4, "little"),
        sent_time=0,
        destination_qm=QM_B,
        transaction=TransactionHeader(m.tx_sequence_id, m.tx_sequence_number, m.previous_tx_sequence_number),
    )


@dataclass
class Receiver:
    queue: list[int] = field(default_factory=list)  # committed message ids, in order
    state: dict[SequenceKey, IncomingSequenceSnapshot] = field(default_factory=dict)  # committed
    pending: list[tuple[SequenceKey, TxSequenceId, int, int, IncomingSequenceSnapshot]] = field(
        default_factory=list
    )
    registry: IncomingSequences = field(default_factory=IncomingSequences)

    def crash(self, now: float) -> None:
        self.pending.clear()
        self.registry = IncomingSequences.restore(self.state.values(), now)

    def commit_some(self, rng: random.Random, now: float) -> None:
        if not self.pending:
            return
        k = rng.randint(1, len(self.pending))
        batch, self.pending = self.pending[:k], self.pending[k:]
        for key, _sid, _no, mid, snap in batch:  # one store transaction, in acceptance order
            self.queue.append(mid)
            self.state[key] = snap
        reports = [(sid, no) for _k, sid, no, _m, _s in batch]
        rng.shuffle(reports)  # completion reports in any order
        self.registry.get(batch[0][0], now).messages_stored(reports, now)


def run(seed: int, n_messages: int = 40) -> None:
    rng = random.Random(seed)
    retained: list[RetainedMessage] = []  # the sender's durable outgoing table
    committed: list[int] = []
    seq = TxSequenceId(1000, 1)
    number = 0
    out = OutgoingSequence(0.0, config=FAST)
    rx = Receiver()
    a: Session | None = None
    b: Session | None = None
    now = 0.0
    calm_after = 400.0

    def drop_connection() -> None:
        nonlocal a, b
        if a is not None and b is not None:
            # deliver a random prefix of what was in flight, then cut
            da, db = a.data_to_send(), b.data_to_send()
            b.receive_data(da[: rng.randint(0, len(da))], now)
            a.receive_data(db[: rng.randint(0, len(db))], now)
        a = b = None
        out.connection_lost()

    def send(events: list[object]) -> None:
        for ev in events:
            if isinstance(ev, Transmit) and a is not None and a.is_open:
                for m in ev.messages:
                    a.send_user_message(packet(m), now)
            elif isinstance(ev, Released):
                for m in ev.messages:
                    retained.remove(m)

    for _step in range(20_000):
        now += 0.1
        calm = now > calm_after
        # -- the sender commits new messages
        if len(committed) < n_messages and rng.random() < 0.3:
            if out.all_order_acked and number and rng.random() < 0.3:
                seq, number = TxSequenceId(1000, seq.ordinal + 1), 0
            number += 1
            m = RetainedMessage(seq, number, number - 1, message_id=len(committed) + 1)
            committed.append(m.message_id)
            retained.append(m)
            send(list(out.add(m, now)))
        # -- faults
        if not calm:
            r = rng.random()
            if r < 0.01:
                drop_connection()
            elif r < 0.015:
                drop_connection()
                rx.crash(now)
            elif r < 0.02:
                drop_connection()
                out = OutgoingSequence(now, retained=list(retained), config=FAST)
        # -- connect
        if a is None:
            a = Session(Role.INITIATOR, QM_A, now, remote_qm=QM_B)
            b = Session(Role.ACCEPTOR, QM_B, now, incoming=rx.registry)
        assert b is not None
        # -- network: one round trip per step
        da = a.data_to_send()
        if da:
            b.receive_data(da, now)
        db = b.data_to_send()
        if db:
            a.receive_data(db, now)
        for ev_b in b.events():
            if isinstance(ev_b, TransactionalMessageAccepted):
                r_ = ev_b.result
                mid = int.from_bytes(ev_b.packet.body, "little")
                rx.pending.append((r_.key, r_.tx_sequence_id, r_.tx_sequence_number, mid, r_.state))
        for ev_a in a.events():
            if isinstance(ev_a, EstablishmentComplete):
                send(list(out.connection_made(now)))
            elif isinstance(ev_a, OrderAckReceived):
                send(list(out.order_ack_received(ev_a.tx_sequence_id, ev_a.tx_sequence_number, now)))
        if a.closed or b.closed:
            drop_connection()
            continue
        # -- receiver store and timers
        if rng.random() < 0.5:
            rx.commit_some(rng, now)
        for ack in rx.registry.handle_timer(now):
            if b.is_open:
                b.send_order_ack(ack, now)
        send(list(out.handle_timer(now)))
        a.handle_timer(now)
        b.handle_timer(now)
        if calm and len(committed) == n_messages and not retained and not rx.pending:
            break
    else:
        pytest.fail(f"seed {seed}: did not converge: {len(retained)} retained, queue {rx.queue}")
    assert rx.queue == committed, f"seed {seed}"


@pytest.mark.parametrize("seed", range(40))
def test_exactly_once_in_order_under_faults(seed: int) -> None:
    run(seed)
