"""What the Spark data source needs from a queue manager, and the backend that provides it.

The data source never talks to a queue manager directly; it calls a :class:`Backend`
opened by :func:`open_backend` from the ``endpoint`` option, on the driver and in each
executor's Python worker (executors are separate processes, often on other hosts, so
a backend reaches its QM over the network and shares nothing in memory or on disk).

Endpoints
    ``grpc://host:port[?token=...&tls=1&ca=...]``
        The queue manager's remote-read service (``openmsmq serve``, docs/remote.md).
        This is what executors on other machines use.
    a data directory (``/var/lib/openmsmq`` or ``file:///var/lib/openmsmq``)
        Only where the queue manager runs on the same host: its ``runtime.json`` names
        the remote-read service, and the backend goes through it. A data directory
        without a running queue manager is refused (Spark runs many Python processes;
        one process owns a store).

Contract (the data source's exactly-once rests on it; the QM provides it, see
``qm/range_reader.py`` and ``store/ranges.py``)
    1. *Stable watermark.* :meth:`Backend.available_ranges` reports ``last``: a
       LookupIdentifier such that no message with a LookupIdentifier <= ``last`` can
       appear in the queue later.
    2. *Peek is non-destructive.* :meth:`Backend.peek_range` neither removes nor locks.
    3. *Range removal is one transaction and idempotent.* :meth:`Backend.remove_through`
       removes, for every queue given, all messages with LookupIdentifier <= the position,
       atomically across all queues; repeating it removes nothing more.
    4. *Idempotent send is one transaction and keyed.* :meth:`Backend.send_idempotent`
       enqueues all given messages in one transaction, skipping any whose identity the
       queue already accepted (by an earlier call, or concurrently by another attempt of
       the same task); the check and the insert are in the same transaction.
    5. Failures raise :class:`openmsmq.errors.OpenMSMQError` subclasses: an unreachable QM
       is ``MQError(MQ_ERROR_REMOTE_MACHINE_NOT_AVAILABLE)``, an unknown queue
       :class:`~openmsmq.errors.QueueNotFoundError`; a failed call had no effect.

Connections: one transport per (endpoint, process), reused by every task a Python
worker runs (Spark reuses workers), so a task does not pay a connect and a session. A
call that finds the session gone (the QM restarted: MQ_ERROR_STALE_HANDLE) reconnects
and repeats once — every call here is a read or idempotent, so repeating is safe. An
unreachable QM fails the call (and so the Spark task and batch); the cached transport
is dropped so that the next task connects afresh.
"""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar, runtime_checkable
from urllib.parse import unquote, urlsplit

from openmsmq.client.message import Message
from openmsmq.client.transport import Transport
from openmsmq.client.types import LookupRange, OutgoingMessage, RangeQuery
from openmsmq.errors import ConfigError, HResult, MQError, QueueNotFoundError
from openmsmq.redact import redact
from openmsmq.runtime import live_runtime
from openmsmq.spark.pages import PeekedMessage, PeekedPage, WriterMessage

if TYPE_CHECKING:  # pyarrow is imported by the executor's read path only
    from openmsmq.spark.packed_arrow import ArrowPage

__all__ = [
    "Backend",
    "LookupRange",
    "PeekedMessage",
    "PeekedPage",
    "RangeQuery",
    "TransportBackend",
    "WriterMessage",
    "open_backend",
    "resolve_endpoint",
]

T = TypeVar("T")


