"""The request matcher: compiled lookup tables and `match()`, the proxy's per-request call.

Where it sits: the proxy compiles each snapshot's `HostRoutes` into a `Router` off the request
path, swaps one reference, and calls `Router.match` for every request. Sans-IO: plain values in,
a candidate (or a miss with its reason) out.

Shape, and why: a port maps to its host tiers — a dict of exact hosts, a dict of wildcard
suffixes, one hostless table — so host lookup costs the same for ten hosts or fifty thousand.
Within a host, candidates are bucketed by path: a dict of Exact paths, a dict of PathPrefixes
probed with each segment prefix of the request path (cost grows with the path's depth, not the
number of routes), then the regular expressions in order. Each bucket is sorted by
`_precedence.precedence_key`, so the first candidate whose predicates hold is the winner.

Spec 003 "Matches and precedence": "A method that no match claims on a path some match did
claim reaches the covering match on the same host where one exists ... and answers 404
otherwise. That fill does not cross into a less specific host tier." A path no match on a host
claims does move on to the next tier, but never past the host its listener claims.

Listener isolation (the Gateway API's GatewayHTTPListenerIsolation): "requests SHOULD match at
most one Listener. For example, if Listeners are defined for "foo.example.com" and
"*.example.com", a request to "foo.example.com" SHOULD only be routed using routes attached to
the "foo.example.com" Listener". A port's `Claims` come from the snapshot's `GatewayListeners`
(the HTTP and HTTPS listeners bound there): walking the tiers from the most specific host
outward, the first tier whose pattern is a listener's hostname is that listener's last, and the
walk stops after it. The controller keeps the rest true: a host table holds only the rules of
the listener that claims its pattern (`claiming_hostname`), so every tier before the stop
belongs to the claiming listener. Ports without listeners (Ingress) have no claims.

Incremental builds: a snapshot delta usually touches a handful of hosts among thousands, so
`compile_router(resources, previous)` reuses each host table of `previous` whose (port, host)
is built from exactly the same `HostRoutes` objects, in the same order. Resources are frozen,
so the same objects compile to the same table; identity is the cheap, sufficient test (the
proxy's staging keeps the objects a delta does not carry).
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from urllib.parse import parse_qsl

from coxswain_routing._candidates import Candidate, compile_candidates
from coxswain_routing._hosts import claiming_hostname, normalize_host, wildcard_suffixes
from coxswain_routing._model import (
    GatewayListeners,
    HostRoutes,
    ListenerProtocol,
    PathType,
    Resource,
    WildcardScope,
)
from coxswain_routing._paths import normalize_path

__all__ = ["Claims", "Miss", "Outcome", "Router", "compile_router", "parse_query"]


@dataclass(frozen=True, slots=True)
class Miss:
    """No candidate serves the request: the status to answer and why."""

    status: int
    reason: str
    rule: None = None


Outcome = Candidate | Miss

NO_LISTENER = Miss(404, "no routes are served on this port")
NO_HOST = Miss(404, "no route serves this host")
NO_MATCH = Miss(404, "no route on this host matches the request")
METHOD_NOT_CLAIMED = Miss(
    404, "a match on this host claims the path but not the method, and nothing on it covers it"
)
ISOLATED = Miss(404, "no route of the listener claiming this host matches the request")

_HTTP = (ListenerProtocol.HTTP, ListenerProtocol.HTTPS)

_NO_QUERY: Mapping[str, str] = {}


def parse_query(query: str) -> dict[str, str]:
    """Query parameters by name; a repeated name keeps its first value."""
    params: dict[str, str] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        params.setdefault(name, value)
    return params


def _scan(
    bucket: list[Candidate], path: str, method: str, headers: Mapping[str, str], query: str
) -> Outcome | None:
    """The first candidate of a path bucket whose predicates hold; METHOD_NOT_CLAIMED when only
    a method stood in the way; None when nothing in the bucket claims the request."""
    method_missed = False
    for cand in bucket:
        if cand.path_pattern is not None and cand.path_pattern.fullmatch(path) is None:
            continue
        if cand.method and cand.method != method:
            method_missed = True
            continue
        if cand.headers and cand.failing_header(headers) is not None:
            continue
        if cand.query and cand.failing_query(parse_query(query) if query else _NO_QUERY):
            continue
        return cand
    return METHOD_NOT_CLAIMED if method_missed else None


class HostTable:
    """Every candidate served for one host pattern, bucketed by path kind."""

    __slots__ = ("pattern", "one_label", "exact", "prefix", "regex", "longest_prefix")

    def __init__(self, pattern: str, one_label: bool, candidates: Iterable[Candidate]) -> None:
        self.pattern = pattern
        self.one_label = one_label
        self.exact: dict[str, list[Candidate]] = {}
        self.prefix: dict[str, list[Candidate]] = {}
        self.regex: list[Candidate] = []
        for cand in candidates:
            kind = cand.match.path.type
            if kind is PathType.EXACT:
                self.exact.setdefault(cand.path, []).append(cand)
            elif kind is PathType.REGULAR_EXPRESSION:
                self.regex.append(cand)
            else:
                self.prefix.setdefault(cand.path, []).append(cand)
        for bucket in (*self.exact.values(), *self.prefix.values(), self.regex):
            bucket.sort(key=lambda c: c.order)
        # Request paths longer than every prefix are cut down to this before probing.
        self.longest_prefix = max(map(len, self.prefix), default=0)

    def lookup(
        self, path: str, method: str, headers: Mapping[str, str], query: str
    ) -> Outcome | None:
        """The winner on this host; METHOD_NOT_CLAIMED; or None to try the next tier.

        The hot path: buckets are probed inline (exact, each segment prefix longest first,
        then regular expressions), inline rather than through a generator.
        """
        missed: Outcome | None = None
        bucket = self.exact.get(path)
        if bucket is not None:
            found = _scan(bucket, path, method, headers, query)
            if found is not None and found is not METHOD_NOT_CLAIMED:
                return found
            missed = found
        prefixes = self.prefix
        if prefixes:
            end = len(path.rstrip("/"))
            while end > self.longest_prefix:
                end = path.rfind("/", 0, end)
            while end > 0:
                bucket = prefixes.get(path[:end])
                if bucket is not None:
                    found = _scan(bucket, path, method, headers, query)
                    if found is not None and found is not METHOD_NOT_CLAIMED:
                        return found
                    missed = missed or found
                end = path.rfind("/", 0, end)
            bucket = prefixes.get("/")
            if bucket is not None:
                found = _scan(bucket, path, method, headers, query)
                if found is not None and found is not METHOD_NOT_CLAIMED:
                    return found
                missed = missed or found
        if self.regex:
            found = _scan(self.regex, path, method, headers, query)
            if found is not None and found is not METHOD_NOT_CLAIMED:
                return found
            missed = missed or found
        return missed

    def all_candidates(self) -> list[Candidate]:
        """Every candidate in the order explanations list them (exact, longest prefix, regex)."""
        ordered: list[Candidate] = []
        for path in sorted(self.exact):
            ordered += self.exact[path]
        for prefix in sorted(self.prefix, key=lambda p: (-len(p), p)):
            ordered += self.prefix[prefix]
        return ordered + self.regex


@dataclass(frozen=True, slots=True)
class Claims:
    """The listener hostnames of one Gateway port, which end a request's walk (isolation)."""

    names: Mapping[str, str]  # listener hostname ("" for none) -> the listener's name
    exact: frozenset[str]  # the exact hostnames
    wildcard: frozenset[str]  # the wildcards' suffixes: "*.example.com" as "example.com"

    @classmethod
    def of(cls, names: Mapping[str, str]) -> Claims:
        wildcard = frozenset(h[2:] for h in names if h.startswith("*."))
        exact = frozenset(h for h in names if h and not h.startswith("*."))
        return cls(dict(names), exact, wildcard)

    def claim(self, pattern: str) -> str | None:
        """The hostname of the listener claiming `pattern` (a request host or a host table's
        pattern); None when no listener on the port does."""
        return claiming_hostname(pattern, self.names)


