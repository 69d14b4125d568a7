"""Planted bugs: subclasses of :class:`~openmsmq.protocol.incoming.IncomingSequence` that
break one MS-MQQB rule each, so a test can show that the simulator's checker catches it.

The simulator hands the chosen class to each node's incoming-sequence registry
(:meth:`~openmsmq.protocol.incoming.IncomingSequences.use_sequence_type`); production code
never sees them. They reach into the state of the class they break on purpose.
"""

from __future__ import annotations

from openmsmq.protocol.incoming import Accepted, IncomingSequence, Rejected, SendOrderAck
from openmsmq.wire.ids import TxSequenceId


class AckBeforeDurable(IncomingSequence):
    """The OrderAck covers accepted messages that are not durable yet (breaks the rule
    that an OrderAck acknowledges stored messages only, MS-MQQB 3.1.6.9)."""

    def handle_timer(self, now: float) -> SendOrderAck | None:
        deadline = self._order_ack_deadline
        if deadline is None or now < deadline or not self._incoming.tx_sequence_number:
            return super().handle_timer(now)
        self._order_ack_deadline = None
        if self._registry is not None:
            self._registry.armed.pop(self, None)
        self._last_order_ack_send_time = now
        return SendOrderAck(self._key, self._incoming.tx_sequence_id, self._incoming.tx_sequence_number)


class AcceptDuplicate(IncomingSequence):
    """The acceptance rule (MS-MQQB 3.1.5.8.6) is off by one: the last accepted number of
    the current TxSequenceID is accepted again."""

    def receive(
        self,
        tx_sequence_id: TxSequenceId,
        tx_sequence_number: int,
        previous_tx_sequence_number: int,
        now: float,
    ) -> Accepted | Rejected:
        incoming = self._incoming
        number = incoming.tx_sequence_number
        if number and tx_sequence_number == number and tx_sequence_id == incoming.tx_sequence_id:
            incoming.tx_sequence_number = number - 1  # seen as the next one: accepted again
            result = super().receive(tx_sequence_id, tx_sequence_number, previous_tx_sequence_number, now)
            incoming.tx_sequence_number = number
            return result
        return super().receive(tx_sequence_id, tx_sequence_number, previous_tx_sequence_number, now)


#: ``python -m tests.sim --bug NAME``: the planted bugs by name.
PLANTED_BUGS: dict[str, type[IncomingSequence]] = {
    "ack-before-durable": AckBeforeDurable,
    "accept-duplicate": AcceptDuplicate,
}
