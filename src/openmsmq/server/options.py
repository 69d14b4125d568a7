"""The configuration mapped onto the option objects of the parts ``openmsmq serve``
assembles: the transfer's :class:`~openmsmq.transfer.state.TransferConfig`, the MS-MQQB
driver's :class:`~openmsmq.net.mqqb.NetConfig` and the store's
:class:`~openmsmq.qm.options.StoreOptions`."""

from __future__ import annotations

import contextlib
import logging
import resource
import ssl
from typing import Any

from openmsmq.config import Config
from openmsmq.errors import ConfigError
from openmsmq.net.mqqb import NetConfig
from openmsmq.net.tls import client_context, peer_matcher, server_context
from openmsmq.protocol.events import SessionConfig
from openmsmq.protocol.incoming import OrderAckConfig
from openmsmq.protocol.outgoing import ResendConfig
from openmsmq.qm.options import StoreOptions
from openmsmq.store.records import INFINITE
from openmsmq.transfer.engine import TransferConfig, routes_from
from openmsmq.transfer.trust import TrustConfig

__all__ = ["FD_RESERVE", "connection_limit", "net_config", "store_options", "transfer_config"]

log = logging.getLogger("openmsmq.serve")

#: File descriptors kept for everything but MS-MQQB connections: the store (database,
#: WAL, a reader connection per thread), the remote-read and metrics services, logs.
FD_RESERVE = 256


def connection_limit(wanted: int) -> int:
    """The MS-MQQB connection cap to use: ``wanted`` (mqqb.max_connections), after raising
    this process's soft limit of open files toward its hard limit (commonly 1,024 soft),
    and at most what that limit leaves after :data:`FD_RESERVE`. Logged when lowered."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted + FD_RESERVE
    if soft != resource.RLIM_INFINITY and soft < target:
        new = target if hard == resource.RLIM_INFINITY else min(target, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
            soft = new
    if soft == resource.RLIM_INFINITY or soft >= target:
        return wanted
    usable = max(1, soft - FD_RESERVE)
    log.warning(
        "mqqb.max_connections %d lowered to %d: the open-file limit is %d (raise it, e.g. LimitNOFILE=)",
        wanted, usable, soft,
    )  # fmt: skip
    return usable


def transfer_config(config: Config) -> TransferConfig:
    """The :class:`TransferConfig` of a loaded configuration."""
    m, p = config.mqqb, config.protocol
    addresses = {m.listen_address.lower()}
    if m.advertised_address:
        addresses.add(m.advertised_address.lower())
    if config.qm.name:
        addresses.add(config.qm.name.lower())
    return TransferConfig(
        local_addresses=tuple(sorted(addresses)),
        routes=routes_from((r.destination, r.next_hop) for r in m.routes),
        session=SessionConfig(
            window_size=p.window_size,
            ack_wait_timeout=p.ack_wait_timeout,
            initialization_timeout=p.session_initialization_timeout,
            cleanup_interval=p.session_cleanup_interval,
        ),
        order_ack=OrderAckConfig(p.order_ack_timeout, p.maximum_order_ack_delay),
        resend=ResendConfig(
            p.resend_timeouts_short, p.resend_timeouts_medium, p.resend_timeouts_long, p.resend_timeouts_final
        ),
        send_insecure_nacks=p.send_insecure_nacks,
        queued_bytes=m.send_buffer,
        max_in_flight=m.max_in_flight,
        unstored_bytes=m.receive_buffer,
        trust=TrustConfig(
            intermediate_hops=m.intermediate_hops,
            allow_relay=m.allow_relay,
            pinned=m.pinned_peers,
            sequence_clock_skew=m.sequence_clock_skew,
            max_incoming_sequences=m.max_incoming_sequences,
            incoming_sequence_max_idle=m.incoming_sequence_max_idle,
        ),
    )


def net_config(config: Config) -> NetConfig:
    """The :class:`NetConfig` of a loaded configuration's ``[mqqb]``: TLS contexts built
    from its certificate files (an unreadable one raises :class:`ConfigError`); the
    connection cap follows the open-file limit (:func:`connection_limit`), and one source
    address may hold at most ``mqqb.max_connections_per_address`` and never more than half
    of it."""
    m = config.mqqb
    cap = connection_limit(m.max_connections)
    tls: dict[str, Any] = {}
    if m.tls_cert is not None and m.tls_key is not None and m.tls_ca is not None:
        try:
            tls = {
                "tls_server": server_context(m.tls_cert, m.tls_key, m.tls_ca),
                "tls_client": client_context(m.tls_cert, m.tls_key, m.tls_ca),
            }
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError("mqqb.tls_cert", f"cannot load the TLS certificate, key or CA: {exc}") from exc
    return NetConfig(
        host=m.listen_address,
        port=m.port,
        allow=m.peer_allowed,
        backoff_min=m.connect_backoff_min,
        backoff_max=m.connect_backoff_max,
        max_connections=cap,
        max_connections_per_address=min(m.max_connections_per_address, max(1, cap // 2)),
        tls_port=m.tls_port,
        tls_peers=peer_matcher(m.tls_peers),
        **tls,
    )


def store_options(config: Config) -> StoreOptions:
    """The :class:`StoreOptions` of a loaded configuration's ``[store]``."""
    st = config.store
    quota = INFINITE if st.default_queue_quota is None else max(1, st.default_queue_quota // 1024)
    return StoreOptions(
        backend=st.backend,
        dsn=st.dsn,
        synchronous=st.synchronous,
        max_commit_wait=st.group_commit_max_wait,
        max_message_bytes=st.max_message_size,
        default_quota_kb=quota,
        max_batch_ops=st.group_commit_max_batch,
        qm_quota_bytes=st.qm_quota,
        disk_reserve=st.disk_reserve,
    )
