"""The dead-letter queues of a queue manager, through the public client API: list, find,
requeue and purge their messages (``openmsmq dlq`` and the web console use it, on a data
directory and over remote read alike).

A queue manager keeps two system dead-letter queues (MS-MQDMPR 3.1.1.1):
``system$;deadxact`` (SystemTransactionalDeadletterQueue) for transactional messages and
``system$;deadletter`` (SystemDeadletterQueue) for the others. A message lands there with
its Message.Class set to why (MS-MQMQ 2.2.18.1.6); its destination queue is kept in the
message (``Message.queue``).

Requeue moves a message back to its destination queue (or another) as a new message with
the same body and properties; the queue manager gives it a new Identifier and a new
LookupIdentifier (identity is assigned at send, MS-MQMQ 2.2.8), and its SentTime restarts.

* Transactional dead letters: the receive from ``system$;deadxact`` and the send to the
  destination are ONE transaction (per destination and batch): the message is either
  back in its queue exactly once or still in the dead-letter queue.
* Non-transactional dead letters cannot join a transaction (MS-MQQB 1.3.3). They are
  locked with a two-phase receive, sent (durable on return), then ACKed; a crash between
  the send and the ACK leaves the message in both places (at least once), never in neither.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from openmsmq.client.types import INFINITE, Access, Ack, OutgoingMessage
from openmsmq.errors import HResult, MQError, quoted

if TYPE_CHECKING:
    from openmsmq.client import Connection, Message, PendingMessage, Queue

__all__ = [
    "DEAD_LETTER_QUEUES",
    "REQUEUE_BATCH",
    "DeadLetter",
    "RequeueResult",
    "dead_letter_kinds",
    "find_dead_letter",
    "iter_dead_letters",
    "outgoing_copy",
    "purge_dead_letters",
    "reason_name",
    "requeue",
]

#: The system dead-letter queues by kind (MS-MQDMPR 3.1.1.1).
DEAD_LETTER_QUEUES: dict[str, str] = {"xact": "system$;deadxact", "non-xact": "system$;deadletter"}

#: Why a message is in a dead-letter queue, by Message.Class (MS-MQMQ 2.2.18.1.6).
_REASONS: dict[int, str] = {
    0x8000: "the destination queue is not available to the sender",
    0x8001: "deleted by an administrative action before reaching its queue",
    0x8002: "TimeToReachQueue ran out before it reached its destination queue",
    0x8003: "the destination queue's quota was exceeded",
    0x8004: "the sender may not send to the destination queue",
    0x8005: "the routing hop count was exceeded",
    0x8006: "its digital signature is not valid",
    0x8007: "the destination could not decrypt it",
    0x8009: "a transactional message sent to a non-transactional queue",
    0x800A: "a non-transactional message sent to a transactional queue",
    0x800B: "the requested encryption provider is not supported",
    0xC000: "its queue was deleted before it was received",
    0xC001: "its queue was purged before it was received",
    0xC002: "TimeToBeReceived ran out before it was received",
    0xC004: "the receiving application rejected it",
}

#: Messages moved per transaction by ``requeue`` (one commit, one fsync each).
REQUEUE_BATCH = 256


def reason_name(message: Message) -> str:
    """Why it is there: its class by its one name (``NACK_RECEIVE_TIMEOUT``, MS-MQMQ
    2.2.18.1.6; :func:`~openmsmq.wire.constants.message_class_name`)."""
    return message.class_name


def _reason_text(message: Message) -> str:
    return _REASONS.get(message.message_class, "application-defined class")


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A message in a dead-letter queue: ``kind`` is ``"xact"`` or ``"non-xact"``."""

    kind: str
    message: Message

    @property
    def queue(self) -> str:
        """The dead-letter queue that holds it."""
        return DEAD_LETTER_QUEUES[self.kind]

    @property
    def destination(self) -> str:
        """The queue the message was meant for (format name as the sender gave it)."""
        return self.message.queue

    def to_dict(self, now: float) -> dict[str, Any]:
        """A JSON object: the message's stable keys plus ``dlq``, ``reason``, ``age_seconds``."""
        m = self.message
        doc: dict[str, Any] = {
            "dlq": self.kind,
            "dlq_queue": self.queue,
            "reason": reason_name(m),
            "reason_text": _reason_text(m),
            "destination": self.destination,
            "age_seconds": max(0, int(now) - m.sent_time) if m.sent_time else None,
        }
        doc.update(m.to_dict())
        return doc


