"""The client side of the HTTP/1.1 path: one `asyncio.Protocol` per client connection.

Where it sits: `listeners` creates one `HttpConnection` per accepted connection (after the TLS
handshake on HTTPS ports). It parses requests with httptools, creates one
`request_cycle.RequestCycle` per request and runs them one at a time, in order (`dispatch.start`
when each one's turn comes), which is what HTTP/1.1 pipelining requires: a request parsed while
another is in flight waits in `queue` with reading paused. To its cycles it is a
`contracts.Downstream`: they write to it, pause its reading, and tell it when they are done.

Why the shape (uvicorn's httptools protocol): state grouped by lifetime — the connection's here,
one request's in its `RequestCycle` — and the parser's callbacks do as little as possible: collect
the URL and headers as bytes, count their size, hand the body on. Errors the client caused are
answered from precomputed bytes (`responses`) and the connection closed; a request that cannot
be parsed is refused only after the answers to the requests read whole before it (`refusing`),
since a client that pipelines is owed those first (RFC 9112 §9.3.2).

What llhttp leaves to this module and `headchecks` (RFC 9112): the HTTP-version (§2.3: only
1.0 and 1.1 are served), the request-target's length (§3), the transfer codings (§6.1), an
Upgrade that is not one (CONNECT; HTTP/1.0), and trailer fields, which llhttp reports as if
they were the next request's header fields.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import ssl
from collections import deque
from collections.abc import Callable
from typing import cast

import httptools

from coxswain_proxy.dataplane import errors, peercert, stats, tls
from coxswain_proxy.dataplane.contracts import Upstream
from coxswain_proxy.dataplane.http import (
    dispatch,
    flow,
    headchecks,
    heads,
    request_cycle,
    responses,
    trailers,
)
from coxswain_proxy.dataplane.http.heads import HTTP10, HTTP11
from coxswain_proxy.dataplane.runtime import Runtime

log = logging.getLogger(__name__)

HOST = b"host"
TRANSFER_ENCODING = b"transfer-encoding"
_OWS = headchecks.OWS
_CONNECTION_FIELDS = headchecks.CONNECTION_FIELDS
# How long a connection closed with a request body still arriving reads and drops what the
# client sends before it closes (nginx's lingering_timeout is 5 s too).
LINGER_SECONDS = 5.0


class _Detached:
    """A parser's protocol with no callbacks: httptools calls only those it finds."""

    __slots__ = ()


_DETACHED_PARSER = httptools.HttpRequestParser(_Detached())


