"""Where a UserMessage received on one MS-MQQB session goes, sans-I/O.

:class:`ArrivalRouter` applies the routing decision of MS-MQQB 3.1.1.6.2 (final destination
or intermediate QM), the queue manager's trust rule on SourceQueueManager, its rules of
receipt (3.1.5.8.2, 3.1.5.8.3, 3.1.7.1.2) and, for a transactional message for this QM,
the acceptance rule (3.1.5.8.6) through the shared
:class:`~openmsmq.protocol.incoming.IncomingSequences` registry. Each packet becomes one
session event. The :class:`~openmsmq.protocol.session.Session` that holds the router
counts and acknowledges the packet first. :class:`RoutingPolicy` is what the queue
manager gives a session to decide trust and forwarding. No I/O, no clock.
"""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Callable
from typing import Protocol

from openmsmq.protocol.events import (
    FinalAckReceived,
    ForwardMessage,
    OrderAckReceived,
    SessionEvent,
    TransactionalMessageAccepted,
    TransactionalMessageRefused,
    TransactionalMessageRejected,
    UserMessagePacket,
    UserMessageReceived,
    destination_key,
)
from openmsmq.protocol.incoming import Accepted, IncomingSequence, IncomingSequences, SequenceKey
from openmsmq.protocol.session_acks import stored_before_ack
from openmsmq.wire.fast import fast_constructor
from openmsmq.wire.ids import NULL_GUID
from openmsmq.wire.packets import FinalAck, OrderAck, UserMessage

__all__ = ["ArrivalRouter", "RoutingPolicy"]

#: TransactionalMessageAccepted(...) without the frozen-dataclass __init__ (one per message).
_new_accepted_event = fast_constructor(TransactionalMessageAccepted)


class RoutingPolicy(Protocol):
    """A queue manager's rules for what one session's peer may claim and send, given to
    :class:`~openmsmq.protocol.session.Session` by its owner (the transfer: docs/security.md)."""

    def identity_refusal(self, remote_qm: uuid.UUID) -> str | None:
        """Why the peer's claim to be ``remote_qm`` is not accepted (the ``identity``
        rule), or None."""
        ...

    def source_refusal(self, source: uuid.UUID, remote_qm: uuid.UUID) -> str | None:
        """Why a packet whose SourceQueueManager is ``source`` may not come from the
        session's QM ``remote_qm`` (the ``source-qm`` rule), or None."""
        ...

    def forwards(self, destination: object, qm_address: uuid.UUID) -> bool | None:
        """Whether a packet whose QueueManagerAddress names this QM (or is NULL) still goes
        on to another QM because of its DestinationQueue (MS-MQQB 3.1.1.6.2): True
        forwards it; False keeps it here and lets the session skip the question for later
        packets with the same DestinationQueue object; None keeps this one packet here."""
        ...


