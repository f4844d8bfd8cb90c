"""What one snapshot compiles into for the request path: `Tables`, swapped in as one reference.

Where it sits: `core.Dataplane.apply` calls `compile_tables(resources, ...)` off the event loop,
then replaces `Runtime.tables` in one assignment. Each request reads that attribute once, when
its turn comes (`http.dispatch.start`), and keeps the object for its lifetime, so a request
never sees half a snapshot.

Why the shape: everything a request needs that depends only on the snapshot is computed here
once — per-rule header plans in bytes, rewrite and redirect filters, mirror samplers, CORS, the
endpoint pickers, the TLS stores, which ports to bind — so the request path does dict lookups,
never folding or parsing. Plans are keyed by `id()` of the rule and backend objects the router
returns; the tables hold the router, so those objects live as long as the keys are used.

Whatever a snapshot holds, nothing compiled here can split a head: every header name and value
a plan writes, and every piece of a redirect, a rewrite or a CORS answer, passes `framing`
first, and a value that does not makes the compile raise `framing.UnsafeField` naming the
resource and the rule (staging calls `check_routes` so the snapshot is Nacked).

Incremental compiles: a delta changes a few resources of thousands, and the proxy's staging keeps
the objects of the others, so `compile_tables(..., previous=tables)` reuses whatever was compiled
from a resource object it is handed again (`is`): host tables, rule plans, endpoint pickers (with
their round-robin position), TLS stores (their `SSLContext`s) and TLS pickers. An `id()` from
`previous` is trusted only for an object `previous` holds, and `previous` holds every resource
it was compiled from (`Tables.sources`), so no id outlives its object.

A delta small against the snapshot (an eighth at most) is not even walked over the rest: it is
patched onto `previous` (`_patched`). The delta is found by identity against `previous.sources`;
the by-kind index, the router (`patch_router`: only the (port, host) tables it touches), the rule
plans (each Rule counted by the HostRoutes holding it, so a plan goes with its last holder), the
endpoint pickers and the routes with own pickers are patched, and every part no kind of the delta
feeds is `previous`'s own object. At 10k routes a one-route delta went from 52-68 ms to about
4 ms. `delta_compile_test` holds the patch to what a compile from scratch gives.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from coxswain_proxy import gcpause
from coxswain_proxy.dataplane import framing, tls
from coxswain_proxy.dataplane.http.policies.compiled_policy import Compiled, compile_policy
from coxswain_proxy.dataplane.stream import compiled
from coxswain_proxy.dataplane.upstream import backend_tls
from coxswain_proxy.dataplane.upstream.picker import H2C, EndpointPicker, H2c
from coxswain_routing import (
    Backend,
    BackendProtocol,
    ClientCaStore,
    Cors,
    EndpointSet,
    GatewayListeners,
    HeaderOp,
    HeaderPlan,
    HostRoutes,
    ListenerProtocol,
    MirrorSampler,
    Outcome,
    RequestHeaderModifier,
    RequestMirror,
    RequestRedirect,
    Resource,
    ResponseHeaderModifier,
    Router,
    Rule,
    StreamRoute,
    TlsCertificate,
    TlsStore,
    URLRewrite,
    compile_router,
    fold_header_modifiers,
    patch_router,
)

log = logging.getLogger(__name__)

R = TypeVar("R", bound=Resource)

# (lower-cased name, op, name as written, value), all bytes: applied to raw header lists.
BytesPlan = tuple[tuple[bytes, HeaderOp, bytes, bytes], ...]

# Backends spoken to in HTTP/2 (h2c without TLS): h2c, and gRPC, which needs HTTP/2 end to end.
HTTP2_PROTOCOLS = frozenset({BackendProtocol.H2C, BackendProtocol.GRPC})


def bytes_plan(plan: HeaderPlan) -> BytesPlan:
    """The plan in bytes; `framing.UnsafeField` for a name or value no head may carry."""
    return tuple(_bytes_op(op, name, value) for op, name, value in plan.values())


def _bytes_op(op: HeaderOp, name: str, value: str) -> tuple[bytes, HeaderOp, bytes, bytes]:
    raw = framing.name(name)  # a token, so ASCII: its lower case is the plan's key
    return (raw.lower(), op, raw, framing.value(value))


def apply_plan(plan: BytesPlan, headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """`coxswain_routing.apply_header_plan` on raw headers: same semantics, no decoding."""
    touched = {key: op for key, op, _, _ in plan}
    result = [(n, v) for n, v in headers if touched.get(n.lower(), HeaderOp.ADD) is HeaderOp.ADD]
    result.extend((name, value) for _, op, name, value in plan if op is not HeaderOp.REMOVE)
    return result


@dataclass(frozen=True, slots=True)
class Mirror:
    filter: RequestMirror
    sampler: MirrorSampler


@dataclass(frozen=True, slots=True)
class BackendPlan:
    """The filters one backend slot's requests get: the rule's, then the slot's own."""

    request: BytesPlan
    response: BytesPlan
    rewrite: URLRewrite | None
    mirrors: tuple[Mirror, ...]
    own_picker: bool = False  # dialled over TLS or h2c: `Tables.own_pickers` has its picker
    # The slot's own RequestRedirect: its requests are answered with it, nothing is forwarded.
    redirect: RequestRedirect | None = None
    redirect_request: BytesPlan = ()  # the request modifiers that apply before that redirect


