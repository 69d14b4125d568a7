"""The lease of an active/standby queue manager and its fencing epoch (sans-I/O).

Several ``openmsmq serve`` processes of one queue manager share one PostgreSQL store;
exactly one of them may serve. They elect it through one row of the store (``qm_lease``:
epoch, holder, expiry on the database's clock), never by talking to each other:

* a **standby** reads the lease every ``poll_interval``; once it has expired (or was
  released) it asks to take it over with a compare-and-set from the epoch it saw to the
  next one (:meth:`LeaseCore.next_epoch`). The database grants it to at most one
  contender: the epoch is the fencing token of that term;
* the **active** renews every ``renew_interval``. A grant or a renewal sent at local
  time *t* holds the lease at least until *t* + ``duration`` on any clock that runs at
  the database's rate, since the database stamps the expiry no earlier than it received
  the request. The node stops committing at *t* + ``duration`` - ``margin``
  (:meth:`LeaseCore.lease_deadline`): before the lease can be taken by another, with the
  margin covering clock-rate differences and the time the stop takes to reach the store;
* every write transaction of the store checks the epoch first (``FOR SHARE`` on the
  lease row) and fails with a fencing error if it changed: a node that was frozen past
  its deadline (a pause, a partition) and wakes up with a commit under way can never
  commit it. The local deadline keeps a healthy node from running into the fence; the
  fence makes the guarantee independent of clocks and pauses.

:class:`LeaseCore` decides; a driver executes its :data:`LeaseAction` values (the SQL is
in the store, the timers in asyncio or the simulator) and feeds the results back. It never
reads a clock: every input takes ``now`` (a monotonic local time in seconds), and its one
timer is :meth:`LeaseCore.get_timer` / :meth:`LeaseCore.handle_timer`. At most one
request is outstanding at a time; a request that has neither answered nor failed after
``request_timeout`` counts as failed and its late reply is ignored.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = [
    "AcquireLease",
    "LeaseAction",
    "LeaseConfig",
    "LeaseCore",
    "LeaseSeen",
    "ReadLease",
    "ReleaseLease",
    "RenewLease",
    "Role",
    "StartServing",
    "StopServing",
]


class Role(enum.Enum):
    """What a node of a highly available queue manager is doing."""

    #: Not serving; reads the lease and waits for it to expire.
    STANDBY = "standby"
    #: Not serving; a takeover request is outstanding.
    ACQUIRING = "acquiring"
    #: Holds the lease: serves and commits with its epoch.
    ACTIVE = "active"
    #: Lost (or is giving up) the lease: commits nothing more, waits for the queue manager
    #: to close, then releases the lease if it may still hold it.
    STEPPING_DOWN = "stepping-down"


@dataclass(frozen=True, slots=True)
class LeaseConfig:
    """Timing of the lease (seconds).

    A dead active is replaced after at most ``duration`` + ``poll_interval`` plus the
    time the new active takes to open the queue manager. The active tolerates a database
    that does not answer for ``duration`` - ``margin`` - ``renew_interval`` before it
    steps down.
    """

    #: How long a grant or a renewal holds the lease, on the database's clock.
    duration: float = 3.0
    #: The active renews this long after its last successful grant or renewal was sent.
    renew_interval: float = 0.5
    #: The active stops committing this long before the lease it holds can expire: it
    #: covers a local clock that runs slower than the database's and the time the stop
    #: takes to reach the store.
    margin: float = 0.75
    #: A standby reads the lease this often.
    poll_interval: float = 0.25
    #: After a failed request, the next one goes out this much later.
    retry_interval: float = 0.25
    #: A request that has not answered after this long counts as failed.
    request_timeout: float = 1.0

    def __post_init__(self) -> None:
        for name in ("duration", "renew_interval", "margin", "poll_interval", "retry_interval"):
            if not getattr(self, name) > 0:
                raise ValueError(f"ha.lease {name} must be positive")
        if not self.margin < self.duration:
            raise ValueError("ha.lease margin must be shorter than the lease duration")
        if not self.renew_interval < self.duration - self.margin:
            raise ValueError("ha.lease renew_interval must be shorter than duration - margin")
        if not 0 < self.request_timeout <= self.duration:
            raise ValueError("ha.lease request_timeout must be positive and at most the duration")


@dataclass(frozen=True, slots=True)
class LeaseSeen:
    """The lease row as the database showed it: its epoch, its holder (None: free) and the
    seconds left until it expires on the database's clock (zero or less: expired)."""

    epoch: int
    holder: str | None
    remaining: float

    @property
    def free(self) -> bool:
        """Nobody holds the lease: it was released or has expired."""
        return self.holder is None or self.remaining <= 0


