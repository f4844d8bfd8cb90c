"""Wire form of the parts of a rule: ids, matches, filters, backends (see `_wire`).

Enums are mapped by explicit tables rather than by value, so renaming one side cannot silently
shift the other.
"""

from __future__ import annotations

from coxswain_proto.gen.coxswain.discovery import v1 as pb
from coxswain_routing import _model as m
from coxswain_routing import _wire_policy
from coxswain_routing._wire_tables import UnsafeValue, WireError, back, invert

__all__ = [
    "UnsafeValue",
    "WireError",
    "back",
    "backend_back",
    "backend_to_wire",
    "certificate_back",
    "certificate_to_wire",
    "rule_back",
    "rule_to_wire",
    "route_id_back",
    "route_id_to_wire",
    "PROTOCOL",
    "PROTOCOL_BACK",
    "SCOPE",
    "SCOPE_BACK",
    "TLS_MODE",
    "TLS_MODE_BACK",
]

PROTOCOL = {
    m.ListenerProtocol.HTTP: pb.ListenerProtocol.HTTP,
    m.ListenerProtocol.HTTPS: pb.ListenerProtocol.HTTPS,
    m.ListenerProtocol.TLS: pb.ListenerProtocol.TLS,
    m.ListenerProtocol.TCP: pb.ListenerProtocol.TCP,
    m.ListenerProtocol.UDP: pb.ListenerProtocol.UDP,
}
TLS_MODE = {
    m.TlsMode.NONE: pb.TlsMode.NONE,
    m.TlsMode.TERMINATE: pb.TlsMode.TERMINATE,
    m.TlsMode.PASSTHROUGH: pb.TlsMode.PASSTHROUGH,
}
SCOPE = {
    m.WildcardScope.ANY_LABELS: pb.WildcardScope.ANY_LABELS,
    m.WildcardScope.ONE_LABEL: pb.WildcardScope.ONE_LABEL,
}
_PATH_TYPE = {
    m.PathType.PATH_PREFIX: pb.PathType.PATH_PREFIX,
    m.PathType.EXACT: pb.PathType.EXACT,
    m.PathType.REGULAR_EXPRESSION: pb.PathType.REGULAR_EXPRESSION,
    m.PathType.IMPLEMENTATION_SPECIFIC: pb.PathType.IMPLEMENTATION_SPECIFIC,
}
_VALUE_TYPE = {
    m.ValueMatchType.EXACT: pb.ValueMatchType.EXACT,
    m.ValueMatchType.REGULAR_EXPRESSION: pb.ValueMatchType.REGULAR_EXPRESSION,
}
_MODIFIER = {
    m.PathModifierType.REPLACE_FULL_PATH: pb.PathModifierType.REPLACE_FULL_PATH,
    m.PathModifierType.REPLACE_PREFIX_MATCH: pb.PathModifierType.REPLACE_PREFIX_MATCH,
    m.PathModifierType.REPLACE_REGEX_MATCH: pb.PathModifierType.REPLACE_REGEX_MATCH,
}
_BACKEND_PROTOCOL = {
    m.BackendProtocol.HTTP1: pb.BackendProtocol.HTTP1,
    m.BackendProtocol.H2C: pb.BackendProtocol.H2C,
    m.BackendProtocol.WEBSOCKET: pb.BackendProtocol.WEBSOCKET,
    m.BackendProtocol.GRPC: pb.BackendProtocol.GRPC,
}
PROTOCOL_BACK = invert(PROTOCOL)
TLS_MODE_BACK = invert(TLS_MODE)
SCOPE_BACK = invert(SCOPE)
_PATH_TYPE_BACK = invert(_PATH_TYPE)
_VALUE_TYPE_BACK = invert(_VALUE_TYPE)
_MODIFIER_BACK = invert(_MODIFIER)
_BACKEND_PROTOCOL_BACK = invert(_BACKEND_PROTOCOL)


# --------------------------------------------------------------------------------- matches


def route_id_to_wire(r: m.RouteId) -> pb.RouteId:
    return pb.RouteId(
        kind=r.kind,
        namespace=r.namespace,
        name=r.name,
        rule_index=r.rule_index,
        rule_name=r.rule_name,
        creation_seconds=r.creation_seconds,
    )


def route_id_back(r: pb.RouteId | None) -> m.RouteId:
    if r is None:
        raise WireError("rule without an id")
    return m.RouteId(
        creation_seconds=r.creation_seconds,
        namespace=r.namespace,
        name=r.name,
        kind=r.kind,
        rule_index=r.rule_index,
        rule_name=r.rule_name,
    )


