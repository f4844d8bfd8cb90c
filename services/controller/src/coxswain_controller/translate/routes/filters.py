"""HTTPRoute and GRPCRoute filters to model filters, refusing what cannot be honoured.

Spec 003 "Filters": "A filter this build cannot honor — ExtensionRef, ..., a repeated filter
type, a malformed hostname, header, scheme, port or status — makes the route not served until it
is fixed, because ignoring a filter would serve the route wrongly rather than partially." Two
partial failures: a RequestMirror whose reference does not resolve is dropped and the route's
ResolvedRefs is False (the rule is served without it); an ExternalAuth whose reference does not
resolve drops its whole rule (`fails_closed`, `external_auth`). A route kind with fewer filter
types (GRPCRoute: spec 003 "RequestHeaderModifier, ResponseHeaderModifier and RequestMirror are
the HTTPRoute's filters; ExtensionRef is not honored") passes the types it carries as `allowed`;
any other is refused. Every value a filter would put on the wire (header names and values,
hostnames, paths, scheme, port, status, CORS lists) is checked by `wire_values` before the
filter is converted; a filter with a malformed value is refused and not converted. Checks across
a filter's values (a header named twice) are the model's `Rule.validate`, run on the compiled
rule.

ExternalAuth (`external_auth`) is not a model filter but the rule's external auth policy,
which the proxy runs before anything else of the rule changes or answers the request: the
auth service is asked about the request as the client sent it. So it must come before a
RequestHeaderModifier, a URLRewrite or a RequestRedirect in the list (the Gateway API lets an
implementation refuse an order it cannot honour, if it says so); one after a redirect has no
request left to authorize and is reported and ignored.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from coxswain_controller.translate.backends.resolver import BackendResolver
from coxswain_controller.translate.conditions import Reason
from coxswain_controller.translate.routes import external_auth
from coxswain_controller.translate.routes.wire_values import filter_problems
from coxswain_routing import (
    Cors,
    ExternalAuth,
    Filter,
    PathModifier,
    PathModifierType,
    RequestHeaderModifier,
    RequestMirror,
    RequestRedirect,
    ResponseHeaderModifier,
    URLRewrite,
)

__all__ = ["FilterResult", "convert_filters"]

Problem = tuple[Reason, str]


# The filters that change the request or answer it: ExternalAuth may not follow one.
_BEFORE_AUTH = frozenset({"RequestHeaderModifier", "URLRewrite", "RequestRedirect"})
# Filters a redirect ahead of them leaves nothing to do: reported and ignored.
_AFTER_REDIRECT = {
    "RequestHeaderModifier": "a RequestHeaderModifier after a redirect has no request to modify",
    "ExternalAuth": "an ExternalAuth after a redirect has no request to authorize",
}


@dataclass
class FilterResult:
    filters: tuple[Filter, ...] = ()
    refused: list[str] = field(default_factory=list)  # makes the route not served
    # ResolvedRefs False: dropped mirrors, an ExternalAuth whose backendRef did not resolve.
    unresolved: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # reported and ignored
    external_auth: ExternalAuth | None = None  # the ExternalAuth filter, for the rule's policy
    # Why the rule's every request is answered 500: an ExternalAuth that cannot ask its auth
    # service fails closed, so nothing else the rule declares is ever done (the rule is dropped).
    fails_closed: list[str] = field(default_factory=list)


def convert_filters(
    raw: Sequence[Mapping[str, Any]],
    *,
    resolver: BackendResolver,
    route_kind: str,
    route_namespace: str,
    allowed: frozenset[str] | None = None,
) -> FilterResult:
    """`raw` converted in declared order; `allowed` (None: every type this module converts)
    names the filter types the route's kind carries."""
    result = FilterResult()
    seen: set[str] = set()
    converted: list[Filter] = []
    redirected = False
    for index, entry in enumerate(raw):
        kind = str(entry.get("type", ""))
        if kind in seen and kind != "RequestMirror":
            result.refused.append(f"filters[{index}]: filter type {kind} is repeated")
            continue
        seen.add(kind)
        if allowed is not None and kind not in allowed:
            what = f"filter type {kind or '(none)'}"
            result.refused.append(f"filters[{index}]: {what} is not supported on a {route_kind}")
            continue
        if redirected and kind in _AFTER_REDIRECT:
            result.notes.append(f"filters[{index}]: {_AFTER_REDIRECT[kind]}")
            continue
        if kind == "ExternalAuth" and seen & _BEFORE_AUTH:
            result.refused.append(
                f"filters[{index}]: ExternalAuth must come before "
                f"{', '.join(sorted(seen & _BEFORE_AUTH))}: the auth service is asked about "
                "the request as the client sent it"
            )
            continue
        converted += _convert(entry, kind, index, result, resolver, route_kind, route_namespace)
        redirected = redirected or kind == "RequestRedirect"
    result.filters = tuple(converted)
    return result


