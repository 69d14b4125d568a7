"""Messages of the remote-read service's replies as client :class:`Message` objects: the
packed form (:mod:`openmsmq.remote.packed`, docs/remote.md) and the ``repeated Message``
form of servers that predate it. :func:`messages` and :func:`pending` are what the gRPC
transport and the step stream decode replies with.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from typing import Any

from openmsmq.client.message import Message, PendingMessage
from openmsmq.client.types import AckRequest, Delivery
from openmsmq.remote import openmsmq_remote_pb2 as pb
from openmsmq.remote.packed import (
    FLAG_DEAD_LETTER,
    FLAG_FIRST_IN_TRANSACTION,
    FLAG_JOURNAL,
    FLAG_LAST_IN_TRANSACTION,
    FLAG_TRANSACTIONAL,
    decode_messages,
)

__all__ = ["messages", "pending"]

_GUID_TEXT: dict[bytes, str] = {}
_ACKS = {i: AckRequest(i) for i in range(16)}
_DELIVERY = {0: Delivery.EXPRESS, 1: Delivery.RECOVERABLE}


def _guid(raw: bytes) -> str:
    """``{GUID}`` text of 16 RFC 4122 bytes, memoised (a batch has few distinct QM GUIDs)."""
    text = _GUID_TEXT.get(raw)
    if text is None:
        if len(_GUID_TEXT) > 4096:
            _GUID_TEXT.clear()
        text = _GUID_TEXT[raw] = f"{{{uuid.UUID(bytes=raw)}}}" if len(raw) == 16 else "{}"
    return text


# Message fields from a packed record (openmsmq.remote.packed): the record's names are
# the parameters of the generated ``make``; a Message field missing here gets its default.
_RECORD = [
    "lookup_id", "uniq", "message_class", "priority", "app_specific", "body_type", "delivery",
    "sent_time", "arrived_time", "ttrq", "ttbr", "ack_flags", "flags", "request_id", "tx_seq_id",
    "tx_seq_num", "lineage", "source", "body", "label", "corr", "dest", "admin", "resp", "ext",
]  # fmt: skip
_FIELD_SOURCE = {
    "body": "body", "label": "label", "lookup_id": "lookup_id",
    "message_id": "_guid(lineage) + _BACKSLASH + str(uniq)",
    "message_class": "message_class", "priority": "priority", "correlation_id": "corr",
    "app_specific": "app_specific", "body_type": "body_type",
    "delivery": "_DELIVERY.get(delivery, _EXPRESS)", "sent_time": "sent_time",
    "arrived_time": "arrived_time", "time_to_reach_queue": "ttrq", "time_to_be_received": "ttbr",
    "queue": "dest", "admin_queue": "admin", "response_queue": "resp",
    "ack": "_ACKS[ack_flags & 0x0F]", "journal": f"flags & {FLAG_JOURNAL} != 0",
    "dead_letter": f"flags & {FLAG_DEAD_LETTER} != 0",
    "transactional": f"flags & {FLAG_TRANSACTIONAL} != 0",
    "first_in_transaction": f"flags & {FLAG_FIRST_IN_TRANSACTION} != 0",
    "last_in_transaction": f"flags & {FLAG_LAST_IN_TRANSACTION} != 0",
    "source_machine": "_guid(source)", "extension": "ext",
    "tx_sequence_id": "tx_seq_id", "tx_sequence_number": "tx_seq_num",
}  # fmt: skip


def _record_maker() -> Callable[..., Message]:
    """``make(*record) -> Message`` for a packed record, generated once.

    The hot path of batched receives: a frozen dataclass's ``__init__`` sets its fields
    through ``object.__setattr__``; for the slotted :class:`Message` the generated
    function stores straight into the slots (half the cost per message), giving an
    object equal to ``Message(...)`` with the same values. Falls back to the constructor
    should :class:`Message` stop being a plain slotted dataclass.
    """
    env: dict[str, Any] = {
        "Message": Message, "_guid": _guid, "_BACKSLASH": "\\", "_DELIVERY": _DELIVERY,
        "_EXPRESS": Delivery.EXPRESS, "_ACKS": _ACKS, "_new": object.__new__,
    }  # fmt: skip
    values: list[tuple[str, str]] = []
    for f in dataclasses.fields(Message):
        expr = _FIELD_SOURCE.get(f.name)
        if expr is None:  # a field this transport does not carry: its default
            if f.default is not dataclasses.MISSING:
                env[f"_default_{f.name}"] = f.default
                expr = f"_default_{f.name}"
            elif f.default_factory is not dataclasses.MISSING:
                env[f"_factory_{f.name}"] = f.default_factory
                expr = f"_factory_{f.name}()"
            else:
                raise TypeError(f"Message.{f.name} has no default and no packed source")
        values.append((f.name, expr))
    fast = (
        "__slots__" in Message.__dict__
        and not hasattr(Message, "__post_init__")
        and all(f.init for f in dataclasses.fields(Message))
    )
    lines = [f"def make({', '.join(_RECORD)}):"]
    if fast:
        lines.append("    o = _new(Message)")
        for name, expr in values:
            env[f"_set_{name}"] = getattr(Message, name).__set__
            lines.append(f"    _set_{name}(o, {expr})")
        lines.append("    return o")
    else:
        lines.append("    return Message(" + ", ".join(f"{n}={e}" for n, e in values) + ")")
    exec("\n".join(lines), env)  # source built above from field names only
    make: Callable[..., Message] = env["make"]
    return make


_make = _record_maker()


def _message(m: pb.Message) -> Message:
    """A :class:`Message` from the ``repeated Message`` form (servers without packing)."""
    flags = (
        (FLAG_JOURNAL if m.positive_journaling else 0)
        | (FLAG_DEAD_LETTER if m.negative_journaling else 0)
        | (FLAG_TRANSACTIONAL if m.transactional else 0)
        | (FLAG_FIRST_IN_TRANSACTION if m.first_in_transaction else 0)
        | (FLAG_LAST_IN_TRANSACTION if m.last_in_transaction else 0)
    )
    out = _make(
        m.lookup_id, m.id_uniquifier, m.message_class, m.priority, m.app_specific, m.body_type,
        m.delivery, m.sent_time, m.arrived_time, m.time_to_reach_queue, m.time_to_be_received,
        m.ack_flags, flags, m.request_id, m.tx_sequence_id, m.tx_sequence_number, m.id_lineage,
        m.source_machine, m.body, m.label, m.correlation_id, m.destination_queue, m.admin_queue,
        m.response_queue, m.extension,
    )  # fmt: skip
    if m.abort_count or m.move_count:  # not in the packed form: the server then sends this one
        out = dataclasses.replace(out, abort_count=m.abort_count, move_count=m.move_count)
    return out


def messages(reply: pb.ReadReply) -> list[Message]:
    """The messages of a :class:`ReadReply`, packed or not."""
    if reply.packed:
        return [_make(*r) for r in decode_messages(reply.packed)]
    return [_message(m) for m in reply.messages]


def pending(reply: pb.ReadReply, transactional: bool = False) -> list[PendingMessage]:
    """The (request id, message) pairs of a StartReceive reply, packed or not."""
    if reply.packed:
        return [
            PendingMessage(r[13], _make(*r), transactional)  # type: ignore[arg-type]
            for r in decode_messages(reply.packed)
        ]
    return [PendingMessage(m.request_id, _message(m), transactional) for m in reply.messages]
