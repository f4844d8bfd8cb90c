"""What one snapshot compiles into for the request path: `Tables`, swapped in as one reference.

Where it sits: `dataplane.Dataplane.apply` calls `compile_tables(resources, ...)` off the request
path, then replaces `Dataplane.tables`. Each connection reads that attribute once per request
and keeps the object for the request's lifetime, so a request never sees half a snapshot.

Why the shape: everything a request needs that depends only on the snapshot is computed here
once — per-rule header plans in bytes, rewrite and redirect filters, mirror samplers, CORS, the
endpoint pickers, the TLS stores, which ports to bind — so the request path does dict lookups,
never folding or parsing. Plans are keyed by `id()` of the rule and backend objects the router
returns; the tables hold the router, so those objects live as long as the keys are used.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from coxswain_proxy.dataplane import tls, upstream_tls
from coxswain_proxy.dataplane.endpoints import EndpointPicker
from coxswain_routing import (
    Backend,
    Cors,
    EndpointSet,
    GatewayListeners,
    HeaderOp,
    HeaderPlan,
    HostRoutes,
    ListenerProtocol,
    MirrorSampler,
    RequestHeaderModifier,
    RequestMirror,
    RequestRedirect,
    Resource,
    ResponseHeaderModifier,
    Router,
    Rule,
    TlsStore,
    URLRewrite,
    compile_router,
    fold_header_modifiers,
)

# (lower-cased name, op, name as written, value), all bytes: applied to raw header lists.
BytesPlan = tuple[tuple[bytes, HeaderOp, bytes, bytes], ...]


def bytes_plan(plan: HeaderPlan) -> BytesPlan:
    return tuple(
        (key.encode("latin-1"), op, name.encode("latin-1"), value.encode("latin-1"))
        for key, (op, name, value) in plan.items()
    )


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


@dataclass(frozen=True, slots=True)
class RulePlan:
    route: str  # the metrics label: kind/namespace/name (bounded by the snapshot's routes)
    redirect: RequestRedirect | None
    redirect_request: BytesPlan  # request modifiers declared before the redirect
    response: BytesPlan  # the rule's response modifiers (a redirect gets them too)
    cors: Cors | None
    mirrors: tuple[Mirror, ...]  # the rule's own: once per request, before the pick
    backends: dict[int, BackendPlan]  # by id() of the Backend object
    # The rule's timeouts and retry, read once here rather than through the rule per request.
    retries: int = 0  # retry.attempts
    retry_codes: frozenset[int] = frozenset()
    backoff: float = 0.0  # seconds
    attempt_timeout: float = 0.0  # seconds per attempt (timeouts.backendRequest); 0: none
    request_timeout: float = 0.0  # seconds for the whole request (timeouts.request); 0: none


def _of(filters: Iterable[object], kind: type[Any]) -> list[Any]:
    return [f for f in filters if isinstance(f, kind)]


def _mirrors(filters: Iterable[object]) -> tuple[Mirror, ...]:
    found = _of(filters, RequestMirror)
    return tuple(Mirror(m, MirrorSampler(m.numerator, m.denominator)) for m in found)


def _backend_plan(rule: Rule, backend: Backend) -> BackendPlan:
    filters = (*rule.filters, *backend.filters)
    rewrites = _of(filters, URLRewrite)
    return BackendPlan(
        request=bytes_plan(fold_header_modifiers(_of(filters, RequestHeaderModifier))),
        response=bytes_plan(fold_header_modifiers(_of(filters, ResponseHeaderModifier))),
        rewrite=rewrites[-1] if rewrites else None,
        mirrors=_mirrors(backend.filters),
    )


def _before_redirect(rule: Rule) -> list[RequestHeaderModifier]:
    # Spec 003 "Filters": "a RequestHeaderModifier ahead of it modifies the request the
    # redirect answers ... while one after it has no request left to modify".
    found = []
    for f in rule.filters:
        if isinstance(f, RequestRedirect):
            break
        if isinstance(f, RequestHeaderModifier):
            found.append(f)
    return found


def rule_plan(rule: Rule) -> RulePlan:
    redirects = _of(rule.filters, RequestRedirect)
    cors = _of(rule.filters, Cors)
    mirrors = _mirrors(rule.filters)
    return RulePlan(
        route=f"{rule.id.kind}/{rule.id.namespace}/{rule.id.name}",
        redirect=redirects[0] if redirects else None,
        redirect_request=bytes_plan(fold_header_modifiers(_before_redirect(rule))),
        response=bytes_plan(fold_header_modifiers(_of(rule.filters, ResponseHeaderModifier))),
        cors=cors[0] if cors else None,
        mirrors=mirrors,
        backends={id(b): _backend_plan(rule, b) for b in rule.backends},
        retries=rule.retry.attempts,
        retry_codes=frozenset(rule.retry.codes),
        backoff=rule.retry.backoff_ms / 1000,
        attempt_timeout=rule.timeouts.backend_request_ms / 1000,
        request_timeout=rule.timeouts.request_ms / 1000,
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
    # Backends a BackendTLSPolicy governs dial their endpoints over TLS: their own pickers.
    tls_pickers: dict[int, EndpointPicker]  # by id() of the Backend
    tls: dict[int, tls.SniStore]  # by routing port
    ports: dict[int, PortInfo]  # the ports to bind
    version: str = ""
    mirrors_any: bool = field(default=False)

    def picker(self, backend: Backend) -> EndpointPicker | None:
        if backend.tls is None:
            return self.endpoints.get(backend.endpoints)
        return self.tls_pickers.get(id(backend))


def _ports(resources: list[Resource], ingress: dict[int, bool]) -> dict[int, PortInfo]:
    found: dict[int, list[tuple[bool, str]]] = {}
    for resource in resources:
        if not isinstance(resource, GatewayListeners):
            continue
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


def _tls_pickers(
    resources: list[Resource], sets: dict[str, EndpointSet]
) -> dict[int, EndpointPicker]:
    pickers = {}
    for resource in resources:
        if not isinstance(resource, HostRoutes):
            continue
        for rule in resource.rules:
            mirrors = [
                f.backend
                for f in (*rule.filters, *(g for b in rule.backends for g in b.filters))
                if isinstance(f, RequestMirror)
            ]
            for backend in (*rule.backends, *mirrors):
                if backend.tls is not None and backend.endpoints in sets:
                    client = upstream_tls.client_for(backend.tls)
                    pickers[id(backend)] = EndpointPicker(sets[backend.endpoints], client)
    return pickers


def compile_tables(
    resources: Iterable[Resource], *, ingress: dict[int, bool], version: str = ""
) -> Tables:
    """Compile a snapshot. `ingress`: the Ingress ports to serve (port -> TLS), shared mode."""
    listed = list(resources)
    router = compile_router(listed)
    plans: dict[int, RulePlan] = {}
    for resource in listed:
        if isinstance(resource, HostRoutes):
            for rule in resource.rules:
                plans[id(rule)] = rule_plan(rule)
    sets = {r.key: r for r in listed if isinstance(r, EndpointSet)}
    return Tables(
        router=router,
        plans=plans,
        endpoints={key: EndpointPicker(s) for key, s in sets.items()},
        tls_pickers=_tls_pickers(listed, sets),
        tls={r.bind_port: tls.build_store(r) for r in listed if isinstance(r, TlsStore)},
        ports=_ports(listed, ingress),
        version=version,
    )
