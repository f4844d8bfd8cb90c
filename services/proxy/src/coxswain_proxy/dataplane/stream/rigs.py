"""Helpers for the stream relays' tests: echo backends and snapshots in a few lines.

Only tests import this. Backends are real servers on 127.0.0.1 port 0: a TCP echo that prefixes
each answer with its own name (so a test can count who answered), a TLS echo doing the same
behind a certificate, a UDP echo, and a port that never answers a SYN.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator, Iterator
from typing import cast

from coxswain_proxy.dataplane.core import Dataplane
from coxswain_routing import (
    Backend,
    Endpoint,
    EndpointSet,
    GatewayListeners,
    Listener,
    ListenerProtocol,
    RouteId,
    StreamMatch,
    StreamRoute,
    TlsMode,
    Transport,
)

TCP_PORT, TLS_PORT, UDP_PORT = 19000, 19443, 19053
KINDS = {
    ListenerProtocol.TCP: "TCPRoute",
    ListenerProtocol.TLS: "TLSRoute",
    ListenerProtocol.UDP: "UDPRoute",
}


def stream_listeners(
    *entries: tuple[int, ListenerProtocol], tls_mode: TlsMode = TlsMode.PASSTHROUGH
) -> GatewayListeners:
    built = tuple(
        Listener(
            name=f"s{i}",
            port=port,
            bind_port=port,
            protocol=protocol,
            tls_mode=tls_mode if protocol is ListenerProtocol.TLS else TlsMode.NONE,
        )
        for i, (port, protocol) in enumerate(entries)
    )
    return GatewayListeners("default", "streams", 1, built)


def endpoint_set(name: str, *ports: int, udp: bool = False) -> EndpointSet:
    eps = tuple(Endpoint("127.0.0.1", p) for p in ports)
    transport = Transport.UDP if udp else Transport.TCP
    return EndpointSet("default", name, 80, eps, transport=transport)


def share(name: str, weight: int = 1, *, udp: bool = False) -> Backend:
    if not name:
        return Backend(weight=weight, unresolved_reason="BackendNotFound")
    return Backend(weight=weight, endpoints=endpoint_set(name, udp=udp).key)


def match(
    route: str,
    *backends: Backend,
    server_name: str = "",
    kind: str = "TCPRoute",
    terminate: bool = False,
) -> StreamMatch:
    return StreamMatch(RouteId(0, "default", route, kind=kind), backends, server_name, terminate)


def stream_route(port: int, protocol: ListenerProtocol, *matches: StreamMatch) -> StreamRoute:
    return StreamRoute(port, protocol, tuple(sorted(matches, key=lambda m: m.server_name)))


def tcp_route(*backends: Backend, route: str = "tcp") -> StreamRoute:
    return stream_route(TCP_PORT, ListenerProtocol.TCP, match(route, *backends))


def bound_at(plane: Dataplane, port: int, protocol: ListenerProtocol) -> int:
    return next(b.actual for b in plane.bound() if (b.port, b.protocol) == (port, protocol))


class EchoServer:
    """Answers each read with `<name>:` and the bytes read; on EOF, `<name>:bye` then its EOF."""

    def __init__(self, name: str, context: ssl.SSLContext | None = None) -> None:
        self.name = name.encode()  # "": a plain echo, no prefix and no goodbye
        self.context = context
        self.port = 0
        self.accepted = 0

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            while data := await reader.read(65536):
                writer.write(self.name + b":" + data if self.name else data)
                await writer.drain()
            if self.name:
                writer.write(self.name + b":bye")
            if writer.can_write_eof():
                writer.write_eof()
            await writer.drain()
        except (ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()


@contextlib.asynccontextmanager
async def echo(name: str, context: ssl.SSLContext | None = None) -> AsyncIterator[EchoServer]:
    backend = EchoServer(name, context)
    server = await asyncio.start_server(backend.handle, "127.0.0.1", 0, ssl=context)
    backend.port = server.sockets[0].getsockname()[1]
    try:
        yield backend
    finally:
        server.close()


@contextlib.contextmanager
def unanswered() -> Iterator[int]:
    """A port whose SYNs go unanswered, so a connection to it never opens (nor fails).

    A listening socket with a backlog of 0 that never accepts holds one connection in its accept
    queue; once that is taken, Linux drops every later SYN while the queue is full ("goto drop"
    in tcp_conn_request, syncookies or not), and the client's connect waits on retransmits.
    """
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = int(listener.getsockname()[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10):
            yield port


class UdpEcho(asyncio.DatagramProtocol):
    """Answers each datagram with `<name>:` and the datagram, to whoever sent it."""

    def __init__(self, name: str) -> None:
        self.name = name.encode()
        self.transport: asyncio.DatagramTransport | None = None
        self.peers: set[tuple[str, int]] = set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        assert self.transport is not None
        self.peers.add(addr)
        self.transport.sendto(self.name + b":" + data if self.name else data, addr)


@contextlib.asynccontextmanager
async def udp_echo(name: str) -> AsyncIterator[tuple[UdpEcho, int]]:
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.create_datagram_endpoint(
        lambda: UdpEcho(name), local_addr=("127.0.0.1", 0)
    )
    try:
        yield protocol, transport.get_extra_info("sockname")[1]
    finally:
        transport.close()


class UdpClient(asyncio.DatagramProtocol):
    """A client socket whose answers arrive in a queue."""

    def __init__(self) -> None:
        self.answers: asyncio.Queue[bytes] = asyncio.Queue()
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str, int]) -> None:
        self.answers.put_nowait(data)

    def send(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.sendto(data)

    async def ask(self, data: bytes, within: float = 10.0) -> bytes:
        self.send(data)
        async with asyncio.timeout(within):
            return await self.answers.get()


@contextlib.asynccontextmanager
async def udp_client(port: int) -> AsyncIterator[UdpClient]:
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.create_datagram_endpoint(
        UdpClient, remote_addr=("127.0.0.1", port)
    )
    try:
        yield protocol
    finally:
        transport.close()


async def read_until_closed(reader: asyncio.StreamReader, within: float = 10.0) -> bytes:
    """Everything until the relay closes (b"" too when it aborted with a reset)."""
    async with asyncio.timeout(within):
        try:
            return await reader.read()
        except ConnectionResetError:
            return b""