@dataclass(frozen=True, slots=True)
class RulePlan:
    route: str  # the metrics label: kind/namespace/name (bounded by the snapshot's routes)
    redirect: RequestRedirect | None
    redirect_request: BytesPlan  # request modifiers declared before the redirect
    response: BytesPlan  # the rule's response modifiers (a redirect gets them too)
    cors: Cors | None
    mirrors: tuple[Mirror, ...]  # the rule's own: once per request, before the pick
    backends: dict[int, BackendPlan]  # by id() of the Backend object
    # The rule's one backend slot taking traffic (weight above 0) with its plan, when it has
    # exactly one and it resolved: no weighted pick, no plan lookup per request.
    only: tuple[Backend, BackendPlan] | None = None
    tests_headers: bool = False  # a match tests request headers: no match memo on its port
    # The rule's timeouts and retry, read once here rather than through the rule per request.
    retries: int = 0  # retry.attempts
    retry_codes: frozenset[int] = frozenset()
    backoff: float = 0.0  # seconds
    attempt_timeout: float = 0.0  # seconds per attempt (timeouts.backendRequest); 0: none
    request_timeout: float = 0.0  # seconds for the whole request (timeouts.request); 0: none
    # The rule's policy (access, limits, auth, affinity: `http.policies`); None: none.
    policy: Compiled | None = None


def _of(filters: Iterable[object], kind: type[Any]) -> list[Any]:
    return [f for f in filters if isinstance(f, kind)]


def _mirrors(filters: Iterable[object]) -> tuple[Mirror, ...]:
    found = _of(filters, RequestMirror)
    return tuple(Mirror(m, MirrorSampler(m.numerator, m.denominator)) for m in found)


def _backend_plan(rule: Rule, backend: Backend) -> BackendPlan:
    filters = (*rule.filters, *backend.filters)
    rewrites = _of(filters, URLRewrite)
    redirects = _of(backend.filters, RequestRedirect)
    # Spec 003 "Filters": a backendRef's filters "apply after" the rule's, so the rule's
    # request modifiers come before the slot's redirect as the slot's own do.
    before = [*_before_redirect(rule.filters), *_before_redirect(backend.filters)]
    return BackendPlan(
        request=bytes_plan(fold_header_modifiers(_of(filters, RequestHeaderModifier))),
        response=bytes_plan(fold_header_modifiers(_of(filters, ResponseHeaderModifier))),
        rewrite=rewrites[-1] if rewrites else None,
        mirrors=_mirrors(backend.filters),
        own_picker=_needs_own_picker(backend),
        redirect=redirects[0] if redirects else None,
        redirect_request=bytes_plan(fold_header_modifiers(before)) if redirects else (),
    )


def _before_redirect(filters: Iterable[object]) -> list[RequestHeaderModifier]:
    # Spec 003 "Filters": "a RequestHeaderModifier ahead of it modifies the request the
    # redirect answers ... while one after it has no request left to modify".
    found = []
    for f in filters:
        if isinstance(f, RequestRedirect):
            break
        if isinstance(f, RequestHeaderModifier):
            found.append(f)
    return found