def _value_match(v: m.ValueMatch) -> pb.ValueMatch:
    return pb.ValueMatch(name=v.name, type=_VALUE_TYPE[v.type], value=v.value)


def _value_match_back(v: pb.ValueMatch) -> m.ValueMatch:
    return m.ValueMatch(
        name=v.name, value=v.value, type=back(_VALUE_TYPE_BACK, v.type, "match type")
    )


def _match(x: m.Match) -> pb.Match:
    return pb.Match(
        path=pb.PathMatch(type=_PATH_TYPE[x.path.type], value=x.path.value),
        method=x.method,
        headers=[_value_match(h) for h in x.headers],
        query=[_value_match(q) for q in x.query],
    )


def _match_back(x: pb.Match) -> m.Match:
    path = x.path or pb.PathMatch()
    return m.Match(
        path=m.PathMatch(type=back(_PATH_TYPE_BACK, path.type, "path type"), value=path.value),
        method=x.method,
        headers=tuple(_value_match_back(h) for h in x.headers),
        query=tuple(_value_match_back(q) for q in x.query),
    )


# --------------------------------------------------------------------------------- filters


def _headers(pairs: tuple[tuple[str, str], ...]) -> list[pb.Header]:
    return [pb.Header(name=n, value=v) for n, v in pairs]


def _header_modifier(h: m.HeaderModifier) -> pb.HeaderModifier:
    return pb.HeaderModifier(set=_headers(h.set), add=_headers(h.add), remove=list(h.remove))


def _pairs(headers: list[pb.Header]) -> tuple[tuple[str, str], ...]:
    return tuple((h.name, h.value) for h in headers)


def _path_modifier(p: m.PathModifier | None) -> pb.PathModifier | None:
    return None if p is None else pb.PathModifier(type=_MODIFIER[p.type], value=p.value)


def _path_modifier_back(p: pb.PathModifier | None) -> m.PathModifier | None:
    if p is None:
        return None
    return m.PathModifier(type=back(_MODIFIER_BACK, p.type, "path modifier"), value=p.value)


def _cors(c: m.Cors) -> pb.Cors:
    return pb.Cors(
        allow_origins=list(c.allow_origins),
        allow_credentials=c.allow_credentials,
        allow_methods=list(c.allow_methods),
        allow_headers=list(c.allow_headers),
        expose_headers=list(c.expose_headers),
        max_age_seconds=c.max_age_seconds,
    )


def _cors_back(c: pb.Cors) -> m.Cors:
    return m.Cors(
        allow_origins=tuple(c.allow_origins),
        allow_credentials=c.allow_credentials,
        allow_methods=tuple(c.allow_methods),
        allow_headers=tuple(c.allow_headers),
        expose_headers=tuple(c.expose_headers),
        max_age_seconds=c.max_age_seconds,
    )


def _filter(f: m.Filter) -> pb.Filter:
    if isinstance(f, m.RequestHeaderModifier):
        return pb.Filter(request_header_modifier=_header_modifier(f))
    if isinstance(f, m.ResponseHeaderModifier):
        return pb.Filter(response_header_modifier=_header_modifier(f))
    if isinstance(f, m.URLRewrite):
        return pb.Filter(
            url_rewrite=pb.UrlRewrite(hostname=f.hostname, path=_path_modifier(f.path))
        )
    if isinstance(f, m.RequestRedirect):
        return pb.Filter(
            request_redirect=pb.RequestRedirect(
                scheme=f.scheme,
                hostname=f.hostname,
                port=f.port,
                path=_path_modifier(f.path),
                status_code=f.status_code,
            )
        )
    if isinstance(f, m.RequestMirror):
        return pb.Filter(
            request_mirror=pb.RequestMirror(
                backend=backend_to_wire(f.backend), numerator=f.numerator, denominator=f.denominator
            )
        )
    return pb.Filter(cors=_cors(f))


def _filter_back(f: pb.Filter) -> m.Filter:
    if f.request_header_modifier is not None:
        h = f.request_header_modifier
        return m.RequestHeaderModifier(set=_pairs(h.set), add=_pairs(h.add), remove=tuple(h.remove))
    if f.response_header_modifier is not None:
        h = f.response_header_modifier
        return m.ResponseHeaderModifier(
            set=_pairs(h.set), add=_pairs(h.add), remove=tuple(h.remove)
        )
    if f.url_rewrite is not None:
        u = f.url_rewrite
        return m.URLRewrite(hostname=u.hostname, path=_path_modifier_back(u.path))
    if f.request_redirect is not None:
        r = f.request_redirect
        return m.RequestRedirect(
            scheme=r.scheme,
            hostname=r.hostname,
            port=r.port,
            path=_path_modifier_back(r.path),
            status_code=r.status_code or 302,
        )
    if f.request_mirror is not None:
        x = f.request_mirror
        if x.backend is None:
            raise WireError("request mirror without a backend")
        return m.RequestMirror(
            backend=backend_back(x.backend), numerator=x.numerator, denominator=x.denominator
        )
    if f.cors is not None:
        return _cors_back(f.cors)
    raise WireError("filter of an unknown kind")


