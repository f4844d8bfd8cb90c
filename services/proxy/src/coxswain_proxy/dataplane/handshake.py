"""An HTTPS client from its accept until its TLS handshake is done, bounded in time.

Where it sits: `listeners` serves an HTTPS port as plain TCP whose protocol is a `Handshake`.
It upgrades the transport with `loop.start_tls` and, once the handshake is done, hands the TLS
transport to a new `http.http11.HttpConnection`. Until then it sits in `Runtime.handshakes`, where
the data plane's once-a-second sweep (`core.Dataplane.sweep`) ends it once it has taken longer
than `Config.handshake_timeout` — a client that connects and says nothing, or sends half a
ClientHello — and counts it as a `handshake` client timeout.

Why not `create_server(ssl=..., ssl_handshake_timeout=...)`: the loop then ends a late
handshake itself and tells no protocol of ours, so it could not be counted. The TLS transport
is the loop's own SSL protocol either way, so nothing changes once the handshake is done; the
cost is one task per HTTPS connection, next to a handshake's milliseconds of cryptography.

The one subtlety: uvloop starts reading as soon as `connection_made` returns, and start_tls
runs a loop iteration later, so the ClientHello usually reaches this plain protocol first. It
is held (reading paused) and given to the TLS protocol before that protocol starts its
handshake, which reads it from its incoming buffer as if it had just arrived.

A port that decides by the server name before any TLS (a `Peek`: an Ingress host passed through
with ssl-passthrough, or one whose clients' certificates are asked for under a CA of its own,
auth-tls-secret) reads the whole ClientHello first (`stream.clienthello`, bounded as a TLS
listener's is, and within the same handshake time). A name passed through is handed, with
every byte read, to a TLS relay (`Peek.relay`), which replays them to the backend; any other
starts its handshake with the context the name chose (its own client CA) or the port's front.
Only such a port pays for the read: the others start their handshake as before.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from coxswain_proxy.dataplane import stats
from coxswain_proxy.dataplane.runtime import Runtime
from coxswain_proxy.dataplane.stream.clienthello import ClientHelloReader, NotClientHello

if TYPE_CHECKING:
    from coxswain_proxy.dataplane.stream.compiled import PortStreams
    from coxswain_proxy.dataplane.tls import SniStore

# The loop's own handshake timer, past the sweep's (which runs every second): a backstop only.
BACKSTOP_SECONDS = 5.0


def pass_on(raw: asyncio.Transport, held: list[bytes]) -> None:
    """Give bytes read before start_tls to the TLS protocol now on `raw`, before it starts its
    handshake (scheduled with `call_soon` just before `start_tls`; `stream/terminate.py` too)."""
    protocol = raw.get_protocol()
    for data in held:
        if not hasattr(protocol, "get_buffer"):
            cast(asyncio.Protocol, protocol).data_received(data)
            continue
        buffered = cast(asyncio.BufferedProtocol, protocol)
        view = memoryview(data)
        while view:
            buffer = memoryview(buffered.get_buffer(len(view)))
            size = min(len(buffer), len(view))
            buffer[:size] = view[:size]
            buffered.buffer_updated(size)
            view = view[size:]


@dataclass(frozen=True, slots=True)
class Peek:
    """What a port decides by the ClientHello's server name, read before any TLS."""

    streams: PortStreams | None  # the names passed through unread (ssl-passthrough)
    store: SniStore | None  # the names whose clients' certificates are asked for their own way
    # Hands the plain transport, and every byte read from it, to a TLS relay.
    relay: Callable[[asyncio.Transport, list[bytes]], None]