# The filters whose pieces reach a head other than through a header plan, and their checks.
_PIECES: dict[type[Any], Callable[[Any], None]] = {
    RequestRedirect: framing.redirect,
    URLRewrite: framing.rewrite,
    Cors: framing.cors,
}


def _check_pieces(rule: Rule) -> None:
    for f in (*rule.filters, *(g for b in rule.backends for g in b.filters)):
        check = _PIECES.get(type(f))
        if check is not None:
            check(f)


def rule_plan(rule: Rule) -> RulePlan:
    """What a request matching `rule` needs; `framing.UnsafeField` when it could split a head."""
    _check_pieces(rule)
    redirects = _of(rule.filters, RequestRedirect)
    cors = _of(rule.filters, Cors)
    mirrors = _mirrors(rule.filters)
    backends = {id(b): _backend_plan(rule, b) for b in rule.backends}
    # The weighted pick (coxswain_routing) only ever picks slots weighted above 0.
    taking = [b for b in rule.backends if b.weight > 0]
    only = None
    if len(taking) == 1 and taking[0].resolved:
        only = (taking[0], backends[id(taking[0])])
    return RulePlan(
        route=f"{rule.id.kind}/{rule.id.namespace}/{rule.id.name}",
        redirect=redirects[0] if redirects else None,
        redirect_request=bytes_plan(fold_header_modifiers(_before_redirect(rule.filters))),
        response=bytes_plan(fold_header_modifiers(_of(rule.filters, ResponseHeaderModifier))),
        cors=cors[0] if cors else None,
        mirrors=mirrors,
        backends=backends,
        only=only,
        tests_headers=any(m.headers for m in rule.matches),
        retries=rule.retry.attempts,
        retry_codes=frozenset(rule.retry.codes),
        backoff=rule.retry.backoff_ms / 1000,
        attempt_timeout=rule.timeouts.backend_request_ms / 1000,
        request_timeout=rule.timeouts.request_ms / 1000,
        policy=compile_policy(rule),
    )


@dataclass(frozen=True, slots=True)
class PortInfo:
    """One routing port this proxy serves HTTP on."""

    port: int  # the port routes are keyed by (HostRoutes.bind_port)
    tls: bool  # HTTPS: terminate TLS before HTTP
    hostnames: tuple[str, ...] = ()  # Gateway listener hostnames on the port ("" excluded)
    hostless: bool = True  # some listener on the port names no hostname


@dataclass(slots=True)
class Tables:
    router: Router
    plans: dict[int, RulePlan]  # by id() of the Rule
    endpoints: dict[str, EndpointPicker]  # by EndpointSet key
    # Backends a BackendTLSPolicy governs dial their endpoints over TLS, and backends declaring
    # h2c speak cleartext HTTP/2: each has its own picker, whose origins say how to connect.
    own_pickers: dict[int, EndpointPicker]  # by id() of the Backend
    tls: dict[int, tls.SniStore]  # by routing port
    ports: dict[int, PortInfo]  # the ports to bind
    # The context each HTTPS port's handshakes start with (`tls.front_context`), by routing port.
    fronts: dict[int, ssl.SSLContext] = field(default_factory=dict)
    version: str = ""
    mirrors_any: bool = field(default=False)
    # What these tables were compiled from, by key: the next compile reuses what it is handed
    # again, and holding them keeps every id() above valid.
    sources: dict[str, Resource] = field(default_factory=dict)
    # The match memo (`http.dispatch`): (port, Host, method, target) -> (outcome, path, query)
    # for the requests these tables routed already. Routing is a function of those and of the
    # headers, so ports where some match tests headers keep no memo.
    memo: dict[tuple[int, bytes, bytes, bytes], tuple[Outcome, str, str]] = field(
        default_factory=dict
    )
    no_memo: frozenset[int] = frozenset()
    # The 421 memo (`http.dispatch`): (port, TLS server name, Host) -> whether the Host is
    # outside the names of the listener the server name selected. A function of the three and
    # of these tables' listeners, so it lives and dies with them.
    misdirected: dict[tuple[int, str, bytes], bool] = field(default_factory=dict)
    # TCP, TLS-passthrough and UDP ports: their routes and the ports to bind (`stream/`).
    streams: compiled.Streams = field(default_factory=compiled.Streams)
    # What the next compile patches when it is handed a delta (`_patched`):
    kinds: Kinds = field(default_factory=dict)  # `sources` by kind, each in snapshot order
    planned: _Plans = field(default_factory=lambda: _Plans())  # `plans`, with their use counts
    own_routes: dict[str, HostRoutes] = field(default_factory=dict)  # with own-picker backends
    client_certificates: dict[str, TlsCertificate] = field(default_factory=dict)
    ingress: dict[int, bool] = field(default_factory=dict)  # the Ingress ports compiled for

    def picker(self, backend: Backend) -> EndpointPicker | None:
        if backend.tls is None and backend.protocol not in HTTP2_PROTOCOLS:
            return self.endpoints.get(backend.endpoints)
        return self.own_pickers.get(id(backend))


