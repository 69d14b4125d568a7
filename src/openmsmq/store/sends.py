"""A message on its way into a queue, as the store writes it (:class:`Send`): the value
both the store operations (:mod:`openmsmq.store.ops`) and the INSERT statements
(:mod:`openmsmq.store.inserts`) work on, in a module of its own so neither imports the
other for it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from openmsmq.store.records import MessageRecord, message_from_row, message_to_row

__all__ = ["Send"]


@dataclass(frozen=True, slots=True)
class Send:
    """A message to insert in ``queue_id``, already as a row (:func:`message_to_row`).

    The op fills the LookupIdentifier (and ArrivedTime / sequence numbers) into the row
    at commit; build one with :meth:`of`.
    """

    queue_id: int
    row: list[Any]
    size: int
    #: Absolute expiry (s since 1970) or None; ``expire_class`` is the Nack class then.
    expire_at: int | None = None
    expire_class: int = 0

    @classmethod
    def of(
        cls, queue_id: int, message: MessageRecord, expire_at: int | None = None, expire_class: int = 0
    ) -> Send:
        """A Send of ``message``."""
        return cls(queue_id, message_to_row(message), message.size, expire_at, expire_class)

    @property
    def message(self) -> MessageRecord:
        """The message as it is (or will be) stored."""
        return message_from_row(self.row)
