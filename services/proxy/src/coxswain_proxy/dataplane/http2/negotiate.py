"""Which protocol a client connection speaks: HTTP/2 or HTTP/1.1, decided once per connection.

Where it sits: `listeners` makes each accepted connection's protocol through here. On a TLS port
ALPN has decided by the time the handshake hands over (`AlpnChoice`): RFC 9113 §3.2, "The "h2"
string identifies the protocol where HTTP/2 uses TLS". On a cleartext port a client may start
with the connection preface at once (RFC 9113 §3.3, "prior knowledge"); `PrefaceSniff` reads
the first bytes and passes the connection on to whichever protocol they are. An HTTP/1.1
connection is created at once either way, so it is swept (idle, slowloris) from its start, and
once it has the transport it is the transport's protocol: its requests see nothing of this.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from typing import cast

from coxswain_proxy.dataplane.http.http11 import HttpConnection
from coxswain_proxy.dataplane.http2.server import H2ServerConnection
from coxswain_proxy.dataplane.runtime import Runtime

# RFC 9113 §3.4: "the connection preface starts with the string PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def _to_h2(rt: Runtime, http: HttpConnection, transport: asyncio.Transport, scheme: str) -> None:
    """The HTTP/1.1 connection made for `transport` steps aside for an HTTP/2 one."""
    if http in rt.connections:
        rt.connections.discard(http)
        rt.stats.connections -= 1
    http.closed = True
    conn = H2ServerConnection(rt, http.port, scheme, http.sni, http.verified)
    transport.set_protocol(conn)
    conn.connection_made(transport)


class PrefaceSniff(asyncio.Protocol):
    """A cleartext connection until its first bytes say HTTP/1.1 or the HTTP/2 preface."""

    __slots__ = ("rt", "http", "transport", "seen")

    def __init__(self, rt: Runtime, port: int) -> None:
        self.rt = rt
        self.http = HttpConnection(rt, port, "http")
        self.transport: asyncio.Transport | None = None
        self.seen = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)
        self.http.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        transport = self.transport
        assert transport is not None
        seen = self.seen + data
        if len(seen) < len(PREFACE) and PREFACE.startswith(seen):
            self.seen = seen  # a prefix of the preface so far: wait for the rest
            return
        if seen.startswith(PREFACE):
            _to_h2(self.rt, self.http, transport, "http")
            protocol = cast(asyncio.Protocol, transport.get_protocol())
        else:
            transport.set_protocol(self.http)
            protocol = self.http
        protocol.data_received(seen)

    def eof_received(self) -> bool | None:
        return self.http.eof_received()

    def connection_lost(self, exc: Exception | None) -> None:
        self.http.connection_lost(exc)

    def pause_writing(self) -> None:
        self.http.pause_writing()

    def resume_writing(self) -> None:
        self.http.resume_writing()


class AlpnChoice(asyncio.Protocol):
    """What a TLS handshake hands over to: the protocol ALPN chose, in its place at once."""

    __slots__ = ("rt", "port", "chosen")

    def __init__(self, rt: Runtime, port: int) -> None:
        self.rt = rt
        self.port = port
        self.chosen: asyncio.Protocol | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        tls_transport = cast(asyncio.Transport, transport)
        http = HttpConnection(self.rt, self.port, "https")
        tls_transport.set_protocol(http)
        http.connection_made(transport)
        self.chosen = http
        sslobj = transport.get_extra_info("ssl_object")
        if isinstance(sslobj, ssl.SSLObject) and sslobj.selected_alpn_protocol() == "h2":
            _to_h2(self.rt, http, tls_transport, "https")
            self.chosen = cast(asyncio.Protocol, tls_transport.get_protocol())

    def data_received(self, data: bytes) -> None:
        # What the handshake held back, handed over just after `connection_made`.
        assert self.chosen is not None
        self.chosen.data_received(data)


def cleartext(rt: Runtime, port: int) -> Callable[[], asyncio.Protocol]:
    return lambda: PrefaceSniff(rt, port)


def encrypted(rt: Runtime, port: int) -> Callable[[], asyncio.Protocol]:
    return lambda: AlpnChoice(rt, port)


__all__ = ["PREFACE", "AlpnChoice", "PrefaceSniff", "cleartext", "encrypted"]
