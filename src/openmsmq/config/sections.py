"""The keys of the configuration, section by section: each a frozen dataclass whose fields
are declared with :func:`openmsmq.config.schema.key` (default, kind, documentation, bounds,
spec section), and :class:`Config`, the tree of all sections.

This table is the one place a key is declared: the loader (:mod:`openmsmq.config.loading`),
the renderer (:mod:`openmsmq.config.render`) and ``docs/configuration.md`` follow it.
"""

from __future__ import annotations

import ipaddress
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from openmsmq.config.schema import KeyInfo, key
from openmsmq.config.values import Route, norm_host

__all__ = [
    "SECTIONS",
    "Config",
    "ConsoleConfig",
    "HaConfig",
    "LogConfig",
    "MetricsConfig",
    "MqqbConfig",
    "ProtocolConfig",
    "QmConfig",
    "RemoteConfig",
    "StoreConfig",
    "config_keys",
]


@dataclass(frozen=True)
class QmConfig:
    """``[qm]``: the queue manager itself."""

    name: str = key("", "name", "Computer name of this QM in DIRECT=OS: names; empty = the host name.")
    data_dir: Path = key(Path("./data"), "path", "Directory of the SQLite store and the QM identity.")  # noqa: RUF009
    event_loop: str = key(
        "uvloop",
        "choice",
        "Event loop of `serve` (MS-MQQB sessions, timers, store hand-offs): uvloop (libuv), or the"
        " standard library's asyncio loop. uvloop's loop machinery is in C, so serve spends less CPU"
        " per message with it (docs/performance.md); where it cannot be imported"
        " serve logs a warning and runs asyncio.",
        choices=("uvloop", "asyncio"),
    )