@runtime_checkable
class Backend(Protocol):
    """Operations the Spark data source performs on a queue manager (see the module contract).

    A backend may also offer ``peek_arrow(queue, after, through, limit, label)`` returning an
    :class:`~openmsmq.spark.packed_arrow.ArrowPage` (the gRPC :class:`TransportBackend`
    does): the same rows as :meth:`peek_page`, already as an Arrow record batch. The
    partition reader uses it when present.
    """

    def queue_exists(self, queue: str) -> bool:
        """True if ``queue`` (a path name such as ``private$\\orders``) exists on the QM."""
        ...

    def available_ranges(
        self, queries: Sequence[RangeQuery], *, with_bytes: bool = False
    ) -> list[LookupRange | None]:
        """For each query, the messages with after < LookupIdentifier <= through (through
        None: up to the stable watermark, contract 1); None where there is none. One
        round trip. ``with_bytes``: also their total stored size (``LookupRange.bytes``).
        Raises QueueNotFoundError for an unknown queue."""
        ...

    def qm_guid(self) -> str:
        """The GUID of the queue manager (QueueManager.Identifier, MS-MQDMPR 3.1.1.1), as
        ``str(uuid.UUID)``: what a checkpoint records to recognise it."""
        ...

    def nth_lookup_id(self, queue: str, after: int, n: int) -> int:
        """LookupIdentifier of the ``n``-th message (n >= 1) of ``queue`` after ``after``.
        Raises MessageNotFoundError when fewer than ``n`` exist."""
        ...

    def peek_range(self, queue: str, after: int, through: int, limit: int) -> list[PeekedMessage]:
        """Up to ``limit`` messages with after < LookupIdentifier <= through, in
        LookupIdentifier order. Non-destructive (contract 2); the caller pages by calling
        again with ``after`` set to the last LookupIdentifier returned."""
        ...

    def peek_page(self, queue: str, after: int, through: int, limit: int) -> PeekedPage:
        """:meth:`peek_range` as columns: the same messages in the same order, one round trip."""
        ...

    def remove_through(self, positions: Mapping[str, int]) -> int:
        """Remove every message with LookupIdentifier <= ``positions[queue]``, all queues in
        ONE transaction. Idempotent (contract 3). Returns how many this call removed."""
        ...

    def send_idempotent(self, queue: str, messages: Sequence[WriterMessage]) -> int:
        """Enqueue ``messages`` to ``queue`` in ONE transaction, skipping identities already
        accepted. Returns how many were enqueued by this call (contract 4)."""
        ...

    def close(self) -> None:
        """Release the backend (a shared connection stays open for the next task)."""
        ...


def resolve_endpoint(endpoint: str) -> str:
    """The ``grpc://`` URL of ``endpoint`` (a URL, or the data directory of a QM running here).

    Raises :class:`ConfigError` naming option ``endpoint`` for anything else.
    """
    parts = urlsplit(endpoint) if "://" in endpoint else None
    if parts is not None and parts.scheme.lower() == "grpc":
        if not parts.hostname or not parts.port:
            raise ConfigError(
                "endpoint", f"option 'endpoint' {redact(endpoint)!r}: expected grpc://host:port"
            )
        return endpoint
    if parts is not None and parts.scheme.lower() != "file":
        raise ConfigError(
            "endpoint",
            f"option 'endpoint' has unsupported scheme {parts.scheme!r} in {redact(endpoint)!r} "
            "(expected grpc://host:port or the data directory of a running queue manager)",
        )
    path = unquote(parts.path) if parts is not None else endpoint
    if not path or not Path(path).is_dir():
        raise ConfigError("endpoint", f"option 'endpoint': {redact(endpoint)!r} is not a data directory")
    running = live_runtime(path)
    if running is None:
        # Maybe a passing outage (the QM restarts): an unreachable QM, not a bad option.
        raise MQError(
            HResult.MQ_ERROR_REMOTE_MACHINE_NOT_AVAILABLE,
            f"option 'endpoint': no queue manager runs on the data directory {path!r} "
            "(start `openmsmq serve` there, or give its grpc://host:port)",
        )
    if not running.get("remote"):
        raise ConfigError(
            "endpoint",
            f"option 'endpoint': the queue manager of {path!r} runs without its remote-read service",
        )
    return str(running["remote"])


# ---- one transport per (endpoint, process) ---------------------------------------------------

_LOCK = threading.Lock()
_SHARED: dict[tuple[int, str], Transport] = {}


