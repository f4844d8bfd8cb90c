"""HTTPRoute and GRPCRoute rules to model rules: matches, filters, weighted backends, timeouts,
retry.

A GRPCRoute rule is an HTTPRoute rule with its method matches lowered onto paths
(`grpcroutes.method_path`), the filter types of its kind, and no timeouts or retry (the kind
declares neither); everything else, backends and their filters included, is shared.

A backendRef's filters are checked against the rule's as the request meets them (spec 003
"Filters": "filters on a backendRef apply after them"): a backendRef's RequestRedirect is held
to the rule's URLRewrite and ResponseHeaderModifiers as a rule's own would be, and CORS, which
is answered before any backendRef is picked, is a rule's filter only; so is ExternalAuth, which
becomes the rule's external auth policy (`filters`, `external_auth`).

Spec 003 "Backend references": "weight defaults to 1; a weight of 0 sends no traffic and drops
the reference." "Timeouts and retry": "a zero duration bounds nothing, and backendRequest may
not exceed request", retry "attempts times (once when unset, at most ten)".
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from coxswain_controller.translate.backends.resolver import BackendResolver
from coxswain_controller.translate.conditions import Reason
from coxswain_controller.translate.inputs import Obj, created, name, namespace, spec
from coxswain_controller.translate.routes import grpcroutes
from coxswain_controller.translate.routes.filters import FilterResult, convert_filters
from coxswain_routing import (
    Backend,
    Cors,
    Filter,
    Match,
    PathMatch,
    PathModifierType,
    PathType,
    Policy,
    RequestRedirect,
    ResponseHeaderModifier,
    Retry,
    RouteId,
    Rule,
    Timeouts,
    URLRewrite,
    ValueMatch,
    ValueMatchType,
)

__all__ = ["RouteRules", "compile_rules", "parse_duration_ms", "unroutable_hostnames"]

_DURATION = re.compile(r"^(?:([0-9]{1,5})(h|ms|m|s))+$")
_PART = re.compile(r"([0-9]{1,5})(h|ms|m|s)")
_UNIT_MS = {"h": 3_600_000, "m": 60_000, "s": 1_000, "ms": 1}


@dataclass
class RouteRules:
    rules: list[Rule] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)  # the route is not served (UnsupportedValue)
    unresolved: list[tuple[Reason, str]] = field(default_factory=list)  # ResolvedRefs False
    notes: list[str] = field(default_factory=list)
    # The rules dropped while the others are served: each one's label ("rules[1]", with its
    # name when it has one) to why its every request is answered 500 (an ExternalAuth that
    # cannot ask its auth service; `filters.FilterResult.fails_closed`).
    dropped: dict[str, list[str]] = field(default_factory=dict)
    # Every Service the route's references name, resolved or not: what a Service change can
    # alter about it (translate.incremental.patch).
    services: frozenset[tuple[str, str]] = frozenset()


def parse_duration_ms(value: str) -> int | None:
    """A Gateway API Duration ("1h2m3s4ms" style) in milliseconds; None when malformed."""
    if not _DURATION.match(value):
        return None
    return sum(int(n) * _UNIT_MS[unit] for n, unit in _PART.findall(value))


def compile_rules(route: Obj, kind: str, resolver: BackendResolver) -> RouteRules:
    out = RouteRules()
    out.refused += unroutable_hostnames(spec(route).get("hostnames") or [])
    with resolver.recording() as named:
        for index, raw in enumerate(spec(route).get("rules") or [{}]):
            rule = _rule(route, kind, index, raw, resolver, out)
            if rule is not None:
                problems = rule.validate()
                out.refused += [f"rules[{index}].{p.field}: {p.message}" for p in problems]
                out.rules.append(rule)
    out.services = frozenset(named)
    return out


def _rule(
    route: Obj,
    kind: str,
    index: int,
    raw: Mapping[str, Any],
    resolver: BackendResolver,
    out: RouteRules,
) -> Rule | None:
    ns = namespace(route)
    at = f"rules[{index}]"
    grpc = kind == grpcroutes.KIND
    matches = _matches(raw.get("matches") or [{}], grpc, at, out)
    converted = _filters(raw.get("filters") or [], at, _Scope(kind, ns, resolver, matches), out)
    if converted.fails_closed:
        label = f"{at} ({raw['name']})" if raw.get("name") else at
        out.dropped[label] = [f"{at}.{why}" for why in converted.fails_closed]
    filtered = converted.filters
    _check_prefix_rewrite(filtered, matches, at, out)
    _check_redirect(filtered, at, out)
    refs = raw.get("backendRefs") or []
    if _redirects(filtered) and refs:
        out.notes.append(f"{at}: backendRefs on a redirecting rule are ignored")
        refs = []
    scope = _Scope(kind, ns, resolver, matches, filtered, len(refs))
    backends = []
    for j, ref in enumerate(refs):
        if int(ref.get("weight", 1)) != 0:
            backends.append(_backend(ref, f"{at}.backendRefs[{j}]", scope, out))
    timeouts = Timeouts() if grpc else _timeouts(raw.get("timeouts") or {}, at, out)
    retry = Retry() if grpc else _retry(raw.get("retry"), at, out)
    rule_id = RouteId(created(route), ns, name(route), kind, index, str(raw.get("name") or ""))
    auth = converted.external_auth
    policy = Policy(external_auth=auth) if auth is not None else None
    return Rule(rule_id, matches, filtered, tuple(backends), timeouts, retry, policy)


@dataclass(frozen=True)
class _Scope:
    """What a rule's filters and backendRefs are lowered against."""

    kind: str  # the route's kind
    namespace: str  # the route's namespace
    resolver: BackendResolver
    matches: tuple[Match, ...]  # the rule's matches
    rule_filters: tuple[Filter, ...] = ()  # the rule's own, converted
    refs: int = 0  # how many backendRefs the rule declares

    @property
    def allowed(self) -> frozenset[str] | None:
        return grpcroutes.FILTERS if self.kind == grpcroutes.KIND else None