class PortTable:
    """The host tiers of one bound port, and the listeners claiming its hosts."""

    __slots__ = ("exact", "wildcard", "catch_all", "claims")

    def __init__(self) -> None:
        self.exact: dict[str, HostTable] = {}
        self.wildcard: dict[str, HostTable] = {}  # by suffix: "*.example.com" under "example.com"
        self.catch_all: HostTable | None = None
        self.claims: Claims | None = None  # None: no listener fences the walk (Ingress ports)

    def tiers(self, host: str) -> Iterator[HostTable]:
        """The host tables covering `host`, most specific first."""
        table = self.exact.get(host)
        if table is not None:
            yield table
        if self.wildcard:
            for suffix, depth in wildcard_suffixes(host):
                table = self.wildcard.get(suffix)
                if table is not None and (depth == 1 or not table.one_label):
                    yield table
        if self.catch_all is not None:
            yield self.catch_all


# (port, host pattern) -> the HostRoutes a table was built from, and that table.
_Built = dict[tuple[int, str], tuple[list[HostRoutes], HostTable]]


class Router:
    """Compiled routing for every port of one snapshot. Immutable once built."""

    __slots__ = ("_ports", "_built")

    def __init__(self, ports: dict[int, PortTable], built: _Built | None = None) -> None:
        self._ports = ports
        # What each host table was built from, so the next build can reuse it. Holding the
        # HostRoutes keeps them alive, which an identity comparison relies on.
        self._built: _Built = built or {}

    @property
    def ports(self) -> frozenset[int]:
        return frozenset(self._ports)

    def port_table(self, port: int) -> PortTable | None:
        return self._ports.get(port)

    def match(
        self,
        port: int,
        host: str,
        method: str,
        path: str,
        headers: Mapping[str, str] = _NO_QUERY,
        query: str = "",
    ) -> Outcome:
        """Resolve one request. `headers` are keyed by lower-cased name; `query` is raw."""
        table = self._ports.get(port)
        if table is None:
            return NO_LISTENER
        path = normalize_path(path)
        host = normalize_host(host)
        # The tiers of PortTable.tiers, inlined: this runs for every request. Each claim check
        # runs only once a tier has missed.
        seen_host = False
        claims = table.claims
        host_table = table.exact.get(host)
        if host_table is not None:
            seen_host = True
            outcome = host_table.lookup(path, method, headers, query)
            if outcome is not None:
                return outcome
        if claims is not None and host in claims.exact:
            return ISOLATED
        if table.wildcard or claims is not None:
            wildcard = table.wildcard
            for suffix, depth in wildcard_suffixes(host):
                host_table = wildcard.get(suffix)
                if host_table is not None and (depth == 1 or not host_table.one_label):
                    seen_host = True
                    outcome = host_table.lookup(path, method, headers, query)
                    if outcome is not None:
                        return outcome
                if claims is not None and suffix in claims.wildcard:
                    return ISOLATED
        if table.catch_all is not None:
            outcome = table.catch_all.lookup(path, method, headers, query)
            return NO_MATCH if outcome is None else outcome
        return NO_MATCH if seen_host else NO_HOST


