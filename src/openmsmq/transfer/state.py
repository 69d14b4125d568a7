"""Values of the transfer between queue managers: configuration, per-outgoing-queue state,
store work items and status records (see :mod:`openmsmq.transfer.engine`)."""

from __future__ import annotations

import math
import uuid
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from openmsmq.protocol.events import SessionConfig
from openmsmq.protocol.incoming import Accepted, OrderAckConfig, SequenceKey
from openmsmq.protocol.outgoing import OutgoingSequence, ResendConfig, RetainedMessage
from openmsmq.qm.manager import QueueHandle
from openmsmq.store.packet_rows import RowEncoder
from openmsmq.store.records import IncomingSequenceState, MessageRecord
from openmsmq.transfer.codec import message_from_packet, packet_from_message
from openmsmq.transfer.sequences import SequenceUpkeep
from openmsmq.transfer.trust import AckOrigin, TrustConfig
from openmsmq.wire.ids import TxSequenceId
from openmsmq.wire.packets import UserMessage
from openmsmq.wire.userheader import DirectQueueFormatName, PrivateQueueFormatNameId

__all__ = [
    "RECEIVED_OVERHEAD",
    "AcceptBatch",
    "AcceptGroup",
    "IncomingStatus",
    "OutgoingStatus",
    "OutgoingTransfer",
    "PendingRelease",
    "ReleaseBatch",
    "Row",
    "SessionStatus",
    "StoreLocal",
    "StoreWork",
    "TransferConfig",
    "WallClock",
    "hop_host",
    "pad_outcome",
    "routes_from",
    "split_hop",
]


#: A message row as the store reads it (store.records.ROW_COLUMNS order).
Row = tuple[Any, ...]

#: What a received message waiting for the store costs beyond its body (its packet,
#: headers and acceptance objects: about a kilobyte of Python heap, as tracemalloc
#: shows). ``Transfer.unstored_bytes`` counts it per message, so
#: ``TransferConfig.unstored_bytes`` (mqqb.receive_buffer) bounds the memory; counted by
#: body size alone, small messages would hold several times what it names.
RECEIVED_OVERHEAD = 1024


@dataclass(slots=True)
class PendingRelease:
    """An outgoing queue's OrderAck'ed messages not yet deleted from the store: through
    which TxSequenceNumber, and where each chunk of ``TransferConfig.release_chunk``
    messages ends (:class:`~openmsmq.transfer.settlements.Settlements` deletes one chunk per ReleaseBatch)."""

    #: The highest TxSequenceNumber released.
    through: int = 0
    #: TxSequenceNumbers of every ``release_chunk``-th message released (chunk ends, in order).
    marks: deque[int] = field(default_factory=deque)
    #: Messages released since the last chunk end.
    counted: int = 0

    def add(self, released: tuple[RetainedMessage, ...], chunk: int) -> None:
        """Record ``released`` (one Released event's messages, in increasing order)."""
        self.through = max(self.through, released[-1].tx_sequence_number)
        total = self.counted + len(released)
        if total >= chunk:
            self.marks.extend([om.tx_sequence_number for om in released[chunk - self.counted - 1 :: chunk]])
        self.counted = total % chunk

    def next_step(self) -> tuple[int, bool]:
        """(through which TxSequenceNumber the next deletion goes, whether it is the last)."""
        step = self.marks.popleft() if self.marks else self.through
        return step, step == self.through and not self.marks


