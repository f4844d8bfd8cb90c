"""Cleartext HTTP/2 to backends whose Service port declares `appProtocol: kubernetes.io/h2c`.

Where it sits: the pool (`connector.PooledConnector`) opens an `H2cConnection` instead of an
`connection.UpstreamConnection` for an origin marked `picker.H2C`. To the request cycle it is
the same thing (`contracts.Upstream`, the shell `shell.UpstreamShell`): bound to one cycle at a
time, handed the request as the HTTP/1.1 bytes every cycle writes, and calling back
`response_head`, `response_body` and `response_complete`. The HTTP/1.1 request is re-parsed here
(httptools) into one HTTP/2 stream: the cycle keeps a single request path, and h2c backends,
which are the uncommon case, pay for the translation instead of every HTTP/1.1 request.

Spec 003, "Backend references": such a backend is "spoken to in cleartext HTTP/2 by prior
knowledge" — the connection preface goes out at once (RFC 9113 §3.3), no Upgrade dance. One
stream runs at a time per connection, so the keep-alive pool, its limits and its retry rules
apply unchanged; multiplexing would save connections, not change what a client sees.
Connection-specific fields are dropped (RFC 9113 §8.2.2) and the Host becomes `:authority`.
The response streams back as it arrives, its trailers passed on (`response_trailers`): gRPC
backends (`BackendProtocol.GRPC`) are dialled here too, and their status is in the trailers.
"""

from __future__ import annotations

import asyncio
import logging
import sys

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import httptools

from coxswain_proxy.dataplane import errors
from coxswain_proxy.dataplane.contracts import Connector, UpstreamCallbacks
from coxswain_proxy.dataplane.http import heads
from coxswain_proxy.dataplane.upstream.picker import Origin, tls_arguments
from coxswain_proxy.dataplane.upstream.shell import UpstreamShell

# RFC 9113 §8.2.2: fields that only mean something to one HTTP/1.1 connection.
_CONNECTION_SPECIFIC = frozenset(
    {b"connection", b"keep-alive", b"proxy-connection", b"transfer-encoding", b"upgrade", b"host"}
)
# Stream identifiers are odd and below 2**31; long before that, start a fresh connection.
_LAST_STREAM = 1 << 30

_CONFIG = h2.config.H2Configuration(client_side=True, header_encoding=None)


class _QuietLog:
    """hpack's module logger, as hpack's coder sees it once `quiet_hpack` has run: its `debug`
    is `"".format`, a C call that takes any arguments and does nothing with them."""

    __slots__ = ()
    debug = staticmethod("".format)


def quiet_hpack() -> None:
    """hpack calls its logger's `debug` about 25 times per request (each integer and field it
    codes), a Python call each even with DEBUG off: 5-10 µs of a request's ~200. Unless that
    logger is enabled for DEBUG now, its calls become no-ops (enabling it later has no effect on
    hpack's own lines; h2's and the proxy's logs are untouched)."""
    coder = sys.modules[h2.connection.Encoder.__module__]  # hpack.hpack, as h2 imported it
    log = getattr(coder, "log", None)
    if isinstance(log, logging.Logger) and not log.isEnabledFor(logging.DEBUG):
        setattr(coder, "log", _QuietLog())  # noqa: B010 (a module attribute mypy cannot see)


quiet_hpack()