def _filters(
    raw: Sequence[Mapping[str, Any]], at: str, scope: _Scope, out: RouteRules
) -> FilterResult:
    converted = convert_filters(
        raw,
        resolver=scope.resolver,
        route_kind=scope.kind,
        route_namespace=scope.namespace,
        allowed=scope.allowed,
    )
    out.refused += [f"{at}.{r}" for r in converted.refused]
    out.unresolved += converted.unresolved
    out.notes += [f"{at}.{n}" for n in converted.notes]
    return converted


def _backend(ref: Mapping[str, Any], at: str, scope: _Scope, out: RouteRules) -> Backend:
    """One backendRef, its filters checked against the rule's (spec 003 "Filters": "filters
    on a backendRef apply after them, to the requests that reference receives")."""
    converted = _filters(ref.get("filters") or [], at, scope, out)
    filters = converted.filters
    if converted.external_auth is not None:
        # Gateway API: ExternalAuth's "Support in HTTPRouteRule: Extended", and no support in
        # HTTPBackendRef: the auth service is asked before any backendRef is picked.
        out.refused.append(f"{at}: ExternalAuth is a rule's filter, not a backendRef's")
    if _rewrites_path(scope.rule_filters) and _rewrites_path(filters):
        out.refused.append(f"{at}: a rule and its backendRef may not both rewrite the path")
    if _prefix_rewrite(filters):
        if scope.refs != 1:
            out.refused.append(
                f"{at}: ReplacePrefixMatch on a backendRef needs exactly one backendRef"
            )
        _check_prefix_rewrite(filters, scope.matches, at, out)
    if _redirects(filters):
        _check_redirect((*scope.rule_filters, *filters), at, out)
    if any(isinstance(f, Cors) for f in filters):
        # The preflight is answered before any backendRef is picked: a policy that one slot
        # of a weighted dispatch carries cannot be honoured (spec 003: "A filter this build
        # cannot honor ... makes the route not served").
        out.refused.append(f"{at}: CORS is a rule's filter, not a backendRef's")
    resolved = scope.resolver.resolve(
        ref, route_kind=scope.kind, route_namespace=scope.namespace, filters=filters
    )
    if resolved.problem is not None:
        out.unresolved.append(resolved.problem)
    return resolved.backend


def _redirects(filters: Sequence[Any]) -> bool:
    return any(isinstance(f, RequestRedirect) for f in filters)


def _rewrites_path(filters: Sequence[Any]) -> bool:
    return any(isinstance(f, URLRewrite) and f.path is not None for f in filters)


def _check_redirect(chain: Sequence[Any], at: str, out: RouteRules) -> None:
    """The checks on the filters a redirect ends, the rule's and then the backendRef's.

    Spec 003 "Filters": a redirecting rule "may not also carry a URLRewrite", and "a
    ResponseHeaderModifier on the same rule that sets, adds or removes Location, in any case,
    makes the route not served".
    """
    if not _redirects(chain):
        return
    if any(isinstance(f, URLRewrite) for f in chain):
        out.refused.append(f"{at}: a redirect may not be combined with a URLRewrite")
    for f in chain:
        if isinstance(f, ResponseHeaderModifier) and _names_location(f):
            out.refused.append(
                f"{at}: a ResponseHeaderModifier may not set, add or remove Location: "
                "the redirect defines it"
            )
            return


