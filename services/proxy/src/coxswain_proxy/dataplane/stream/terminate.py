"""TLS termination on a TLS listener: the relay's client connection decrypted in place.

Where it sits: `tls_relay.TlsRelay` has read the client's ClientHello (still held, unanswered)
and routed it to a match that terminates (issue 16, the Gateway API's TLSRouteModeTerminate:
"terminate with the listener's certificate and relay TCP"). `start` runs the server side of the
handshake on the client's TCP connection with the context the port's store selected for the
offered name (`compiled.Streams.tls`, chosen exactly as an HTTPS port chooses: exact name,
wildcards nearest first, the default), and gives the relay a `TlsTransport`; the relay then dials
the backend and relays plaintext both ways, its client `RelaySide` reading from that transport.

Why not `loop.start_tls`: the loop's TLS transport cannot half-close. It has no `write_eof`, and
it answers the peer's close_notify with its own and closes, so a client that sends its request
and then its close_notify (as a TCP client sends its FIN) would lose the answer. TLS closes each
direction on its own (RFC 8446 §6.1: a close_notify "does not have any effect on its read side"),
and OpenSSL reads on after sending one. So the TLS here is an `ssl.SSLObject` over memory BIOs on
the raw transport, which passes each end on as the other end of a TCP relay is:
- the client's close_notify (or a bare FIN) is the client side's EOF, passed on to the backend as
  `write_eof()`, while the backend's answer still reaches the client;
- the backend's EOF becomes the proxy's close_notify followed by a TCP FIN (`write_eof`), while
  what the client still sends reaches the backend.

The ClientHello already read from the socket goes into the incoming BIO first. No ALPN is
offered: what is relayed is not known to be HTTP. The handshake is held to the relay's
`StreamLimits.hello_timeout` from the accept by its sweep.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import Any, cast

from coxswain_proxy.dataplane.stream.relay import RelaySide, StreamRelay

log = logging.getLogger(__name__)

__all__ = ["TlsTransport", "start"]


async def start(relay: StreamRelay, context: ssl.SSLContext) -> asyncio.Transport | None:
    """The client's TLS transport once the handshake is done; `None` when it failed (the relay
    is left to refuse). Cancelled when the relay is closed meanwhile."""
    client = relay.client
    raw = client.transport
    if raw is None or raw.is_closing():
        return None
    held, relay.replay = relay.replay, []  # the ClientHello: the TLS's, not the backend's
    tls = TlsTransport(raw, context, client, relay.rt.loop.create_future())
    raw.set_protocol(_Records(tls))
    raw.resume_reading()  # paused by the relay once the ClientHello was whole
    tls.received(b"".join(held))
    try:
        await tls.handshake
    except asyncio.CancelledError:
        raw.abort()
        raise
    except (OSError, EOFError):  # ssl.SSLError is an OSError, as is a reset
        return None
    if raw.is_closing() or relay.closed:
        raw.abort()
        return None
    client.transport = tls
    return tls


class _Records(asyncio.Protocol):
    """The raw connection's protocol: TLS records in, to the `TlsTransport` they belong to."""

    __slots__ = ("tls",)

    def __init__(self, tls: TlsTransport) -> None:
        self.tls = tls

    def data_received(self, data: bytes) -> None:
        self.tls.received(data)

    def eof_received(self) -> bool:
        self.tls.raw_eof()
        return True  # the other direction may still be sending

    def pause_writing(self) -> None:
        self.tls.side.pause_writing()

    def resume_writing(self) -> None:
        self.tls.side.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self.tls.lost(exc)
        del self.tls  # the transport and its protocol point at each other


