"""A TLS listener's connection: read until its ClientHello names a server, then passed through
unread or terminated, as the route serving that name says.

Where it sits: `binds` serves each TLS listener's port, Passthrough, Terminate or both, with
`tls_factory`. A `TlsRelay` is a `relay.StreamRelay` that starts reading at once: its bytes go to
a `clienthello.ClientHelloReader` until the reader answers, then the relay routes by the offered
name (`compiled.PortStreams.choose`). A match passed through dials the backend and replays every
byte read, as it came, before relaying the rest: the proxy holds no key and never sees plaintext,
the TLS session is the client's and the backend's. A match terminated (the listener's mode,
`StreamChoice.terminate`) ends the client's TLS with the certificate the port's store selects for
that name (`terminate`), then dials the backend and relays the decrypted bytes.

Spec 003: "a connection whose server name no route serves, or that offers no ClientHello at all,
is closed." A client that sends nothing, or too little, is closed by the sweep after
`StreamLimits.hello_timeout` (10 s), and one that sends more than the reader's bound (16 KiB)
without completing a ClientHello is closed at once; each counts as refused under route "none".
A terminated client's whole handshake is held to the same bound from the accept; one that fails
or runs late, or a name the port holds no certificate for, counts as refused under its route.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable

from coxswain_proxy.dataplane import stats
from coxswain_proxy.dataplane.runtime import Runtime
from coxswain_proxy.dataplane.stream import terminate
from coxswain_proxy.dataplane.stream.clienthello import ClientHelloReader, NotClientHello
from coxswain_proxy.dataplane.stream.compiled import StreamChoice, StreamPort
from coxswain_proxy.dataplane.stream.relay import RelaySide, StreamRelay
from coxswain_proxy.dataplane.stream.relay_limits import StreamLimits
from coxswain_proxy.dataplane.upstream.picker import Origin
from coxswain_routing import ListenerProtocol


class TlsRelay(StreamRelay):
    """A relay whose route is the server name of the ClientHello it reads first."""

    __slots__ = ("reader", "accepted_at", "server_name", "handshaking")

    def __init__(self, rt: Runtime, port: StreamPort, limits: StreamLimits) -> None:
        super().__init__(rt, port, limits)
        self.reader: ClientHelloReader | None = ClientHelloReader(limits.hello_bytes)
        self.accepted_at = self.last
        self.server_name = ""  # what the ClientHello offered
        self.handshaking: asyncio.Task[None] | None = None  # terminating: the handshake

    def accepted(self) -> None:
        """Read (not route) first: the route depends on the ClientHello."""

    def early(self, data: bytes) -> None:
        reader = self.reader
        if reader is None:
            self.replay.append(data)  # routed, dialling: held for the backend
            return
        try:
            hello = reader.feed(data)
        except NotClientHello:
            self.reader = None
            self.refuse(stats.NO_ROUTE)
            return
        if hello is None:
            return
        self.reader = None
        self.replay = reader.received
        assert self.client.transport is not None
        self.client.transport.pause_reading()
        self.server_name = hello.server_name
        self.route(hello.server_name)

    def proceed(self, choice: StreamChoice, origin: Origin) -> None:
        if not choice.terminate:
            super().proceed(choice, origin)
            return
        tables = self.rt.tables
        store = tables.streams.tls.get(self.port[0]) if tables is not None else None
        selected = store.select(self.server_name) if store is not None else None
        if selected is None:
            self.refuse()  # no certificate for the name (none usable on the port)
            return
        task = self.rt.loop.create_task(self._terminate(selected.context, origin))
        self.handshaking = task

    async def _terminate(self, context: ssl.SSLContext, origin: Origin) -> None:
        encrypted = await terminate.start(self, context)
        self.handshaking = None
        if encrypted is None:
            if not self.closed:
                self.refuse()
            return
        self.dial(origin)

    def sweep(self, now: float) -> None:
        if self.reader is not None or self.handshaking is not None:
            # The bound is from the accept, however the ClientHello or the handshake trickles.
            if now - self.accepted_at >= self.limits.hello_timeout:
                self.refuse(stats.NO_ROUTE if self.reader is not None else "")
                self.reader = None
            return
        super().sweep(now)

    def close(self) -> None:
        task, self.handshaking = self.handshaking, None
        if task is not None and task is not asyncio.current_task():
            task.cancel()
        super().close()


def tls_factory(rt: Runtime, port: int, limits: StreamLimits) -> Callable[[], RelaySide]:
    """The protocol factory of a TLS listener's port (Passthrough, Terminate or both)."""
    key = (port, ListenerProtocol.TLS)
    return lambda: TlsRelay(rt, key, limits).client
