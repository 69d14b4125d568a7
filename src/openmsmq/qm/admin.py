"""Queue administration of a queue manager: create (private queues, and the system queues
at open), delete, list, read and change properties, purge (MS-MQDMPR 3.1.7.1.1 to
3.1.7.1.7). :class:`~openmsmq.qm.manager.QueueManager` builds one :class:`QueueAdmin`
and hands it its collaborators; its public methods delegate here."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import Any

from openmsmq.errors import HResult, MQError, quoted
from openmsmq.qm import names
from openmsmq.qm.dead_letters import DeadLetters
from openmsmq.qm.locks import NACK_Q_PURGED
from openmsmq.qm.poison import Poison
from openmsmq.qm.registry import QueueRef, QueueRegistry
from openmsmq.qm.removals import RemovalEvents
from openmsmq.retry_policy import RetryPolicy
from openmsmq.store import queues, reads
from openmsmq.store.backend import StoreBackend
from openmsmq.store.records import INFINITE, QueueRecord, QueueType
from openmsmq.store.writes import WriteContext

__all__ = ["NACK_Q_DELETED", "QueueAdmin", "canonical_senders"]

#: Message.Class NackQueueDeleted (MS-MQDMPR 3.1.1.12, MS-MQMQ 2.2.18.1.6).
NACK_Q_DELETED = 0xC000

#: Messages deleted per store transaction by a purge of a local queue.
_PURGE_PASS = 20_000


class QueueAdmin:
    """Create, delete, list, change and purge the queues of one queue manager."""

    def __init__(
        self,
        store: StoreBackend,
        registry: QueueRegistry,
        removals: RemovalEvents,
        dead_letters: DeadLetters,
        poison: Poison,
        now: Callable[[], int],
        default_quota_kb: int,
    ) -> None:
        self.store = store
        self.queues = registry
        self.removals = removals
        self.dead_letters = dead_letters
        self.poison = poison
        self._now = now
        #: Quota of a queue created without one (store.default_queue_quota), in KB.
        self.default_quota_kb = default_quota_kb

    def create_system_queues(self) -> None:
        """Create the system queues a queue manager needs that its store does not hold yet
        (dead-letter queues, the system journal, the order queue, AwaitingFinalAck)."""
        wanted = [
            (names.DEADLETTER, False, None),
            (names.DEADXACT, True, None),
            (names.SYSTEM_JOURNAL, False, None),
            (names.ORDER_QUEUE, False, names.ORDER_QUEUE_NUMBER),
            (names.AWAITING_FINAL_ACK, True, None),
        ]
        for key, transactional, number in wanted:
            if key not in self.queues.by_name:
                rec = self.store.write(
                    queues.create_queue(
                        name=key,
                        display_name=key,
                        queue_type=QueueType.SYSTEM,
                        transactional=transactional,
                        label=key,
                        quota_kb=INFINITE,
                        journal_quota_kb=INFINITE,
                        journal=False,
                        now=self._now(),
                        private_number=number or 0,
                        with_journal=False,
                    )
                )
                self.queues.add(rec)

    def create_queue(
        self,
        name: str,
        *,
        transactional: bool = False,
        label: str = "",
        quota_kb: int | None = None,
        journal: bool = False,
        journal_quota_kb: int = INFINITE,
        allowed_senders: Iterable[str | uuid.UUID] = (),
        retry_policy: RetryPolicy | None = None,
    ) -> QueueRecord:
        """Create a private queue ``private$\\name`` (and its journal queue).

        ``retry_policy``: what happens to a message whose receives keep being aborted
        (:mod:`openmsmq.retry_policy`; transactional queues only); None: nothing.

        ``allowed_senders``: the QM GUIDs that may send into it over MS-MQQB (empty: every
        sender); a message from another QM is rejected with NACK_ACCESS_DENIED.
        ``quota_kb`` None: the QM's ``default_quota_kb`` (store.default_queue_quota).
        MQ_ERROR_QUEUE_EXISTS if it exists (names are case-insensitive);
        MQ_ERROR_ILLEGAL_QUEUE_PATHNAME for a bad or non-private name;
        MQ_ERROR_ILLEGAL_PROPERTY_VALUE for a sender that is not a GUID.
        """
        self.queues.check_open()
        parsed = names.parse_name(name)
        if parsed.subqueue:
            raise MQError(
                HResult.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME,
                f"{quoted(name)} names a subqueue: a subqueue is created by the first move into it",
            )
        if (
            parsed.is_format_name
            or parsed.key is None
            or not parsed.key.startswith("private$\\")
            or parsed.key.endswith(";journal")
            or not self.queues.is_local_host(parsed.computer)
        ):
            raise MQError(
                HResult.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME, f"{quoted(name)}: expected a local private$\\ path"
            )
        if len(label) > 124:
            raise MQError(HResult.MQ_ERROR_LABEL_TOO_LONG, "queue label has at most 124 characters")
        senders = canonical_senders(allowed_senders)
        policy = _policy_text(retry_policy, transactional)
        with self.queues.lock:
            rec = self.store.write(
                _with_policy(
                    policy,
                    self._now(),
                    queues.create_queue(
                        name=parsed.key,
                        display_name=parsed.display,
                        queue_type=QueueType.PRIVATE,
                        transactional=transactional,
                        label=label,
                        quota_kb=self.default_quota_kb if quota_kb is None else quota_kb,
                        journal_quota_kb=journal_quota_kb,
                        journal=journal,
                        now=self._now(),
                        allowed_senders=senders,
                    ),
                )
            )
            self.queues.add(rec)
            if rec.journal_queue_id is not None:
                self.queues.add(self.store.read(lambda c: reads.get_queue(c, rec.journal_queue_id or 0)))
        return rec

    def delete_queue(self, queue: QueueRef) -> None:
        """Delete a private queue with its journal and messages (NackQueueDeleted events).
        Waiting receivers and later calls through a handle get MQ_ERROR_QUEUE_DELETED."""
        qs = self.queues.resolve(queue)
        if qs.record.queue_type not in (QueueType.PRIVATE, QueueType.OUTGOING):
            raise MQError(HResult.MQ_ERROR_ACCESS_DENIED, f"cannot delete system queue {qs.record.name}")
        acks = None
        if self.removals.hooks:  # acknowledgments written with the deletion
            pre = self.store.read(queues.queue_events(qs.record.queue_id, NACK_Q_DELETED))
            acks = self.removals.ack_rows(pre) if pre else None
        with self.queues.lock:
            events = self.store.write(queues.delete_queue(qs.record.queue_id, NACK_Q_DELETED, acks))
            doomed = [qs, *self.poison.subqueues_of(qs)]
            if qs.record.journal_queue_id in self.queues.by_id:
                doomed.append(self.queues.by_id[qs.record.journal_queue_id or 0])
            self.queues.drop(doomed)
            for s in doomed:
                with s.cond:
                    s.deleted = True
                    s.reset_head()
                    s.cond.notify_all()
        self.removals.done(events, acks)

    def list_queues(self, *, include_system: bool = False) -> list[QueueRecord]:
        """Private queues (and, if asked, system, journal and outgoing queues) with counts."""
        self.queues.check_open()
        recs = self.store.read(reads.list_queues)
        if include_system:
            return recs
        return [r for r in recs if r.queue_type in (QueueType.PRIVATE, QueueType.SUBQUEUE)]

    def get_queue(self, queue: QueueRef) -> QueueRecord:
        """Current properties of a queue, with its message count and TotalBytes."""
        qs = self.queues.resolve(queue)
        return self.store.read(lambda c: reads.get_queue(c, qs.record.queue_id))

    def set_queue_properties(self, queue: QueueRef, **changes: Any) -> QueueRecord:
        """Set label, quota_kb, journal_quota_kb, journal, base_priority, authenticate,
        privacy_level, allowed_senders (GUIDs; empty = every sender) (ModifyTime is updated);
        other keys: MQ_ERROR_PROPERTY_NOTALLOWED."""
        qs = self.queues.resolve(queue)
        if len(changes.get("label", "")) > 124:
            raise MQError(HResult.MQ_ERROR_LABEL_TOO_LONG, "queue label has at most 124 characters")
        if "allowed_senders" in changes:
            changes["allowed_senders"] = canonical_senders(changes["allowed_senders"])
        if "retry_policy" in changes:
            if qs.record.queue_type != QueueType.PRIVATE:
                raise MQError(
                    HResult.MQ_ERROR_ILLEGAL_OPERATION,
                    f"{qs.record.display_name} takes no retry policy (a private queue does)",
                )
            changes["retry_policy"] = _policy_text(changes["retry_policy"], qs.record.transactional)
        rec = self.store.write(queues.update_queue(qs.record.queue_id, changes, self._now()))
        qs.record = rec
        return rec

    def purge_queue(self, queue: QueueRef) -> int:
        """Delete every available message (MS-MQDMPR 3.1.7.1.7); locked ones become
        PurgePending and are deleted when their lock ends. Returns the count deleted now.

        An outgoing queue (named by its destination's format name) is purged with the
        class NACK_DELETED (0x8001), its ``dead_letter`` messages moved to the dead-letter
        queues (:meth:`DeadLetters.purge_outgoing`); not while this store is served."""
        qs = self.queues.resolve(queue)
        if qs.record.queue_type == QueueType.OUTGOING:
            return self.dead_letters.purge_outgoing(qs)
        qid = qs.record.queue_id
        bound = self.store.read(queues.purge_bound(qid))
        total = 0
        # Passes of _PURGE_PASS messages, one store transaction each: one transaction for
        # a long queue would hold the writer (every other commit) for a long time.
        while True:
            acks = None
            if self.removals.hooks:
                # Acknowledgments written with the pass: built first for its messages.
                with qs.cond:
                    qs.settle()
                    exclude = set(qs.locked)
                pre = self.store.read(
                    queues.purge_candidates(qid, exclude, NACK_Q_PURGED, bound, _PURGE_PASS)
                )
                acks = self.removals.ack_rows(pre)
            with qs.cond:
                qs.settle()
                qs.drop_prefetch()
                exclude = set(qs.locked)
                count, events, more = self.store.write(
                    queues.purge_queue(qid, exclude, NACK_Q_PURGED, bound, _PURGE_PASS, acks)
                )
                qs.purge_pending |= exclude
            self.removals.done(events, acks)
            total += count
            if not more:
                return total


def canonical_senders(senders: Iterable[str | uuid.UUID] | str) -> str:
    """The stored form of a queue's sender allowlist: unique lower-case GUIDs, sorted,
    comma-separated ('' = every sender). A string is split at commas and white space.
    Raises MQ_ERROR_ILLEGAL_PROPERTY_VALUE for anything that is not a GUID."""
    items = senders.replace(",", " ").split() if isinstance(senders, str) else list(senders)
    out = set()
    for item in items:
        try:
            out.add(str(item if isinstance(item, uuid.UUID) else uuid.UUID(str(item).strip("{}"))))
        except ValueError:
            raise MQError(
                HResult.MQ_ERROR_ILLEGAL_PROPERTY_VALUE, f"allowed sender {quoted(item)} is not a QM GUID"
            ) from None
    return ",".join(sorted(out))


def _policy_text(policy: object, transactional: bool) -> str:
    """The stored form of a retry policy given as a RetryPolicy, its text or None ('');
    MQ_ERROR_ILLEGAL_PROPERTY_VALUE for a bad one, MQ_ERROR_ILLEGAL_OPERATION on a
    non-transactional queue (no transaction is aborted there)."""
    if policy is None or policy == "":
        return ""
    if isinstance(policy, str):
        parsed = RetryPolicy.decode(policy)
        assert parsed is not None
        policy = parsed
    if not isinstance(policy, RetryPolicy):
        raise MQError(HResult.MQ_ERROR_ILLEGAL_PROPERTY_VALUE, f"retry policy {quoted(policy)}")
    if not transactional:
        raise MQError(
            HResult.MQ_ERROR_ILLEGAL_OPERATION,
            "a retry policy needs a transactional queue (only a transactional receive is aborted)",
        )
    return policy.encode()


def _with_policy(
    policy: str, now: int, create: Callable[[WriteContext], QueueRecord]
) -> Callable[[WriteContext], QueueRecord]:
    """``create`` with the new queue's retry policy set in the same store transaction."""
    if not policy:
        return create

    def op(ctx: WriteContext) -> QueueRecord:
        rec = create(ctx)
        return queues.update_queue(rec.queue_id, {"retry_policy": policy}, now)(ctx)

    return op