class TlsTransport(asyncio.Transport):
    """The plaintext face of a terminated client connection, as a relay side writes to it and
    reads from it; every byte crosses `raw`, the accepted TCP transport, as TLS records."""

    __slots__ = ("raw", "tls", "incoming", "outgoing", "side", "handshake", "paused", "ended",
                 "fin", "shut")  # fmt: skip

    def __init__(
        self,
        raw: asyncio.Transport,
        context: ssl.SSLContext,
        side: RelaySide,
        handshake: asyncio.Future[None],
    ) -> None:
        super().__init__()
        self.raw = raw
        self.incoming, self.outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = context.wrap_bio(self.incoming, self.outgoing, server_side=True)
        self.side = side
        self.handshake = handshake
        self.paused = False  # the side asked for no more plaintext for now
        self.ended = False  # the client's close_notify (or FIN) has been passed on
        self.fin = False  # the client's FIN has arrived on the raw connection
        self.shut = False  # the proxy's close_notify has been sent

    # -- records in

    def received(self, data: bytes) -> None:
        self.incoming.write(data)
        if self.handshake.cancelled():
            return  # the relay was closed meanwhile: the connection is being aborted
        if not self.handshake.done():
            try:
                self.tls.do_handshake()
            except ssl.SSLWantReadError:
                self._flush()
                return
            except ssl.SSLError as exc:
                log.debug("TLS handshake failed: %s", exc)
                self._flush()  # the alert that says why
                self.raw.close()
                self.handshake.set_exception(exc)
                return
            self._flush()
            self.handshake.set_result(None)
            # Nothing more is read until the backend is connected (`StreamRelay._joined`).
            self.pause_reading()
            return
        self._read()

    def _read(self) -> None:
        """Plaintext into the side's own read buffer, until the records run out or it pauses."""
        side, tls = self.side, self.tls
        while not self.paused and not self.ended:
            view = side.get_buffer(-1)
            try:
                # Into the buffer given, no bytes object made: the count read (typeshed says bytes).
                n = cast(int, tls.read(len(view), view))
            except ssl.SSLWantReadError:
                if self.fin:  # every whole record before the FIN has been read
                    self._end()
                break
            except ssl.SSLZeroReturnError:
                n = 0
            except ssl.SSLError as exc:
                log.debug("TLS record refused: %s", exc)
                self._flush()
                self.raw.abort()
                return
            if not n:  # the client's close_notify: its direction has ended
                self._end()
                break
            side.buffer_updated(n)
        self._flush()  # what reading made: a session ticket, a key update, an alert

    def raw_eof(self) -> None:
        """The client's FIN: its direction ends once the records before it are read (now, or
        when reading resumes), with or without a close_notify among them."""
        # Not told to the BIO: OpenSSL would take it for a truncation, alert the client and
        # refuse to write the answer still to come.
        self.fin = True
        if not self.handshake.done():
            self.handshake.set_exception(EOFError("the client closed during the handshake"))
            return
        self._read()

    def _end(self) -> None:
        if not self.ended:
            self.ended = True
            self.side.eof_received()

    def lost(self, exc: Exception | None) -> None:
        if not self.handshake.done():
            self.handshake.set_exception(exc or EOFError("the connection was lost"))
        self.side.connection_lost(exc)
        del self.side

    def _flush(self) -> None:
        if self.outgoing.pending:
            self.raw.write(self.outgoing.read())

    # -- plaintext out (asyncio.WriteTransport)

    def write(self, data: Any) -> None:
        if self.shut or self.raw.is_closing():
            return
        self.tls.write(data)
        self.raw.write(self.outgoing.read())

    def can_write_eof(self) -> bool:
        return True

    def write_eof(self) -> None:
        """The proxy's close_notify, then the TCP FIN; the client may go on sending."""
        if self._shutdown():
            self.raw.write_eof()

    def _shutdown(self) -> bool:
        if self.shut or self.raw.is_closing():
            return False
        self.shut = True
        try:
            self.tls.unwrap()  # sends the close_notify; the client's may come later
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLError as exc:
            log.debug("TLS close failed: %s", exc)
        self._flush()
        return True

    def get_write_buffer_size(self) -> int:
        return self.raw.get_write_buffer_size()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.raw.set_write_buffer_limits(high, low)

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self.raw.get_write_buffer_limits()

    # -- reading (asyncio.ReadTransport)

    def pause_reading(self) -> None:
        self.paused = True
        self.raw.pause_reading()

    def resume_reading(self) -> None:
        if not self.paused:
            return
        self.paused = False
        self.raw.resume_reading()
        # Records that arrived before the pause are still in the incoming BIO.
        self._read()

    def is_reading(self) -> bool:
        return not self.paused

    # -- the connection (asyncio.BaseTransport)

    def close(self) -> None:
        """The close_notify, then the raw close once what is queued is written."""
        self._shutdown()
        self.raw.close()

    def abort(self) -> None:
        self.raw.abort()

    def is_closing(self) -> bool:
        return self.raw.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "ssl_object":
            return self.tls
        return self.raw.get_extra_info(name, default)

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        raise NotImplementedError("a terminated connection's side is fixed")

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self.side