class ArrivalRouter:
    """The routing and acceptance of the UserMessages one session receives."""

    def __init__(
        self,
        local_qm: uuid.UUID,
        incoming: IncomingSequences,
        events: deque[SessionEvent],
        refuse: Callable[[str, str, str], None],
        *,
        arrival_check: Callable[[UserMessage, float], int | None] | None = None,
        routing: RoutingPolicy | None = None,
    ) -> None:
        """``events``: the session's queue of events, where each routed packet's goes.
        ``refuse(rule, packet_type, detail)`` closes the session for a broken trust rule
        (:meth:`Session.refuse`). ``arrival_check`` and ``routing``: as
        :class:`~openmsmq.protocol.session.Session` takes them."""
        self.local_qm = local_qm
        self.incoming = incoming
        self._events = events
        self._refuse = refuse
        self._arrival_check = arrival_check
        self._routing = routing
        #: The session's peer QM (RemoteQMGuid) once established: the ``source-qm`` rule
        #: weighs each SourceQueueManager against it.
        self.remote_qm: uuid.UUID = NULL_GUID
        # (SourceQueueManager, DestinationQueue, QueueManagerAddress) -> SequenceKey.
        self._keys: dict[tuple[uuid.UUID, object, uuid.UUID], SequenceKey] = {}
        self._known_local: uuid.UUID = NULL_GUID
        #: The last DestinationQueue object the routing policy kept here (identity: the
        #: decoder shares direct-name objects, so the policy runs once per name).
        self._local_destination: object = None
        self._last_key: tuple[uuid.UUID, object, uuid.UUID, SequenceKey, IncomingSequence] | None = None
        #: The last SourceQueueManager object :meth:`_admit_source` let through (identity:
        #: the decoder shares GUID objects, so the check runs once per stream).
        self._admitted_source: object = None

    def identity_refusal(self, remote_qm: uuid.UUID) -> str | None:
        """Why the peer's claim to be ``remote_qm`` (ClientGuid of a request, ServerGuid of
        a response) is not accepted, or None (the routing policy's ``identity`` rule; with
        no policy every claim is accepted)."""
        routing = self._routing
        return None if routing is None else routing.identity_refusal(remote_qm)

    def forget_sequences(self) -> None:
        """Forget the sequence objects cached for the stream in progress (the QM dropped or
        replaced incoming sequences of its registry)."""
        self._last_key = None

    def _is_local(self, destination_qm: uuid.UUID) -> bool:
        # Final destination: QueueManagerAddress is this QM, or NULL for a direct format
        # name (protocol.md §11 item 11). Identity first: the decoder shares GUID objects.
        if destination_qm is self._known_local:
            return True
        if destination_qm == self.local_qm or destination_qm == NULL_GUID:
            self._known_local = destination_qm  # the decoder shares GUID objects
            return True
        return False

    def _admit_source(self, source: uuid.UUID, packet: UserMessagePacket) -> bool:
        """Whether a packet whose UserHeader.SourceQueueManager is ``source`` may be
        processed on this session (the routing policy's ``source-qm`` rule); a refused one
        closes the session."""
        routing = self._routing
        if routing is not None:
            refusal = routing.source_refusal(source, self.remote_qm)
            if refusal is not None:
                self._refuse("source-qm", type(packet).__name__, refusal)
                return False
        self._admitted_source = source
        return True

    def route(
        self, packet: UserMessagePacket, message: UserMessage, recoverable: int | None, now: float
    ) -> bool:
        """Turn one received packet (``message`` is its UserMessage, ``recoverable`` its
        RecoverableMessage number or None) into its event. True when the packet is an
        OrderAck or FinalAck for this QM, which the session acknowledges at once."""
        user = message.user
        source_qm = user.source_queue_manager
        if source_qm is not self._admitted_source and not self._admit_source(source_qm, packet):
            return False
        qm_address = user.queue_manager_address
        if qm_address is not self._known_local and not self._is_local(qm_address):
            # Intermediate QM (seed 003): pass on untouched, no sequence processing.
            self._events.append(ForwardMessage(packet, stored_before_ack(packet, message, recoverable)))
            return False
        destination = user.destination_queue
        if destination is not self._local_destination:
            routing = self._routing
            where = False if routing is None else routing.forwards(destination, qm_address)
            if where:
                self._events.append(ForwardMessage(packet, stored_before_ack(packet, message, recoverable)))
                return False
            if where is False:
                # Decided by the destination object alone: the decoder shares direct-name
                # objects, so the policy runs once per name, not per message.
                self._local_destination = destination
        # An OrderAck or FinalAck wraps its UserMessage; a plain UserMessage is its own message.
        if packet is not message and isinstance(packet, OrderAck):
            body = packet.body
            self._events.append(
                OrderAckReceived(message.source_qm, body.tx_sequence_id, body.tx_sequence_number, packet)
            )
            return True
        if packet is not message and isinstance(packet, FinalAck):
            fbody = packet.body
            self._events.append(
                FinalAckReceived(
                    message.source_qm,
                    fbody.tx_sequence_id,
                    fbody.tx_sequence_number,
                    fbody.message_id,
                    packet.message_class,
                    packet,
                )
            )
            return True
        tx = message.transaction
        if tx is None:
            self._events.append(UserMessageReceived(message, recoverable))
            return False
        check = self._arrival_check
        if check is not None and (refused := check(message, now)) is not None:
            # MS-MQQB 3.1.5.8: these rules come before Transactional Message Processing
            # (3.1.5.8.6) and end with "perform no further processing".
            self._events.append(TransactionalMessageRefused(message, refused))
            return False
        source, queue, qm = user.source_queue_manager, destination, qm_address
        last = self._last_key
        # The decoder shares GUID and direct-name objects, so consecutive messages of one
        # stream hit this identity check and skip hashing the (GUID, queue, GUID) tuple
        # and the registry lookup (a registry never drops a sequence: the object stays
        # the one IncomingSequences.get returns for the key).
        if last is not None and last[0] is source and last[1] is queue and last[2] is qm:
            seq = last[4]
        else:
            cache_key = (source, queue, qm)
            found = self._keys.get(cache_key)
            if found is None:
                key = SequenceKey(source, destination_key(queue, qm))
                if len(self._keys) < 1024:  # a session carries few streams; bound it anyway
                    self._keys[cache_key] = key
            else:
                key = found
            admitted = self.incoming.admit(key, now)
            if admitted is None:
                self._refuse(
                    "sequence-cap",
                    type(packet).__name__,
                    f"a new incoming sequence ({source}, {key.destination}) beyond the"
                    f" {self.incoming.max_sequences} this QM keeps (mqqb.max_incoming_sequences)",
                )
                return False
            seq = admitted
            self._last_key = (source, queue, qm, key, seq)
        result = seq.receive(tx.tx_sequence_id, tx.tx_sequence_number, tx.previous_tx_sequence_number, now)
        if type(result) is Accepted:  # or Rejected (neither has subclasses)
            self._events.append(_new_accepted_event(message, result))
        else:
            self._events.append(TransactionalMessageRejected(message, result))  # type: ignore[arg-type]
        return False
