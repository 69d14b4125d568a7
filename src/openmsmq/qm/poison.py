"""Subqueues, Move Message, AbortCount and the retry policy of a queue manager.

- :meth:`Poison.move` is Move Message (MS-MQRR 3.1.4.10): a message moves between a queue
  and one of its subqueues (either way) or between two subqueues of one queue, by
  LookupIdentifier, inside a transaction (at its commit) or alone; a subqueue is created
  by the first move into it (:mod:`openmsmq.wire.subqueues`).
- :meth:`Poison.abort` is what a transaction abort does with its received messages:
  AbortCount + 1 each, durably, then the queue's retry policy
  (:mod:`openmsmq.retry_policy`) applied to the new counts: to ``;retry``, to
  ``;poison``, to the dead-letter queue (reject) or away (drop).
- :meth:`Poison.return_due` brings messages whose retry-cycle delay passed back from
  ``;retry`` (the due times are stored: a restart keeps them).

Locks: a message being moved is locked in its source queue (as a receive locks it) from
the call until the move is durable or its transaction aborts, so no one else receives it
meanwhile; a message another transaction holds cannot be moved
(MQ_ERROR_MESSAGE_LOCKED_UNDER_TRANSACTION).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from openmsmq.errors import HResult, MQError, quoted
from openmsmq.observability.sink import MetricsSink
from openmsmq.qm import names
from openmsmq.qm.dead_letters import DeadLetters
from openmsmq.qm.handles import QueueState
from openmsmq.qm.locks import LockTable
from openmsmq.qm.registry import QueueRef, QueueRegistry
from openmsmq.qm.transaction import Receive, Transaction
from openmsmq.retry_policy import MAX_RETRY_CYCLE_DELAY, Disposition, RetryPolicy
from openmsmq.store import moves as store_moves
from openmsmq.store.backend import StoreBackend
from openmsmq.store.moves import AbortedCount, Move
from openmsmq.store.ops import Send
from openmsmq.store.records import MessageRecord, QueueType
from openmsmq.wire.subqueues import POISON, RETRY, check_subqueue_name, split_key

__all__ = ["NACK_RECEIVE_REJECTED", "PendingMove", "Poison"]

log = logging.getLogger("openmsmq.poison")

#: MQMSG_CLASS_NACK_RECEIVE_REJECTED (MS-MQMQ 2.2.18.1.6): the receiving application
#: rejected the message (what receive_error_handling=reject records).
NACK_RECEIVE_REJECTED = 0xC004
#: Messages returned from ``;retry`` subqueues per store transaction.
_RETURN_PASS = 2000


@dataclass(eq=False)
class PendingMove:
    """A message locked in ``source`` by a move that its transaction has not committed."""

    source: QueueState
    message: MessageRecord
    target: QueueState
    #: When it returns to its queue (seconds since 1970; a move into ``;retry``), else None.
    due_at: float | None = None

    @property
    def move(self) -> Move:
        """The store's move."""
        back = self.target.record.parent_queue_id if self.due_at is not None else None
        return Move(
            self.source.record.queue_id,
            self.target.record.queue_id,
            self.message.lookup_id,
            self.due_at,
            back,
        )


