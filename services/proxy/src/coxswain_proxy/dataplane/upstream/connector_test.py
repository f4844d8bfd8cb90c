"""The pool's I/O when a waiter gives up: what was being opened for it goes to the pool.

Covers: a connection being opened for a waiter that cancels (its attempt ran out of
`timeouts.backendRequest`, its client left) is never handed to it, nor is a failure to open it
reported to it, so a request cycle, the waiter of each of its attempts, never hears an abandoned
attempt's outcome in a later attempt; the connection is parked idle for the next request. Real
sockets on 127.0.0.1. Leaves out the pure bookkeeping (pool_test) and the request cycle's side
(http/retries_test).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from coxswain_proxy.dataplane.contracts import Upstream
from coxswain_proxy.dataplane.http.outbox import Outbox
from coxswain_proxy.dataplane.runtime import Config
from coxswain_proxy.dataplane.upstream.connector import PooledConnector


class _Waiter:
    def __init__(self) -> None:
        self.connections: list[Upstream] = []
        self.failures: list[Exception] = []

    def told(self) -> int:
        return len(self.connections) + len(self.failures)

    def connected(self, connection: Upstream) -> None:
        self.connections.append(connection)

    def connect_failed(self, exc: Exception) -> None:
        self.failures.append(exc)


@contextlib.asynccontextmanager
async def _connector() -> AsyncIterator[PooledConnector]:
    connector = PooledConnector(Config(), Outbox(asyncio.get_running_loop()))
    try:
        yield connector
    finally:
        await connector.close()


@contextlib.asynccontextmanager
async def _listening() -> AsyncIterator[int]:
    async def hold(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    server = await asyncio.start_server(hold, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


async def _settled(connector: PooledConnector) -> None:
    """Until no connection is being opened any more."""
    async with asyncio.timeout(10):
        await asyncio.gather(*connector._opening)


async def test_a_connection_opened_for_a_waiter_that_gave_up_is_parked() -> None:
    async with _listening() as port, _connector() as connector:
        origin = ("127.0.0.1", port)
        gone, waiting = _Waiter(), _Waiter()
        assert connector.acquire(origin, gone) is None  # being opened for `gone`
        connector.cancel(origin, gone)
        await _settled(connector)
        assert gone.told() == 0
        assert connector.pool.idle_count(origin) == 1
        idle = connector.acquire(origin, waiting)
        assert idle is not None and waiting.told() == 0
        idle.close()


async def test_a_failure_to_open_for_a_waiter_that_gave_up_is_not_reported() -> None:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    async with _connector() as connector:
        origin = ("127.0.0.1", port)
        gone = _Waiter()
        assert connector.acquire(origin, gone) is None
        connector.cancel(origin, gone)
        await _settled(connector)
        assert gone.told() == 0
        assert connector.pool.total == 0  # the failed connect's place is given back


async def test_a_waiter_that_stays_is_told() -> None:
    async with _listening() as port, _connector() as connector:
        origin = ("127.0.0.1", port)
        stays = _Waiter()
        assert connector.acquire(origin, stays) is None
        await _settled(connector)
        assert (len(stays.connections), stays.failures) == (1, [])
        connector.release(stays.connections[0])
