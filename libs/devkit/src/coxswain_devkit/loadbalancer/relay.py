"""Relays for one Service port: what kube-proxy and a cloud load balancer do, in user space.

A `TcpRelay` accepts on the load balancer's address and port and splices each connection to one
ready endpoint, taken in rotation from `Backends`; an endpoint that refuses (its pod went away
before the EndpointSlice said so) is skipped for the next, and a client is closed only when
every endpoint refused. Half-closes pass through, and each direction's flow control pauses the
other side's reads, so a slow reader holds back its writer rather than the relay's memory. A
`UdpRelay` keeps one flow per client address, each a connected socket to one endpoint, so
replies come back to the right client from the address it sent to; a flow ends after
`idle` seconds without traffic or when the endpoint answers with ICMP unreachable, and the
client's next datagram opens a new one to the next endpoint.
The benchmarks go through these relays too: each is a pair of `asyncio.Protocol`s with one
`write` per chunk received and nothing allocated per chunk besides what asyncio does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any, cast

__all__ = ["Address", "Backends", "TcpRelay", "UdpRelay"]

log = logging.getLogger("coxswain_devkit.loadbalancer")

Address = tuple[str, int]
CONNECT_SECONDS = 3.0
UDP_IDLE_SECONDS = 30.0


class Backends:
    """The ready endpoints of one Service port; each new connection or flow starts at the next."""

    __slots__ = ("_addresses", "_next")

    def __init__(self) -> None:
        self._addresses: tuple[Address, ...] = ()
        self._next = 0

    def set(self, addresses: Sequence[Address]) -> None:
        self._addresses = tuple(addresses)

    def get(self) -> tuple[Address, ...]:
        return self._addresses

    def order(self) -> list[Address]:
        """Every endpoint once, starting with the next in rotation."""
        addresses = self._addresses
        if not addresses:
            return []
        start = self._next % len(addresses)
        self._next = start + 1
        return [*addresses[start:], *addresses[:start]]


class _Side(asyncio.Protocol):
    """One end of a spliced TCP connection; `peer` is the other end."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.peer: _Side | None = None
        self.eof = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio.Transport; both have its methods.
        self.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.write(data)

    def eof_received(self) -> bool:
        self.eof = True
        peer = self.peer
        if peer is None or peer.transport is None or peer.eof:
            self.close()
            return False
        if peer.transport.can_write_eof():
            peer.transport.write_eof()
        return True  # keep our write side open for the answer

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self.peer is not None:
            self.peer.close()

    def pause_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.resume_reading()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()
        if self.peer is not None and self.peer.transport is not None:
            self.peer.transport.close()


class _Client(_Side):
    """The client's connection to the load balancer: reads wait until an endpoint is connected.

    Reading is paused at once; what arrives regardless (uvloop starts reading only after
    `connection_made` returns, undoing the pause) is held and sent first once connected.
    """

    def __init__(self, relay: TcpRelay) -> None:
        super().__init__()
        self._relay = relay
        self._early: list[bytes] = []

    def data_received(self, data: bytes) -> None:
        if self.peer is None:
            self._early.append(data)
            if self.transport is not None:
                self.transport.pause_reading()
            return
        super().data_received(data)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        assert self.transport is not None
        self.transport.pause_reading()
        self._relay.clients.add(self)
        task = asyncio.get_running_loop().create_task(self._connect())
        self._relay.connecting.add(task)
        task.add_done_callback(self._relay.connecting.discard)

    def connection_lost(self, exc: Exception | None) -> None:
        self._relay.clients.discard(self)
        super().connection_lost(exc)

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        for host, port in self._relay.backends.order():
            try:
                async with asyncio.timeout(CONNECT_SECONDS):  # not wait_for: see kube.Changes
                    wire, upstream = await loop.create_connection(_Side, host, port)
            except (OSError, TimeoutError):
                continue
            if self.transport is None:  # the client left meanwhile
                upstream.close()
                return
            self.peer, upstream.peer = upstream, self
            for data in self._early:
                wire.write(data)
            self._early.clear()
            self.transport.resume_reading()
            return
        if self.transport is not None:
            self.transport.abort()  # no endpoint: a reset, as a load balancer without backends


