"""The TCP relay: a client connection and the backend connection it is committed to, as a pair.

Where it sits: `binds` serves a TCP listener's port with `tcp_factory`, a TLS one with
`tls_relay.tls_factory`; each accepted connection makes one `StreamRelay`, whose two
`RelaySide`s are the client's and the backend's protocols. The relay picks its route from the
tables served at accept (`compiled.PortStreams`) and keeps that choice to its end: a snapshot swap
never moves or cuts it. It sits in `Runtime.connections`, so the data plane's sweep ends it when
idle, or when its backend has not accepted it within `StreamLimits.connect_timeout` (refused, as
a member that cannot be dialled is), and a shutdown closes it after the grace period.

Why the shape: bulk throughput is kernel work, so each side is an `asyncio.BufferedProtocol`
reading into a large buffer of its own and handing a view of it to the other side's `write()`,
no bytes object made per read. A write the kernel does not take at once is queued by the
transport, which may hold the view: the side then reads into a fresh buffer. Backpressure is the
transports' own: a side whose write buffer is over its high-water mark pauses reading on the
other side (`pause_writing`), both ways. Read buffers are taken from a process-wide spare list
and given back when their side's connection is lost: a fresh 256 KiB `bytearray` per side was
zeroed and, being above malloc's mmap threshold, mapped and faulted in page by page, which was
most of a new connection's cost (callgrind: 700k user-space instructions per relayed
connection before, 154k after). Half-close: an EOF from one side is passed on as
`write_eof()` to the other, which keeps sending until it, too, ends; the pair closes when both
directions have ended (the second EOF is passed on by the close itself), or at once when either
side is lost.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import cast

from coxswain_proxy.dataplane import stats
from coxswain_proxy.dataplane.runtime import Runtime
from coxswain_proxy.dataplane.stream.compiled import StreamChoice, StreamPort
from coxswain_proxy.dataplane.stream.relay_limits import StreamLimits
from coxswain_proxy.dataplane.upstream.picker import Origin
from coxswain_routing import ListenerProtocol

READ_BUFFER = 256 * 1024  # each side's read buffer: large reads, few calls
SPARE_BUFFERS = 64  # read buffers kept for the next connections: 16 MiB at most, idle

# Buffers no transport holds a view of (one that may be queued is never given back: the side
# that wrote it took another at once, see `RelaySide.buffer_updated`).
_spare: list[memoryview] = []


def _take_buffer() -> memoryview:
    return _spare.pop() if _spare else memoryview(bytearray(READ_BUFFER))


def _give_back(view: memoryview) -> None:
    if len(_spare) < SPARE_BUFFERS:
        _spare.append(view)


class RelaySide(asyncio.BufferedProtocol):
    """One connection of the pair: what it reads is written to `peer`, the other's transport."""

    __slots__ = (
        "relay", "transport", "peer", "view", "counts", "index", "ended",
    )  # fmt: skip

    def __init__(self, relay: StreamRelay, index: int) -> None:
        self.relay = relay
        self.transport: asyncio.Transport | None = None
        self.peer: asyncio.Transport | None = None  # None until both ends are connected
        self.view: memoryview | None = None  # taken at the first read
        self.counts = relay.counts
        self.index = index  # the counter its reads add to (STREAM_RECEIVED or STREAM_SENT)
        self.ended = False  # its EOF has arrived (and been passed on)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.relay.side_made(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        view = self.view
        if view is None:
            view = self.view = _take_buffer()
        return view

    def buffer_updated(self, nbytes: int) -> None:
        peer = self.peer
        view = self.view
        assert view is not None
        self.relay.active = True
        self.counts[self.index] += nbytes
        if peer is None:
            self.relay.early(bytes(view[:nbytes]))
            return
        peer.write(view[:nbytes])
        if peer.get_write_buffer_size():
            # The transport queued what the kernel did not take, perhaps as our view: that
            # buffer is the transport's now, never given back.
            self.view = _take_buffer()

    def eof_received(self) -> bool:
        self.relay.side_ended(self)
        return True  # keep the transport: the other direction may still be sending

    def pause_writing(self) -> None:
        other = self.relay.other(self)
        if other is not None and other.transport is not None:
            other.transport.pause_reading()

    def resume_writing(self) -> None:
        other = self.relay.other(self)
        if other is not None and other.transport is not None:
            other.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        view, self.view = self.view, None
        if view is not None:
            _give_back(view)
        self.relay.side_lost(self)
        # The relay and its sides point at each other: a reference cycle per connection that
        # only the garbage collector could free. Nothing calls a side after its transport is
        # lost (the transport lets go of its protocol), so the side lets go of its relay.
        del self.relay


