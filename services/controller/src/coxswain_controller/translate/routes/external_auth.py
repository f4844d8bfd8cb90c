"""The Gateway API's ExternalAuth filter (GEP-1494) lowered onto the rule's external auth policy.

Where it sits: `filters.convert_filters` hands an `ExternalAuth` entry here; what comes back is
a `coxswain_routing.ExternalAuth` of style `EXT_AUTHZ`, which `rules` puts on the rule's
`Policy` (the one the ingress-nginx auth-url annotation and a CoxswainPolicy's externalAuth
use), so the proxy runs it on the request path before a backend is picked.

What is honoured, from HTTPExternalAuthFilter: protocol HTTP; `backendRef`, resolved exactly
as a forwarding backendRef is (a Service port, a ReferenceGrant across namespaces);
`http.path`, `http.allowedHeaders` and `http.allowedResponseHeaders`; `forwardBody` unset or
`maxSize: 0`. What makes the route not served (spec 003 "Filters": "A filter this build cannot
honor ... makes the route not served until it is fixed"; UnsupportedValue): protocol GRPC
(Envoy's ext_authz over gRPC is not built), a `forwardBody.maxSize` above 0 (the body is
not sent to the auth service), and a malformed path or header name.

A backendRef that does not resolve keeps the filter and leaves it naming no endpoints: the
route's ResolvedRefs is False with the resolver's reason and the rule's requests are answered
500. HTTPRouteFilter.externalAuth: "If there is any problem communicating with the external
service, this filter MUST fail closed." So the rule is dropped: its matches stay and fail closed
rather than let its requests fall through to another rule, and while another rule of the route
is served the route is PartiallyInvalid (`httproutes`; the upstream
HTTPRouteExternalAuthPartiallyInvalid test asks for it, and for 403 or 5xx on the dropped rule).
An auth Service governed by a BackendTLSPolicy, or speaking h2c, cannot be reached as it asks
(the auth exchange is cleartext HTTP/1.1): it is unresolved the same way, UnsupportedProtocol.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from coxswain_controller.translate.backends.resolver import BackendResolver
from coxswain_controller.translate.conditions import Reason
from coxswain_controller.translate.routes.wire_values import header_name_problem, path_problem
from coxswain_routing import AuthStyle, BackendProtocol, ExternalAuth

__all__ = ["Lowered", "lower"]

# HTTPAuthConfig.allowedHeaders: "The following headers must always be sent to the
# authorization server, regardless of this setting: Host, Method, Path, Content-Length,
# Authorization". Naming one of them asks nothing more.
_ALWAYS_SENT = frozenset({"host", "method", "path", "content-length", "authorization"})
# HTTPAuthConfig.allowedResponseHeaders: "all headers from the authorization server except
# Authority or Host must be copied": those two never are, named or not.
_NEVER_COPIED = frozenset({"host", ":authority"})


@dataclass
class Lowered:
    auth: ExternalAuth | None = None  # None: refused
    refused: list[str] = field(default_factory=list)  # "<field>: <why>", from externalAuth
    unresolved: list[tuple[Reason, str]] = field(default_factory=list)


def lower(
    raw: Mapping[str, Any], *, resolver: BackendResolver, route_kind: str, route_namespace: str
) -> Lowered:
    out = Lowered()
    _check_protocol(raw, out)
    http = raw.get("http") or {}
    path = http.get("path") or ""
    if path and (problem := path_problem(path)) is not None:
        out.refused.append(f"externalAuth.http.path: {problem}")
    sent = _names(http.get("allowedHeaders"), "externalAuth.http.allowedHeaders", out, _ALWAYS_SENT)
    copied = _names(
        http.get("allowedResponseHeaders"),
        "externalAuth.http.allowedResponseHeaders",
        out,
        _NEVER_COPIED,
    )
    if out.refused:
        return out
    endpoints = _endpoints(raw.get("backendRef") or {}, resolver, route_kind, route_namespace, out)
    out.auth = ExternalAuth(
        endpoints, "", path, response_headers=copied, style=AuthStyle.EXT_AUTHZ,
        request_headers=sent,
    )  # fmt: skip
    return out


def _check_protocol(raw: Mapping[str, Any], out: Lowered) -> None:
    protocol = raw.get("protocol")
    if protocol == "GRPC":
        out.refused.append(
            "externalAuth.protocol: GRPC (Envoy's ext_authz over gRPC) is not supported; "
            "an auth service speaking HTTP is (protocol: HTTP)"
        )
    elif protocol != "HTTP":
        out.refused.append(f"externalAuth.protocol: {protocol!r} is not one of HTTP, GRPC")
    body = raw.get("forwardBody") or {}
    size = body.get("maxSize") or 0
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        out.refused.append(f"externalAuth.forwardBody.maxSize: {size!r} is not a byte count")
    elif size > 0:
        out.refused.append(
            "externalAuth.forwardBody.maxSize: forwarding the request body to the auth service "
            "is not supported; 0 (or no forwardBody) sends none"
        )


def _names(value: Any, at: str, out: Lowered, skip: frozenset[str]) -> tuple[str, ...]:
    """Field names, lower-cased and each once, without those in `skip`; a malformed one is
    refused."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise TypeError(f"{at}: expected a list, got {type(value).__name__}")
    names: list[str] = []
    for i, name in enumerate(value):
        if isinstance(name, str) and name.lower() in skip:
            continue
        problem = header_name_problem(name)
        if problem is not None:
            out.refused.append(f"{at}[{i}]: {problem}")
        elif name.lower() not in names:
            names.append(name.lower())
    return tuple(names)


def _endpoints(
    ref: Mapping[str, Any],
    resolver: BackendResolver,
    route_kind: str,
    route_namespace: str,
    out: Lowered,
) -> str:
    """The auth Service port's endpoint set key; "" when it cannot be reached (500)."""
    resolved = resolver.resolve(
        {**ref, "weight": 1}, route_kind=route_kind, route_namespace=route_namespace
    )
    if resolved.problem is not None:
        reason, message = resolved.problem
        out.unresolved.append((reason, f"ExternalAuth backendRef: {message}"))
        return ""
    backend = resolved.backend
    service = f"{ref.get('namespace') or route_namespace}/{ref.get('name')}"
    if backend.tls is not None or backend.protocol is BackendProtocol.H2C:
        how = "a BackendTLSPolicy governs it" if backend.tls is not None else "it speaks h2c"
        out.unresolved.append(
            (
                Reason.UNSUPPORTED_PROTOCOL,
                f"ExternalAuth backendRef: Service {service} cannot be asked: {how}, and the "
                "auth request is cleartext HTTP/1.1",
            )
        )
        return ""
    return backend.endpoints
