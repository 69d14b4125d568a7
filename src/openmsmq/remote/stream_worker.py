"""The remote-read service's event loop and a thread of its own for each step stream.

The service's handlers run on an asyncio loop and hand every call that touches the queue
manager (SQLite, fsync, waits) to a worker thread. A step stream runs its requests one
after the other (the handler awaits each reply before it reads the next request), so
the requests of one stream never need more than one thread at a time. Handing each to
a shared :class:`~concurrent.futures.ThreadPoolExecutor` costs, per request, a
``concurrent.futures.Future`` chained to an asyncio one, the executor's work item and
idle-thread bookkeeping, and a different thread each time. :class:`StreamWorker` keeps
one thread per stream instead: a request is one queue put, and its result one
``call_soon_threadsafe`` back to the loop. The same thread for every request of a
stream also lets the store's group commit recognise a client coming back for the next
batch (its leader waits, bounded, for the threads of the previous batch).

:class:`StreamWorkers` bounds how many such threads exist (a client opening stream
after stream must not create threads without limit); a stream opened beyond the bound
uses the shared pools as before.

:func:`default_event_loop` picks the kind of the service's event loop.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["StreamWorker", "StreamWorkers", "default_event_loop"]

T = TypeVar("T")

_Job = tuple["asyncio.Future[Any]", Callable[..., Any], tuple[Any, ...]]


def _settle(future: asyncio.Future[Any], ok: bool, value: Any) -> None:
    """On the loop: complete ``future`` unless its awaiting handler was cancelled."""
    if future.cancelled():
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


class StreamWorker:
    """One thread running the requests of one stream, in order (see the module docstring).

    :meth:`run` is called on ``loop``; the returned future completes there. :meth:`stop`
    ends the thread once the request it runs (if any) is done.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, name: str, on_exit: Callable[[], None]) -> None:
        self._loop = loop
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._on_exit = on_exit
        self.thread = threading.Thread(target=self._main, name=name, daemon=True)
        self.thread.start()

    def run(self, fn: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """Run ``fn(*args)`` in the stream's thread; its result (or exception) on the loop."""
        future: asyncio.Future[T] = self._loop.create_future()
        self._jobs.put((future, fn, args))
        return future

    def stop(self) -> None:
        self._jobs.put(None)

    def _main(self) -> None:
        try:
            while True:
                job = self._jobs.get()
                if job is None:
                    return
                future, fn, args = job
                try:
                    value, ok = fn(*args), True
                except BaseException as exc:  # handed to the awaiting handler, as an executor does
                    value, ok = exc, False
                try:
                    self._loop.call_soon_threadsafe(_settle, future, ok, value)
                except RuntimeError:
                    return  # the loop is closed: the server has stopped
        finally:
            self._on_exit()


class StreamWorkers:
    """At most ``limit`` :class:`StreamWorker` threads at once."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._lock = threading.Lock()
        self._live = 0
        #: Threads started so far (tests and metrics).
        self.started = 0

    def open(self, loop: asyncio.AbstractEventLoop) -> StreamWorker | None:
        """A thread for a new stream, or None when ``limit`` are running."""
        with self._lock:
            if self._live >= self.limit:
                return None
            self._live += 1
            self.started += 1
            n = self.started
        return StreamWorker(loop, f"openmsmq-rr-stream-{n}", self._exited)

    def _exited(self) -> None:
        with self._lock:
            self._live -= 1

    @property
    def live(self) -> int:
        with self._lock:
            return self._live


def default_event_loop() -> Callable[[], asyncio.AbstractEventLoop]:
    """uvloop's event loop where it can be imported, else the standard library's.

    Every request of the service passes through its event loop several times (the request
    read, the worker's result handed back, the reply written); uvloop runs that machinery
    in C where the standard loop runs it in Python, a large share of the service's Python
    calls per request of the consumer loop. ``serve`` passes the kind ``qm.event_loop``
    names instead."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop
    return uvloop.new_event_loop
