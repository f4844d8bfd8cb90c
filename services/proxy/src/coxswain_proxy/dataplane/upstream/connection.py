"""An HTTP/1.1 connection to a backend: the request written as it is, the response parsed.

Where it sits: the pool (`connector.PooledConnector`) opens one for an origin not marked h2c (over
TLS when the origin says so: `picker.tls_arguments`) and lends it to one request cycle at a time,
which binds itself (`bind`) and writes its request; the response is parsed here with httptools and
handed to that cycle through `contracts.UpstreamCallbacks`. What every upstream connection does
alike (its gate, its close, back-pressure) is `shell.UpstreamShell`. An idle connection that
receives anything or closes is dropped from the pool: a backend may close keep-alives whenever it
likes.

The parser hands each response field straight to the connection's `heads.ResponseFields`, which
sorts it once (passes on, or hop-by-hop); the head's size is bounded per read, not per field.
Requests go out through the worker's `outbox.Outbox`, like everything sent to clients.
"""

from __future__ import annotations

import httptools

from coxswain_proxy.dataplane import errors
from coxswain_proxy.dataplane.contracts import Connector, UpstreamCallbacks
from coxswain_proxy.dataplane.http import heads
from coxswain_proxy.dataplane.http.outbox import Outbox
from coxswain_proxy.dataplane.upstream.picker import Origin
from coxswain_proxy.dataplane.upstream.shell import UpstreamShell

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


class UpstreamConnection(UpstreamShell):
    __slots__ = ("parser", "fields", "size", "head_only", "outbox")

    # RFC 9112 §6.3 (8): a response delimited by the close ends cleanly with it.
    clean_close = errors.UpstreamClosed

    def __init__(self, connector: Connector, origin: Origin, limit: int, outbox: Outbox) -> None:
        super().__init__(connector, origin, limit)
        self.fields = heads.ResponseFields()  # the head arriving
        self.parser = _parser(self)
        # Bytes read while the response head is awaited (a bound on its size, counted per read
        # rather than per field); -1 once it has come.
        self.size = -1
        self.head_only = False  # the bound request is a HEAD
        self.outbox = outbox

    def bind(self, cycle: UpstreamCallbacks, head_only: bool) -> None:
        self.cycle = cycle
        self.head_only = head_only
        self.fields.clear()
        self.size = 0

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.closed:
            self.outbox.write(self.transport, data)

    def data_received(self, data: bytes) -> None:
        if self.tunnel is not None:
            self.tunnel.write(data)
            return
        cycle = self.cycle
        if cycle is None:
            self.close()  # an idle connection has nothing to say: it cannot be trusted again
            return
        if self.size >= 0:
            self.size += len(data)
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade as exc:
            cycle.upstream_upgraded(data[exc.args[0] :])
            return
        except httptools.HttpParserCallbackError as exc:
            if isinstance(exc.__context__, HeadDone):
                self.parser = _parser(self)
            else:
                self._broken(cycle, exc.__context__)
        except httptools.HttpParserError as exc:
            self._broken(cycle, exc)
        else:
            if self.size > self.limit:
                # A head still arriving past the limit: 502 (issue 7, item 3).
                self._broken(cycle, errors.BadGateway(_TOO_LARGE))
        cycle.flush()

    def _broken(self, cycle: UpstreamCallbacks, cause: BaseException | None) -> None:
        if not isinstance(cause, errors.DataplaneError):
            cause = errors.BadGateway(f"upstream sent malformed HTTP: {cause}")
        self.cycle = None
        self.close()
        cycle.upstream_failed(cause)

    # ------------------------------------------------------------------ parser callbacks

    def on_headers_complete(self) -> None:
        fields = self.fields
        # What was read may run on into the body: only then are the fields counted.
        if self.size > self.limit and fields.size() > self.limit:
            # Upstream response headers beyond the limit: 502 (issue 7, item 3).
            raise errors.BadGateway(_TOO_LARGE)
        if self.cycle is not None:
            status = self.parser.get_status_code()
            self.cycle.response_head(status, fields)
            if status < 200:  # an interim response: the next head follows
                self.size = 0
                fields.clear()
            else:
                self.size = -1
            if self.head_only and status >= 200 and self.cycle is not None:
                self.cycle.response_complete(self.parser.should_keep_alive())
                raise HeadDone()

    def on_body(self, body: bytes) -> None:
        if self.cycle is not None:
            self.cycle.response_body(body)

    def on_message_complete(self) -> None:
        cycle = self.cycle
        if cycle is not None and self.size < 0:  # a final response (interim ones go on)
            cycle.response_complete(self.parser.should_keep_alive())


__all__ = ["HeadDone", "UpstreamConnection"]
