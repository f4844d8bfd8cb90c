"""GRPCRoute: what a gRPC call is on the wire, lowered onto the HTTPRoute model.

Where it sits: a GRPCRoute goes through the HTTPRoute's stage (`stage.route_stage`): the same
attachment, backend resolution, status and serving. Only two things are its own, and they live
here: how a `GRPCRouteMatch.method` becomes a path match (`method_path`, which
`rules.compile_rules` calls), and which filter types the kind carries (`FILTERS`, which
`filters.convert_filters` is given). Its headers match as an HTTPRoute's do.

Spec 003 "GRPCRoute": "A GRPCRoute attaches, ranks and resolves exactly as an HTTPRoute does,
and lowers onto what gRPC is on the wire: every call is a POST to /{service}/{method}. A method
match with service and method is an exact path; service alone is the path prefix beneath the
service; method alone matches the method under any service; and a RegularExpression type matches
each segment as a pattern, an absent one matching any segment."

How the lowered matches rank, and why a match of every call is a pattern too: the model tries an
exact path, then path prefixes longest first, then patterns in precedence order (more header
conditions, then the older route, then the earlier rule). The Gateway API ranks GRPCRoute
matches by "Characters in a matching service", then "Characters in a matching method", then
"Header matches". Service and method (exact) before service alone (a prefix, longer first)
follows from that order. A method alone can only be a pattern (its service segment is any), so a
match of every call (no method match, or no matches) is the pattern `/[^/]+/[^/]+` rather than
the prefix `/`: as a prefix it would outrank every method-alone match on its host, and the usual
"this method here, everything else there" rule list would never reach the method. Among
patterns the HTTPRoute's order applies, so the earlier rule (or the older route) wins there.

The lowered match names no HTTP method: every gRPC call is a POST, so requiring it would change
nothing a gRPC client sends, while it would rank the match above an HTTPRoute's on the shared
router of a port (spec 003 "Matches and precedence": "a match naming a method first").
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from coxswain_routing import PathMatch, PathType

__all__ = ["FILTERS", "KIND", "method_path"]

KIND = "GRPCRoute"
# Spec 003 "GRPCRoute": "RequestHeaderModifier, ResponseHeaderModifier and RequestMirror are the
# HTTPRoute's filters; ExtensionRef is not honored." (The Gateway API's GRPCRouteFilter admits
# those four types only.)
FILTERS = frozenset({"RequestHeaderModifier", "ResponseHeaderModifier", "RequestMirror"})

# Gateway API GRPCMethodMatch, for type Exact: "service must only contain valid characters
# (matching ^(?i)\.?[a-z_][a-z_0-9]*(\.[a-z_][a-z_0-9]*)*$)" and "method must only contain valid
# characters (matching ^[A-Za-z_][A-Za-z_0-9]*$)"; GRPCMethodMatchType: "Exact methods MUST be
# syntactically valid: Must not contain `/` character". A name outside these would change the
# shape of the path it lowers to, so it is refused rather than trusted to the API server.
_SERVICE = re.compile(r"\.?[A-Za-z_][A-Za-z_0-9]*(?:\.[A-Za-z_][A-Za-z_0-9]*)*")
_METHOD = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
# One path segment, whatever it holds: an absent service or method.
_ANY_SEGMENT = "[^/]+"
# /{any service}/{any method}: every gRPC call (see the module docstring for why not a prefix).
_EVERY_CALL = PathMatch(PathType.REGULAR_EXPRESSION, f"/{_ANY_SEGMENT}/{_ANY_SEGMENT}")


def method_path(raw: Mapping[str, Any] | None) -> tuple[PathMatch, list[str]]:
    """The path match a `GRPCMethodMatch` lowers to, and why it cannot be served ("<field>:
    <why>", the field named from the method match down); an absent one matches every call
    (GRPCRouteMatch.method: "If this field is not specified, all services and methods will
    match")."""
    if not raw:
        return _EVERY_CALL, []
    kind = raw.get("type") or "Exact"
    service, method = _text(raw.get("service")), _text(raw.get("method"))
    if kind == "Exact":
        return _exact(service, method)
    if kind == "RegularExpression":
        return _regex(service, method)
    return _EVERY_CALL, [f"type: {kind!r} is not one of Exact, RegularExpression"]


def _exact(service: str, method: str) -> tuple[PathMatch, list[str]]:
    problems = []
    if service and not _SERVICE.fullmatch(service):
        problems.append(f"service: {service!r} is not a gRPC service name")
    if method and not _METHOD.fullmatch(method):
        problems.append(f"method: {method!r} is not a gRPC method name")
    if problems:
        return _EVERY_CALL, problems
    if service and method:
        return PathMatch(PathType.EXACT, f"/{service}/{method}"), []
    if service:
        # The segment-aware prefix: /{service} covers /{service}/{any method}, never
        # /{service}Other/...
        return PathMatch(PathType.PATH_PREFIX, f"/{service}"), []
    if method:
        return PathMatch(PathType.REGULAR_EXPRESSION, f"/{_ANY_SEGMENT}/{re.escape(method)}"), []
    # GRPCMethodMatch: "At least one of Service and Method MUST be a non-empty string"; the API
    # server refuses a match naming neither; one that reaches translation anyway restricts
    # nothing.
    return _EVERY_CALL, []


def _regex(service: str, method: str) -> tuple[PathMatch, list[str]]:
    # Each pattern is checked alone, so that one which only parses inside the other's group
    # (an unbalanced ")" closing it) is refused rather than changing what the path means.
    problems = [
        f"{name}: invalid regular expression {pattern!r}: {err}"
        for name, pattern in (("service", service), ("method", method))
        if (err := _regex_error(pattern)) is not None
    ]
    if problems:
        return _EVERY_CALL, problems
    segments = (f"(?:{p})" if p else _ANY_SEGMENT for p in (service, method))
    return PathMatch(PathType.REGULAR_EXPRESSION, "/" + "/".join(segments)), []


def _regex_error(pattern: str) -> str | None:
    try:
        re.compile(pattern)
    except re.error as err:
        return str(err)
    return None


def _text(value: Any) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise TypeError(f"expected a string, got {type(value).__name__}")  # guard.py reports it
    return value
