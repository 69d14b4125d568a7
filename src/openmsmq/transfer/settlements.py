"""What acknowledgments leave for the store to do on outgoing queues, and the one object
that owns it: deletions of OrderAck'ed messages (DESIGN invariant 3: only an OrderAck
releases a transactional message), FinalAck settlements (MS-MQQB 3.1.5.7), deletions of
session-acknowledged non-transactional messages, and the messages that leave unsent
(expired, MS-MQQB 3.1.7.1.2, or that fit no packet). The sender records them as the
acknowledgments come; :class:`Settlements` hands them out as one
:class:`~openmsmq.transfer.state.ReleaseBatch` at a time, runs it through the store and
counts what the store settled.
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter, deque
from collections.abc import Callable, Iterable
from itertools import groupby
from operator import itemgetter

from openmsmq.errors import MQError
from openmsmq.observability.repeats import RepeatedEvents
from openmsmq.protocol.outgoing import RetainedMessage
from openmsmq.qm.manager import QueueManager
from openmsmq.qm.sequences import SequenceStore
from openmsmq.store.records import MessageRecord
from openmsmq.transfer.ack_origin import AckOriginCheck
from openmsmq.transfer.state import OutgoingTransfer, PendingRelease, ReleaseBatch, pad_outcome
from openmsmq.transfer.trust import AckOrigin, PeerTrust
from openmsmq.wire.constants import MessageClass, describe_message_class
from openmsmq.wire.ids import TxSequenceId

__all__ = ["Settlements"]

log = logging.getLogger("openmsmq.transfer")
#: FinalAcks matching no waiting message come in bursts too (one per message of a backlog
#: a deleted queue rejected): the first of a class is logged, the rest summed up.
_unmatched_final_acks = RepeatedEvents(log)
#: The queue name of a (name, ...) item.
_first = itemgetter(0)


class Settlements:
    """The releases, settlements and deletions waiting for the store, for every outgoing
    queue of one transfer (their single owner), and the negative FinalAcks counted per
    queue (``rejections``, for status).

    ``ready`` is True while something waits and no :class:`ReleaseBatch` is in flight:
    the store-work scheduler tests it without a call."""

    def __init__(
        self,
        qm: QueueManager,
        sequence_store: SequenceStore,
        release_chunk: int,
        trust: PeerTrust,
        origin_check: AckOriginCheck,
    ) -> None:
        self._qm = qm
        self._sequence_store = sequence_store
        self._chunk = release_chunk
        self._trust = trust
        self._origin_check = origin_check
        #: OrderAck'ed messages per outgoing queue id, not yet deleted.
        self._releases: dict[int, PendingRelease] = {}
        #: FinalAcks to settle from the store: (TxSequenceID value, TxSequenceNumber,
        #: MessageID, class), with where each came from when the store is to check it.
        self._settles: list[tuple[int, int, int, int]] = []
        self._settle_origins: list[AckOrigin | None] = []
        #: FinalAcks of messages not OrderAck'ed: (queue id, LookupIdentifier, MessageID, class).
        self._final_settles: list[tuple[int, int, int, int]] = []
        #: Messages that cannot be put into a packet: (queue id, LookupIdentifier).
        self._dead_letters: list[tuple[int, int]] = []
        #: Session-acknowledged non-transactional messages: (queue id, LookupIdentifier).
        self._deletes: list[tuple[int, int]] = []
        #: A message was found expired before it was sent: run the expiry pass first.
        self._expire_due = False
        self._in_flight: ReleaseBatch | None = None
        #: What the store settled (format name of the message's destination, or None when
        #: no waiting message matched; TxSequenceID value; class), appended on the store's
        #: thread, counted on the loop's (a deque: thread-safe append / popleft).
        self._store_settled: deque[tuple[str | None, int, int]] = deque()
        #: Negative FinalAcks per outgoing queue since start: queue id -> class -> count.
        self.rejections: dict[int, Counter[int]] = {}
        self.ready = False

    # ------------------------------------------------------------------ recording

    def release(self, queue_id: int, released: tuple[RetainedMessage, ...]) -> None:
        """``released`` (one Released event's messages, in increasing order) were OrderAck'ed."""
        pending = self._releases.get(queue_id)
        if pending is None:
            pending = self._releases[queue_id] = PendingRelease()
        pending.add(released, self._chunk)
        self.ready = self._in_flight is None

    def settle_released(
        self, queue_id: int, released: tuple[RetainedMessage, ...], message_class: int
    ) -> None:
        """The FinalAck of class ``message_class`` came for ``released`` (checked when it
        came): journal / dead-letter them from the store after the releases."""
        self.count_rejection(queue_id, message_class)
        self._settles += [
            (om.tx_sequence_id.value, om.tx_sequence_number, om.message_id, message_class) for om in released
        ]
        self._settle_origins += [None] * len(released)
        self.ready = self._in_flight is None

    def settle_stored(self, final_ack: tuple[int, int, int, int], origin: AckOrigin) -> None:
        """A FinalAck (TxSequenceID value, TxSequenceNumber, MessageID, class) no outgoing
        sequence in memory holds: settled from the store, checked there against the
        message it matches (``origin``: where it came from)."""
        self._settles.append(final_ack)
        self._settle_origins.append(origin)
        self.ready = self._in_flight is None

    def settle_unreleased(self, queue_id: int, lookup_id: int, message_id: int, message_class: int) -> None:
        """A FinalAck came before any OrderAck (MS-MQQB 3.1.5.7): the message leaves its
        outgoing queue by LookupIdentifier, before a later release could delete it."""
        self._final_settles.append((queue_id, lookup_id, message_id, message_class))
        self.count_rejection(queue_id, message_class)
        self.ready = self._in_flight is None

    def delete_sent(self, queue_id: int, lookup_ids: Iterable[int]) -> None:
        """Session-acknowledged non-transactional messages of ``queue_id`` (in order)."""
        self._deletes += [(queue_id, lid) for lid in lookup_ids]
        self.ready = self._in_flight is None

    def dead_letter(self, queue_id: int, lookup_id: int) -> None:
        """A message that cannot be put into a packet: to the dead-letter queues with class
        NACK_BAD_DST_Q, before any release of its queue."""
        self._dead_letters.append((queue_id, lookup_id))
        self.ready = self._in_flight is None

    def expire(self) -> None:
        """A message was found expired before it was sent: the QM's expiry pass (its NACK,
        its dead letter) runs before the next releases."""
        self._expire_due = True
        self.ready = self._in_flight is None

    def count_rejection(self, queue_id: int, message_class: int) -> None:
        """Count a negative FinalAck (a NACK class: high bit set) of a message of outgoing
        queue ``queue_id``; positive ones are not rejections."""
        if message_class & 0x8000:
            self.rejections.setdefault(queue_id, Counter())[message_class] += 1

    @property
    def idle(self) -> bool:
        """Nothing waits for the store, nor is in flight."""
        return not (
            self._releases or self._deletes or self._settles or self._final_settles or self._dead_letters
            or self._expire_due or self._in_flight
        )  # fmt: skip

    # ------------------------------------------------------------------ store work

    def next_batch(
        self, outgoing: Iterable[OutgoingTransfer], now_wall: Callable[[], float]
    ) -> ReleaseBatch | None:
        """The next :class:`ReleaseBatch` (None while one is in flight or nothing waits).
        ``outgoing``: the outgoing queues (their format names); ``now_wall``: the QM's
        clock, for the expiry pass."""
        if self._in_flight is not None or not (
            self._releases or self._deletes or self._settles or self._expire_due or self._dead_letters
            or self._final_settles
        ):  # fmt: skip
            self.ready = False
            return None
        names = {t.queue_id: t.format_name for t in outgoing}
        releases = self._release_steps(names)
        # FinalAck settlements go after the releases that move their messages aside. Like
        # releases and deletions, at most ``release_chunk`` of them per batch: the batch
        # is one store transaction, and a commit queued behind it waits for all of it.
        chunk = self._chunk
        settles = () if self._releases else tuple(self._settles[:chunk])
        deletes = self._deletes[:chunk]
        work = ReleaseBatch(
            releases,
            tuple((names[q], lid) for q, lid in deletes if q in names),
            settles,
            now_wall() if self._expire_due else None,
            tuple((names[q], lid) for q, lid in self._dead_letters if q in names),
            tuple(self._settle_origins[:chunk]) if settles else (),
            tuple((names[q], lid, mid, cls) for q, lid, mid, cls in self._final_settles if q in names),
        )
        self._expire_due = False
        self._dead_letters.clear()
        self._final_settles.clear()
        del self._deletes[: len(deletes)]
        if settles:
            del self._settles[: len(settles)]
            del self._settle_origins[: len(settles)]
        self._in_flight = work
        self.ready = False
        return work

    def _release_steps(self, names: dict[int, str]) -> tuple[tuple[str, int], ...]:
        """(format name, through TxSequenceNumber) of each queue's next release: the end
        of its next chunk of ``release_chunk`` messages, or all it has to release.

        One OrderAck may release ``max_in_flight`` messages at once; one transaction for
        them would hold the store's writer long (an application's commit queued behind it
        waits for all of it) and grow the WAL. Chunks are short transactions, one per
        ReleaseBatch (at most one runs at a time, and the next is handed out only after
        it committed and the commits queued behind it did, :meth:`run`, so those run in
        between); FinalAck settlements wait for the last."""
        steps: list[tuple[str, int]] = []
        for q, pending in list(self._releases.items()):
            name = names.get(q)
            step, last = pending.next_step()
            if name is not None:
                steps.append((name, step))
            if name is None or last:  # all of it (or the queue is gone)
                del self._releases[q]
        return tuple(steps)

    def run(self, work: ReleaseBatch) -> list[BaseException | None]:
        """Run ``work`` through the store (blocking until durable; on the store's thread).
        One outcome per release, deletion and settlement (None = durable)."""
        qm = self._qm
        seq_store = self._sequence_store
        out: list[BaseException | None] = []
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
        # Every FinalAck of the batch in one store transaction: FinalAcks come in bursts
        # (one per message a deleted queue rejected, say), not one at a time.
        try:
            self._settle(work)
            out += [None] * len(work.settles)
        except MQError as exc:
            out += [exc] * len(work.settles)
        # The next turn is handed out once this one is reported done: first let the
        # commits queued behind this turn (an application's sends) commit, so that none
        # shares a transaction with the next turn and waits for it too. The turn's own
        # outcome is known already; a store that fails here fails the next turn too.
        with contextlib.suppress(MQError):
            seq_store.wait_for_queued_commits()
        return out

    def _settle(self, work: ReleaseBatch) -> None:
        origins = work.settle_origins
        refusals: dict[int, str] = {}

        def accept(i: int, m: MessageRecord) -> bool:
            origin = origins[i] if i < len(origins) else None
            refusal = None if origin is None else self._origin_check.for_stored(origin, m)
            if refusal is not None:
                refusals[i] = refusal
            return refusal is None

        outcomes = self._sequence_store.settle_final_acks(work.settles, accept if any(origins) else None)
        for i, ((seq_id, number, message_id, cls), outcome) in enumerate(
            zip(work.settles, outcomes, strict=True)
        ):
            if outcome.refused is not None:
                origin = origins[i]
                assert origin is not None
                self._trust.refused(
                    origin.peer, "ack-origin", f"a FinalAck for {outcome.refused.destination_queue}",
                    refusals.get(i, ""),
                )  # fmt: skip
            else:
                found = outcome.message
                self._store_settled.append((None if found is None else found.destination_queue, seq_id, cls))
            if outcome.refused is None and outcome.message is None:
                _unmatched_final_acks.log(
                    (self._qm.guid, cls), logging.WARNING,
                    "FinalAck %s for %s/%d (MessageID %d) dropped: no message waits for it"
                    " (one sent without dead_letter or journal leaves at its OrderAck)",
                    describe_message_class(cls), TxSequenceId.from_int(seq_id), number, message_id,
                )  # fmt: skip

    def done(
        self,
        work: ReleaseBatch,
        outcome: list[BaseException | None] | BaseException,
        outgoing: Iterable[OutgoingTransfer],
        sequence_owner: Callable[[int], int | None],
    ) -> None:
        """``work`` finished: count the negative FinalAcks the store settled against their
        outgoing queue (the destination of the message that waited, else
        ``sequence_owner`` of the FinalAck's TxSequenceID: a message without dead_letter
        or journal left at its OrderAck) and log what failed."""
        self._in_flight = None
        if self._store_settled:
            by_name = {t.format_name.casefold(): t.queue_id for t in outgoing}
            while self._store_settled:
                name, seq_id, cls = self._store_settled.popleft()
                qid = by_name.get(name.casefold()) if name is not None else sequence_owner(seq_id)
                if qid is not None:
                    self.count_rejection(qid, cls)
        items = (*work.releases, *work.deletes, *work.settles)
        for item, res in zip(items, pad_outcome(outcome, len(items)), strict=True):
            if res is not None:
                log.warning("releasing %s from the outgoing queue failed: %s", item, res)
        self.ready = not self.idle
