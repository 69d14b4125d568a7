"""The sender of :class:`~openmsmq.transfer.engine.Transfer`: outgoing queues loaded from
the store into their :class:`~openmsmq.protocol.outgoing.OutgoingSequence`, transmitted on
the next hop's session (:class:`~openmsmq.transfer.transmit.Transmitter`), released on
OrderAcks (DESIGN invariant 3) and settled on FinalAcks
(:class:`~openmsmq.transfer.settlements.Settlements`).
"""

from __future__ import annotations

import logging
import math
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator

from openmsmq.errors import LocalProtocolError, MQError
from openmsmq.observability.sink import MetricsSink
from openmsmq.protocol.events import FinalAckReceived, OrderAckReceived, SessionAckReceived
from openmsmq.protocol.outgoing import (
    AwaitingFinalAck,
    FinalAckIgnored,
    IgnoreReason,
    OrderAckIgnored,
    OutgoingEvent,
    Released,
    RetainedMessage,
    Settled,
    Transmit,
)
from openmsmq.qm.manager import QueueHandle, QueueManager
from openmsmq.store.records import MessageRecord, QueueType, message_from_row
from openmsmq.store.rows import SIZE, TRANSACTIONAL, TX_SEQUENCE_NUMBER, outgoing_fields, outgoing_fields_of
from openmsmq.transfer.ack_origin import AckOriginCheck
from openmsmq.transfer.ack_sessions import AckSessions
from openmsmq.transfer.codec import direct_name, sequence_id_of, split_direct
from openmsmq.transfer.connections import Connections
from openmsmq.transfer.session import Conn
from openmsmq.transfer.settlements import Settlements
from openmsmq.transfer.state import OutgoingTransfer, TransferConfig
from openmsmq.transfer.transmit import Transmitter
from openmsmq.transfer.trust import AckOrigin
from openmsmq.wire.fast import fast_constructor
from openmsmq.wire.ids import TxSequenceId
from openmsmq.wire.remote_names import private_name

__all__ = ["Sender"]

log = logging.getLogger("openmsmq.transfer")

#: RetainedMessage(...) without the frozen-dataclass __init__ (one per message loaded).
_new_outgoing_message = fast_constructor(RetainedMessage)
#: Columns of a stored row (store.rows) the loader tests.
_TX = TRANSACTIONAL
_NUMBER = TX_SEQUENCE_NUMBER
_SIZE = SIZE
#: What a load holds before its first transactional row's TxSequenceID is read.
_NO_SEQUENCE = TxSequenceId(0, 0)
#: Message size assumed before an outgoing queue's first read (TransferConfig.queued_bytes):
#: the largest, so that the first read is small whatever the sizes are.
_PROBE_SIZE = 4 * 1024 * 1024
#: What a message loaded into memory costs beyond its stored size (its Message or row,
#: their objects: about a kilobyte of Python heap, as tracemalloc shows). Counted by
#: stored size alone, ``queued_bytes`` would let a backlog of small messages for a peer
#: that is away fill the heap many times over what it names.
_LOADED_OVERHEAD = 1024
_BEYOND = IgnoreReason.BEYOND_SENT


