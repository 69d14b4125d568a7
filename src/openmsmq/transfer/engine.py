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

Sender half: :mod:`openmsmq.transfer.sender`; store work: :mod:`openmsmq.transfer.store_work`
(base classes of :class:`Transfer`); connections: :mod:`openmsmq.transfer.connections`;
learned routes: :mod:`openmsmq.transfer.routes`. Here: timers, receive side, forwarding.
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import replace

from openmsmq.errors import HResult, MQError
from openmsmq.observability.repeats import RepeatedEvents
from openmsmq.observability.sink import MetricsSink
from openmsmq.protocol.events import (
    CloseReason,
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
    TransactionalMessageRefused,
    TransactionalMessageRejected,
    UserMessagePacket,
    UserMessageReceived,
    destination_key,
)
from openmsmq.protocol.incoming import (
    IncomingSequences,
    IncomingSequenceSnapshot,
    OrderAckConfig,
    SequenceKey,
)
from openmsmq.protocol.outgoing import ResendConfig
from openmsmq.protocol.session import Session
from openmsmq.qm.manager import QueueManager
from openmsmq.store.records import MessageRecord
from openmsmq.transfer.acknowledgments import (
    AckSession,
)
from openmsmq.transfer.arrival import ReceiptCheck, session_of_state
from openmsmq.transfer.codec import message_from_packet, split_direct
from openmsmq.transfer.connections import Connections
from openmsmq.transfer.routes import LearnedRoutes, relay_refusal
from openmsmq.transfer.sender import OutgoingSide
from openmsmq.transfer.sequences import IncomingUpkeep, SequenceReset
from openmsmq.transfer.session import (
    AcceptRoute,
    Conn,
    Pending,
    TransferRouting,
    ack_session_of,
    session_key_form,
)
from openmsmq.transfer.state import (
    RECEIVED_OVERHEAD,
    AcceptBatch,
    IncomingStatus,
    OutgoingStatus,
    OutgoingTransfer,
    PendingRelease,
    ReleaseBatch,
    SessionStatus,
    StoreLocal,
    StoreWork,
    TransferConfig,
    hop_host,
    routes_from,
)
from openmsmq.transfer.status import incoming_statuses, outgoing_statuses
from openmsmq.transfer.store_work import StoreWorkSide
from openmsmq.transfer.trust import AckOrigin, PeerTrust, SessionTrust
from openmsmq.wire.constants import MessageClass, QueueFormatType
from openmsmq.wire.ids import NULL_GUID, TxSequenceId
from openmsmq.wire.packets import FinalAck, OrderAck, UserMessage
from openmsmq.wire.userheader import DirectQueueFormatName, PrivateQueueFormatNameId

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
#: Sessions closed for what their peer sent: logged once per address and packet kind, then summed up.
_protocol_errors = RepeatedEvents(log)

#: MS-MQQB 3.1.5.8.2: a forwarded message whose hop count would exceed 0x1D is dropped.
_MAX_HOPS = 0x1D
#: Forwarded packets kept per next hop while no session to it is open.
_FORWARD_BUFFER = 100_000