def split_hop(hop: str, default_port: int) -> tuple[str, int]:
    """A next hop or peer as (host, port): ``host``, ``host:port`` or ``[v6]:port``."""
    if hop.startswith("["):
        host, _, rest = hop[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") else default_port
    if hop.count(":") == 1:
        host, _, port = hop.partition(":")
        return host, int(port)
    return hop, default_port


def routes_from(pairs: Mapping[str, str] | Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """Normalise static routes (destination host → next-hop host) for :class:`TransferConfig`."""
    items = pairs.items() if isinstance(pairs, Mapping) else pairs
    return tuple((d.lower(), h.lower()) for d, h in items)


def hop_host(hop: str) -> str:
    """The host of a next hop or peer (:func:`split_hop`), lowercased: what a refusal is
    kept by, whichever port a route names."""
    return split_hop(hop, 0)[0].lower()


@dataclass(frozen=True, slots=True)
class TransferConfig:
    """How a QM transfers messages.

    ``local_addresses``: the hosts that name this QM in DIRECT=TCP: format names (its
    listen / advertised addresses); ``routes``: static routes (destination host, or the
    GUID of a destination QM for ``PRIVATE=<guid>\\n`` names, → next-hop host);
    ``batch_size``: messages loaded from an outgoing queue per read;
    ``max_in_flight``: loaded, unacknowledged messages per outgoing queue (it must
    cover what is sent while the receiver postpones its OrderAck, up to
    MaximumOrderAckDelay: a sender that reaches it waits for the OrderAck, which comes
    only OrderAckTimeout after the stream paused); ``load_per_poll``: messages loaded
    per outgoing queue by one :meth:`Transfer.poll` call; ``backlog``: messages of an
    outgoing queue converted into packets ahead of its open session's window, at most
    (at least twice the session window is used): loading pauses there and resumes, a
    window's worth at a time, as SessionAcks send them (``Transfer.refill``), so packets
    are built shortly before they are sent instead of for the whole committed backlog;
    ``queue_refresh``: seconds between looks for new outgoing queues, at least;
    ``queue_refresh_per_queue``: and at least this many seconds per queue listed at the
    last look (reading the queue list costs a few microseconds per queue: this bounds its
    share of a core whatever the number of queues);
    ``sequence_quarantine``: seconds a TxSequenceID stays reserved to the outgoing queue
    that used it last (see ``Sender.sequence_owner``); ``send_insecure_nacks``:
    SendInsecureNacks for arrival NACKs; ``queued_bytes``: message bytes an outgoing
    queue holds in memory, about: loaded and unsent while no session is open, else
    held by its session (waiting for the window, or sent and waiting for a
    SessionAck: ``Session.unacked_bytes``; while no session is open each loaded message
    counts about 1 KiB more, what its objects take); the counts above apply too, this
    bound matters for large messages (one message always goes, whatever its size);
    ``release_chunk``: OrderAck'ed messages of an outgoing queue deleted by one store
    transaction, at most, and FinalAcks or SessionAck'ed messages settled by one (one
    OrderAck may release ``max_in_flight``; each turn holds the store's writer, and a
    commit queued behind it waits for it; see ``Settlements``); ``unstored_bytes``: received message
    bytes waiting for the store above which the driver stops reading
    (``Transfer.reading_wanted``).
    """

    local_addresses: tuple[str, ...] = ("127.0.0.1",)
    routes: tuple[tuple[str, str], ...] = ()
    batch_size: int = 500
    max_in_flight: int = 200_000
    load_per_poll: int = 2_000
    backlog: int = 512
    queue_refresh: float = 0.1
    queue_refresh_per_queue: float = 0.0005
    sequence_quarantine: float = 30.0
    queued_bytes: int = 32 * 1024 * 1024
    release_chunk: int = 1_000
    #: Seconds between reads of the store's highest LookupIdentifier by the polls, at
    #: most: commits of this process are seen without a read (``Sender.poll``), those of
    #: another process on the data directory within this interval.
    commit_check: float = 0.05
    unstored_bytes: int = 64 * 1024 * 1024
    #: SendInsecureNacks (MS-MQQB 3.1.1.3): also send the admin NACKs that disclose the
    #: queue (NACK_BAD_DST_Q, access / security classes, 3.1.7.15). FinalAcks always go.
    send_insecure_nacks: bool = False
    session: SessionConfig = field(default_factory=SessionConfig)
    order_ack: OrderAckConfig = field(default_factory=OrderAckConfig)
    resend: ResendConfig = field(default_factory=ResendConfig)
    #: Whom the transfer trusts for what (docs/security.md).
    trust: TrustConfig = field(default_factory=TrustConfig)

    def routed(self, host: str) -> bool:
        """A static route names destination ``host`` (it may be relayed, and its messages
        leave through the route's next hop)."""
        low = host.lower()
        return any(dest == low for dest, _ in self.routes)

    def next_hop(self, host: str) -> str:
        """The next hop for destination ``host``: a static route, else the host itself."""
        low = host.lower()
        for dest, hop in self.routes:
            if dest == low:
                return hop
        return low

    def next_hop_for_qm(self, qm: uuid.UUID) -> str | None:
        """The static route whose destination is the QM GUID ``qm`` (written with or
        without braces), for ``PRIVATE=<guid>\\n`` format names; None when there is none."""
        for dest, hop in self.routes:
            if dest.strip("{}") == str(qm):
                return hop
        return None


class OutgoingTransfer:
    """One outgoing queue: what is loaded from the store and its OutgoingSequence."""

    def __init__(
        self,
        queue_id: int,
        format_name: str,
        wire_name: str,
        host: str,
        next_hop: str,
        handle: QueueHandle,
        resend: ResendConfig,
        private: tuple[uuid.UUID, int] | None = None,
    ) -> None:
        self.queue_id = queue_id
        self.format_name = format_name
        self.wire_name = wire_name
        #: One destination value shared by every packet of this queue: the direct name,
        #: or for ``PRIVATE=<guid>\\n`` (``private`` = (guid, n)) the PrivateQueueFormatNameId
        #: n, with the GUID as the packets' QueueManagerAddress (MS-MQMQ 2.2.18.1.5.1).
        self.wire_destination: DirectQueueFormatName | PrivateQueueFormatNameId
        self.destination_qm: uuid.UUID | None = None
        if private is None:
            self.wire_destination = DirectQueueFormatName(wire_name)
        else:
            self.destination_qm, number = private
            self.wire_destination = PrivateQueueFormatNameId(number)
        self.host = host
        self.next_hop = next_hop
        self.handle = handle
        self.seq = OutgoingSequence(0.0, config=resend)
        #: Loaded and not yet released, by LookupIdentifier: the stored row of a
        #: transactional message (its packet is encoded from it), the Message of a
        #: non-transactional one; None once a transactional message was sent (its content
        #: is read back for a resend), so a large window of retained messages costs little
        #: memory.
        self.messages: dict[int, Row | MessageRecord | None] = {}
        #: Encodes this queue's stored rows into packets (store.packet_rows.row_encoder), made
        #: at the first send (it needs the QM's GUID).
        self.encode_row: RowEncoder | None = None
        #: Non-transactional messages loaded, in order (released by SessionAck).
        #: A dict used as an ordered set (LookupIdentifier -> None): a SessionAck removes
        #: what it acknowledged in O(1) each (a list made each SessionAck walk every
        #: loaded message: 100,000 loaded while the peer was away drained at 2/3 speed).
        self.plain: dict[int, None] = {}
        self.loaded_through = 0
        self.connected = False
        self.waiting = 0
        self.last_acked: tuple[TxSequenceId, int] | None = None
        self.blocked_logged = False
        #: Loading paused on a full session backlog (resumed by Transfer.refill).
        self.held = False
        #: No retained transactional row expires before this (s since 1970): a lower
        #: bound kept at load, reset when nothing is retained, so that the send path
        #: checks expiry per row only when one may be due (MS-MQQB 3.1.7.1.2).
        self.earliest_expiry = math.inf
        #: The rest of the last Transmit, waiting for room in the session (Transfer.refill),
        #: whether a message of it was removed (the rest is bridged) and whether it resends.
        self.pending: deque[RetainedMessage] = deque()
        self.pending_bridged = False
        self.pending_resend = False
        #: Mean stored size of the messages of the last read (0 before the first): turns
        #: the byte bound ``TransferConfig.queued_bytes`` into message counts.
        self.mean_size = 0
        #: The sender's commit mark (``Sender._commit_mark``: this process's last committed
        #: LookupIdentifier, the store's highest one) when a load of this queue last found
        #: nothing more to load (None: it may have more). While the mark is still this
        #: value nothing was committed since, so a poll skips the queue (identifiers grow
        #: in commit order, in every process: Store).
        self.caught_up: tuple[int, int] | None = None
        #: The TxSequenceID of the transactional messages this queue loaded last (its
        #: entry in the sender's by-sequence index, which holds one per queue).
        self.loaded_sequence: TxSequenceId | None = None
        #: Suspended by an operator (MSMQ's "Pause" of an outgoing queue): no message is
        #: loaded for sending and no session is dialled for it (Transfer.suspend_outgoing).
        self.suspended = False

    @property
    def has_work(self) -> bool:
        """Messages wait for a session to the next hop (none while suspended)."""
        return not self.suspended and (bool(self.messages) or self.waiting > 0)

    def packet(self, m: MessageRecord, source_qm: uuid.UUID, previous: int | None) -> UserMessage:
        """The UserMessage for ``m``."""
        return packet_from_message(m, self.wire_destination, source_qm, previous, self.destination_qm)


@dataclass(frozen=True, slots=True)
class AcceptGroup:
    """Accepted messages of one sequence for one queue, stored with ``state`` in one op.

    They travel as the received packets: the store work builds their rows straight from
    them (:func:`openmsmq.transfer.arrival.plain_packet_rows`, else
    :func:`~openmsmq.transfer.arrival.store_packet_messages`)."""

    queue: str
    key: SequenceKey
    packets: tuple[UserMessage, ...]
    #: The acceptances, in order: reported back to the protocol when durable.
    accepted: tuple[Accepted, ...]
    state: IncomingSequenceState

    @property
    def messages(self) -> tuple[MessageRecord, ...]:
        """The messages as they are stored (built on each access: for tests and the simulator)."""
        dest = self.key.destination
        return tuple([message_from_packet(p, dest) for p in self.packets])


@dataclass(frozen=True, slots=True)
class AcceptBatch:
    """One batch of accepted incoming transactional messages (group commit)."""

    groups: tuple[AcceptGroup, ...]
    #: Body bytes of its messages (Transfer.unstored_bytes).
    nbytes: int = 0
    #: RejectCount / LastAccessTime of sequences whose last message was rejected, written
    #: after the groups: (sender QM, destination, RejectCount, LastAccessTime).
    rejects: tuple[tuple[uuid.UUID, str, int, float], ...] = ()


@dataclass(frozen=True, slots=True)
class ReleaseBatch:
    """OrderAck'ed messages to delete from outgoing queues: (format name, up to number),
    and session-acknowledged non-transactional ones: (format name, LookupIdentifier)."""

    releases: tuple[tuple[str, int], ...]
    deletes: tuple[tuple[str, int], ...] = ()
    #: FinalAcks to apply after the releases (MS-MQQB 3.1.5.7): (TxSequenceID value,
    #: TxSequenceNumber, MessageID, class), see QueueManager.settle_final_acks.
    settles: tuple[tuple[int, int, int, int], ...] = ()
    #: Run the QM's expiry pass at this wall-clock time before the releases: a message
    #: found expired before it was sent (MS-MQQB 3.1.7.1.2) is NACKed / dead-lettered
    #: before an OrderAck for a later one of its sequence could delete it.
    expire_now: float | None = None
    #: Messages that cannot be put into a packet: (format name, LookupIdentifier), moved
    #: to the dead-letter queues (class NACK_BAD_DST_Q) before the releases, for the
    #: same reason as ``expire_now``.
    dead_letters: tuple[tuple[str, int], ...] = ()
    #: Where each FinalAck of ``settles`` came from (None: not checked), for those no
    #: outgoing sequence in memory held: the store checks them against the message they
    #: match (Transfer, ``ack-origin``).
    settle_origins: tuple[AckOrigin | None, ...] = ()
    #: FinalAcks of messages no OrderAck covered: (format name, LookupIdentifier,
    #: MessageID, class), settled from their outgoing queue before the releases
    #: (QueueManager.settle_outgoing), for the same reason.
    final_settles: tuple[tuple[str, int, int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class StoreLocal:
    """Non-transactional messages for local queues: (queue, message, connection, recoverable no.),
    and those this QM stores to forward."""

    items: tuple[tuple[str, MessageRecord, int, int | None], ...]
    #: Messages disregarded on receipt (MS-MQQB 3.1.5.8.2 / 3.1.5.8.3 / 3.1.7.1.2, or a hop
    #: count exceeded as an intermediate): (message, NACK class, AckSession of its sender's
    #: FinalAcks), whose NACKs to enqueue (openmsmq.transfer.arrival.refuse).
    refusals: tuple[tuple[MessageRecord, int, object], ...] = ()
    #: Recoverable messages passed on (store and forward): (format name of their
    #: destination, message, connection, recoverable no.), into its outgoing queue.
    forwards: tuple[tuple[str, MessageRecord, int, int | None], ...] = ()
    #: OrderAcks to enqueue (MS-MQQB 3.1.7.17): (transAcknowledgment, DestinationForAck).
    acks: tuple[tuple[MessageRecord, str], ...] = ()


StoreWork = AcceptBatch | ReleaseBatch | StoreLocal | SequenceUpkeep


@dataclass(frozen=True, slots=True)
class OutgoingStatus:
    """Status of one outgoing queue (for ``openmsmq status``)."""

    format_name: str
    next_hop: str
    #: Messages in the outgoing queue at the last look (store count).
    waiting: int
    #: Loaded and not yet released.
    in_flight: int
    #: Last (TxSequenceID, TxSequenceNumber) released by an OrderAck, this run.
    last_acked: tuple[TxSequenceId, int] | None
    #: Last sent, not yet OrderAck'ed.
    last_unacked: tuple[TxSequenceId, int] | None
    connected: bool
    #: When the connector retries (driver clock), if it is waiting.
    retry_at: float | None
    #: False when no route to its QM is known yet (a PRIVATE=<guid> name): not transferred.
    routed: bool = True
    #: Of the open session to its next hop: the send window (packets) and the handshake
    #: round trip (s; None when the peer opened the session). None when not connected.
    window: int | None = None
    round_trip: float | None = None
    #: Messages the destination rejected since the QM started (their negative FinalAcks),
    #: by Message.Class name (MS-MQQB 3.1.7.17): (name, count), by name.
    rejected: tuple[tuple[str, int], ...] = ()
    #: Suspended by an operator (Transfer.suspend_outgoing).
    suspended: bool = False


@dataclass(frozen=True, slots=True)
class SessionStatus:
    """One MS-MQQB connection and its session (for the console's sessions page)."""

    peer: str
    #: The socket's peer IP.
    address: str
    #: ``initiator`` (this QM dialled) or ``acceptor``.
    role: str
    #: The handshake finished.
    open: bool
    #: The peer's QM GUID (ClientGuid / ServerGuid; nil GUID before the handshake).
    remote_qm: uuid.UUID
    #: Send window (packets) and handshake round trip (s; None when the peer dialled).
    window: int
    round_trip: float | None
    #: A TLS connection whose certificate names the peer's QM GUID.
    tls: bool


@dataclass(frozen=True, slots=True)
class IncomingStatus:
    """Status of one incoming transactional sequence."""

    source_qm: uuid.UUID
    destination: str
    #: IncomingTxSequenceID / IncomingTxSequenceNumber (durable).
    tx_sequence_id: TxSequenceId
    tx_sequence_number: int
    reject_count: int
    #: The message it last rejected since its last acceptance, in this run: (reason,
    #: TxSequenceID, TxSequenceNumber, PreviousTxSequenceNumber); None when none was.
    last_rejected: tuple[str, TxSequenceId, int, int] | None = None


class WallClock:
    """Wall clock minus the driver's clock (``now``), shared by the parts of a transfer:
    what is persisted or compared with message times (IncomingTransactionalTransferInfo.
    LastAccessTime, expiry) is wall-clock UTC seconds, the QM's clock, while the protocol
    keeps ``now`` for its timers. The transfer refreshes it on every poll, so a wall-clock
    step is followed within one poll."""

    __slots__ = ("offset",)

    def __init__(self, offset: float) -> None:
        self.offset = offset


def pad_outcome(outcome: list[BaseException | None] | BaseException, n: int) -> list[BaseException | None]:
    """A store work item's outcomes, one per item: one exception for all of it when the
    call itself failed, None (durable) for items the list does not reach."""
    if isinstance(outcome, BaseException):
        return [outcome] * n
    return list(outcome) + [None] * (n - len(outcome))