def _ports(gateways: Iterable[GatewayListeners], ingress: dict[int, bool]) -> dict[int, PortInfo]:
    found: dict[int, list[tuple[bool, str]]] = {}
    for resource in gateways:
        for listener in resource.listeners:
            if listener.protocol in (ListenerProtocol.HTTP, ListenerProtocol.HTTPS):
                is_tls = listener.protocol is ListenerProtocol.HTTPS
                found.setdefault(listener.bind_port, []).append((is_tls, listener.hostname))
    ports = {port: PortInfo(port, is_tls) for port, is_tls in ingress.items()}
    for port, entries in found.items():
        if port in ports:
            continue  # an Ingress port keeps its own protocol
        names = tuple(sorted({name.lower() for _, name in entries if name}))
        hostless = any(not name for _, name in entries)
        ports[port] = PortInfo(port, entries[0][0], names, hostless)
    return ports


# A snapshot's resources: by key (as staged), or listed (tests), where a later one wins a key.
Resources = Mapping[str, Resource] | Iterable[Resource]
# Resources by their class, then by key.
Kinds = dict[type, dict[str, Resource]]


def by_key(resources: Resources) -> dict[str, Resource]:
    if isinstance(resources, Mapping):
        return dict(resources)
    return {r.key: r for r in resources}


class _Reuse:
    """What `previous` compiled from the very objects this compile is handed again."""

    __slots__ = ("previous", "sources")

    def __init__(self, previous: Tables | None) -> None:
        self.previous = previous
        self.sources = previous.sources if previous is not None else {}

    def kept(self, key: str, resource: Resource) -> bool:
        return self.sources.get(key) is resource


@dataclass(slots=True)
class _Plans:
    """The rule plans by id() of the Rule, and what patching them needs."""

    plans: dict[int, RulePlan] = field(default_factory=dict)
    uses: dict[int, int] = field(default_factory=dict)  # how many HostRoutes hold each rule
    headers: dict[str, int] = field(default_factory=dict)  # routes testing headers -> port

    def copy(self) -> _Plans:
        return _Plans(dict(self.plans), dict(self.uses), dict(self.headers))

    def add(self, key: str, resource: HostRoutes, before: dict[int, RulePlan]) -> None:
        plans, uses = self.plans, self.uses
        for rule in resource.rules:
            rid = id(rule)
            uses[rid] = uses.get(rid, 0) + 1
            plan = plans.get(rid) or before.get(rid) or _planned(key, rule)
            plans[rid] = plan
            if plan.tests_headers:
                self.headers[key] = resource.bind_port

    def drop(self, key: str, resource: HostRoutes) -> None:
        self.headers.pop(key, None)
        plans, uses = self.plans, self.uses
        for rule in resource.rules:
            rid = id(rule)
            left = uses[rid] - 1
            if left:
                uses[rid] = left
            else:
                del uses[rid], plans[rid]


def _plans(routes: dict[str, HostRoutes], reuse: _Reuse) -> _Plans:
    """Every rule's plan, those of routes handed again taken from `previous`."""
    before = reuse.previous.plans if reuse.previous is not None else {}
    found = _Plans()
    for key, resource in routes.items():
        found.add(key, resource, before if reuse.kept(key, resource) else {})
    return found