class Transfer(OutgoingSide, StoreWorkSide):
    """Transfer of one queue manager's messages to and from its peers (sans-I/O).

    ``metrics`` receives the transfer's counts once per batch (default: the queue
    manager's :attr:`~openmsmq.qm.manager.QueueManager.metrics`)."""

    def __init__(
        self, qm: QueueManager, config: TransferConfig, now: float, *, metrics: MetricsSink | None = None
    ) -> None:
        self.qm = qm
        self.config = config
        #: The store operations of the sequences (release, settlement, acceptance).
        self.sequence_store = qm.sequence_store()
        self.metrics = metrics if metrics is not None else qm.metrics
        self.local_hosts = frozenset(h.lower() for h in config.local_addresses)
        qm.set_local_addresses(self.local_hosts)
        # The computer name names this QM too (DIRECT=OS:, and TCP: by name), as for the QM.
        self.local_hosts |= {qm.computer_name}
        #: Wall clock minus the driver's clock (``now``): IncomingTransactionalTransferInfo.
        #: LastAccessTime is persisted as wall-clock UTC seconds (the QM's clock, the one
        #: that stamps ArrivedTime) while the protocol keeps ``now`` for its timers.
        #: Refreshed on every poll, so a wall-clock step is followed within one poll.
        self._wall_offset = qm.clock() - now
        snapshots = [
            IncomingSequenceSnapshot(
                SequenceKey(s.sender_qm, session_key_form(s.destination)),
                TxSequenceId.from_int(s.tx_sequence_id),
                s.tx_sequence_number,
                s.reject_count,
                # 0 = unknown (never accessed, or a row written before it was wall-clock).
                s.last_access_time - self._wall_offset if s.last_access_time else 0.0,
            )
            for s in qm.incoming_sequences()
        ]
        self.incoming = IncomingSequences.restore(
            snapshots, now, config.order_ack, max_sequences=config.trust.max_incoming_sequences
        )
        #: The trust rules (docs/security.md) and what was learned from verified sessions.
        self.trust = PeerTrust(config.trust, config.routes, self.metrics)
        #: Rejections watched, idle sequences expired, operators' resets (its own timer).
        self.sequences = IncomingUpkeep(qm, self.incoming, self.trust, config.trust, now)
        # (sender QM, destination lower-cased) -> where FinalAcks for its messages go.
        self._ack_sessions: dict[tuple[object, str], AckSession] = {
            (s.sender_qm, s.destination.lower()): session_of_state(s) for s in qm.incoming_sequences()
        }
        #: The MS-MQQB connections and their sessions.
        self.connections = Connections()
        self._closing: list[int] = []
        self.outgoing: dict[int, OutgoingTransfer] = {}
        self.suspended_names: set[str] = set()
        #: Outgoing queues whose loading paused on a full session backlog (see refill).
        self._held: dict[int, OutgoingTransfer] = {}
        #: The outgoing queue whose messages of a TxSequenceID were loaded last (an
        #: OrderAck names only the sequence): checked, not trusted (see _on_order_ack).
        self._by_sequence: dict[TxSequenceId, OutgoingTransfer] = {}
        #: A message was found expired before it was sent: run the expiry pass with the
        #: next release (transfer.sender).
        self._expire_due = False
        #: Messages that cannot be put into a packet (queue_id, LookupIdentifier): moved
        #: to the dead-letter queues with the next release (transfer.sender).
        self._dead_letters: list[tuple[int, int]] = []
        #: Outgoing queues not taken up for want of a route (warned about once).
        self._unrouted: dict[int, str] = {}
        #: The ways to remote QMs learned from sessions and forwarded packets (qm_route).
        self.routes = LearnedRoutes(self.local_hosts)
        #: (source QM GUID, connection) of the last forwarded packet checked and learned.
        self._last_reverse: tuple[object, object] = (None, None)
        self._next_refresh = now
        # Receive side.
        self._accepted: deque[Pending] = deque()
        #: Body bytes of the received messages not yet stored (accepted, passed on or
        #: non-transactional, in a batch or waiting for one): above
        #: TransferConfig.unstored_bytes a driver stops reading (:attr:`reading_wanted`).
        self.unstored_bytes = 0
        self._accepted_bytes = 0  # the part of it in _accepted
        self._accept_in_flight: AcceptBatch | None = None
        self._ack_route: dict[SequenceKey, int] = {}
        #: The rules of receipt before the acceptance rule (MS-MQQB 3.1.5.8).
        self._receipt = ReceiptCheck(qm)
        #: OrderAcks built and not yet enqueued (MS-MQQB 3.1.7.17): (Message, DestinationForAck).
        self._order_acks: list[tuple[MessageRecord, str]] = []
        #: Sequences whose last message was rejected by the acceptance rule since the last
        #: accept batch: key -> (TxMessageRejectCount, LastAccessTime as wall clock),
        #: persisted with the next batch (MS-MQQB 3.1.5.8.6, RejectCount).
        self._rejects: dict[SequenceKey, tuple[int, float]] = {}
        #: Peer host (hop_host) -> loop time until which its sessions are refused: a QM whose
        #: messages could not be stored (full disk) resends at once on a new session, so
        #: it is let in again only after a back-off (StoreWorkSide.store_work_done).
        self._refuse_until: dict[str, float] = {}
        #: Next-hop host -> the address its last session reached (see _refuse).
        self._hop_addresses: dict[str, str] = {}
        #: The back-off of the last refusal (0 after a successful store of arrivals).
        self._store_retry = 0.0
        #: (key, connection, sender is the session's peer) of the last accepted message.
        self._accept_memo: tuple[SequenceKey, int, bool] | None = None
        self._paths: dict[str, str] = {}
        self._last_dest: object = None
        self._last_path = ""
        #: (memo, path, route) of the last accepted message: its route is shared while
        #: the memo object and the path are the same.
        self._last_route: tuple[object, str, AcceptRoute] | None = None
        self._nontx_in: list[tuple[str, MessageRecord, int, int | None]] = []
        self._local_in_flight: StoreLocal | None = None
        # Sender side.
        self._releases: dict[int, PendingRelease] = {}
        self._settles: list[tuple[int, int, int, int]] = []
        #: Where each of _settles came from, when the store is to check it (ack-origin).
        self._settle_origins: list[AckOrigin | None] = []
        self._final_settles: list[tuple[int, int, int, int]] = []
        self.rejections: dict[int, Counter[int]] = {}
        self._store_settled: deque[tuple[str | None, int, int]] = deque()
        #: Messages disregarded on receipt (their NACKs to enqueue): see StoreLocal.refusals.
        self._refusals: list[tuple[MessageRecord, int, AckSession | None]] = []
        #: Recoverable non-transactional messages this QM passes on: stored in the outgoing
        #: queue of their destination before they are acknowledged (format name, message,
        #: connection, RecoverableMessage number).
        self._forward_in: list[tuple[str, MessageRecord, int, int | None]] = []
        self._deletes: list[tuple[int, int]] = []
        self._release_in_flight: ReleaseBatch | None = None
        # Forwarding (intermediate hop).
        self._forward: dict[str, deque[UserMessagePacket]] = {}
        self._retry_at: dict[str, float] = {}
        # TxSequenceID value -> (outgoing queue id, last activity): see _sequence_blocked.
        self._seq_owner: dict[int, tuple[int, float]] = {}
        self.stats = {"accepted": 0, "rejected": 0, "forwarded": 0, "released": 0, "batches": 0}

    # ------------------------------------------------------------------ connections

    def connection_made(
        self, peer: str, role: Role, now: float, address: str = "", *, certified: uuid.UUID | None = None
    ) -> int:
        """A TCP connection to/from ``peer`` (an acceptor's: its IP; an initiator's: the
        next hop dialled) is up; returns its id. ``address``: the socket's peer IP, when
        the driver knows it; ``certified``: the QM GUID the peer's TLS certificate names
        (a TLS connection; the session's GUID must be it). An initiator session sends its
        EstablishConnection at once."""
        cid = self.connections.new_id()
        address = address.lower() or hop_host(peer)
        trust = SessionTrust(
            self.trust, peer, address, role, self._hop_addresses.get(hop_host(peer), ""), certified
        )
        session = Session(
            role,
            self.qm.guid,
            now,
            incoming=self.incoming,
            config=self.config.session,
            peer=peer,
            arrival_check=self._arrival_check,
            routing=TransferRouting(self.local_hosts, trust),
        )
        self.connections.add(Conn(cid, peer.lower(), role, session, address=address, certified=certified))
        self._retry_at.pop(peer.lower(), None)
        if role is Role.INITIATOR:
            self._hop_addresses[hop_host(peer)] = address
        return cid

    def known_peer(self, address: str) -> bool:
        """Whether a connection from IP ``address`` comes from a QM this one is configured
        to exchange messages with: the host of a static route's next hop or of an outgoing
        queue's next hop, as written or as the address a connection to it reached, an
        intermediate hop, or a peer whose GUID is pinned to its network. The driver lets
        such a peer in ahead of unknown ones when its connections are full."""
        if self.trust.configured(address):
            return True
        host = address.lower()
        hops = {hop_host(hop) for _dest, hop in self.config.routes}
        hops |= {hop_host(t.next_hop) for t in self.outgoing.values()}
        return host in hops or any(self._hop_addresses.get(h) == host for h in hops)

    def connection_open(self, cid: int) -> bool:
        """Whether connection ``cid`` has finished its session handshake."""
        conn = self.connections.get(cid)
        return conn is not None and conn.open

    def refusing(self, peer: str, now: float) -> bool:
        """Whether a connection from ``peer`` is to be refused now (closed at once by the
        driver, like one outside the allowlist): the last messages that QM sent could not
        be stored, and its back-off has not passed (see :meth:`store_work_done`)."""
        # (entries whose back-off passed are dropped by handle_timer: get_timer has them)
        return now < self._refuse_until.get(hop_host(peer), now)

    def _refuse(self, conn: Conn, until: float) -> None:
        """Refuse ``conn``'s peer until ``until``, by every name this QM knows it by: the
        host of the session's peer (without a port), its socket address, and the next
        hops whose sessions reached that address. A QM's messages may come on the session
        it opened or on the one this QM opened to it, named by a route."""
        hosts = {hop_host(conn.peer), conn.address}
        hosts |= {hop for hop, address in self._hop_addresses.items() if address in hosts}
        for host in hosts:
            self._refuse_until[host] = until

    def data_received(self, cid: int, data: bytes, now: float) -> None:
        """Bytes read from connection ``cid``."""
        conn = self.connections.get(cid)
        if conn is None:
            return
        conn.session.receive_data(data, now)
        self._drain_session(conn, now)

    def connection_lost(self, cid: int, now: float) -> None:
        """The TCP connection ``cid`` is gone (closed by either side)."""
        conn = self.connections.get(cid)
        if conn is None:
            return
        conn.session.connection_lost(now)
        self._drain_session(conn, now)
        self._drop(conn, now)

    def data_to_send(self) -> list[tuple[int, bytes]]:
        """(connection, bytes) for every connection with pending output: one write each."""
        out = []
        for conn in self.connections.values():
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
        busy = {c.peer for c in self.connections.values() if not c.session.closed}
        want = {t.next_hop for t in self.outgoing.values() if t.has_work}
        want |= {peer for peer, buf in self._forward.items() if buf}
        # Nor to a peer refused after a failed store (until its back-off ends, see
        # handle_timer): its messages may travel on the session this QM opens, and would
        # come straight back into the store that failed, again and again.
        want -= busy
        if self._refuse_until:
            want = {peer for peer in want if hop_host(peer) not in self._refuse_until}
        return want

    def set_retry(self, peer: str, at: float | None) -> None:
        """The driver reports when it will retry connecting to ``peer`` (status only)."""
        if at is None:
            self._retry_at.pop(peer.lower(), None)
        else:
            self._retry_at[peer.lower()] = at

    def flush_order_acks(self, now: float) -> None:
        """Graceful stop, before :meth:`close_all` and once the store work is done: send
        now the OrderAcks whose Order Ack Send Timer is running (what is durable). They
        are enqueued here (a store write on the caller's thread) and handed to their
        sessions at once."""
        for ack in self.incoming.flush_order_acks(now):
            self._send_order_ack(ack, now)
        self._enqueue_order_acks_now(now)

    def close_all(self, now: float) -> None:
        """Graceful stop: close every session."""
        for conn in list(self.connections.values()):
            conn.session.close(now)
            self._drain_session(conn, now)

    # ------------------------------------------------------------------ timers

    def get_timer(self) -> float | None:
        """Earliest deadline of the sessions, the Order Ack Send Timers, the
        Transactional Ack Wait Timers and the refusals after a failed store."""
        deadlines = [c.session.get_timer() for c in self.connections.values()]
        deadlines.append(self.incoming.get_timer())
        deadlines.append(self.sequences.next_due)
        deadlines += [t.seq.get_timer() for t in self.outgoing.values()]
        if self._refuse_until:
            deadlines.append(min(self._refuse_until.values()))
        found = [d for d in deadlines if d is not None]
        return min(found) if found else None

    def handle_timer(self, now: float) -> None:
        """Fire every due timer (and end the refusals whose back-off passed)."""
        for peer in [p for p, until in self._refuse_until.items() if now >= until]:
            del self._refuse_until[peer]
        if now >= self.sequences.next_due:
            self._forget_sequences(self.sequences.due(now))
        for conn in list(self.connections.values()):
            conn.session.handle_timer(now)
            self._drain_session(conn, now)
        for ack in self.incoming.handle_timer(now):
            self._send_order_ack(ack, now)
        for t in self.outgoing.values():
            self._outgoing_events(t, t.seq.handle_timer(now), now)

    # ------------------------------------------------------------------ session events

    def _drain_session(self, conn: Conn, now: float) -> None:
        on_event = self._on_event
        pending = conn.session.pending_events
        while pending:
            # The accepted message is the event of nearly every packet: a run of them is
            # taken in one call (see _accept_run).
            if type(pending[0]) is TransactionalMessageAccepted:
                self._accept_run(conn, pending)
            else:
                on_event(conn, pending.popleft(), now)

    def _on_event(self, conn: Conn, ev: SessionEvent, now: float) -> None:
        if isinstance(ev, TransactionalMessageAccepted):
            self._on_accepted(conn, ev, now)
        elif isinstance(ev, TransactionalMessageRejected):
            self._ack_route[ev.result.key] = conn.cid
            if conn.session.remote_qm == ev.result.key.source_qm:
                self.routes.sender_seen(ev.result.key.source_qm, conn.peer)
            self._accept_memo = None
            self._rejects[ev.result.key] = (ev.result.reject_count, now + self._wall_offset)
            self.stats["rejected"] += 1
            self.metrics.count_rejected(ev.result.reason)
            self.sequences.rejected(ev.result, conn.peer, now)
        elif isinstance(ev, TransactionalMessageRefused):
            self._on_refused(conn, ev)
        elif isinstance(ev, OrderAckReceived):
            self._on_order_ack(conn, ev, now)
        elif isinstance(ev, FinalAckReceived):
            self._on_final_ack(conn, ev, now)
        elif isinstance(ev, ForwardMessage):
            self._forward_packet(ev.packet, now, conn, ev.recoverable)
        elif isinstance(ev, UserMessageReceived):
            self._on_plain(conn, ev)
        elif isinstance(ev, SessionAckReceived):
            self._on_session_ack(conn, ev)
        elif isinstance(ev, EstablishmentComplete):
            conn.open = True
            window = conn.session.send_window
            rtt = ev.round_trip
            log.info(
                "session %s %s open (remote QM %s, window %d%s)", conn.peer, conn.role.name.lower(),
                ev.remote_qm, window, "" if rtt is None else f", round trip {rtt * 1000:.0f} ms",
            )  # fmt: skip
            if rtt is not None:
                self.connections.check_link(conn.peer, window, rtt)
            conn.verified = self.trust.verified(ev.remote_qm, conn.address, conn.role, conn.certified)
            if conn.role is Role.INITIATOR:
                self.trust.note_dialled(conn.peer, conn.address, ev.remote_qm)
            if conn.verified:
                # Where PRIVATE=<guid> names go later: learned from verified sessions only,
                # never from what a peer merely claims to be (docs/security.md).
                self.routes.session_verified(ev.remote_qm, conn.peer)
            self.metrics.session_opened(conn.role)
            self._peer_up(conn.peer, now)
        elif isinstance(ev, ConnectionClosed):
            if ev.reason is CloseReason.UNTRUSTED:
                self.trust.refused(conn.peer, ev.rule, ev.packet_type or "a session", ev.detail)
            elif ev.reason is CloseReason.PROTOCOL_ERROR:
                # Input refused (malformed, out of order, too large before the handshake):
                # a flood of such peers costs one line per address and kind, and a count.
                self.metrics.count_refused("mqqb.protocol")
                _protocol_errors.log(
                    (conn.address, ev.packet_type), logging.WARNING, "session %s closed: refused %s: %s",
                    conn.peer, ev.packet_type, ev.detail,
                )  # fmt: skip
            else:
                log.info("session %s closed: %s %s %s", conn.peer, ev.reason.name, ev.packet_type, ev.detail)
            self._closing.append(conn.cid)
            self.routes.session_closed(conn.session.remote_qm)
            was_open = conn.open
            conn.open = False
            self.metrics.session_closed(conn.role, ev.reason, was_open=was_open)
            if was_open and self.connections.open_to(conn.peer) is None:
                self._peer_down(conn.peer)

    def ack_session_for(self, m: MessageRecord) -> AckSession | None:
        """The :class:`AckSession` a FinalAck for ``m`` (a message that arrived over MS-MQQB
        into a local queue) uses, from its incoming sequence; None when unknown. Thread-safe
        enough for a removal listener on another thread (one dict read)."""
        return self._ack_sessions.get((m.source_machine, m.destination_queue.lower()))

    def _arrival_check(self, message: UserMessage, now: float) -> int | None:
        """The rules of receipt the sessions run before the acceptance rule."""
        return self._receipt.refusal_class(message, int(now + self._wall_offset))

    def _on_refused(self, conn: Conn, ev: TransactionalMessageRefused) -> None:
        """A transactional message refused on receipt: its NACKs (administration NACK,
        FinalAck to its sender) are enqueued with the next store work."""
        packet = ev.packet
        name = destination_key(packet.user.destination_queue, packet.user.queue_manager_address)
        session = ack_session_of(conn, packet.user.source_queue_manager)
        if conn.session.remote_qm == packet.user.source_queue_manager:
            self.routes.sender_seen(packet.user.source_queue_manager, conn.peer)
        self._refusals.append((message_from_packet(packet, name), ev.message_class, session))

    def _on_accepted(self, conn: Conn, ev: TransactionalMessageAccepted, now: float) -> None:
        self._accept_run(conn, deque((ev,)))

    def _accept_run(self, conn: Conn, events: deque[SessionEvent]) -> None:
        """Queue the accepted messages at the head of ``events`` for the next accept batch
        (taking them off ``events``): the per-message work of :meth:`_drain_session`, with
        the transfer's memos held in locals for the run."""
        memo = self._accept_memo
        last_dest, last_path = self._last_dest, self._last_path
        last_route = self._last_route
        append = self._accepted.append
        cid = conn.cid
        count = size = 0
        while events and type(events[0]) is TransactionalMessageAccepted:
            ev: TransactionalMessageAccepted = events.popleft()  # type: ignore[assignment]  # checked above
            size += len(ev.packet.properties.body)
            key = ev.result.key
            if memo is None or memo[0] is not key or memo[1] != cid:
                # Once per stream and connection, not per message (SequenceKey and GUID
                # hashing / comparison are Python-level).
                self._ack_route[key] = cid
                if conn.session.remote_qm == key.source_qm:
                    self.routes.sender_seen(key.source_qm, conn.peer)
                memo = self._accept_memo = (
                    key,
                    cid,
                    ack_session_of(conn, key.source_qm).direct_format_session,
                )
                self.sequences.accepted(key)
                if self._rejects:
                    # An acceptance resets TxMessageRejectCount: its state (0) is stored
                    # with the message, after any rejection before it.
                    self._rejects.pop(key, None)
            dest = ev.packet.user.destination_queue
            if dest is last_dest:  # the decoder shares direct-name objects
                path = last_path
            else:
                path = ""
                if isinstance(dest, DirectQueueFormatName):
                    path = self._paths.get(dest.name, "")
                    if not path:
                        parts = split_direct(dest.name)
                        path = parts[1] if parts else ""
                        if len(self._paths) < 4096:
                            self._paths[dest.name] = path
                    last_dest, last_path = dest, path
                elif _is_private_here(dest):
                    # PRIVATE=<this QM>\n (the key's text): the queue by its number.
                    path = key.destination
                    last_dest, last_path = dest, path
            if last_route is None or last_route[0] is not memo or last_route[1] is not path:
                last_route = (memo, path, AcceptRoute(path, key, conn.remote_qm_address, memo[2]))
            append((last_route[2], ev))
            count += 1
        self._last_dest, self._last_path, self._last_route = last_dest, last_path, last_route
        self.stats["accepted"] += count
        size += count * RECEIVED_OVERHEAD
        self.unstored_bytes += size
        self._accepted_bytes += size

    @property
    def reading_wanted(self) -> bool:
        """False while more received bytes wait for the store than
        ``TransferConfig.unstored_bytes``: a driver stops reading from its connections
        (TCP flow control then holds the senders) and reads again once half of that is
        stored. Memory stays bounded when the store is slower than the network."""
        return self.unstored_bytes <= self.config.unstored_bytes

    def _on_plain(self, conn: Conn, ev: UserMessageReceived) -> None:
        dest = ev.packet.destination_queue
        if _is_private_here(dest):
            name = destination_key(dest, self.qm.guid)  # PRIVATE=<this QM>\n
            message = message_from_packet(ev.packet, name)
            self._nontx_in.append((name, message, conn.cid, ev.recoverable_number))
            self.unstored_bytes += len(message.body) + RECEIVED_OVERHEAD
            return
        if not isinstance(dest, DirectQueueFormatName) or (parts := split_direct(dest.name)) is None:
            log.warning(
                "dropping a message for %r: only DIRECT=TCP:, DIRECT=OS: and PRIVATE= destinations are"
                " served",
                dest,
            )
            return
        message = message_from_packet(ev.packet, "DIRECT=" + dest.name)
        self._nontx_in.append((parts[1], message, conn.cid, ev.recoverable_number))
        self.unstored_bytes += len(message.body) + RECEIVED_OVERHEAD

    def _peer_up(self, peer: str, now: float) -> None:
        for t in self.outgoing.values():
            if t.next_hop == peer and not t.connected:
                t.connected = True
                self._outgoing_events(t, t.seq.connection_made(now), now)
                plain = [m for lid in t.plain if isinstance(m := t.messages.get(lid), MessageRecord)]
                self._transmit(t, plain, now, resend=True)
        buf = self._forward.get(peer)
        conn = self.connections.open_to(peer)
        while buf and conn is not None:
            conn.session.send_user_message(buf.popleft(), now)

    def _drop(self, conn: Conn, now: float) -> None:
        self.connections.remove(conn.cid)
        if conn.open and self.connections.open_to(conn.peer) is None:
            self._peer_down(conn.peer)
        other = self.connections.open_to(conn.peer)
        if other is None:
            return  # the next session sends them all (_peer_up)
        # Non-transactional messages sent on it and not session-acknowledged go again on
        # the session that remains to that next hop (MS-MQQB 3.1.5.5.1 re-dispatch):
        # recoverable ones (acknowledgments among them) would otherwise wait for that
        # session to close too.
        handles = set(conn.session.unacknowledged_handles())
        if handles:
            for t in self.outgoing.values():
                if t.next_hop == conn.peer and t.connected:
                    again = [
                        m
                        for lid in t.plain
                        if lid in handles and isinstance(m := t.messages.get(lid), MessageRecord)
                    ]
                    if again:
                        self._transmit(t, again, now, resend=True)

    # ------------------------------------------------------------------ forwarding

    def _forward_packet(
        self, packet: UserMessagePacket, now: float, conn: Conn | None = None, recoverable: int | None = None
    ) -> None:
        """Intermediate hop (seed 003): pass the packet on with its TransactionHeader
        untouched; only the hop count moves and the previous hop's SessionHeader goes.

        A recoverable non-transactional message (``recoverable``: its number on ``conn``)
        is stored and forwarded: it goes into the outgoing queue of its destination and is
        acknowledged once stored, so the previous hop releases it and a crash here keeps
        it. Other packets are forwarded in memory: transactional ones are resent by their
        sender until the end-to-end OrderAck, express ones carry no promise."""
        message = packet if isinstance(packet, UserMessage) else packet.message
        source = message.user.source_queue_manager
        if conn is not None and (self._last_reverse[0] is not source or self._last_reverse[1] is not conn):
            refusal = relay_refusal(self.config, self.routes, packet, message)
            if refusal is not None:
                # Not passed on and not acknowledged: a recoverable one stays with its
                # sender, a transactional one too (it waits for an OrderAck).
                what = f"a message for {destination_key(message.destination_queue, message.destination_qm)}"
                self.trust.refused(conn.peer, "relay", what, refusal)
                return
            # The decoder shares GUID objects: a stream costs one dict write, not one each.
            self.routes.forwarded(source, conn.peer, direct=conn.session.remote_qm == source)
            self._last_reverse = (source, conn)
        hops = message.hop_count + 1
        if hops > _MAX_HOPS:
            log.warning("dropping message %s: hop count exceeded", message.message_id)
            if isinstance(packet, UserMessage) and message.properties.message_class == 0:
                # NACK_HOP_COUNT_EXCEEDED (MS-MQQB 3.1.5.8.2): the admin NACK and, "if the
                # packet contains a TransactionHeader", the FinalAck: back the way the
                # message came when the previous hop is not its sender (ack_session_of).
                session = ack_session_of(conn, source) if conn is not None else AckSession(False, "", source)
                dest = message.destination_queue
                name = "DIRECT=" + dest.name if isinstance(dest, DirectQueueFormatName) else ""
                self._refusals.append(
                    (message_from_packet(message, name), MessageClass.NACK_HOP_COUNT_EXCEEDED, session)
                )
            return
        user = replace(message.user, flags=(message.user.flags & ~0x1F) | hops)
        message = replace(message, user=user, session=None)
        if recoverable is not None and conn is not None:
            dest = message.destination_queue
            if isinstance(dest, DirectQueueFormatName):
                name = "DIRECT=" + dest.name
            else:
                name = destination_key(dest, message.destination_qm)  # PRIVATE=<guid>\n
            self._forward_in.append((name, message_from_packet(message, name), conn.cid, recoverable))
            self.unstored_bytes += len(message.properties.body) + RECEIVED_OVERHEAD
            self.stats["forwarded"] += 1
            self.metrics.count_forwarded(1)
            return
        out: UserMessagePacket
        if isinstance(packet, OrderAck):
            out = OrderAck(message)
        elif isinstance(packet, FinalAck):
            out = FinalAck(message)
        else:
            out = message
        peer = None
        if message.destination_qm != NULL_GUID:
            # PRIVATE= names (OrderAcks and FinalAcks going back to a sender behind this
            # QM): see qm_route.
            peer = self.qm_route(message.destination_qm)
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
        conn = self.connections.open_to(peer)
        if conn is not None:
            conn.session.send_user_message(out, now)
            return
        buf = self._forward.setdefault(peer, deque())
        if len(buf) < _FORWARD_BUFFER:
            buf.append(out)  # the original sender resends what is lost (end to end)

    def qm_route(self, qm: uuid.UUID) -> str | None:
        """Where a PRIVATE=<qm> name goes: ``qm``'s open, verified session here (one this
        QM opened, or one a pin or a certificate vouches for: not a peer's mere claim),
        else a static route for its GUID, else the address of its last verified session,
        else the session its transactional messages came on, else the previous hop of the
        last packet from it this QM forwarded (the way back); None if unknown.
        A learned address of this QM itself (QMs on one address, apart by port) is no
        route: it would only loop back here."""
        for conn in self.connections.values():
            if conn.open and conn.verified and conn.session.remote_qm == qm:
                return conn.peer
        hop = self.config.next_hop_for_qm(qm)
        if hop is not None:
            return hop
        # The QM whose transactional messages came on its own session here is the way back
        # for their acknowledgments (MS-MQQB 3.1.7.17, DestinationForAck PRIVATE=<guid>
        # for a session that is not direct-format). A bare claim of the GUID, with no
        # messages, teaches nothing; pinning the GUID keeps others from sending as it.
        return self.routes.way_to(qm)

    # ------------------------------------------------------------------ incoming sequences

    def _forget_sequences(self, keys: Iterable[SequenceKey]) -> None:
        """Incoming sequences were dropped (expired, reset): no session may keep using the
        objects it cached for them, and their OrderAck routes go."""
        keys = list(keys)
        if not keys:
            return
        for key in keys:
            self._ack_route.pop(key, None)
        self._accept_memo = None
        self._last_route = None
        for conn in self.connections.values():
            conn.session.forget_sequences()

    def reset_incoming_sequence(
        self, source_qm: uuid.UUID, destination: str, position: tuple[TxSequenceId, int] | None, now: float
    ) -> SequenceReset:
        """An operator resets the incoming sequence of ``source_qm`` for ``destination``
        (as :meth:`incoming_status` lists it): to ``position`` (TxSequenceID, number of the
        last message taken as accepted), or, with None, to where the message it last
        rejected is accepted (see :meth:`IncomingUpkeep.reset`). The new state is stored by
        the next store work. Raises :class:`~openmsmq.errors.MQError` for an unknown
        sequence or one whose messages are being stored."""
        key = self.sequences.find(source_qm, destination)
        if key is None:
            raise MQError(
                HResult.MQ_ERROR_INVALID_PARAMETER,
                f"no incoming sequence of QM {source_qm} for {destination} (openmsmq sequence list)",
            )
        outcome = self.sequences.reset(key, position, now)
        self._forget_sequences([key])
        return outcome

    # ------------------------------------------------------------------ status

    def outgoing_status(self) -> list[OutgoingStatus]:
        """Per outgoing queue: waiting, in flight, last acknowledged / unacknowledged, link."""
        return outgoing_statuses(
            self.outgoing.values(), self.connections, self._retry_at, self.rejections, self._unrouted.values()
        )

    def session_status(self) -> list[SessionStatus]:
        """Per connection: peer, direction, handshake state, window and round trip."""
        return self.connections.statuses()

    def incoming_status(self) -> list[IncomingStatus]:
        """Per incoming sequence: IncomingTxSequenceID / Number (durable) and RejectCount."""
        return incoming_statuses(self.incoming, self.sequences)


def _is_private_here(dest: object) -> bool:
    """A PrivateQueueFormatNameId of a queue on the destination QM (kind 0x3, MS-MQMQ
    2.2.18.1.5.1); the session routed the packet here, so that QM is this one."""
    return isinstance(dest, PrivateQueueFormatNameId) and dest.kind == QueueFormatType.PRIVATE_ON_DESTINATION


__all__ += ["OrderAckConfig", "ResendConfig", "SessionConfig", "routes_from"]