class HttpConnection(asyncio.Protocol):
    __slots__ = (
        "rt", "port", "scheme", "transport", "parser", "gate", "client", "sni", "verified",
        "current", "queue", "parsing", "url", "headers", "size", "host", "says_connection",
        "clock", "last_active", "head_started", "closed", "tunnel", "write_paused", "drain",
        "forwarded", "limit", "outbox", "write", "lingering",
        "codings", "refusing", "target_limit",
    )  # fmt: skip

    def __init__(self, rt: Runtime, port: int, scheme: str) -> None:
        self.rt = rt
        self.port = port  # the routing port: which tables apply (spec 002)
        self.scheme = scheme  # "http" or "https"
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpRequestParser(self)
        self.gate = flow.ReadGate()
        self.client = ""  # the peer's address, for X-Forwarded-For
        self.sni: tuple[str, tuple[str, ...]] | None = None  # (server name, selected names)
        # The store its handshake verified its client under, and what the client presented.
        self.verified: peercert.ClientPeer | None = None
        self.current: request_cycle.RequestCycle | None = None  # the request being answered
        # Pipelined requests waiting their turn.
        self.queue: deque[request_cycle.RequestCycle] = deque()
        self.parsing: request_cycle.RequestCycle | None = None  # the request whose body arrives
        # The request head arriving: reset when it is complete, for the next one.
        self.url = b""
        self.headers: list[tuple[bytes, bytes]] = []
        self.size = 0  # bytes of request line and headers so far
        self.host: bytes | None = None  # its Host field; dispatch.MANY_HOSTS after a second one
        self.says_connection = False  # it has a Connection or Proxy-Connection field
        self.clock = rt.loop.time
        self.last_active = self.clock()
        self.head_started = 0.0  # when the current request's first byte came; 0: between requests
        self.closed = False
        self.tunnel: asyncio.Transport | None = None  # after an Upgrade: the upstream transport
        self.write_paused = False
        self.drain = False  # its listener was removed: close after the request in flight
        self.forwarded = b""  # heads.forwarded_tail: fixed for the connection, built once
        self.limit = rt.config.max_header_bytes
        self.outbox = rt.outbox  # what goes to the client goes through it, in order
        self.codings: bytes | None = None  # the head's Transfer-Encoding values, joined
        self.refusing = 0  # a request could not be parsed: the status it gets in its turn
        self.target_limit = rt.config.max_target_bytes
        self.lingering = 0.0  # closed with a body still arriving: when the half-close began

    # ------------------------------------------------------------------ connection lifetime

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses: a cast, not an isinstance.
        self.transport = cast(asyncio.Transport, transport)
        self.gate.transport = self.transport
        flow.limit_writes(self.transport)
        # What a request cycle sends the client: the outbox's own write, bound to this transport
        # (one call, as if the cycle made it; the outbox drops what a closed transport is sent).
        self.write: Callable[[bytes], None] = functools.partial(self.outbox.write, self.transport)
        peer = transport.get_extra_info("peername")
        self.client = peer[0] if peer else ""
        self.forwarded = heads.forwarded_tail(self.client, self.scheme)
        sslobj = transport.get_extra_info("ssl_object")
        if isinstance(sslobj, ssl.SSLObject):
            self.sni = getattr(sslobj, tls.SNI_ATTRIBUTE, None)
            trust = getattr(sslobj, tls.VERIFIED_ATTRIBUTE, None)
            if trust is not None:
                self.verified = peercert.ClientPeer(trust, sslobj)
        self.rt.connections.add(self)
        self.rt.stats.connections += 1

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.rt.connections.discard(self)
        self.rt.stats.connections -= 1
        if self.rt.draining and not self.rt.connections:
            self.rt.idle.set()
        if self.tunnel is not None:
            self.tunnel.close()
        for cycle in (self.current, *self.queue):
            if cycle is not None:
                cycle.abandon()
        self.current = None
        self.queue.clear()
        # The parser holds this connection's bound callbacks: a reference cycle per
        # connection, which only the garbage collector could free (with a new connection per
        # request, 500 young collections and 4 full ones per 20,000). Nothing is fed to a
        # closed connection's parser (`data_received`), so it goes now.
        self.parser = _DETACHED_PARSER

    def pause_writing(self) -> None:
        self.write_paused = True
        if self.current is not None:
            self.current.pause_upstream()

    def resume_writing(self) -> None:
        self.write_paused = False
        if self.current is not None:
            self.current.resume_upstream()

    def eof_received(self) -> bool | None:
        # A client that half-closes still gets the answers to what it sent; one that ends
        # while the proxy lingers has read its answer: the transport may close.
        return self.current is not None and not self.lingering

    def data_received(self, data: bytes) -> None:
        if self.tunnel is not None:
            self.tunnel.write(data)
            return
        if self.refusing or self.closed:
            # What follows a request that could not be parsed, or what a client still sends
            # while the proxy lingers after answering (`close`), is read and dropped.
            return
        self.last_active = self.clock()
        while True:
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserUpgrade as exc:
                data = data[exc.args[0] :]
                if self._upgrade(data) or not data or self.closed:
                    return
                continue  # no protocol switch after all: what follows is the next request
            except httptools.HttpParserCallbackError as exc:
                cause = exc.__context__
                status = cause.status if isinstance(cause, errors.DataplaneError) else 500
                if not isinstance(cause, errors.DataplaneError):
                    log.error("request handling failed", exc_info=cause)
                self._unparsable(status)
            except httptools.HttpParserInvalidMethodError:
                self._unparsable(self._unknown_method(data))
            except httptools.HttpParserError:
                # "malformed requests answered 400 and closed" (issue 7, item 9).
                self._unparsable(400)
            return

    def _unknown_method(self, data: bytes) -> int:
        """llhttp knows a fixed set of methods: one it does not may still be a token.

        RFC 9110 §9.1: "An origin server that receives a request method that is unrecognized
        or not implemented SHOULD respond with the 501 (Not Implemented) status code"; what is
        not a token at all is a malformed request line (400). The method is read from `data`
        only when no request is in flight (else where it starts in `data` is unknown, and 400
        does).
        """
        if self.current is None and not self.queue and headchecks.token_first(data):
            return 501
        return 400

    def _unparsable(self, status: int) -> None:
        """The request being read cannot be parsed: it gets `status`, then the connection closes.

        The requests read whole before it are answered first, in order: a parse error in a
        pipelined request must not take the answers owed to the ones before it (RFC 9112 §9.3.2:
        "A server MAY process a sequence of pipelined requests in parallel ... but it MUST send
        the corresponding responses in the same order that the corresponding requests were
        received"). The data after a request that said `Connection: close` is never answered
        at all: that request's answer closes the connection first (RFC 9112 §9.6: "A server
        that receives a "close" connection option ... MUST NOT process any further requests").
        """
        parsing, self.parsing = self.parsing, None
        if parsing is not None and parsing is not self.current:
            self.queue.pop()  # its body broke while it waited its turn: it is the one refused
            parsing.abandon()
        elif parsing is not None or self.current is None:
            self.fail(status)
            return
        # Reading goes on (what arrives is dropped: a close with unread bytes would reset the
        # connection, and the answers with it); the refused head is no longer arriving.
        self.refusing = status
        self.head_started = 0.0

    def fail(self, status: int) -> None:
        """Answer an error the connection cannot recover from, then close."""
        if self.transport is None or self.closed:
            return
        if self.current is None or not self.current.answered():
            self.outbox.write(self.transport, responses.canned(status, close=True))
        self.rt.stats.request(stats.NO_ROUTE, status)
        self.close()

    def close(self) -> None:
        transport = self.transport
        if self.lingering and transport is not None:
            # Closed again while lingering (the data plane's close after its grace): now.
            self.lingering = 0.0
            transport.close()
            return
        if transport is not None and not self.closed:
            self.closed = True
            self.outbox.flush()  # what was sent before goes out before the close
            parsing = self.parsing
            if (
                parsing is not None
                and not parsing.request_done
                and heads.has_body(parsing.headers)
                and transport.can_write_eof()
            ):
                # Answered (a 413, a 401) with the request's body still arriving: a close with
                # unread bytes resets the connection, and the client may lose the answer with
                # it. RFC 9112 §9.6: "a server ... SHOULD initiate a lingering close: first
                # half-close ... then continue to read from the connection ... until it
                # receives a corresponding close by the client, or until the server is
                # reasonably certain that its own TCP stack has received the client's
                # acknowledgement". What arrives is dropped; the sweep ends it after
                # LINGER_SECONDS. (TLS has no half-close: it closes at once.)
                transport.write_eof()
                self.lingering = self.clock()
                self.gate.held = 0
                transport.resume_reading()
                return
            transport.close()

    def sweep(self, now: float) -> None:
        """Called every second: a client too slow with a request's head or body gets 408, a
        connection idle between requests is closed. The clocks: `head_started` from a head's
        first byte; `last_active` from the last read inside a body, and between requests from
        the last read or the last sweep that saw a response under way (so from its end)."""
        if self.closed:
            if self.lingering and now - self.lingering > LINGER_SECONDS:
                self.lingering = 0.0
                assert self.transport is not None
                self.transport.close()
            return
        if self.tunnel is not None:
            return  # a tunnel's bytes are not HTTP requests: none of these bounds apply
        if self.gate.held:
            # The proxy holds reading (a pipelined request waits its turn, the upstream is
            # full): what the client sent may be waiting unread, so its clocks stand still.
            self.last_active = now
            if self.head_started:
                self.head_started = now
            return
        # RFC 9110 §15.5.9: "The 408 (Request Timeout) status code indicates that the server
        # did not receive a complete request message within the time that it was prepared to
        # wait." RFC 9112 §9.5: "A client or server that wishes to time out SHOULD issue a
        # graceful close on the connection."
        config, counts = self.rt.config, self.rt.stats
        if self.head_started:
            if now - self.head_started > config.header_timeout:
                counts.client_timeout(stats.HEAD)
                if self.current is None:
                    self.fail(408)
                else:  # a 408 would read as the answer to the request still owed one
                    self.close()
        elif self.parsing is not None:
            if now - self.last_active > config.body_timeout:
                counts.client_timeout(stats.BODY)
                self.fail(408)
        elif self.current is not None:
            self.last_active = now  # a response under way: idle time starts at its end
        elif now - self.last_active > config.keepalive_timeout:
            counts.client_timeout(stats.IDLE)
            self.close()

    def shutdown(self) -> None:
        """Stop taking requests: close now if idle, else after the response in flight (a
        lingering close goes on: the grace lets the client read its answer)."""
        if self.current is None and not self.head_started and not self.lingering:
            self.close()

    # ------------------------------------------------------------------ parser callbacks

    def on_message_begin(self) -> None:
        # The time data_received just read: when this request's first byte came.
        self.head_started = self.last_active

    def on_url(self, url: bytes) -> None:
        target = self.url = self.url + url
        # RFC 9112 §3: "A server that receives a request-target longer than any URI it wishes
        # to parse MUST respond with a 414 (URI Too Long) status code".
        if len(target) > self.target_limit:
            raise errors.TargetTooLong()
        size = self.size = self.size + len(url)
        if size > self.limit:
            raise errors.HeadersTooLarge()

    def on_header(self, name: bytes, value: bytes) -> None:
        length = len(name)
        size = self.size = self.size + length + len(value) + 4
        if size > self.limit:
            raise errors.HeadersTooLarge()
        self.headers.append((name, value))
        if length == 4:
            if name.lower() == HOST:
                # llhttp leaves a value's trailing whitespace on; RFC 9112 §5.1 excludes it.
                value = value.rstrip(_OWS)
                self.host = value if self.host is None else dispatch.MANY_HOSTS
        elif (length == 10 or length == 16) and name.lower() in _CONNECTION_FIELDS:
            self.says_connection = True
        elif length == 17 and name.lower() == TRANSFER_ENCODING:
            codings = self.codings
            self.codings = value if codings is None else codings + b"," + value

    def on_headers_complete(self) -> None:
        self.head_started = 0.0
        parser = self.parser
        keep_alive = parser.should_keep_alive()
        # llhttp keeps HTTP/1.1 open unless a Connection field says close, and HTTP/1.0 only
        # when one says keep-alive: kept open without one, the request is HTTP/1.1, and the
        # version (a string the parser formats anew each time) need not be asked.
        if keep_alive and not self.says_connection:
            version = HTTP11
        else:
            version = parser.get_http_version()
            # RFC 9110 §15.6.6: 505 "indicates that the server does not support, or refuses
            # to support, the major version of HTTP that was used in the request message";
            # llhttp reads 0.9 and 2.0 as well, which are never forwarded as 1.1.
            if version != HTTP11 and version != HTTP10:
                raise errors.VersionNotSupported()
            if keep_alive and version == HTTP10:
                keep_alive = not headchecks.says_close(self.headers)
        if self.codings is not None:
            headchecks.check_codings(self.codings, version)
        method = parser.get_method()
        upgrade = parser.should_upgrade()
        if upgrade:
            upgrade = headchecks.switches(method, version, self.headers)
        # The head goes to its cycle whole: a request waiting its turn keeps its own Host
        # while the ones pipelined behind it are parsed.
        cycle = request_cycle.RequestCycle(
            self, self.rt, method, self.url, self.headers, version, keep_alive, upgrade, self.host
        )
        self.url, self.headers, self.size, self.host = b"", [], 0, None
        self.says_connection = False
        self.codings = None
        self.parsing = cycle
        if self.current is None:
            self.current = cycle
            dispatch.start(cycle)
        else:
            self.queue.append(cycle)
            self.gate.pause(flow.PIPELINE)

    def on_body(self, body: bytes) -> None:
        if self.parsing is not None:
            self.parsing.request_body(body)

    def on_message_complete(self) -> None:
        parsing, self.parsing = self.parsing, None
        if self.size:
            # Trailer fields (a chunked body's) came through on_header: they are not the next
            # request's. They go upstream in the body's own last chunk, less those RFC 9110
            # §6.5.1 keeps out of trailers (`trailers`); counted against the head's size bound.
            fields = self.headers
            self.headers, self.size, self.host, self.codings = [], 0, None, None
            self.says_connection = False
            if parsing is not None:
                parsing.request_complete(trailers.last_chunk(trailers.relayable(fields)))
            return
        if parsing is not None:
            parsing.request_complete()

    # ------------------------------------------------------------------ request cycles

    def finished(self, cycle: object, keep_alive: bool) -> None:
        """The cycle answered and its request was read whole (or will not be)."""
        if cycle is not self.current:
            return
        if not keep_alive or self.rt.draining or self.drain:
            self.close()
            return
        queue = self.queue
        if queue:
            self.current = queue.popleft()
            dispatch.start(self.current)
        else:
            self.current = None
            if self.refusing:
                self.fail(self.refusing)  # the request that could not be parsed: its turn
                return
        if not queue and self.gate.held:
            self.gate.resume(flow.PIPELINE)

    def _upgrade(self, rest: bytes) -> bool:
        """llhttp stopped after a request that may switch protocols: whether it does (`rest`
        is then its upstream's), or not (a refused CONNECT: `rest` is the next request)."""
        queue = self.queue
        cycle = queue[-1] if queue else self.current  # the request just read
        if cycle is None or not cycle.upgrade:
            return False
        self.gate.pause(flow.UPGRADE)
        cycle.upgrade_data(rest)
        return True

    def become_tunnel(self, upstream: Upstream) -> None:
        """After a 101: bytes flow both ways untouched until either side closes."""
        self.outbox.flush()  # from here the tunnel writes directly: what is held goes first
        transport = self.transport
        assert transport is not None
        upstream.tunnel = transport
        self.tunnel = upstream.transport
        self.current = None
        self.gate.resume(flow.UPGRADE)
