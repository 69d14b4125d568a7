"""Queue-manager configuration: defaults < TOML file < ``OPENMSMQ_*`` environment < flags.

``load_config(path, env, overrides)`` returns a :class:`LoadedConfig` whose ``config`` is
a frozen :class:`Config` tree and whose ``sources`` maps every dotted key (``mqqb.port``)
to where its value came from: ``"default"``, ``"file:<path>"``, ``"env:OPENMSMQ_MQQB_PORT"``
or ``"flag:--mqqb-port"``. ``render_config(loaded)`` prints the effective configuration as
TOML with each value's source as a trailing comment (``openmsmq config show``).

Every key is declared once, as a dataclass field below with its default, kind and
documentation in ``metadata``; the loader, the renderer and ``docs/configuration.md``
follow that table. A bad value, an unknown key or an unknown section raises
``ConfigError(key, message)`` naming the dotted key and what was expected.

* Environment: ``OPENMSMQ_<SECTION>_<KEY>`` (upper case), e.g. ``OPENMSMQ_PROTOCOL_ORDER_ACK_TIMEOUT``.
  A variable whose first word after ``OPENMSMQ_`` is a section name must name a known key;
  other ``OPENMSMQ_*`` variables (``OPENMSMQ_CONFIG``, ``OPENMSMQ_QM``, test knobs) are not
  configuration.
* Flags: the CLI passes ``{"mqqb.port": 1802, ...}``; ``None`` values (flag not given) are skipped.
* Durations: seconds as a number, or a string ``"500ms"``, ``"5s"``, ``"2m"``, ``"1h"``.
  Sizes: bytes as an integer, or ``"512KiB"``, ``"4MiB"``, ``"1GiB"``.
* Relative paths are relative to the working directory of the process.

Values are checked and converted by :mod:`openmsmq.config_values`. Only the standard
library, that module and :mod:`openmsmq.errors` are imported here.
"""

from __future__ import annotations

import ipaddress
import json
import tomllib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from openmsmq.config_values import Route, convert, fmt_number, norm_host, parse_duration, parse_size
from openmsmq.errors import ConfigError, quoted
from openmsmq.redact import redact

__all__ = [
    "ENV_PREFIX",
    "Config",
    "ConsoleConfig",
    "KeyInfo",
    "LoadedConfig",
    "LogConfig",
    "MetricsConfig",
    "MqqbConfig",
    "ProtocolConfig",
    "QmConfig",
    "RemoteConfig",
    "Route",
    "StoreConfig",
    "config_document",
    "config_keys",
    "load_config",
    "loaded_from_document",
    "parse_duration",
    "parse_size",
    "render_config",
    "with_overrides",
]

ENV_PREFIX = "OPENMSMQ_"


def _key(
    default: Any,
    kind: str,
    doc: str,
    *,
    lo: float | None = None,
    hi: float | None = None,
    choices: tuple[str, ...] = (),
    spec: str = "",
) -> Any:
    """Declare a configuration key: a dataclass field whose metadata drives the loader."""
    meta = {"kind": kind, "doc": doc, "lo": lo, "hi": hi, "choices": choices, "spec": spec}
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class QmConfig:
    """``[qm]``: the queue manager itself."""

    name: str = _key("", "name", "Computer name of this QM in DIRECT=OS: names; empty = the host name.")
    data_dir: Path = _key(Path("./data"), "path", "Directory of the SQLite store and the QM identity.")  # noqa: RUF009
    event_loop: str = _key(
        "uvloop",
        "choice",
        "Event loop of `serve` (MS-MQQB sessions, timers, store hand-offs): uvloop (libuv), or the"
        " standard library's asyncio loop. uvloop took up to 8 % less CPU per message in serve"
        " (most at 1 message per transaction; docs/benchmarks.md); where it cannot be imported"
        " serve logs a warning and runs asyncio.",
        choices=("uvloop", "asyncio"),
    )


