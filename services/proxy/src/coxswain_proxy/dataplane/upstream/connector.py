"""The pool's I/O: upstream connections handed out per origin, opened as the pool allows.

Where it sits: one `PooledConnector` per worker (`core.Dataplane` makes it; `Runtime.connector`
holds it as a `contracts.Connector`). A request cycle asks it for a connection to an origin for
each attempt (`acquire`) and gives it back when the exchange is over (`release`); a connection
that closes tells it (`forget`). The bookkeeping is `pool.Pool`, pure; this does what its
answers call for: opening connections (an `h2c.H2cConnection` for an origin marked h2c, else an
`connection.UpstreamConnection`), closing the ones it evicts, handing a released connection to
the next waiter. Nothing is awaited between acquiring a connection and registering it
(conventions, item 5).

A waiter that gives up (`cancel`: its attempt ran out of `timeouts.backendRequest`, its request
out of time, its client left) while a connection is being opened for it is never told how that
ended: the connection goes to the pool (the next waiter, or idle) instead. A request cycle is
the waiter of each of its attempts, so an outcome meant for an abandoned attempt must not reach
the next one.
"""

from __future__ import annotations

import asyncio

from coxswain_proxy.dataplane.contracts import Upstream, Waiter
from coxswain_proxy.dataplane.http.outbox import Outbox
from coxswain_proxy.dataplane.runtime import Config
from coxswain_proxy.dataplane.upstream.connection import UpstreamConnection
from coxswain_proxy.dataplane.upstream.h2c import H2cConnection
from coxswain_proxy.dataplane.upstream.picker import Origin, is_h2c, tls_arguments
from coxswain_proxy.dataplane.upstream.pool import Pool
from coxswain_proxy.dataplane.upstream.shell import UpstreamShell


class PooledConnector:
    """Hands out pooled connections per origin, opening new ones as the pool allows."""

    def __init__(self, config: Config, outbox: Outbox) -> None:
        self.config = config
        self.outbox = outbox  # the worker's: upstream connections write through it
        self.pool: Pool[Upstream, Waiter] = Pool(config.pool)
        self._loop = asyncio.get_running_loop()
        # Connections being opened, each with the waiter it is for (None: it gave up).
        self._opening: dict[asyncio.Task[None], Waiter | None] = {}

    def acquire(self, origin: Origin, waiter: Waiter, now: float | None = None) -> Upstream | None:
        """A connection now, or None: `waiter` hears back through `connected`/`connect_failed`.

        `now`: the loop's time when the caller has it already.
        """
        if now is None:
            now = self._loop.time()
        idle = self.pool.take_idle(origin, now)
        if idle is not None:
            return idle
        got = self.pool.acquire(origin, waiter, now)
        for stale in got.expired:
            stale.close()
        if got.open_new:
            self._open(origin, waiter)
        return got.connection

    def cancel(self, origin: Origin, waiter: Waiter) -> None:
        self.pool.cancel(origin, waiter)
        opening = self._opening
        for task, wanted in opening.items():
            if wanted is waiter:
                opening[task] = None

    def release(self, connection: Upstream) -> None:
        connection.cycle = None
        now = self._loop.time()
        if self.pool.park(connection.origin, connection, now):
            return
        released = self.pool.release(connection.origin, connection, now)
        for extra in released.close:
            extra.discard()
        if released.handed_to is not None:
            released.handed_to.connected(connection)

    def forget(self, connection: Upstream) -> None:
        """A connection that closed: the pool lets a waiter open a new one in its place."""
        waiter = self.pool.discard(connection.origin, connection)
        if waiter is not None:
            self._open(connection.origin, waiter)

    def _open(self, origin: Origin, waiter: Waiter) -> None:
        task = self._loop.create_task(self._connect(origin))
        self._opening[task] = waiter
        task.add_done_callback(self._opened)

    def _opened(self, task: asyncio.Task[None]) -> None:
        self._opening.pop(task, None)

    def _waiter(self) -> Waiter | None:
        """The waiter the connection this task opened is for, if it still wants one."""
        task = asyncio.current_task()
        return self._opening.pop(task, None) if task is not None else None

    async def _connect(self, origin: Origin) -> None:
        limit = self.config.max_upstream_header_bytes
        connection: UpstreamShell
        if is_h2c(origin):
            connection = H2cConnection(self, origin, limit)
        else:
            connection = UpstreamConnection(self, origin, limit, self.outbox)
        try:
            async with asyncio.timeout(self.config.connect_timeout):
                await self._loop.create_connection(
                    lambda: connection, origin[0], origin[1], **tls_arguments(origin)
                )
        except (OSError, TimeoutError) as exc:
            replacement = self.pool.discard(origin)
            if replacement is not None:
                self._open(origin, replacement)
            waiter = self._waiter()
            if waiter is not None:
                waiter.connect_failed(exc)
            return
        waiter = self._waiter()
        if waiter is None:
            if not connection.closed:  # (closed: the pool forgot it already)
                self.release(connection)  # its waiter gave up: another may use it
            return
        waiter.connected(connection)

    def sweep(self) -> None:
        for stale in self.pool.expire(self._loop.time()):
            stale.discard()

    async def close(self) -> None:
        for task in list(self._opening):
            task.cancel()
        await asyncio.gather(*self._opening, return_exceptions=True)
        for idle in self.pool.drain_idle():
            idle.discard()


__all__ = ["PooledConnector"]
