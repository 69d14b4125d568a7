"""Ctrl-C that never cuts a receive between taking messages and showing them.

A receive removes messages (at once, or at the commit of its transaction); the command
must have printed them before. :class:`InterruptGuard` lets SIGINT through as
:exc:`KeyboardInterrupt` anywhere but inside :meth:`InterruptGuard.critical` (receive,
print and flush, commit): there it is noted and raised when the section ends, so a
batch is either printed and removed, or left in its queue. The ``openmsmq`` group turns
the :exc:`KeyboardInterrupt` into exit status 130, as shells expect of Ctrl-C.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

__all__ = ["InterruptGuard"]


class InterruptGuard:
    """``with InterruptGuard() as guard: ... with guard.critical(): ...``.

    Installs its SIGINT handler for the ``with`` block (main thread only; elsewhere
    signals cannot be handled and the guard does nothing) and restores the one before.
    """

    def __init__(self) -> None:
        self._previous: Any = None
        self._installed = False
        self._critical = False
        #: True once a SIGINT came during a critical section (raised at its end).
        self.pending = False

    def __enter__(self) -> InterruptGuard:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(signal.SIGINT, self._on_sigint)
            self._installed = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._installed:
            signal.signal(signal.SIGINT, self._previous)
            self._installed = False

    def _on_sigint(self, _signum: int, _frame: FrameType | None) -> None:
        if self._critical:
            self.pending = True  # every later Ctrl-C too: the section is short and must end
            return
        raise KeyboardInterrupt

    @contextlib.contextmanager
    def critical(self) -> Iterator[None]:
        """A section SIGINT does not cut; a SIGINT that came meanwhile is raised at its end
        (unless the section itself raised)."""
        self._critical = True
        try:
            yield
        finally:
            self._critical = False
        if self.pending:
            raise KeyboardInterrupt
