"""A scripted HTTP/1.1 backend for tests: the test reads what arrived and writes the answer.

Only tests import this (like `h2client`). Each connection the proxy opens is handed to the test
(`arrived`), which waits for the bytes it expects (`until`) and writes whatever response it
wants, whole or in pieces, when it wants: what a test of the proxy's relaying needs to control.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import cast

__all__ = ["Scripted", "scripted"]


class Scripted(asyncio.Protocol):
    """An HTTP/1.1 backend connection the test answers itself: what came, and a way back."""

    def __init__(self, arrived: asyncio.Queue[Scripted], made: list[Scripted]) -> None:
        self.arrived = arrived
        made.append(self)
        self.received = bytearray()
        self.grew = asyncio.Event()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.arrived.put_nowait(self)

    def data_received(self, data: bytes) -> None:
        self.received += data
        self.grew.set()

    async def until(self, marker: bytes, count: int = 1) -> bytes:
        async with asyncio.timeout(10):
            while self.received.count(marker) < count:
                self.grew.clear()
                await self.grew.wait()
        return bytes(self.received)

    def write(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)


@contextlib.asynccontextmanager
async def scripted() -> AsyncIterator[tuple[int, asyncio.Queue[Scripted]]]:
    """A backend on loopback: (its port, the connections as they are made)."""
    arrived: asyncio.Queue[Scripted] = asyncio.Queue()
    made: list[Scripted] = []
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Scripted(arrived, made), "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1], arrived
    finally:
        server.close()
        for conn in made:
            if conn.transport is not None:
                conn.transport.abort()
        await server.wait_closed()
