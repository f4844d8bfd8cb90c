"""Binding the TCP, TLS and UDP ports a snapshot asks for, beside the HTTP ones.

Where it sits: `dataplane.listeners.Listeners.sync` calls `StreamBinds.sync(ports)` with
`Tables.streams.ports` after each swap. A (port, protocol) already bound is left alone, so its
connections and sessions never notice a swap; one no longer wanted stops accepting, and what it
had accepted runs on until it ends (spec 003's swap rule: established streams "finish on what they
started with"). UDP has its own port space: TCP port 53 and UDP port 53 are two binds. A port that
cannot be bound is logged and left out of what is reported, as an HTTP one is.
"""

from __future__ import annotations

import asyncio
import errno
import logging
from collections.abc import Callable
from dataclasses import dataclass

from coxswain_proxy.dataplane.runtime import Runtime
from coxswain_proxy.dataplane.stream import relay, tls_relay, udp
from coxswain_proxy.dataplane.stream.compiled import StreamPort
from coxswain_proxy.dataplane.stream.relay_limits import StreamLimits
from coxswain_routing import ListenerProtocol

log = logging.getLogger(__name__)

BACKLOG = 2048


@dataclass(slots=True)
class StreamBind:
    actual: int  # the port bound
    close: Callable[[], None]  # stops accepting (TCP, TLS) or receiving (UDP)
    # Done once the socket is really closed: a UDP transport closes on a later loop turn, and
    # until then the port stays taken (for another worker's or process's bind, say).
    closed: asyncio.Future[None] | None = None


class _UdpPort(udp.UdpPort):
    """A UDP listener that says when its socket is gone."""

    __slots__ = ("closed",)

    def __init__(self, rt: Runtime, port: int, limits: StreamLimits) -> None:
        super().__init__(rt, port, limits)
        self.closed: asyncio.Future[None] = rt.loop.create_future()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed.done():
            self.closed.set_result(None)


class StreamBinds:
    def __init__(
        self,
        rt: Runtime,
        *,
        address: str,
        port_map: Callable[[int], int],
        reuse_port: bool,
        limits: StreamLimits | None = None,
    ) -> None:
        self._rt = rt
        self._address = address
        self._port_map = port_map
        self._reuse_port = reuse_port
        self.limits = limits or rt.config.stream  # the `serve` flags' (`relay_limits`)
        self.bound: dict[StreamPort, StreamBind] = {}

    async def sync(self, wanted: frozenset[StreamPort]) -> None:
        for key in [k for k in self.bound if k not in wanted]:
            removed = self.bound.pop(key)
            removed.close()
            if removed.closed is not None:
                await removed.closed  # released before the snapshot counts as applied
            log.info("stream listener removed", extra={"fields": _fields(key)})
        for key in sorted(wanted - self.bound.keys()):
            try:
                bind = await self._bind(*key)
            except OSError as exc:
                fields = {**_fields(key), "error": exc.strerror or str(exc)}
                fatal = exc.errno in (errno.EACCES, errno.EADDRINUSE)
                log.log(logging.ERROR if fatal else logging.WARNING, "could not bind listener",
                        extra={"fields": fields})  # fmt: skip
                continue
            self.bound[key] = bind
            log.info(
                "stream listener bound", extra={"fields": {**_fields(key), "bound": bind.actual}}
            )

    async def _bind(self, port: int, protocol: ListenerProtocol) -> StreamBind:
        loop, limits = self._rt.loop, self.limits
        local = (self._address, self._port_map(port))
        if protocol is ListenerProtocol.UDP:
            transport, endpoint = await loop.create_datagram_endpoint(
                lambda: _UdpPort(self._rt, port, limits),
                local_addr=local,
                reuse_port=self._reuse_port or None,
            )
            actual = transport.get_extra_info("sockname")[1]
            return StreamBind(actual, endpoint.close, endpoint.closed)
        make = relay.tcp_factory if protocol is ListenerProtocol.TCP else tls_relay.tls_factory
        server = await loop.create_server(
            make(self._rt, port, limits),
            host=local[0],
            port=local[1],
            backlog=BACKLOG,
            reuse_address=True,
            reuse_port=self._reuse_port or None,
        )
        return StreamBind(server.sockets[0].getsockname()[1], server.close)

    def close(self) -> None:
        for key in list(self.bound):
            self.bound.pop(key).close()


def _fields(key: StreamPort) -> dict[str, object]:
    return {"port": key[0], "protocol": key[1].value}
