"""`Dataplane`: the data plane's one entry point, `apply(resources) -> bound ports`.

Where it sits: in-process (`--workers 1`) the relay (`wiring.Relay`) calls `apply()` with the
resources of each snapshot the discovery client commits; with several workers each worker process
runs its own `Dataplane` (its listeners' accepts going through `balance.Balancer`, which evens out
the workers' shares) and `workers` relays snapshots to it. `apply()` compiles off the event loop
(certificates and regular expressions take a while), swaps `Runtime.tables` in one assignment, then
brings the listeners in line. `close()` is the graceful shutdown of conventions item 8: close
listeners, ask each connection to finish, wait with a bound, then close what is left. It makes the
worker's pool (`upstream.connector.PooledConnector`), sweeps it and closes it; the request path sees
that pool only as `Runtime.connector`, a `contracts.Connector`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from coxswain_proxy.dataplane import balance, tables
from coxswain_proxy.dataplane.http import outbox
from coxswain_proxy.dataplane.listeners import Listeners
from coxswain_proxy.dataplane.runtime import Config, Runtime
from coxswain_proxy.dataplane.upstream import mirror
from coxswain_proxy.dataplane.upstream.connector import PooledConnector
from coxswain_routing import ListenerProtocol
from coxswain_service import tasks

log = logging.getLogger(__name__)

SWEEP_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class Options:
    shared: bool = True  # bind the Ingress ports as well as the Gateway listeners
    address: str = "0.0.0.0"
    ingress_http_port: int = 80
    ingress_https_port: int = 443
    config: Config = field(default_factory=Config)
    port_map: Callable[[int], int] = lambda p: p  # routing port -> port to bind (tests: 0)
    reuse_port: bool = False
    # With workers: a worker over its share of connections hands new ones on (`balance`).
    balance: bool = True

    @property
    def ingress(self) -> dict[int, bool]:
        if not self.shared:
            return {}
        return {self.ingress_http_port: False, self.ingress_https_port: True}


@dataclass(frozen=True, slots=True, order=True)
class BoundPort:
    port: int  # the routing port (what the controller asked for)
    actual: int  # the port bound
    protocol: ListenerProtocol  # what NodeStatus reports: the listener's (TLS, not TCP)


def _http(tls: bool) -> ListenerProtocol:
    return ListenerProtocol.HTTPS if tls else ListenerProtocol.HTTP


class Dataplane:
    def __init__(
        self,
        options: Options,
        sockets: dict[int, socket.socket] | None = None,
        seat: balance.Seat | None = None,
    ) -> None:
        self.options = options
        self._sockets = sockets
        self._seat = seat  # a worker's part in balancing (`workers`), or None
        self.balancer: balance.Balancer | None = None
        self.rt: Runtime | None = None
        self.listeners: Listeners | None = None
        self.applied_at = 0.0  # time.time() of the last swap
        self._sweeper: asyncio.Task[None] | None = None
        self._connector: PooledConnector | None = None

    async def start(self) -> Dataplane:
        config = self.options.config
        sink = outbox.Outbox(asyncio.get_running_loop())
        self._connector = PooledConnector(config, sink)
        self.rt = Runtime(config, self._connector, sink)
        if self._seat is not None:
            self.balancer = balance.Balancer(self._seat, self.rt).start()
        self.listeners = Listeners(
            self.rt,
            address=self.options.address,
            port_map=self.options.port_map,
            reuse_port=self.options.reuse_port,
            sockets=self._sockets,
            accepting=self.balancer.wrap if self.balancer is not None else None,
        )
        self._sweeper = tasks.spawn(self._sweep(), name="dataplane-sweep")
        return self

    async def apply(self, resources: tables.Resources, version: str = "") -> list[BoundPort]:
        """Serve `resources` (by key, or listed). Parts compiled from resource objects the
        tables served now were compiled from are reused: hand unchanged resources over as the
        same objects and only what changed is compiled."""
        assert self.rt is not None and self.listeners is not None
        ingress = self.options.ingress
        compiled = await asyncio.to_thread(
            tables.compile_tables,
            resources,
            ingress=ingress,
            version=version,
            previous=self.rt.tables,
        )
        # The swap: from here every new request reads the new tables.
        self.rt.tables = compiled
        self.applied_at = time.time()
        await self.listeners.sync(compiled.ports, compiled.streams.ports)
        return self.bound()

    def bound(self) -> list[BoundPort]:
        if self.listeners is None:
            return []
        http = [
            BoundPort(b.info.port, b.port, _http(b.info.tls)) for b in self.listeners.bound.values()
        ]
        streams = [
            BoundPort(port, b.actual, protocol)
            for (port, protocol), b in self.listeners.streams.bound.items()
        ]
        return sorted(http + streams)

    async def _sweep(self) -> None:
        assert self.rt is not None and self._connector is not None
        rt, connector = self.rt, self._connector
        while True:
            await asyncio.sleep(SWEEP_SECONDS)
            self.sweep(rt.loop.time())
            connector.sweep()

    def sweep(self, now: float) -> None:
        """End the client connections too slow or idle at loop time `now` (the sweeper's
        clock; tests pass one of their own)."""
        assert self.rt is not None
        rt = self.rt
        for handshake in list(rt.handshakes):
            handshake.sweep(now)
        for conn in list(rt.connections):
            conn.sweep(now)

    async def close(self, grace: float | None = None) -> None:
        """Stop accepting, let in-flight requests finish within `grace`, then close the rest."""
        rt = self.rt
        if rt is None or self.listeners is None:
            return
        grace = rt.config.grace_seconds if grace is None else grace
        self.listeners.close()
        if self.balancer is not None:
            await self.balancer.close()
        rt.draining = True
        for handshake in list(rt.handshakes):
            handshake.abort()  # no request has come on it yet
        for conn in list(rt.connections):
            conn.shutdown()
        if rt.connections:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(grace):
                    await rt.idle.wait()
        for conn in list(rt.connections):
            conn.close()
        if self._sweeper is not None:
            await tasks.cancel(self._sweeper)
        if self._connector is not None:
            await self._connector.close()
        await mirror.close()
        # Let the transports closed above run their connection_lost before the loop ends.
        await asyncio.sleep(0)
