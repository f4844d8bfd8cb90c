"""TLS passthrough: a connection read until its ClientHello names a server, then relayed unread.

Where it sits: `binds` serves each TLS listener in Passthrough mode with `passthrough_factory`.
A `Passthrough` is a `relay.StreamRelay` that starts reading at once: its bytes go to a
`clienthello.ClientHelloReader` until the reader answers, then the relay routes by the offered
name, dials the backend and replays every byte read, as it came, before relaying the rest. The
proxy holds no key and never sees plaintext: the TLS session is the client's and the backend's.

Spec 003: "a connection whose server name no route serves, or that offers no ClientHello at all,
is closed." A client that sends nothing, or too little, is closed by the sweep after
`StreamLimits.hello_timeout` (10 s), and one that sends more than the reader's bound (16 KiB)
without completing a ClientHello is closed at once; each counts as refused under route "none".
"""

from __future__ import annotations

from collections.abc import Callable

from coxswain_proxy.dataplane import stats
from coxswain_proxy.dataplane.runtime import Runtime
from coxswain_proxy.dataplane.stream.clienthello import ClientHelloReader, NotClientHello
from coxswain_proxy.dataplane.stream.compiled import StreamPort
from coxswain_proxy.dataplane.stream.relay import RelaySide, StreamRelay
from coxswain_proxy.dataplane.stream.relay_limits import StreamLimits
from coxswain_routing import ListenerProtocol


class Passthrough(StreamRelay):
    """A relay whose route is the server name of the ClientHello it reads first."""

    __slots__ = ("reader", "accepted_at")

    def __init__(self, rt: Runtime, port: StreamPort, limits: StreamLimits) -> None:
        super().__init__(rt, port, limits)
        self.reader: ClientHelloReader | None = ClientHelloReader(limits.hello_bytes)
        self.accepted_at = self.last

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
        self.route(hello.server_name)

    def sweep(self, now: float) -> None:
        if self.reader is not None:
            # The reader is still waiting: the bound is from the accept, however it trickles.
            if now - self.accepted_at >= self.limits.hello_timeout:
                self.reader = None
                self.refuse(stats.NO_ROUTE)
            return
        super().sweep(now)


def passthrough_factory(rt: Runtime, port: int, limits: StreamLimits) -> Callable[[], RelaySide]:
    """The protocol factory of a TLS listener's port in Passthrough mode."""
    key = (port, ListenerProtocol.TLS)
    return lambda: Passthrough(rt, key, limits).client
