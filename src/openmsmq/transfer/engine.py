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

The parts, each the single owner of its state, built here and given what they use
through their constructors (the driver talks to :class:`Transfer` alone):

* :class:`~openmsmq.transfer.sender.Sender`: the outgoing queues, their loading and
  acknowledgments; it hands packets to sessions through a
  :class:`~openmsmq.transfer.transmit.Transmitter`;
* :class:`~openmsmq.transfer.settlements.Settlements`: the releases, FinalAck settlements
  and deletions of outgoing messages waiting for the store (written by the sender, run as
  ReleaseBatch items);
* :class:`~openmsmq.transfer.store_work.StoreWorkQueue`: what received messages leave for
  the store, and the scheduler of every kind of store work;
* :class:`~openmsmq.transfer.ack_sessions.AckSessions`: where the acknowledgments of
  incoming sequences go; :class:`~openmsmq.transfer.ack_origin.AckOriginCheck`: which
  peer may acknowledge what;
* :class:`~openmsmq.transfer.forwarding.Forwarder`: packets passed on for other QMs;
  :class:`~openmsmq.transfer.routes.QmRoutes`: where ``PRIVATE=<guid>`` names go;
* :class:`~openmsmq.transfer.connections.Connections`: the connections and their sessions.

Here: connections, session events and the receive side, timers, and what needs several
parts at once (closing a peer whose messages could not be stored).
"""

from __future__ import annotations

import logging
import uuid
from collections import deque
from collections.abc import Iterable

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
from openmsmq.transfer.ack_origin import AckOriginCheck
from openmsmq.transfer.ack_sessions import AckSessions
from openmsmq.transfer.acknowledgments import (
    AckSession,
)
from openmsmq.transfer.arrival import ReceiptCheck
from openmsmq.transfer.codec import message_from_packet, split_direct
from openmsmq.transfer.connections import Connections
from openmsmq.transfer.forwarding import Forwarder
from openmsmq.transfer.routes import LearnedRoutes, QmRoutes
from openmsmq.transfer.sender import Sender
from openmsmq.transfer.sequences import IncomingUpkeep, SequenceReset, SequenceUpkeep
from openmsmq.transfer.session import (
    AcceptRoute,
    Conn,
    Pending,
    TransferRouting,
    ack_session_of,
    session_key_form,
)
from openmsmq.transfer.settlements import Settlements
from openmsmq.transfer.state import (
    RECEIVED_OVERHEAD,
    AcceptBatch,
    IncomingStatus,
    OutgoingStatus,
    OutgoingTransfer,
    ReleaseBatch,
    SessionStatus,
    StoreLocal,
    StoreWork,
    TransferConfig,
    WallClock,
    hop_host,
    routes_from,
)
from openmsmq.transfer.status import incoming_statuses, outgoing_statuses
from openmsmq.transfer.store_work import PeerBackoff, StoreWorkQueue
from openmsmq.transfer.transmit import Transmitter
from openmsmq.transfer.trust import PeerTrust, SessionTrust
from openmsmq.wire.constants import QueueFormatType
from openmsmq.wire.ids import TxSequenceId
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


class Transfer:
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
        #: Wall clock minus the driver's clock (``now``), refreshed on every poll.
        self.wall = WallClock(qm.clock() - now)
        wall_offset = self.wall.offset
        snapshots = [
            IncomingSequenceSnapshot(
                SequenceKey(s.sender_qm, session_key_form(s.destination)),
                TxSequenceId.from_int(s.tx_sequence_id),
                s.tx_sequence_number,
                s.reject_count,
                # 0 = unknown (never accessed, or a row written before it was wall-clock).
                s.last_access_time - wall_offset if s.last_access_time else 0.0,
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
        #: The MS-MQQB connections and their sessions.
        self.connections = Connections()
        #: The ways to remote QMs learned from sessions and forwarded packets (qm_route).
        self.routes = LearnedRoutes(self.local_hosts)
        self.qm_routes = QmRoutes(config, self.connections, self.routes)
        #: Where the acknowledgments of incoming sequences go.
        self.ack_sessions = AckSessions(self.connections, qm.incoming_sequences())
        ack_check = AckOriginCheck(config, self.trust, self.connections)
        #: Releases, settlements and deletions of outgoing messages waiting for the store.
        self.settlements = Settlements(qm, self.sequence_store, config.release_chunk, self.trust, ack_check)
        #: The counters of the transfer (each part adds its own).
        self.stats = {"accepted": 0, "rejected": 0, "forwarded": 0, "released": 0, "batches": 0}
        #: The outgoing queues and their sequences.
        self.sender = Sender(
            qm, config, self.connections, self.settlements,
            Transmitter(qm, config, self.connections, self.settlements, self.wall, self.metrics),
            ack_check, self.ack_sessions, self.metrics, self.stats, self.qm_routes.qm_route, now,
        )  # fmt: skip
        #: The sender's outgoing queues, by queue id (read them; the sender changes them).
        self.outgoing = self.sender.outgoing
        #: What received messages leave for the store, and the scheduler of all store work.
        self.store = StoreWorkQueue(
            qm, config, self.sequence_store, self.incoming, self.sequences, self.settlements,
            self.ack_sessions, self.connections, self.outgoing, self.wall, self.stats,
        )  # fmt: skip
        #: Packets passed on for other QMs (intermediate hop).
        self.forwarder = Forwarder(
            config,
            self.connections,
            self.routes,
            self.qm_routes,
            self.trust,
            self.store,
            self.metrics,
            self.stats,
        )
        #: Peers refused for a while after their messages could not be stored.
        self.backoff = PeerBackoff()
        self._closing: list[int] = []
        #: The rules of receipt before the acceptance rule (MS-MQQB 3.1.5.8).
        self._receipt = ReceiptCheck(qm, self.wall)
        #: (key, connection, sender is the session's peer) of the last accepted message.
        self._accept_memo: tuple[SequenceKey, int, bool] | None = None
        self._paths: dict[str, str] = {}
        self._last_dest: object = None
        self._last_path = ""
        #: (memo, path, route) of the last accepted message: its route is shared while
        #: the memo object and the path are the same.
        self._last_route: tuple[object, str, AcceptRoute] | None = None
        #: Next hop -> when the driver retries connecting to it (status only).
        self._retry_at: dict[str, float] = {}

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
            self.trust, peer, address, role, self.connections.reached(hop_host(peer)), certified
        )
        session = Session(
            role,
            self.qm.guid,
            now,
            incoming=self.incoming,
            config=self.config.session,
            peer=peer,
            arrival_check=self._receipt.refusal_class,
            routing=TransferRouting(self.local_hosts, trust),
        )
        self.connections.add(Conn(cid, peer.lower(), role, session, address=address, certified=certified))
        self._retry_at.pop(peer.lower(), None)
        if role is Role.INITIATOR:
            self.connections.note_reached(hop_host(peer), address)
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
        return host in hops or bool(hops & self.connections.hops_reaching({host}))

    def connection_open(self, cid: int) -> bool:
        """Whether connection ``cid`` has finished its session handshake."""
        conn = self.connections.get(cid)
        return conn is not None and conn.open

    def refusing(self, peer: str, now: float) -> bool:
        """Whether a connection from ``peer`` is to be refused now (closed at once by the
        driver, like one outside the allowlist): the last messages that QM sent could not
        be stored, and its back-off has not passed (see :meth:`store_work_done`)."""
        # (entries whose back-off passed are dropped by handle_timer: get_timer has them)
        return self.backoff.refusing(peer, now)

    def _refuse(self, conn: Conn, until: float) -> None:
        """Refuse ``conn``'s peer until ``until``, by every name this QM knows it by: the
        host of the session's peer (without a port), its socket address, and the next
        hops whose sessions reached that address. A QM's messages may come on the session
        it opened or on the one this QM opened to it, named by a route."""
        hosts = {hop_host(conn.peer), conn.address}
        self.backoff.refuse(hosts | self.connections.hops_reaching(hosts), until)

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
        if self.forwarder.buffering:
            want |= self.forwarder.waiting_hops()
        # Nor to a peer refused after a failed store (until its back-off ends, see
        # handle_timer): its messages may travel on the session this QM opens, and would
        # come straight back into the store that failed, again and again.
        want -= busy
        if self.backoff.active:
            want = {peer for peer in want if not self.backoff.blocks(peer)}
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
            self.store.send_order_ack(ack)
        self._enqueue_order_acks_now(now)

    def close_all(self, now: float) -> None:
        """Graceful stop: close every session."""
        for conn in list(self.connections.values()):
            conn.session.close(now)
            self._drain_session(conn, now)

    # ------------------------------------------------------------------ outgoing queues

    def poll(self, now: float) -> bool:
        """Refresh the wall clock offset and let the sender pick up outgoing queues and newly
        committed messages (:meth:`Sender.poll`); True when a queue may have more ready."""
        offset = self.wall.offset = self.qm.clock() - now
        self.sequences.clock_moved(offset)
        return self.sender.poll(now)

    def take_up_queues(self, queue_ids: Iterable[int]) -> None:
        """See :meth:`Sender.take_up_queues`."""
        self.sender.take_up_queues(queue_ids)

    def suspend_outgoing(self, format_name: str) -> None:
        """See :meth:`Sender.suspend_outgoing`."""
        self.sender.suspend_outgoing(format_name)

    def resume_outgoing(self, format_name: str) -> None:
        """See :meth:`Sender.resume_outgoing`."""
        self.sender.resume_outgoing(format_name)

    @property
    def refill_due(self) -> bool:
        """An outgoing queue's loading paused on a full session backlog: the driver calls
        :meth:`refill` after writing what the session has to send."""
        return self.sender.refill_due

    def refill(self, now: float) -> None:
        """See :meth:`Sender.refill`."""
        self.sender.refill(now)

    # ------------------------------------------------------------------ store work

    def next_store_work(self, *, accept_min: int = 1) -> StoreWork | None:
        """The next batch of store work to run, or None (see :meth:`StoreWorkQueue.next_work`)."""
        return self.store.next_work(accept_min)

    def run_store_work(self, work: StoreWork) -> list[BaseException | None]:
        """Run ``work`` through the queue manager (blocking until durable; thread-safe).
        Returns one outcome per item (None = durable)."""
        return self.store.run(work)

    def store_work_done(self, work: StoreWork, outcome: list[BaseException | None], now: float) -> None:
        """``work`` finished (``outcome`` from :meth:`run_store_work`, or one exception for
        all of it when the call itself failed)."""
        if isinstance(work, AcceptBatch):
            after = self.store.accepts_done(work, outcome, now)
        elif isinstance(work, ReleaseBatch):
            self.settlements.done(work, outcome, self.outgoing.values(), self.sender.sequence_owner)
            return
        elif isinstance(work, SequenceUpkeep):
            self.sequences.done(work, outcome)
            return
        else:
            after = self.store.local_done(work, outcome, now)
        if after.stored:
            self.backoff.stored()
        closed: set[int] = set()
        for conn, key in after.retry:
            self._close_for_retry(conn, closed, now, key)
        if after.acks:
            self.sender.pick_up(after.acks, now)

    @property
    def accepts_waiting(self) -> bool:
        """See :attr:`StoreWorkQueue.accepts_waiting`."""
        return self.store.accepts_waiting

    @property
    def idle(self) -> bool:
        """Nothing waits for the store (used by tests and graceful stop)."""
        return self.store.idle

    def _enqueue_order_acks_now(self, now: float) -> None:
        """Enqueue the OrderAcks built so far on the caller's thread and hand them to their
        sessions at once: before a session closes, its OrderAcks must be on it."""
        acks = self.store.enqueue_order_acks_now()
        if acks:
            self.sender.pick_up(acks, now)

    def _close_for_retry(
        self, conn: Conn | None, closed: set[int], now: float, key: SequenceKey | None = None
    ) -> None:
        """Close ``conn`` after messages it brought could not be stored (a full disk, the
        QM quota), and refuse that peer's sessions for a back-off that doubles from
        ``STORE_RETRY_MIN`` to ``STORE_RETRY_MAX`` while stores keep failing.

        The sender then resends everything not acknowledged as soon as its next session
        opens (MS-MQQB 3.1.7.1). Without this a transactional message waited for the
        sender's Transactional Ack Wait Timer, whose ResendTimerTable grows to 30 min and
        then 6 h; a recoverable one waited for the session to end, which it never did
        while this QM acknowledged the messages around it. Meanwhile the sender streams
        nothing this QM would drop. What was stored is acknowledged first: the OrderAck of
        ``key``'s sequence and the session's pending SessionAcks go out before the close."""
        if conn is None or conn.cid in closed:
            return
        closed.add(conn.cid)
        if conn.session.closed:
            return
        if key is not None:
            ack = self.incoming.get(key, now).flush_order_ack(now)
            if ack is not None:
                self.store.send_order_ack(ack)
                self._enqueue_order_acks_now(now)
        conn.session.flush_acknowledgments(now)
        delay = self.backoff.next_delay()
        self._refuse(conn, now + delay)
        log.warning(
            "closing the session from %s: messages it sent could not be stored; its sessions are"
            " refused for %.0f s, then it resends them",
            conn.peer,
            delay,
        )
        conn.session.close(now)
        self._drain_session(conn, now)

    # ------------------------------------------------------------------ timers

    def get_timer(self) -> float | None:
        """Earliest deadline of the sessions, the Order Ack Send Timers, the
        Transactional Ack Wait Timers and the refusals after a failed store."""
        deadlines = [c.session.get_timer() for c in self.connections.values()]
        deadlines.append(self.incoming.get_timer())
        deadlines.append(self.sequences.next_due)
        deadlines += self.sender.timers()
        deadlines.append(self.backoff.deadline())
        found = [d for d in deadlines if d is not None]
        return min(found) if found else None

    def handle_timer(self, now: float) -> None:
        """Fire every due timer (and end the refusals whose back-off passed)."""
        if self.backoff.active:
            self.backoff.expire(now)
        if now >= self.sequences.next_due:
            self._forget_sequences(self.sequences.due(now))
        for conn in list(self.connections.values()):
            conn.session.handle_timer(now)
            self._drain_session(conn, now)
        for ack in self.incoming.handle_timer(now):
            self.store.send_order_ack(ack)
        self.sender.handle_timer(now)

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
            self.ack_sessions.route(ev.result.key, conn.cid)
            if conn.session.remote_qm == ev.result.key.source_qm:
                self.routes.sender_seen(ev.result.key.source_qm, conn.peer)
            self._accept_memo = None
            self.store.add_reject(ev.result.key, ev.result.reject_count, now + self.wall.offset)
            self.stats["rejected"] += 1
            self.metrics.count_rejected(ev.result.reason)
            self.sequences.rejected(ev.result, conn.peer, now)
        elif isinstance(ev, TransactionalMessageRefused):
            self._on_refused(conn, ev)
        elif isinstance(ev, OrderAckReceived):
            self.sender.on_order_ack(conn, ev, now)
        elif isinstance(ev, FinalAckReceived):
            self.sender.on_final_ack(conn, ev, now)
        elif isinstance(ev, ForwardMessage):
            self.forwarder.forward(ev.packet, now, conn, ev.recoverable)
        elif isinstance(ev, UserMessageReceived):
            self._on_plain(conn, ev)
        elif isinstance(ev, SessionAckReceived):
            self.sender.on_session_ack(conn, ev)
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
                self.sender.peer_down(conn.peer)

    def ack_session_for(self, m: MessageRecord) -> AckSession | None:
        """The :class:`AckSession` a FinalAck for ``m`` (a message that arrived over MS-MQQB
        into a local queue) uses, from its incoming sequence; None when unknown. Thread-safe
        enough for a removal listener on another thread (one dict read)."""
        return self.ack_sessions.for_message(m)

    def _on_refused(self, conn: Conn, ev: TransactionalMessageRefused) -> None:
        """A transactional message refused on receipt: its NACKs (administration NACK,
        FinalAck to its sender) are enqueued with the next store work."""
        packet = ev.packet
        name = destination_key(packet.user.destination_queue, packet.user.queue_manager_address)
        session = ack_session_of(conn, packet.user.source_queue_manager)
        if conn.session.remote_qm == packet.user.source_queue_manager:
            self.routes.sender_seen(packet.user.source_queue_manager, conn.peer)
        self.store.add_refusal(message_from_packet(packet, name), ev.message_class, session)

    def _on_accepted(self, conn: Conn, ev: TransactionalMessageAccepted, now: float) -> None:
        self._accept_run(conn, deque((ev,)))

    def _accept_run(self, conn: Conn, events: deque[SessionEvent]) -> None:
        """Queue the accepted messages at the head of ``events`` for the next accept batch
        (taking them off ``events``): the per-message work of :meth:`_drain_session`, with
        the transfer's memos held in locals for the run."""
        memo = self._accept_memo
        last_dest, last_path = self._last_dest, self._last_path
        last_route = self._last_route
        run: list[Pending] = []
        append = run.append
        cid = conn.cid
        count = size = 0
        while events and type(events[0]) is TransactionalMessageAccepted:
            ev: TransactionalMessageAccepted = events.popleft()  # type: ignore[assignment]  # checked above
            size += len(ev.packet.properties.body)
            key = ev.result.key
            if memo is None or memo[0] is not key or memo[1] != cid:
                # Once per stream and connection, not per message (SequenceKey and GUID
                # hashing / comparison are Python-level).
                self.ack_sessions.route(key, cid)
                if conn.session.remote_qm == key.source_qm:
                    self.routes.sender_seen(key.source_qm, conn.peer)
                memo = self._accept_memo = (
                    key,
                    cid,
                    ack_session_of(conn, key.source_qm).direct_format_session,
                )
                self.sequences.accepted(key)
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
        self.store.add_accepted(run, count, size + count * RECEIVED_OVERHEAD)

    @property
    def reading_wanted(self) -> bool:
        """False while more received bytes wait for the store than
        ``TransferConfig.unstored_bytes``: a driver stops reading from its connections
        (TCP flow control then holds the senders) and reads again once half of that is
        stored. Memory stays bounded when the store is slower than the network."""
        return self.store.unstored_bytes <= self.config.unstored_bytes

    @property
    def unstored_bytes(self) -> int:
        """Body bytes (and RECEIVED_OVERHEAD each) of the received messages not yet stored."""
        return self.store.unstored_bytes

    def _on_plain(self, conn: Conn, ev: UserMessageReceived) -> None:
        dest = ev.packet.destination_queue
        if _is_private_here(dest):
            name = destination_key(dest, self.qm.guid)  # PRIVATE=<this QM>\n
            message = message_from_packet(ev.packet, name)
            self.store.add_local((name, message, conn.cid, ev.recoverable_number))
            return
        if not isinstance(dest, DirectQueueFormatName) or (parts := split_direct(dest.name)) is None:
            log.warning(
                "dropping a message for %r: only DIRECT=TCP:, DIRECT=OS: and PRIVATE= destinations are"
                " served",
                dest,
            )
            return
        message = message_from_packet(ev.packet, "DIRECT=" + dest.name)
        self.store.add_local((parts[1], message, conn.cid, ev.recoverable_number))

    def _peer_up(self, peer: str, now: float) -> None:
        self.sender.peer_up(peer, now)
        self.forwarder.peer_up(peer, now)

    def _drop(self, conn: Conn, now: float) -> None:
        self.connections.remove(conn.cid)
        if conn.open and self.connections.open_to(conn.peer) is None:
            self.sender.peer_down(conn.peer)
        other = self.connections.open_to(conn.peer)
        if other is None:
            return  # the next session sends them all (_peer_up)
        # Non-transactional messages sent on it and not session-acknowledged go again on
        # the session that remains to that next hop (MS-MQQB 3.1.5.5.1 re-dispatch).
        handles = set(conn.session.unacknowledged_handles())
        if handles:
            self.sender.redispatch(conn.peer, handles, now)

    def qm_route(self, qm: uuid.UUID) -> str | None:
        """Where a PRIVATE=<qm> name goes (:meth:`QmRoutes.qm_route`); None if unknown."""
        return self.qm_routes.qm_route(qm)

    # ------------------------------------------------------------------ incoming sequences

    def _forget_sequences(self, keys: Iterable[SequenceKey]) -> None:
        """Incoming sequences were dropped (expired, reset): no session may keep using the
        objects it cached for them, and their OrderAck routes go."""
        keys = list(keys)
        if not keys:
            return
        self.ack_sessions.forget(keys)
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
            self.outgoing.values(),
            self.connections,
            self._retry_at,
            self.settlements.rejections,
            self.sender.unrouted(),
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