class Sender:
    """The outgoing queues of one transfer (their single owner) and what their sequences
    do on OrderAcks, FinalAcks, SessionAcks, timers and sessions coming and going.

    ``qm_route`` tells where a ``PRIVATE=<guid>`` name goes (the transfer's routing);
    ``stats`` is the transfer's counters (this part adds ``released``)."""

    def __init__(
        self,
        qm: QueueManager,
        config: TransferConfig,
        connections: Connections,
        settlements: Settlements,
        transmitter: Transmitter,
        ack_check: AckOriginCheck,
        ack_sessions: AckSessions,
        metrics: MetricsSink,
        stats: dict[str, int],
        qm_route: Callable[[uuid.UUID], str | None],
        now: float,
    ) -> None:
        self.qm = qm
        self.config = config
        self.connections = connections
        self.settlements = settlements
        self.transmitter = transmitter
        self._ack_check = ack_check
        self._ack_sessions = ack_sessions
        self._metrics = metrics
        self._stats = stats
        self._qm_route = qm_route
        #: The outgoing queues taken up, by queue id.
        self.outgoing: dict[int, OutgoingTransfer] = {}
        #: Format names (case-folded) of the outgoing queues an operator suspended.
        self.suspended_names: set[str] = set()
        #: Outgoing queues whose loading paused on a full session backlog (see refill).
        self._held: dict[int, OutgoingTransfer] = {}
        #: The outgoing queue whose messages of a TxSequenceID were loaded last (an
        #: OrderAck names only the sequence): checked, not trusted (see on_order_ack).
        self._by_sequence: dict[TxSequenceId, OutgoingTransfer] = {}
        #: Outgoing queues not taken up for want of a route (warned about once).
        self._unrouted: dict[int, str] = {}
        self._next_refresh = now
        #: What a poll compares with ``OutgoingTransfer.caught_up`` (see :meth:`_commit_mark`).
        self._mark = (-1, -1)
        self._next_high_read = float("-inf")
        # TxSequenceID value -> (outgoing queue id, last activity): see _sequence_blocked.
        self._seq_owner: dict[int, tuple[int, float]] = {}

    def poll(self, now: float) -> bool:
        """Pick up outgoing queues and newly committed messages (cheap: one indexed SELECT
        per outgoing queue; the queue list is re-read every ``queue_refresh`` seconds, or
        ``queue_refresh_per_queue`` per queue listed when that is longer).

        Loads at most ``load_per_poll`` messages per outgoing queue, so that one call
        never holds the driver for long; returns True when a queue may have more
        committed messages ready (the driver then polls again soon)."""
        if now >= self._next_refresh:
            # An outgoing queue created by another process (an application writing into
            # this data directory) is found only here: a short interval lets the transfer
            # start soon after the first commit; the per-queue term bounds the cost.
            listed = self._refresh_queues()
            cfg = self.config
            self._next_refresh = now + max(cfg.queue_refresh, listed * cfg.queue_refresh_per_queue)
        # Whether anything was committed since the last poll: a queue that was caught up
        # then is skipped, so an idle QM with thousands of outgoing queues does not read
        # each of them every poll (an idle QM would spend a large part of a core on it).
        high = self._commit_mark(now)
        more = False
        for t in self.outgoing.values():
            if t.caught_up is not None and t.caught_up == high:
                continue
            more = self._load(t, now, high) or more
        return more

    def _commit_mark(self, now: float) -> tuple[int, int]:
        """A value that changes whenever a message was committed: (the last LookupIdentifier
        this process's store writer committed, the store's highest LookupIdentifier when
        last read). The first costs no statement and is updated only after the commit is
        visible, so it is read before the load that must see the commit; the second
        (one index seek) covers commits of other processes on the data directory and is
        read at most every ``commit_check`` seconds (a loaded QM polls after every commit
        of its own: one read per poll was a few percent of its CPU)."""
        local = self.qm.committed_lookup_id()
        high = self._mark[1]
        if now >= self._next_high_read:
            high = self.qm.high_lookup_id()
            self._next_high_read = now + self.config.commit_check
        self._mark = (local, high)
        return self._mark

    def take_up_queues(self, queue_ids: Iterable[int]) -> None:
        """Make the next :meth:`poll` list the queues if one of ``queue_ids`` (outgoing
        queues committed into) is not taken up yet, rather than at the next refresh."""
        if any(q not in self.outgoing for q in queue_ids):
            self._next_refresh = float("-inf")

    def _refresh_queues(self) -> int:
        """Take up new outgoing queues; returns how many queues were listed."""
        records = self.qm.list_queues(include_system=True)
        for rec in records:
            if rec.queue_type != QueueType.OUTGOING:
                continue
            t = self.outgoing.get(rec.queue_id)
            if t is not None:
                t.waiting = rec.msg_count
                continue
            wire = direct_name(rec.display_name)
            parts = split_direct(wire) if wire else None
            private = None
            if wire is not None and parts is not None:
                host = parts[0]
                hop = self.config.next_hop(host)
            else:
                private = private_name(rec.display_name)
                found = self._private_route(private[0]) if private is not None else None
                if found is None:
                    # Looked up again at every refresh; said once per queue.
                    if rec.queue_id not in self._unrouted:
                        self._unrouted[rec.queue_id] = rec.display_name
                        why = "only DIRECT=TCP:, DIRECT=OS: and PRIVATE= travel"
                        if private:
                            why = "no route to its QM yet"
                        log.warning("outgoing queue %s waits: %s", rec.display_name, why)
                    continue
                wire = rec.display_name
                host, hop = found
            self._unrouted.pop(rec.queue_id, None)
            handle: QueueHandle = self.qm.open_queue(rec.display_name)
            t = OutgoingTransfer(
                rec.queue_id, rec.display_name, wire, host, hop, handle, self.config.resend, private
            )
            t.waiting = rec.msg_count
            t.suspended = rec.display_name.casefold() in self.suspended_names
            self.outgoing[rec.queue_id] = t
            if self.connections.open_to(t.next_hop) is not None:
                t.connected = True
                t.seq.connection_made(0.0)
        return len(records)

    def pick_up(self, enqueued: Iterable[tuple[object, str]], now: float) -> None:
        """Load at once the outgoing queues (by format name) that acknowledgments were
        just enqueued to, rather than at the next poll: an OrderAck waits for no poll
        interval. A queue not taken up yet is found by reading the queue list again."""
        wanted = {name.casefold() for _, name in enqueued if name}
        known = {t.format_name.casefold(): t for t in self.outgoing.values()}
        if wanted - known.keys():
            self._refresh_queues()
            known = {t.format_name.casefold(): t for t in self.outgoing.values()}
        for name in wanted:
            t = known.get(name)
            if t is not None:
                self._load(t, now)

    def suspend_outgoing(self, format_name: str) -> None:
        """Suspend the outgoing queue of ``format_name`` (MSMQ's Pause of an outgoing
        queue): its messages stay stored and none is loaded for sending, nor a session
        dialled for it, until :meth:`resume_outgoing`. Messages already handed to its
        sequence before (in flight, up to ``max_in_flight``) finish their exchange, so that
        the TxSequenceNumbers the receiver has seen stay contiguous (MS-MQQB 3.1.1.3.1).
        Held in memory: a restarted QM sends from every outgoing queue again."""
        self.suspended_names.add(format_name.casefold())
        for t in self.outgoing.values():
            if t.format_name.casefold() == format_name.casefold():
                t.suspended = True

    def resume_outgoing(self, format_name: str) -> None:
        """End :meth:`suspend_outgoing`: the next poll loads the queue's messages."""
        self.suspended_names.discard(format_name.casefold())
        for t in self.outgoing.values():
            if t.format_name.casefold() == format_name.casefold():
                t.suspended = False
                t.caught_up = None

    def _private_route(self, qm: uuid.UUID) -> tuple[str, str] | None:
        """(host, next hop) for ``PRIVATE=<qm>\\n`` names (FinalAcks to a sender behind an
        intermediate QM, MS-MQQB 3.1.7.17), or None when not known yet: where
        the transfer's ``qm_route`` sends such packets; else the previous hop its messages last
        arrived from (RemoteQMAddress of their incoming sequence, durable in the store),
        which sends the FinalAck back the way the message came."""
        peer = self._qm_route(qm)
        if peer is not None:
            return peer, peer
        address = self._ack_sessions.address_of(qm)
        return None if address is None else (address, self.config.next_hop(address))

    def _backlog_room(self, t: OutgoingTransfer) -> int | None:
        """How many more of ``t``'s messages may be converted into packets ahead of its
        session's window now: 0 until a window's worth is free (so that a read is never
        tiny, nor long enough to hold SessionAcks up while the peer has little left to
        process); None when no session is open (no bound: a session that opens sends
        everything loaded at once)."""
        if not t.connected:
            return None
        conn = self.connections.open_to(t.next_hop)
        if conn is None:
            return None
        window = self.config.session.window_size
        room = max(self.config.backlog, 2 * window) - conn.session.backlog
        # Large messages: what the session holds is bounded in bytes too (queued_bytes:
        # its unacknowledged bytes and its backlog, counted at the queue's mean size),
        # and loading resumes once half of that bound (or a window) is free.
        mean = t.mean_size or _PROBE_SIZE
        budget = self.config.queued_bytes
        held = conn.session.unacked_bytes + conn.session.backlog * mean
        by_bytes = (budget - held) // mean
        if by_bytes < room:
            room = max(0, by_bytes)
            window = min(window, max(1, budget // (2 * mean)))
            if room == 0 and held == 0:
                room = 1  # one message always goes, whatever its size
        return room if room >= window else 0

    @property
    def refill_due(self) -> bool:
        """An outgoing queue's loading paused on a full session backlog: the driver calls
        :meth:`refill` after writing what the session has to send."""
        return bool(self._held)

    def refill(self, now: float) -> None:
        """Load the next messages of the outgoing queues whose loading paused on a full
        session backlog, once SessionAcks have sent a window's worth of it (or the session
        is gone: then the next poll loads as usual). A driver calls this after writing the
        packets the SessionAcks released, so reading the store overlaps the peer's work on
        them."""
        for qid, t in list(self._held.items()):
            room = self._backlog_room(t)
            if room == 0:
                continue
            del self._held[qid]
            t.held = False
            if t.pending:
                self._transmit_pending(t, now)
                if t.pending:
                    continue
            if room is not None:
                # Up to the bound (no poll may come soon): it, not load_per_poll, limits
                # this call, as the window sends at most its size of what is loaded.
                while self._load(t, now):
                    pass

    def _load(self, t: OutgoingTransfer, now: float, high: tuple[int, int] | None = None) -> bool:
        """Load the next committed messages of ``t`` (at most ``load_per_poll``); True when
        it may have more ready now. ``high``: the commit mark (:meth:`_commit_mark`) taken
        before this call, recorded as ``t.caught_up`` when the load finds no more."""
        t.caught_up = None
        if t.suspended:
            return False
        loaded = 0
        cap = max(1, self.config.load_per_poll)
        if t.pending:  # a Transmit still being handed over comes first (order)
            self._transmit_pending(t, now)
            if t.pending:
                return False
        while loaded < cap:
            room = self.config.max_in_flight - len(t.messages)
            if not t.connected:  # what is loaded stays in memory until a session opens
                bound = max(1, self.config.queued_bytes // ((t.mean_size or _PROBE_SIZE) + _LOADED_OVERHEAD))
                room = min(room, bound - len(t.messages))
            if room <= 0:
                return False
            limit = min(room, self.config.batch_size, cap - loaded)
            # Packets are built for what the window sends soon, not for the whole
            # committed backlog (memory, and young-generation collections of them).
            ahead = self._backlog_room(t)
            if ahead is not None:
                if ahead <= 0:
                    t.held = True
                    self._held[t.queue_id] = t
                    return False
                limit = min(limit, ahead)
            if t.held:
                t.held = False
                self._held.pop(t.queue_id, None)
            try:
                rows = self.qm.peek_outgoing_rows(t.handle, t.loaded_through, limit)
            except MQError as exc:
                log.warning("outgoing queue %s: %s", t.format_name, exc)
                return False
            if not rows:
                t.caught_up = high
                return False
            first = next((r for r in rows if r[_TX] and r[_NUMBER]), None)
            if first is not None and self._sequence_blocked(t, outgoing_fields(first)[1], now):
                return False
            t.loaded_through = rows[-1][0]
            loaded += len(rows)
            t.mean_size = max(1, sum([r[_SIZE] for r in rows]) // len(rows))
            tx: list[RetainedMessage] = []
            plain: list[MessageRecord] = []
            retained = t.messages
            earliest = t.earliest_expiry
            # The fields of the transactional rows, read in one call; taken in row order.
            fields = outgoing_fields_of([r for r in rows if r[_TX] and r[_NUMBER]])
            k = 0
            last_sequence = -1
            sequence_id = _NO_SEQUENCE
            for row in rows:
                if row[_TX] and row[_NUMBER]:
                    # The row itself is retained until sent: its packet is encoded from it
                    # (store.packet_rows.row_encoder), no Message is built.
                    lookup_id, sequence, number, previous, uniquifier, final, expiry = fields[k]
                    k += 1
                    if expiry < earliest:
                        earliest = expiry
                    retained[lookup_id] = row
                    # One shared TxSequenceId object per sequence (the protocol compares
                    # consecutive messages' sequence IDs by identity first).
                    if sequence != last_sequence:
                        sequence_id = sequence_id_of(sequence)
                        last_sequence = sequence
                    tx.append(
                        _new_outgoing_message(sequence_id, number, previous, uniquifier, final, lookup_id)
                    )
                else:
                    m = message_from_row(row)
                    retained[m.lookup_id] = m
                    plain.append(m)
            t.earliest_expiry = earliest
            if tx:
                try:
                    events = t.seq.add_many(tx, now)
                    sid = tx[0].tx_sequence_id
                    if t.loaded_sequence != sid:
                        # One entry per queue: the sequence it loaded before is done.
                        if t.loaded_sequence is not None and self._by_sequence.get(t.loaded_sequence) is t:
                            del self._by_sequence[t.loaded_sequence]
                        t.loaded_sequence = sid
                        self._by_sequence[sid] = t
                except LocalProtocolError as exc:
                    # Should not happen: numbering comes from the store (a QM bug).
                    log.error("outgoing queue %s: %s", t.format_name, exc)
                    for om in tx:
                        t.messages.pop(om.handle, None)
                    return False
                self.on_sequence_events(t, events, now)
            for m in plain:
                t.plain[m.lookup_id] = None
                if t.connected:
                    self.transmitter.transmit_plain(t, [m], now, resend=False)
            if len(rows) < limit:
                t.caught_up = high
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

    def on_sequence_events(self, t: OutgoingTransfer, events: Iterable[OutgoingEvent], now: float) -> None:
        """Carry out what ``t``'s OutgoingSequence raised: transmit, release after an
        OrderAck, settle after a FinalAck."""
        for ev in events:
            if isinstance(ev, Transmit):
                if ev.resend or not t.pending:  # a resend names every unacknowledged one
                    t.pending = deque(ev.messages)
                    t.pending_bridged = False
                else:
                    t.pending.extend(ev.messages)
                t.pending_resend = ev.resend
                self._transmit_pending(t, now)
            elif isinstance(ev, Settled):
                # Its FinalAck came before any OrderAck (MS-MQQB 3.1.5.7): out of the
                # outgoing queue by its LookupIdentifier, before a later release of the
                # queue could delete it as OrderAck'ed.
                om = ev.message
                t.messages.pop(om.handle, None)
                self.settlements.settle_unreleased(t.queue_id, om.handle, om.message_id, ev.final_ack_class)
            elif isinstance(ev, Released | AwaitingFinalAck):
                released = ev.messages
                if isinstance(ev, Released) and ev.final_ack_class is not None:
                    # The FinalAck came (MS-MQQB 3.1.5.7): journal / dead-letter it after
                    # any release that moves it aside. Only a message still loaded (its
                    # FinalAck overtook the OrderAck) is released here; one already
                    # OrderAck'ed waits in the store (its sequence may have moved on).
                    # (checked when it came)
                    self.settlements.settle_released(t.queue_id, released, ev.final_ack_class)
                    released = tuple(om for om in released if om.handle in t.messages)
                    if not released:
                        continue
                top = released[-1].tx_sequence_number  # in increasing order (Released)
                retained = t.messages
                if len(released) == len(retained):
                    for om in released:
                        if om.handle not in retained:
                            break
                    else:  # every retained message: emptied at once
                        retained.clear()
                if retained:
                    pop = retained.pop
                    for om in released:
                        pop(om.handle, None)
                if not t.messages:
                    t.earliest_expiry = math.inf
                t.last_acked = (released[-1].tx_sequence_id, top)
                self._seq_owner[released[-1].tx_sequence_id.value] = (t.queue_id, now)
                self.settlements.release(t.queue_id, released)
                self._stats["released"] += len(released)
                self._metrics.count_released(t.queue_id, len(released), released[-1].handle, now)
            else:
                log.debug("outgoing queue %s: %s", t.format_name, ev)

    def _transmit_pending(self, t: OutgoingTransfer, now: float) -> None:
        """Hand the messages of ``t``'s last Transmit to its session as far as the session's
        byte bound allows (``TransferConfig.queued_bytes``); the rest waits in
        ``t.pending`` for :meth:`refill` (SessionAcks free room). A resend after a
        reconnect names every unacknowledged message: read back and encoded a part at a
        time, it never holds them all in memory."""
        conn = self.connections.open_to(t.next_hop)
        pending = t.pending
        if conn is None:
            pending.clear()  # the next session's Transmit names them again
            return
        while pending:
            room = self._backlog_room(t)
            if room == 0:
                t.held = True
                self._held[t.queue_id] = t
                return
            n = len(pending) if room is None else min(room, len(pending))
            if n == len(pending):  # all of it: one copy, not a popleft per message
                chunk = list(pending)
                pending.clear()
            else:
                chunk = [pending.popleft() for _ in range(n)]
            self.transmitter.transmit_chunk(t, conn, chunk, t.pending_resend, now)

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

    # ------------------------------------------------------------------ acknowledgments

    def on_order_ack(self, conn: Conn, ev: OrderAckReceived, now: float) -> None:
        # Only the transfer that has this sequence in flight (see _sequence_blocked): the
        # one that loaded it last, when it still has it in flight; else (a repeated
        # OrderAck, say) every queue is asked. Looking at every queue for every OrderAck
        # made 4,000 outgoing queues quadratic.
        sid = ev.tx_sequence_id
        known = self._by_sequence.get(sid)
        if known is not None and known.seq.current_sequence_id == sid:
            candidates: Iterable[OutgoingTransfer] = (known,)
        else:
            self._by_sequence.pop(sid, None)
            candidates = self.outgoing.values()
        for t in candidates:
            if t.seq.current_sequence_id == sid:
                refusal = self._ack_check.for_queue(conn, ev.source_qm, t)
                if refusal is not None:
                    conn.session.refuse("ack-origin", "OrderAck", f"OrderAck for {t.format_name} {refusal}")
                    return
                acked = t.seq.order_ack_received(sid, ev.tx_sequence_number, now)
                if any(isinstance(e, OrderAckIgnored) and e.reason is _BEYOND for e in acked):
                    acked = self._order_ack_beyond_sent(t, sid, ev.tx_sequence_number, now)
                self.on_sequence_events(t, acked, now)

    def on_final_ack(self, conn: Conn, ev: FinalAckReceived, now: float) -> None:
        """A FinalAck for this QM (MS-MQQB 3.1.5.7). The outgoing sequence holding the
        message settles it (journal / dead-letter after its OrderAck); when none knows it
        (e.g. it was OrderAck'ed before a restart, so it waits in the store only) the store
        is asked; a FinalAck matching nothing there is logged and dropped.

        Only the sequences that hold its TxSequenceID are asked, the queue that loaded
        it last first, until one knows the message: asking every outgoing queue would
        cost work per queue for every FinalAck."""
        for t in self._holding(ev.tx_sequence_id):
            events = t.seq.final_ack_received(
                ev.tx_sequence_id, ev.tx_sequence_number, ev.message_id, ev.message_class, now
            )
            if events and all(isinstance(e, FinalAckIgnored) for e in events):
                continue
            refusal = self._ack_check.for_queue(conn, ev.source_qm, t)
            if refusal is not None:
                conn.session.refuse("ack-origin", "FinalAck", f"FinalAck for {t.format_name} {refusal}")
                return
            self.on_sequence_events(t, events, now)
            return
        # Settled from the store: checked there against the message it matches (the
        # queue that sent it may be gone from memory, e.g. after a restart).
        self.settlements.settle_stored(
            (ev.tx_sequence_id.value, ev.tx_sequence_number, ev.message_id, ev.message_class),
            AckOrigin(conn.peer, conn.address, conn.session.remote_qm, ev.source_qm),
        )

    def _holding(self, sid: TxSequenceId) -> Iterator[OutgoingTransfer]:
        """The outgoing queues whose sequence holds ``sid``, the one that loaded it last
        first (TxSequenceIDs are unique per QM, except in stores written before that)."""
        guess = self._by_sequence.get(sid)
        if guess is not None and guess.seq.holds_sequence(sid):
            yield guess
        for t in self.outgoing.values():
            if t is not guess and t.seq.holds_sequence(sid):
                yield t

    def on_session_ack(self, conn: Conn, ev: SessionAckReceived) -> None:
        if not ev.acked_handles:
            return
        acked = set(ev.acked_handles)
        for t in self.outgoing.values():
            if t.next_hop != conn.peer:
                continue
            plain = t.plain
            if len(acked) < len(plain):
                done = [lid for lid in acked if lid in plain]
            else:
                done = [lid for lid in plain if lid in acked]
            if not done:
                continue
            done.sort()
            for lid in done:
                del plain[lid]
                t.messages.pop(lid, None)
            self.settlements.delete_sent(t.queue_id, done)

    # ------------------------------------------------------------------ sessions and timers

    def peer_up(self, peer: str, now: float) -> None:
        """A session to next hop ``peer`` opened: its queues' sequences send (their
        unacknowledged messages again), and their non-transactional messages go."""
        for t in self.outgoing.values():
            if t.next_hop == peer and not t.connected:
                t.connected = True
                self.on_sequence_events(t, t.seq.connection_made(now), now)
                plain = [m for lid in t.plain if isinstance(m := t.messages.get(lid), MessageRecord)]
                self.transmitter.transmit_plain(t, plain, now, resend=True)

    def redispatch(self, peer: str, handles: set[int], now: float) -> None:
        """Non-transactional messages (by session handle) sent on a session to ``peer``
        that closed unacknowledged go again on the session that remains to that next hop
        (MS-MQQB 3.1.5.5.1 re-dispatch): recoverable ones (acknowledgments among them)
        would otherwise wait for that session to close too."""
        for t in self.outgoing.values():
            if t.next_hop == peer and t.connected:
                again = [
                    m
                    for lid in t.plain
                    if lid in handles and isinstance(m := t.messages.get(lid), MessageRecord)
                ]
                if again:
                    self.transmitter.transmit_plain(t, again, now, resend=True)

    def handle_timer(self, now: float) -> None:
        """Fire the due Transactional Ack Wait Timers of the outgoing sequences."""
        for t in self.outgoing.values():
            self.on_sequence_events(t, t.seq.handle_timer(now), now)

    def timers(self) -> list[float | None]:
        """The deadlines of the outgoing sequences' timers (None: not running)."""
        return [t.seq.get_timer() for t in self.outgoing.values()]

    def unrouted(self) -> list[str]:
        """The format names of the outgoing queues not taken up for want of a route."""
        return list(self._unrouted.values())

    def sequence_owner(self, sequence_id: int) -> int | None:
        """The outgoing queue (id) that used TxSequenceID value ``sequence_id`` last."""
        owner = self._seq_owner.get(sequence_id)
        return None if owner is None else owner[0]

    def loaded_sequences(self) -> dict[TxSequenceId, int]:
        """A snapshot of the index OrderAcks are matched by: TxSequenceID -> the outgoing
        queue (id) that loaded messages of it last (one entry per queue at most)."""
        return {sid: t.queue_id for sid, t in self._by_sequence.items()}

    def peer_down(self, peer: str) -> None:
        """The last open session to next hop ``peer`` closed."""
        for t in self.outgoing.values():
            if t.next_hop == peer and t.connected:
                t.connected = False
                t.seq.connection_lost()
