"""The sending side of one MS-MQQB session: its counters, its window and what awaits a
session acknowledgment (MS-MQQB 3.1.1.3.1, 3.1.5.5, 3.1.7.1), sans-I/O.

:class:`SendWindow` holds the packets given to the session, sends no more than the window
allows (the smaller of the session's own WindowSize and the peer's advertised one),
numbers what it sends (MessageSentCount, RecoverableMessageSentCount) and releases the
non-transactional messages a received SessionHeader acknowledges. The
:class:`~openmsmq.protocol.session.Session` that holds it checks the header's counts
against its own receipts and runs the timers. No I/O, no clock.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from itertools import accumulate

from openmsmq.errors import RemoteProtocolError
from openmsmq.protocol.events import UserMessagePacket
from openmsmq.protocol.session_acks import AwaitingAck, covered_by_ack
from openmsmq.wire.constants import DeliveryMode
from openmsmq.wire.headers import SessionHeader
from openmsmq.wire.packets import UserMessage

__all__ = ["EncodedRun", "SendWindow"]

_U16 = 0x10000
#: How far the numbers of recoverable messages sent may run ahead of the oldest one the
#: peer received but has not yet acknowledged as stored. RecoverableMsgSeqNumber is 16
#: bits (MS-MQQB 2.2.1): a number reused while its first message still waited for its
#: stored-acknowledgment made the two indistinguishable, and the older one was never
#: released (a receiver whose store lagged a whole number space behind its receipts left
#: those messages in the sender's outgoing queue for good). Half the number space.
_RECOVERABLE_AHEAD_MAX = 0x8000


class EncodedRun:
    """Encoded transactional UserMessages held by the window as one entry (see
    :meth:`SendWindow.extend_encoded`): ``packets[start:]`` wait."""

    __slots__ = ("packets", "start")

    def __init__(self, packets: list[bytes]) -> None:
        self.packets = packets
        self.start = 0


class SendWindow:
    """What one session sends and what awaits its session acknowledgment."""

    def __init__(self, window_size: int, peer: str) -> None:
        """``window_size``: this session's own WindowSize; ``peer`` names the peer in the
        errors of a SessionHeader that acknowledges what was never sent."""
        self.window_size = window_size
        self.peer = peer
        # Session counters (MS-MQQB 3.1.1.3.1), u16 on the wire.
        self.message_sent_count = 0
        self.recoverable_message_sent_count = 0
        #: ReceivedWindowSize: the peer's window, from its ConnectionParameters and then
        #: from each SessionHeader.
        self.received_window_size = window_size
        #: Awaiting session acknowledgment, in send order: an entry per message, or per
        #: run of encoded transactional messages sent together (``AwaitingAck.count``).
        self.awaiting_ack: deque[AwaitingAck] = deque()
        #: UnAckedMessageCount: the messages of :attr:`awaiting_ack`.
        self.unacked_count = 0
        #: Held back by the window, in order: (packet, handle) pairs and runs of encoded
        #: transactional messages.
        self.backlog: deque[tuple[UserMessagePacket | bytes, int] | EncodedRun] = deque()
        #: The messages of :attr:`backlog`.
        self.held_count = 0
        #: Encoded bytes of the messages awaiting a session acknowledgment.
        self.window_bytes = 0
        #: Session-acknowledged recoverable (non-transactional) messages whose persistence
        #: bit has not come yet: recoverable number -> handle.
        self.pending_recoverable: dict[int, int] = {}

    def window(self) -> int:
        """Packets this session may have unacknowledged (MS-MQQB 3.1.7.1)."""
        # As written the gate uses the own WindowSize; we also honour the peer's
        # advertised window (it signals memory pressure with 1, MS-MQMQ note <15>).
        return max(1, min(self.window_size, self.received_window_size or 1))

    def unacknowledged_handles(self) -> list[int]:
        """Handles of the non-transactional messages no SessionAck released (sent and
        awaiting one, or held by the window)."""
        out = [e.handle for e in self.awaiting_ack if not e.transactional]
        out += list(self.pending_recoverable.values())
        for item in self.backlog:
            if type(item) is EncodedRun:  # transactional
                continue
            packet, handle = item  # type: ignore[misc]
            if not isinstance(packet, bytes):
                message = packet if isinstance(packet, UserMessage) else packet.message
                if message.transaction is None:
                    out.append(handle)
        return out

    def extend(self, items: Iterable[tuple[UserMessagePacket | bytes, int]]) -> None:
        """Hold (packet, handle) pairs until the window lets them go (see
        :meth:`Session.send_user_messages` for the packets given as bytes)."""
        backlog = self.backlog
        before = len(backlog)
        backlog.extend(items)
        self.held_count += len(backlog) - before

    def extend_encoded(self, packets: list[bytes]) -> None:
        """Hold encoded transactional UserMessages (each recoverable, without a
        SessionHeader) as one entry: they are sent, counted and acknowledged exactly as
        the same packets given one by one to :meth:`extend`, a run at a time."""
        if packets:
            self.backlog.append(EncodedRun(packets))
            self.held_count += len(packets)

    def drain(self, out: list[bytes]) -> bool:
        """Append to ``out`` the encoded packets of the backlog the window lets go, each
        numbered and awaiting its acknowledgment. False when the backlog is empty or the
        window full (nothing looked at); True otherwise, even when the number space held
        them back (:data:`_RECOVERABLE_AHEAD_MAX`)."""
        backlog = self.backlog
        if not backlog:
            return False
        awaiting = self.awaiting_ack
        room = self.window() - self.unacked_count
        if room <= 0:
            return False
        sent = self.message_sent_count
        recoverable_sent = self.recoverable_message_sent_count
        moved = 0  # bytes of encoded packets taken from the backlog
        taken = 0  # messages taken from the backlog
        pending = self.pending_recoverable
        # The oldest recoverable number the peer received and has not acknowledged as
        # stored: the first key of pending_recoverable (insertion order). What is not yet
        # acknowledged as received is at most a window behind and needs no check.
        oldest = next(iter(pending)) if pending else None
        try:
            while backlog and room > 0:
                head = backlog[0]
                if type(head) is EncodedRun:
                    # A run of encoded transactional messages (recoverable): as many as the
                    # window and the number space allow, numbered and sent together.
                    k = min(room, len(head.packets) - head.start)
                    if oldest is not None:
                        ahead = (recoverable_sent - oldest) % _U16
                        k = min(k, _RECOVERABLE_AHEAD_MAX - ahead) if ahead < _RECOVERABLE_AHEAD_MAX else 0
                        if k == 0:
                            break  # resumes when stored-acknowledgments release the oldest ones
                    start = head.start
                    packets = (
                        head.packets
                        if start == 0 and k == len(head.packets)
                        else head.packets[start : start + k]
                    )
                    ends = list(accumulate(map(len, packets)))
                    awaiting.append(
                        AwaitingAck(
                            (sent + 1) % _U16, (recoverable_sent + 1) % _U16, True, 0, ends[-1], k, ends, 0
                        )
                    )
                    sent = (sent + k) % _U16
                    recoverable_sent = (recoverable_sent + k) % _U16
                    moved += ends[-1]
                    taken += k
                    self.unacked_count += k
                    out.extend(packets)
                    room -= k
                    head.start = start + k
                    if head.start == len(head.packets):
                        backlog.popleft()
                    continue
                room -= 1
                if oldest is not None and (recoverable_sent - oldest) % _U16 >= _RECOVERABLE_AHEAD_MAX:
                    break  # resumes when stored-acknowledgments release the oldest ones
                packet, handle = backlog.popleft()  # type: ignore[misc]
                taken += 1
                if type(packet) is bytes:  # the encoded form send_user_messages takes
                    # An encoded transactional UserMessage (see send_user_messages): DM is
                    # recoverable.
                    sent = (sent + 1) % _U16
                    recoverable_sent = (recoverable_sent + 1) % _U16
                    size = len(packet)
                    moved += size
                    awaiting.append(AwaitingAck(sent, recoverable_sent, True, handle, size))
                    self.unacked_count += 1
                    out.append(packet)
                    continue
                value: UserMessagePacket = packet  # type: ignore[assignment]  # not bytes (above)
                message = value if isinstance(value, UserMessage) else value.message
                data = value.encode()  # may raise LocalProtocolError: nothing counted then
                sent = (sent + 1) % _U16
                recoverable = None  # express
                if (message.user.flags >> 5) & 0x3 == DeliveryMode.RECOVERABLE:  # UserHeader.Flags.DM
                    recoverable_sent = (recoverable_sent + 1) % _U16
                    recoverable = recoverable_sent
                size = len(data)
                awaiting.append(AwaitingAck(sent, recoverable, message.transaction is not None, handle, size))
                self.unacked_count += 1
                self.window_bytes += size
                out.append(data)
        finally:
            self.message_sent_count = sent
            self.recoverable_message_sent_count = recoverable_sent
            self.window_bytes += moved
            self.held_count -= taken
        return True

    def acknowledge(self, h: SessionHeader) -> list[int]:
        """Take off what the SessionHeader ``h`` acknowledges (MS-MQQB 3.1.5.5.1-3.1.5.5.3)
        and return the handles of the non-transactional messages it releases. Raises
        :class:`RemoteProtocolError` for an AckSequenceNumber beyond MessageSentCount."""
        awaiting = self.awaiting_ack
        first = awaiting[0].sequence_number if awaiting else None
        covered = covered_by_ack(h.ack_sequence_number, first, self.unacked_count, self.message_sent_count)
        if covered is None:
            raise RemoteProtocolError(
                f"{self.peer}: SessionHeader.AckSequenceNumber {h.ack_sequence_number} "
                f"beyond MessageSentCount {self.message_sent_count}"
            )
        # The covered entries are the oldest ones: taken off the front; the rest stay
        # (the front of a run, when the acknowledgment ends inside it).
        # Only non-transactional entries are released by a SessionAck (3.1.5.5.2/3;
        # transactional never, seed 003): a transactional stream skips the bit set below.
        plain: list[AwaitingAck] = []
        released_bytes = 0
        left = covered
        popleft = awaiting.popleft
        while left:
            entry = awaiting[0]
            count = entry.count
            if count <= left:
                popleft()
                left -= count
                released_bytes += entry.size
                if not entry.transactional:
                    plain.append(entry)
                continue
            # The first ``left`` messages of a run: its byte ends give their size.
            ends = entry.ends
            assert ends is not None  # a run (count > 1) keeps its byte ends
            base = entry.offset
            done = ends[base + left - 1] - (ends[base - 1] if base else 0)
            released_bytes += done
            entry.size -= done
            entry.count = count - left
            entry.offset = base + left
            entry.sequence_number = (entry.sequence_number + left) % _U16
            entry.recoverable_number = (entry.recoverable_number + left) % _U16  # type: ignore[operator]
            left = 0
        self.unacked_count -= covered
        self.window_bytes -= released_bytes
        rec_acked: set[int] = set()
        # The flags say whether the header acknowledges stored messages: its base may be 0,
        # the number after 0xFFFF (RecoverableMsgSeqNumber is 16 bits and wraps). Reading
        # base 0 as "none" left the 31 messages after every wrap unreleased for good.
        if h.recoverable_msg_ack_flags and (plain or self.pending_recoverable):
            for bit in range(32):
                if h.recoverable_msg_ack_flags >> bit & 1:
                    rec_acked.add((h.recoverable_msg_ack_seq_number + bit) % _U16)
        handles: list[int] = []
        for entry in plain:
            # Express released by AckSequenceNumber, recoverable by the recoverable fields.
            if entry.recoverable_number is None or entry.recoverable_number in rec_acked:
                handles.append(entry.handle)
            else:
                # Delivered, not yet persisted by the peer: its bit comes in a later header.
                self.pending_recoverable[entry.recoverable_number] = entry.handle
        for n in rec_acked:
            handle = self.pending_recoverable.pop(n, None)
            if handle is not None:
                handles.append(handle)
        self.received_window_size = h.window_size
        return handles