class Poison:
    """Subqueues, moves, abort counting and retry policies for one queue manager.

    ``lock_message(qs, lookup_id)`` locks one available message of a queue by
    LookupIdentifier and returns it (the reader's lookup receive, without a transaction
    and without deleting: Dequeue Message Begin)."""

    def __init__(
        self,
        store: StoreBackend,
        metrics: MetricsSink,
        queues: QueueRegistry,
        locks: LockTable,
        dead_letters: DeadLetters,
        lock_message: Callable[[QueueState, int], MessageRecord],
        commit: Callable[..., list[int]],
        clock: Callable[[], float],
    ) -> None:
        self._store = store
        self._metrics = metrics
        self._queues = queues
        self._locks = locks
        self._dead_letters = dead_letters
        self._lock_message = lock_message
        self._commit = commit
        #: Seconds since 1970 (due times of retry cycles).
        self.clock = clock
        self._policies: dict[str, RetryPolicy | None] = {}

    # ---- subqueues -------------------------------------------------------------------------

    def parent_of(self, qs: QueueState) -> QueueState:
        """The queue a subqueue belongs to (a queue is its own)."""
        if qs.record.queue_type != QueueType.SUBQUEUE:
            return qs
        parent = self._queues.get(qs.record.parent_queue_id)
        if parent is None or parent.deleted:
            raise MQError(HResult.MQ_ERROR_QUEUE_DELETED, f"queue of {qs.record.display_name} was deleted")
        return parent

    def subqueue(self, parent: QueueState, name: str) -> QueueState:
        """The state of subqueue ``name`` of ``parent``, created (stored) when missing."""
        if parent.record.queue_type != QueueType.PRIVATE:
            raise MQError(
                HResult.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION,
                f"{parent.record.display_name} has no subqueues (only a private queue has them)",
            )
        sub = check_subqueue_name(name)
        key = f"{parent.record.name};{sub}"
        with self._queues.lock:
            qs = self._queues.by_name.get(key)
            if qs is not None and not qs.deleted:
                return qs
            rec = self._store.write(
                store_moves.ensure_subqueue(
                    parent.record, sub, f"{parent.record.display_name};{sub}", self._now()
                )
            )
            return self._queues.by_id.get(rec.queue_id) or self._queues.add(rec)

    def subqueues_of(self, parent: QueueState) -> list[QueueState]:
        """The subqueues of a queue that exist."""
        pid = parent.record.queue_id
        with self._queues.lock:
            return [
                s
                for s in self._queues.by_id.values()
                if s.record.queue_type == QueueType.SUBQUEUE
                and s.record.parent_queue_id == pid
                and not s.deleted
            ]

    def _target(self, source: QueueState, to: str) -> QueueState:
        """The destination of a move from ``source``: ``to`` is a subqueue name (``poison``),
        ``;poison``, the queue's own name or a format name of a queue or subqueue. It must be
        the queue of ``source`` or a subqueue of it (MS-MQRR 3.1.4.10), and not ``source``."""
        parent = self.parent_of(source)
        text = to.strip()
        if text.startswith(";"):
            text = text[1:]
        if "\\" not in text and "=" not in text:
            target = self.subqueue(parent, text) if text else parent
        else:
            parsed = names.parse_name(text)
            if parsed.key is None or not self._queues.is_local_host(parsed.computer):
                raise MQError(
                    HResult.MQ_ERROR_ILLEGAL_OPERATION, f"{quoted(to)} is not a queue of this queue manager"
                )
            base, sub = split_key(parsed.key)
            if base != parent.record.name:
                raise MQError(
                    HResult.MQ_ERROR_ILLEGAL_OPERATION,
                    f"cannot move from {source.record.display_name} to {quoted(to)}: a message moves only"
                    " between a queue and its own subqueues",
                )
            target = parent if sub is None else self.subqueue(parent, sub)
        if target is source:
            raise MQError(
                HResult.MQ_ERROR_ILLEGAL_OPERATION, f"message is already in {source.record.display_name}"
            )
        return target

    def _due(self, target: QueueState, return_after: float | None) -> float | None:
        """The due time of a move with ``return_after``; only a move into a subqueue returns."""
        if return_after is None:
            return None
        if isinstance(return_after, bool) or not isinstance(return_after, int | float):
            raise MQError(HResult.MQ_ERROR_INVALID_PARAMETER, f"return_after {quoted(return_after)}")
        if target.record.queue_type != QueueType.SUBQUEUE:
            raise MQError(HResult.MQ_ERROR_ILLEGAL_OPERATION, "only a message moved into a subqueue returns")
        if not 0 <= return_after <= MAX_RETRY_CYCLE_DELAY:
            raise MQError(
                HResult.MQ_ERROR_ILLEGAL_PROPERTY_VALUE,
                f"return_after {return_after!r}: must be 0..{MAX_RETRY_CYCLE_DELAY:.0f} seconds",
            )
        return self.clock() + return_after

    # ---- Move Message ----------------------------------------------------------------------

    def move(
        self,
        queue: QueueRef,
        lookup_id: int,
        to: str,
        tx: Transaction | None = None,
        *,
        return_after: float | None = None,
    ) -> int:
        """Move Message: move message ``lookup_id`` of ``queue`` to ``to`` (see
        :meth:`_target`). Outside a transaction it is durable on return and the message's new
        LookupIdentifier is returned; inside ``tx`` it happens at commit (0 is returned; a
        message ``tx`` received is moved instead of received). ``return_after`` (seconds,
        a move into a subqueue): the message returns to its queue then, as a retry cycle
        does (the due time is stored with the move).

        Errors, nothing changed: MQ_ERROR_ILLEGAL_OPERATION (unrelated queue, same queue),
        MQ_ERROR_ILLEGAL_QUEUE_PATHNAME (bad subqueue name), MQ_ERROR_MESSAGE_LOCKED_UNDER_TRANSACTION
        (another transaction or reader holds it), MQ_ERROR_MESSAGE_NOT_FOUND (no such message
        in ``queue``), MQ_ERROR_TRANSACTION_USAGE (``tx`` on a non-transactional queue)."""
        if isinstance(lookup_id, bool) or not isinstance(lookup_id, int) or not 0 < lookup_id < 1 << 63:
            raise MQError(HResult.MQ_ERROR_INVALID_PARAMETER, f"LookupIdentifier {quoted(lookup_id)}")
        source = self._queues.resolve(queue)
        if source.record.queue_type not in (QueueType.PRIVATE, QueueType.SUBQUEUE):
            raise MQError(
                HResult.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION,
                f"messages of {source.record.display_name} cannot be moved (only a private queue's)",
            )
        if tx is not None:
            tx.check_active()
            if not source.record.transactional:
                raise MQError(
                    HResult.MQ_ERROR_TRANSACTION_USAGE,
                    f"queue {source.record.display_name} is not transactional",
                )
        target = self._target(source, to)
        due = self._due(target, return_after)
        if tx is not None:
            # A message this transaction received from the queue: moved instead (WCF's
            # poison handling receives, then moves in the same transaction).
            own = tx.drop_receive(lookup_id)
            if own is not None:
                if not tx.add_move(PendingMove(own.queue, own.message, target, due)):
                    self._locks.release([own])
                    tx.check_active()
                return 0
        message = self._lock_message(source, lookup_id)
        if tx is not None:
            if not tx.add_move(PendingMove(source, message, target, due)):
                self._locks.release([Receive(source, message)])
                tx.check_active()
            return 0
        try:
            (new,) = self._store.write(
                store_moves.move_messages([PendingMove(source, message, target, due).move])
            )
        except BaseException:
            self._locks.release([Receive(source, message)])
            raise
        self._moved([PendingMove(source, message, target)])
        return int(new)

    def commit_with_moves(
        self,
        sends: list[tuple[QueueState, list[Send]]],
        received: Sequence[tuple[QueueState, Sequence[MessageRecord]]],
        reasons: dict[int, int] | None,
        moves: Sequence[PendingMove],
    ) -> list[int]:
        """Transaction Commit of a transaction that moves messages: its sends, receives and
        moves in one store operation (the sender's commit), then the moved messages'
        locks dropped."""
        stored = self._commit(sends, received, reasons, [p.move for p in moves])
        self._moved(moves)
        return stored

    def _moved(self, pending: Sequence[PendingMove]) -> None:
        """After moves are durable: drop their locks, wake readers of the targets."""
        by_queue: dict[QueueState, list[int]] = {}
        for p in pending:
            by_queue.setdefault(p.source, []).append(p.message.lookup_id)
            p.source.messages_out += 1  # moves are rare: counted one by one
            p.target.messages_in += 1
        self._locks.unlock_ids(by_queue, removed=True)
        self._queues.notify(p.target for p in pending)

    def moved(self, pending: Sequence[PendingMove]) -> None:
        """A transaction with these moves committed (see :meth:`_moved`)."""
        if pending:
            self._moved(pending)

    def unmoved(self, pending: Sequence[PendingMove]) -> None:
        """A transaction with these moves aborted: the messages stay, available again."""
        if pending:
            self._locks.release([Receive(p.source, p.message) for p in pending])

    # ---- abort counting and the retry policy ----------------------------------------------

    def policy_of(self, qs: QueueState) -> RetryPolicy | None:
        """The retry policy of a queue (a subqueue has none of its own)."""
        text = qs.record.retry_policy
        if not text:
            return None
        got = self._policies.get(text)
        if got is None:
            got = self._policies[text] = RetryPolicy.decode(text)
        return got

    def abort(self, receives: Sequence[Receive]) -> None:
        """Transaction Abort of received messages: AbortCount + 1 each (durable), the retry
        policy of their queue applied, the others put back. A store failure puts every
        message back uncounted (the abort itself never fails)."""
        if not receives or self._queues.closed:
            self._locks.release(receives)
            return
        plans: dict[int, tuple[QueueState, RetryPolicy]] = {}
        for r in receives:
            qs = r.queue
            if qs.deleted or qs.record.queue_id in plans:
                continue
            policy = self.policy_of(qs)
            if policy is not None:
                plans[qs.record.queue_id] = (qs, policy)
        targets: dict[tuple[int, str], QueueState] = {}
        try:
            for qid, (qs, policy) in plans.items():
                targets[qid, RETRY] = self.subqueue(qs, RETRY)
                if policy.receive_error_handling.value == "move":
                    targets[qid, POISON] = self.subqueue(qs, POISON)
        except MQError:
            plans = {}
        now = self.clock()
        # LookupIdentifier -> (disposition, subqueue) of each message the policy handles;
        # filled by decide() inside the store write (again, the same, if the writer reruns it).
        decided: dict[int, tuple[Disposition, QueueState | None]] = {}

        def decide(counted: list[AbortedCount]) -> list[Move]:
            out = []
            for c in counted:
                plan = plans.get(c.queue_id)
                if plan is None:
                    continue
                policy = plan[1]
                d = policy.decide(c.abort_count, c.move_count)
                if d is Disposition.RETRY:
                    target = targets[c.queue_id, RETRY]
                    due = now + policy.retry_cycle_delay
                    out.append(Move(c.queue_id, target.record.queue_id, c.lookup_id, due, c.queue_id))
                elif d is Disposition.POISON:
                    target = targets[c.queue_id, POISON]
                    out.append(Move(c.queue_id, target.record.queue_id, c.lookup_id))
                elif d is Disposition.STAY:
                    continue
                else:
                    target = None
                decided[c.lookup_id] = (d, target)
            return out

        # A message purged while locked (PurgePending) is deleted by the release below,
        # with its acknowledgment in that one commit: nothing to count.
        ids = [
            r.message.lookup_id
            for r in receives
            if not r.queue.deleted and r.message.lookup_id not in r.queue.purge_pending
        ]
        if not ids:
            self._locks.release(receives)
            return
        try:
            self._store.write(store_moves.abort_counts(ids, decide))
        except MQError:
            log.exception("could not count %d aborted receive(s); the messages are back uncounted", len(ids))
            self._locks.release(receives)
            return
        moved: list[PendingMove] = []
        finals: dict[int, Disposition] = {}
        by_id = {r.message.lookup_id: r for r in receives}
        for lid, (d, target) in decided.items():
            r = by_id[lid]
            if target is None:
                finals[lid] = d
                continue
            moved.append(PendingMove(r.queue, r.message, target))
            self._metrics.count_poison(r.queue.record.name, d.value)
            log.info(
                "message %d of %s moved to %s after %d aborted receives",
                lid, r.queue.record.display_name, target.record.display_name,
                self.policy_of(r.queue).receive_retry_count + 1,  # type: ignore[union-attr]
            )  # fmt: skip
        if moved:
            self._moved(moved)
        moved_ids = {p.message.lookup_id for p in moved}
        self._locks.release([r for r in receives if r.message.lookup_id not in moved_ids])
        self._finish(finals, by_id)

    def _finish(self, finals: dict[int, Disposition], by_id: dict[int, Receive]) -> None:
        """The final handling that is not a move: reject (dead-letter queue with
        NackReceiveRejected: its negative acknowledgment goes to the sender's admin queue
        when it asked for one) or drop (deleted, logged and counted). FAULT leaves it."""
        for lid, d in finals.items():
            r = by_id[lid]
            qs = r.queue
            try:
                if d is Disposition.REJECT:
                    self._dead_letters.dead_letter(qs.record.name, [lid], NACK_RECEIVE_REJECTED)
                elif d is Disposition.DROP:
                    self._store.write(store_moves.drop_messages(qs.record.queue_id, [lid]))
                    log.warning(
                        "poison message %d of %s dropped after its last retry cycle (drop)",
                        lid, qs.record.display_name,
                    )  # fmt: skip
            except MQError:
                log.exception("final handling %s of message %d failed; it stays", d.value, lid)
                continue
            self._metrics.count_poison(qs.record.name, d.value)

    def return_due(self, now: float | None = None) -> int:
        """Move the messages whose retry-cycle delay passed back from ``;retry`` to their
        queue (MoveCount + 1); returns how many."""
        self._queues.check_open()
        at = self.clock() if now is None else now
        total = 0
        while True:
            # Messages locked in ;retry (a reader holds one) wait for the next pass.
            done = self._store.write(store_moves.due_returns(at, _RETURN_PASS, self._locked_ids()))
            total += len(done)
            self._queues.notify(
                s for s in (self._queues.get(target) for _src, target, _new in done) if s is not None
            )
            if len(done) < _RETURN_PASS:
                return total

    def _locked_ids(self) -> set[int]:
        out: set[int] = set()
        with self._queues.lock:
            states = [s for s in self._queues.by_id.values() if s.record.queue_type == QueueType.SUBQUEUE]
        for s in states:
            with s.cond:
                s.settle()
                out |= s.locked
        return out

    def _now(self) -> int:
        return int(self.clock())
