"""Secrets out of errors and logs: the one redaction every message that may carry one goes through.

Where a secret can reach text: a target URL with a bearer token in its query
(``grpc://host:2105?token=...``) or a password in its user part
(``grpc://user:pw@host``), an ``authorization: Bearer ...`` header, a ``token=...`` or
``password=...`` setting echoed in an error. :func:`redact` replaces each such value with
``***`` and leaves the rest as it was, so the text still says what went wrong and where::

    >>> redact("'grpc://mq1:2105?token=s3cr3t&tls=1': no remote-read service")
    "'grpc://mq1:2105?token=***&tls=1': no remote-read service"

It is applied to every log line (:class:`openmsmq.observability.logging.StructuredFormatter`),
to every error the command line prints, and by the client to the target it names in its own
errors and keeps as ``Connection.target``.

Only the standard library is imported here, so every layer may use it.
"""

from __future__ import annotations

import re

__all__ = ["SECRET_NAMES", "redact"]

#: Names whose values are secrets wherever they appear as ``name=value`` or ``name: value``.
SECRET_NAMES = ("token", "password", "passwd", "secret", "api_key", "apikey", "access_key", "private_key")

#: What replaces a secret.
_MASK = "***"

_NAMES = "|".join(SECRET_NAMES)
#: ``token=value`` in a query string or a setting (also ``"token": "value"`` of JSON);
#: the value ends at ``&``, whitespace, a quote, ``,`` ``;`` or a bracket.
_ASSIGNED = re.compile(rf"""(?i)(\b(?:[a-z0-9_]*_)?(?:{_NAMES})\b["']?\s*[=:]\s*["']?)([^&\s"',;)\]}}]+)""")
#: ``Bearer value`` (an authorization header, or its metadata): a value of token characters
#: (RFC 6750 b64token), at least 8 as every token of a tokens file, so that prose such as
#: "bearer token" stays readable.
_BEARER = re.compile(r"(?i)(\bbearer\s+)([A-Za-z0-9\-._~+/]{8,}=*)")
#: ``scheme://user:password@host``.
_USERINFO = re.compile(r"(?i)(\b[a-z][a-z0-9+.\-]*://[^/\s:@\"']*:)([^@/\s\"']+)(@)")
#: Cheap test before the expressions run: none of these, no secret.
_MARKERS = (*SECRET_NAMES, "bearer", "://")


def redact(text: str) -> str:
    """``text`` with every secret value replaced by ``***`` (see the module docstring)."""
    lowered = text.lower()
    if not any(m in lowered for m in _MARKERS):
        return text
    text = _ASSIGNED.sub(lambda m: m.group(1) + _MASK, text)
    text = _BEARER.sub(lambda m: m.group(1) + _MASK, text)
    return _USERINFO.sub(lambda m: m.group(1) + _MASK + m.group(3), text)
