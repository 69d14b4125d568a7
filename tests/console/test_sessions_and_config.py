"""The console's sessions (expiry, the bound on their number), its configuration rules and
the body preview, without a browser."""

from __future__ import annotations

from pathlib import Path

import pytest

from openmsmq.config import load_config
from openmsmq.console.backend import body_preview
from openmsmq.console.sessions import MAX_SESSIONS, Sessions
from openmsmq.errors import ConfigError
from openmsmq.remote.auth import parse_tokens


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_session_ends_after_its_idle_time_and_unknown_tokens_get_none() -> None:
    clock = Clock()
    sessions = Sessions(parse_tokens("admin-token-1 *=all\nreader-token-1 *=peek\n"), 60, clock)
    assert sessions.login("wrong-token-1") is None and sessions.login("") is None
    s = sessions.login("reader-token-1")
    assert s is not None and not s.principal.is_admin
    clock.now = 59
    assert sessions.get(s.sid) is s  # used: its idle time restarts
    clock.now = 118
    assert sessions.get(s.sid) is s
    clock.now = 179
    assert sessions.get(s.sid) is None  # expired: the browser signs in again
    assert sessions.get("forged") is None


def test_sessions_are_bounded_and_each_has_its_own_csrf_token() -> None:
    clock = Clock()
    sessions = Sessions(parse_tokens("admin-token-1\n"), 3600, clock)
    first = sessions.login("admin-token-1")
    assert first is not None
    for i in range(MAX_SESSIONS + 5):
        clock.now = i + 1
        sessions.login("admin-token-1")
    assert len(sessions) == MAX_SESSIONS
    assert sessions.get(first.sid) is None  # the least recently used went
    a, b = sessions.login("admin-token-1"), sessions.login("admin-token-1")
    assert a is not None and b is not None and a.csrf != b.csrf and a.sid != b.sid


def test_without_a_tokens_file_every_sign_in_is_the_anonymous_admin() -> None:
    s = Sessions(None, 60).login(None)
    assert s is not None and s.principal.is_admin


def test_the_console_off_loopback_needs_tokens_and_https(tmp_path: Path) -> None:
    wide = {"console.enabled": True, "console.listen_address": "0.0.0.0"}
    with pytest.raises(ConfigError) as err:
        load_config(None, {}, wide)
    assert err.value.key == "remote.tokens_file"
    tokens = tmp_path / "tokens"
    tokens.write_text("admin-token-1\n")
    with pytest.raises(ConfigError) as err:
        load_config(None, {}, {**wide, "remote.tokens_file": str(tokens)})
    assert err.value.key == "console.tls_cert"
    ok = load_config(None, {}, {**wide, "remote.tokens_file": str(tokens), "console.allow_plaintext": True})
    assert ok.config.console.enabled
    with pytest.raises(ConfigError):
        load_config(None, {}, {"console.tls_cert": str(tmp_path / "c.pem")})
    with pytest.raises(ConfigError):  # the same port as the metrics endpoint
        load_config(None, {}, {"console.enabled": True, "console.port": 9181})
    assert load_config(None, {}, {}).config.console.port == 9180
    assert not load_config(None, {}, {}).config.console.enabled


def test_body_preview_forms() -> None:
    assert body_preview(b'{"a":1}', "auto") == ("json", '{\n  "a": 1\n}')
    assert body_preview("héllo".encode("utf-16-le"), "auto") == ("text", "héllo")
    form, text = body_preview(b"\x00\x01\xff", "auto")
    assert form == "hex" and text.startswith("00000000  00 01 ff")
    assert body_preview(b"plain", "hex")[1].endswith("plain")
