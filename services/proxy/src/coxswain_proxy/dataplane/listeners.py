"""Binding, rebinding and draining the HTTP/HTTPS ports a snapshot asks for.

Where it sits: `core.Dataplane.apply` calls `Listeners.sync(ports)` after each swap. A port
already bound with the same protocol is left alone, so adding or removing one listener never
disturbs another (issue 7, item 2). A removed port stops accepting at once and its open
connections finish the request in flight, then close (they drain). A port that cannot be bound
is logged and left out of what is reported bound; the next snapshot tries again. An HTTPS port
accepts plain TCP and each connection goes through a `handshake.Handshake` first, which bounds
its TLS handshake in time; on a port some of whose server names are passed through (a TLS
`StreamRoute` on the HTTPS port: ssl-passthrough) or ask for client certificates their own way,
the handshake first reads the server name (`handshake.Peek`).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass

from coxswain_proxy.dataplane import handshake, tls
from coxswain_proxy.dataplane.http.http11 import HttpConnection
from coxswain_proxy.dataplane.http2 import negotiate
from coxswain_proxy.dataplane.http2.server import H2ServerConnection
from coxswain_proxy.dataplane.runtime import Runtime
from coxswain_proxy.dataplane.stream import tls_relay
from coxswain_proxy.dataplane.stream.binds import StreamBinds
from coxswain_proxy.dataplane.stream.compiled import StreamPort
from coxswain_proxy.dataplane.tables import PortInfo
from coxswain_routing import ListenerProtocol

log = logging.getLogger(__name__)

BACKLOG = 2048

# (routing port, the port's protocol factory) -> the factory its server calls at each accept.
Accepting = Callable[[int, Callable[[], asyncio.Protocol]], Callable[[], asyncio.Protocol]]


@dataclass(slots=True)
class BoundListener:
    info: PortInfo
    port: int  # the port actually bound (differs from info.port only when overridden)
    server: asyncio.Server


class Listeners:
    def __init__(
        self,
        rt: Runtime,
        *,
        address: str,
        port_map: Callable[[int], int] = lambda p: p,
        reuse_port: bool = False,
        sockets: dict[int, socket.socket] | None = None,
        accepting: Accepting | None = None,
    ) -> None:
        self._rt = rt
        self._accepting = accepting  # wraps each port's factory: `balance.Balancer.wrap`
        self._address = address
        self._port_map = port_map  # routing port -> port to bind (tests bind 0)
        self._reuse_port = reuse_port  # workers each bind the same ports
        self._sockets = sockets or {}  # pre-bound sockets by routing port (inherited)
        self.bound: dict[int, BoundListener] = {}  # by routing port
        # TCP, TLS-passthrough and UDP ports (`stream.binds`), UDP in a port space of its own.
        self.streams = StreamBinds(rt, address=address, port_map=port_map, reuse_port=reuse_port)

    async def sync(
        self, wanted: dict[int, PortInfo], streams: frozenset[StreamPort] = frozenset()
    ) -> None:
        for port in [p for p, b in self.bound.items() if wanted.get(p) != b.info]:
            self._unbind(port)
        for port, info in wanted.items():
            if port not in self.bound:
                await self._bind(info)
        await self.streams.sync(streams)

    async def _bind(self, info: PortInfo) -> None:
        try:
            factory = self._factory(info)
            if self._accepting is not None:
                factory = self._accepting(info.port, factory)
            server = await self._serve(factory, info)
        except OSError as exc:
            fields = {"port": info.port, "error": exc.strerror or str(exc)}
            level = (
                logging.ERROR if exc.errno in (errno.EACCES, errno.EADDRINUSE) else logging.WARNING
            )
            log.log(level, "could not bind listener", extra={"fields": fields})
            return
        actual = server.sockets[0].getsockname()[1]
        self.bound[info.port] = BoundListener(info, actual, server)
        fields = {"port": info.port, "bound": actual, "tls": info.tls}
        log.info("listener bound", extra={"fields": fields})

    def _factory(self, info: PortInfo) -> Callable[[], asyncio.Protocol]:
        rt, port = self._rt, info.port
        if not info.tls:
            return negotiate.cleartext(rt, port)  # HTTP/1.1, or h2c by prior knowledge
        refusing = tls.front_context(None)  # until a snapshot gives the port its store

        def relay(raw: asyncio.Transport, held: list[bytes]) -> None:
            _pass_through(rt, port, raw, held)

        def accept() -> handshake.Handshake:
            # The tables served at the accept: a swap after it leaves this handshake alone.
            tables = rt.tables
            if tables is None:
                return handshake.Handshake(rt, refusing, connection)
            store = tables.tls.get(port)
            streams = tables.streams.routes.get((port, ListenerProtocol.TLS))
            peek = None
            if streams is not None or (store is not None and store.peeks):
                peek = handshake.Peek(streams, store, relay)
            return handshake.Handshake(rt, tables.fronts.get(port, refusing), connection, peek)

        connection = negotiate.encrypted(rt, port)  # HTTP/1.1 or h2, as ALPN chose
        return accept

    async def _serve(
        self, factory: Callable[[], asyncio.Protocol], info: PortInfo
    ) -> asyncio.Server:
        loop = self._rt.loop
        inherited = self._sockets.get(info.port)
        if inherited is not None:
            return await loop.create_server(factory, sock=inherited, backlog=BACKLOG)
        return await loop.create_server(
            factory,
            host=self._address,
            port=self._port_map(info.port),
            backlog=BACKLOG,
            reuse_address=True,
            reuse_port=self._reuse_port or None,
        )

    def _unbind(self, port: int) -> None:
        bound = self.bound.pop(port)
        bound.server.close()
        for conn in list(self._rt.connections):
            if isinstance(conn, (HttpConnection, H2ServerConnection)) and conn.port == port:
                conn.drain = True
                conn.shutdown()
        log.info("listener removed, draining", extra={"fields": {"port": port}})

    def close(self) -> None:
        for port in list(self.bound):
            self.bound.pop(port).server.close()
        self.streams.close()


def _pass_through(rt: Runtime, port: int, raw: asyncio.Transport, held: list[bytes]) -> None:
    """An HTTPS port's connection whose server name is passed through (an Ingress host with
    ssl-passthrough): from here it is a TLS listener's, relayed unread to the name's route."""
    relay = tls_relay.TlsRelay(rt, (port, ListenerProtocol.TLS), rt.config.stream)
    raw.set_protocol(relay.client)
    relay.client.connection_made(raw)
    for data in held:
        relay.early(data)