def _planned(key: str, rule: Rule) -> RulePlan:
    try:
        return rule_plan(rule)
    except framing.UnsafeField as exc:
        raise framing.UnsafeField(f"resource {key!r}, {rule.id}: {exc}") from exc


def check_routes(resource: HostRoutes) -> None:
    """Raise `framing.UnsafeField` when compiling `resource` would: what staging refuses."""
    for rule in resource.rules:
        _planned(resource.key, rule)


def _needs_own_picker(backend: Backend) -> bool:
    return backend.tls is not None or backend.protocol in HTTP2_PROTOCOLS


def _own_picker_backends(routes: HostRoutes) -> Iterator[Backend]:
    """The backends of `routes` dialled other than as plain HTTP/1.1, mirrors' included."""
    for rule in routes.rules:
        slot_filters = (g for b in rule.backends for g in b.filters)
        for backend in rule.backends:
            if _needs_own_picker(backend):
                yield backend
        for f in (*rule.filters, *slot_filters):
            if isinstance(f, RequestMirror) and _needs_own_picker(f.backend):
                yield f.backend


def _own_routes(routes: Iterable[tuple[str, HostRoutes]]) -> dict[str, HostRoutes]:
    """The routes with some backend dialled other than as plain HTTP/1.1 (usually few)."""
    return {key: r for key, r in routes if next(_own_picker_backends(r), None) is not None}


def _own_pickers(
    routes: dict[str, HostRoutes],
    sets: dict[str, EndpointSet],
    reuse: _Reuse,
    certificates: dict[str, TlsCertificate],
) -> dict[int, EndpointPicker]:
    """The pickers of `routes`' own-picker backends (`_own_routes`), kept from `previous`
    where the route, its endpoints and its Gateway's client certificate are the same."""
    before = reuse.previous.own_pickers if reuse.previous is not None else {}
    held = reuse.previous.client_certificates if reuse.previous is not None else {}
    pickers = {}
    for key, resource in routes.items():
        certificate = certificates.get(resource.table)
        # A rotated client certificate makes new pickers (new origins, new connections).
        kept = reuse.kept(key, resource) and held.get(resource.table) == certificate
        for backend in _own_picker_backends(resource):
            endpoint_set = sets.get(backend.endpoints)
            if endpoint_set is None:
                continue
            picker = None
            if kept and reuse.kept(backend.endpoints, endpoint_set):
                picker = before.get(id(backend))
            if picker is None:
                picker = EndpointPicker(endpoint_set, _via(backend, certificate))
            pickers[id(backend)] = picker
    return pickers


def _via(backend: Backend, certificate: TlsCertificate | None) -> backend_tls.TlsClient | H2c:
    # An h2c or gRPC backend a BackendTLSPolicy governs: HTTP/2 over TLS (ALPN h2).
    h2 = backend.protocol in HTTP2_PROTOCOLS
    if backend.tls is None:
        return H2C
    if backend.tls.client_certificate is not None:
        # The backend's own (an Ingress's proxy-ssl-secret), checked by the controller: one
        # that cannot be loaded fails the compile rather than dialling without it.
        return backend_tls.client_for(backend.tls, h2, backend.tls.client_certificate)
    try:
        return backend_tls.client_for(backend.tls, h2, certificate)
    except (ssl.SSLError, ValueError) as exc:
        if certificate is None:
            raise
        # An unusable client certificate must not take the snapshot down: dialled without.
        fields = {"source": certificate.source, "error": str(exc)}
        log.warning("backend client certificate unusable, not presented", extra={"fields": fields})
        return backend_tls.client_for(backend.tls, h2)


def _endpoints(sets: dict[str, EndpointSet], reuse: _Reuse) -> dict[str, EndpointPicker]:
    before = reuse.previous.endpoints if reuse.previous is not None else {}
    return {
        key: before[key] if reuse.kept(key, s) else EndpointPicker(s) for key, s in sets.items()
    }


