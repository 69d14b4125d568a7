"""asyncio driver of :class:`~openmsmq.transfer.engine.Transfer`: the MS-MQQB listener (TCP 1801),
one connector per next hop with reconnect back-off, timers and store work.

Threading model: everything here runs on the event loop thread except the store work,
which runs on a small thread pool (:meth:`Transfer.run_store_work` blocks until the
group commit is durable). Each work item is one *batch*; its completion comes back to
the loop with one ``call_soon_threadsafe`` (the executor future), never one per message.

Output is coalesced: reads and completions only *schedule* a pump (``call_soon``), and
the pump writes each connection's pending packets with one ``transport.write``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ipaddress
import logging
import ssl
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, cast

from openmsmq.net.tls import certified_qm
from openmsmq.observability.repeats import FailureStreak, RepeatedEvents
from openmsmq.observability.repeats import flush_all as flush_repeated_logs
from openmsmq.protocol.events import Role
from openmsmq.transfer.engine import AcceptBatch, StoreWork, Transfer
from openmsmq.transfer.state import split_hop

__all__ = ["MQQB_PORT", "MQQBNode", "NetConfig", "allow_networks"]

log = logging.getLogger("openmsmq.net")

#: MS-MQQB 2.1.1: the TCP port of MS-MQQB sessions.
MQQB_PORT = 1801


def allow_networks(networks: Iterable[str]) -> Callable[[str], bool]:
    """An allowlist predicate over CIDR networks (``"127.0.0.1/32"``, ``"10.0.0.0/8"``)."""
    nets = [ipaddress.ip_network(n, strict=False) for n in networks]

    def allowed(address: str) -> bool:
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in n for n in nets)

    return allowed


@dataclass(frozen=True)
class NetConfig:
    """Listener and connector settings.

    ``host``/``port``: where the listener binds (peers are reached on ``peer_port``,
    the same port by default, as MSMQ peers all use 1801). Connectors bind their source
    address to ``host`` so that the peer sees this QM's address. ``backoff_min`` /
    ``backoff_max``: Session Retry Connect wait, doubling (MS-MQQB 3.1.2.3).
    ``poll_interval``: how often outgoing queues are checked for new commits.
    ``accept_batch_min`` / ``accept_batch_wait``: while the incoming stream is dense (the
    last batch held at least half of ``accept_batch_min`` and messages kept arriving
    while it was being stored), accepted messages are stored once that many wait, or
    that many seconds after fewer started waiting: a larger transaction costs less CPU
    per message (docs/transfer.md). Otherwise they are stored at once: a sparse stream
    forms small batches anyway, and holding them would only delay when the destination's
    readers can take them.
    ``feed_bytes``: a read larger than this is handed to the protocol in slices of this
    size, and what each slice produced is written before the next is processed (0: the
    whole read at once).
    ``max_connections``: connections open at once (accepted and initiated); one
    accepted beyond it is closed at once, so that connections can never take the file
    descriptors the store and the other services need (with the usual limit of 1,024
    open files, 1,500 idle connections left the listener failing every accept and the
    QM unreachable). ``max_connections_per_address``: accepted connections one source
    address may hold (None: no bound of its own), so that one host cannot take every
    place. When the places are full, a connection from a peer this QM is configured to
    exchange messages with (:meth:`Transfer.known_peer`: a static route's next hop, an
    outgoing queue's next hop) is let in by closing one from an unknown address, one
    still in its handshake first; an unknown peer is refused. Refusals are logged and
    counted (the transfer's metrics sink, ``count_refused``).
    """

    host: str = "127.0.0.1"
    port: int = MQQB_PORT
    peer_port: int | None = None
    allow: Callable[[str], bool] = field(default_factory=lambda: allow_networks(["127.0.0.0/8", "::1/128"]))
    backoff_min: float = 0.5
    backoff_max: float = 30.0
    poll_interval: float = 0.05
    #: Longest time between two log lines about polls that keep failing (FailureStreak).
    failure_log_interval: float = 30.0
    store_threads: int = 2
    accept_batch_min: int = 512
    accept_batch_wait: float = 0.005
    feed_bytes: int = 8192
    max_connections: int = 1000
    #: MS-MQQB over TLS (net/tls.py): the TLS listener's and the connectors' contexts, the
    #: TLS listener's port (the port TLS peers are reached on), and which peers (host or
    #: address) speak TLS only. None: plain MS-MQQB only.
    tls_server: ssl.SSLContext | None = None
    tls_client: ssl.SSLContext | None = None
    tls_port: int = 1802
    tls_peers: Callable[[str], bool] = field(default_factory=lambda: lambda _host: False)
    max_connections_per_address: int | None = None


#: Refused connections come in bursts (a scanner, a peer retrying): logged once per
#: address and reason, then summed up.
_refusals = RepeatedEvents(log)


def _refuse(node: MQQBNode, rule: str, address: str, why: str, *args: object) -> None:
    """Log (once per address and rule, then summed up) and count a refused connection."""
    node.transfer.metrics.count_refused(rule)
    _refusals.log(
        (rule, address), logging.WARNING, "refused MS-MQQB connection from %s: " + why, address, *args
    )


class _MQQBProtocol(asyncio.Protocol):
    """One TCP connection; everything is handed to the node."""

    def __init__(self, node: MQQBNode, role: Role, peer_hint: str = "", *, tls: bool = False) -> None:
        self.node = node
        self.role = role
        self.peer = peer_hint
        #: Came through the TLS listener, or dialled over TLS.
        self.tls = tls
        self.cid = 0
        #: The source address counted in MQQBNode.per_address (accepted connections only).
        self.counted = ""
        self.transport: asyncio.Transport | None = None
        self.closed: asyncio.Future[None] = node.loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport = cast(asyncio.Transport, transport)  # uvloop: TCPTransport is no subclass
        self.transport = transport
        peername = transport.get_extra_info("peername")
        address = str(peername[0]) if peername else ""
        if self.role is Role.ACCEPTOR:
            if not self.node.admit(address):
                transport.abort()
                return
            self.peer = self.counted = address
            self.node.per_address[address] = self.node.per_address.get(address, 0) + 1
        certified = None
        if self.tls:
            ssl_object = transport.get_extra_info("ssl_object")
            certified = certified_qm(ssl_object.getpeercert() if ssl_object is not None else None)
            if certified is None:
                self.node.transfer.trust.refused(
                    address, "identity", "a TLS session", "its certificate names no QM GUID (net/tls.py)"
                )
                transport.abort()
                return
        elif address and self.node.config.tls_peers(address):
            # A peer that speaks TLS with this QM: a plain session from its address is not it.
            self.node.transfer.trust.refused(
                address, "tls-required", "a plain MS-MQQB session", "it is one of mqqb.tls_peers (TLS only)"
            )
            transport.abort()
            return
        if address and self.node.transfer.refusing(address, self.node.now()):
            # Checked for connections this QM opens too: a route may name the refused QM
            # by a host name the refusal does not know yet (the connector's back-off
            # then applies before its next try).
            _refusals.log(
                ("store", address), logging.WARNING,
                "refused MS-MQQB connection %s %s: its last messages could not be stored,"
                " it may resend after its back-off",
                "to" if self.role is Role.INITIATOR else "from", address,
            )  # fmt: skip
            self.node.transfer.metrics.count_refused("store_backoff")
            self._uncount()
            transport.abort()
            return
        self.cid = self.node.transfer.connection_made(
            self.peer, self.role, self.node.now(), address, certified=certified
        )
        self.node.transports[self.cid] = self
        if self.node._reading_paused:
            transport.pause_reading()
        log.info("connection %s %s", "to" if self.role is Role.INITIATOR else "from", self.peer)
        self.node.kick()

    def data_received(self, data: bytes) -> None:
        if not self.cid:
            return
        node = self.node
        read_at = time.monotonic()
        step = node.config.feed_bytes
        try:
            if step <= 0 or len(data) <= step:
                node.transfer.data_received(self.cid, data, node.now())
            else:
                # A large read holds up to a whole window of UserMessages. Fed in slices,
                # a SessionAck that became due in one (every 32 recoverable messages,
                # "immediately": MS-MQQB 3.1.5.8.7) is written before the rest of the read
                # is processed, so the sender's window reopens while this side works
                # instead of after it.
                for i in range(0, len(data), step):
                    node.transfer.data_received(self.cid, data[i : i + step], node.now())
                    node.write_pending()
        except Exception:  # a bug must not take the other sessions down
            log.exception("session %s: internal error; closing it", self.peer)
            if self.transport is not None:
                self.transport.abort()
        node.read_done(read_at)
        if not node.transfer.reading_wanted and not node._reading_paused:
            node.pause_reading()
        self.node.connected_ok(self.peer)
        self.node.kick()

    def _uncount(self) -> None:
        if self.counted:
            left = self.node.per_address.get(self.counted, 0) - 1
            if left > 0:
                self.node.per_address[self.counted] = left
            else:
                self.node.per_address.pop(self.counted, None)
            self.counted = ""

    def connection_lost(self, exc: Exception | None) -> None:
        self._uncount()
        if not self.closed.done():
            self.closed.set_result(None)
        if not self.cid:
            return
        self.node.transports.pop(self.cid, None)
        self.node.transfer.connection_lost(self.cid, self.node.now())
        self.node.kick()


class MQQBNode:
    """Runs a :class:`Transfer` on the running event loop: ``await node.start()``,
    ``await node.stop()``."""

    def __init__(self, transfer: Transfer, config: NetConfig | None = None) -> None:
        self.transfer = transfer
        self.config = config or NetConfig()
        self.loop = asyncio.get_running_loop()
        self.transports: dict[int, _MQQBProtocol] = {}
        #: Accepted connections open per source address (NetConfig.max_connections_per_address).
        self.per_address: dict[str, int] = {}
        self._server: asyncio.Server | None = None
        self._tls_server: asyncio.Server | None = None
        self._executor = ThreadPoolExecutor(self.config.store_threads, thread_name_prefix="openmsmq-transfer")
        self._pump_scheduled = False
        self._pump_handle: asyncio.Handle | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at: float | None = None
        self._poll_handle: asyncio.Handle | None = None
        self._poll_failures = FailureStreak(
            log, "polling the outgoing queues", self.config.failure_log_interval
        )
        self._connecting: dict[str, asyncio.Task[None]] = {}
        self._backoff: dict[str, float] = {}
        self._next_try: dict[str, float] = {}
        self._store_in_flight: set[asyncio.Future[Any]] = set()
        self._stopping = False
        #: Held accepted messages are handed out at once (the accept_batch_wait passed).
        self._flush_accepts = False
        self._hold_handle: asyncio.TimerHandle | None = None
        #: Reading from every connection paused: received messages wait for the store
        #: beyond TransferConfig.unstored_bytes (Transfer.reading_wanted).
        self._reading_paused = False
        #: The last accept batch held at least half of accept_batch_min and messages kept
        #: arriving while it was stored: the stream is dense enough for holding accepted
        #: messages to gather a larger batch.
        self._dense_accepts = False
        #: A wake-up of the poll is scheduled (outgoing_committed), not yet run, and the
        #: outgoing queues committed into since the last one.
        self._poll_wanted = False
        self._committed_queues: collections.deque[int] = collections.deque()
        #: Stage stamps (time.monotonic, observability.sink.STAGES): the first commit into
        #: an outgoing queue noticed since the last wake-up took them, and the one the
        #: wake-up took, until the next write of packets; the first accepted message read
        #: and not yet handed to the store in a batch.
        self._committed_at: float | None = None
        self._loading_since: float | None = None
        self._accepts_since: float | None = None
        self._metrics = transfer.metrics

    def now(self) -> float:
        """The protocol clock: the loop's monotonic time."""
        return self.loop.time()

    def read_done(self, read_at: float) -> None:
        """A read (at ``read_at``, time.monotonic) was processed: if it left the first
        accepted messages waiting for a batch, their wait starts then
        (``accept_read_to_batch``)."""
        if self._accepts_since is None and self.transfer.store.accepted_bytes:
            self._accepts_since = read_at

    def admit(self, address: str) -> bool:
        """Whether a connection accepted from ``address`` may stay (see :class:`NetConfig`):
        in the allowlist, within the per-address bound unless a known peer, and within
        ``max_connections`` (a known peer takes the place of an unknown one). Refusals are
        logged and counted."""
        cfg = self.config
        if not cfg.allow(address):
            _refuse(self, "mqqb.allowed_peers", address, "not in the allowlist (mqqb.allowed_peers)")
            return False
        per = cfg.max_connections_per_address
        held = self.per_address.get(address, 0)
        full = len(self.transports) >= cfg.max_connections
        # (only then: it walks the routes and the outgoing queues)
        known = (full or (per is not None and held >= per)) and self.transfer.known_peer(address)
        if per is not None and held >= per and not known:
            _refuse(
                self, "mqqb.max_connections_per_address", address,
                "it holds %d connections (mqqb.max_connections_per_address)", held,
            )  # fmt: skip
            return False
        if not full:
            return True
        victim = self._evictable() if known else None
        if victim is None:
            _refuse(
                self, "mqqb.max_connections", address, "%d connections open (mqqb.max_connections)",
                cfg.max_connections,
            )  # fmt: skip
            return False
        log.warning(
            "closed MS-MQQB connection from %s (an unknown peer) to let in %s, a configured peer:"
            " %d connections open (mqqb.max_connections)", victim.peer, address, cfg.max_connections,
        )  # fmt: skip
        self.transfer.metrics.count_refused("mqqb.max_connections")
        victim._uncount()
        self.transports.pop(victim.cid, None)
        if victim.transport is not None:
            victim.transport.abort()
        return True

    def _evictable(self) -> _MQQBProtocol | None:
        """The accepted connection to close for a known peer: from an unknown address, one
        still in its handshake before an open session, from the address holding the most,
        the newest first. None when every connection is a known peer's or initiated here."""
        t = self.transfer
        best: tuple[bool, int, int] | None = None
        victim = None
        for proto in self.transports.values():
            if proto.role is not Role.ACCEPTOR or not proto.counted or t.known_peer(proto.counted):
                continue
            key = (t.connection_open(proto.cid), -self.per_address.get(proto.counted, 0), -proto.cid)
            if best is None or key < best:
                best, victim = key, proto
        return victim

    @property
    def address(self) -> tuple[str, int]:
        """The bound listener address."""
        assert self._server is not None
        sock = self._server.sockets[0]
        host, port = sock.getsockname()[:2]
        return str(host), int(port)

    async def start(self) -> None:
        """Bind the listener and start polling the outgoing queues."""
        self._server = await self.loop.create_server(
            lambda: _MQQBProtocol(self, Role.ACCEPTOR), self.config.host, self.config.port, reuse_address=True
        )
        log.info("MS-MQQB listener on %s:%d", *self.address)
        if self.config.tls_server is not None:
            self._tls_server = await self.loop.create_server(
                lambda: _MQQBProtocol(self, Role.ACCEPTOR, tls=True),
                self.config.host,
                self.config.tls_port,
                ssl=self.config.tls_server,
                reuse_address=True,
            )
            log.info("MS-MQQB over TLS listener on %s:%d", *self.tls_address)
        self.transfer.qm.add_outgoing_listener(self.outgoing_committed)
        self._poll()

    def outgoing_committed(self, queue_id: int) -> None:
        """Messages were committed into outgoing queue ``queue_id`` in this process (any
        thread): poll at once rather than at the next poll_interval. One wake-up at a time:
        the queue is recorded (deque appends and pops are atomic) before the flag is read,
        and the wake-up clears the flag before it takes the recorded queues, so no commit
        is missed."""
        self._committed_queues.append(queue_id)
        if self._committed_at is None:
            self._committed_at = time.monotonic()
        if self._poll_wanted or self._stopping:
            return
        self._poll_wanted = True
        with contextlib.suppress(RuntimeError):  # the loop has closed meanwhile
            self.loop.call_soon_threadsafe(self._poll_now)

    def _poll_now(self) -> None:
        self._poll_wanted = False
        if self._loading_since is None:
            self._loading_since = self._committed_at
        self._committed_at = None
        pending = self._committed_queues
        committed = {pending.popleft() for _ in range(len(pending))}
        if self._stopping:
            return
        # A queue the transfer does not know yet (the first send to a destination) is
        # found by listing the queues: done by this poll instead of the next refresh.
        self.transfer.take_up_queues(committed)
        if self._poll_handle is not None:
            self._poll_handle.cancel()
        # What the commit made ready is written by this callback (one wake-up of the loop
        # per commit, not a second iteration after the peers' input).
        self._poll(pump_now=True)

    @property
    def tls_address(self) -> tuple[str, int]:
        """The bound TLS listener address."""
        assert self._tls_server is not None
        host, port = self._tls_server.sockets[0].getsockname()[:2]
        return str(host), int(port)

    async def stop(self, flush_timeout: float = 5.0, close_timeout: float = 2.0) -> None:
        """Graceful stop, in this order:

        1. stop accepting: close the listener, cancel connection attempts, stop polling
           the outgoing queues (nothing new is loaded or sent);
        2. stop reading from every connection (no new input while flushing);
        3. flush: run the store work the transfer has — accepted messages with their
           sequence state, OrderAck releases — until it is done (at most
           ``flush_timeout`` s), writing what it produces; then send the OrderAcks of
           every running Order Ack Send Timer (what is durable) at once;
        4. close every session (MS-MQQB 3.1.5.9) and its TCP connection, waiting up to
           ``close_timeout`` s for the connections to go.

        Whatever is not finished stays consistent on disk: an accepted message not yet
        stored was never OrderAck'ed (its sender resends it), a release not yet durable
        is redone by the next OrderAck after the restart.
        """
        self._stopping = True
        self.transfer.qm.remove_outgoing_listener(self.outgoing_committed)
        if self._server is not None:
            self._server.close()
        if self._tls_server is not None:
            self._tls_server.close()
        for task in self._connecting.values():
            task.cancel()
        if self._poll_handle is not None:
            self._poll_handle.cancel()
        for proto in list(self.transports.values()):
            if proto.transport is not None and not proto.transport.is_closing():
                proto.transport.pause_reading()
        deadline = self.now() + flush_timeout
        while self.now() < deadline:
            self._pump()  # hands out the next store work, writes pending output
            if not self._store_in_flight:
                if self.transfer.idle:
                    break
                await asyncio.sleep(0.01)  # bounded by the deadline
                continue
            await asyncio.wait(set(self._store_in_flight), timeout=max(0.01, deadline - self.now()))
        if not self.transfer.idle:
            log.warning("stopping with store work unfinished after %.1f s", flush_timeout)
        flush_repeated_logs(final=True)  # the repeats counted and not summed up yet
        # The OrderAcks of what is now durable leave before the sessions close, rather
        # than 500 ms after the last message (a stop would cancel that timer): their
        # senders release the messages instead of resending them after the restart.
        self.transfer.flush_order_acks(self.now())
        self.write_pending()
        self.transfer.close_all(self.now())
        self._pump()
        closing = []
        for proto in list(self.transports.values()):
            if proto.transport is not None:
                proto.transport.close()  # writes what is buffered first
                closing.append(proto.closed)
        if closing:
            await asyncio.wait(closing, timeout=close_timeout)
        for proto in list(self.transports.values()):
            if proto.transport is not None and not proto.closed.done():
                proto.transport.abort()
        if self._timer is not None:
            self._timer.cancel()
        if self._hold_handle is not None:
            self._hold_handle.cancel()
        await asyncio.sleep(0)
        self._executor.shutdown(wait=True)

    # ------------------------------------------------------------------ pump

    def pause_reading(self) -> None:
        """Stop reading from every connection until the store has caught up (the
        received messages waiting for it are over TransferConfig.unstored_bytes)."""
        self._reading_paused = True
        self.transfer.metrics.reading_paused(True)
        for proto in self.transports.values():
            if proto.transport is not None and not proto.transport.is_closing():
                proto.transport.pause_reading()
        log.debug("reading paused: %d received bytes wait for the store", self.transfer.unstored_bytes)

    def _resume_reading(self) -> None:
        """Read again once half of TransferConfig.unstored_bytes or less waits."""
        if self._stopping or self.transfer.unstored_bytes > self.transfer.config.unstored_bytes // 2:
            return
        self._reading_paused = False
        self.transfer.metrics.reading_paused(False)
        for proto in self.transports.values():
            if proto.transport is not None and not proto.transport.is_closing():
                proto.transport.resume_reading()

    def kick(self) -> None:
        """Schedule one pump for this loop iteration (coalesces many inputs)."""
        if not self._pump_scheduled:
            self._pump_scheduled = True
            self._pump_handle = self.loop.call_soon(self._pump)

    def _pump_now(self) -> None:
        """Pump in this callback (a scheduled pump is cancelled: this one does its work).
        For the wake-ups that carry delivery (a commit into an outgoing queue, a finished
        store batch): what they made ready leaves without waiting for another iteration,
        in which the other connections' reads would be processed first."""
        if self._pump_handle is not None:
            self._pump_handle.cancel()
        self._pump()

    def write_pending(self) -> None:
        """Write every connection's pending output now (one write per connection)."""
        out = self.transfer.data_to_send()
        for cid, data in out:
            proto = self.transports.get(cid)
            if proto is not None and proto.transport is not None:
                proto.transport.write(data)  # all pending packets of the session: one write
        if out and self._loading_since is not None:
            self._metrics.observe_stage("outgoing_commit_to_write", time.monotonic() - self._loading_since)
            self._loading_since = None

    def _pump(self) -> None:
        self._pump_scheduled = False
        self._pump_handle = None
        t = self.transfer
        self.write_pending()
        if t.refill_due:
            # After the write: the packets SessionAcks released are on their way while
            # the next ones are read from the store and built.
            t.refill(self.now())
            self.write_pending()
        for cid in t.connections_to_close():
            proto = self.transports.get(cid)
            if proto is not None and proto.transport is not None:
                proto.transport.close()
            elif proto is None:
                t.connection_lost(cid, self.now())
        # Accepted messages of a dense stream wait for a larger batch (accept_batch_min),
        # at most accept_batch_wait; never while stopping.
        hold = self._dense_accepts and not (self._flush_accepts or self._stopping)
        accept_min = self.config.accept_batch_min if hold else 1
        while (work := t.next_store_work(accept_min=accept_min)) is not None:
            if isinstance(work, AcceptBatch):
                size = sum([len(g.packets) for g in work.groups])
                self._dense_accepts = 2 * size >= self.config.accept_batch_min
                since = self._accepts_since
                if since is not None:
                    self._metrics.observe_stage("accept_read_to_batch", time.monotonic() - since)
                    self._accepts_since = None
                self._flush_accepts = False
                if self._hold_handle is not None:
                    self._hold_handle.cancel()
                    self._hold_handle = None
            self._run_store(work)
        if t.accepts_waiting and self._hold_handle is None:
            self._hold_handle = self.loop.call_later(self.config.accept_batch_wait, self._release_accepts)
        if not self._stopping:
            self._connect_wanted()
        self._arm_timer()

    def _release_accepts(self) -> None:
        self._hold_handle = None
        self._flush_accepts = True
        self._pump()

    def _run_store(self, work: StoreWork) -> None:
        handed = time.monotonic()
        fut = self.loop.run_in_executor(self._executor, self.transfer.run_store_work, work)
        self._store_in_flight.add(fut)

        def done(f: asyncio.Future[list[BaseException | None]]) -> None:
            self._store_in_flight.discard(f)
            exc = f.exception()
            self.transfer.store_work_done(work, exc if exc is not None else f.result(), self.now())  # type: ignore[arg-type]
            if isinstance(work, AcceptBatch):
                self._metrics.observe_stage("accept_batch_to_stored", time.monotonic() - handed)
                # Still dense only if messages kept arriving while it was stored: the
                # message that comes after a burst has ended (or after a backlog read at
                # once) must not wait for companions that are not coming.
                if not self.transfer.store.accepted_count:
                    self._dense_accepts = False
            if self._reading_paused:
                self._resume_reading()
            # The next batch (accepted messages read meanwhile) is handed out now, and the
            # OrderAcks and SessionAcks this one made due are written.
            self._pump_now()

        fut.add_done_callback(done)

    def _arm_timer(self) -> None:
        deadline = self.transfer.get_timer()
        if deadline == self._timer_at:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_at = deadline
        if deadline is not None:
            self._timer = self.loop.call_at(deadline, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_at = None
        self.transfer.handle_timer(self.now())
        self.kick()

    def _poll(self, *, pump_now: bool = False) -> None:
        if self._stopping:
            return
        more = False
        try:
            more = self.transfer.poll(self.now())
        except Exception as exc:
            # While the store is out of reach (a database restarting) every poll fails:
            # the first failure with its traceback, then a count now and then.
            self._poll_failures.failed(exc)
        else:
            self._poll_failures.succeeded()
        if pump_now:
            self._pump_now()
        else:
            self.kick()
        flush_repeated_logs()  # summaries of per-message log events that came in bursts
        if more:
            # A backlog: load the next slice after this iteration's I/O and pump.
            self._poll_handle = self.loop.call_soon(self._poll)
        else:
            self._poll_handle = self.loop.call_later(self.config.poll_interval, self._poll)

    # ------------------------------------------------------------------ connectors

    def connected_ok(self, peer: str) -> None:
        """The peer answered: the next reconnect starts with the shortest wait again."""
        self._backoff.pop(peer, None)

    def _connect_wanted(self) -> None:
        now = self.now()
        for peer in self.transfer.wanted_peers():
            if peer in self._connecting:
                continue
            at = self._next_try.get(peer, 0.0)
            if now < at:
                continue
            self._connecting[peer] = self.loop.create_task(self._connect(peer))

    async def _connect(self, peer: str) -> None:
        """One connection attempt to ``peer``; on failure, wait the back-off (Session Retry
        Connect Timer, MS-MQQB 3.1.2.3) doubling up to ``backoff_max``."""
        host, _ = split_hop(peer, 0)
        tls = self.config.tls_client if self.config.tls_peers(host) else None
        default_port = self.config.tls_port if tls is not None else self.config.peer_port or self.config.port
        host, port = split_hop(peer, default_port)
        local = None
        if self.config.host not in ("0.0.0.0", "::", ""):
            local = (self.config.host, 0)
        try:
            _transport, proto = await asyncio.wait_for(
                self.loop.create_connection(
                    lambda: _MQQBProtocol(self, Role.INITIATOR, peer, tls=tls is not None),
                    host,
                    port,
                    local_addr=local,
                    ssl=tls,
                    server_hostname=host if tls is not None else None,
                ),
                timeout=10.0,
            )
            self._next_try.pop(peer, None)
            self.transfer.set_retry(peer, None)
            delay = self._backoff.get(peer, self.config.backoff_min)
            self._backoff[peer] = min(delay * 2, self.config.backoff_max)
            await proto.closed
            # The next attempt waits unless the session answered (connected_ok).
            if peer in self._backoff:
                self._next_try[peer] = self.now() + delay
        except (TimeoutError, OSError, ssl.SSLError) as exc:
            delay = self._backoff.get(peer, self.config.backoff_min)
            self._backoff[peer] = min(delay * 2, self.config.backoff_max)
            self._next_try[peer] = self.now() + delay
            self.transfer.set_retry(peer, self._next_try[peer])
            log.info("connect to %s failed (%s); retrying in %.1f s", peer, exc, delay)
        finally:
            self._connecting.pop(peer, None)
        if not self._stopping:
            at = self._next_try.get(peer)
            if at is not None:
                self.loop.call_at(at, self.kick)
            self.kick()
