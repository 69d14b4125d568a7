"""Store work of :class:`~openmsmq.transfer.engine.Transfer`: accepted messages stored in
batches with their incoming sequence state (reported durable to the protocol only after
the commit, seed 003), releases of OrderAck'ed messages, local (non-transactional)
arrivals. At most one work item of each kind is in flight.

A mixin: the attributes it reads are set by ``Transfer.__init__``.
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import replace
from itertools import groupby
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from openmsmq.errors import LocalProtocolError, MQError
from openmsmq.observability.repeats import RepeatedEvents
from openmsmq.protocol.incoming import IncomingSequences, IncomingSequenceSnapshot, SendOrderAck, SequenceKey
from openmsmq.qm.sequences import SequenceStore
from openmsmq.store.records import IncomingSequenceState, MessageRecord
from openmsmq.transfer.acknowledgments import (
    AckSession,
    build_transactional_acknowledgment,
    enqueue_acknowledgment_list,
)
from openmsmq.transfer.arrival import (
    plain_packet_rows,
    refuse,
    session_of_state,
    store_arrivals,
    store_packet_messages,
)
from openmsmq.transfer.connections import Connections
from openmsmq.transfer.sequences import IncomingUpkeep, SequenceUpkeep
from openmsmq.transfer.session import AcceptRoute, Conn, Pending, ack_session_of
from openmsmq.transfer.state import (
    RECEIVED_OVERHEAD,
    AcceptBatch,
    AcceptGroup,
    ReleaseBatch,
    StoreLocal,
    StoreWork,
    TransferParts,
    count_rejection,
)
from openmsmq.transfer.trust import AckOrigin, PeerTrust
from openmsmq.wire.constants import MessageClass, describe_message_class
from openmsmq.wire.ids import TxSequenceId

#: The queue name of a (name, ...) store-work item.
_first = itemgetter(0)

__all__ = ["STORE_RETRY_MAX", "STORE_RETRY_MIN", "StoreWorkSide"]

log = logging.getLogger("openmsmq.transfer")
#: Back-off (s) of a peer whose messages could not be stored: its sessions are refused
#: this long after the first failure, twice as long after each further one in a row.
STORE_RETRY_MIN = 5.0
STORE_RETRY_MAX = 60.0
#: FinalAcks matching no waiting message come in bursts too (one per message of a backlog
#: a deleted queue rejected): the first of a class is logged, the rest summed up.
_unmatched_final_acks = RepeatedEvents(log)


class StoreWorkSide(TransferParts):
    """The store-work half of :class:`~openmsmq.transfer.engine.Transfer` (a mixin)."""

    incoming: IncomingSequences
    sequence_store: SequenceStore
    connections: Connections
    _ack_sessions: dict[tuple[object, str], AckSession]
    _accepted: deque[Pending]
    unstored_bytes: int
    _accepted_bytes: int
    _accept_in_flight: AcceptBatch | None
    _nontx_in: list[tuple[str, MessageRecord, int, int | None]]
    _expire_due: bool
    _forward_in: list[tuple[str, MessageRecord, int, int | None]]
    _local_in_flight: StoreLocal | None
    _refusals: list[tuple[MessageRecord, int, AckSession | None]]
    _release_in_flight: ReleaseBatch | None
    _seq_owner: dict[int, tuple[int, float]]
    _ack_route: dict[SequenceKey, int]
    _order_acks: list[tuple[MessageRecord, str]]
    _rejects: dict[SequenceKey, tuple[int, float]]
    _refuse_until: dict[str, float]
    _store_retry: float
    _settle_origins: list[AckOrigin | None]
    sequences: IncomingUpkeep
    trust: PeerTrust

    if TYPE_CHECKING:

        def _drain_session(self, conn: Conn, now: float) -> None: ...
        def _refuse(self, conn: Conn, until: float) -> None: ...
        def settle_refusal(self, origin: AckOrigin, m: MessageRecord) -> str | None: ...
        def _pick_up(self, enqueued: Iterable[tuple[object, str]], now: float) -> None: ...

    def _send_order_ack(self, ack: SendOrderAck, now: float) -> None:
        """The Order Ack Send Timer fired (MS-MQQB 3.1.6.9): raise Send Transactional
        Acknowledgment (seed 000) with MQMSG_CLASS_ORDER_ACK. The transAcknowledgment
        Message is built from the facts of the session the sequence's last message came
        on (:func:`ack_session_of`) and enqueued to DestinationForAck with the next store
        work (Open Queue + Enqueue Message To An Open Queue); its outgoing queue then
        carries it like any recoverable message.

        3.1.6.9 sends it only "if the session from which the timer was started is not
        closed". Enqueued, it no longer needs that session; dropping it would leave the
        sender to its Transactional Ack Wait Timer (30 s, more after unanswered resends),
        or to a resend through an intermediate QM that may never come. So a closed
        session's facts, as recorded for the sequence's FinalAcks, address it
        (docs/conformance.md, seed 000)."""
        conn = self.connections.get(self._ack_route.get(ack.key, 0))
        if conn is not None and conn.open and not conn.session.closed:
            facts = ack_session_of(conn, ack.key.source_qm)
        else:
            recorded = self._ack_sessions.get((ack.key.source_qm, ack.key.destination.lower()))
            if recorded is None:
                return  # nothing stored yet: the sender's next retransmission schedules one
            facts = recorded
        # The OrderAck Body's TxSequenceId is the acknowledged stream's IncomingTxSequenceID
        # where the seed names OutgoingTxSequenceID (protocol.md §11 item 2).
        session = replace(
            facts,
            outgoing_tx_sequence_id=ack.tx_sequence_id,
            incoming_tx_sequence_number=ack.tx_sequence_number,
        )
        self._order_acks.append(build_transactional_acknowledgment(MessageClass.ORDER_ACK, session))

    def _enqueue_order_acks_now(self, now: float) -> None:
        """Enqueue the OrderAcks built so far on the caller's thread (one store write) and
        hand them to their sessions at once: before a session closes, its OrderAcks must
        be on it (a stop, a receiver that could not store)."""
        acks, self._order_acks = self._order_acks, []
        if not acks:
            return
        try:
            enqueue_acknowledgment_list(self.qm, self.sequence_store, acks)
        except MQError as exc:  # the senders' next retransmissions schedule new ones
            log.warning("enqueueing %d OrderAcks failed: %s", len(acks), exc)
            return
        self._pick_up(acks, now)

    def next_store_work(self, *, accept_min: int = 1) -> StoreWork | None:
        """The next batch of store work to run, or None (at most one per kind in flight).

        Accepted messages form a batch once at least ``accept_min`` wait (a driver that
        passes more than 1 also passes 1 after a short wait, see :attr:`accepts_waiting`):
        storing them in fewer, larger transactions costs less per message."""
        if self._accept_in_flight is None and (len(self._accepted) >= max(1, accept_min) or self._rejects):
            # Consecutive messages of one sequence for one queue form one group.
            runs: list[list[Pending]] = []
            head: AcceptRoute | None = None
            for p in self._accepted:
                route = p[0]
                if head is not None and (
                    route is head
                    or (head.queue == route.queue and (head.key is route.key or head.key == route.key))
                ):
                    runs[-1].append(p)
                else:
                    runs.append([p])
                    head = route
            self._accepted.clear()
            groups = tuple(
                AcceptGroup(
                    run[0][0].queue,
                    run[0][0].key,
                    tuple([ev.packet for _, ev in run]),
                    tuple([ev.result for _, ev in run]),
                    _state_record(
                        run[-1][1].result.state, run[-1][0].peer, run[-1][0].direct, self._wall_offset
                    ),
                )
                for run in runs
            )
            rejects = tuple(
                (key.source_qm, key.destination, count, at) for key, (count, at) in self._rejects.items()
            )
            self._rejects.clear()
            self._accept_in_flight = AcceptBatch(groups, self._accepted_bytes, rejects)
            self._accepted_bytes = 0
            return self._accept_in_flight
        if self._release_in_flight is None and (
            self._releases
            or self._deletes
            or self._settles
            or self._expire_due
            or self._dead_letters
            or self._final_settles
        ):
            names = {t.queue_id: t.format_name for t in self.outgoing.values()}
            releases = self._release_steps(names)
            # FinalAck settlements go after the releases that move their messages aside.
            settles = () if self._releases else tuple(self._settles)
            work = ReleaseBatch(
                releases,
                tuple((names[q], lid) for q, lid in self._deletes if q in names),
                settles,
                self.qm.clock() if self._expire_due else None,
                tuple((names[q], lid) for q, lid in self._dead_letters if q in names),
                tuple(self._settle_origins) if settles else (),
                tuple((names[q], lid, mid, cls) for q, lid, mid, cls in self._final_settles if q in names),
            )
            self._expire_due = False
            self._dead_letters.clear()
            self._final_settles.clear()
            self._deletes.clear()
            if settles:
                self._settles.clear()
                self._settle_origins.clear()
            self._release_in_flight = work
            return work
        upkeep = self.sequences.next_work()
        if upkeep is not None:
            return upkeep
        if self._local_in_flight is None and (
            self._nontx_in or self._refusals or self._forward_in or self._order_acks
        ):
            work_l = StoreLocal(
                tuple(self._nontx_in),
                tuple(self._refusals),
                tuple(self._forward_in),
                tuple(self._order_acks),
            )
            self._nontx_in.clear()
            self._refusals.clear()
            self._forward_in.clear()
            self._order_acks.clear()
            self._local_in_flight = work_l
            return work_l
        return None

    def run_store_work(self, work: StoreWork) -> list[BaseException | None]:
        """Run ``work`` through the queue manager (blocking until durable; thread-safe).
        Returns one outcome per item (None = durable)."""
        qm = self.qm
        seq_store = self.sequence_store
        insecure = self.config.send_insecure_nacks
        out: list[BaseException | None] = []
        if isinstance(work, AcceptBatch):
            return self._store_accepts(work)
        elif isinstance(work, SequenceUpkeep):
            return self.sequences.run(work)
        elif isinstance(work, ReleaseBatch):
            if work.expire_now is not None:
                try:
                    while qm.expire(work.expire_now) > 0:  # bounded per pass: until none is due
                        pass
                except MQError as exc:
                    log.warning("expiry of outgoing messages failed: %s", exc)
            for name, unsendable in groupby(work.dead_letters, key=_first):
                try:
                    qm.dead_letter(name, [lid for _, lid in unsendable], MessageClass.NACK_BAD_DST_Q)
                except MQError as exc:
                    log.warning("outgoing queue %s: dead-lettering unsendable messages failed: %s", name, exc)
            for name, settles in groupby(work.final_settles, key=_first):
                try:
                    qm.settle_outgoing(name, [(lid, mid, cls) for _, lid, mid, cls in settles])
                except MQError as exc:
                    log.warning("outgoing queue %s: settling FinalAcks failed: %s", name, exc)
            # The releases of different outgoing queues share one commit (one fsync).
            out += seq_store.release_outgoing_many(work.releases)
            # One transaction per queue for what SessionAcks acknowledged (not one each).
            for name, deletes in groupby(work.deletes, key=_first):
                lids = [lid for _, lid in deletes]
                try:
                    seq_store.delete_sent(name, lids)
                    out += [None] * len(lids)
                except MQError as exc:
                    out += [exc] * len(lids)
            # Every FinalAck of the batch in one store transaction: FinalAcks come in
            # bursts (one per message a deleted queue rejected, say), not one at a time.
            try:
                origins = work.settle_origins
                refusals: dict[int, str] = {}

                def accept(i: int, m: MessageRecord) -> bool:
                    origin = origins[i] if i < len(origins) else None
                    refusal = None if origin is None else self.settle_refusal(origin, m)
                    if refusal is not None:
                        refusals[i] = refusal
                    return refusal is None

                outcomes = seq_store.settle_final_acks(work.settles, accept if any(origins) else None)
                for i, ((seq_id, number, message_id, cls), outcome) in enumerate(
                    zip(work.settles, outcomes, strict=True)
                ):
                    if outcome.refused is not None:
                        origin = origins[i]
                        assert origin is not None
                        self.trust.refused(
                            origin.peer, "ack-origin", f"a FinalAck for {outcome.refused.destination_queue}",
                            refusals.get(i, ""),
                        )  # fmt: skip
                    else:
                        found = outcome.message
                        self._store_settled.append(
                            (None if found is None else found.destination_queue, seq_id, cls)
                        )
                    if outcome.refused is None and outcome.message is None:
                        _unmatched_final_acks.log(
                            (qm.guid, cls), logging.WARNING,
                            "FinalAck %s for %s/%d (MessageID %d) dropped: no message waits for it"
                            " (one sent without dead_letter or journal leaves at its OrderAck)",
                            describe_message_class(cls), TxSequenceId.from_int(seq_id), number, message_id,
                        )  # fmt: skip
                out += [None] * len(work.settles)
            except MQError as exc:
                out += [exc] * len(work.settles)
        else:
            # One store transaction per run of messages for one queue (not one per message).
            for queue, items in groupby(work.items, key=_first):
                # message_from_packet built them non-transactional (these packets had no
                # TransactionHeader): no copy each (dataclasses.replace took about a tenth
                # of the receiver's CPU for non-transactional messages).
                msgs = [m for _, m, _cid, _n in items]
                try:
                    store_arrivals(qm, seq_store, queue, msgs, None, send_insecure_nacks=insecure)
                    out += [None] * len(msgs)
                except MQError as exc:
                    out += [exc] * len(msgs)
            for name, forwards in groupby(work.forwards, key=_first):
                msgs = [m for _, m, _cid, _n in forwards]
                try:
                    # Into the destination's outgoing queue as received (Identifier, SentTime,
                    # properties kept; TimeToReachQueue counts from SentTime).
                    seq_store.accept_arrivals(qm.open_queue(name), msgs, None)
                    out += [None] * len(msgs)
                except MQError as exc:
                    out += [exc] * len(msgs)
            if work.acks:
                try:
                    enqueue_acknowledgment_list(qm, seq_store, work.acks)
                except MQError as exc:  # the sender's next retransmission schedules a new one
                    log.warning("enqueueing %d OrderAcks failed: %s", len(work.acks), exc)
            for dropped, cls, session in work.refusals:
                with contextlib.suppress(MQError):
                    sess = session if isinstance(session, AckSession) else None
                    refuse(qm, seq_store, dropped, cls, sess, send_insecure_nacks=insecure)
        return out

    def _store_accepts(self, work: AcceptBatch) -> list[BaseException | None]:
        """The groups of an AcceptBatch, in order per sequence. Runs of different
        sequences that need none of the arrival rules' outcomes (the usual case) are
        stored together, sharing one commit: a receiver with many senders, or a sender
        with many queues, paid one fsync per sequence (4,000 queues of one message each:
        4,000 commits). Others take the full arrival rules (MS-MQQB 3.1.5.8: rejected
        messages are consumed in order, their NACKs enqueued in the same transaction,
        openmsmq.transfer.arrival) one at a time. A group after a failed one of its sequence
        fails too (its state would skip the failed messages)."""
        qm = self.qm
        seq_store = self.sequence_store
        insecure = self.config.send_insecure_nacks
        out: list[BaseException | None] = [None] * len(work.groups)
        failed: set[SequenceKey] = set()
        together: list[tuple[int, list[list[Any]]]] = []  # (group index, rows), one per sequence
        together_keys: set[SequenceKey] = set()

        def flush() -> None:
            if not together:
                return
            runs = [(work.groups[i].queue, rows, work.groups[i].state) for i, rows in together]
            for (i, _rows), res in zip(together, seq_store.accept_arrival_rows_many(runs), strict=True):
                out[i] = res
                if res is not None:
                    failed.add(work.groups[i].key)
            together.clear()
            together_keys.clear()

        for i, g in enumerate(work.groups):
            if g.key in together_keys:
                flush()  # a sequence's runs stay in order: the earlier one first
            if g.key in failed:
                out[i] = LocalProtocolError("an earlier batch of this sequence failed")
                continue
            rows = plain_packet_rows(qm, g.queue, g.packets, g.key.destination)
            if rows is not None:
                together.append((i, rows))
                together_keys.add(g.key)
                continue
            flush()
            try:
                store_packet_messages(
                    qm,
                    seq_store,
                    g.queue,
                    g.packets,
                    g.key.destination,
                    g.state,
                    send_insecure_nacks=insecure,
                )
            except MQError as exc:
                failed.add(g.key)
                out[i] = exc
        flush()
        if work.rejects:
            try:
                seq_store.record_reject_counts(work.rejects)
            except MQError as exc:  # only the counter: nothing of the sequence depends on it
                log.warning(
                    "recording the RejectCount of %d incoming sequences failed: %s", len(work.rejects), exc
                )
        return out

    def _close_for_retry(
        self, conn: Conn | None, closed: set[int], now: float, key: SequenceKey | None = None
    ) -> None:
        """Close ``conn`` after messages it brought could not be stored (a full disk, the
        QM quota), and refuse that peer's sessions for a back-off that doubles from
        :data:`STORE_RETRY_MIN` to :data:`STORE_RETRY_MAX` while stores keep failing.

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
                self._send_order_ack(ack, now)
                self._enqueue_order_acks_now(now)
        conn.session.flush_acknowledgments(now)
        delay = self._store_retry = min(max(self._store_retry * 2, STORE_RETRY_MIN), STORE_RETRY_MAX)
        self._refuse(conn, now + delay)
        log.warning(
            "closing the session from %s: messages it sent could not be stored; its sessions are"
            " refused for %.0f s, then it resends them",
            conn.peer,
            delay,
        )
        conn.session.close(now)
        self._drain_session(conn, now)

    def store_work_done(self, work: StoreWork, outcome: list[BaseException | None], now: float) -> None:
        """``work`` finished (``outcome`` from :meth:`run_store_work`, or one exception for
        all of it when the call itself failed)."""
        if isinstance(work, SequenceUpkeep):
            self.sequences.done(work, outcome)
            return
        if isinstance(work, AcceptBatch):
            self._accept_in_flight = None
            self.stats["batches"] += 1
            self.unstored_bytes -= work.nbytes
            failed_keys: list[SequenceKey] = []
            for g, res in zip(work.groups, _pad(outcome, len(work.groups)), strict=True):
                seq = self.incoming.get(g.key, now)
                if res is None:
                    st = g.state
                    self._ack_sessions[(st.sender_qm, st.destination.lower())] = session_of_state(st)
                    for ack in seq.messages_stored(g.accepted, now):
                        self._send_order_ack(ack, now)
                    self._store_retry = 0.0
                    continue
                log.warning("storing %d messages for %s failed: %s", len(g.packets), g.queue, res)
                failed_keys.append(g.key)
                # (already rolled back when an earlier group of the same sequence failed)
                with contextlib.suppress(LocalProtocolError):
                    seq.store_failed(g.accepted[0].tx_sequence_id, g.accepted[0].tx_sequence_number)
                # Later acceptances of this sequence were rolled back too: drop them.
                kept = deque(p for p in self._accepted if p[0].key != g.key)
                still = sum([len(p[1].packet.properties.body) for p in kept]) + len(kept) * RECEIVED_OVERHEAD
                self.unstored_bytes -= self._accepted_bytes - still
                self._accepted_bytes = still
                self._accepted = kept
            closed: set[int] = set()
            for key in failed_keys:
                self._close_for_retry(self.connections.get(self._ack_route.get(key, 0)), closed, now, key)
        elif isinstance(work, ReleaseBatch):
            self._release_in_flight = None
            self._count_store_settled()
            items = (*work.releases, *work.deletes, *work.settles)
            for item, res in zip(items, _pad(outcome, len(items)), strict=True):
                if res is not None:
                    log.warning("releasing %s from the outgoing queue failed: %s", item, res)
        else:
            self._local_in_flight = None
            stored = work.items + work.forwards
            self.unstored_bytes -= (
                sum([len(m.body) for _, m, _c, _n in stored]) + len(stored) * RECEIVED_OVERHEAD
            )
            failed: Counter[tuple[str, str]] = Counter()
            failed_conns: list[Conn | None] = []
            for (queue, _m, cid, number), res in zip(stored, _pad(outcome, len(stored)), strict=True):
                conn = self.connections.get(cid)
                if res is None:
                    if conn is not None and number is not None:
                        conn.session.recoverable_message_stored(number, now)
                    continue
                # One line per queue and error for the batch (a full disk fails every one).
                failed[(queue, str(res))] += 1
                failed_conns.append(conn)
            if len(failed_conns) < len(stored):  # something was stored: the back-off restarts
                self._store_retry = 0.0
            for (queue, err), n in failed.items():
                log.warning("storing %d message(s) for %s failed: %s", n, queue, err)
            shut: set[int] = set()
            for conn in failed_conns:
                self._close_for_retry(conn, shut, now)
            if work.acks:
                self._pick_up(work.acks, now)

    def _count_store_settled(self) -> None:
        """Count the negative FinalAcks the store settled (or matched nothing for) against
        their outgoing queue: the destination of the message that waited, else the queue
        that sent the FinalAck's sequence last (a message without dead_letter or journal
        left at its OrderAck)."""
        if not self._store_settled:
            return
        by_name = {t.format_name.casefold(): t.queue_id for t in self.outgoing.values()}
        while self._store_settled:
            name, seq_id, cls = self._store_settled.popleft()
            if name is not None:
                qid = by_name.get(name.casefold())
            else:
                owner = self._seq_owner.get(seq_id)
                qid = owner[0] if owner is not None else None
            if qid is not None:
                count_rejection(self.rejections, qid, cls)

    @property
    def accepts_waiting(self) -> bool:
        """Accepted messages wait for a batch and none is in flight: a driver holding them
        for a larger batch (``accept_min``) must hand them out soon."""
        return bool(self._accepted) and self._accept_in_flight is None

    def _release_steps(self, names: dict[int, str]) -> tuple[tuple[str, int], ...]:
        """(format name, through TxSequenceNumber) of each queue's next release: the end
        of its next chunk of ``release_chunk`` messages, or all it has to release.

        One OrderAck may release ``max_in_flight`` messages (200,000) at once; one
        transaction for them held the store's write lock about a quarter of a second
        (an application committing to the same store waited) and grew the WAL to
        102 MB. Chunks are short transactions, one per ReleaseBatch (at most one runs
        at a time); FinalAck settlements wait for the last (``next_store_work``)."""
        steps: list[tuple[str, int]] = []
        for q, pending in list(self._releases.items()):
            name = names.get(q)
            step, last = pending.next_step()
            if name is not None:
                steps.append((name, step))
            if name is None or last:  # all of it (or the queue is gone)
                del self._releases[q]
        return tuple(steps)

    @property
    def idle(self) -> bool:
        """Nothing waits for the store (used by tests and graceful stop)."""
        return not (
            self._accepted or self._accept_in_flight or self._releases or self._deletes
            or self._release_in_flight or self._nontx_in or self._forward_in or self._local_in_flight
            or self._settles or self._refusals or self._rejects or self._order_acks or self._final_settles
            or not self.sequences.idle
        )  # fmt: skip


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