# --------------------------------------------------------------------------------- backends


def certificate_to_wire(c: m.TlsCertificate) -> pb.TlsCertificate:
    return pb.TlsCertificate(
        server_names=list(c.server_names),
        certificate_chain_pem=c.certificate_chain_pem,
        private_key_pem=c.private_key_pem,
        source=c.source,
    )


def certificate_back(c: pb.TlsCertificate) -> m.TlsCertificate:
    return m.TlsCertificate(
        server_names=tuple(c.server_names),
        certificate_chain_pem=c.certificate_chain_pem,
        private_key_pem=c.private_key_pem,
        source=c.source,
    )


def _tls(t: m.UpstreamTLS | None) -> pb.UpstreamTls | None:
    if t is None:
        return None
    client = t.client_certificate
    return pb.UpstreamTls(
        sni=t.sni,
        ca_bundle_pem=t.ca_bundle_pem,
        system_roots=t.system_roots,
        subject_alt_names=list(t.subject_alt_names),
        subject_alt_uris=list(t.subject_alt_uris),
        client_certificate=certificate_to_wire(client) if client is not None else None,
    )


def _tls_back(t: pb.UpstreamTls | None) -> m.UpstreamTLS | None:
    if t is None:
        return None
    client = t.client_certificate
    return m.UpstreamTLS(
        sni=t.sni,
        ca_bundle_pem=t.ca_bundle_pem,
        system_roots=t.system_roots,
        subject_alt_names=tuple(t.subject_alt_names),
        subject_alt_uris=tuple(t.subject_alt_uris),
        client_certificate=certificate_back(client) if client is not None else None,
    )


def backend_to_wire(b: m.Backend) -> pb.Backend:
    return pb.Backend(
        weight=b.weight,
        endpoints=b.endpoints,
        unresolved_reason=b.unresolved_reason,
        protocol=_BACKEND_PROTOCOL[b.protocol],
        tls=_tls(b.tls),
        filters=[_filter(f) for f in b.filters],
    )


def backend_back(b: pb.Backend) -> m.Backend:
    return m.Backend(
        weight=b.weight,
        endpoints=b.endpoints,
        unresolved_reason=b.unresolved_reason,
        protocol=back(_BACKEND_PROTOCOL_BACK, b.protocol, "backend protocol"),
        tls=_tls_back(b.tls),
        filters=tuple(_filter_back(f) for f in b.filters),
    )


# --------------------------------------------------------------------------------- rules


def rule_to_wire(r: m.Rule) -> pb.Rule:
    timeouts = r.timeouts
    retry = r.retry
    return pb.Rule(
        id=route_id_to_wire(r.id),
        matches=[_match(x) for x in r.matches],
        filters=[_filter(f) for f in r.filters],
        backends=[backend_to_wire(b) for b in r.backends],
        timeouts=None
        if timeouts == m.Timeouts()
        else pb.Timeouts(
            request_ms=timeouts.request_ms, backend_request_ms=timeouts.backend_request_ms
        ),
        retry=None
        if retry == m.Retry()
        else pb.Retry(
            attempts=retry.attempts, codes=list(retry.codes), backoff_ms=retry.backoff_ms
        ),
        policy=_wire_policy.policy_to_wire(r.policy),
    )


def rule_back(r: pb.Rule) -> m.Rule:
    t = r.timeouts or pb.Timeouts()
    y = r.retry or pb.Retry()
    return m.Rule(
        id=route_id_back(r.id),
        matches=tuple(_match_back(x) for x in r.matches),
        filters=tuple(_filter_back(f) for f in r.filters),
        backends=tuple(backend_back(b) for b in r.backends),
        timeouts=m.Timeouts(request_ms=t.request_ms, backend_request_ms=t.backend_request_ms),
        retry=m.Retry(attempts=y.attempts, codes=tuple(y.codes), backoff_ms=y.backoff_ms),
        policy=_wire_policy.policy_back(r.policy),
    )
