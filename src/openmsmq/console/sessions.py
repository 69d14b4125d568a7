"""Who is signed in to the console: sessions bound to a remote-read token, and their CSRF tokens.

A browser signs in with a token of ``remote.tokens_file`` (:mod:`openmsmq.remote.auth`);
the console keeps a session for it (a random id in an ``HttpOnly``, ``SameSite=Strict``
cookie, ``Secure`` under HTTPS) holding the token's :class:`Principal` and a CSRF token
that every form posts back. The token itself is never stored in the browser. A session
unused for ``console.session_timeout`` ends; so do all of them when ``serve`` stops (they
live in memory). Without a tokens file (loopback only, as for the remote-read service)
every browser is the anonymous principal with every permission, and still gets a session
and a CSRF token.
"""

from __future__ import annotations

import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from openmsmq.remote.auth import ALLOW_ALL, Principal, TokenTable

__all__ = ["COOKIE", "LOGIN_COOKIE", "MAX_SESSIONS", "ConsoleSession", "Sessions", "same_secret"]

#: The session cookie.
COOKIE = "openmsmq_console"
#: The double-submit cookie of the login form (there is no session to hold its CSRF token yet).
LOGIN_COOKIE = "openmsmq_console_login"
#: Sessions held at once; the least recently used one ends beyond it (a browser that signs
#: in again and again must not grow the table without bound).
MAX_SESSIONS = 1000


def same_secret(a: str | None, b: str | None) -> bool:
    """Constant-time equality of two secrets; False when either is missing."""
    return bool(a) and bool(b) and hmac.compare_digest(str(a).encode(), str(b).encode())


@dataclass(slots=True)
class ConsoleSession:
    """One signed-in browser."""

    sid: str
    principal: Principal
    csrf: str
    last_used: float
    #: One message for the next page (what the last action did).
    flash: list[tuple[str, str]] = field(default_factory=list)


class Sessions:
    """Session id → :class:`ConsoleSession`, for one console."""

    def __init__(
        self, tokens: TokenTable | None, timeout: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.tokens = tokens
        self.timeout = timeout
        self.clock = clock
        self._by_id: dict[str, ConsoleSession] = {}

    @property
    def open_access(self) -> bool:
        """No tokens file: every browser may do everything (loopback only)."""
        return self.tokens is None

    def login(self, token: str | None) -> ConsoleSession | None:
        """A new session for ``token``; None when the token is unknown. Without a tokens
        file any sign-in is the anonymous principal."""
        if self.tokens is None:
            principal: Principal | None = ALLOW_ALL
        else:
            principal = self.tokens.authenticate((token or "").strip())
        if principal is None:
            return None
        return self._new(principal)

    def _new(self, principal: Principal) -> ConsoleSession:
        now = self.clock()
        self._expire(now)
        while len(self._by_id) >= MAX_SESSIONS:
            oldest = min(self._by_id.values(), key=lambda s: s.last_used)
            del self._by_id[oldest.sid]
        s = ConsoleSession(secrets.token_urlsafe(32), principal, secrets.token_urlsafe(32), now)
        self._by_id[s.sid] = s
        return s

    def get(self, sid: str | None) -> ConsoleSession | None:
        """The live session of cookie value ``sid`` (its idle time restarts), or None."""
        if not sid:
            return None
        now = self.clock()
        s = self._by_id.get(sid)
        if s is None:
            return None
        if now - s.last_used > self.timeout:
            del self._by_id[sid]
            return None
        s.last_used = now
        return s

    def logout(self, sid: str | None) -> None:
        """End a session (unknown ids are ignored)."""
        if sid:
            self._by_id.pop(sid, None)

    def _expire(self, now: float) -> None:
        for sid in [k for k, s in self._by_id.items() if now - s.last_used > self.timeout]:
            del self._by_id[sid]

    def __len__(self) -> int:
        return len(self._by_id)
