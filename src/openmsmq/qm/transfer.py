"""Transfer between queue managers: the queue manager composed with the MS-MQQB protocol.

Sans-I/O: no sockets, no threads, no clock (every input takes ``now``), so the same
code runs under asyncio (:mod:`openmsmq.net`) and under a deterministic simulator.

A :class:`Transfer` owns, for one :class:`~openmsmq.qm.manager.QueueManager`:

* one :class:`~openmsmq.protocol.session.Session` per TCP connection (the driver reports
  connections and bytes and writes :meth:`Transfer.data_to_send`);
* one :class:`OutgoingTransfer` per outgoing queue: it loads the committed,
  unacknowledged messages from the store in batches (numbers come from the store:
  TxSequenceID / TxSequenceNumber were assigned at commit), feeds them to an
  :class:`~openmsmq.protocol.outgoing.OutgoingSequence`, and deletes them from the
  outgoing queue only on the sequence's ``Released`` events, i.e. after the OrderAck
  (DESIGN invariant 3: a SessionAck never releases a transactional message);
* the shared :class:`~openmsmq.protocol.incoming.IncomingSequences` registry: accepted
  messages are stored with their new sequence state in ONE batched store operation
  per batch (group commit), and reported durable to the protocol only after it
  completed, which is when OrderAcks may cover them (seed 003).

Store work is explicit: :meth:`Transfer.next_store_work` hands out a work item,
the driver runs :meth:`Transfer.run_store_work` (blocking; thread-safe; on a worker
thread under asyncio) and reports back with :meth:`Transfer.store_work_done`. At
most one work item of each kind is in flight, so accepted messages of one sequence
commit in acceptance order, and whatever arrives meanwhile forms the next batch.
"""

from __future__ import annotations

import contextlib
import logging
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from openmsmq.errors import LocalProtocolError, MQError
from openmsmq.observability.sink import MetricsSink
from openmsmq.protocol.events import (
    ConnectionClosed,
    EstablishmentComplete,
    FinalAckReceived,
    ForwardMessage,
    OrderAckReceived,
    Role,
    SessionAckReceived,
    SessionConfig,
    SessionEvent,
    TransactionalMessageAccepted,
    TransactionalMessageRejected,
    UserMessagePacket,
    UserMessageReceived,
)
from openmsmq.protocol.incoming import (
    IncomingSequences,
    IncomingSequenceSnapshot,
    OrderAckConfig,
    SendOrderAck,
    SequenceKey,
)
from openmsmq.protocol.outgoing import (
    AwaitingFinalAck,
    FinalAckIgnored,
    IgnoreReason,
    OrderAckIgnored,
    OutgoingEvent,
    OutgoingMessage,
    Released,
    ResendConfig,
    Transmit,
)
from openmsmq.protocol.session import Session
from openmsmq.qm.acknowledgment import AckSession
from openmsmq.qm.arrival import hop_count_exceeded, session_of_state, store_arrivals
from openmsmq.qm.manager import QueueHandle, QueueManager
from openmsmq.qm.transfer_codec import _sequence_id, direct_name, message_from_packet, split_direct
from openmsmq.qm.transfer_state import (
    AcceptBatch,
    AcceptGroup,
    IncomingStatus,
    OutgoingStatus,
    OutgoingTransfer,
    ReleaseBatch,
    StoreLocal,
    StoreWork,
    TransferConfig,
)
from openmsmq.store.records import IncomingSequenceState, Message, QueueType
from openmsmq.wire._fast import fast_constructor
from openmsmq.wire.ids import NULL_GUID, TxSequenceId
from openmsmq.wire.packets import FinalAck, OrderAck, UserMessage
from openmsmq.wire.userheader import DirectQueueFormatName

__all__ = [
    "AcceptBatch",
    "IncomingStatus",
    "OutgoingStatus",
    "OutgoingTransfer",
    "ReleaseBatch",
    "StoreLocal",
    "StoreWork",
    "Transfer",
    "TransferConfig",
]

log = logging.getLogger("openmsmq.transfer")

#: MS-MQQB 3.1.5.8.2: a forwarded message whose hop count would exceed 0x1D is dropped.
_MAX_HOPS = 0x1D
#: OutgoingMessage(...) without the frozen-dataclass __init__ (one per message loaded).
_new_outgoing_message = fast_constructor(OutgoingMessage)
#: Highest LookupIdentifier the store hands out (order keys keep the priority above bit 56).
#: Reading an outgoing queue "through" it makes the store walk its (queue, order key)
#: index one priority band at a time: without a bound, its query scans and sorts the
#: whole queue on every read (quadratic in the backlog).
_LAST_LOOKUP_ID = (1 << 56) - 1
_BEYOND = IgnoreReason.BEYOND_SENT
#: Forwarded packets kept per next hop while no session to it is open.
_FORWARD_BUFFER = 100_000


