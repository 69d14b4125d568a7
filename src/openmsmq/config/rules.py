"""Rules between keys of one configuration, checked after each value was checked on its
own: a value that is valid alone but not with another (``protocol.order_ack_timeout`` above
``protocol.maximum_order_ack_delay``, TLS half set up, a listener off loopback without
tokens or TLS, two listeners on one port) raises ``ConfigError(key, message)``.
"""

from __future__ import annotations

import ipaddress

from openmsmq.config.sections import Config
from openmsmq.errors import ConfigError

__all__ = ["check_consistency"]


def check_consistency(c: Config) -> None:
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
