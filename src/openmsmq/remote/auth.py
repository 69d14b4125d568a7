"""Who may call the remote-read service: bearer tokens and per-queue permissions.

MS-MQRR authenticates with NTLM or Kerberos (MS-MQRR 1.7, 2.1); the gRPC service uses a
bearer token in the ``authorization`` metadata instead. A tokens file has one token per
line, optionally followed by rules ``PATTERN=PERMS`` (queue path pattern, ``*`` and ``?``
wildcards, case-insensitive; PERMS a comma list of ``peek``, ``receive``, ``send``,
``admin`` or ``all``)::

    # token                 rules (none = every permission on every queue)
    3f9a...e1               *=all
    reader-7c2d             private$\\orders=peek,receive  private$\\audit=peek
    writer-55aa             private$\\*=send

A token without rules may do everything. RECEIVE implies PEEK. ``admin`` is needed to
create and delete queues. Without a tokens file every caller is allowed everything —
the configuration refuses that unless the service listens on a loopback address.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass
from enum import IntFlag
from pathlib import Path

from openmsmq.errors import ConfigError, quoted

__all__ = ["ALLOW_ALL", "Permission", "Principal", "TokenTable", "load_tokens", "parse_tokens"]


class Permission(IntFlag):
    """What a principal may do on a queue."""

    NONE = 0
    #: Peek (PEEK_ACCESS, MS-MQRR 2.2.1).
    PEEK = 0x1
    #: Receive and purge (RECEIVE_ACCESS); implies PEEK.
    RECEIVE = 0x2
    #: Send.
    SEND = 0x4
    #: Create and delete queues.
    ADMIN = 0x8
    ALL = PEEK | RECEIVE | SEND | ADMIN


_NAMES = {
    "peek": Permission.PEEK,
    "receive": Permission.RECEIVE | Permission.PEEK,
    "send": Permission.SEND,
    "admin": Permission.ADMIN,
    "all": Permission.ALL,
}


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller: a name (for logs) and its rules, first match wins."""

    name: str
    rules: tuple[tuple[str, Permission], ...] = (("*", Permission.ALL),)

    def permissions(self, queue: str) -> Permission:
        """The permissions on ``queue`` (a canonical queue name such as ``private$\\orders``)."""
        key = queue.lower()
        for pattern, perms in self.rules:
            if fnmatch.fnmatchcase(key, pattern):
                return perms
        return Permission.NONE

    def allows(self, queue: str, needed: Permission) -> bool:
        """True when every permission in ``needed`` is granted on ``queue``."""
        return (self.permissions(queue) & needed) == needed

    @property
    def is_admin(self) -> bool:
        """True when some rule grants ADMIN (queue creation and deletion)."""
        return any(p & Permission.ADMIN for _, p in self.rules)


#: The principal of every caller when no tokens file is configured (loopback only).
ALLOW_ALL = Principal("anonymous")


class TokenTable:
    """Token → :class:`Principal`, compared in constant time."""

    def __init__(self, principals: dict[str, Principal]) -> None:
        self._by_token = dict(principals)

    def __len__(self) -> int:
        return len(self._by_token)

    def authenticate(self, token: str | None) -> Principal | None:
        """The principal of ``token``, or None when it is missing or unknown."""
        if not token:
            return None
        # Imported here: loading OpenSSL's hashes is a large share of a CLI command's
        # start-up, and only a serving process authenticates.
        import hmac

        found: Principal | None = None
        encoded = token.encode()
        for known, principal in self._by_token.items():
            if hmac.compare_digest(known.encode(), encoded):
                found = principal
        return found


def _parse_rule(text: str, where: str) -> tuple[str, Permission]:
    pattern, sep, perms_text = text.rpartition("=")
    if not sep or not pattern or not perms_text:
        raise ConfigError("remote.tokens_file", f"{where}: expected PATTERN=PERMS, got {quoted(text)}")
    perms = Permission.NONE
    for word in perms_text.lower().split(","):
        p = _NAMES.get(word.strip())
        if p is None:
            raise ConfigError(
                "remote.tokens_file",
                f"{where}: unknown permission {quoted(word)} (peek, receive, send, admin, all)",
            )
        perms |= p
    return pattern.lower(), perms


def parse_tokens(text: str, source: str = "<tokens>") -> TokenTable:
    """Parse the tokens-file format (module docstring); ConfigError names the line."""
    principals: dict[str, Principal] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        token, *rule_words = line.split()
        where = f"{source}:{number}"
        if len(token) < 8:
            raise ConfigError("remote.tokens_file", f"{where}: a token has at least 8 characters")
        if token in principals:
            raise ConfigError("remote.tokens_file", f"{where}: duplicate token")
        rules = tuple(_parse_rule(w, where) for w in rule_words) or ((("*", Permission.ALL),))
        principals[token] = Principal(f"token#{number}", rules)
    if not principals:
        raise ConfigError("remote.tokens_file", f"{source}: no tokens")
    return TokenTable(principals)


def load_tokens(path: str | Path) -> TokenTable:
    """Read and parse a tokens file."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError("remote.tokens_file", f"{p}: {exc.strerror or exc}") from exc
    return parse_tokens(text, str(p))