def _host_table(routes: list[HostRoutes]) -> HostTable:
    first = routes[0]
    candidates = [cand for r in routes for cand in compile_candidates(r)]
    one_label = first.wildcard_scope is WildcardScope.ONE_LABEL
    return HostTable(first.host, one_label, candidates)


def _grouped(
    resources: Iterable[Resource],
) -> tuple[dict[tuple[int, str], list[HostRoutes]], dict[int, dict[str, str]]]:
    """The host routes by (bind port, host), and each port's listener names by hostname."""
    grouped: dict[tuple[int, str], list[HostRoutes]] = {}
    listeners: dict[int, dict[str, str]] = {}
    for resource in resources:
        if isinstance(resource, HostRoutes):
            grouped.setdefault((resource.bind_port, resource.host), []).append(resource)
        elif isinstance(resource, GatewayListeners):
            for x in resource.listeners:
                if x.protocol in _HTTP:
                    listeners.setdefault(x.bind_port, {}).setdefault(x.hostname, x.name)
    return grouped, listeners


def _same(before: list[HostRoutes], now: list[HostRoutes]) -> bool:
    return len(before) == len(now) and all(map(operator.is_, before, now))


def compile_router(resources: Iterable[Resource], previous: Router | None = None) -> Router:
    """Build the lookup for every `HostRoutes` among `resources`, each port fenced by the
    hostnames of the `GatewayListeners` bound there (the other resources are ignored).

    With `previous`, each host table built from the very same `HostRoutes` objects is reused
    as it is (its pickers keep their round-robin position); only the others are compiled.
    """
    reusable = previous._built if previous is not None else {}
    ports: dict[int, PortTable] = {}
    built: _Built = {}
    grouped, listeners = _grouped(resources)
    for (port, host), routes in sorted(grouped.items()):
        table = ports.get(port)
        if table is None:
            table = ports[port] = PortTable()
        old = reusable.get((port, host))
        host_table = old[1] if old is not None and _same(old[0], routes) else _host_table(routes)
        built[(port, host)] = (routes, host_table)
        if not host:
            table.catch_all = host_table
        elif host.startswith("*."):
            table.wildcard[host[2:]] = host_table
        else:
            table.exact[host] = host_table
    for port, names in listeners.items():
        if port in ports:  # a port without routes answers NO_LISTENER, as it always did
            ports[port].claims = Claims.of(names)
    return Router(ports, built)


