"""A snapshot's stream routes compiled for the accept path: which route, which backendRef.

Where it sits: `dataplane.tables.compile_tables` calls `compile_streams` with the snapshot's
resources; the result is `Tables.streams`, swapped in with the rest. A new connection (or UDP
session) reads `runtime.tables` once at accept and keeps what it chose for its lifetime, so a
swap never moves an established stream (spec 003: a connection "is committed to one backendRef").

Why the shape: per bound (port, protocol) one `PortStreams`, whose lookup by server name is the
routing model's host order — the exact name, then wildcards from the nearest label outward
(`wildcard_suffixes`), then the match for every name. Each match is a `StreamChoice`: a smooth
weighted round robin over its backendRef slots (`WeightedRoundRobin`), where an unresolved slot
keeps its weight and refuses what it is given, then the slot's endpoint picker in turn. A
`PortStreams` compiled from a `StreamRoute` object handed again is reused, round-robin position
and all.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from coxswain_proxy.dataplane.upstream.picker import EndpointPicker, Origin
from coxswain_routing import (
    GatewayListeners,
    ListenerProtocol,
    Resource,
    StreamMatch,
    StreamRoute,
    TlsMode,
    WeightedRoundRobin,
    normalize_host,
    wildcard_suffixes,
)

STREAM_PROTOCOLS = (ListenerProtocol.TCP, ListenerProtocol.TLS, ListenerProtocol.UDP)
StreamPort = tuple[int, ListenerProtocol]  # (bind port, protocol): UDP has a port space of its own


class StreamChoice:
    """One route's share of a port: the backendRef each new connection is committed to."""

    __slots__ = ("route", "_slots")

    def __init__(self, match: StreamMatch) -> None:
        self.route = f"{match.id.kind}/{match.id.namespace}/{match.id.name}"  # metrics label
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


def _bound_ports(resources: Mapping[str, Resource]) -> frozenset[StreamPort]:
    """Every TCP, TLS-passthrough and UDP listener's port: bound even with no route, so what
    arrives there is closed rather than refused by the kernel."""
    found = set()
    for resource in resources.values():
        if isinstance(resource, GatewayListeners):
            for listener in resource.listeners:
                if listener.protocol not in STREAM_PROTOCOLS:
                    continue
                if listener.protocol is ListenerProtocol.TLS and (
                    listener.tls_mode is not TlsMode.PASSTHROUGH
                ):
                    continue
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
    return Streams(routes, _bound_ports(resources), sources)