class StreamRelay:
    """One client connection's relay: its route, its backend, its counters, its idleness."""

    __slots__ = (
        "rt", "port", "limits", "client", "backend", "counts", "active", "last", "dialling",
        "dialled_at", "replay", "closed",
    )  # fmt: skip

    def __init__(self, rt: Runtime, port: StreamPort, limits: StreamLimits) -> None:
        self.rt = rt
        self.port = port
        self.limits = limits
        self.counts = _UNROUTED  # the route's counters, once routed
        self.client = RelaySide(self, stats.STREAM_RECEIVED)
        self.backend: RelaySide | None = None
        self.active = False  # a byte moved since the last sweep
        self.last = rt.loop.time()  # the sweep's clock when it last saw the relay active
        self.dialling: asyncio.Task[None] | None = None
        self.dialled_at = 0.0  # the loop time the dial began
        self.replay: list[bytes] = []  # client bytes read before routing, for the backend
        self.closed = False

    # -- the client's side arrives first

    def side_made(self, side: RelaySide) -> None:
        if side is self.client:
            self.rt.connections.add(self)
            self.accepted()
            return
        self._joined()

    def accepted(self) -> None:
        """A plain TCP port routes at once, before reading a byte. Reading goes on while the
        backend is dialled (pausing and resuming it cost two epoll calls per connection): what
        arrives meanwhile is held for the backend, up to a read buffer's worth."""
        self.route("")

    def early(self, data: bytes) -> None:
        """Bytes read before the backend is connected (a TLS relay reads its ClientHello)."""
        replay = self.replay
        replay.append(data)
        if len(replay) > 1 and sum(map(len, replay)) >= READ_BUFFER:
            assert self.client.transport is not None
            self.client.transport.pause_reading()

    def route(self, server_name: str) -> None:
        """Commit the connection to a route, a backendRef and an endpoint, or refuse it."""
        tables = self.rt.tables
        routes = tables.streams.routes.get(self.port) if tables is not None else None
        choice = routes.choose(server_name) if routes is not None else None
        if choice is None:
            self.refuse(stats.NO_ROUTE)
            return
        self.counts = self.rt.stats.stream(choice.route)
        self.counts[stats.STREAM_TOTAL] += 1
        self.counts[stats.STREAM_ACTIVE] += 1
        self.client.counts = self.counts
        assert tables is not None
        origin = choice.pick(tables.endpoints)
        if origin is None:
            self.refuse()
            return
        self.proceed(choice, origin)

    def proceed(self, choice: StreamChoice, origin: Origin) -> None:
        """Routed and committed to `origin`: dial it, to replay what was read so far (TCP, TLS
        passed through; a terminating TLS relay first ends the client's TLS)."""
        self.counts[stats.STREAM_RECEIVED] += sum(map(len, self.replay))
        self.dial(origin)

    def dial(self, origin: Origin) -> None:
        self.dialled_at = self.rt.loop.time()
        self.dialling = self.rt.loop.create_task(self._dial(origin[0], origin[1]))

    def refuse(self, route: str = "") -> None:
        counts = self.rt.stats.stream(route) if route else self.counts
        counts[stats.STREAM_REFUSED] += 1
        self.close()

    async def _dial(self, host: str, port: int) -> None:
        backend = self.backend = RelaySide(self, stats.STREAM_SENT)
        backend.counts = self.counts
        # No timeout of its own: the sweep refuses a dial past `connect_timeout`, cancelling it.
        try:
            await self.rt.loop.create_connection(lambda: backend, host, port)
        except OSError:
            # Spec 003: "a member that cannot be dialed refuses the connection rather than
            # passing it to a sibling".
            self.backend = None
            self.refuse()

    def _joined(self) -> None:
        client, backend = self.client, self.backend
        assert client.transport is not None and backend is not None
        assert backend.transport is not None
        if self.closed:
            backend.transport.abort()
            return
        client.peer, backend.peer = backend.transport, client.transport
        replay = self.replay
        if replay:
            backend.transport.write(replay[0] if len(replay) == 1 else b"".join(replay))
            self.replay = []
        if client.ended:
            backend.transport.write_eof()
        elif not client.transport.is_reading():
            client.transport.resume_reading()

    # -- ends

    def other(self, side: RelaySide) -> RelaySide | None:
        return self.backend if side is self.client else self.client

    def side_ended(self, side: RelaySide) -> None:
        side.ended = True
        peer = side.peer
        other = self.other(side)
        if other is not None and other.ended:
            self._finish()  # the close sends the FIN a write_eof would have: one call fewer
            return
        if peer is not None:
            peer.write_eof()

    def _finish(self) -> None:
        """Both directions have ended: close both, each after what it still has to write."""
        for side in (self.client, self.backend):
            if side is not None and side.transport is not None:
                side.transport.close()
        self._done()

    def side_lost(self, side: RelaySide) -> None:
        other = self.other(side)
        if other is not None and other.transport is not None and not other.transport.is_closing():
            other.transport.close()  # writes what it holds, then closes
        self._done()

    def _done(self) -> None:
        if self.closed:
            return
        self.closed = True
        rt = self.rt
        if self.counts is not _UNROUTED:
            self.counts[stats.STREAM_ACTIVE] -= 1
        if self.dialling is not None and not self.dialling.done():
            self.dialling.cancel()
        rt.connections.discard(self)
        if rt.draining and not rt.connections:
            rt.idle.set()

    # -- runtime.Sweepable

    def sweep(self, now: float) -> None:
        dialling = self.dialling
        if dialling is not None and not dialling.done():
            if now - self.dialled_at >= self.limits.connect_timeout:
                # Refused like a member that cannot be dialled: never passed to a sibling.
                self.refuse()
            return
        if self.active:
            self.active, self.last = False, now
        elif now - self.last >= self.limits.idle_timeout:
            self.close()

    def shutdown(self) -> None:
        """A drain lets a relay run on: it is closed when the grace period ends."""

    def close(self) -> None:
        for side in (self.client, self.backend):
            if side is not None and side.transport is not None:
                side.transport.abort()
        self._done()


# The counters a relay updates before it is routed: never reported.
_UNROUTED: list[int] = [0, 0, 0, 0, 0]


def tcp_factory(rt: Runtime, port: int, limits: StreamLimits) -> Callable[[], RelaySide]:
    """The protocol factory of a TCP listener's port."""
    key = (port, ListenerProtocol.TCP)
    return lambda: StreamRelay(rt, key, limits).client