def _convert(
    entry: Mapping[str, Any],
    kind: str,
    index: int,
    result: FilterResult,
    resolver: BackendResolver,
    route_kind: str,
    route_namespace: str,
) -> list[Filter]:
    at = f"filters[{index}]"
    malformed = filter_problems(kind, entry)
    if malformed:
        result.refused += [f"{at}.{problem}" for problem in malformed]
        return []
    if kind == "RequestHeaderModifier":
        return _headers(entry.get("requestHeaderModifier") or {}, RequestHeaderModifier)
    if kind == "ResponseHeaderModifier":
        return _headers(entry.get("responseHeaderModifier") or {}, ResponseHeaderModifier)
    if kind == "URLRewrite":
        rewrite = entry.get("urlRewrite") or {}
        return [
            URLRewrite(hostname=str(rewrite.get("hostname") or ""), path=_path(rewrite.get("path")))
        ]
    if kind == "RequestRedirect":
        return [_redirect(entry.get("requestRedirect") or {})]
    if kind == "RequestMirror":
        return _mirror(
            entry.get("requestMirror") or {}, at, result, resolver, route_kind, route_namespace
        )
    if kind == "CORS":
        return [_cors(entry.get("cors") or {})]
    if kind == "ExternalAuth":
        lowered = external_auth.lower(
            entry.get("externalAuth") or {},
            resolver=resolver,
            route_kind=route_kind,
            route_namespace=route_namespace,
        )
        result.refused += [f"{at}.{problem}" for problem in lowered.refused]
        result.unresolved += lowered.unresolved
        result.fails_closed += [f"{at}: {message}" for _, message in lowered.unresolved]
        result.external_auth = lowered.auth
        return []
    result.refused.append(f"{at}: filter type {kind or '(none)'} is not supported")
    return []


def _pairs(entries: Sequence[Mapping[str, Any]] | None) -> tuple[tuple[str, str], ...]:
    return tuple((str(e.get("name", "")), str(e.get("value", ""))) for e in entries or [])


def _headers(
    raw: Mapping[str, Any], cls: type[RequestHeaderModifier] | type[ResponseHeaderModifier]
) -> list[Filter]:
    return [
        cls(
            set=_pairs(raw.get("set")),
            add=_pairs(raw.get("add")),
            remove=tuple(map(str, raw.get("remove") or [])),
        )
    ]


def _path(raw: Mapping[str, Any] | None) -> PathModifier | None:
    if not raw:
        return None
    if raw.get("type") == "ReplacePrefixMatch":
        return PathModifier(
            PathModifierType.REPLACE_PREFIX_MATCH, str(raw.get("replacePrefixMatch") or "")
        )
    return PathModifier(PathModifierType.REPLACE_FULL_PATH, str(raw.get("replaceFullPath") or "/"))


def _redirect(raw: Mapping[str, Any]) -> RequestRedirect:
    return RequestRedirect(
        scheme=str(raw.get("scheme") or ""),
        hostname=str(raw.get("hostname") or ""),
        port=int(raw.get("port") or 0),
        path=_path(raw.get("path")),
        status_code=int(raw.get("statusCode") or 302),
    )


def _mirror(
    raw: Mapping[str, Any],
    at: str,
    result: FilterResult,
    resolver: BackendResolver,
    route_kind: str,
    route_namespace: str,
) -> list[Filter]:
    numerator, denominator = 100, 100
    if raw.get("percent") is not None:
        numerator = int(raw["percent"])
    elif raw.get("fraction"):
        numerator = int(raw["fraction"].get("numerator", 0))
        denominator = int(raw["fraction"].get("denominator", 100))
    if numerator <= 0 or denominator <= 0 or numerator > denominator:
        result.refused.append(
            f"{at}: a mirror copying {numerator}/{denominator} of the requests is not servable"
        )
        return []
    ref = dict(raw.get("backendRef") or {})
    ref.setdefault("weight", 1)
    resolved = resolver.resolve(ref, route_kind=route_kind, route_namespace=route_namespace)
    if resolved.problem is not None:
        result.unresolved.append(resolved.problem)
        return []
    return [RequestMirror(resolved.backend, numerator, denominator)]


def _cors(raw: Mapping[str, Any]) -> Cors:
    return Cors(
        allow_origins=tuple(map(str, raw.get("allowOrigins") or [])),
        allow_credentials=bool(raw.get("allowCredentials")),
        allow_methods=tuple(map(str, raw.get("allowMethods") or [])),
        allow_headers=tuple(map(str, raw.get("allowHeaders") or [])),
        expose_headers=tuple(map(str, raw.get("exposeHeaders") or [])),
        max_age_seconds=int(raw.get("maxAge") or 5),
    )
