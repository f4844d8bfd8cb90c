"""Upstream keep-alive pool bookkeeping: pure, no I/O, returning what the caller must close.

Where it sits: `connector.PooledConnector` owns one `Pool` per worker and does the I/O (connecting,
closing) the pool's answers call for. Why this shape (httpcore's pool): per-origin FIFO of idle
connections with their last-used time, total and per-origin limits that count connections being
opened, FIFO waiters handed a released connection directly. Nothing here awaits, so nothing can
slip in between acquiring a connection and registering it, and every rule is testable with
plain values and an explicit `now`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

C = TypeVar("C")  # a connection
W = TypeVar("W")  # a waiter (whatever the caller uses to resume a request)
Origin = Hashable


@dataclass(frozen=True, slots=True)
class Limits:
    max_total: int = 4096  # connections open or opening, every origin together
    max_per_origin: int = 1024
    max_idle_per_origin: int = 1024
    idle_timeout: float = 60.0  # seconds an idle connection is kept


@dataclass(slots=True)
class _Origin(Generic[C, W]):
    idle: deque[tuple[C, float]] = field(default_factory=deque)  # (connection, last used)
    active: int = 0  # connections open or opening, idle ones included
    waiters: deque[W] = field(default_factory=deque)


@dataclass(frozen=True, slots=True)
class Acquired(Generic[C]):
    connection: C | None  # an idle connection to use now
    open_new: bool  # no idle one: the caller opens one (already counted) ...
    expired: tuple[C, ...] = ()  # idle connections found stale: close them
    # ... and when neither, the caller was queued as a waiter


@dataclass(frozen=True, slots=True)
class Released(Generic[C, W]):
    handed_to: W | None  # the waiter that now owns the connection
    close: tuple[C, ...] = ()  # connections to close (evicted, or the released one itself)


class Pool(Generic[C, W]):
    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self._origins: dict[Origin, _Origin[C, W]] = {}
        self._total = 0

    @property
    def total(self) -> int:
        return self._total

    def idle_count(self, origin: Origin) -> int:
        entry = self._origins.get(origin)
        return len(entry.idle) if entry else 0

    def acquire(self, origin: Origin, waiter: W, now: float) -> Acquired[C]:
        """An idle connection, permission to open one, or a place in the origin's queue."""
        entry = self._origins.get(origin)
        if entry is None:
            entry = self._origins[origin] = _Origin()
        expired: list[C] = []
        deadline = now - self.limits.idle_timeout
        while entry.idle:
            connection, last_used = entry.idle.pop()  # most recently used: warmest
            if last_used >= deadline:
                return Acquired(connection, False, tuple(expired))
            expired.append(connection)
            self._forget(entry)
        if self._may_open(entry):
            entry.active += 1
            self._total += 1
            return Acquired(None, True, tuple(expired))
        entry.waiters.append(waiter)
        return Acquired(None, False, tuple(expired))

    def take_idle(self, origin: Origin, now: float) -> C | None:
        """The warmest idle connection when it is still fresh, else None (then `acquire`).

        The request path's common case, without building an `Acquired`: the same answer
        `acquire` gives when the warmest idle connection is fresh.
        """
        entry = self._origins.get(origin)
        if entry is None or not entry.idle:
            return None
        connection, last_used = entry.idle[-1]
        if last_used < now - self.limits.idle_timeout:
            return None
        entry.idle.pop()
        return connection

    def _may_open(self, entry: _Origin[C, W]) -> bool:
        limits = self.limits
        return entry.active < limits.max_per_origin and self._total < limits.max_total

    def release(self, origin: Origin, connection: C, now: float) -> Released[C, W]:
        """A connection back from a finished exchange, still good for another request."""
        entry = self._origins[origin]
        if entry.waiters:
            return Released(entry.waiters.popleft())
        if len(entry.idle) >= self.limits.max_idle_per_origin:
            self._forget(entry)
            return Released(None, (connection,))
        entry.idle.append((connection, now))
        return Released(None)

    def park(self, origin: Origin, connection: C, now: float) -> bool:
        """`release`'s common case: idle again when nobody waits and there is room. False: call
        `release` for the other answers."""
        entry = self._origins.get(origin)
        if entry is None or entry.waiters or len(entry.idle) >= self.limits.max_idle_per_origin:
            return False
        entry.idle.append((connection, now))
        return True

    def discard(self, origin: Origin, connection: C | None = None) -> W | None:
        """A connection (or a connect attempt) that is gone; a waiter that may now open one.

        When a waiter is returned its new connection is already counted: the caller opens it.
        """
        entry = self._origins.get(origin)
        if entry is None:
            return None
        if connection is not None:
            for i, (idle, _) in enumerate(entry.idle):
                if idle is connection:
                    del entry.idle[i]
                    break
        self._forget(entry)
        if entry.waiters and self._may_open(entry):
            entry.active += 1
            self._total += 1
            return entry.waiters.popleft()
        if not entry.active and not entry.waiters:
            del self._origins[origin]
        return None

    def cancel(self, origin: Origin, waiter: W) -> None:
        """A waiter that gave up (its request timed out or its client left)."""
        entry = self._origins.get(origin)
        if entry is not None and waiter in entry.waiters:
            entry.waiters.remove(waiter)

    def expire(self, now: float) -> list[C]:
        """Idle connections past the idle timeout: forgotten here, for the caller to close."""
        deadline = now - self.limits.idle_timeout
        stale: list[C] = []
        for entry in self._origins.values():
            while entry.idle and entry.idle[0][1] < deadline:
                stale.append(entry.idle.popleft()[0])
                self._forget(entry)
        return stale

    def drain_idle(self) -> list[C]:
        """Every idle connection (shutdown): forgotten here, for the caller to close."""
        idle: list[C] = []
        for entry in self._origins.values():
            while entry.idle:
                idle.append(entry.idle.popleft()[0])
                self._forget(entry)
        return idle

    def _forget(self, entry: _Origin[C, W]) -> None:
        entry.active -= 1
        self._total -= 1
