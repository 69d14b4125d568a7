"""The operators' web console served by ``openmsmq serve`` (docs/console.md).

:func:`start_console` assembles it from the served queue manager, its configuration and
metrics and the transfer's hooks (:func:`transfer_hooks`); :class:`ConsoleServer` runs
it on serve's event loop. Pages: :mod:`.pages`; actions: :mod:`.actions`; sign-in and
CSRF: :mod:`.sessions`; live updates: :mod:`.live`; QM access: :mod:`.backend`.
"""

from openmsmq.console.server import ConsoleServer, start_console, transfer_hooks

__all__ = ["ConsoleServer", "start_console", "transfer_hooks"]