# ----------------------------------------------------------------------------- actions


@dataclass(frozen=True, slots=True)
class ReadLease:
    """Read the lease row; answer with :meth:`LeaseCore.handle_seen`."""

    request_id: int


@dataclass(frozen=True, slots=True)
class AcquireLease:
    """Take the lease if its epoch is still ``expected_epoch`` and it is free: set
    ``new_epoch``, this node as holder and an expiry ``duration`` from the database's now,
    in one statement. Answer with :meth:`LeaseCore.handle_granted`, or with
    :meth:`LeaseCore.handle_seen` and the row as it is when it was not free."""

    request_id: int
    expected_epoch: int
    new_epoch: int
    holder: str
    duration: float


@dataclass(frozen=True, slots=True)
class RenewLease:
    """Move the expiry to ``duration`` from the database's now if the lease still has
    ``epoch`` and ``holder`` and has not expired. Answer with
    :meth:`LeaseCore.handle_renewed` or :meth:`LeaseCore.handle_refused`."""

    request_id: int
    epoch: int
    holder: str
    duration: float


@dataclass(frozen=True, slots=True)
class ReleaseLease:
    """Free the lease (holder cleared, expired now) if it still has ``epoch`` and
    ``holder``: a standby may take over at once. Answer with
    :meth:`LeaseCore.handle_released` (whatever the row was)."""

    request_id: int
    epoch: int
    holder: str


@dataclass(frozen=True, slots=True)
class StartServing:
    """Open the queue manager with fencing epoch ``epoch``, restore its sequences from the
    store, bind the listeners."""

    epoch: int


@dataclass(frozen=True, slots=True)
class StopServing:
    """Stop at once: no commit from now on, close the listeners, abort remote reads and
    pending receives, close the queue manager; then call :meth:`LeaseCore.handle_stopped`."""

    epoch: int
    reason: str


LeaseAction = ReadLease | AcquireLease | RenewLease | ReleaseLease | StartServing | StopServing


@dataclass(slots=True)
class _Request:
    request_id: int
    sent_at: float
    kind: type


