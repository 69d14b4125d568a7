"""Who hears about messages leaving a queue: removal listeners (called after the
removal) and commit hooks (whose acknowledgment rows are written in the removal's own
store transaction, so a crash cannot separate a receive from its acknowledgment,
MS-MQQB 3.1.7.2 / 3.1.7.17)."""

from __future__ import annotations

from collections.abc import Callable

from openmsmq.qm.registry import QueueRegistry
from openmsmq.store.ops import AckRows, RemovedMessage, Send

__all__ = ["CommitHook", "Listener", "RemovalEvents"]

Listener = Callable[[list[RemovedMessage]], None]
CommitHook = Callable[[list[RemovedMessage]], list[Send]]


class RemovalEvents:
    """The listeners and commit hooks of one queue manager."""

    def __init__(self, queues: QueueRegistry) -> None:
        self._queues = queues
        self._listeners: list[Listener] = []
        #: listener -> its hook (see :meth:`add_commit_hook`).
        self.hooks: dict[Listener, CommitHook] = {}

    def add_listener(self, fn: Listener) -> None:
        self._listeners.append(fn)

    def add_commit_hook(self, listener: Listener, hook: CommitHook) -> None:
        self.hooks[listener] = hook

    def emit(self, events: list[RemovedMessage], *, hooked: bool = False) -> None:
        """Report ``events`` to the listeners; ``hooked``: not to those whose hook rows
        were written with the removal."""
        if events:
            for fn in list(self._listeners):
                if hooked and fn in self.hooks:
                    continue
                fn(events)

    def hook_rows(self, events: list[RemovedMessage]) -> list[Send]:
        """The rows the commit hooks write for ``events``."""
        rows: list[Send] = []
        for hook in list(self.hooks.values()):
            rows += hook(events)
        return rows

    def ack_rows(self, events: list[RemovedMessage]) -> AckRows | None:
        """The commit hooks' acknowledgment rows for ``events`` (removals about to be
        written), for the removal's own transaction; None when no hook is registered.

        Built before the removal's store operation: building them may open (create) an
        outgoing queue or reserve Identifier uniquifiers, which are store writes of their
        own. A removal that turns out to remove other messages leaves them unwritten
        (:class:`~openmsmq.store.ops.AckRows`); :meth:`done` then sends them as before,
        in a second commit."""
        if not self.hooks:
            return None
        return AckRows((ev.message.lookup_id for ev in events), self.hook_rows(events))

    def done(self, events: list[RemovedMessage], acks: AckRows | None) -> None:
        """After a removal committed: wake receivers of the queues its acknowledgments went
        to, and report ``events`` to the listeners (hooks only if their rows were not
        written with it)."""
        if acks is not None and acks.written:
            if acks.sends:
                by_id = self._queues.by_id
                self._queues.notify(by_id[s.queue_id] for s in acks.sends if s.queue_id in by_id)
            self.emit(events, hooked=True)
        else:
            self.emit(events)