class Handshake(asyncio.Protocol):
    """The plain TCP transport's protocol until start_tls, then the TLS transport's until the
    handshake is done: either way, what arrives is held for whoever comes next."""

    __slots__ = (
        "rt", "context", "connection", "started", "raw", "task", "held", "upgrading", "peek",
        "reader",
    )  # fmt: skip

    def __init__(
        self,
        rt: Runtime,
        context: ssl.SSLContext,
        connection: Callable[[], asyncio.Protocol],
        peek: Peek | None = None,
    ) -> None:
        self.rt = rt
        self.context = context
        self.connection = connection  # makes the protocol the TLS transport is handed to
        self.started = 0.0  # the loop time of the accept
        self.raw: asyncio.Transport | None = None  # None again if it closed before start_tls
        self.task: asyncio.Task[None] | None = None
        self.held: list[bytes] = []  # before start_tls: TLS records; after: application data
        self.upgrading = False  # start_tls has been called: bytes now arrive decrypted
        self.peek = peek
        # Reading the ClientHello before deciding (a port with a `Peek`); None once decided.
        self.reader = ClientHelloReader() if peek is not None else None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        rt = self.rt
        self.raw = cast(asyncio.Transport, transport)
        self.started = rt.loop.time()
        rt.handshakes.add(self)
        if self.reader is None:
            self._start()

    def _start(self) -> None:
        self.task = self.rt.loop.create_task(self._handshake(), name="tls-handshake")

    def data_received(self, data: bytes) -> None:
        self.held.append(data)
        if self.reader is not None:
            self._read_hello(self.reader, data)
        elif not self.upgrading and self.raw is not None:
            self.raw.pause_reading()  # start_tls resumes it

    def _read_hello(self, reader: ClientHelloReader, data: bytes) -> None:
        try:
            hello = reader.feed(data)
        except NotClientHello:
            self.reader = None
            self.abort()  # what no TLS handshake could begin with
            return
        if hello is None:
            return
        self.reader = None
        peek, raw = self.peek, self.raw
        assert peek is not None and raw is not None
        name = hello.server_name
        if peek.streams is not None and peek.streams.choose(name) is not None:
            self.rt.handshakes.discard(self)
            held, self.held, self.raw = self.held, [], None
            peek.relay(raw, held)
            return
        chosen = peek.store.verifying(name) if peek.store is not None else None
        if chosen is not None:
            self.context = chosen.context
        raw.pause_reading()  # start_tls resumes it
        self._start()

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.upgrading:
            self.raw = None
            if self.task is None:
                self.rt.handshakes.discard(self)  # it left while its ClientHello was read

    async def _handshake(self) -> None:
        rt, raw = self.rt, self.raw
        try:
            if raw is None:
                return  # the client left before the first loop iteration
            self.upgrading = True
            # Runs after start_tls has put its protocol on the transport, before it starts.
            rt.loop.call_soon(self._pass_on_held, raw)
            tls = await rt.loop.start_tls(
                raw,
                self,
                self.context,
                server_side=True,
                ssl_handshake_timeout=rt.config.handshake_timeout + BACKSTOP_SECONDS,
            )
        except (OSError, asyncio.CancelledError):
            # It failed (ssl.SSLError is an OSError), or the sweep or a shutdown ended it.
            if raw is not None:
                raw.close()
            return
        finally:
            rt.handshakes.discard(self)
        if tls is None or tls.is_closing():
            raw.close()
            return
        self._hand_over(tls)

    def _pass_on_held(self, raw: asyncio.Transport) -> None:
        held, self.held = self.held, []
        pass_on(raw, held)

    def _hand_over(self, tls: asyncio.Transport) -> None:
        conn = self.connection()
        tls.set_protocol(conn)
        conn.connection_made(tls)
        if self.held:
            conn.data_received(b"".join(self.held))
            self.held = []

    # ------------------------------------------------------------------ bounds

    def sweep(self, now: float) -> None:
        """Called every second: a handshake past its time is ended (a plain close)."""
        if now - self.started > self.rt.config.handshake_timeout:
            self.rt.stats.client_timeout(stats.HANDSHAKE)
            self.abort()

    def abort(self) -> None:
        """End the handshake: start_tls then closes the transport."""
        self.rt.handshakes.discard(self)
        if self.task is not None:
            self.task.cancel()
        if not self.upgrading and self.raw is not None:
            self.raw.close()  # the task had not started: nothing else will close it