@dataclass(frozen=True)
class MqqbConfig:
    """``[mqqb]``: the MS-MQQB listener and outbound connections (TCP 1801)."""

    listen_address: str = _key(
        "127.0.0.1", "ip", "IP address the MS-MQQB listener binds (0.0.0.0 / :: = all)."
    )
    port: int = _key(
        1801, "int", "MS-MQQB TCP port (0 = any free port).", lo=0, hi=65535, spec="MS-MQQB 2.1.1"
    )
    advertised_address: str = _key(
        "", "ip_or_empty", "IP address peers use for this QM (order-queue names); empty = listen_address."
    )
    allowed_peers: tuple[str, ...] = _key(
        ("127.0.0.0/8", "::1/128"),
        "peers",
        "Networks allowed to open MS-MQQB sessions (CIDR list). An entry {QM GUID}=CIDR also pins that"
        " QM: a session claiming its GUID is accepted from the pinned networks only (docs/security.md).",
    )
    connect_backoff_min: float = _key(
        5.0,
        "duration",
        "First wait before reconnecting to a peer (Session Retry Connect, TryConnectInterval).",
        lo=0.001,
        hi=86400,
        spec="MS-MQQB 3.1.2.3",
    )
    connect_backoff_max: float = _key(
        60.0,
        "duration",
        "Longest wait between reconnect attempts (the wait doubles up to this).",
        lo=0.001,
        hi=86400,
    )
    routes: tuple[Route, ...] = _key(
        (),
        "routes",
        "Static routes: destination QM address (or {QM GUID}, for PRIVATE= names) = next hop host[:port].",
    )
    send_buffer: int = _key(
        32 << 20,
        "size",
        "Message bytes an outgoing queue holds in memory: loaded, or sent and not yet session-acknowledged"
        " (one message always goes).",
        lo=64 << 10,
        hi=1 << 34,
    )
    max_in_flight: int = _key(
        200_000,
        "int",
        "Messages an outgoing queue keeps loaded and not yet acknowledged (a transactional one until its"
        " OrderAck); at it the queue waits. Each costs about 250 bytes; more drains a large backlog faster.",
        lo=1000,
        hi=10_000_000,
    )
    max_connections: int = _key(
        1000,
        "int",
        "MS-MQQB connections open at once; one accepted beyond it is closed at once (lowered at start to"
        " what the open-file limit leaves after 256 for the store and the other services).",
        lo=1,
        hi=1_000_000,
    )
    max_connections_per_address: int = _key(
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
    receive_buffer: int = _key(
        64 << 20,
        "size",
        "Received message bytes waiting for the store, each message counted with about 1 KiB more (what"
        " its objects take); above it the QM stops reading from its peers until half is stored.",
        lo=64 << 10,
        hi=1 << 34,
    )
    intermediate_hops: tuple[str, ...] = _key(
        (),
        "hops",
        "Peers (host, IP address, CIDR network or {QM GUID}) whose sessions may carry messages of other"
        " QMs (intermediate hops); the next hops of mqqb.routes are intermediate hops too. From any"
        " other peer a packet whose SourceQueueManager is not the peer's own GUID is refused.",
        spec="MS-MQQB 3.1.1.6.2",
    )
    allow_relay: bool = _key(
        False,
        "bool",
        "Pass on messages for any other QM (an open relay). Off: only for destinations that"
        " mqqb.routes names (a route to the destination itself relays to it directly).",
    )
    sequence_clock_skew: float = _key(
        86400.0,
        "duration",
        "A message that starts an incoming sequence with a TxSequenceID whose TimeStamp lies further"
        " than this ahead of this QM's clock is refused (no sender could ever get past it).",
        lo=60,
        hi=10 * 365 * 86400,
        spec="MS-MQQB 3.1.1.3.1",
    )
    max_incoming_sequences: int = _key(
        100_000,
        "int",
        "Incoming transactional sequences (sender QM, destination queue) kept at most; a message that"
        " would start one more is refused until some expire. Each costs about 1 KiB of memory.",
        lo=1,
        hi=10_000_000,
    )
    incoming_sequence_max_idle: float = _key(
        90 * 86400.0,
        "duration",
        "An incoming sequence that received nothing for this long is forgotten (its stored state"
        " deleted); its sender must then start a new sequence. Keep it above the longest time a"
        " sender may be away with messages in flight.",
        lo=3600,
        hi=100 * 365 * 86400,
        spec="MS-MQDMPR 3.1.1.5",
    )
    tls_cert: Path | None = _key(  # noqa: RUF009
        None,
        "path_or_empty",
        "PEM certificate (chain) of this QM for MS-MQQB over TLS; it names the QM's GUID (subject CN or"
        " URI SAN urn:uuid:<guid>). With tls_key and tls_ca, the TLS listener runs on tls_port.",
    )
    tls_key: Path | None = _key(None, "path_or_empty", "PEM private key of tls_cert.")  # noqa: RUF009
    tls_ca: Path | None = _key(  # noqa: RUF009
        None, "path_or_empty", "PEM CA certificate(s) that sign the certificates of this QM's TLS peers."
    )
    tls_port: int = _key(
        1802,
        "int",
        "Port of the MS-MQQB over TLS listener (mutual TLS); peers in tls_peers are reached on it (0 ="
        " any free port).",
        lo=0,
        hi=65535,
    )
    tls_peers: tuple[str, ...] = _key(
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

    order_ack_timeout: float = _key(
        0.5,
        "duration",
        "OrderAckTimeout: delay of the Order Ack Send Timer (the spec says MUST be 500 ms).",
        lo=0.001,
        hi=3600,
        spec="MS-MQQB 3.1.1.3.1, 3.1.2.7",
    )
    maximum_order_ack_delay: float = _key(
        10.0,
        "duration",
        "MaximumOrderAckDelay: cap on postponing an OrderAck (Windows SeqMaxAckDelay).",
        lo=0.001,
        hi=3600,
        spec="MS-MQQB 3.1.1.3.1, 3.1.2.7",
    )
    ack_wait_timeout: float = _key(
        20.0,
        "duration",
        "AckWaitTimeout: wait for a SessionAck before closing (ConnectionParameters.AckTimeout).",
        lo=20,
        hi=120,
        spec="MS-MQQB 2.2.2, 3.1.2.4",
    )
    direct_ack_wait_multiplier: int = _key(
        2,
        "int",
        "Session Ack Wait Timer factor for direct-format sessions (QosCleanupIntervalMultiplier).",
        lo=1,
        hi=100,
        spec="MS-MQQB 3.1.2.4",
    )
    recoverable_ack_timeout_min: float = _key(
        0.5,
        "duration",
        "Lower clamp of RecoverableAckSendTimeout (= 8 x round trip).",
        lo=0.5,
        hi=120,
        spec="MS-MQQB 3.1.5.3, 2.2.2",
    )
    recoverable_ack_timeout_max: float = _key(
        120.0,
        "duration",
        "Upper clamp of RecoverableAckSendTimeout.",
        lo=0.5,
        hi=120,
        spec="MS-MQQB 3.1.5.3, 2.2.2",
    )
    window_size: int = _key(
        1024,
        "int",
        "WindowSize: unacknowledged packets allowed per session (the spec's SHOULD and Windows'"
        " MaxUnackedPacket are 64); a session uses the smaller of both QMs', so 64 toward a"
        " Windows peer, and moves at most window / round trip packets a second.",
        lo=1,
        hi=65535,
        spec="MS-MQQB 3.1.1.3.1",
    )
    resend_timeouts_short: float = _key(
        30.0,
        "duration",
        "ResendTimeoutsShort: Transactional Ack Wait for resends 1-3.",
        lo=0.001,
        hi=604800,
        spec="MS-MQQB 3.1.1.3, 3.1.2.6",
    )
    resend_timeouts_medium: float = _key(
        300.0, "duration", "ResendTimeoutsMedium: resends 4-6.", lo=0.001, hi=604800, spec="MS-MQQB 3.1.1.3"
    )
    resend_timeouts_long: float = _key(
        1800.0, "duration", "ResendTimeoutsLong: resends 7-9.", lo=0.001, hi=604800, spec="MS-MQQB 3.1.1.3"
    )
    resend_timeouts_final: float = _key(
        21600.0,
        "duration",
        "ResendTimeoutsFinal: every later resend.",
        lo=0.001,
        hi=604800,
        spec="MS-MQQB 3.1.1.3",
    )
    session_initialization_timeout: float = _key(
        60.0,
        "duration",
        "Session Initialization Timer: handshake must finish within this.",
        lo=0.001,
        hi=3600,
        spec="MS-MQQB 3.1.2.1",
    )
    session_cleanup_interval: float = _key(
        300.0,
        "duration",
        "Session Cleanup Timer: an idle session is closed after this (CleanupInterval).",
        lo=0.001,
        hi=86400,
        spec="MS-MQQB 3.1.2.2",
    )
    message_id_history_cleanup: float = _key(
        1800.0,
        "duration",
        "MessageIDHistory Cleanup Timer: age of duplicate-detection entries (RemoveDuplicateCleanup).",
        lo=0.001,
        hi=604800,
        spec="MS-MQQB 3.1.2.8",
    )
    message_id_history_size: int = _key(
        10000,
        "int",
        "MessageIDHistoryTable entries kept (RemoveDuplicateSize).",
        lo=1,
        hi=10_000_000,
        spec="MS-MQQB 3.1.1.3",
    )
    send_insecure_nacks: bool = _key(
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

    backend: str = _key(
        "sqlite",
        "choice",
        "Where the QM keeps its queues, messages and sequence state: sqlite (a file in qm.data_dir,"
        " the default) or postgresql (the database store.dsn names; a QM that can fail over,"
        " docs/store.md).",
        choices=("sqlite", "postgresql"),
    )
    dsn: str = _key(
        "",
        "dsn",
        'PostgreSQL connection string (libpq URI or key=value, e.g. "postgresql://openmsmq@db:5432/qm1")'
        ' when store.backend = "postgresql". Keep the password out of it (PGPASSWORD, or'
        " passfile=...); shown redacted.",
    )

    synchronous: str = _key(
        "FULL",
        "choice",
        "SQLite synchronous mode; only FULL and EXTRA make every commit durable (invariant 2).",
        choices=("FULL", "EXTRA", "NORMAL", "OFF"),
    )
    group_commit_max_batch: int = _key(
        1024,
        "int",
        "Most operations committed by one SQLite transaction (one fsync); the rest wait for the next.",
        lo=1,
        hi=1_000_000,
    )
    group_commit_max_wait: float = _key(
        0.002,
        "duration",
        "Longest wait of a group commit for the committers of the previous one, so that steady"
        " concurrent committers share one fsync (0 = batch only what is already queued).",
        lo=0,
        hi=1,
    )
    max_message_size: int = _key(
        4 << 20,
        "size",
        "Largest message accepted (bytes; at most 4 MiB, MSMQ's limit, which also bounds MS-MQQB packets).",
        lo=1024,
        hi=4 << 20,
    )
    default_queue_quota: int | None = _key(
        None,
        "quota",
        'Quota of a new queue in bytes, or "unlimited" (Queue.Quota).',
        lo=1,
        spec="MS-MQDMPR 3.1.1.2",
    )
    qm_quota: int | None = _key(
        None,
        "quota",
        'Total bytes of all queues, or "unlimited" (QueueManagerQuota): a send or arrival beyond'
        " it fails with MQ_ERROR_INSUFFICIENT_RESOURCES.",
        lo=1,
        spec="MS-MQDMPR 3.1.1.1",
    )
    disk_reserve: int = _key(
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

    enabled: bool = _key(True, "bool", "Run the remote-read gRPC service.")
    listen_address: str = _key("127.0.0.1", "ip", "IP address the gRPC service binds.")
    port: int = _key(
        2105,
        "int",
        "gRPC port (0 = any free port); 2105 is where Windows MSMQ serves remote read.",
        lo=0,
        hi=65535,
    )
    tokens_file: Path | None = _key(  # noqa: RUF009
        None, "path_or_empty", "File of bearer tokens, one per line; required unless listening on loopback."
    )
    require_token: bool = _key(
        False,
        "bool",
        "Refuse every call without a valid token, on loopback too (remote.tokens_file is then"
        " required): for hosts shared with other users, whose processes could otherwise read,"
        " purge and delete queues through the loopback service.",
    )
    tls_cert: Path | None = _key(None, "path_or_empty", "PEM certificate chain for TLS (with tls_key).")  # noqa: RUF009
    tls_key: Path | None = _key(None, "path_or_empty", "PEM private key for TLS (with tls_cert).")  # noqa: RUF009
    allow_plaintext: bool = _key(
        False,
        "bool",
        "Allow a listener off loopback without TLS: its bearer tokens and messages cross the"
        " network in clear (only behind a TLS-terminating proxy or inside an encrypted network).",
    )
    pending_request_cleanup: float = _key(
        300.0,
        "duration",
        "Pending Request Cleanup Timer: an unacknowledged receive is put back after this.",
        lo=0.001,
        hi=86400,
        spec="MS-MQRR 3.1.2",
    )
    session_timeout: float = _key(
        30.0,
        "duration",
        "A remote client silent this long is gone: its transactions abort, its pending receives go back.",
        lo=0.1,
        hi=86400,
    )
    max_pending_bytes: int = _key(
        128 * 1024 * 1024,
        "size",
        "Memory one client session may hold in work it started and has not ended: receives"
        " started (two-phase and transactional; each message its size plus 1.5 KiB) and sends"
        " into its open transactions (each its size plus 512 bytes); a start or a send beyond it"
        " fails with MQ_ERROR_INSUFFICIENT_RESOURCES until some are ended.",
        lo=1024,
        spec="MS-MQRR 3.1.4.7, 3.1.4.13",
    )
    max_total_pending_bytes: int = _key(
        512 * 1024 * 1024,
        "size",
        "Memory all client sessions together may hold in work they started and have not ended"
        " (counted as for max_pending_bytes); a start or a send beyond it fails with"
        " MQ_ERROR_INSUFFICIENT_RESOURCES until some are ended.",
        lo=1024,
        spec="MS-MQRR 3.1.4.7, 3.1.4.13",
    )
    max_batch_messages: int = _key(
        100_000,
        "int",
        "Messages one call may ask for, end or carry (Read and StartReceive max_count, EndReceive"
        " request ids, Send and SendIdempotent messages, PeekRange max_count); a call beyond it"
        " fails with MQ_ERROR_INVALID_PARAMETER before any work.",
        lo=1,
        hi=10_000_000,
    )
    max_batch_queues: int = _key(
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

    enabled: bool = _key(True, "bool", "Serve Prometheus metrics over HTTP.")
    listen_address: str = _key("127.0.0.1", "ip", "IP address of the metrics endpoint.")
    port: int = _key(9181, "int", "Port of the metrics endpoint (0 = any free port).", lo=0, hi=65535)


@dataclass(frozen=True)
class ConsoleConfig:
    """``[console]``: the operators' web console (docs/console.md). It signs in with the
    tokens of ``remote.tokens_file`` and follows ``remote.require_token``."""

    enabled: bool = _key(False, "bool", "Serve the web console (HTTP, or HTTPS with tls_cert and tls_key).")
    listen_address: str = _key("127.0.0.1", "ip", "IP address the web console binds.")
    port: int = _key(9180, "int", "Port of the web console (0 = any free port).", lo=0, hi=65535)
    tls_cert: Path | None = _key(None, "path_or_empty", "PEM certificate chain for HTTPS (with tls_key).")  # noqa: RUF009
    tls_key: Path | None = _key(None, "path_or_empty", "PEM private key for HTTPS (with tls_cert).")  # noqa: RUF009
    allow_plaintext: bool = _key(
        False,
        "bool",
        "Allow a console off loopback without HTTPS (only behind a TLS-terminating proxy): its"
        " tokens and session cookies would cross the network in clear.",
    )
    session_timeout: float = _key(
        1800.0,
        "duration",
        "A console session unused this long ends: the browser signs in again.",
        lo=1,
        hi=604800,
    )


@dataclass(frozen=True)
class LogConfig:
    """``[log]``: logging."""

    level: str = _key(
        "info", "choice", "Log level.", choices=("debug", "info", "warning", "error", "critical")
    )
    format: str = _key(
        "kv", "choice", "Log line format: key=value text or JSON lines.", choices=("kv", "json")
    )


@dataclass(frozen=True)
class HaConfig:
    """``[ha]``: the lease of a queue manager on PostgreSQL whose ``serve`` processes fail over
    (docs/ha.md). A dead active is replaced after about lease_duration + poll_interval."""

    lease_duration: float = _key(
        3.0,
        "duration",
        "How long a grant or renewal of the lease holds, on the database's clock. Shorter fails"
        " over sooner; longer rides out longer pauses of the active and of the database.",
        lo=0.5,
        hi=300,
    )
    renew_interval: float = _key(0.5, "duration", "The active renews its lease this often.", lo=0.05, hi=60)
    poll_interval: float = _key(0.25, "duration", "A standby reads the lease this often.", lo=0.05, hi=60)


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


_SECTIONS: dict[str, type[Any]] = {
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


@dataclass(frozen=True)
class KeyInfo:
    """One configuration key, for docs and ``config show``."""

    section: str
    name: str
    kind: str
    default: Any
    doc: str
    spec: str

    @property
    def dotted(self) -> str:
        """``section.name``."""
        return f"{self.section}.{self.name}"

    @property
    def env_var(self) -> str:
        """``OPENMSMQ_SECTION_NAME``."""
        return f"{ENV_PREFIX}{self.section.upper()}_{self.name.upper()}"

    @property
    def flag(self) -> str:
        """``--section-name``, the CLI flag spelling."""
        return "--" + self.dotted.replace(".", "-").replace("_", "-")


def config_keys() -> tuple[KeyInfo, ...]:
    """Every configuration key, in declaration order."""
    out = []
    for section, cls in _SECTIONS.items():
        for f in fields(cls):
            out.append(
                KeyInfo(section, f.name, f.metadata["kind"], f.default, f.metadata["doc"], f.metadata["spec"])
            )
    return tuple(out)


@dataclass(frozen=True)
class LoadedConfig:
    """A configuration and where each value came from (dotted key -> source)."""

    config: Config
    sources: Mapping[str, str]
    path: Path | None = None


# --------------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------------


def _field_meta(section: str, name: str) -> Mapping[str, Any] | None:
    for f in fields(_SECTIONS[section]):
        if f.name == name:
            return f.metadata
    return None


def _read_file(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except OSError as exc:
        raise ConfigError("file", f"cannot read {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError("file", f"{path} is not valid TOML: {exc}") from None


def load_config(
    path: Path | str | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, object] | None = None,
) -> LoadedConfig:
    """Build the configuration: defaults, then the TOML file at ``path``, then ``env``
    (``OPENMSMQ_<SECTION>_<KEY>``), then ``overrides`` (dotted keys from CLI flags).

    Raises ConfigError(key, message) for an unreadable file, an unknown section or key,
    or a value of the wrong type or out of range.
    """
    values: dict[str, dict[str, Any]] = {s: {} for s in _SECTIONS}
    sources: dict[str, str] = {k.dotted: "default" for k in config_keys()}

    def put(section: str, name: str, raw: object, source: str, from_text: bool) -> None:
        dotted = f"{section}.{name}"
        meta = _field_meta(section, name)
        if meta is None:
            known = ", ".join(f.name for f in fields(_SECTIONS[section]))
            raise ConfigError(dotted, f"unknown key (from {source}); [{section}] has: {known}")
        values[section][name] = convert(dotted, meta["kind"], meta, raw, from_text)
        sources[dotted] = source

    file_path = Path(path) if path is not None else None
    if file_path is not None:
        data = _read_file(file_path)
        for section, table in data.items():
            if section not in _SECTIONS:
                raise ConfigError(
                    section, f"unknown section in {file_path}; sections: {', '.join(_SECTIONS)}"
                )
            if not isinstance(table, dict):
                raise ConfigError(
                    section, f"expected a [{section}] table in {file_path}, got {quoted(table)}"
                )
            for name, raw in table.items():
                put(section, name, raw, f"file:{file_path}", False)

    for var in sorted(env or {}):
        if not var.startswith(ENV_PREFIX):
            continue
        section, _, name = var[len(ENV_PREFIX) :].lower().partition("_")
        if section not in _SECTIONS or not name:
            # not configuration: OPENMSMQ_CONFIG, OPENMSMQ_QM (the command line's --qm), test knobs
            continue
        put(section, name, (env or {})[var], f"env:{var}", True)

    for dotted, raw in (overrides or {}).items():
        if raw is None:
            continue
        section, dot, name = dotted.partition(".")
        if not dot or section not in _SECTIONS:
            raise ConfigError(
                dotted, f"unknown key; keys look like qm.data_dir (sections: {', '.join(_SECTIONS)})"
            )
        put(section, name, raw, "flag:" + KeyInfo(section, name, "", None, "", "").flag, True)

    config = Config(**{s: _SECTIONS[s](**values[s]) for s in _SECTIONS})
    _check_consistency(config)
    return LoadedConfig(config, dict(sources), file_path)


def _check_consistency(c: Config) -> None:
    """Rules between keys."""
    if c.store.backend == "postgresql" and not c.store.dsn.strip():
        raise ConfigError("store.dsn", 'required when store.backend = "postgresql"')
    if c.ha.renew_interval >= c.ha.lease_duration / 2:
        # The active stops a quarter of the lease before it can expire; at least one
        # renewal must fit before that, with room for a retry.
        raise ConfigError("ha.renew_interval", "must be below half of ha.lease_duration")
    if c.mqqb.connect_backoff_min > c.mqqb.connect_backoff_max:
        raise ConfigError("mqqb.connect_backoff_min", "must not exceed mqqb.connect_backoff_max")
    if c.protocol.recoverable_ack_timeout_min > c.protocol.recoverable_ack_timeout_max:
        raise ConfigError(
            "protocol.recoverable_ack_timeout_min", "must not exceed protocol.recoverable_ack_timeout_max"
        )
    if c.protocol.order_ack_timeout > c.protocol.maximum_order_ack_delay:
        raise ConfigError("protocol.order_ack_timeout", "must not exceed protocol.maximum_order_ack_delay")
    tls = (c.mqqb.tls_cert, c.mqqb.tls_key, c.mqqb.tls_ca)
    if any(x is not None for x in tls) and any(x is None for x in tls):
        missing = next(k for k, x in zip(("tls_cert", "tls_key", "tls_ca"), tls, strict=True) if x is None)
        raise ConfigError(f"mqqb.{missing}", "mqqb.tls_cert, mqqb.tls_key and mqqb.tls_ca go together")
    if c.mqqb.tls_peers and not c.mqqb.tls:
        raise ConfigError("mqqb.tls_peers", "needs mqqb.tls_cert, mqqb.tls_key and mqqb.tls_ca")
    if (c.remote.tls_cert is None) != (c.remote.tls_key is None):
        missing = "remote.tls_key" if c.remote.tls_key is None else "remote.tls_cert"
        raise ConfigError(missing, "remote.tls_cert and remote.tls_key go together")
    remote_loopback = ipaddress.ip_address(c.remote.listen_address).is_loopback
    if c.remote.enabled and c.remote.tokens_file is None and not remote_loopback:
        raise ConfigError(
            "remote.tokens_file", "required when remote.listen_address is not a loopback address"
        )
    if c.remote.enabled and c.remote.require_token and c.remote.tokens_file is None:
        raise ConfigError("remote.tokens_file", "required when remote.require_token is true")
    if (
        c.remote.enabled
        and not remote_loopback
        and c.remote.tls_cert is None
        and not c.remote.allow_plaintext
    ):
        raise ConfigError(
            "remote.tls_cert",
            f"required when remote.listen_address ({c.remote.listen_address}) is not a loopback address:"
            " without TLS the bearer tokens and the messages cross the network in clear, and anyone"
            " who sees one token can use it (set remote.tls_cert and remote.tls_key, or"
            " remote.allow_plaintext = true behind a TLS-terminating proxy or on an encrypted network;"
            " docs/security.md)",
        )
    _check_console(c)
    if c.mqqb.advertised_address == "" and ipaddress.ip_address(c.mqqb.listen_address).is_unspecified:
        raise ConfigError("mqqb.advertised_address", "required when mqqb.listen_address is 0.0.0.0 or ::")
    listeners = [
        ("mqqb.port", c.mqqb.listen_address, c.mqqb.port, True),
        ("mqqb.tls_port", c.mqqb.listen_address, c.mqqb.tls_port, c.mqqb.tls),
        ("remote.port", c.remote.listen_address, c.remote.port, c.remote.enabled),
        ("metrics.port", c.metrics.listen_address, c.metrics.port, c.metrics.enabled),
        ("console.port", c.console.listen_address, c.console.port, c.console.enabled),
    ]
    for i, (key, addr, port, enabled) in enumerate(listeners):
        for other, other_addr, other_port, other_enabled in listeners[:i]:
            overlap = addr == other_addr or "unspecified" in (_kind(addr), _kind(other_addr))
            if enabled and other_enabled and port and port == other_port and overlap:
                raise ConfigError(key, f"port {port} on {addr} is also {other}")


def _check_console(c: Config) -> None:
    """The console signs in with the remote-read tokens: the same rules as that service."""
    k = c.console
    if (k.tls_cert is None) != (k.tls_key is None):
        missing = "console.tls_key" if k.tls_key is None else "console.tls_cert"
        raise ConfigError(missing, "console.tls_cert and console.tls_key go together")
    if not k.enabled or ipaddress.ip_address(k.listen_address).is_loopback:
        return
    if c.remote.tokens_file is None:
        raise ConfigError(
            "remote.tokens_file", "required when console.listen_address is not a loopback address"
        )
    if k.tls_cert is None and not k.allow_plaintext:
        raise ConfigError(
            "console.tls_cert",
            f"required when console.listen_address ({k.listen_address}) is not a loopback address:"
            " without HTTPS the tokens and session cookies cross the network in clear (set"
            " console.tls_cert and console.tls_key, or console.allow_plaintext = true behind a"
            " TLS-terminating proxy; docs/console.md)",
        )


def _kind(address: str) -> str:
    return "unspecified" if ipaddress.ip_address(address).is_unspecified else "specific"


# --------------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------------


def _toml_value(kind: str, value: Any) -> str:
    if kind == "dsn":
        value = redact(str(value))
    if value is None:
        return '"unlimited"' if kind == "quota" else '""'
    if isinstance(value, bool):
        return "true" if value else "false"
    if kind == "duration":
        return fmt_number(value) if float(value).is_integer() else repr(float(value))
    if isinstance(value, int):
        return str(value)
    if kind in ("networks", "peers", "hops"):
        return "[" + ", ".join(json.dumps(v) for v in value) + "]"
    if kind == "routes":
        return (
            "{ " + ", ".join(f"{json.dumps(r.destination)} = {json.dumps(r.next_hop)}" for r in value) + " }"
            if (value)
            else "{}"
        )
    return json.dumps(str(value), ensure_ascii=False)


def render_config(loaded: LoadedConfig) -> str:
    """The effective configuration as TOML, each value followed by ``# <source>``.

    The output loads back (as a file) to the same configuration.
    """
    lines = ["# openmsmq effective configuration (value  # source)"]
    for section in _SECTIONS:
        lines += ["", f"[{section}]"]
        section_values = getattr(loaded.config, section)
        for f in fields(_SECTIONS[section]):
            dotted = f"{section}.{f.name}"
            text = _toml_value(f.metadata["kind"], getattr(section_values, f.name))
            lines.append(f"{f.name} = {text}  # {loaded.sources.get(dotted, 'default')}")
    return "\n".join(lines) + "\n"


def _json_value(kind: str, value: Any) -> Any:
    """A configuration value as JSON, spelled as the TOML file would spell it (a DSN
    without its password)."""
    if kind == "dsn":
        return redact(str(value))
    if value is None:
        return "unlimited" if kind == "quota" else None
    if isinstance(value, Path):
        return str(value)
    if kind == "routes":
        return {r.destination: r.next_hop for r in value if isinstance(r, Route)}
    if isinstance(value, tuple):
        return list(value)
    return value


def config_document(loaded: LoadedConfig) -> dict[str, Any]:
    """``{"file": ..., "config": {section: {key: value}}, "sources": {"section.key": source}}``:
    ``openmsmq config show --json``, and what ``openmsmq serve`` publishes in its
    runtime.json so that ``config show`` can show a running queue manager's own."""
    sections: dict[str, dict[str, Any]] = {}
    for key in config_keys():
        value = getattr(getattr(loaded.config, key.section), key.name)
        sections.setdefault(key.section, {})[key.name] = _json_value(key.kind, value)
    return {
        "file": str(loaded.path) if loaded.path is not None else None,
        "config": sections,
        "sources": {k.dotted: loaded.sources.get(k.dotted, "default") for k in config_keys()},
    }


def loaded_from_document(doc: Mapping[str, Any]) -> LoadedConfig:
    """The :class:`LoadedConfig` a :func:`config_document` describes (values checked again
    as flags are; a key the document lacks keeps its default). ConfigError when the
    document is not one."""
    try:
        sections = doc["config"]
        flat = {f"{s}.{k}": v for s, table in sections.items() for k, v in table.items()}
        sources = {str(k): str(v) for k, v in doc.get("sources", {}).items()}
        path = doc.get("file")
    except (KeyError, AttributeError, TypeError) as exc:
        raise ConfigError("runtime", f"not a configuration document: {exc}") from None
    values = load_config(None, {}, flat)
    return LoadedConfig(values.config, {**values.sources, **sources}, Path(path) if path else None)


def with_overrides(config: Config, **sections: Mapping[str, Any]) -> Config:
    """A copy of ``config`` with some values replaced, validated like flags (for tests and embedding).

    ``with_overrides(cfg, mqqb={"port": 0})``.
    """
    new = config
    for section, items in sections.items():
        if section not in _SECTIONS:
            raise ConfigError(section, f"unknown section; sections: {', '.join(_SECTIONS)}")
        converted = {}
        for name, raw in items.items():
            meta = _field_meta(section, name)
            if meta is None:
                raise ConfigError(f"{section}.{name}", "unknown key")
            converted[name] = convert(f"{section}.{name}", meta["kind"], meta, raw, True)
        new = replace(new, **{section: replace(getattr(new, section), **converted)})
    _check_consistency(new)
    return new
