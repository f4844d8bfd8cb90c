"""A snapshot's stream routes compiled for the accept path: which route, which backendRef.

Where it sits: `dataplane.tables.compile_tables` calls `compile_streams` with the snapshot's
stream routes, listeners and TLS stores (and not at all for a delta that touches none); the
result is `Tables.streams`, swapped in with the rest. A new connection (or UDP session) reads
`runtime.tables` once at accept and keeps what it chose for its lifetime, so a swap never moves
an established stream (spec 003: a connection "is committed to one backendRef").

Why the shape: per bound (port, protocol) one `PortStreams`, whose lookup by server name is the
routing model's host order — the exact name, then wildcards from the nearest label outward
(`wildcard_suffixes`), then the match for every name. Each match is a `StreamChoice`: a smooth
weighted round robin over its backendRef slots (`WeightedRoundRobin`), where an unresolved slot
keeps its weight and refuses what it is given, then the slot's endpoint picker in turn, and
whether the connection is passed through or terminated. A TLS port with a match to terminate has
its `TlsStore` loaded here a second time, without ALPN (`tls.build_store(..., alpn=None)`): the
HTTPS ports' stores offer h2, which a relayed stream is not. A `PortStreams` compiled from a
`StreamRoute` object handed again is reused, round-robin position and all, and a store compiled
from a `TlsStore` object handed again, its contexts loaded.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from coxswain_proxy.dataplane import tls
from coxswain_proxy.dataplane.upstream.picker import EndpointPicker, Origin
from coxswain_routing import (
    GatewayListeners,
    ListenerProtocol,
    Resource,
    StreamMatch,
    StreamRoute,
    TlsStore,
    WeightedRoundRobin,
    normalize_host,
    wildcard_suffixes,
)

STREAM_PROTOCOLS = (ListenerProtocol.TCP, ListenerProtocol.TLS, ListenerProtocol.UDP)
StreamPort = tuple[int, ListenerProtocol]  # (bind port, protocol): UDP has a port space of its own


class StreamChoice:
    """One route's share of a port: the backendRef each new connection is committed to."""

    __slots__ = ("route", "terminate", "_slots")

    def __init__(self, match: StreamMatch) -> None:
        self.route = f"{match.id.kind}/{match.id.namespace}/{match.id.name}"  # metrics label
        self.terminate = match.terminate  # TLS: end the client's TLS here, relay what it carries
        # Spec 003: "an unresolvable reference keeps its share of the connections and refuses
        # them": its slot stays in the rotation with its weight, as the key "".
        self._slots: WeightedRoundRobin[str] = WeightedRoundRobin(
            [b.endpoints for b in match.backends], [b.weight for b in match.backends]
        )

    def pick(self, pickers: Mapping[str, EndpointPicker]) -> Origin | None:
        """The endpoint this connection is committed to; `None`: refuse it (no sibling)."""
        if not self._slots:
            return None  # no backends (or every weight 0): every connection is refused
        key = self._slots.pick()
        if not key:
            return None  # "an unresolved reference refuses its share without a lookup"
        picker = pickers.get(key)
        return picker.pick() if picker is not None else None


@dataclass(frozen=True, slots=True)
class PortStreams:
    """The routes of one bound stream port, by the server name a TLS client offers."""

    exact: dict[str, StreamChoice]
    wildcard: dict[str, StreamChoice]  # by suffix without "*.": "example.com"
    every: StreamChoice | None  # the match for every name (TCP and UDP: the only one)

    def choose(self, server_name: str = "") -> StreamChoice | None:
        """Spec 003: "a connection is relayed to the route whose hostname matches the server
        name it offers, a precise name before a wildcard"; `None`: no route serves it."""
        if not server_name:
            return self.every
        name = normalize_host(server_name)
        found = self.exact.get(name)
        if found is not None:
            return found
        for suffix, _ in wildcard_suffixes(name):
            found = self.wildcard.get(suffix)
            if found is not None:
                return found
        return self.every


def port_streams(route: StreamRoute) -> PortStreams:
    exact: dict[str, StreamChoice] = {}
    wildcard: dict[str, StreamChoice] = {}
    every = None
    for match in route.matches:
        name = match.server_name.lower()
        if not name:
            every = StreamChoice(match)
        elif name.startswith("*."):
            wildcard.setdefault(name[2:], StreamChoice(match))
        else:
            exact.setdefault(name, StreamChoice(match))
    return PortStreams(exact, wildcard, every)


@dataclass(slots=True)
class Streams:
    routes: dict[StreamPort, PortStreams] = field(default_factory=dict)
    ports: frozenset[StreamPort] = frozenset()  # the stream ports to bind, routed or not
    sources: dict[StreamPort, StreamRoute] = field(default_factory=dict)  # compiled from
    # The certificates of TLS ports that terminate some name, by bind port, without ALPN.
    tls: dict[int, tls.SniStore] = field(default_factory=dict)
    tls_sources: dict[int, TlsStore] = field(default_factory=dict)  # compiled from


def _bound_ports(resources: Mapping[str, Resource]) -> frozenset[StreamPort]:
    """Every TCP, TLS (either mode) and UDP listener's port: bound even with no route, so what
    arrives there is closed rather than refused by the kernel."""
    found = set()
    for resource in resources.values():
        if isinstance(resource, GatewayListeners):
            for listener in resource.listeners:
                if listener.protocol in STREAM_PROTOCOLS:
                    found.add((listener.bind_port, listener.protocol))
    return frozenset(found)


def compile_streams(resources: Mapping[str, Resource], previous: Streams | None) -> Streams:
    before = previous.sources if previous is not None else {}
    routes: dict[StreamPort, PortStreams] = {}
    sources: dict[StreamPort, StreamRoute] = {}
    for resource in resources.values():
        if not isinstance(resource, StreamRoute):
            continue
        port = (resource.bind_port, resource.protocol)
        sources[port] = resource
        if previous is not None and before.get(port) is resource:
            routes[port] = previous.routes[port]
        else:
            routes[port] = port_streams(resource)
    stores, store_sources = _terminating_stores(resources, sources, previous)
    return Streams(routes, _bound_ports(resources), sources, stores, store_sources)


def _terminating_stores(
    resources: Mapping[str, Resource],
    routes: Mapping[StreamPort, StreamRoute],
    previous: Streams | None,
) -> tuple[dict[int, tls.SniStore], dict[int, TlsStore]]:
    """The TLS store of each TLS port some of whose matches terminate; reused when handed the
    same `TlsStore` object again (loading certificates is the slow part of a compile)."""
    stores: dict[int, tls.SniStore] = {}
    sources: dict[int, TlsStore] = {}
    by_port = {r.bind_port: r for r in resources.values() if isinstance(r, TlsStore)}
    for (bind_port, protocol), route in routes.items():
        if protocol is not ListenerProtocol.TLS or not any(m.terminate for m in route.matches):
            continue
        store = by_port.get(bind_port)
        if store is None:
            continue  # no usable certificate: its terminating connections are refused
        sources[bind_port] = store
        if previous is not None and previous.tls_sources.get(bind_port) is store:
            stores[bind_port] = previous.tls[bind_port]
        else:
            stores[bind_port] = tls.build_store(store, alpn=None)
    return stores, sources