def _tls(kinds: Kinds, reuse: _Reuse) -> tuple[dict[int, tls.SniStore], dict[int, ssl.SSLContext]]:
    """Each HTTPS port's certificate store and the context its handshakes start with."""
    before = reuse.previous
    stores = tls.compile_stores(
        _kind_of(kinds, TlsStore),
        _kind_of(kinds, ClientCaStore),
        held=reuse.sources,
        before=before.tls if before is not None else {},
    )
    fronts = tls.compile_fronts(
        stores,
        before=before.tls if before is not None else {},
        fronts=before.fronts if before is not None else {},
    )
    return stores, fronts


def _kind_of(kinds: Kinds, kind: type[R]) -> dict[str, R]:
    return cast(dict[str, R], kinds.get(kind, {}))


def _kinds(keyed: dict[str, Resource]) -> Kinds:
    kinds: Kinds = {}
    for key, resource in keyed.items():
        of_kind = kinds.get(type(resource))
        if of_kind is None:
            of_kind = kinds[type(resource)] = {}
        of_kind[key] = resource
    return kinds


def _streamed(kinds: Kinds) -> dict[str, Resource]:
    """The resources stream ports compile from (their routes, the listeners, the stores)."""
    return {
        **_kind_of(kinds, StreamRoute),
        **_kind_of(kinds, GatewayListeners),
        **_kind_of(kinds, TlsStore),
    }


@dataclass(slots=True)
class _Delta:
    """What a compile is handed that `previous` was not compiled from, by key."""

    new: dict[str, Resource]  # added, or replacing the object of `old` under the same key
    old: dict[str, Resource]  # replaced or removed
    kinds: frozenset[type]  # of either

    def of(self, kind: type[R]) -> tuple[list[tuple[str, R]], list[tuple[str, R]]]:
        """(old, new) of one kind."""
        old = [(k, cast(R, r)) for k, r in self.old.items() if type(r) is kind]
        return old, [(k, cast(R, r)) for k, r in self.new.items() if type(r) is kind]


# A delta larger than this share of the snapshot compiles in one pass (reusing what it can).
PATCH_SHARE = 8


