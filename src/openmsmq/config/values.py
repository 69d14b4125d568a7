"""Values of the configuration: durations, sizes, hosts, next hops, static routes.

Each raw value (TOML value, flag value, or ``OPENMSMQ_*`` string) is checked and converted
here by :func:`convert` for the loader in :mod:`openmsmq.config.loading`; a bad value raises
``ConfigError(key, message)`` naming the dotted key and what was expected.

Only the standard library and :mod:`openmsmq.errors` are imported here.
"""

from __future__ import annotations

import ipaddress
import math
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from openmsmq.errors import ConfigError, quoted

__all__ = ["Route", "convert", "fmt_number", "norm_host", "parse_duration", "parse_size"]

_DURATION_RE = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*(ms|s|m|h|d)?\s*", re.ASCII)
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}
_SIZE_RE = re.compile(r"\s*([0-9]+)\s*(B|KiB|MiB|GiB)?\s*", re.ASCII)
_SIZE_UNITS = {"B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, None: 1}
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


@dataclass(frozen=True)
class Route:
    """A static route (``[mqqb.routes]``): messages for ``destination`` go to ``next_hop``.

    ``destination`` is a QM address (IP or host name) as it appears in format names;
    ``next_hop`` is ``host[:port]`` of the QM that relays them (port default 1801).
    """

    destination: str
    next_hop: str


def parse_duration(value: object, key: str = "duration") -> float:
    """Seconds from a number or a string like ``"500ms"``, ``"5s"``, ``"2m"``, ``"1h"``, ``"90d"``,
    ``"1.5"``."""
    if isinstance(value, bool):
        raise ConfigError(
            key, f'expected a duration (seconds or "500ms"/"5s"/"2m"/"1h"/"1d"), got {quoted(value)}'
        )
    if isinstance(value, (int, float)):
        seconds = float(value)
    elif isinstance(value, str) and (m := _DURATION_RE.fullmatch(value)):
        seconds = float(m.group(1)) * _DURATION_UNITS[m.group(2)]
    else:
        raise ConfigError(
            key, f'expected a duration (seconds or "500ms"/"5s"/"2m"/"1h"/"1d"), got {quoted(value)}'
        )
    if not math.isfinite(seconds) or seconds < 0:
        raise ConfigError(key, f"expected a finite, non-negative duration, got {quoted(value)}")
    return seconds


def parse_size(value: object, key: str = "size") -> int:
    """Bytes from an integer or a string like ``"4MiB"``, ``"512KiB"``, ``"1GiB"``, ``"100B"``."""
    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    elif isinstance(value, str) and (m := _SIZE_RE.fullmatch(value)):
        size = int(m.group(1)) * _SIZE_UNITS[m.group(2)]
    else:
        raise ConfigError(key, f'expected a size in bytes or "512KiB"/"4MiB"/"1GiB", got {quoted(value)}')
    if size < 0:
        raise ConfigError(key, f"expected a non-negative size, got {quoted(value)}")
    return size


def norm_host(host: str) -> str:
    """A host in one spelling for comparisons: an IP address normalised, a name lower-cased."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host.lower()


def _check_host(key: str, host: str, what: str) -> None:
    if not host or len(host) > 256 or any(not 0x21 <= ord(c) <= 0x7E or c in "\\,=" for c in host):
        raise ConfigError(key, f"{what} {quoted(host)} is not an IP address or host name")


def _check_hop(key: str, hop: str) -> str:
    """``host[:port]`` / ``[v6]:port`` / bare IPv6; returns the hop as written."""
    host, port = hop, ""
    if hop.startswith("["):
        end = hop.find("]")
        rest = hop[end + 1 :]
        if end < 0 or (rest and not rest.startswith(":")):
            raise ConfigError(key, f"next hop {quoted(hop)}: expected [ipv6]:port")
        host, port = hop[1:end], rest[1:]
    elif hop.count(":") == 1:
        host, port = hop.split(":")
    _check_host(key, host, "next hop")
    if port and not (port.isascii() and port.isdigit() and 1 <= int(port) <= 65535):
        raise ConfigError(key, f"next hop {quoted(hop)}: port must be 1..65535")
    return hop


def convert(key: str, kind: str, meta: Mapping[str, Any], value: object, from_text: bool) -> Any:
    """Check and convert one raw value (TOML value, flag value, or env string when ``from_text``)."""

    def want(what: str) -> ConfigError:
        return ConfigError(key, f"expected {what}, got {quoted(value)}")

    if kind == "int":
        if from_text and isinstance(value, str):
            if not re.fullmatch(r"\s*[+-]?[0-9]+\s*", value):
                raise want("an integer")
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise want("an integer")
        result: Any = value
    elif kind == "bool":
        if isinstance(value, str) and from_text:
            if value.strip().lower() not in _TRUE | _FALSE:
                raise want("a boolean (true/false, 1/0, yes/no, on/off)")
            value = value.strip().lower() in _TRUE
        if not isinstance(value, bool):
            raise want("a boolean (true or false)")
        result = value
    elif kind == "duration":
        result = parse_duration(value, key)
    elif kind == "size":
        result = parse_size(value, key)
    elif kind == "quota":
        if isinstance(value, str) and value.strip().lower() == "unlimited":
            return None
        result = parse_size(value, key)
    elif kind in ("str", "dsn", "name", "choice", "ip", "ip_or_empty", "path", "path_or_empty"):
        if isinstance(value, Path) and kind.startswith("path"):
            value = str(value)
        if not isinstance(value, str):
            raise want("a string")
        result = _convert_text(key, kind, meta, value)
    elif kind == "networks":
        items: object = value
        if isinstance(value, str) and from_text:
            items = [v.strip() for v in value.split(",") if v.strip()]
        if not isinstance(items, (list, tuple)) or not all(isinstance(v, str) for v in items):
            raise want('a list of networks like ["127.0.0.0/8", "::1/128"]')
        nets = []
        for item in items:
            try:
                nets.append(str(ipaddress.ip_network(item, strict=True)))
            except ValueError as exc:
                raise ConfigError(key, f"bad network {quoted(item)}: {exc}") from None
        result = tuple(nets)
    elif kind in ("peers", "hops"):
        result = _convert_peers(key, kind, value, from_text)
    elif kind == "routes":
        result = _convert_routes(key, value, from_text)
    else:  # pragma: no cover - declaration error
        raise AssertionError(kind)
    lo, hi = meta.get("lo"), meta.get("hi")
    if isinstance(result, (int, float)) and not isinstance(result, bool):
        if lo is not None and result < lo:
            raise ConfigError(key, f"must be >= {fmt_number(lo)}, got {quoted(value)}")
        if hi is not None and result > hi:
            raise ConfigError(key, f"must be <= {fmt_number(hi)}, got {quoted(value)}")
    return result


def _convert_text(key: str, kind: str, meta: Mapping[str, Any], value: str) -> Any:
    if kind == "choice":
        choices: tuple[str, ...] = meta["choices"]
        for choice in choices:
            if value.strip().lower() == choice.lower():
                return choice
        raise ConfigError(key, f"expected one of {', '.join(choices)}, got {quoted(value)}")
    if kind in ("ip", "ip_or_empty"):
        if kind == "ip_or_empty" and not value:
            return ""
        try:
            return str(ipaddress.ip_address(value.strip()))
        except ValueError:
            raise ConfigError(
                key, f"expected an IP address like 127.0.0.1 or ::1, got {quoted(value)}"
            ) from None
    if kind == "name":
        if value:
            _check_host(key, value, "computer name")
        return value
    if kind == "path_or_empty":
        return Path(value) if value else None
    if kind == "path":
        if not value:
            raise ConfigError(key, "expected a path, got an empty string")
        return Path(value)
    return value


def _convert_peers(key: str, kind: str, value: object, from_text: bool) -> tuple[str, ...]:
    """A list of peer entries. ``peers`` (mqqb.allowed_peers): CIDR networks, and
    ``{GUID}=CIDR`` pins. ``hops``: host names, IP addresses, CIDR networks and ``{GUID}``."""
    items: object = value
    if isinstance(value, str) and from_text:
        items = [v.strip() for v in value.split(",") if v.strip()]
    if not isinstance(items, (list, tuple)) or not all(isinstance(v, str) for v in items):
        raise ConfigError(
            key, f'expected a list like ["10.0.0.0/8", "{{QM GUID}}=10.0.0.5/32"], got {value!r}'
        )
    out: list[str] = []
    for item in items:
        guid, eq, rest = item.partition("=")
        if kind == "peers" and eq:
            if not _is_guid(guid.strip()):
                raise ConfigError(key, f"bad pin {item!r}: expected {{QM GUID}}=CIDR")
            out.append(f"{{{uuid.UUID(guid.strip()[1:-1])}}}={_network(key, rest.strip(), strict=False)}")
        elif item.startswith("{") and kind == "hops":
            if not _is_guid(item):
                raise ConfigError(key, f"bad entry {item!r}: expected a QM GUID like {{5b1f7a52-…}}")
            out.append(f"{{{uuid.UUID(item[1:-1])}}}")
        elif kind == "peers" or "/" in item:
            out.append(_network(key, item, strict=kind == "peers"))
        else:
            _check_host(key, item, "peer")
            out.append(norm_host(item))
    return tuple(out)


def _network(key: str, item: str, *, strict: bool) -> str:
    try:
        return str(ipaddress.ip_network(item, strict=strict))
    except ValueError as exc:
        raise ConfigError(key, f"bad network {item!r}: {exc}") from None


def _convert_routes(key: str, value: object, from_text: bool) -> tuple[Route, ...]:
    if isinstance(value, str) and from_text:
        pairs: list[tuple[object, object]] = []
        for item in filter(None, (v.strip() for v in value.split(","))):
            left, eq, right = item.partition("=")
            if not eq:
                raise ConfigError(key, f"expected destination=next_hop, got {quoted(item)}")
            pairs.append((left.strip(), right.strip()))
    elif isinstance(value, Mapping):
        pairs = list(value.items())
    elif isinstance(value, (tuple, list)) and all(isinstance(r, Route) for r in value):
        pairs = [(r.destination, r.next_hop) for r in value]
    else:
        raise ConfigError(key, f'expected a table of destination = "next_hop", got {quoted(value)}')
    routes: list[Route] = []
    seen: set[str] = set()
    for dest, hop in pairs:
        if not isinstance(dest, str) or not isinstance(hop, str):
            raise ConfigError(key, f"route {quoted(dest)} = {quoted(hop)}: both must be strings")
        _check_host(key, dest, "destination")
        if dest.startswith("{") and not _is_guid(dest):
            raise ConfigError(key, f"destination {quoted(dest)}: expected a QM GUID like {{5b1f7a52-…}}")
        if norm_host(dest) in seen:
            raise ConfigError(key, f"duplicate route for {quoted(dest)}")
        seen.add(norm_host(dest))
        routes.append(Route(dest, _check_hop(key, hop)))
    return tuple(routes)


def _is_guid(text: str) -> bool:
    """``{xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx}`` (a QM GUID destination of a route)."""
    if not (text.startswith("{") and text.endswith("}")):
        return False
    try:
        uuid.UUID(text[1:-1])
    except ValueError:
        return False
    return len(text) == 38


def fmt_number(x: float) -> str:
    """A bound or value as written in messages and TOML: ``5`` not ``5.0``."""
    return str(int(x)) if float(x).is_integer() else repr(float(x))
