"""Where the transactional acknowledgments of incoming sequences go (MS-MQQB 3.1.7.17):
the connection each sequence's messages last came on, this run, and the session facts
recorded with its durable state (RemoteQMAddress, DirectFormatSession), which outlive
the connection and a restart."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import replace

from openmsmq.protocol.incoming import SendOrderAck, SequenceKey
from openmsmq.store.records import IncomingSequenceState, MessageRecord
from openmsmq.transfer.acknowledgments import AckSession, build_transactional_acknowledgment
from openmsmq.transfer.arrival import session_of_state
from openmsmq.transfer.connections import Connections
from openmsmq.transfer.session import Conn, ack_session_of
from openmsmq.wire.constants import MessageClass

__all__ = ["AckSessions"]


class AckSessions:
    """The acknowledgment routes of one transfer's incoming sequences (their single owner)."""

    def __init__(self, connections: Connections, states: Iterable[IncomingSequenceState]) -> None:
        self._connections = connections
        #: (sender QM, destination lower-cased) -> where FinalAcks for its messages go.
        self._recorded: dict[tuple[object, str], AckSession] = {
            (s.sender_qm, s.destination.lower()): session_of_state(s) for s in states
        }
        #: Incoming sequence -> the connection its last message came on (this run).
        self._routes: dict[SequenceKey, int] = {}

    def route(self, key: SequenceKey, cid: int) -> None:
        """``key``'s messages come on connection ``cid`` now."""
        self._routes[key] = cid

    def forget(self, keys: Iterable[SequenceKey]) -> None:
        """The sequences were dropped (expired, reset): their connection routes go."""
        for key in keys:
            self._routes.pop(key, None)

    def connection_of(self, key: SequenceKey) -> Conn | None:
        """The connection ``key``'s last message came on, if it is still there."""
        return self._connections.get(self._routes.get(key, 0))

    def record(self, state: IncomingSequenceState) -> None:
        """``state`` is durable: later FinalAcks of its messages use its session facts."""
        self._recorded[(state.sender_qm, state.destination.lower())] = session_of_state(state)

    def for_message(self, m: MessageRecord) -> AckSession | None:
        """The :class:`AckSession` a FinalAck for ``m`` (a message that arrived over MS-MQQB
        into a local queue) uses, from its incoming sequence; None when unknown. Thread-safe
        enough for a removal listener on another thread (one dict read)."""
        return self._recorded.get((m.source_machine, m.destination_queue.lower()))

    def address_of(self, qm: uuid.UUID) -> str | None:
        """The previous hop the messages of QM ``qm`` last arrived from (RemoteQMAddress of
        one of its incoming sequences, durable), or None: the way back for its FinalAcks."""
        for s in self._recorded.values():
            if s.remote_qm_guid == qm and s.remote_qm_address:
                return s.remote_qm_address
        return None

    def order_ack(self, ack: SendOrderAck) -> tuple[MessageRecord, str] | None:
        """The transAcknowledgment Message (and its DestinationForAck) of ``ack``, an Order
        Ack Send Timer that fired (MS-MQQB 3.1.6.9, seed 000), built from the facts of the
        session the sequence's last message came on (:func:`ack_session_of`); None when
        nothing of the sequence is stored yet (the sender's next retransmission schedules
        one).

        3.1.6.9 sends it only "if the session from which the timer was started is not
        closed". Enqueued, it no longer needs that session; dropping it would leave the
        sender to its Transactional Ack Wait Timer (30 s, more after unanswered resends),
        or to a resend through an intermediate QM that may never come. So a closed
        session's facts, as recorded for the sequence's FinalAcks, address it
        (docs/conformance.md, seed 000)."""
        conn = self.connection_of(ack.key)
        if conn is not None and conn.open and not conn.session.closed:
            facts = ack_session_of(conn, ack.key.source_qm)
        else:
            recorded = self._recorded.get((ack.key.source_qm, ack.key.destination.lower()))
            if recorded is None:
                return None
            facts = recorded
        # The OrderAck Body's TxSequenceId is the acknowledged stream's IncomingTxSequenceID
        # where the seed names OutgoingTxSequenceID (protocol.md §11 item 2).
        session = replace(
            facts,
            outgoing_tx_sequence_id=ack.tx_sequence_id,
            incoming_tx_sequence_number=ack.tx_sequence_number,
        )
        return build_transactional_acknowledgment(MessageClass.ORDER_ACK, session)