def _delta(keyed: dict[str, Resource], previous: Tables | None) -> _Delta | None:
    if previous is None:
        return None
    sources = previous.sources
    new = {k: r for k, r in keyed.items() if sources.get(k) is not r}
    old = {k: sources[k] for k in new if k in sources}
    if len(sources) - (len(keyed) - len(new)) > len(old):  # some keys were removed
        old.update((k, sources[k]) for k in sources.keys() - keyed.keys())
    if len(new) + len(old) > max(16, len(keyed) // PATCH_SHARE):
        return None
    return _Delta(new, old, frozenset(map(type, (*new.values(), *old.values()))))


def compile_tables(
    resources: Resources,
    *,
    ingress: dict[int, bool],
    version: str = "",
    previous: Tables | None = None,
) -> Tables:
    """Compile a snapshot. `ingress`: the Ingress ports to serve (port -> TLS), shared mode.

    `previous`: the tables served now. A small delta from what they were compiled from is
    patched onto them (`_patched`); otherwise the whole snapshot is compiled, reusing the parts
    compiled from resource objects handed again. Either gives the same tables.
    """
    keyed = by_key(resources)
    with gcpause.paused():
        delta = _delta(keyed, previous)
        if delta is not None and previous is not None:
            return _patched(keyed, delta, previous, ingress, version)
        return _whole(keyed, previous, ingress, version)


def _whole(
    keyed: dict[str, Resource], previous: Tables | None, ingress: dict[int, bool], version: str
) -> Tables:
    reuse = _Reuse(previous)
    kinds = _kinds(keyed)
    routes, sets = _kind_of(kinds, HostRoutes), _kind_of(kinds, EndpointSet)
    gateways = _kind_of(kinds, GatewayListeners)
    plans = _plans(routes, reuse)
    stores, fronts = _tls(kinds, reuse)
    own_routes = _own_routes(routes.items())
    certificates = backend_tls.client_certificates(gateways.values())
    return Tables(
        router=compile_router(
            [*gateways.values(), *routes.values()], previous.router if previous else None
        ),
        plans=plans.plans,
        endpoints=_endpoints(sets, reuse),
        own_pickers=_own_pickers(own_routes, sets, reuse, certificates),
        tls=stores,
        fronts=fronts,
        ports=_ports(gateways.values(), ingress),
        version=version,
        sources=keyed,
        no_memo=frozenset(plans.headers.values()),
        streams=compiled.compile_streams(_streamed(kinds), previous.streams if previous else None),
        kinds=kinds,
        planned=plans,
        own_routes=own_routes,
        client_certificates=certificates,
        ingress=dict(ingress),
    )


def _patched(
    keyed: dict[str, Resource],
    delta: _Delta,
    previous: Tables,
    ingress: dict[int, bool],
    version: str,
) -> Tables:
    """`previous` with only what `delta` touches compiled again: the tables `_whole` would
    give, at the cost of the delta rather than of the snapshot. Every part no kind of the
    delta feeds is `previous`'s own object."""
    reuse = _Reuse(previous)
    kinds = _patched_kinds(previous.kinds, delta)
    touched = delta.kinds
    routes, sets = _kind_of(kinds, HostRoutes), _kind_of(kinds, EndpointSet)
    gateways = _kind_of(kinds, GatewayListeners)
    old_routes, new_routes = delta.of(HostRoutes)

    router, plans, own_routes = previous.router, previous.planned, previous.own_routes
    no_memo = previous.no_memo
    if GatewayListeners in touched:
        router = compile_router([*gateways.values(), *routes.values()], previous.router)
    elif HostRoutes in touched:
        changed = [r for _, r in old_routes] + [r for _, r in new_routes]
        router = patch_router(previous.router, routes, changed, gateways.values())
    if HostRoutes in touched:
        plans = plans.copy()
        for key, resource in old_routes:
            plans.drop(key, resource)
        for key, resource in new_routes:
            plans.add(key, resource, {})
        no_memo = frozenset(plans.headers.values())
        own_routes = dict(own_routes)
        for key, _ in old_routes:
            own_routes.pop(key, None)
        own_routes.update(_own_routes(new_routes))

    endpoints = previous.endpoints
    if EndpointSet in touched:
        endpoints = dict(endpoints)
        old_sets, new_sets = delta.of(EndpointSet)
        for key, _ in old_sets:
            if key not in delta.new:
                del endpoints[key]
        for key, endpoint_set in new_sets:
            endpoints[key] = EndpointPicker(endpoint_set)

    certificates = previous.client_certificates
    if GatewayListeners in touched:
        certificates = backend_tls.client_certificates(gateways.values())
    own_pickers = previous.own_pickers
    if touched & {HostRoutes, EndpointSet, GatewayListeners}:
        own_pickers = _own_pickers(own_routes, sets, reuse, certificates)

    stores, fronts = previous.tls, previous.fronts
    if touched & {TlsStore, ClientCaStore}:
        stores, fronts = _tls(kinds, reuse)
    ports = previous.ports
    if GatewayListeners in touched or ingress != previous.ingress:
        ports = _ports(gateways.values(), ingress)
    streams = previous.streams
    if touched & {StreamRoute, GatewayListeners, TlsStore}:
        streams = compiled.compile_streams(_streamed(kinds), previous.streams)
    return Tables(
        router=router,
        plans=plans.plans,
        endpoints=endpoints,
        own_pickers=own_pickers,
        tls=stores,
        fronts=fronts,
        ports=ports,
        version=version,
        sources=keyed,
        no_memo=no_memo,
        streams=streams,
        kinds=kinds,
        planned=plans,
        own_routes=own_routes,
        client_certificates=certificates,
        ingress=previous.ingress if ingress == previous.ingress else dict(ingress),
    )


def _patched_kinds(before: Kinds, delta: _Delta) -> Kinds:
    """`before` with the delta's keys removed and put, each kind in snapshot order (a key
    replaced keeps its place, a new one goes last, as staging keeps them)."""
    kinds = dict(before)
    for kind in delta.kinds:
        kinds[kind] = dict(kinds.get(kind, {}))
    for key, resource in delta.old.items():
        replacing = delta.new.get(key)
        if replacing is None or type(replacing) is not type(resource):
            del kinds[type(resource)][key]
    for key, resource in delta.new.items():
        kinds[type(resource)][key] = resource
    return kinds