@dataclass(frozen=True, slots=True)
class RequeueResult:
    """What happened to one dead letter: ``new_message_id`` when moved, else ``error``."""

    letter: DeadLetter
    to: str
    new_message_id: str = ""
    error: str = ""

    @property
    def ok(self) -> bool:
        """True when the message was moved."""
        return not self.error

    def to_dict(self) -> dict[str, Any]:
        """A JSON object with stable keys."""
        m = self.letter.message
        doc: dict[str, Any] = {
            "dlq": self.letter.kind,
            "lookup_id": m.lookup_id,
            "message_id": m.message_id,
            "to": self.to,
        }
        if self.ok:
            doc["new_message_id"] = self.new_message_id
        else:
            doc["error"] = self.error
        return doc


# --------------------------------------------------------------------------------------------------
# Library-style operations (used by the commands; take a Connection)
# --------------------------------------------------------------------------------------------------


def dead_letter_kinds(xact: bool, non_xact: bool) -> list[str]:
    """The dead-letter queue kinds a command selects: both when neither flag or both are given."""
    if xact == non_xact:
        return ["xact", "non-xact"]
    return ["xact"] if xact else ["non-xact"]


def iter_dead_letters(conn: Connection, kinds: Iterable[str]) -> Iterator[DeadLetter]:
    """Browse the dead-letter queues of ``kinds`` in queue order (nothing is removed)."""
    for kind in kinds:
        with conn.open_queue(DEAD_LETTER_QUEUES[kind], Access.PEEK) as q, q.cursor() as cur:
            for m in cur:
                yield DeadLetter(kind, m)


def find_dead_letter(conn: Connection, ident: str, kinds: Iterable[str]) -> DeadLetter:
    """The dead letter with LookupIdentifier ``ident`` (a number) or Identifier
    ``ident`` (``{GUID}\\n``); MQ_ERROR_MESSAGE_NOT_FOUND when neither queue has it."""
    kinds = list(kinds)
    text = ident.strip()
    if text.isdigit():
        lookup_id = int(text)
        for kind in kinds:
            with conn.open_queue(DEAD_LETTER_QUEUES[kind], Access.PEEK) as q:
                try:
                    return DeadLetter(kind, q.peek_by_lookup_id(lookup_id))
                except MQError as exc:
                    if exc.hresult != HResult.MQ_ERROR_MESSAGE_NOT_FOUND:
                        raise
    else:
        wanted = text.lower()
        for letter in iter_dead_letters(conn, kinds):
            if letter.message.message_id.lower() == wanted:
                return letter
    raise MQError(HResult.MQ_ERROR_MESSAGE_NOT_FOUND, f"no dead letter {quoted(ident)}")


def outgoing_copy(m: Message, *, keep_expiry: bool = True) -> OutgoingMessage:
    """The properties of ``m`` as a message to send again (identity and times are the QM's)."""
    return OutgoingMessage(
        body=m.body,
        label=m.label,
        priority=m.priority,
        correlation_id=m.correlation_id,
        app_specific=m.app_specific,
        body_type=m.body_type,
        delivery=m.delivery,
        time_to_reach_queue=m.time_to_reach_queue if keep_expiry else INFINITE,
        time_to_be_received=m.time_to_be_received if keep_expiry else INFINITE,
        ack=m.ack,
        admin_queue=m.admin_queue,
        response_queue=m.response_queue,
        journal=m.journal,
        dead_letter=m.dead_letter,
        extension=m.extension,
    )


def _error_text(exc: MQError) -> str:
    return f"{getattr(exc.hresult, 'name', 'HRESULT')} (0x{int(exc.hresult):08X}): {exc.message}"


@dataclass
class _Group:
    kind: str
    to: str
    letters: list[DeadLetter] = field(default_factory=list)