@dataclass(frozen=True)
class MqqbConfig:
    """``[mqqb]``: the MS-MQQB listener and outbound connections (TCP 1801)."""

    listen_address: str = key(
        "127.0.0.1", "ip", "IP address the MS-MQQB listener binds (0.0.0.0 / :: = all)."
    )
    port: int = key(
        1801, "int", "MS-MQQB TCP port (0 = any free port).", lo=0, hi=65535, spec="MS-MQQB 2.1.1"
    )
    advertised_address: str = key(
        "", "ip_or_empty", "IP address peers use for this QM (order-queue names); empty = listen_address."
    )
    allowed_peers: tuple[str, ...] = key(
        ("127.0.0.0/8", "::1/128"),
        "peers",
        "Networks allowed to open MS-MQQB sessions (CIDR list). An entry {QM GUID}=CIDR also pins that"
        " QM: a session claiming its GUID is accepted from the pinned networks only (docs/security.md).",
    )
    connect_backoff_min: float = key(
        5.0,
        "duration",
        "First wait before reconnecting to a peer (Session Retry Connect, TryConnectInterval).",
        lo=0.001,
        hi=86400,
        spec="MS-MQQB 3.1.2.3",
    )
    connect_backoff_max: float = key(
        60.0,
        "duration",
        "Longest wait between reconnect attempts (the wait doubles up to this).",
        lo=0.001,
        hi=86400,
    )
    routes: tuple[Route, ...] = key(
        (),
        "routes",
        "Static routes: destination QM address (or {QM GUID}, for PRIVATE= names) = next hop host[:port].",
    )
    send_buffer: int = key(
        32 << 20,
        "size",
        "Message bytes an outgoing queue holds in memory: loaded, or sent and not yet session-acknowledged"
        " (one message always goes).",
        lo=64 << 10,
        hi=1 << 34,
    )
    max_in_flight: int = key(
        200_000,
        "int",
        "Messages an outgoing queue keeps loaded and not yet acknowledged (a transactional one until its"
        " OrderAck); at it the queue waits. Each costs about 250 bytes; more drains a large backlog faster.",
        lo=1000,
        hi=10_000_000,
    )
    max_connections: int = key(
        1000,
        "int",
        "MS-MQQB connections open at once; one accepted beyond it is closed at once (lowered at start to"
        " what the open-file limit leaves after 256 for the store and the other services).",
        lo=1,
        hi=1_000_000,
    )
    max_connections_per_address: int = key(
        64,
        "int",
        "MS-MQQB connections one source address may hold, and never more than half of"
        " max_connections: one host cannot take every place. A peer this QM is configured to"
        " exchange messages with (a static route's or an outgoing queue's next hop) is exempt, and"
        " when the places are full it is let in by closing a connection of an unknown address."
        " Raise it for many QMs behind one NAT address.",
        lo=1,
        hi=1_000_000,
    )
    receive_buffer: int = key(
        64 << 20,
        "size",
        "Received message bytes waiting for the store, each message counted with about 1 KiB more (what"
        " its objects take); above it the QM stops reading from its peers until half is stored.",
        lo=64 << 10,
        hi=1 << 34,
    )
    intermediate_hops: tuple[str, ...] = key(
        (),
        "hops",
        "Peers (host, IP address, CIDR network or {QM GUID}) whose sessions may carry messages of other"
        " QMs (intermediate hops); the next hops of mqqb.routes are intermediate hops too. From any"
        " other peer a packet whose SourceQueueManager is not the peer's own GUID is refused.",
        spec="MS-MQQB 3.1.1.6.2",
    )
    allow_relay: bool = key(
        False,
        "bool",
        "Pass on messages for any other QM (an open relay). Off: only for destinations that"
        " mqqb.routes names (a route to the destination itself relays to it directly).",
    )
    sequence_clock_skew: float = key(
        86400.0,
        "duration",
        "A message that starts an incoming sequence with a TxSequenceID whose TimeStamp lies further"
        " than this ahead of this QM's clock is refused (no sender could ever get past it).",
        lo=60,
        hi=10 * 365 * 86400,
        spec="MS-MQQB 3.1.1.3.1",
    )
    max_incoming_sequences: int = key(
        100_000,
        "int",
        "Incoming transactional sequences (sender QM, destination queue) kept at most; a message that"
        " would start one more is refused until some expire. Each costs about 1 KiB of memory.",
        lo=1,
        hi=10_000_000,
    )
    incoming_sequence_max_idle: float = key(
        90 * 86400.0,
        "duration",
        "An incoming sequence that received nothing for this long is forgotten (its stored state"
        " deleted); its sender must then start a new sequence. Keep it above the longest time a"
        " sender may be away with messages in flight.",
        lo=3600,
        hi=100 * 365 * 86400,
        spec="MS-MQDMPR 3.1.1.5",
    )
    tls_cert: Path | None = key(  # noqa: RUF009
        None,
        "path_or_empty",
        "PEM certificate (chain) of this QM for MS-MQQB over TLS; it names the QM's GUID (subject CN or"
        " URI SAN urn:uuid:<guid>). With tls_key and tls_ca, the TLS listener runs on tls_port.",
    )
    tls_key: Path | None = key(None, "path_or_empty", "PEM private key of tls_cert.")  # noqa: RUF009
    tls_ca: Path | None = key(  # noqa: RUF009
        None, "path_or_empty", "PEM CA certificate(s) that sign the certificates of this QM's TLS peers."
    )
    tls_port: int = key(
        1802,
        "int",
        "Port of the MS-MQQB over TLS listener (mutual TLS); peers in tls_peers are reached on it (0 ="
        " any free port).",
        lo=0,
        hi=65535,
    )
    tls_peers: tuple[str, ...] = key(
        (),
        "hops",
        "Peers (host, IP address or CIDR network) reached over TLS only: this QM connects to them on"
        " tls_port and refuses their plain sessions. Windows peers speak plain MS-MQQB: leave them out.",
    )

    @property
    def allowed_networks(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        """``allowed_peers`` as :mod:`ipaddress` networks (a pin's network included)."""
        return tuple(ipaddress.ip_network(n.rpartition("=")[2]) for n in self.allowed_peers)

    @property
    def pinned_peers(self) -> tuple[tuple[uuid.UUID, tuple[str, ...]], ...]:
        """The ``{GUID}=CIDR`` entries of ``allowed_peers``: each pinned QM GUID with its networks."""
        pins: dict[uuid.UUID, list[str]] = {}
        for entry in self.allowed_peers:
            guid, eq, net = entry.partition("=")
            if eq:
                pins.setdefault(uuid.UUID(guid.strip("{}")), []).append(net)
        return tuple((guid, tuple(nets)) for guid, nets in pins.items())

    @property
    def tls(self) -> bool:
        """MS-MQQB over TLS is set up (certificate, key and CA)."""
        return self.tls_cert is not None

    def peer_allowed(self, address: str) -> bool:
        """True if a peer at IP ``address`` may open a session."""
        try:
            ip = ipaddress.ip_address(address)
        except ValueError:
            return False
        return any(ip in net for net in self.allowed_networks)

    def next_hop(self, destination: str) -> str | None:
        """The static next hop for a destination address (case-insensitive, IPs normalized)."""
        wanted = norm_host(destination)
        for route in self.routes:
            if norm_host(route.destination) == wanted:
                return route.next_hop
        return None


@dataclass(frozen=True)
class ProtocolConfig:
    """``[protocol]``: MS-MQQB timers and session parameters, with the spec's defaults (MS-MQQB 3.1.2)."""

    order_ack_timeout: float = key(
        0.5,
        "duration",
        "OrderAckTimeout: delay of the Order Ack Send Timer (the spec says MUST be 500 ms).",
        lo=0.001,
        hi=3600,
        spec="MS-MQQB 3.1.1.3.1, 3.1.2.7",
    )
    maximum_order_ack_delay: float = key(
        10.0,
        "duration",
        "MaximumOrderAckDelay: cap on postponing an OrderAck (Windows SeqMaxAckDelay).",
        lo=0.001,
        hi=3600,
        spec="MS-MQQB 3.1.1.3.1, 3.1.2.7",
    )
    ack_wait_timeout: float = key(
        20.0,
        "duration",
        "AckWaitTimeout: wait for a SessionAck before closing (ConnectionParameters.AckTimeout).",
        lo=20,
        hi=120,
        spec="MS-MQQB 2.2.2, 3.1.2.4",
    )
    direct_ack_wait_multiplier: int = key(
        2,
        "int",
        "Session Ack Wait Timer factor for direct-format sessions (QosCleanupIntervalMultiplier).",
        lo=1,
        hi=100,
        spec="MS-MQQB 3.1.2.4",
    )
    recoverable_ack_timeout_min: float = key(
        0.5,
        "duration",
        "Lower clamp of RecoverableAckSendTimeout (= 8 x round trip).",
        lo=0.5,
        hi=120,
        spec="MS-MQQB 3.1.5.3, 2.2.2",
    )
    recoverable_ack_timeout_max: float = key(
        120.0,
        "duration",
        "Upper clamp of RecoverableAckSendTimeout.",
        lo=0.5,
        hi=120,
        spec="MS-MQQB 3.1.5.3, 2.2.2",
    )
    window_size: int = key(
        1024,
        "int",
        "WindowSize: unacknowledged packets allowed per session (the spec's SHOULD and Windows'"
        " MaxUnackedPacket are 64); a session uses the smaller of both QMs', so 64 toward a"
        " Windows peer, and moves at most window / round trip packets a second.",
        lo=1,
        hi=65535,
        spec="MS-MQQB 3.1.1.3.1",
    )
    resend_timeouts_short: float = key(
        30.0,
        "duration",
        "ResendTimeoutsShort: Transactional Ack Wait for resends 1-3.",
        lo=0.001,
        hi=604800,
        spec="MS-MQQB 3.1.1.3, 3.1.2.6",
    )
    resend_timeouts_medium: float = key(
        300.0, "duration", "ResendTimeoutsMedium: resends 4-6.", lo=0.001, hi=604800, spec="MS-MQQB 3.1.1.3"
    )
    resend_timeouts_long: float = key(
        1800.0, "duration", "ResendTimeoutsLong: resends 7-9.", lo=0.001, hi=604800, spec="MS-MQQB 3.1.1.3"
    )
    resend_timeouts_final: float = key(
        21600.0,
        "duration",
        "ResendTimeoutsFinal: every later resend.",
        lo=0.001,
        hi=604800,
        spec="MS-MQQB 3.1.1.3",
    )
    session_initialization_timeout: float = key(
        60.0,
        "duration",
        "Session Initialization Timer: handshake must finish within this.",
        lo=0.001,
        hi=3600,
        spec="MS-MQQB 3.1.2.1",
    )
    session_cleanup_interval: float = key(
        300.0,
        "duration",
        "Session Cleanup Timer: an idle session is closed after this (CleanupInterval).",
        lo=0.001,
        hi=86400,
        spec="MS-MQQB 3.1.2.2",
    )
    message_id_history_cleanup: float = key(
        1800.0,
        "duration",
        "MessageIDHistory Cleanup Timer: age of duplicate-detection entries (RemoveDuplicateCleanup).",
        lo=0.001,
        hi=604800,
        spec="MS-MQQB 3.1.2.8",
    )
    message_id_history_size: int = key(
        10000,
        "int",
        "MessageIDHistoryTable entries kept (RemoveDuplicateSize).",
        lo=1,
        hi=10_000_000,
        spec="MS-MQQB 3.1.1.3",
    )
    send_insecure_nacks: bool = key(
        False,
        "bool",
        "SendInsecureNacks: also send administration NACKs whose class tells the sender about "
        "this QM (NACK_BAD_DST_Q, NACK_ACCESS_DENIED, signature and encryption failures).",
        spec="MS-MQQB 3.1.1.3",
    )

    @property
    def resend_timer_table(self) -> tuple[float, ...]:
        """The 10-entry ResendTimerTable: 3x short, 3x medium, 3x long, then final (MS-MQQB 3.1.1.3)."""
        s, m, lg = self.resend_timeouts_short, self.resend_timeouts_medium, self.resend_timeouts_long
        return (s,) * 3 + (m,) * 3 + (lg,) * 3 + (self.resend_timeouts_final,)


@dataclass(frozen=True)
class StoreConfig:
    """``[store]``: the store (SQLite in the data directory, or PostgreSQL)."""

    backend: str = key(
        "sqlite",
        "choice",
        "Where the QM keeps its queues, messages and sequence state: sqlite (a file in qm.data_dir,"
        " the default) or postgresql (the database store.dsn names; a QM that can fail over,"
        " docs/store.md).",
        choices=("sqlite", "postgresql"),
    )
    dsn: str = key(
        "",
        "dsn",
        'PostgreSQL connection string (libpq URI or key=value, e.g. "postgresql://openmsmq@db:5432/qm1")'
        ' when store.backend = "postgresql". Keep the password out of it (PGPASSWORD, or'
        " passfile=...); shown redacted.",
    )

    synchronous: str = key(
        "FULL",
        "choice",
        "SQLite synchronous mode; only FULL and EXTRA make every commit durable (invariant 2).",
        choices=("FULL", "EXTRA", "NORMAL", "OFF"),
    )
    group_commit_max_batch: int = key(
        1024,
        "int",
        "Most operations committed by one SQLite transaction (one fsync); the rest wait for the next.",
        lo=1,
        hi=1_000_000,
    )
    group_commit_max_wait: float = key(
        0.002,
        "duration",
        "Longest wait of a group commit for the committers of the previous one, so that steady"
        " concurrent committers share one fsync (0 = batch only what is already queued).",
        lo=0,
        hi=1,
    )
    max_message_size: int = key(
        4 << 20,
        "size",
        "Largest message accepted (bytes; at most 4 MiB, MSMQ's limit, which also bounds MS-MQQB packets).",
        lo=1024,
        hi=4 << 20,
    )
    default_queue_quota: int | None = key(
        None,
        "quota",
        'Quota of a new queue in bytes, or "unlimited" (Queue.Quota).',
        lo=1,
        spec="MS-MQDMPR 3.1.1.2",
    )
    qm_quota: int | None = key(
        None,
        "quota",
        'Total bytes of all queues, or "unlimited" (QueueManagerQuota): a send or arrival beyond'
        " it fails with MQ_ERROR_INSUFFICIENT_RESOURCES.",
        lo=1,
        spec="MS-MQDMPR 3.1.1.1",
    )
    disk_reserve: int = key(
        16 << 20,
        "size",
        "Disk space held back in <data_dir>/openmsmq.reserve so that receives, purges, deletions"
        " and releases still run when the disk is full: on a full disk the reserve is given back"
        " and sends and arrivals are refused until space is freed (0 = no reserve).",
        lo=0,
        hi=1 << 40,
    )


@dataclass(frozen=True)
class RemoteConfig:
    """``[remote]``: the remote-read service (MS-MQRR semantics over gRPC)."""

    enabled: bool = key(True, "bool", "Run the remote-read gRPC service.")
    listen_address: str = key("127.0.0.1", "ip", "IP address the gRPC service binds.")
    port: int = key(
        2105,
        "int",
        "gRPC port (0 = any free port); 2105 is where Windows MSMQ serves remote read.",
        lo=0,
        hi=65535,
    )
    tokens_file: Path | None = key(  # noqa: RUF009
        None, "path_or_empty", "File of bearer tokens, one per line; required unless listening on loopback."
    )
    require_token: bool = key(
        False,
        "bool",
        "Refuse every call without a valid token, on loopback too (remote.tokens_file is then"
        " required): for hosts shared with other users, whose processes could otherwise read,"
        " purge and delete queues through the loopback service.",
    )
    tls_cert: Path | None = key(None, "path_or_empty", "PEM certificate chain for TLS (with tls_key).")  # noqa: RUF009
    tls_key: Path | None = key(None, "path_or_empty", "PEM private key for TLS (with tls_cert).")  # noqa: RUF009
    allow_plaintext: bool = key(
        False,
        "bool",
        "Allow a listener off loopback without TLS: its bearer tokens and messages cross the"
        " network in clear (only behind a TLS-terminating proxy or inside an encrypted network).",
    )
    pending_request_cleanup: float = key(
        300.0,
        "duration",
        "Pending Request Cleanup Timer: an unacknowledged receive is put back after this.",
        lo=0.001,
        hi=86400,
        spec="MS-MQRR 3.1.2",
    )
    session_timeout: float = key(
        30.0,
        "duration",
        "A remote client silent this long is gone: its transactions abort, its pending receives go back.",
        lo=0.1,
        hi=86400,
    )
    max_pending_bytes: int = key(
        128 * 1024 * 1024,
        "size",
        "Memory one client session may hold in work it started and has not ended: receives"
        " started (two-phase and transactional; each message its size plus 1.5 KiB) and sends"
        " into its open transactions (each its size plus 512 bytes); a start or a send beyond it"
        " fails with MQ_ERROR_INSUFFICIENT_RESOURCES until some are ended.",
        lo=1024,
        spec="MS-MQRR 3.1.4.7, 3.1.4.13",
    )
    max_total_pending_bytes: int = key(
        512 * 1024 * 1024,
        "size",
        "Memory all client sessions together may hold in work they started and have not ended"
        " (counted as for max_pending_bytes); a start or a send beyond it fails with"
        " MQ_ERROR_INSUFFICIENT_RESOURCES until some are ended.",
        lo=1024,
        spec="MS-MQRR 3.1.4.7, 3.1.4.13",
    )
    max_batch_messages: int = key(
        100_000,
        "int",
        "Messages one call may ask for, end or carry (Read and StartReceive max_count, EndReceive"
        " request ids, Send and SendIdempotent messages, PeekRange max_count); a call beyond it"
        " fails with MQ_ERROR_INVALID_PARAMETER before any work.",
        lo=1,
        hi=10_000_000,
    )
    max_batch_queues: int = key(
        1000,
        "int",
        "Queues one LookupRanges or RemoveThrough call may name; beyond it the call fails with"
        " MQ_ERROR_INVALID_PARAMETER before any work.",
        lo=1,
        hi=1_000_000,
    )


@dataclass(frozen=True)
class MetricsConfig:
    """``[metrics]``: the Prometheus endpoint."""

    enabled: bool = key(True, "bool", "Serve Prometheus metrics over HTTP.")
    listen_address: str = key("127.0.0.1", "ip", "IP address of the metrics endpoint.")
    port: int = key(9181, "int", "Port of the metrics endpoint (0 = any free port).", lo=0, hi=65535)


@dataclass(frozen=True)
class ConsoleConfig:
    """``[console]``: the operators' web console (docs/console.md). It signs in with the
    tokens of ``remote.tokens_file`` and follows ``remote.require_token``."""

    enabled: bool = key(False, "bool", "Serve the web console (HTTP, or HTTPS with tls_cert and tls_key).")
    listen_address: str = key("127.0.0.1", "ip", "IP address the web console binds.")
    port: int = key(9180, "int", "Port of the web console (0 = any free port).", lo=0, hi=65535)
    tls_cert: Path | None = key(None, "path_or_empty", "PEM certificate chain for HTTPS (with tls_key).")  # noqa: RUF009
    tls_key: Path | None = key(None, "path_or_empty", "PEM private key for HTTPS (with tls_cert).")  # noqa: RUF009
    allow_plaintext: bool = key(
        False,
        "bool",
        "Allow a console off loopback without HTTPS (only behind a TLS-terminating proxy): its"
        " tokens and session cookies would cross the network in clear.",
    )
    session_timeout: float = key(
        1800.0,
        "duration",
        "A console session unused this long ends: the browser signs in again.",
        lo=1,
        hi=604800,
    )


@dataclass(frozen=True)
class LogConfig:
    """``[log]``: logging."""

    level: str = key(
        "info", "choice", "Log level.", choices=("debug", "info", "warning", "error", "critical")
    )
    format: str = key(
        "kv", "choice", "Log line format: key=value text or JSON lines.", choices=("kv", "json")
    )


@dataclass(frozen=True)
class HaConfig:
    """``[ha]``: the lease of a queue manager on PostgreSQL whose ``serve`` processes fail over
    (docs/ha.md). A dead active is replaced after about lease_duration + poll_interval."""

    lease_duration: float = key(
        3.0,
        "duration",
        "How long a grant or renewal of the lease holds, on the database's clock. Shorter fails"
        " over sooner; longer rides out longer pauses of the active and of the database.",
        lo=0.5,
        hi=300,
    )
    renew_interval: float = key(0.5, "duration", "The active renews its lease this often.", lo=0.05, hi=60)
    poll_interval: float = key(0.25, "duration", "A standby reads the lease this often.", lo=0.05, hi=60)


@dataclass(frozen=True)
class Config:
    """The whole configuration of one queue manager (all values validated)."""

    qm: QmConfig = field(default_factory=QmConfig)
    mqqb: MqqbConfig = field(default_factory=MqqbConfig)
    protocol: ProtocolConfig = field(default_factory=ProtocolConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    remote: RemoteConfig = field(default_factory=RemoteConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    console: ConsoleConfig = field(default_factory=ConsoleConfig)
    log: LogConfig = field(default_factory=LogConfig)
    ha: HaConfig = field(default_factory=HaConfig)


#: Section name -> its dataclass, in the order of ``config show`` and ``docs/configuration.md``.
SECTIONS: Mapping[str, type[Any]] = {
    "qm": QmConfig,
    "mqqb": MqqbConfig,
    "protocol": ProtocolConfig,
    "store": StoreConfig,
    "remote": RemoteConfig,
    "metrics": MetricsConfig,
    "console": ConsoleConfig,
    "log": LogConfig,
    "ha": HaConfig,
}


def config_keys() -> tuple[KeyInfo, ...]:
    """Every configuration key, in declaration order."""
    out = []
    for section, cls in SECTIONS.items():
        for f in fields(cls):
            out.append(
                KeyInfo(section, f.name, f.metadata["kind"], f.default, f.metadata["doc"], f.metadata["spec"])
            )
    return tuple(out)
