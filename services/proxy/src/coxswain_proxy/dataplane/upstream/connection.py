"""The upstream side: pooled keep-alive connections to endpoints, and the protocol reading them.

Where it sits: `forward.Exchange` asks the worker's `Connector` for a connection to an origin
and binds itself to it; the `UpstreamConnection` parses the response with httptools and calls
the bound exchange back. Idle connections sit in `pool.Pool` (pure bookkeeping); the
`Connector` does the I/O its answers call for. An idle connection that receives anything or
closes is dropped from the pool: a backend may close keep-alives whenever it likes.

The parser hands each response field straight to the connection's `heads.ResponseFields`, which
sorts it once (passes on, or hop-by-hop); the head's size is bounded per read, not per field.
Requests go out through the worker's `outbox.Outbox`, like everything sent to clients.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Protocol, cast

import httptools

from coxswain_proxy.dataplane import errors
from coxswain_proxy.dataplane.http import flow, heads
from coxswain_proxy.dataplane.http.outbox import Outbox
from coxswain_proxy.dataplane.upstream.h2c import H2cConnection
from coxswain_proxy.dataplane.upstream.picker import Origin, is_h2c, tls_arguments
from coxswain_proxy.dataplane.upstream.pool import Limits, Pool

if TYPE_CHECKING:
    from coxswain_proxy.dataplane.runtime import Config

log = logging.getLogger(__name__)


class Waiter(Protocol):
    """What an exchange offers the connector: told of a connection, or of the failure."""

    def connected(self, connection: UpstreamConnection) -> None: ...

    def connect_failed(self, exc: Exception) -> None: ...


class Bound(Protocol):
    """What an exchange offers the connection it is bound to."""

    def response_head(self, status: int, fields: heads.ResponseFields) -> None: ...

    def response_body(self, body: bytes) -> None: ...

    def response_complete(self, keep_alive: bool) -> None: ...

    def upstream_failed(self, exc: errors.DataplaneError) -> None: ...

    def upstream_upgraded(self, rest: bytes) -> None: ...

    def flush(self) -> None: ...

    def upstream_writable(self, writable: bool) -> None: ...


_TOO_LARGE = "upstream response headers too large"


class HeadDone(Exception):
    """Raised inside the parser to end a HEAD response at its headers (httptools cannot be told
    that a HEAD response has no body, so the parser is replaced instead)."""


class _Callbacks:
    """What the response parser calls: the fields' own `on_header` (no hop through the
    connection for each field), the connection's methods for the rest."""

    __slots__ = ("on_header", "on_headers_complete", "on_body", "on_message_complete")

    def __init__(self, connection: UpstreamConnection) -> None:
        self.on_header = connection.fields.on_header
        self.on_headers_complete = connection.on_headers_complete
        self.on_body = connection.on_body
        self.on_message_complete = connection.on_message_complete


def _parser(connection: UpstreamConnection) -> httptools.HttpResponseParser:
    return httptools.HttpResponseParser(_Callbacks(connection))


class UpstreamConnection(asyncio.Protocol):
    __slots__ = (
        "connector", "origin", "transport", "parser", "gate", "exchange", "fields", "size",
        "head_only", "closed", "tunnel", "limit", "outbox",
    )  # fmt: skip

    def __init__(self, connector: Connector, origin: Origin) -> None:
        self.connector = connector
        self.origin = origin
        self.transport: asyncio.Transport | None = None
        self.fields = heads.ResponseFields()  # the head arriving
        self.parser = _parser(self)
        self.gate = flow.ReadGate()
        self.exchange: Bound | None = None  # None while idle in the pool
        # Bytes read while the response head is awaited (a bound on its size, counted per read
        # rather than per field); -1 once it has come.
        self.size = -1
        self.head_only = False  # the bound request is a HEAD
        self.closed = False
        self.tunnel: asyncio.Transport | None = None
        self.limit = connector.config.max_upstream_header_bytes
        self.outbox = connector.outbox

    def bind(self, exchange: Bound, head_only: bool) -> None:
        self.exchange = exchange
        self.head_only = head_only
        self.fields.clear()
        self.size = 0

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.closed:
            self.outbox.write(self.transport, data)

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
        exchange, self.exchange = self.exchange, None
        if exchange is not None:
            closed = errors.UpstreamClosed if exc is None else errors.BadGateway
            exchange.upstream_failed(closed("upstream connection closed"))

    def pause_writing(self) -> None:
        if self.exchange is not None:
            self.exchange.upstream_writable(False)

    def resume_writing(self) -> None:
        if self.exchange is not None:
            self.exchange.upstream_writable(True)

    def data_received(self, data: bytes) -> None:
        if self.tunnel is not None:
            self.tunnel.write(data)
            return
        exchange = self.exchange
        if exchange is None:
            self.close()  # an idle connection has nothing to say: it cannot be trusted again
            return
        if self.size >= 0:
            self.size += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade as exc:
            exchange.upstream_upgraded(data[exc.args[0] :])
            return
        except httptools.HttpParserCallbackError as exc:
            if isinstance(exc.__context__, HeadDone):
                self.parser = _parser(self)
            else:
                self._broken(exchange, exc.__context__)
        except httptools.HttpParserError as exc:
            self._broken(exchange, exc)
        else:
            if self.size > self.limit:
                # A head still arriving past the limit: 502 (issue 7, item 3).
                self._broken(exchange, errors.BadGateway(_TOO_LARGE))
        exchange.flush()

    def _broken(self, exchange: Bound, cause: BaseException | None) -> None:
        if not isinstance(cause, errors.DataplaneError):
            cause = errors.BadGateway(f"upstream sent malformed HTTP: {cause}")
        self.exchange = None
        self.close()
        exchange.upstream_failed(cause)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.connector.forget(self)
            if self.transport is not None:
                self.transport.close()

    # ------------------------------------------------------------------ parser callbacks

    def on_headers_complete(self) -> None:
        fields = self.fields
        # What was read may run on into the body: only then are the fields counted.
        if self.size > self.limit and fields.size() > self.limit:
            # Upstream response headers beyond the limit: 502 (issue 7, item 3).
            raise errors.BadGateway(_TOO_LARGE)
        if self.exchange is not None:
            status = self.parser.get_status_code()
            self.exchange.response_head(status, fields)
            if status < 200:  # an interim response: the next head follows
                self.size = 0
                fields.clear()
            else:
                self.size = -1
            if self.head_only and status >= 200 and self.exchange is not None:
                self.exchange.response_complete(self.parser.should_keep_alive())
                raise HeadDone()

    def on_body(self, body: bytes) -> None:
        if self.exchange is not None:
            self.exchange.response_body(body)

    def on_message_complete(self) -> None:
        exchange = self.exchange
        if exchange is not None and self.size < 0:  # a final response (interim ones go on)
            exchange.response_complete(self.parser.should_keep_alive())