class TcpRelay:
    def __init__(self, backends: Backends) -> None:
        self.backends = backends
        self.clients: set[_Client] = set()
        self.connecting: set[asyncio.Task[None]] = set()
        self._server: asyncio.Server | None = None

    async def start(self, host: str, port: int) -> int:
        """Listen on (host, port); the port bound (port 0: the one the OS chose)."""
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Client(self), host, port, reuse_address=True
        )
        return int(self._server.sockets[0].getsockname()[1])

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self.connecting):
            task.cancel()
        for client in list(self.clients):
            client.close()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None


class _Flow(asyncio.DatagramProtocol):
    """One client's datagrams to one endpoint, and the endpoint's replies back to the client."""

    def __init__(self, relay: UdpRelay, client: Address) -> None:
        self._relay = relay
        self._client = client
        self.transport: asyncio.DatagramTransport | None = None
        self.pending: list[bytes] = []
        self.last = asyncio.get_running_loop().time()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # asyncio's own datagram transports do not subclass DatagramTransport (3.11).
        self.transport = transport = cast(asyncio.DatagramTransport, transport)
        for data in self.pending:
            transport.sendto(data)
        self.pending.clear()

    def send(self, data: bytes) -> None:
        self.last = asyncio.get_running_loop().time()
        if self.transport is None:
            self.pending.append(data)
        else:
            self.transport.sendto(data)

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.last = asyncio.get_running_loop().time()
        self._relay.reply(data, self._client)

    def error_received(self, exc: Exception) -> None:
        self._relay.drop(self._client)  # ICMP unreachable: the next datagram picks another


class _Listener(asyncio.DatagramProtocol):
    def __init__(self, relay: UdpRelay) -> None:
        self._relay = relay

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self._relay.forward(data, (str(addr[0]), int(addr[1])))


class UdpRelay:
    def __init__(self, backends: Backends, *, idle: float = UDP_IDLE_SECONDS) -> None:
        self.backends = backends
        self._idle = idle
        self._flows: dict[Address, _Flow] = {}
        self._transport: asyncio.DatagramTransport | None = None
        self._sweeper: asyncio.Task[None] | None = None
        self._opening: set[asyncio.Task[Any]] = set()

    async def start(self, host: str, port: int) -> int:
        """Listen on (host, port); the port bound (port 0: the one the OS chose)."""
        loop = asyncio.get_running_loop()
        self._transport, _ = await loop.create_datagram_endpoint(
            lambda: _Listener(self), local_addr=(host, port)
        )
        self._sweeper = loop.create_task(self._sweep())
        return int(self._transport.get_extra_info("sockname")[1])

    def forward(self, data: bytes, client: Address) -> None:
        flow = self._flows.get(client)
        if flow is None:
            backends = self.backends.order()
            if not backends:
                return  # no endpoint: dropped, as a load balancer without backends would
            flow = self._flows[client] = _Flow(self, client)
            opening = asyncio.get_running_loop().create_datagram_endpoint(
                lambda: flow, remote_addr=backends[0]
            )
            task = asyncio.ensure_future(opening)
            self._opening.add(task)
            task.add_done_callback(lambda done: self._opened(done, client))
        flow.send(data)

    def _opened(self, task: asyncio.Future[Any], client: Address) -> None:
        self._opening.discard(task)
        if task.cancelled() or task.exception() is not None:
            self._flows.pop(client, None)

    def reply(self, data: bytes, client: Address) -> None:
        if self._transport is not None:
            self._transport.sendto(data, client)

    def drop(self, client: Address) -> None:
        flow = self._flows.pop(client, None)
        if flow is not None and flow.transport is not None:
            flow.transport.close()

    async def _sweep(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(max(self._idle / 4, 0.05))
            for client, flow in list(self._flows.items()):
                if loop.time() - flow.last > self._idle:
                    self.drop(client)

    async def close(self) -> None:
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        for task in list(self._opening):
            task.cancel()
        for client in list(self._flows):
            self.drop(client)
        if self._transport is not None:
            self._transport.close()
            self._transport = None
