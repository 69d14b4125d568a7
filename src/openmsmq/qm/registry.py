"""The queues of a queue manager in memory: one :class:`~openmsmq.qm.handles.QueueState`
per stored queue, found by name, format name or QueueIdentifier, and the rule of which
hosts name this QM (a queue on another host is reached through an outgoing queue)."""

from __future__ import annotations

import contextlib
import ipaddress
import threading
import time
import uuid
from collections.abc import Callable, Iterable

from openmsmq.errors import HResult, MQError, quoted
from openmsmq.qm import names
from openmsmq.qm.handles import QueueHandle, QueueState
from openmsmq.store.records import QueueRecord, QueueType

__all__ = ["QueueRef", "QueueRegistry"]

QueueRef = str | QueueHandle
#: Most names :meth:`QueueRegistry.remember_send_name` keeps (then it starts over).
_SEND_NAMES = 4096


class QueueRegistry:
    """Queue states by name and by QueueIdentifier, under one lock; whether the QM is open.

    ``guid`` is the QM's GUID (``PRIVATE=`` format names of this QM), ``computer_name``
    the host name that, with the loopback names, makes a path name local."""

    def __init__(self, guid: uuid.UUID, computer_name: str) -> None:
        self.guid = guid
        self.computer_name = computer_name
        #: Guards the dictionaries and the local host set (re-entrant: the QM holds it
        #: around a store write that adds states).
        self.lock = threading.RLock()
        #: Queue states by stored name (``private$\\orders``).
        self.by_name: dict[str, QueueState] = {}
        #: Queue states by QueueIdentifier.
        self.by_id: dict[int, QueueState] = {}
        self.closed = False
        self._local_hosts = {computer_name, "localhost", "127.0.0.1", "::1", "."}
        # Local queue names (as the caller wrote them) already resolved by a send.
        self._send_names: dict[str, QueueState] = {}
        # Called with the QueueIdentifier after a commit into an outgoing queue.
        self._outgoing_listeners: list[Callable[[int], None]] = []

    def check_open(self) -> None:
        """MQ_ERROR_SERVICE_NOT_AVAILABLE once the QM is closed."""
        if self.closed:
            raise MQError(HResult.MQ_ERROR_SERVICE_NOT_AVAILABLE, "queue manager is closed")

    def add(self, rec: QueueRecord) -> QueueState:
        """The state of a queue just read or created."""
        qs = QueueState(rec)
        self.by_name[rec.name] = qs
        self.by_id[rec.queue_id] = qs
        return qs

    def get(self, queue_id: int | None) -> QueueState | None:
        """The state of the queue with this QueueIdentifier, None when there is none."""
        return self.by_id.get(queue_id or 0)

    def system(self, name: str) -> QueueState:
        """The state of a system queue (:mod:`openmsmq.qm.names`), which always exists."""
        return self.by_name[name]

    def drop(self, states: Iterable[QueueState]) -> None:
        """Forget deleted queues (with :attr:`lock` held)."""
        for s in states:
            self.by_name.pop(s.record.name, None)
            self.by_id.pop(s.record.queue_id, None)

    def set_local_addresses(self, addresses: Iterable[str]) -> None:
        """See :meth:`openmsmq.qm.manager.QueueManager.set_local_addresses`."""
        given = {a.casefold() for a in addresses if a}
        loopback = False
        for a in given:
            with contextlib.suppress(ValueError):
                loopback = loopback or ipaddress.ip_address(a).is_loopback
        base = {self.computer_name, "."} if loopback else set(self._local_hosts)
        with self.lock:
            self._local_hosts = base | given
            self._send_names.clear()

    def is_local_host(self, host: str | None) -> bool:
        return host is None or host.casefold() in self._local_hosts

    def resolve(self, queue: QueueRef) -> QueueState:
        """The state of an open local queue (or outgoing queue, by its format name):
        MQ_ERROR_QUEUE_NOT_FOUND / MQ_ERROR_QUEUE_DELETED otherwise."""
        self.check_open()
        if isinstance(queue, QueueHandle):
            if queue.state.deleted:
                raise MQError(HResult.MQ_ERROR_QUEUE_DELETED, f"queue {queue.format_name} was deleted")
            return queue.state
        parsed = names.parse_name(queue)
        with self.lock:
            qs: QueueState | None = None
            if parsed.key is not None and self.is_local_host(parsed.computer):
                qs = self.by_name.get(parsed.key)
            elif parsed.private_number is not None and parsed.qm_guid == self.guid:
                qs = next(
                    (
                        s
                        for s in self.by_id.values()
                        if s.record.private_number == parsed.private_number
                        and s.record.queue_type in (QueueType.PRIVATE, QueueType.SYSTEM)
                    ),
                    None,
                )
            elif parsed.is_format_name:
                key = queue.strip().casefold()
                qs = next((s for s in self.by_id.values() if s.record.destination_format_name == key), None)
        if qs is None or qs.deleted:
            raise MQError(HResult.MQ_ERROR_QUEUE_NOT_FOUND, f"no queue {quoted(queue)}")
        return qs

    def is_remote(self, name: str) -> bool:
        """``name`` is a format name of a queue on another QM."""
        parsed = names.parse_name(name)
        if parsed.private_number is not None:
            return parsed.qm_guid != self.guid
        return parsed.is_format_name and not self.is_local_host(parsed.computer)

    def sent_to(self, name: str) -> QueueState | None:
        """The queue a send to ``name`` found before (not deleted since), else None."""
        known = self._send_names.get(name)
        return known if known is not None and not known.deleted else None

    def remember_send_name(self, name: str, qs: QueueState, hosts: object) -> None:
        """Remember what ``name`` resolved to for the next send, unless the local hosts
        changed since ``hosts`` (:attr:`local_hosts`) was read."""
        with self.lock:
            if self._local_hosts is hosts:
                if len(self._send_names) >= _SEND_NAMES:
                    self._send_names.clear()
                self._send_names[name] = qs

    @property
    def local_hosts(self) -> object:
        """The current set of local host names (compared by identity by :meth:`remember_send_name`)."""
        return self._local_hosts

    def add_outgoing_listener(self, fn: Callable[[int], None]) -> None:
        """Call ``fn(queue_id)`` from :meth:`notify` for each outgoing queue in it."""
        self._outgoing_listeners.append(fn)

    def remove_outgoing_listener(self, fn: Callable[[int], None]) -> None:
        """Undo :meth:`add_outgoing_listener` (no error if ``fn`` was not added)."""
        with contextlib.suppress(ValueError):
            self._outgoing_listeners.remove(fn)

    def count_moves(self, moves: Iterable[tuple[int, int | None]]) -> None:
        """Add durable single-message removals to the per-queue rates: each (queue id,
        target queue id or None) is one message out of its queue and, for a move into a
        journal or dead-letter queue, one into the target. Queues deleted meanwhile are
        skipped."""
        by_id = self.by_id
        for source_id, target_id in moves:
            source = by_id.get(source_id)
            if source is not None:
                source.messages_out += 1
            target = by_id.get(target_id or 0)
            if target is not None:
                target.messages_in += 1

    def notify(self, states: Iterable[QueueState]) -> None:
        """Wake the reads waiting on these queues (after messages became available) and
        tell the outgoing listeners about the outgoing queues among them."""
        for qs in set(states):
            if qs.record.queue_type == QueueType.OUTGOING:
                for fn in self._outgoing_listeners:
                    fn(qs.record.queue_id)
            # No read in progress: nobody to wake, skip the condition (qs.readers).
            if qs.readers:
                with qs.cond:
                    if qs.notified is None:
                        qs.notified = time.monotonic()
                    qs.cond.notify_all()