def _transport(url: str) -> Transport:
    # Keyed by pid too: a transport (its gRPC channel and session thread) must never be
    # used across a fork, and Spark's Python worker daemon forks workers.
    key = (os.getpid(), url)
    with _LOCK:
        t = _SHARED.get(key)
    if t is not None:
        return t
    from openmsmq.client.grpc_transport import GrpcTransport

    made = GrpcTransport(url, connect_timeout=5.0)
    with _LOCK:
        t = _SHARED.setdefault(key, made)
    if t is not made:
        made.close()
    return t


def _drop(url: str, t: Transport) -> None:
    key = (os.getpid(), url)
    with _LOCK:
        if _SHARED.get(key) is t:
            del _SHARED[key]
    with contextlib.suppress(MQError):
        t.close()


def _i64(value: int) -> int:
    """A u64 as the signed 64-bit value Spark's BIGINT holds."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _page(messages: Sequence[Message]) -> PeekedPage:
    """Columns of client messages (one list comprehension per column, no per-row object)."""
    ms = messages
    guids: dict[str, str] = {}  # a page comes from few QMs: strip each GUID's braces once
    for m in ms:
        if m.source_machine not in guids:
            guids[m.source_machine] = m.source_machine.strip("{}")
    return PeekedPage(
        lookup_id=[m.lookup_id for m in ms],
        message_id=[m.message_id for m in ms],
        label=[m.label for m in ms],
        body=[m.body for m in ms],
        message_class=[m.message_class for m in ms],
        priority=[m.priority for m in ms],
        correlation_id=[m.correlation_id for m in ms],
        app_specific=[m.app_specific for m in ms],
        sent_time=[m.sent_time for m in ms],
        arrived_time=[m.arrived_time for m in ms],
        source_qm=[guids[m.source_machine] for m in ms],
        tx_sequence_id=[m.tx_sequence_id for m in ms],
        tx_sequence_number=[m.tx_sequence_number for m in ms],
        abort_count=[m.abort_count for m in ms],
        move_count=[m.move_count for m in ms],
    )


def _peeked(m: Message) -> PeekedMessage:
    seq = m.tx_sequence_id
    return PeekedMessage(
        lookup_id=m.lookup_id,
        message_id=m.message_id,
        label=m.label,
        body=m.body,
        message_class=m.message_class,
        priority=m.priority,
        correlation_id=m.correlation_id,
        app_specific=m.app_specific,
        sent_time=m.sent_time,
        arrived_time=m.arrived_time,
        source_qm=m.source_machine.strip("{}"),
        tx_sequence_id=_i64(seq) if seq else None,
        tx_sequence_number=m.tx_sequence_number if seq else None,
        abort_count=m.abort_count,
        move_count=m.move_count,
    )


def _outgoing(m: WriterMessage) -> OutgoingMessage:
    return OutgoingMessage(
        body=m.body,
        label=m.label,
        priority=m.priority,
        correlation_id=m.correlation_id if m.correlation_id is not None else bytes(20),
        app_specific=m.app_specific,
    )


class TransportBackend:
    """:class:`Backend` over the client transport of ``endpoint`` (see the module docstring)."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self.url = resolve_endpoint(endpoint)
        self._closed = False
        _transport(self.url)  # connect now: an unreachable QM fails here

    def _call(self, fn: Callable[[Transport], T]) -> T:
        if self._closed:
            raise MQError(HResult.MQ_ERROR_INVALID_HANDLE, "the backend is closed")
        for attempt in (1, 2):
            t = _transport(self.url)
            try:
                return fn(t)
            except MQError as exc:
                if exc.hresult == HResult.MQ_ERROR_STALE_HANDLE and attempt == 1:
                    _drop(self.url, t)  # the QM restarted: a new session, same call again
                    continue
                if exc.hresult in (
                    HResult.MQ_ERROR_REMOTE_MACHINE_NOT_AVAILABLE,
                    HResult.MQ_ERROR_STALE_HANDLE,
                ):
                    _drop(self.url, t)
                raise
        raise AssertionError("unreachable")  # pragma: no cover

    def queue_exists(self, queue: str) -> bool:
        """True if ``queue`` exists on the QM."""
        try:
            self._call(lambda t: t.queue_info(queue))
        except QueueNotFoundError:
            return False
        return True

    def available_ranges(
        self, queries: Sequence[RangeQuery], *, with_bytes: bool = False
    ) -> list[LookupRange | None]:
        """Ranges of several queues in one round trip (contract 1)."""
        if not queries:
            return []
        return self._call(lambda t: t.lookup_ranges(queries, with_bytes=with_bytes))

    def qm_guid(self) -> str:
        """The queue manager's GUID (from its status)."""
        return str(uuid.UUID(self._call(lambda t: t.status()).qm_guid))

    def nth_lookup_id(self, queue: str, after: int, n: int) -> int:
        """LookupIdentifier of the n-th message after ``after``."""
        return self._call(lambda t: t.nth_lookup_id(queue, after, n))

    def peek_range(self, queue: str, after: int, through: int, limit: int) -> list[PeekedMessage]:
        """Up to ``limit`` messages in ``(after, through]``, without removing them."""
        got = self._call(lambda t: t.peek_range(queue, after, through, limit))
        return [_peeked(m) for m in got]

    def peek_page(self, queue: str, after: int, through: int, limit: int) -> PeekedPage:
        """Up to ``limit`` messages in ``(after, through]`` as columns, without removing them."""
        return _page(self._call(lambda t: t.peek_range(queue, after, through, limit)))

    def peek_arrow(
        self, queue: str, after: int, through: int, limit: int, label: str | None = None
    ) -> ArrowPage:
        """:meth:`peek_page` as an Arrow record batch decoded straight from the packed
        reply (:mod:`openmsmq.spark.packed_arrow`): the same rows, no ``Message`` per row.
        The ``queue`` column holds ``label`` (the queue's key in a query reading several
        queue managers), else ``queue``."""
        from openmsmq.spark.packed_arrow import ArrowPage, packed_to_page

        def call(t: Transport) -> bytes | None:
            peek_packed = getattr(t, "peek_range_packed", None)
            return None if peek_packed is None else peek_packed(queue, after, through, limit)

        blob = self._call(call)
        column = queue if label is None else label
        if blob is None:  # a transport or server without the packed form
            from openmsmq.spark.arrow import page_to_batch

            page = self.peek_page(queue, after, through, limit)
            return ArrowPage(page_to_batch(column, page), list(page.lookup_id), page.body_bytes)
        return packed_to_page(column, blob)

    def remove_through(self, positions: Mapping[str, int]) -> int:
        """Remove ranges of several queues in one QM transaction (contract 3)."""
        if not positions:
            return 0
        return self._call(lambda t: t.remove_through(positions))

    def send_idempotent(self, queue: str, messages: Sequence[WriterMessage]) -> int:
        """Enqueue the messages whose identity ``queue`` has not accepted, in one transaction."""
        if not messages:
            return 0
        out = [_outgoing(m) for m in messages]
        identities = [m.identity for m in messages]
        got = self._call(lambda t: t.send_idempotent(queue, out, identities))
        return sum(1 for lookup_id in got if lookup_id is not None)

    def close(self) -> None:
        """Mark this backend closed; the shared connection stays for the next task."""
        self._closed = True


def open_backend(endpoint: str, options: Mapping[str, str] | None = None) -> Backend:
    """Open the backend named by ``endpoint`` (the value of the ``endpoint`` option).

    ``options`` are the data source options (reserved for backend settings; none used).
    Raises :class:`ConfigError` for a bad endpoint and
    MQ_ERROR_REMOTE_MACHINE_NOT_AVAILABLE when the QM cannot be reached.
    """
    del options
    return TransportBackend(endpoint)
