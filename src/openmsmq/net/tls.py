"""MS-MQQB over TLS between openmsmq queue managers (mutual TLS, a certificate per QM).

MS-MQQB has no authentication of its own: a peer's QM GUID is a claim. Over TLS each QM
presents a certificate signed by a CA both trust (``mqqb.tls_ca``) that names its QM GUID
(the subject's CN, or a URI subjectAltName ``urn:uuid:<guid>``); the transfer accepts a
session only when the GUID the peer claims in the MS-MQQB handshake is the one its
certificate names (docs/security.md). Host names are not checked: the GUID is the identity.
Windows peers speak plain MS-MQQB on port 1801; TLS is for links between openmsmq QMs
that cross networks nobody vouches for.
"""

from __future__ import annotations

import ipaddress
import ssl
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

__all__ = ["certified_qm", "client_context", "peer_matcher", "server_context"]


def _context(purpose: int, cert: Path, key: Path, ca: Path) -> ssl.SSLContext:
    ctx = ssl.SSLContext(purpose)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(cert), str(key))
    ctx.load_verify_locations(str(ca))
    if purpose == ssl.PROTOCOL_TLS_CLIENT:
        ctx.check_hostname = False  # the QM GUID in the certificate is checked instead
    ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def server_context(cert: Path, key: Path, ca: Path) -> ssl.SSLContext:
    """The TLS listener's context: presents ``cert``, requires a client certificate
    signed by ``ca``."""
    return _context(ssl.PROTOCOL_TLS_SERVER, cert, key, ca)


def client_context(cert: Path, key: Path, ca: Path) -> ssl.SSLContext:
    """The connectors' context: presents ``cert``, requires a server certificate signed by
    ``ca`` (its GUID, not its host name, is checked)."""
    return _context(ssl.PROTOCOL_TLS_CLIENT, cert, key, ca)


def certified_qm(peercert: dict[str, Any] | None) -> uuid.UUID | None:
    """The QM GUID a verified peer certificate (``SSLObject.getpeercert()``) names: a URI
    subjectAltName ``urn:uuid:<guid>``, else the subject's commonName (with or without
    braces); None when it names none."""
    if not peercert:
        return None
    for kind, value in peercert.get("subjectAltName", ()):
        if kind == "URI" and isinstance(value, str) and value.lower().startswith("urn:uuid:"):
            try:
                return uuid.UUID(value[9:])
            except ValueError:
                return None
    for rdn in peercert.get("subject", ()):
        for name, value in rdn:
            if name == "commonName" and isinstance(value, str):
                try:
                    return uuid.UUID(value.strip("{}"))
                except ValueError:
                    return None
    return None


def peer_matcher(entries: Iterable[str]) -> Callable[[str], bool]:
    """A predicate over a host name or IP address: in one of the CIDR networks or equal to
    one of the hosts of ``entries`` (``mqqb.tls_peers``)."""
    nets = []
    hosts = set()
    for entry in entries:
        try:
            nets.append(ipaddress.ip_network(entry, strict=False))
        except ValueError:
            hosts.add(entry.lower())

    def matches(host: str) -> bool:
        if host.lower() in hosts:
            return True
        try:
            ip = ipaddress.ip_address(host)
        except ValueError:
            return False
        return any(ip in n for n in nets)

    return matches
