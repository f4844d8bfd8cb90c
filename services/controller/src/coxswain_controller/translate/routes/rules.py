"""HTTPRoute and GRPCRoute rules to model rules: matches, filters, weighted backends, timeouts,
retry.

A GRPCRoute rule is an HTTPRoute rule with its method matches lowered onto paths
(`grpcroutes.method_path`), the filter types of its kind, and no timeouts or retry (the kind
declares neither); everything else, backends and their filters included, is shared.

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
from coxswain_controller.translate.routes.filters import convert_filters
from coxswain_routing import (
    Match,
    PathMatch,
    PathModifierType,
    PathType,
    RequestRedirect,
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
    allowed = grpcroutes.FILTERS if grpc else None
    matches = _matches(raw.get("matches") or [{}], grpc, at, out)
    filtered = convert_filters(
        raw.get("filters") or [],
        resolver=resolver,
        route_kind=kind,
        route_namespace=ns,
        allowed=allowed,
    )
    out.refused += [f"{at}.{r}" for r in filtered.refused]
    out.unresolved += filtered.unresolved
    out.notes += [f"{at}.{n}" for n in filtered.notes]
    redirect = any(isinstance(f, RequestRedirect) for f in filtered.filters)
    rewrites_path = any(isinstance(f, URLRewrite) and f.path is not None for f in filtered.filters)
    _check_prefix_rewrite(filtered.filters, matches, at, out)
    backends = []
    refs = raw.get("backendRefs") or []
    if redirect and refs:
        out.notes.append(f"{at}: backendRefs on a redirecting rule are ignored")
        refs = []
    for j, ref in enumerate(refs):
        if int(ref.get("weight", 1)) == 0:
            continue
        ref_filters = convert_filters(
            ref.get("filters") or [],
            resolver=resolver,
            route_kind=kind,
            route_namespace=ns,
            allowed=allowed,
        )
        out.refused += [f"{at}.backendRefs[{j}].{r}" for r in ref_filters.refused]
        out.unresolved += ref_filters.unresolved
        if rewrites_path and any(
            isinstance(f, URLRewrite) and f.path is not None for f in ref_filters.filters
        ):
            out.refused.append(
                f"{at}.backendRefs[{j}]: a rule and its backendRef may not both rewrite the path"
            )
        if len(refs) != 1 and _prefix_rewrite(ref_filters.filters):
            out.refused.append(
                f"{at}.backendRefs[{j}]: ReplacePrefixMatch on a backendRef "
                "needs exactly one backendRef"
            )
        resolved = resolver.resolve(
            ref, route_kind=kind, route_namespace=ns, filters=ref_filters.filters
        )
        if resolved.problem is not None:
            out.unresolved.append(resolved.problem)
        backends.append(resolved.backend)
    timeouts = Timeouts() if grpc else _timeouts(raw.get("timeouts") or {}, at, out)
    retry = Retry() if grpc else _retry(raw.get("retry") or {}, at, out)
    rule_id = RouteId(created(route), ns, name(route), kind, index, str(raw.get("name") or ""))
    return Rule(rule_id, matches, filtered.filters, tuple(backends), timeouts, retry)


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


def _retry(raw: Mapping[str, Any], at: str, out: RouteRules) -> Retry:
    if not raw:
        return Retry()
    backoff = parse_duration_ms(str(raw.get("backoff") or "0s")) or 0
    codes = tuple(sorted({int(c) for c in raw.get("codes") or []}))
    attempts = int(raw.get("attempts", 1))
    return Retry(attempts=attempts, codes=codes, backoff_ms=backoff)
