"""What every upstream connection does alike, whatever it speaks: the shell both protocols fill.

Where it sits: `connection.UpstreamConnection` (HTTP/1.1) and `h2c.H2cConnection` (cleartext
HTTP/2) subclass `UpstreamShell`, which holds what makes one a pooled connection bound to one
request cycle at a time (`contracts.Upstream`): its origin, its transport and `flow.ReadGate`,
the cycle bound, what happens when it closes on purpose or by surprise, and passing the
transport's write back-pressure on to the cycle. The subclasses add how a request is written
and how a response is read (`bind`, `write`, `data_received`).

A connection that closes tells the pool (`contracts.Connector.forget`) unless it was closed on
purpose, which told it already; one the pool has let go of is closed with `discard`. What a
close means to the cycle bound differs by protocol (`clean_close`): for HTTP/1.1 a clean close
may be the end of a body delimited by the close, for HTTP/2 it never is.
"""

from __future__ import annotations

import asyncio
from typing import ClassVar, cast

from coxswain_proxy.dataplane import errors
from coxswain_proxy.dataplane.contracts import Connector, UpstreamCallbacks
from coxswain_proxy.dataplane.http import flow
from coxswain_proxy.dataplane.upstream.picker import Origin


class UpstreamShell(asyncio.Protocol):
    __slots__ = (
        "connector", "origin", "transport", "gate", "cycle", "closed", "tunnel", "limit",
    )  # fmt: skip

    # What the cycle bound is told when the backend closes cleanly (no error from the socket).
    clean_close: ClassVar[type[errors.ConnectionLost]] = errors.ConnectionLost

    def __init__(self, connector: Connector, origin: Origin, limit: int) -> None:
        self.connector = connector
        self.origin = origin
        self.transport: asyncio.Transport | None = None
        self.gate = flow.ReadGate()
        self.cycle: UpstreamCallbacks | None = None  # None while idle in the pool
        self.closed = False
        self.tunnel: asyncio.Transport | None = None  # after a 101: the client's transport
        self.limit = limit  # bytes of a response head: beyond, 502 (issue 7, item 3)

    def bind(self, cycle: UpstreamCallbacks, head_only: bool) -> None:
        raise NotImplementedError

    def write(self, data: bytes) -> None:
        raise NotImplementedError

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses: a cast, not an isinstance.
        self.transport = cast(asyncio.Transport, transport)
        self.gate.transport = self.transport
        flow.limit_writes(self.transport)

    def connection_lost(self, exc: Exception | None) -> None:
        was_closed, self.closed = self.closed, True
        if not was_closed:  # closing on purpose already told the pool
            self.connector.forget(self)
        if self.tunnel is not None:
            self.tunnel.close()
            return
        cycle, self.cycle = self.cycle, None
        if cycle is not None:
            if exc is None:
                cycle.upstream_failed(self.clean_close("upstream closed the connection"))
            else:
                cycle.upstream_failed(errors.ConnectionLost(f"upstream connection lost: {exc}"))

    def pause_writing(self) -> None:
        if self.cycle is not None:
            self.cycle.upstream_writable(False)

    def resume_writing(self) -> None:
        if self.cycle is not None:
            self.cycle.upstream_writable(True)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.connector.forget(self)
            if self.transport is not None:
                self.transport.close()

    def discard(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()