def requeue(
    conn: Connection,
    letters: Sequence[DeadLetter],
    to: str | None = None,
    *,
    keep_expiry: bool = True,
) -> list[RequeueResult]:
    """Move dead letters back to their destination queues (or all to ``to``), in
    LookupIdentifier order.

    Transactional ones move in one transaction per destination and batch of
    :data:`REQUEUE_BATCH`; non-transactional ones by two-phase receive, send, ACK (see
    the module docstring). A failure is reported per message and leaves it in its
    dead-letter queue.
    """
    groups: dict[tuple[str, str], _Group] = {}
    results: list[RequeueResult] = []
    # LookupIdentifier order is the order the messages entered this QM: requeued copies
    # keep it within each destination.
    for letter in sorted(letters, key=lambda x: x.message.lookup_id):
        dest = to or letter.destination
        if not dest:
            results.append(RequeueResult(letter, "", error="destination unknown: give --to QUEUE"))
            continue
        groups.setdefault((letter.kind, dest), _Group(letter.kind, dest)).letters.append(letter)
    for group in groups.values():
        with conn.open_queue(DEAD_LETTER_QUEUES[group.kind], Access.RECEIVE) as dlq:
            try:
                dest_q = conn.open_queue(group.to, Access.SEND)
            except MQError as exc:
                results += [RequeueResult(x, group.to, error=_error_text(exc)) for x in group.letters]
                continue
            with dest_q:
                for start in range(0, len(group.letters), REQUEUE_BATCH):
                    batch = group.letters[start : start + REQUEUE_BATCH]
                    if group.kind == "xact":
                        results += _requeue_xact(conn, dlq, dest_q, batch, keep_expiry)
                    else:
                        results += _requeue_plain(dlq, dest_q, batch, keep_expiry)
    return results


def _requeue_xact(
    conn: Connection, dlq: Queue, dest: Queue, batch: list[DeadLetter], keep_expiry: bool
) -> list[RequeueResult]:
    """Receive ``batch`` from the transactional DLQ and send it to ``dest`` in ONE transaction."""
    gone: list[RequeueResult] = []
    moved: list[DeadLetter] = []
    tx = conn.transaction()
    try:
        for letter in batch:
            try:
                m = dlq.receive_by_lookup_id(letter.message.lookup_id, tx=tx)
            except MQError as exc:
                # Received, purged or locked by someone else since it was listed.
                gone.append(RequeueResult(letter, dest.name, error=_error_text(exc)))
                continue
            moved.append(DeadLetter(letter.kind, m))
        receipts = dest.send_many([outgoing_copy(x.message, keep_expiry=keep_expiry) for x in moved], tx=tx)
        tx.commit()
    except MQError as exc:
        if tx.state == "active":
            tx.abort()
        return gone + [RequeueResult(x, dest.name, error=_error_text(exc)) for x in moved]
    except BaseException:
        if tx.state == "active":
            tx.abort()
        raise
    return gone + [
        RequeueResult(x, dest.name, new_message_id=r.message_id) for x, r in zip(moved, receipts, strict=True)
    ]


def _requeue_plain(
    dlq: Queue, dest: Queue, batch: list[DeadLetter], keep_expiry: bool
) -> list[RequeueResult]:
    """Lock ``batch`` in the non-transactional DLQ, send the copies (one commit), then ACK."""
    results: list[RequeueResult] = []
    locked: list[PendingMessage] = []
    try:
        for letter in batch:
            try:
                locked.append(dlq.start_receive(lookup_id=letter.message.lookup_id))
            except MQError as exc:
                results.append(RequeueResult(letter, dest.name, error=_error_text(exc)))
        try:
            receipts = (
                dest.send_many([outgoing_copy(p.message, keep_expiry=keep_expiry) for p in locked])
                if locked
                else []
            )
        except MQError as exc:
            for p in locked:
                dlq.end_receive(p, Ack.NACK)
            err = _error_text(exc)
            return results + [
                RequeueResult(DeadLetter("non-xact", p.message), dest.name, error=err) for p in locked
            ]
    except BaseException:
        for p in locked:
            try:
                dlq.end_receive(p, Ack.NACK)
            except MQError:
                continue  # already ended
        raise
    for p, r in zip(locked, receipts, strict=True):
        # The copy is durable: from here on a crash can only leave the original behind too.
        dlq.end_receive(p, Ack.ACK)
        results.append(
            RequeueResult(DeadLetter("non-xact", p.message), dest.name, new_message_id=r.message_id)
        )
    return results


def purge_dead_letters(conn: Connection, kinds: Iterable[str]) -> dict[str, int]:
    """Delete every available message of the dead-letter queues of ``kinds``; counts by kind."""
    out: dict[str, int] = {}
    for kind in kinds:
        with conn.open_queue(DEAD_LETTER_QUEUES[kind], Access.RECEIVE) as q:
            out[kind] = q.purge()
    return out


# --------------------------------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------------------------------