class H2cConnection(UpstreamShell):
    __slots__ = (
        "h2", "parser", "url", "fields", "stream", "deferred", "outbound", "ending", "goaway",
        "trailers", "scheme",
    )  # fmt: skip

    # A clean close is never the end of a response: a stream ends with END_STREAM, so the
    # shell's default (a lost connection) stands. Its `tunnel` stays None: an h2c stream is
    # not tunneled.

    def __init__(self, connector: Connector, origin: Origin, limit: int) -> None:
        super().__init__(connector, origin, limit)
        self.h2 = h2.connection.H2Connection(config=_CONFIG)
        self.parser = httptools.HttpRequestParser(self)
        self.url = b""
        self.fields: list[tuple[bytes, bytes]] = []
        self.stream = 0  # the bound cycle's stream; 0 before its headers went out
        self.deferred = False  # headers parsed, held to go out with END_STREAM if no body comes
        self.outbound = bytearray()  # request body waiting for flow-control window
        self.ending = False  # the request is complete: END_STREAM once `outbound` is sent
        self.goaway = False
        self.trailers: list[tuple[bytes, bytes]] = []  # the request's, sent with END_STREAM
        self.scheme = b"https" if tls_arguments(origin) else b"http"  # TLS: ALPN h2

    def bind(self, cycle: UpstreamCallbacks, head_only: bool) -> None:
        # A HEAD response ends with its HEADERS frame's END_STREAM: nothing special to do.
        del head_only
        self.cycle = cycle
        self.parser = httptools.HttpRequestParser(self)
        self.url = b""
        self.fields = []
        self.stream = 0
        self.deferred = False
        self.outbound.clear()
        self.ending = False
        self.trailers = []

    # ------------------------------------------------------------------ the request

    def write(self, data: bytes) -> None:
        if self.closed or self.cycle is None:
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            # Our own cycle wrote these bytes: failing here is a bug, answered as a 502.
            self._fail(errors.BadGateway(f"request not expressible over h2c: {exc}"))
            return
        self._flush()

    def on_url(self, url: bytes) -> None:
        self.url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self.fields.append((name.lower(), value))

    def on_headers_complete(self) -> None:
        fields = self.fields
        authority = next((v for n, v in fields if n == b"host"), b"")
        headers = [
            (b":method", self.parser.get_method()),
            (b":scheme", self.scheme),
            (b":authority", authority),
            (b":path", self.url or b"/"),
        ]
        body_follows = False
        for name, value in fields:
            if name in _CONNECTION_SPECIFIC:
                body_follows = body_follows or name == b"transfer-encoding"
                continue
            if name == b"te" and value.lower() != b"trailers":
                continue
            if name == b"content-length":
                body_follows = body_follows or value.strip() not in (b"", b"0")
            elif name == b"content-type" and value.startswith(b"application/grpc"):
                # gRPC over HTTP/2: "TE → "te" "trailers" # Used to detect incompatible
                # proxies"; the HTTP/1.1 head the cycle wrote dropped it as hop-by-hop.
                headers.append((b"te", b"trailers"))
            headers.append((name, value))
        self.fields = headers
        if body_follows:
            self._open_stream(end=False)
        else:
            # No body is coming: the message completes in this same feed, and the headers go
            # out then, with END_STREAM, as one frame.
            self.deferred = True

    def on_body(self, body: bytes) -> None:
        if self.deferred:
            self.deferred = False
            self._open_stream(end=False)
        self.outbound += body
        self._send_body()

    def on_message_complete(self) -> None:
        if self.deferred:
            self.deferred = False
            self._open_stream(end=True)
            return
        # Fields parsed after the head are the chunked body's trailer section (the client's
        # HTTP/2 trailers, `h2stream.StreamCycle.request_trailers`): they end the stream as a
        # trailing HEADERS frame (RFC 9113 §8.1), connection-specific ones dropped (§8.2.2).
        self.trailers = [(n, v) for n, v in self.fields if n not in _CONNECTION_SPECIFIC]
        self.fields = []
        self.ending = True
        self._send_body()

    def _open_stream(self, *, end: bool) -> None:
        self.stream = self.h2.get_next_available_stream_id()
        self.h2.send_headers(self.stream, self.fields, end_stream=end)
        self.fields = []

    def _send_body(self) -> None:
        stream, connection = self.stream, self.h2
        if not stream:
            return
        while self.outbound:
            size = min(
                len(self.outbound),
                connection.local_flow_control_window(stream),
                connection.max_outbound_frame_size,
            )
            if size <= 0:
                return  # the rest goes when the backend opens its window (WindowUpdated)
            chunk = bytes(self.outbound[:size])
            del self.outbound[:size]
            connection.send_data(stream, chunk)
        if self.ending:
            self.ending = False
            trailers, self.trailers = self.trailers, []
            if trailers:
                connection.send_headers(stream, trailers, end_stream=True)
            else:
                connection.end_stream(stream)

    # ------------------------------------------------------------------ the response

    def data_received(self, data: bytes) -> None:
        try:
            events = self.h2.receive_data(data)
        except h2.exceptions.ProtocolError as exc:
            self._flush()
            self._fail(errors.BadGateway(f"upstream broke HTTP/2: {exc}"))
            self.close()
            return
        for event in events:
            self._event(event)
            if self.closed:
                return
        self._flush()
        cycle = self.cycle
        if cycle is not None:
            cycle.flush()
        elif self.goaway:
            self.close()  # idle, and the backend will take no new stream here

    def _event(self, event: h2.events.Event) -> None:
        cycle = self.cycle
        stream = getattr(event, "stream_id", None)
        if isinstance(event, h2.events.WindowUpdated):
            if self.outbound or self.ending:
                self._send_body()
        elif isinstance(event, h2.events.ConnectionTerminated):
            self.goaway = True
            last = event.last_stream_id
            if cycle is not None and (last is None or self.stream > last):
                # Not processed by the backend: safe to fail as a connect failure (retried).
                self._fail(errors.UpstreamUnavailable("upstream sent GOAWAY"))
        elif cycle is None or stream != self.stream or not stream:
            return  # nothing bound, or a stream that is not ours (the server may push nothing)
        elif isinstance(
            event, (h2.events.ResponseReceived, h2.events.InformationalResponseReceived)
        ):
            self._head(cycle, event.headers)
        elif isinstance(event, h2.events.DataReceived):
            # Acknowledged at once: backpressure on the client's side pauses this transport's
            # reading (the ReadGate), which holds the backend through TCP instead.
            self.h2.acknowledge_received_data(event.flow_controlled_length, stream)
            if event.data:
                cycle.response_body(event.data)
        elif isinstance(event, h2.events.TrailersReceived):
            cycle.response_trailers(list(event.headers or ()))
        elif isinstance(event, h2.events.StreamEnded):
            self.stream = 0
            cycle.response_complete(not self.goaway and stream < _LAST_STREAM)
        elif isinstance(event, h2.events.StreamReset):
            self.stream = 0
            # A reset stream is a reset connection to the request on it: a connection failure.
            code = event.error_code
            self._fail(errors.ConnectionLost(f"upstream reset the stream (code {code})"))

    def _head(self, cycle: UpstreamCallbacks, raw: list[tuple[bytes, bytes]] | None) -> None:
        status = 0
        fields = heads.ResponseFields()
        size = 0
        for name, value in raw or ():
            size += len(name) + len(value) + 4
            if name == b":status":
                status = int(value)
            elif not name.startswith(b":"):
                fields.on_header(name, value)
        if size > self.limit:
            self._fail(errors.BadGateway("upstream response headers too large"))
            return
        cycle.response_head(status, fields)

    # ------------------------------------------------------------------ the connection

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self.h2.initiate_connection()
        self._flush()

    def _flush(self) -> None:
        data = self.h2.data_to_send()
        if data and self.transport is not None and not self.closed:
            self.transport.write(data)

    def _fail(self, exc: errors.DataplaneError) -> None:
        cycle, self.cycle = self.cycle, None
        self.close()
        if cycle is not None:
            cycle.upstream_failed(exc)


__all__ = ["H2cConnection"]