class LeaseCore:
    """The election and fencing state of one node (see the module docstring).

    ``holder`` names this node's incarnation in the lease row; it must be unique per
    process start (a restarted node is a new contender and never mistakes the lease of
    its former self for its own).
    """

    def __init__(self, config: LeaseConfig, holder: str) -> None:
        if not holder:
            raise ValueError("the lease holder name must not be empty")
        self.config = config
        self.holder = holder
        self.role = Role.STANDBY
        #: The epoch this node holds (active, stepping down) or last saw (standby).
        self.epoch: int | None = None
        #: Local time of the last change of role.
        self.since: float | None = None
        #: The node was shut down: it takes no lease any more.
        self.closed = False
        #: Why the node last stepped down.
        self.last_step_down: str | None = None
        self._started = False
        self._next_id = 0
        self._request: _Request | None = None
        self._next_request_at: float | None = None
        #: Local time until which this node may commit (active only).
        self._safe_until = float("-inf")
        self._release_epoch: int | None = None
        #: The epoch an outstanding AcquireLease proposes.
        self._pending_epoch: int | None = None
        self._stop_confirmed = True
        #: How long a node that stepped down waits before it reads the lease again.
        self._pause_after_stop = config.poll_interval

    # ----------------------------------------------------------------- policy

    def lease_deadline(self, sent_at: float, received_at: float) -> float:
        """Local time until which a grant or renewal sent at ``sent_at`` and answered at
        ``received_at`` lets this node commit. It counts from the sending: the database
        stamped the expiry after it received the request, so no later than the request
        left (the answer's delay says nothing about when that was)."""
        del received_at
        return sent_at + self.config.duration - self.config.margin

    def next_epoch(self, seen_epoch: int) -> int:
        """The epoch a takeover proposes after the lease was seen with ``seen_epoch``:
        every term has its own, so a fenced write of a former active is told apart."""
        return seen_epoch + 1

    # ----------------------------------------------------------------- queries

    def fencing_epoch(self, now: float) -> int | None:
        """The epoch to commit with, or None when this node must not commit (not active,
        or its lease may no longer be valid)."""
        if self.role is Role.ACTIVE and now < self._safe_until:
            return self.epoch
        return None

    @property
    def safe_until(self) -> float | None:
        """Local time until which the active may commit (None when not active)."""
        return self._safe_until if self.role is Role.ACTIVE else None

    def get_timer(self) -> float | None:
        """When :meth:`handle_timer` must next be called (None: only on an input)."""
        times: list[float] = []
        if self._request is not None:
            times.append(self._request.sent_at + self.config.request_timeout)
        elif self._next_request_at is not None:
            times.append(self._next_request_at)
        if self.role is Role.ACTIVE:
            times.append(self._safe_until)
        return min(times) if times else None

    # ----------------------------------------------------------------- inputs

    def start(self, now: float) -> list[LeaseAction]:
        """Begin as a standby: the first read of the lease goes out at once."""
        if self._started:
            return []
        self._started = True
        self.since = now
        self._next_request_at = now
        return self.handle_timer(now)

    def handle_timer(self, now: float) -> list[LeaseAction]:
        """Expire a request that did not answer, step down at the deadline, send the next
        request that is due."""
        actions: list[LeaseAction] = []
        req = self._request
        if req is not None and now >= req.sent_at + self.config.request_timeout:
            self._request = None
            self._after_failure(now)
        if self.role is Role.ACTIVE and now >= self._safe_until:
            actions += self._step_down(now, "the lease could not be renewed in time", release=True)
        actions += self._send_due(now)
        return actions

    def handle_seen(self, now: float, request_id: int, seen: LeaseSeen) -> list[LeaseAction]:
        """The answer to a :class:`ReadLease`, or to an :class:`AcquireLease` that was
        refused (``seen`` is the row as it is)."""
        req = self._take(request_id)
        if req is None or self.closed:
            return self._send_due(now)
        if self.role in (Role.STANDBY, Role.ACQUIRING):
            self.epoch = seen.epoch
            if seen.free and req.kind is ReadLease:
                return self._acquire(now, seen.epoch)
            self._set_role(Role.STANDBY, now)
            self._next_request_at = now + self.config.poll_interval
        return self._send_due(now)

    def handle_granted(self, now: float, request_id: int) -> list[LeaseAction]:
        """The :class:`AcquireLease` succeeded: this node is active with the new epoch."""
        req = self._take(request_id)
        if req is None or self.role is not Role.ACQUIRING:
            return self._send_due(now)
        assert self._pending_epoch is not None
        epoch, self._pending_epoch = self._pending_epoch, None
        if self.closed:
            # Shut down while the request was out: never serve, hand the lease back.
            self._release_epoch = epoch
            self._set_role(Role.STANDBY, now)
            return self._send_due(now)
        self.epoch = epoch
        self._safe_until = self.lease_deadline(req.sent_at, now)
        self._set_role(Role.ACTIVE, now)
        self._next_request_at = req.sent_at + self.config.renew_interval
        self._stop_confirmed = False
        return [StartServing(epoch), *self._send_due(now)]

    def handle_renewed(self, now: float, request_id: int) -> list[LeaseAction]:
        """The :class:`RenewLease` succeeded."""
        req = self._take(request_id)
        if req is None or self.role is not Role.ACTIVE:
            return self._send_due(now)
        self._safe_until = max(self._safe_until, self.lease_deadline(req.sent_at, now))
        self._next_request_at = req.sent_at + self.config.renew_interval
        return self._send_due(now)

    def handle_refused(self, now: float, request_id: int, seen: LeaseSeen | None) -> list[LeaseAction]:
        """The :class:`RenewLease` found the lease expired, released or taken: stop."""
        req = self._take(request_id)
        if req is None or self.role is not Role.ACTIVE:
            return self._send_due(now)
        if seen is not None and seen.epoch != self.epoch:
            reason = f"the lease was taken over (epoch {seen.epoch}, holder {seen.holder})"
        else:
            reason = "the lease expired before it was renewed"
        return self._step_down(now, reason, release=False)

    def handle_released(self, now: float, request_id: int) -> list[LeaseAction]:
        """The :class:`ReleaseLease` ran (whatever it found)."""
        self._take(request_id)
        return self._send_due(now)

    def handle_failure(self, now: float, request_id: int) -> list[LeaseAction]:
        """The request failed or its outcome is unknown (connection lost, timeout)."""
        if self._take(request_id) is None:
            return self._send_due(now)
        self._after_failure(now)
        return self.handle_timer(now)

    def handle_fenced(self, now: float, epoch: int) -> list[LeaseAction]:
        """A write transaction of ``epoch`` was refused by the store's fence: the lease
        belongs to a newer term."""
        if self.role is Role.ACTIVE and self.epoch == epoch:
            return self._step_down(now, f"a write was fenced off (epoch {epoch} is no longer current)", False)
        return []

    def give_up(self, now: float, epoch: int, reason: str) -> list[LeaseAction]:
        """The node cannot serve with ``epoch`` (it failed to start): step down and release
        the lease so that another node can take over at once."""
        if self.role is Role.ACTIVE and self.epoch == epoch:
            # Leave the next try to the other nodes for a lease's length.
            self._pause_after_stop = self.config.duration
            return self._step_down(now, reason, release=True)
        return []

    def handle_stopped(self, now: float) -> list[LeaseAction]:
        """The queue manager stopped after :class:`StopServing`: back to standby."""
        if self.role is not Role.STEPPING_DOWN or self._stop_confirmed:
            return []
        self._stop_confirmed = True
        self._set_role(Role.STANDBY, now)
        pause, self._pause_after_stop = self._pause_after_stop, self.config.poll_interval
        self._next_request_at = None if self.closed else now + pause
        return self._send_due(now)

    def shutdown(self, now: float, reason: str = "shut down") -> list[LeaseAction]:
        """Give up: an active steps down and releases its lease; nobody acquires again."""
        if self.closed:
            return []
        self.closed = True
        self._next_request_at = None
        if self.role is Role.ACTIVE:
            return self._step_down(now, reason, release=True)
        return self._send_due(now)

    @property
    def finished(self) -> bool:
        """Shut down, stopped, and nothing left to send or wait for."""
        return (
            self.closed
            and self.role is Role.STANDBY
            and self._request is None
            and self._release_epoch is None
        )

    # ----------------------------------------------------------------- internals

    def _set_role(self, role: Role, now: float) -> None:
        if role is not self.role:
            self.role = role
            self.since = now

    def _take(self, request_id: int) -> _Request | None:
        req = self._request
        if req is None or req.request_id != request_id:
            return None  # a late answer of a request that timed out
        self._request = None
        return req

    def _send(self, now: float, kind: type) -> int:
        self._next_id += 1
        self._request = _Request(self._next_id, now, kind)
        return self._next_id

    def _acquire(self, now: float, seen_epoch: int) -> list[LeaseAction]:
        new_epoch = self.next_epoch(seen_epoch)
        self._pending_epoch = new_epoch
        self._set_role(Role.ACQUIRING, now)
        rid = self._send(now, AcquireLease)
        return [AcquireLease(rid, seen_epoch, new_epoch, self.holder, self.config.duration)]

    def _after_failure(self, now: float) -> None:
        if self.role is Role.ACQUIRING:
            # The outcome is unknown: the grant may have happened. A later read shows
            # this holder with a lease it does not know it holds; it waits for that lease
            # to expire and takes the next epoch (no guessing which request won).
            self._pending_epoch = None
            self._set_role(Role.STANDBY, now)
        if self.role is Role.ACTIVE or (self.role is Role.STANDBY and not self.closed):
            self._next_request_at = now + self.config.retry_interval

    def _step_down(self, now: float, reason: str, release: bool) -> list[LeaseAction]:
        assert self.epoch is not None
        epoch = self.epoch
        self._safe_until = float("-inf")
        self.last_step_down = reason
        self._set_role(Role.STEPPING_DOWN, now)
        self._next_request_at = None
        if release:
            self._release_epoch = epoch
        return [StopServing(epoch, reason)]

    def _send_due(self, now: float) -> list[LeaseAction]:
        if self._request is not None:
            return []
        if self._release_epoch is not None and self.role is not Role.STEPPING_DOWN:
            # Released only once the queue manager is closed: until then it may commit.
            epoch, self._release_epoch = self._release_epoch, None
            rid = self._send(now, ReleaseLease)
            return [ReleaseLease(rid, epoch, self.holder)]
        at = self._next_request_at
        if at is None or now < at:
            return []
        self._next_request_at = None
        if self.role is Role.ACTIVE:
            assert self.epoch is not None
            rid = self._send(now, RenewLease)
            return [RenewLease(rid, self.epoch, self.holder, self.config.duration)]
        if self.role is Role.STANDBY and not self.closed:
            rid = self._send(now, ReadLease)
            return [ReadLease(rid)]
        return []