class Connector:
    """Hands out pooled connections per origin, opening new ones as the pool allows."""

    def __init__(self, config: Config, outbox: Outbox) -> None:
        self.config = config
        self.outbox = outbox  # the worker's: upstream connections write through it
        self.pool: Pool[UpstreamConnection, Waiter] = Pool(config.pool)
        self._loop = asyncio.get_running_loop()
        self._opening: set[asyncio.Task[None]] = set()

    def acquire(
        self, origin: Origin, waiter: Waiter, now: float | None = None
    ) -> UpstreamConnection | None:
        """A connection now, or None: `waiter` hears back through `connected`/`connect_failed`.

        `now`: the loop's time when the caller has it already.
        """
        if now is None:
            now = self._loop.time()
        idle = self.pool.take_idle(origin, now)
        if idle is not None:
            return idle
        got = self.pool.acquire(origin, waiter, now)
        for stale in got.expired:
            stale.close()
        if got.open_new:
            self._open(origin, waiter)
        return got.connection

    def cancel(self, origin: Origin, waiter: Waiter) -> None:
        self.pool.cancel(origin, waiter)

    def release(self, connection: UpstreamConnection) -> None:
        connection.exchange = None
        now = self._loop.time()
        if self.pool.park(connection.origin, connection, now):
            return
        released = self.pool.release(connection.origin, connection, now)
        for extra in released.close:
            extra.closed = True  # already forgotten by the pool
            if extra.transport is not None:
                extra.transport.close()
        if released.handed_to is not None:
            released.handed_to.connected(connection)

    def forget(self, connection: UpstreamConnection) -> None:
        """A connection that closed: the pool lets a waiter open a new one in its place."""
        waiter = self.pool.discard(connection.origin, connection)
        if waiter is not None:
            self._open(connection.origin, waiter)

    def _open(self, origin: Origin, waiter: Waiter) -> None:
        task = self._loop.create_task(self._connect(origin, waiter))
        self._opening.add(task)
        task.add_done_callback(self._opening.discard)

    async def _connect(self, origin: Origin, waiter: Waiter) -> None:
        connection: UpstreamConnection
        if is_h2c(origin):
            connection = H2cConnection(self, origin)  # type: ignore[assignment]
        else:
            connection = UpstreamConnection(self, origin)
        try:
            async with asyncio.timeout(self.config.connect_timeout):
                await self._loop.create_connection(
                    lambda: connection, origin[0], origin[1], **tls_arguments(origin)
                )
        except (OSError, TimeoutError) as exc:
            replacement = self.pool.discard(origin)
            if replacement is not None:
                self._open(origin, replacement)
            waiter.connect_failed(exc)
            return
        waiter.connected(connection)

    def sweep(self) -> None:
        for stale in self.pool.expire(self._loop.time()):
            stale.closed = True
            if stale.transport is not None:
                stale.transport.close()

    async def close(self) -> None:
        for task in list(self._opening):
            task.cancel()
        await asyncio.gather(*self._opening, return_exceptions=True)
        for idle in self.pool.drain_idle():
            idle.closed = True
            if idle.transport is not None:
                idle.transport.close()


__all__ = ["Connector", "Limits", "UpstreamConnection"]