def _names_location(modifier: ResponseHeaderModifier) -> bool:
    names = [n for n, _ in (*modifier.set, *modifier.add)] + list(modifier.remove)
    return any(n.lower() == "location" for n in names)


def unroutable_hostnames(hostnames: Sequence[Any]) -> list[str]:
    """Spec 003 "Status": a route naming "an unroutable hostname" is refused with
    UnsupportedValue. A Host header never carries a wildcard beyond a whole leading label, and
    the Gateway API gives route hostnames as names, never IP addresses."""
    refused = []
    for index, host in enumerate(hostnames):
        text = str(host)
        try:
            ipaddress.ip_address(text)
        except ValueError:
            if "*" not in text.removeprefix("*."):
                continue
        refused.append(f"hostnames[{index}]: {text!r} is not a routable hostname")
    return refused


def _prefix_rewrite(filters: Sequence[Any]) -> bool:
    return any(
        isinstance(f, URLRewrite | RequestRedirect)
        and f.path is not None
        and f.path.type is PathModifierType.REPLACE_PREFIX_MATCH
        for f in filters
    )


def _check_prefix_rewrite(
    filters: Sequence[Any], matches: tuple[Match, ...], at: str, out: RouteRules
) -> None:
    # Spec 003: ReplacePrefixMatch "requires the rule to have exactly one match, of type
    # PathPrefix".
    if _prefix_rewrite(filters) and (
        len(matches) != 1 or matches[0].path.type is not PathType.PATH_PREFIX
    ):
        out.refused.append(f"{at}: ReplacePrefixMatch needs exactly one match, of type PathPrefix")


def _matches(
    entries: Sequence[Mapping[str, Any]], grpc: bool, at: str, out: RouteRules
) -> tuple[Match, ...]:
    if not grpc:
        return tuple(_match(m) for m in entries)
    return tuple(_grpc_match(m, f"{at}.matches[{i}]", out) for i, m in enumerate(entries))


def _grpc_match(raw: Mapping[str, Any], at: str, out: RouteRules) -> Match:
    # Spec 003 "GRPCRoute": "A headers match is a header match."
    path, problems = grpcroutes.method_path(raw.get("method"))
    out.refused += [f"{at}.method.{p}" for p in problems]
    return Match(path=path, headers=tuple(_value(h, lower=True) for h in raw.get("headers") or []))


def _match(raw: Mapping[str, Any]) -> Match:
    path = raw.get("path") or {}
    return Match(
        path=PathMatch(PathType(path.get("type", "PathPrefix")), str(path.get("value", "/"))),
        method=str(raw.get("method") or ""),
        headers=tuple(_value(h, lower=True) for h in raw.get("headers") or []),
        query=tuple(_value(q, lower=False) for q in raw.get("queryParams") or []),
    )


def _value(raw: Mapping[str, Any], *, lower: bool) -> ValueMatch:
    key = str(raw.get("name", ""))
    return ValueMatch(
        key.lower() if lower else key,
        str(raw.get("value", "")),
        ValueMatchType(raw.get("type", "Exact")),
    )


def _timeouts(raw: Mapping[str, Any], at: str, out: RouteRules) -> Timeouts:
    values = {}
    for field_name in ("request", "backendRequest"):
        if raw.get(field_name) is None:
            values[field_name] = 0
            continue
        parsed = parse_duration_ms(str(raw[field_name]))
        if parsed is None:
            out.refused.append(f"{at}.timeouts.{field_name}: {raw[field_name]!r} is not a duration")
            parsed = 0
        values[field_name] = parsed
    return Timeouts(values["request"], values["backendRequest"])


def _retry(raw: Mapping[str, Any] | None, at: str, out: RouteRules) -> Retry:
    # A stanza, even empty, retries: the Gateway API's HTTPRouteRetry "Implementations SHOULD
    # retry on connection errors (disconnect, reset, timeout, TCP failure) if a retry stanza is
    # configured", and spec 003 retries "attempts times (once when unset ...)".
    if raw is None:
        return Retry()
    backoff = 0
    if raw.get("backoff") is not None:
        parsed = parse_duration_ms(str(raw["backoff"]))
        if parsed is None:
            out.refused.append(f"{at}.retry.backoff: {raw['backoff']!r} is not a duration")
        backoff = parsed or 0
    codes = tuple(sorted({int(c) for c in raw.get("codes") or []}))
    attempts = raw.get("attempts")
    return Retry(attempts=1 if attempts is None else int(attempts), codes=codes, backoff_ms=backoff)