def patch_router(
    previous: Router,
    routes: Mapping[str, HostRoutes],
    touched: Iterable[HostRoutes],
    listeners: Iterable[Resource],
) -> Router:
    """What `compile_router` would build from `routes` (every `HostRoutes` of the snapshot, by
    key, in its order) and `listeners` (its `GatewayListeners`), when `previous` was built from
    the same listeners and from the same `HostRoutes` but for `touched`: the objects replaced or
    removed, and those that replace them or are new. Only the (port, host) tables `touched`
    belong to are built again, so a one-route delta costs the same at 10 or 50,000 routes."""
    touched = list(touched)
    gone = {id(r) for r in touched if routes.get(r.key) is not r}
    members: dict[tuple[int, str], list[HostRoutes]] = {}
    for r in touched:
        members.setdefault((r.bind_port, r.host), [])
    for group, found in members.items():
        old = previous._built.get(group)
        if old is not None:
            found.extend(r for r in old[0] if id(r) not in gone)
    for r in touched:
        if id(r) not in gone:
            members[(r.bind_port, r.host)].append(r)
    positions: dict[str, int] = {}
    built = dict(previous._built)
    ports = dict(previous._ports)
    copied: set[int] = set()
    for (port, host), found in sorted(members.items()):
        if len(found) > 1:  # in the snapshot's order, as compile_router groups them
            if not positions:
                positions.update((key, i) for i, key in enumerate(routes))
            found.sort(key=lambda r: positions[r.key])
        if port not in copied:
            ports[port] = _copied(ports.get(port), port, listeners)
            copied.add(port)
        table = ports[port]
        host_table = _host_table(found) if found else None
        if host_table is not None:
            built[(port, host)] = (found, host_table)
        else:
            built.pop((port, host), None)
        if not host:
            table.catch_all = host_table
            continue
        tier, name = (table.wildcard, host[2:]) if host.startswith("*.") else (table.exact, host)
        if host_table is None:
            tier.pop(name, None)
        else:
            tier[name] = host_table
    for port in copied:
        table = ports[port]
        if not table.exact and not table.wildcard and table.catch_all is None:
            del ports[port]  # no routes left: NO_LISTENER, as compile_router leaves it out
    return Router(ports, built)


def _copied(table: PortTable | None, port: int, listeners: Iterable[Resource]) -> PortTable:
    """A port's table to patch: a copy (the previous router is still serving), or a new one
    fenced by the port's listeners as compile_router fences it."""
    fresh = PortTable()
    if table is not None:
        fresh.exact, fresh.wildcard = dict(table.exact), dict(table.wildcard)
        fresh.catch_all, fresh.claims = table.catch_all, table.claims
        return fresh
    names = _grouped(listeners)[1].get(port)
    if names is not None:
        fresh.claims = Claims.of(names)
    return fresh
