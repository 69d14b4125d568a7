"""Runs a :class:`~openmsmq.ha.lease.LeaseCore` under asyncio.

The driver executes the core's actions: lease requests against the store's lease
(:class:`LeaseStore`, implemented by :class:`openmsmq.store.lease.PgLease`), each bounded
by the core's ``request_timeout``; :class:`~openmsmq.ha.lease.StartServing` and
:class:`~openmsmq.ha.lease.StopServing` through the :class:`ServingNode` it was given
(the composition root: open the queue manager fenced with the epoch, bind, resume; or stop
everything). It fires the core's timer with ``loop.call_at`` semantics (a monotonic clock)
and feeds every result back. A write that the store's fence refused reaches it through
:meth:`LeaseDriver.fenced`.

A start is never interrupted half-way: a stop that comes while the node is starting waits
for the start to end, then stops it (the store is fenced meanwhile: nothing of a lost term
commits either way).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

from openmsmq.errors import OpenMSMQError
from openmsmq.ha.lease import (
    AcquireLease,
    LeaseAction,
    LeaseCore,
    LeaseSeen,
    ReadLease,
    ReleaseLease,
    RenewLease,
    Role,
    StartServing,
    StopServing,
)

__all__ = ["LeaseDriver", "LeaseRowLike", "LeaseStatus", "LeaseStore", "ServingNode"]

log = logging.getLogger("openmsmq.ha")


class LeaseRowLike(Protocol):
    """The lease row as the store returns it."""

    @property
    def epoch(self) -> int: ...
    @property
    def holder(self) -> str | None: ...
    @property
    def remaining(self) -> float: ...


class LeaseStore(Protocol):
    """The lease statements (see :mod:`openmsmq.store.lease`)."""

    async def read(self) -> LeaseRowLike: ...
    async def acquire(
        self, expected_epoch: int, new_epoch: int, holder: str, duration: float
    ) -> LeaseRowLike | None: ...
    async def renew(self, epoch: int, holder: str, duration: float) -> LeaseRowLike | None: ...
    async def release(self, epoch: int, holder: str) -> bool: ...
    async def close(self) -> None: ...


class ServingNode(Protocol):
    """What the driver starts and stops: the serving part of one process."""

    async def start_serving(self, epoch: int) -> None:
        """Open the queue manager fenced with ``epoch``, restore its sequences, bind, resume."""
        ...

    async def stop_serving(self, epoch: int, reason: str) -> None:
        """Stop serving at once (abort remote reads and pending receives, close listeners and
        the queue manager); return when nothing of this term can commit any more."""
        ...


@dataclass(frozen=True)
class LeaseStatus:
    """What ``openmsmq status`` and the readiness endpoint show."""

    role: str
    epoch: int | None
    #: Wall-clock time (seconds since 1970) of the last change of role.
    since: float | None
    holder: str
    last_step_down: str | None


def _seen(row: LeaseRowLike) -> LeaseSeen:
    return LeaseSeen(row.epoch, row.holder, row.remaining)


class LeaseDriver:
    """Drives ``core`` with ``lease`` and ``node`` until :meth:`shutdown` has finished."""

    def __init__(
        self,
        core: LeaseCore,
        lease: LeaseStore,
        node: ServingNode,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.core = core
        self.lease = lease
        self.node = node
        self.clock = clock
        self.wall = wall
        self._wake: asyncio.Event | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._starting: asyncio.Task[None] | None = None
        self._since_wall: float | None = None
        self._role_seen: tuple[Role, int | None] | None = None
        #: Listeners told of every change of role or epoch (e.g. the runtime document).
        self.on_change: list[Callable[[LeaseStatus], None]] = []

    # ------------------------------------------------------------------ public

    @property
    def status(self) -> LeaseStatus:
        """The role, the epoch, since when (wall clock)."""
        role = self.core.role
        return LeaseStatus(
            role=role.value,
            epoch=self.core.epoch,
            since=self._since_wall,
            holder=self.core.holder,
            last_step_down=self.core.last_step_down,
        )

    @property
    def active(self) -> bool:
        """This node serves (and may commit now)."""
        return self.core.fencing_epoch(self.clock()) is not None

    async def run(self) -> None:
        """Run until :meth:`shutdown` finished (the lease released if it was held)."""
        self._wake = asyncio.Event()
        self._apply(self.core.start(self.clock()))
        try:
            while not self.core.finished:
                timer = self.core.get_timer()
                timeout = None if timer is None else max(0.0, timer - self.clock())
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), timeout)
                self._wake.clear()
                now = self.clock()
                if timer is not None and now >= timer:
                    self._apply(self.core.handle_timer(now))
            for task in list(self._tasks):
                await task
        finally:
            for task in list(self._tasks):
                task.cancel()
            await self.lease.close()

    def shutdown(self, reason: str = "shut down") -> None:
        """Step down (releasing the lease) and end :meth:`run` (call on the loop)."""
        self._apply(self.core.shutdown(self.clock(), reason))

    def give_up(self, epoch: int, reason: str) -> None:
        """The node stopped serving ``epoch`` by itself (its term failed): step down and
        release the lease so that another node takes over (call on the loop)."""
        self._apply(self.core.give_up(self.clock(), epoch, reason))

    def fenced(self, epoch: int) -> None:
        """A write of ``epoch`` was refused by the store's fence (call on the loop)."""
        self._apply(self.core.handle_fenced(self.clock(), epoch))

    # ------------------------------------------------------------------ internals

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()
        seen = (self.core.role, self.core.epoch)
        if seen != self._role_seen:
            if seen[0] is not (self._role_seen or (None, None))[0]:
                self._since_wall = self.wall()
            self._role_seen = seen
            status = self.status
            log.info("lease: %s (epoch %s)", status.role, status.epoch)
            for listener in list(self.on_change):
                listener(status)

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _apply(self, actions: list[LeaseAction]) -> None:
        for action in actions:
            if isinstance(action, StartServing):
                self._starting = self._spawn(self._start(action.epoch))
            elif isinstance(action, StopServing):
                log.warning("lease: stepping down from epoch %d: %s", action.epoch, action.reason)
                self._spawn(self._stop(action.epoch, action.reason))
            else:
                self._spawn(self._request(action))
        self._poke()

    async def _start(self, epoch: int) -> None:
        log.info("lease: active with epoch %d: starting to serve", epoch)
        try:
            await self.node.start_serving(epoch)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            # Cannot serve (the store refused, the address stays taken...): give the
            # lease up so that another node can try.
            log.error("lease: cannot serve with epoch %d: %s", epoch, exc)
            self._apply(self.core.give_up(self.clock(), epoch, f"cannot serve: {exc}"))

    async def _stop(self, epoch: int, reason: str) -> None:
        starting = self._starting
        if starting is not None and not starting.done():
            await asyncio.wait([starting])
        try:
            await self.node.stop_serving(epoch, reason)
        except Exception:
            log.exception("lease: stopping epoch %d failed", epoch)
        self._apply(self.core.handle_stopped(self.clock()))

    async def _request(self, action: LeaseAction) -> None:
        rid = action.request_id  # type: ignore[union-attr]
        timeout = max(0.0, self.core.config.request_timeout - 0.05)
        core = self.core
        try:
            if isinstance(action, ReadLease):
                row = await asyncio.wait_for(self.lease.read(), timeout)
                actions = core.handle_seen(self.clock(), rid, _seen(row))
            elif isinstance(action, AcquireLease):
                got = await asyncio.wait_for(
                    self.lease.acquire(
                        action.expected_epoch, action.new_epoch, action.holder, action.duration
                    ),
                    timeout,
                )
                now = self.clock()
                actions = (
                    core.handle_granted(now, rid) if got is None else core.handle_seen(now, rid, _seen(got))
                )
            elif isinstance(action, RenewLease):
                got = await asyncio.wait_for(
                    self.lease.renew(action.epoch, action.holder, action.duration), timeout
                )
                now = self.clock()
                actions = (
                    core.handle_renewed(now, rid)
                    if got is None
                    else core.handle_refused(now, rid, _seen(got))
                )
            else:
                assert isinstance(action, ReleaseLease)
                await asyncio.wait_for(self.lease.release(action.epoch, action.holder), timeout)
                actions = core.handle_released(self.clock(), rid)
        except (TimeoutError, OpenMSMQError, OSError) as exc:
            log.warning("lease: %s failed: %s", type(action).__name__, exc or type(exc).__name__)
            if isinstance(exc, TimeoutError):
                await self.lease.close()  # the statement may still run: start afresh
            actions = core.handle_failure(self.clock(), rid)
        self._apply(actions)
