"""What the request path's objects need of each other, as `Protocol`s: the seams of its graph.

Where it sits: a request cycle (`http.request_cycle.RequestCycle`) is driven by callbacks from
two connections it does not own: the client's, which parsed it, and an upstream one it borrows
from the pool for each attempt. Each is written against what the other offers, named here, and
never against its class; only the one that creates an object imports its class (the client
connection its cycles, the pool its upstream connections). So the graph has no cycle:

    http.http11 ──> http.request_cycle ──> contracts <── upstream.connection, upstream.h2c
         └──> http.dispatch ──┘                              ^
                                       upstream.connector ───┘ (creates both)

- `Downstream`: the client connection, as a cycle uses it. HTTP/1.1's `http.http11.HttpConnection`
  satisfies it, and so does each HTTP/2 stream (`http2.h2stream.H2Stream`), so it names no
  HTTP/1.1 machinery (transport, parser, pipelining queue): writes, the `Gate` its reading is
  held by, the facts of where the request came from, and the end. What a cycle `write`s is
  HTTP/1.1; a forwarded response to an HTTP/2 stream goes as frames instead, by the cycle's
  subclass for streams (`h2stream.StreamCycle`: the response-writing methods `send_head`,
  `send_interim`, `response_body`), since the HTTP/1.1 framing is the cycle's per-request state.
- `Gate`: what holds a connection's reading while any reason (a `http.flow` bit) holds it;
  `http.flow.ReadGate` pauses a transport, an HTTP/2 stream's would withhold its window.
- `Upstream`: a connection to a backend, as the cycle and the pool use it; satisfied by
  `upstream.connection.UpstreamConnection` and `upstream.h2c.H2cConnection`, which share
  `upstream.shell.UpstreamShell`.
- `UpstreamCallbacks`: what an upstream connection calls on the cycle bound to it.
- `Waiter` and `Connector`: the pool (`upstream.connector.PooledConnector`) as the cycle asks it
  for a connection and the connections tell it they are gone.

Why Protocols: they cost nothing when called (a call on a Protocol-typed attribute is the
implementation's own method) and no `isinstance` is ever made against one; mypy checks them,
the request path does not.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from coxswain_proxy.dataplane import errors
from coxswain_proxy.dataplane.http.heads import ResponseFields
from coxswain_proxy.dataplane.peercert import ClientPeer
from coxswain_proxy.dataplane.upstream.picker import Origin


class Gate(Protocol):
    """Reading held while any reason holds it (`http.flow.ReadGate`)."""

    @property
    def held(self) -> int:
        """A bit per reason holding reading now; 0: reading."""

    def pause(self, reason: int) -> None: ...

    def resume(self, reason: int) -> None: ...


class Downstream(Protocol):
    """The client connection a request arrived on, as its request cycle uses it."""

    @property
    def port(self) -> int:
        """The routing port it arrived on: which tables apply (spec 002)."""

    @property
    def scheme(self) -> str:
        """`http` or `https`, as the client spoke to the proxy."""

    @property
    def sni(self) -> tuple[str, tuple[str, ...]] | None:
        """On TLS: the server name the client sent, and the names of the listener it chose."""

    @property
    def verified(self) -> ClientPeer | None:
        """On TLS whose handshake verified client certificates: the store it verified under and
        the certificate presented (`peercert`); None: none was asked for."""

    @property
    def forwarded(self) -> bytes:
        """The X-Forwarded-For/-Proto lines for its peer (`heads.forwarded_tail`), built once."""

    @property
    def write_paused(self) -> bool:
        """It takes no more for now (its write buffer is past the high-water mark)."""

    @property
    def gate(self) -> Gate:
        """What holds reading from the client (a body with nowhere to go, a full upstream)."""

    def write(self, data: bytes) -> None:
        """Send `data` to the client, after what was sent before; nothing once it has closed."""

    def finished(self, cycle: object, keep_alive: bool) -> None:
        """`cycle` is answered and its request read whole (or never will be): the next one."""

    def become_tunnel(self, upstream: Upstream) -> None:
        """After a 101: bytes flow both ways between the client and `upstream`, untouched."""

    def close(self) -> None:
        """Close, once what was sent before has gone out."""


class UpstreamCallbacks(Protocol):
    """What an upstream connection calls on the request cycle bound to it."""

    def response_head(self, status: int, fields: ResponseFields) -> None: ...

    def response_body(self, body: bytes) -> None: ...

    def response_trailers(self, fields: list[tuple[bytes, bytes]]) -> None:
        """Trailer fields (from an HTTP/2 upstream), before `response_complete`."""

    def response_complete(self, keep_alive: bool) -> None: ...

    def upstream_failed(self, exc: errors.DataplaneError) -> None: ...

    def upstream_upgraded(self, rest: bytes) -> None: ...

    def flush(self) -> None:
        """A read has been handled: what it produced for the client goes in one write."""

    def upstream_writable(self, writable: bool) -> None: ...


class Upstream(Protocol):
    """A connection to a backend (HTTP/1.1 or h2c), as a request cycle and the pool use it."""

    cycle: UpstreamCallbacks | None  # the request cycle bound to it; None while idle
    tunnel: asyncio.Transport | None  # after a 101: the client's transport, its bytes' sink

    @property
    def origin(self) -> Origin:
        """What it was dialled as: the pool's key."""

    @property
    def transport(self) -> asyncio.Transport | None: ...

    @property
    def gate(self) -> Gate:
        """What holds reading from the backend (a client that takes no more for now)."""

    def bind(self, cycle: UpstreamCallbacks, head_only: bool) -> None:
        """Serve `cycle`'s request next (`head_only`: a HEAD, whose response has no body)."""

    def write(self, data: bytes) -> None:
        """Request bytes, as HTTP/1.1 (an h2c connection re-frames them)."""

    def close(self) -> None:
        """Close it and tell the pool, which lets a waiter open one in its place."""

    def discard(self) -> None:
        """Close it without telling the pool: the pool has forgotten it already."""


class Waiter(Protocol):
    """What the pool hands a connection to, or tells that none could be opened."""

    def connected(self, connection: Upstream) -> None: ...

    def connect_failed(self, exc: Exception) -> None: ...


class Connector(Protocol):
    """Where upstream connections come from, and go back to."""

    def acquire(self, origin: Origin, waiter: Waiter, now: float | None = None) -> Upstream | None:
        """A connection now, or None: `waiter` hears back through `connected`/`connect_failed`.

        `now`: the loop's time when the caller has it already.
        """

    def release(self, connection: Upstream) -> None:
        """Back from a finished exchange and good for another (or closed, if not wanted)."""

    def cancel(self, origin: Origin, waiter: Waiter) -> None:
        """`waiter` gave up (its request timed out or its client left)."""

    def forget(self, connection: Upstream) -> None:
        """`connection` closed: the pool lets a waiter open a new one in its place."""
