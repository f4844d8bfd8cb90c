"""UDP relays: one session per client address, each committed to one backend for its life.

Where it sits: `binds` opens one `UdpPort` datagram endpoint per UDP listener. The first datagram
from a client address opens a `UdpSession`: the route, backendRef and endpoint are chosen from
the tables served then (spec 003: "every UDP client's session, is committed to one backendRef by
weighted round robin"), and a connected datagram socket to that endpoint carries the client's
datagrams there and the endpoint's answers back from the listener's own address. Sessions sit in
`Runtime.connections`, so the data plane's sweep ends one idle for `StreamLimits.udp_idle_timeout`
and a snapshot swap leaves each on the backend it chose.

Bounds: at most `StreamLimits.udp_sessions` sessions per port (a datagram from a new client past
it is dropped and counted refused); at most `udp_queue` datagrams held per session while its
socket opens. A refused session (no route, an unresolved share, nothing ready) stays open,
dropping its datagrams until idle, so a client's next datagram is not handed to a sibling.
Datagrams up to 65507 bytes (the largest an IPv4 UDP datagram carries) are relayed whole.
"""

from __future__ import annotations

import asyncio
from typing import cast

from coxswain_proxy.dataplane import stats
from coxswain_proxy.dataplane.runtime import Runtime
from coxswain_proxy.dataplane.stream.relay_limits import StreamLimits
from coxswain_routing import ListenerProtocol

Address = tuple[str, int]


class UdpPort(asyncio.DatagramProtocol):
    """A bound UDP listener: datagrams in, each handed to its client's session."""

    __slots__ = ("rt", "port", "limits", "transport", "sessions")

    def __init__(self, rt: Runtime, port: int, limits: StreamLimits) -> None:
        self.rt = rt
        self.port = (port, ListenerProtocol.UDP)
        self.limits = limits
        self.transport: asyncio.DatagramTransport | None = None
        self.sessions: dict[Address, UdpSession] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: Address) -> None:
        session = self.sessions.get(addr)
        if session is None:
            if len(self.sessions) >= self.limits.udp_sessions:
                self.rt.stats.stream(stats.NO_ROUTE)[stats.STREAM_REFUSED] += 1
                return
            session = self.sessions[addr] = UdpSession(self, addr)
        session.from_client(data)

    def error_received(self, exc: Exception) -> None:
        """An ICMP error for a datagram sent to a client: nothing to do but carry on."""

    def close(self) -> None:
        """The port is unbound: its sessions finish on their own (idle), as a TCP relay does."""
        if self.transport is not None:
            self.transport.close()


class UdpSession(asyncio.DatagramProtocol):
    """One client address's session: its backend socket and its counters."""

    __slots__ = (
        "owner", "client", "upstream", "counts", "queue", "active", "last", "task", "routed",
    )  # fmt: skip

    def __init__(self, owner: UdpPort, client: Address) -> None:
        self.owner = owner
        self.client = client
        self.upstream: asyncio.DatagramTransport | None = None
        self.queue: list[bytes] | None = []  # None: refused, its datagrams dropped
        self.active = False
        rt = owner.rt
        self.last = rt.loop.time()
        self.task: asyncio.Task[None] | None = None
        self.routed = False  # counted in its route's open sessions
        rt.connections.add(self)
        self.counts = self._route()

    def _route(self) -> list[int]:
        rt = self.owner.rt
        tables = rt.tables
        routes = tables.streams.routes.get(self.owner.port) if tables is not None else None
        choice = routes.choose() if routes is not None else None
        if choice is None:
            return self._refused(rt.stats.stream(stats.NO_ROUTE))
        counts = rt.stats.stream(choice.route)
        counts[stats.STREAM_TOTAL] += 1
        counts[stats.STREAM_ACTIVE] += 1
        self.routed = True
        assert tables is not None
        origin = choice.pick(tables.endpoints)
        if origin is None:
            return self._refused(counts)
        self.task = rt.loop.create_task(self._open((origin[0], origin[1]), counts))
        return counts

    def _refused(self, counts: list[int]) -> list[int]:
        counts[stats.STREAM_REFUSED] += 1
        self.queue = None
        return counts

    async def _open(self, origin: Address, counts: list[int]) -> None:
        try:
            await self.owner.rt.loop.create_datagram_endpoint(lambda: self, remote_addr=origin)
        except OSError:
            # The member cannot be reached: the session is refused, not moved to a sibling.
            self._refused(counts)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        upstream = self.upstream = cast(asyncio.DatagramTransport, transport)
        for data in self.queue or ():
            upstream.sendto(data)
        self.queue = []

    def from_client(self, data: bytes) -> None:
        self.active = True
        upstream = self.upstream
        if upstream is not None:
            self.counts[stats.STREAM_RECEIVED] += len(data)
            upstream.sendto(data)
            return
        queue = self.queue
        if queue is not None and len(queue) < self.owner.limits.udp_queue:
            self.counts[stats.STREAM_RECEIVED] += len(data)
            queue.append(data)

    def datagram_received(self, data: bytes, addr: Address) -> None:
        owner = self.owner.transport
        if owner is None or owner.is_closing():
            return
        self.active = True
        self.counts[stats.STREAM_SENT] += len(data)
        owner.sendto(data, self.client)

    def error_received(self, exc: Exception) -> None:
        """The backend's port answered ICMP unreachable: the session waits out its idleness."""

    def connection_lost(self, exc: Exception | None) -> None:
        self.upstream = None

    # -- runtime.Sweepable

    def sweep(self, now: float) -> None:
        if self.active:
            self.active, self.last = False, now
        elif now - self.last >= self.owner.limits.udp_idle_timeout:
            self.close()

    def shutdown(self) -> None:
        """A drain ends a UDP session at once: nothing is under way in a datagram relay."""
        self.close()

    def close(self) -> None:
        owner = self.owner
        if owner.sessions.get(self.client) is not self:
            return
        del owner.sessions[self.client]
        if self.task is not None and not self.task.done():
            self.task.cancel()
        if self.upstream is not None:
            self.upstream.close()
        if self.routed:
            self.counts[stats.STREAM_ACTIVE] -= 1
        rt = owner.rt
        rt.connections.discard(self)
        if rt.draining and not rt.connections:
            rt.idle.set()
