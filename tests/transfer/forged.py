"""A forged MS-MQQB peer for the trust tests: a :class:`~openmsmq.protocol.session.Session`
of the project's own, wired to one QM of a :class:`~tests.transfer.harness.Net`, that
claims whatever QM GUID and sends whatever packets a test builds."""

from __future__ import annotations

import itertools
import uuid

from openmsmq.protocol.events import Role
from openmsmq.protocol.session import Session
from openmsmq.wire.acks import FinalAck, FinalAckBody, OrderAck, OrderAckBody
from openmsmq.wire.constants import DeliveryMode
from openmsmq.wire.headers import TransactionHeader
from openmsmq.wire.ids import TxSequenceId
from openmsmq.wire.message import UserMessage
from openmsmq.wire.userheader import DirectQueueFormatName, PrivateQueueFormatNameId

from .harness import Net, Node

#: Private queue number of order_queue$ on every QM (MS-MQQB 3.1.7.17).
ORDER_QUEUE = 4
#: UserHeader.MessageID of the forged messages: unique in a test run (a QM drops a
#: message whose identity it already holds).
_MESSAGE_IDS = itertools.count(1)


class ForgedPeer:
    """Connects to ``target`` from ``address`` (the target sees an accepted connection
    from that address) and completes the MS-MQQB handshake as ``guid``."""

    def __init__(self, net: Net, target: Node, address: str, guid: uuid.UUID | None = None) -> None:
        self.net = net
        self.target = target
        self.address = address
        self.guid = guid or uuid.uuid4()
        now = net.clock.now
        self.session = Session(Role.INITIATOR, self.guid, now, peer=target.address)
        self.cid = target.transfer.connection_made(address, Role.ACCEPTOR, now, address=address)
        net.forged[(target.address, self.cid)] = self
        self.flush()
        net.settle()

    @property
    def open(self) -> bool:
        """The session is open (the target has not closed it)."""
        return self.session.is_open and (self.target.address, self.cid) in self.net.forged

    def deliver(self, data: bytes) -> None:
        """Bytes the target wrote to this peer: acknowledged at once (SessionAck), so the
        target's Session Ack Wait Timer never closes the session."""
        now = self.net.clock.now
        self.session.receive_data(data, now)
        self.session.pending_events.clear()
        self.session.flush_acknowledgments(now)
        self.flush()

    def flush(self) -> None:
        data = self.session.data_to_send()
        if data and (self.target.address, self.cid) in self.net.forged:
            self.target.transfer.data_received(self.cid, data, self.net.clock.now)

    def closed(self) -> None:
        """The target closed the connection."""
        self.session.connection_lost(self.net.clock.now)

    def send(self, packet: UserMessage | OrderAck | FinalAck) -> None:
        """Send ``packet`` on the open session, then let the network settle."""
        self.session.send_user_message(packet, self.net.clock.now)
        self.flush()
        self.net.settle()

    def order_ack(self, sequence: TxSequenceId, number: int, source: uuid.UUID | None = None) -> OrderAck:
        """An OrderAck for ``sequence`` up to ``number`` to the target's order queue,
        claiming to come from ``source`` (default: this peer's GUID)."""
        return OrderAck.build(
            OrderAckBody.for_number(sequence, number),
            source_qm=source or self.guid,
            destination_queue=PrivateQueueFormatNameId(ORDER_QUEUE),
            destination_qm=self.target.qm.guid,
        )

    def final_ack(
        self, sequence: TxSequenceId, number: int, message_id: int, message_class: int,
        source: uuid.UUID | None = None,
    ) -> FinalAck:  # fmt: skip
        """A FinalAck of ``message_class`` for message ``number`` of ``sequence``."""
        body = FinalAckBody(sequence, number, number - 1, self.target.qm.guid, message_id)
        return FinalAck.build(
            body,
            message_class,
            source_qm=source or self.guid,
            destination_queue=PrivateQueueFormatNameId(ORDER_QUEUE),
            destination_qm=self.target.qm.guid,
        )

    def transactional(
        self, queue: str, body: bytes, sequence: TxSequenceId, number: int, previous: int,
        source: uuid.UUID | None = None, host: str | None = None,
    ) -> UserMessage:  # fmt: skip
        """A transactional UserMessage for ``queue`` (``DIRECT=TCP:<host>\\<queue>``, the
        target's address by default) claiming to come from ``source`` (default: this
        peer's GUID)."""
        return UserMessage.build(
            source_qm=source or self.guid,
            message_id=next(_MESSAGE_IDS),
            destination_queue=DirectQueueFormatName(f"TCP:{host or self.target.address}\\{queue}"),
            body=body,
            sent_time=int(self.net.clock()),
            delivery_mode=DeliveryMode.RECOVERABLE,
            transaction=TransactionHeader(sequence, number, previous),
        )