class _TransferSession(Session):
    """A Session that also treats a DIRECT=TCP: destination on another host as "not for
    this QM" (MS-MQQB 3.1.1.6.2): direct names carry a NULL QueueManagerAddress, so the
    GUID alone cannot tell an intermediate hop from the final destination."""

    def __init__(self, *args: object, local_hosts: frozenset[str], **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self._local_hosts = local_hosts
        self._null_seen: object = NULL_GUID
        # Direct name -> "another host" (a session carries few destinations; bounded).
        self._remote_names: dict[str, bool] = {}

    def _route(self, packet: UserMessagePacket, message: UserMessage, recoverable: int, now: float) -> None:
        user = message.user
        dest = user.destination_queue
        qm = user.queue_manager_address
        if qm is not self._null_seen and qm == NULL_GUID:
            self._null_seen = qm  # the decoder's shared NULL GUID object: identity next time
        if qm is self._null_seen and isinstance(dest, DirectQueueFormatName):
            remote = self._remote_names.get(dest.name)
            if remote is None:
                parts = split_direct(dest.name)
                remote = parts is not None and parts[0] not in self._local_hosts
                if len(self._remote_names) < 1024:
                    self._remote_names[dest.name] = remote
            if remote:
                self._events.append(ForwardMessage(packet))
                return
        super()._route(packet, message, recoverable, now)


@dataclass(eq=False)
class _Conn:
    cid: int
    peer: str
    role: Role
    session: Session
    open: bool = False


@dataclass(slots=True)
class _Pending:
    """An accepted message waiting for its batch: its packet is converted to a stored
    message (and the sequence state to a store record) only when the batch is formed."""

    queue: str
    key: SequenceKey
    position: tuple[TxSequenceId, int]
    packet: UserMessage
    state: IncomingSequenceSnapshot
    #: RemoteQMAddress of the session it came on, and whether that peer is the sender QM
    #: (DirectFormatSession): where its FinalAcks go (MS-MQQB 3.1.7.17).
    peer: str = ""
    direct: bool = False


def _session_key_form(destination: str) -> str:
    # The store lower-cases IncomingTransactionalTransferInfo.FormatName; the session's
    # key spells the prefix upper-case ("DIRECT=tcp:..."): restore that form.
    prefix, sep, rest = destination.partition("=")
    return prefix.upper() + sep + rest if sep else destination


class Transfer:
    """Transfer of one queue manager's messages to and from its peers (sans-I/O).

    ``metrics`` receives the transfer's counts once per batch (default: the queue
    manager's :attr:`~openmsmq.qm.manager.QueueManager.metrics`)."""

    def __init__(
        self, qm: QueueManager, config: TransferConfig, now: float, *, metrics: MetricsSink | None = None
    ) -> None:
        self.qm = qm
        self.config = config
        self.metrics = metrics if metrics is not None else qm.metrics
        self.local_hosts = frozenset(h.lower() for h in config.local_addresses)
        qm.set_local_addresses(self.local_hosts)
        #: Wall clock minus the driver's clock (``now``): IncomingTransactionalTransferInfo.
        #: LastAccessTime is persisted as wall-clock UTC seconds (the QM's clock, the one
        #: that stamps ArrivedTime) while the protocol keeps ``now`` for its timers.
        #: Refreshed on every poll, so a wall-clock step is followed within one poll.
        self._wall_offset = qm.clock() - now
        snapshots = [
            IncomingSequenceSnapshot(
                SequenceKey(s.sender_qm, _session_key_form(s.destination)),
                TxSequenceId.from_int(s.tx_sequence_id),
                s.tx_sequence_number,
                s.reject_count,
                # 0 = unknown (never accessed, or a row written before it was wall-clock).
                s.last_access_time - self._wall_offset if s.last_access_time else 0.0,
            )
            for s in qm.incoming_sequences()
        ]
        self.incoming = IncomingSequences.restore(snapshots, now, config.order_ack)
        # (sender QM, destination lower-cased) -> where FinalAcks for its messages go.
        self._ack_sessions: dict[tuple[object, str], AckSession] = {
            (s.sender_qm, s.destination.lower()): session_of_state(s) for s in qm.incoming_sequences()
        }
        self._conns: dict[int, _Conn] = {}
        self._next_cid = 1
        self._closing: list[int] = []
        self.outgoing: dict[int, OutgoingTransfer] = {}
        self._next_refresh = now
        # Receive side.
        self._accepted: deque[_Pending] = deque()
        self._accept_in_flight: AcceptBatch | None = None
        self._ack_route: dict[SequenceKey, int] = {}
        #: (key, connection, sender is the session's peer) of the last accepted message.
        self._accept_memo: tuple[SequenceKey, int, bool] | None = None
        self._paths: dict[str, str] = {}
        self._nontx_in: list[tuple[str, Message, int, int]] = []
        self._local_in_flight: StoreLocal | None = None
        # Sender side.
        self._releases: dict[int, int] = {}
        self._settles: list[tuple[int, int, int, int]] = []
        self._hop_nacks: list[tuple[Message, AckSession | None]] = []
        self._deletes: list[tuple[int, int]] = []
        self._release_in_flight: ReleaseBatch | None = None
        # Forwarding (intermediate hop).
        self._forward: dict[str, deque[UserMessagePacket]] = {}
        self._retry_at: dict[str, float] = {}
        # TxSequenceID value -> (outgoing queue id, last activity): see _sequence_blocked.
        self._seq_owner: dict[int, tuple[int, float]] = {}
        self.stats = {"accepted": 0, "rejected": 0, "forwarded": 0, "released": 0, "batches": 0}

    # ------------------------------------------------------------------ connections

    def connection_made(self, peer: str, role: Role, now: float) -> int:
        """A TCP connection to/from ``peer`` (its IP) is up; returns its id. An initiator
        session sends its EstablishConnection at once."""
        cid = self._next_cid
        self._next_cid += 1
        session = _TransferSession(
            role,
            self.qm.guid,
            now,
            incoming=self.incoming,
            config=self.config.session,
            peer=peer,
            local_hosts=self.local_hosts,
        )
        self._conns[cid] = _Conn(cid, peer.lower(), role, session)
        self._retry_at.pop(peer.lower(), None)
        return cid

    def data_received(self, cid: int, data: bytes, now: float) -> None:
        """Bytes read from connection ``cid``."""
        conn = self._conns.get(cid)
        if conn is None:
            return
        conn.session.receive_data(data, now)
        self._drain_session(conn, now)

    def connection_lost(self, cid: int, now: float) -> None:
        """The TCP connection ``cid`` is gone (closed by either side)."""
        conn = self._conns.get(cid)
        if conn is None:
            return
        conn.session.connection_lost(now)
        self._drain_session(conn, now)
        self._drop(conn, now)

    def data_to_send(self) -> list[tuple[int, bytes]]:
        """(connection, bytes) for every connection with pending output: one write each."""
        out = []
        for conn in self._conns.values():
            data = conn.session.data_to_send()
            if data:
                out.append((conn.cid, data))
        return out

    def connections_to_close(self) -> list[int]:
        """Connections whose session closed: the driver closes the socket and then calls
        :meth:`connection_lost`."""
        out, self._closing = self._closing, []
        return out

    def wanted_peers(self) -> set[str]:
        """Next hops this QM needs a session to and has none open or opening."""
        busy = {c.peer for c in self._conns.values() if not c.session.closed}
        want = {t.next_hop for t in self.outgoing.values() if t.has_work}
        want |= {peer for peer, buf in self._forward.items() if buf}
        return want - busy

    def set_retry(self, peer: str, at: float | None) -> None:
        """The driver reports when it will retry connecting to ``peer`` (status only)."""
        if at is None:
            self._retry_at.pop(peer.lower(), None)
        else:
            self._retry_at[peer.lower()] = at

    def close_all(self, now: float) -> None:
        """Graceful stop: close every session."""
        for conn in list(self._conns.values()):
            conn.session.close(now)
            self._drain_session(conn, now)

    # ------------------------------------------------------------------ timers

    def get_timer(self) -> float | None:
        """Earliest deadline of the sessions, the Order Ack Send Timers and the
        Transactional Ack Wait Timers."""
        deadlines = [c.session.get_timer() for c in self._conns.values()]
        deadlines.append(self.incoming.get_timer())
        deadlines += [t.seq.get_timer() for t in self.outgoing.values()]
        found = [d for d in deadlines if d is not None]
        return min(found) if found else None

    def handle_timer(self, now: float) -> None:
        """Fire every due timer."""
        for conn in list(self._conns.values()):
            conn.session.handle_timer(now)
            self._drain_session(conn, now)
        for ack in self.incoming.handle_timer(now):
            self._send_order_ack(ack, now)
        for t in self.outgoing.values():
            self._outgoing_events(t, t.seq.handle_timer(now), now)

    # ------------------------------------------------------------------ outgoing queues

    def poll(self, now: float) -> bool:
        """Pick up outgoing queues and newly committed messages (cheap: one indexed SELECT
        per outgoing queue; the queue list is re-read every ``queue_refresh`` seconds).

        Loads at most ``load_per_poll`` messages per outgoing queue, so that one call
        never holds the driver for long; returns True when a queue may have more
        committed messages ready (the driver then polls again soon)."""
        self._wall_offset = self.qm.clock() - now
        if now >= self._next_refresh:
            self._next_refresh = now + self.config.queue_refresh
            self._refresh_queues()
        more = False
        for t in self.outgoing.values():
            more = self._load(t, now) or more
        return more

    def _refresh_queues(self) -> None:
        for rec in self.qm.list_queues(include_system=True):
            if rec.queue_type != QueueType.OUTGOING:
                continue
            t = self.outgoing.get(rec.queue_id)
            if t is not None:
                t.waiting = rec.msg_count
                continue
            wire = direct_name(rec.display_name)
            parts = split_direct(wire) if wire else None
            if wire is None or parts is None:
                log.warning("outgoing queue %s: only DIRECT=TCP: is transferred", rec.display_name)
                continue
            host = parts[0]
            handle: QueueHandle = self.qm.open_queue(rec.display_name)
            hop = self.config.next_hop(host)
            t = OutgoingTransfer(rec.queue_id, rec.display_name, wire, host, hop, handle, self.config.resend)
            t.waiting = rec.msg_count
            self.outgoing[rec.queue_id] = t
            if self._peer_open(t.next_hop):
                t.connected = True
                t.seq.connection_made(0.0)

    def _load(self, t: OutgoingTransfer, now: float) -> bool:
        loaded = 0
        cap = max(1, self.config.load_per_poll)
        while loaded < cap:
            room = self.config.max_in_flight - len(t.messages)
            if room <= 0:
                return False
            limit = min(room, self.config.batch_size, cap - loaded)
            try:
                batch = self.qm.peek_range(t.handle, t.loaded_through, limit, through=_LAST_LOOKUP_ID)
            except MQError as exc:
                log.warning("outgoing queue %s: %s", t.format_name, exc)
                return False
            if not batch:
                return False
            first = next((m for m in batch if m.transactional and m.tx_sequence_number), None)
            if first is not None and self._sequence_blocked(t, first.tx_sequence_id, now):
                return False
            t.loaded_through = batch[-1].lookup_id
            loaded += len(batch)
            tx: list[OutgoingMessage] = []
            plain: list[Message] = []
            retained = t.messages
            for m in batch:
                lookup_id = m.lookup_id
                retained[lookup_id] = m
                if m.transactional and m.tx_sequence_number:
                    # One shared TxSequenceId object per sequence (the protocol compares
                    # consecutive messages' sequence IDs by identity first).
                    sid = _sequence_id(m.tx_sequence_id)
                    tx.append(
                        _new_outgoing_message(
                            sid,
                            m.tx_sequence_number,
                            m.tx_previous_sequence_number,
                            m.id_uniquifier,
                            m.final_ack_required or m.positive_journaling or m.negative_journaling,
                            lookup_id,
                        )
                    )
                else:
                    plain.append(m)
            if tx:
                try:
                    events = t.seq.add_many(tx, now)
                except LocalProtocolError as exc:
                    # Should not happen: numbering comes from the store (a QM bug).
                    log.error("outgoing queue %s: %s", t.format_name, exc)
                    for om in tx:
                        t.messages.pop(om.handle, None)
                    return False
                self._outgoing_events(t, events, now)
            for m in plain:
                t.plain.append(m.lookup_id)
                if t.connected:
                    self._transmit(t, [m], now, resend=False)
            if len(batch) < limit:
                return False
        return True

    def _sequence_blocked(self, t: OutgoingTransfer, sequence_id: int, now: float) -> bool:
        """An OrderAck names only the TxSequenceID, so two outgoing queues must never have
        the same TxSequenceID in flight at once (MS-MQQB 3.1.1.5 wants it unique per QM;
        the store can repeat one for queues created in the same second). The second waits
        until the first has no message of that sequence unacknowledged and its last
        OrderAck is ``sequence_quarantine`` seconds old (so a late repeated OrderAck
        cannot release the wrong queue's messages)."""
        owner = self._seq_owner.get(sequence_id)
        if owner is not None and owner[0] != t.queue_id:
            other = self.outgoing.get(owner[0])
            busy = other is not None and any(m.tx_sequence_id.value == sequence_id for m in other.seq.unacked)
            if busy or now - owner[1] < self.config.sequence_quarantine:
                if not t.blocked_logged:
                    t.blocked_logged = True
                    log.warning(
                        "outgoing queue %s waits: TxSequenceID %s is in use by %s",
                        t.format_name, TxSequenceId.from_int(sequence_id), owner[0],
                    )  # fmt: skip
                return True
        self._seq_owner[sequence_id] = (t.queue_id, now)
        t.blocked_logged = False
        return False

    def _outgoing_events(self, t: OutgoingTransfer, events: Iterable[OutgoingEvent], now: float) -> None:
        for ev in events:
            if isinstance(ev, Transmit):
                conn = self._open_conn(t.next_hop)
                if conn is None:
                    continue
                retained = t.messages
                # A transactional message's content is dropped once sent (the store keeps
                # it until the OrderAck): a resend reads it back.
                dropped = [
                    om.handle for om in ev.messages if om.handle in retained and retained[om.handle] is None
                ]
                reloaded = self._reload(t, dropped) if dropped else {}
                session = conn.session
                guid = self.qm.guid
                for om in ev.messages:
                    handle = om.handle
                    m = retained.get(handle) or reloaded.get(handle)
                    if m is not None:
                        packet = t.packet(m, guid, om.previous_tx_sequence_number)
                        session.send_user_message(packet, now, handle=handle)
                        retained[handle] = None
                self.metrics.count_transmitted(t.queue_id, [om.handle for om in ev.messages], now, ev.resend)
            elif isinstance(ev, Released | AwaitingFinalAck):
                released = ev.messages
                if isinstance(ev, Released) and ev.final_ack_class is not None:
                    # The FinalAck came (MS-MQQB 3.1.5.7): journal / dead-letter it after
                    # any release that moves it aside. Only a message still loaded (its
                    # FinalAck overtook the OrderAck) is released here; one already
                    # OrderAck'ed waits in the store (its sequence may have moved on).
                    cls = ev.final_ack_class
                    self._settles += [
                        (om.tx_sequence_id.value, om.tx_sequence_number, om.message_id, cls)
                        for om in released
                    ]
                    released = tuple(om for om in released if om.handle in t.messages)
                    if not released:
                        continue
                top = max(om.tx_sequence_number for om in released)
                for om in released:
                    t.messages.pop(om.handle, None)
                t.last_acked = (released[-1].tx_sequence_id, top)
                self._seq_owner[released[-1].tx_sequence_id.value] = (t.queue_id, now)
                self._releases[t.queue_id] = max(self._releases.get(t.queue_id, 0), top)
                self.stats["released"] += len(released)
                self.metrics.count_released(t.queue_id, len(released), released[-1].handle, now)
            else:
                log.debug("outgoing queue %s: %s", t.format_name, ev)

    def _order_ack_beyond_sent(
        self, t: OutgoingTransfer, sequence_id: TxSequenceId, number: int, now: float
    ) -> list[OutgoingEvent]:
        """An OrderAck beyond anything this process sent on the sequence: legitimate when
        the store assigned that number in it (after a restart only ``max_in_flight``
        messages are reloaded, while the receiver acknowledges its durable position, which
        may be further: deletions that were not yet durable at the crash). Tell the
        sequence what the store assigned and apply the OrderAck again; it releases what is
        loaded and, as it is loaded, the rest it covers (docs/simulation.md, finding 2).
        Never beyond what the store assigned: that OrderAck stays ignored."""
        try:
            state = self.qm.outgoing_sequence(t.handle)
        except MQError as exc:
            log.warning("outgoing queue %s: %s", t.format_name, exc)
            return [OrderAckIgnored(sequence_id, number, IgnoreReason.BEYOND_SENT)]
        if state.tx_sequence_id == sequence_id.value and state.next_tx_sequence_number > 1:
            t.seq.note_assigned(sequence_id, state.next_tx_sequence_number - 1)
        return t.seq.order_ack_received(sequence_id, number, now)

    def _reload(self, t: OutgoingTransfer, handles: list[int]) -> dict[int, Message]:
        """Read back retained messages (by LookupIdentifier) for a resend: range reads from
        the lowest, in LookupIdentifier order, up to the highest."""
        want = set(handles)
        found: dict[int, Message] = {}
        after, top = min(want) - 1, max(want)
        while want and after < top:
            try:
                batch = self.qm.peek_range(t.handle, after, self.config.batch_size, through=top)
            except MQError as exc:
                log.warning("outgoing queue %s: reading back for a resend: %s", t.format_name, exc)
                break
            if not batch:
                break
            for m in batch:
                if m.lookup_id in want:
                    want.discard(m.lookup_id)
                    found[m.lookup_id] = m
            after = batch[-1].lookup_id
        if want:
            log.warning("outgoing queue %s: %d retained messages left the store", t.format_name, len(want))
        return found

    def _transmit(self, t: OutgoingTransfer, msgs: list[Message], now: float, *, resend: bool) -> None:
        conn = self._open_conn(t.next_hop)
        if conn is None:
            return
        for m in msgs:
            conn.session.send_user_message(t.packet(m, self.qm.guid, None), now, handle=m.lookup_id)
        self.metrics.count_transmitted(t.queue_id, [m.lookup_id for m in msgs], now, resend)

    # ------------------------------------------------------------------ session events

    def _drain_session(self, conn: _Conn, now: float) -> None:
        for ev in conn.session.events():
            self._on_event(conn, ev, now)

    def _on_event(self, conn: _Conn, ev: SessionEvent, now: float) -> None:
        if isinstance(ev, TransactionalMessageAccepted):
            self._on_accepted(conn, ev, now)
        elif isinstance(ev, TransactionalMessageRejected):
            self._ack_route[ev.result.key] = conn.cid
            self._accept_memo = None
            self.stats["rejected"] += 1
            self.metrics.count_rejected(ev.result.reason)
        elif isinstance(ev, OrderAckReceived):
            # Only the transfer that has this sequence in flight (see _sequence_blocked).
            for t in self.outgoing.values():
                unacked = t.seq.unacked
                if unacked and unacked[0].tx_sequence_id == ev.tx_sequence_id:
                    acked = t.seq.order_ack_received(ev.tx_sequence_id, ev.tx_sequence_number, now)
                    if any(isinstance(e, OrderAckIgnored) and e.reason is _BEYOND for e in acked):
                        acked = self._order_ack_beyond_sent(t, ev.tx_sequence_id, ev.tx_sequence_number, now)
                    self._outgoing_events(t, acked, now)
        elif isinstance(ev, FinalAckReceived):
            self._on_final_ack(ev, now)
        elif isinstance(ev, ForwardMessage):
            self._forward_packet(ev.packet, now, conn)
        elif isinstance(ev, UserMessageReceived):
            self._on_plain(conn, ev)
        elif isinstance(ev, SessionAckReceived):
            self._on_session_ack(conn, ev)
        elif isinstance(ev, EstablishmentComplete):
            conn.open = True
            log.info("session %s %s open (remote QM %s)", conn.peer, conn.role.name.lower(), ev.remote_qm)
            self.metrics.session_opened(conn.role)
            self._peer_up(conn.peer, now)
        elif isinstance(ev, ConnectionClosed):
            log.info("session %s closed: %s %s %s", conn.peer, ev.reason.name, ev.packet_type, ev.detail)
            self._closing.append(conn.cid)
            was_open = conn.open
            conn.open = False
            self.metrics.session_closed(conn.role, ev.reason, was_open=was_open)
            if was_open and self._open_conn(conn.peer) is None:
                self._peer_down(conn.peer)

    def _on_final_ack(self, ev: FinalAckReceived, now: float) -> None:
        """A FinalAck for this QM (MS-MQQB 3.1.5.7). The outgoing sequence holding the
        message settles it (journal / dead-letter after its OrderAck); when none knows it
        (e.g. it was OrderAck'ed before a restart, so it waits in the store only) the store
        is asked; a FinalAck matching nothing there is logged and dropped."""
        known = False
        for t in self.outgoing.values():
            events = t.seq.final_ack_received(
                ev.tx_sequence_id, ev.tx_sequence_number, ev.message_id, ev.message_class, now
            )
            if not all(isinstance(e, FinalAckIgnored) for e in events) or not events:
                known = True
            self._outgoing_events(t, [e for e in events if not isinstance(e, FinalAckIgnored)], now)
        if not known:
            self._settles.append(
                (ev.tx_sequence_id.value, ev.tx_sequence_number, ev.message_id, ev.message_class)
            )

    def ack_session_for(self, m: Message) -> AckSession | None:
        """The :class:`AckSession` a FinalAck for ``m`` (a message that arrived over MS-MQQB
        into a local queue) uses, from its incoming sequence; None when unknown. Thread-safe
        enough for a removal listener on another thread (one dict read)."""
        return self._ack_sessions.get((m.source_machine, m.destination_queue.lower()))

    def _on_accepted(self, conn: _Conn, ev: TransactionalMessageAccepted, now: float) -> None:
        r = ev.result
        key = r.key
        memo = self._accept_memo
        if memo is None or memo[0] is not key or memo[1] != conn.cid:
            # Once per stream and connection, not per message (SequenceKey and GUID
            # hashing / comparison are Python-level).
            self._ack_route[key] = conn.cid
            memo = self._accept_memo = (key, conn.cid, conn.session.remote_qm == key.source_qm)
        direct = memo[2]
        dest = ev.packet.user.destination_queue
        path = ""
        if isinstance(dest, DirectQueueFormatName):
            path = self._paths.get(dest.name, "")
            if not path:
                parts = split_direct(dest.name)
                path = parts[1] if parts else ""
                if len(self._paths) < 4096:
                    self._paths[dest.name] = path
        position = (r.tx_sequence_id, r.tx_sequence_number)
        self._accepted.append(_Pending(path, key, position, ev.packet, r.state, conn.peer, direct))
        self.stats["accepted"] += 1

    def _on_plain(self, conn: _Conn, ev: UserMessageReceived) -> None:
        dest = ev.packet.destination_queue
        if not isinstance(dest, DirectQueueFormatName) or (parts := split_direct(dest.name)) is None:
            log.warning("dropping a message for %r: only DIRECT=TCP: destinations are served", dest)
            return
        message = message_from_packet(ev.packet, "DIRECT=" + dest.name)
        self._nontx_in.append((parts[1], message, conn.cid, ev.recoverable_number))

    def _on_session_ack(self, conn: _Conn, ev: SessionAckReceived) -> None:
        if not ev.acked_handles:
            return
        acked = set(ev.acked_handles)
        for t in self.outgoing.values():
            if t.next_hop != conn.peer:
                continue
            for lid in [x for x in t.plain if x in acked]:
                t.plain.remove(lid)
                t.messages.pop(lid, None)
                self._deletes.append((t.queue_id, lid))

    def _peer_up(self, peer: str, now: float) -> None:
        for t in self.outgoing.values():
            if t.next_hop == peer and not t.connected:
                t.connected = True
                self._outgoing_events(t, t.seq.connection_made(now), now)
                plain = [m for lid in t.plain if (m := t.messages.get(lid)) is not None]
                self._transmit(t, plain, now, resend=True)
        buf = self._forward.get(peer)
        conn = self._open_conn(peer)
        while buf and conn is not None:
            conn.session.send_user_message(buf.popleft(), now)

    def _peer_down(self, peer: str) -> None:
        for t in self.outgoing.values():
            if t.next_hop == peer and t.connected:
                t.connected = False
                t.seq.connection_lost()

    def _drop(self, conn: _Conn, now: float) -> None:
        del self._conns[conn.cid]
        if conn.open and self._open_conn(conn.peer) is None:
            self._peer_down(conn.peer)

    def _open_conn(self, peer: str) -> _Conn | None:
        best = None
        for c in self._conns.values():
            if c.peer == peer and c.open and not c.session.closed:
                if c.role is Role.INITIATOR:
                    return c
                best = best or c
        return best

    def _peer_open(self, peer: str) -> bool:
        return self._open_conn(peer) is not None

    # ------------------------------------------------------------------ forwarding

    def _forward_packet(self, packet: UserMessagePacket, now: float, conn: _Conn | None = None) -> None:
        """Intermediate hop (seed 003): pass the packet on with its TransactionHeader
        untouched; only the hop count moves and the previous hop's SessionHeader goes."""
        message = packet if isinstance(packet, UserMessage) else packet.message
        hops = message.hop_count + 1
        if hops > _MAX_HOPS:
            log.warning("dropping message %s: hop count exceeded", message.message_id)
            if isinstance(packet, UserMessage) and message.properties.message_class == 0:
                # NACK_HOP_COUNT_EXCEEDED (MS-MQQB 3.1.5.8.2): the admin NACK, and the
                # FinalAck when the previous hop is the sender itself (direct session).
                session = None
                if conn is not None and conn.session.remote_qm == message.user.source_queue_manager:
                    session = AckSession(True, conn.peer, message.user.source_queue_manager)
                dest = message.destination_queue
                name = "DIRECT=" + dest.name if isinstance(dest, DirectQueueFormatName) else ""
                self._hop_nacks.append((message_from_packet(message, name), session))
            return
        user = replace(message.user, flags=(message.user.flags & ~0x1F) | hops)
        message = replace(message, user=user, session=None)
        out: UserMessagePacket
        if isinstance(packet, OrderAck):
            out = OrderAck(message)
        elif isinstance(packet, FinalAck):
            out = FinalAck(message)
        else:
            out = message
        peer = None
        if message.destination_qm != NULL_GUID:
            qm_id = message.destination_qm
            conns = self._conns.values()
            peer = next((c.peer for c in conns if c.open and c.session.remote_qm == qm_id), None)
        else:
            dest = message.destination_queue
            parts = split_direct(dest.name) if isinstance(dest, DirectQueueFormatName) else None
            if parts is not None:
                peer = self.config.next_hop(parts[0])
        if peer is None:
            log.warning("dropping message %s: no route to its destination", message.message_id)
            return
        self.stats["forwarded"] += 1
        self.metrics.count_forwarded(1)
        conn = self._open_conn(peer)
        if conn is not None:
            conn.session.send_user_message(out, now)
            return
        buf = self._forward.setdefault(peer, deque())
        if len(buf) < _FORWARD_BUFFER:
            buf.append(out)  # the original sender resends what is lost (end to end)

    def _send_order_ack(self, ack: SendOrderAck, now: float) -> None:
        conn = self._conns.get(self._ack_route.get(ack.key, 0))
        if conn is None or not conn.open or conn.session.closed:
            return  # the sender's next retransmission schedules a new one
        direct = conn.peer if conn.session.remote_qm == ack.key.source_qm else None
        conn.session.send_order_ack(ack, now, direct_address=direct)

    # ------------------------------------------------------------------ store work

    def next_store_work(self) -> StoreWork | None:
        """The next batch of store work to run, or None (at most one per kind in flight)."""
        if self._accept_in_flight is None and self._accepted:
            # Consecutive messages of one sequence for one queue form one group.
            runs: list[list[_Pending]] = []
            for p in self._accepted:
                head = runs[-1][0] if runs else None
                if head is not None and head.queue == p.queue and (head.key is p.key or head.key == p.key):
                    runs[-1].append(p)
                else:
                    runs.append([p])
            self._accepted.clear()
            groups = tuple(
                AcceptGroup(
                    run[0].queue,
                    run[0].key,
                    _messages_of(run),
                    tuple(p.position for p in run),
                    _state_record(run[-1].state, run[-1].peer, run[-1].direct, self._wall_offset),
                )
                for run in runs
            )
            self._accept_in_flight = AcceptBatch(groups)
            return self._accept_in_flight
        if self._release_in_flight is None and (self._releases or self._deletes or self._settles):
            names = {t.queue_id: t.format_name for t in self.outgoing.values()}
            work = ReleaseBatch(
                tuple((names[q], n) for q, n in self._releases.items() if q in names),
                tuple((names[q], lid) for q, lid in self._deletes if q in names),
                tuple(self._settles),
            )
            self._releases.clear()
            self._deletes.clear()
            self._settles.clear()
            self._release_in_flight = work
            return work
        if self._local_in_flight is None and (self._nontx_in or self._hop_nacks):
            work_l = StoreLocal(tuple(self._nontx_in), tuple(self._hop_nacks))
            self._nontx_in.clear()
            self._hop_nacks.clear()
            self._local_in_flight = work_l
            return work_l
        return None

    def run_store_work(self, work: StoreWork) -> list[BaseException | None]:
        """Run ``work`` through the queue manager (blocking until durable; thread-safe).
        Returns one outcome per item (None = durable)."""
        qm = self.qm
        insecure = self.config.send_insecure_nacks
        out: list[BaseException | None] = []
        if isinstance(work, AcceptBatch):
            failed: set[SequenceKey] = set()
            for g in work.groups:
                if g.key in failed:
                    out.append(LocalProtocolError("an earlier batch of this sequence failed"))
                    continue
                try:
                    # Arrival rules (MS-MQQB 3.1.5.8): rejected messages are consumed in
                    # order (state advanced, not inserted) and their NACKs enqueued in
                    # the same transaction (openmsmq.qm.arrival).
                    store_arrivals(qm, g.queue, g.messages, g.state, send_insecure_nacks=insecure)
                    out.append(None)
                except MQError as exc:
                    failed.add(g.key)
                    out.append(exc)
        elif isinstance(work, ReleaseBatch):
            for name, up_to in work.releases:
                try:
                    qm.release_outgoing(name, up_to)
                    out.append(None)
                except MQError as exc:
                    out.append(exc)
            for name, lid in work.deletes:
                try:
                    qm.receive_by_lookup_id(name, lid)
                    out.append(None)
                except MQError as exc:
                    out.append(exc)
            for seq_id, number, message_id, cls in work.settles:
                try:
                    outcome = qm.settle_final_ack(seq_id, number, message_id, cls)
                    if outcome.message is None:
                        log.warning(
                            "FinalAck %#06x for unknown message %s/%d (MessageID %d) dropped",
                            cls, TxSequenceId.from_int(seq_id), number, message_id,
                        )  # fmt: skip
                    out.append(None)
                except MQError as exc:
                    out.append(exc)
        else:
            for queue, message, _cid, _n in work.items:
                try:
                    store_arrivals(
                        qm, queue, [replace(message, transactional=False)], None, send_insecure_nacks=insecure
                    )
                    out.append(None)
                except MQError as exc:
                    out.append(exc)
            for dropped, session in work.hop_nacks:
                with contextlib.suppress(MQError):
                    sess = session if isinstance(session, AckSession) else None
                    hop_count_exceeded(qm, dropped, sess, send_insecure_nacks=insecure)
        return out

    def store_work_done(self, work: StoreWork, outcome: list[BaseException | None], now: float) -> None:
        """``work`` finished (``outcome`` from :meth:`run_store_work`, or one exception for
        all of it when the call itself failed)."""
        if isinstance(work, AcceptBatch):
            self._accept_in_flight = None
            self.stats["batches"] += 1
            for g, res in zip(work.groups, _pad(outcome, len(work.groups)), strict=True):
                seq = self.incoming.get(g.key, now)
                if res is None:
                    st = g.state
                    self._ack_sessions[(st.sender_qm, st.destination.lower())] = session_of_state(st)
                    for ack in seq.messages_stored(g.positions, now):
                        self._send_order_ack(ack, now)
                    continue
                log.warning("storing %d messages for %s failed: %s", len(g.messages), g.queue, res)
                # (already rolled back when an earlier group of the same sequence failed)
                with contextlib.suppress(LocalProtocolError):
                    seq.store_failed(*g.positions[0])
                # Later acceptances of this sequence were rolled back too: drop them.
                self._accepted = deque(p for p in self._accepted if p.key != g.key)
        elif isinstance(work, ReleaseBatch):
            self._release_in_flight = None
            items = (*work.releases, *work.deletes, *work.settles)
            for item, res in zip(items, _pad(outcome, len(items)), strict=True):
                if res is not None:
                    log.warning("releasing %s from the outgoing queue failed: %s", item, res)
        else:
            self._local_in_flight = None
            for (queue, _m, cid, number), res in zip(work.items, _pad(outcome, len(work.items)), strict=True):
                conn = self._conns.get(cid)
                if res is None and conn is not None and number:
                    conn.session.recoverable_message_stored(number)
                elif res is not None:
                    log.warning("storing a message for %s failed: %s", queue, res)

    # ------------------------------------------------------------------ status

    def outgoing_status(self) -> list[OutgoingStatus]:
        """Per outgoing queue: waiting, in flight, last acknowledged / unacknowledged, link."""
        out = []
        for t in self.outgoing.values():
            unacked = t.seq.unacked
            out.append(
                OutgoingStatus(
                    t.format_name,
                    t.next_hop,
                    t.waiting,
                    len(t.messages),
                    t.last_acked,
                    (unacked[-1].tx_sequence_id, unacked[-1].tx_sequence_number) if unacked else None,
                    t.connected,
                    self._retry_at.get(t.next_hop),
                )
            )
        return out

    def incoming_status(self) -> list[IncomingStatus]:
        """Per incoming sequence: IncomingTxSequenceID / Number (durable) and RejectCount."""
        return [
            IncomingStatus(s.key.source_qm, s.key.destination, *s.durable_position, s.reject_count)
            for s in self.incoming
        ]

    @property
    def idle(self) -> bool:
        """Nothing waits for the store (used by tests and graceful stop)."""
        return not (
            self._accepted or self._accept_in_flight or self._releases or self._deletes
            or self._release_in_flight or self._nontx_in or self._local_in_flight
            or self._settles or self._hop_nacks
        )  # fmt: skip


def _messages_of(run: list[_Pending]) -> tuple[Message, ...]:
    """The stored form of a run of accepted packets (one sequence, one queue)."""
    dest = run[0].key.destination
    return tuple(message_from_packet(p.packet, dest) for p in run)


def _state_record(
    s: IncomingSequenceSnapshot, peer: str = "", direct: bool = False, wall_offset: float = 0.0
) -> IncomingSequenceState:
    """The store record of the incoming sequence state to commit with a group (with the
    session facts a later FinalAck needs: RemoteQMAddress, DirectFormatSession).
    LastAccessTime goes to the store as wall-clock seconds (``now`` + ``wall_offset``)."""
    return IncomingSequenceState(
        s.key.source_qm, s.key.destination, None, s.tx_sequence_id.value, s.tx_sequence_number,
        s.reject_count, s.last_access_time + wall_offset, peer, direct,
    )  # fmt: skip


def _pad(outcome: list[BaseException | None] | BaseException, n: int) -> list[BaseException | None]:
    if isinstance(outcome, BaseException):
        return [outcome] * n
    return list(outcome) + [None] * (n - len(outcome))


def routes_from(pairs: Mapping[str, str] | Iterable[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """Normalise static routes (destination host → next-hop host) for :class:`TransferConfig`."""
    items = pairs.items() if isinstance(pairs, Mapping) else pairs
    return tuple((d.lower(), h.lower()) for d, h in items)


__all__ += ["OrderAckConfig", "ResendConfig", "SessionConfig", "routes_from"]
