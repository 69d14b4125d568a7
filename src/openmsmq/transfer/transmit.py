"""Transmission of an outgoing queue's messages on its next hop's session: stored rows
encoded into packets a chunk at a time, retained messages read back from the store for a
resend, and the messages that leave unsent (expired before they were sent, MS-MQQB
3.1.7.1.2; too large for a packet), which later messages of their sequence bridge
(MS-MQQB 3.1.7.1.3)."""

from __future__ import annotations

import logging
import struct
from typing import cast

from openmsmq.errors import LocalProtocolError, MQError
from openmsmq.observability.sink import MetricsSink
from openmsmq.protocol.outgoing import RetainedMessage
from openmsmq.qm.manager import QueueManager
from openmsmq.store.packet_rows import row_encoder
from openmsmq.store.records import MessageRecord, message_from_row
from openmsmq.store.rows import LOOKUP_ID, row_expire_at
from openmsmq.transfer.codec import may_exceed_packet, message_expire_at
from openmsmq.transfer.connections import Connections
from openmsmq.transfer.session import Conn
from openmsmq.transfer.settlements import Settlements
from openmsmq.transfer.state import OutgoingTransfer, Row, TransferConfig, WallClock

__all__ = ["Transmitter", "drop_unsent"]

log = logging.getLogger("openmsmq.transfer")


