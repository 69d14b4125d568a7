"""Starting a command that a test will interrupt with Ctrl-C (SIGINT)."""

from __future__ import annotations

import signal


def ctrl_c_reaches_it() -> None:
    """``preexec_fn`` of such a command: SIGINT at its default disposition and not blocked
    in the child, as from a terminal. Both are inherited across exec, and a test process
    that started other servers and threads (or was itself started in the background, with
    SIGINT ignored) must not hand a blocked or ignored SIGINT to the command under test."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