class Transmitter:
    """Hands outgoing messages to sessions as packets. What leaves unsent is recorded with
    ``settlements`` (the expiry pass, the dead-letter queues) before any later release of
    its queue. A test may wrap :meth:`transmit_chunk` and :meth:`reload` on an instance
    to watch what one chunk holds and how much one read brings back."""

    def __init__(
        self,
        qm: QueueManager,
        config: TransferConfig,
        connections: Connections,
        settlements: Settlements,
        wall: WallClock,
        metrics: MetricsSink,
    ) -> None:
        self._qm = qm
        self._batch_size = config.batch_size
        self._connections = connections
        self._settlements = settlements
        self._wall = wall
        self._metrics = metrics

    def transmit_chunk(
        self, t: OutgoingTransfer, conn: Conn, messages: list[RetainedMessage], resend: bool, now: float
    ) -> None:
        """Encode ``messages`` (of ``t``'s last Transmit) and hand them to ``conn``'s
        session in one window drain; those that expired, left the store or fit no packet
        leave the sequence instead (``t.pending_bridged`` says later ones bridge them)."""
        retained = t.messages
        # A transactional message's content is dropped once sent (the store keeps
        # it until the OrderAck): a resend reads it back.
        dropped = [om.handle for om in messages if om.handle in retained and retained[om.handle] is None]
        reloaded, complete = self.reload(t, dropped) if dropped else ({}, True)
        encode = t.encode_row
        if encode is None:
            encode = t.encode_row = row_encoder(t.wire_destination, self._qm.guid)
        # Encoded transactional packets: the session holds and numbers them a run at a time
        # (their handles never come back: a SessionAck releases no transactional message).
        out: list[bytes] = []
        wall = now + self._wall.offset
        # No retained row expires before t.earliest_expiry: the usual Transmit
        # skips the per-row expiry check (MS-MQQB 3.1.7.1.2) altogether.
        check = wall >= t.earliest_expiry
        bridged = t.pending_bridged
        try:
            for om in messages:
                handle = om.handle
                m = retained.get(handle) or reloaded.get(handle)
                if m is None:
                    if complete and handle in retained:
                        # It left the store unacknowledged (the QM's expiry pass, a
                        # purge): later messages bridge it (MS-MQQB 3.1.7.1.3).
                        drop_unsent(t, handle, om)
                        bridged = True
                    continue
                # MS-MQQB 3.1.7.1.2: not sent once expired (a row only looked at
                # when one retained row may be due, see ``check``).
                row: Row | None = None
                plain: MessageRecord | None = None
                if type(m) is tuple:
                    row = m
                    expire_at = row_expire_at(m) if check else None
                else:
                    plain = cast(MessageRecord, m)
                    expire_at = message_expire_at(plain)
                if expire_at is not None and wall >= expire_at:
                    self.expired_unsent(t, om)
                    bridged = True
                    continue
                if bridged:  # PreviousTxSequenceNumber over the removed ones
                    om = t.seq.effective(om)
                prev = om.previous_tx_sequence_number
                try:
                    data = encode(row, prev) if row is not None else None
                    if data is not None:
                        out.append(data)
                    else:  # a Message, or a rare row shape: the general conversion
                        msg = message_from_row(row) if row is not None else plain
                        assert msg is not None
                        # Encoded here (a transactional packet may be given as bytes),
                        # so one that cannot be is caught now, not in the session.
                        out.append(t.packet(msg, self._qm.guid, prev).encode())
                except (LocalProtocolError, struct.error) as exc:
                    self.unsendable(t, handle, exc, om)
                    bridged = True
                    continue
                retained[handle] = None
        finally:
            # One window drain for the whole Transmit (same packets, same order);
            # what was built goes out even if a later message fails to convert.
            conn.session.send_encoded(out, now)
        self._metrics.count_transmitted(t.queue_id, [om.handle for om in messages], now, resend)
        t.pending_bridged = bridged

    def reload(self, t: OutgoingTransfer, handles: list[int]) -> tuple[dict[int, Row], bool]:
        """Read back retained messages (by LookupIdentifier) for a resend, as stored rows:
        range reads from the lowest, in LookupIdentifier order, up to the highest. Also
        whether the reads completed (a handle then missing left the store)."""
        want = set(handles)
        found: dict[int, Row] = {}
        after, top = min(want) - 1, max(want)
        complete = True
        while want and after < top:
            try:
                batch = self._qm.peek_range_rows(t.handle, after, self._batch_size, through=top)
            except MQError as exc:
                log.warning("outgoing queue %s: reading back for a resend: %s", t.format_name, exc)
                complete = False
                break
            if not batch:
                break
            for row in batch:
                lookup_id = row[LOOKUP_ID]
                if lookup_id in want:
                    want.discard(lookup_id)
                    found[lookup_id] = tuple(row)
            after = batch[-1][LOOKUP_ID]
        if want and complete:
            log.info("outgoing queue %s: %d retained messages left the store", t.format_name, len(want))
        return found, complete

    def expired_unsent(self, t: OutgoingTransfer, om: RetainedMessage) -> None:
        """MS-MQQB 3.1.7.1.2: a message whose TimeToReachQueue (or TimeToBeReceived) passed
        before it was sent is not sent. It leaves the sequence (later messages bridge it,
        3.1.7.1.3) and the QM's expiry pass, run before the next release of this queue
        (``ReleaseBatch.expire_now``), NACKs and dead-letters it, so an OrderAck for a
        later message cannot delete it unreported."""
        drop_unsent(t, om.handle, om)
        self._settlements.expire()
        log.info("outgoing queue %s: message %d expired before it was sent", t.format_name, om.handle)

    def unsendable(
        self, t: OutgoingTransfer, handle: int, exc: BaseException, om: RetainedMessage | None = None
    ) -> None:
        """A message that cannot be put into a packet (say one over the 4 MiB PacketSize
        limit, stored before the send path refused such messages) would hold up its
        sequence for ever: it leaves the sequence (later messages bridge it, MS-MQQB
        3.1.7.1.3) and is moved to the dead-letter queues with class NACK_BAD_DST_Q by
        the next release, before an OrderAck for a later message could delete it."""
        drop_unsent(t, handle, om)
        self._settlements.dead_letter(t.queue_id, handle)
        log.error(
            "outgoing queue %s: message %d cannot be sent (%s); it goes to the dead-letter queue",
            t.format_name, handle, exc,
        )  # fmt: skip

    def transmit_plain(
        self, t: OutgoingTransfer, msgs: list[MessageRecord], now: float, *, resend: bool
    ) -> None:
        """Send non-transactional messages of ``t`` on its next hop's open session (none: they
        wait for the next one), each as its own packet with a session handle."""
        conn = self._connections.open_to(t.next_hop)
        if conn is None:
            return
        wall = now + self._wall.offset
        expired = [m for m in msgs if (at := message_expire_at(m)) is not None and wall >= at]
        if expired:  # MS-MQQB 3.1.7.1.2, as _expired_unsent for non-transactional messages
            for m in expired:
                drop_unsent(t, m.lookup_id)
            self._settlements.expire()
            msgs = [m for m in msgs if m not in expired]
        sent = []
        for m in msgs:
            try:
                packet = t.packet(m, self._qm.guid, None)
                if may_exceed_packet(m, t.format_name):
                    packet.encode()  # raises if it really does not fit one packet
            except (LocalProtocolError, struct.error) as exc:
                self.unsendable(t, m.lookup_id, exc)
                continue
            conn.session.send_user_message(packet, now, handle=m.lookup_id)
            sent.append(m.lookup_id)
        self._metrics.count_transmitted(t.queue_id, sent, now, resend)


def drop_unsent(t: OutgoingTransfer, handle: int, om: RetainedMessage | None = None) -> None:
    """Forget a loaded message that will not be sent (expired, unsendable): out of the
    sequence when it is transactional (``om``; later messages bridge it, MS-MQQB
    3.1.7.1.3) and out of what is loaded. The store removes it with the next release."""
    if om is not None:
        t.seq.remove(om.tx_sequence_id, om.tx_sequence_number)
    t.messages.pop(handle, None)
    t.plain.pop(handle, None)
