"""Filter semantics as pure functions: header folding, path rewrites, redirect Locations.

Where it sits: the proxy calls these once per request on the matched rule's filters (the plan
from `fold_header_modifiers` is computed once per rule and backend slot, not per request); the
controller calls them to check a rule can be served. Plain values in and out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache

from coxswain_routing._model import HeaderModifier, PathModifier, PathModifierType, RequestRedirect
from coxswain_routing._paths import strip_trailing_slash

__all__ = [
    "HeaderOp",
    "HeaderPlan",
    "RequestTarget",
    "apply_header_plan",
    "fold_header_modifiers",
    "redirect_location",
    "rewrite_path",
    "WELL_KNOWN_PORTS",
]

WELL_KNOWN_PORTS = {"http": 80, "https": 443}


class HeaderOp(Enum):
    SET = "set"
    ADD = "add"
    REMOVE = "remove"


# One operation per lower-cased header name: (op, name as first written, value).
HeaderPlan = dict[str, tuple[HeaderOp, str, str]]


def fold_header_modifiers(modifiers: Iterable[HeaderModifier]) -> HeaderPlan:
    """Fold modifiers, in the order they apply, into one operation per header.

    Spec 003 "Filters": "Across filters, modifications fold into one operation per header in the
    order they apply, the rule's filters before a backendRef's: a set followed by an add of the
    same header sets the joined value; an add after a remove is a set; a remove after a set
    removes."
    """
    plan: HeaderPlan = {}
    for modifier in modifiers:
        for name, value in modifier.set:
            plan[name.lower()] = (HeaderOp.SET, name, value)
        for name, value in modifier.add:
            plan[name.lower()] = _fold_add(plan.get(name.lower()), name, value)
        for name in modifier.remove:
            plan[name.lower()] = (HeaderOp.REMOVE, name, "")
    return plan


def _fold_add(
    previous: tuple[HeaderOp, str, str] | None, name: str, value: str
) -> tuple[HeaderOp, str, str]:
    if previous is None:
        return (HeaderOp.ADD, name, value)
    op, first_name, old = previous
    if op is HeaderOp.REMOVE:
        return (HeaderOp.SET, name, value)
    return (op, first_name, f"{old},{value}")


def apply_header_plan(
    plan: HeaderPlan, headers: Sequence[tuple[str, str]]
) -> list[tuple[str, str]]:
    """Apply a folded plan to a header list (names compared case-insensitively).

    `set` replaces every value of the header; `add` appends one (Gateway API: "Add adds the
    given header(s) ... to the request before the action"), `remove` drops every value.
    """
    if not plan:
        return list(headers)
    result = [
        (n, v) for n, v in headers if n.lower() not in plan or plan[n.lower()][0] is HeaderOp.ADD
    ]
    for op, name, value in plan.values():
        if op is not HeaderOp.REMOVE:
            result.append((name, value))
    return result


def rewrite_path(path: str, modifier: PathModifier, matched_prefix: str) -> str:
    """The path after a URLRewrite or redirect path modifier.

    Spec 003 "Filters": "replacePrefixMatch replaces the declared prefix on a segment boundary,
    so with a PathPrefix of /api and a replacement of /v2, /api becomes /v2, /api/ becomes /v2/
    and /api/orders becomes /v2/orders; an empty replacement is /."
    `matched_prefix` is the PathPrefix the request matched; the matcher guarantees it covers
    `path` on a segment boundary. For a ReplaceRegexMatch it is the RegularExpression the
    request matched, whose groups the template takes (`_regex_rewrite`).
    """
    if modifier.type is PathModifierType.REPLACE_FULL_PATH:
        return modifier.value or "/"
    if modifier.type is PathModifierType.REPLACE_REGEX_MATCH:
        return _regex_rewrite(path, modifier.value, matched_prefix)
    prefix = strip_trailing_slash(matched_prefix)
    rest = path[len(prefix) :] if prefix != "/" else path
    if not rest:
        return modifier.value or "/"
    replacement = modifier.value.rstrip("/")
    return replacement + rest if rest.startswith("/") else f"{replacement}/{rest}"


# nginx's numbered captures, as ingress-nginx's rewrite-target writes them ($1 to $9), and
# $(N) for any group (the controller renumbers groups when it combines path patterns; unlike
# braces, parentheses may stand in a path as they are, RFC 3986 §3.3 sub-delims).
_GROUP_REFERENCE = re.compile(r"\$(?:([1-9])|\(([1-9][0-9]*)\))")


@lru_cache(maxsize=1024)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


@lru_cache(maxsize=1024)
def _template(value: str) -> tuple[str | int, ...]:
    """A rewrite template split once into literal text and group numbers."""
    parts: list[str | int] = []
    at = 0
    for found in _GROUP_REFERENCE.finditer(value):
        parts += [value[at : found.start()], int(found.group(1) or found.group(2))]
        at = found.end()
    parts.append(value[at:])
    return tuple(p for p in parts if p != "")


def _regex_rewrite(path: str, template: str, pattern: str) -> str:
    """The path a ReplaceRegexMatch makes: the whole path replaced by the template, each $N
    the text group N of `pattern` matched (nginx's `rewrite`: a group that took no part, or
    that the pattern does not have, is empty). The matcher chose the rule by this pattern, so
    it matches; were it not to, the path is left as it is."""
    found = _compiled(pattern).fullmatch(path)
    if found is None:
        return path
    groups = found.re.groups
    return "".join(
        part if isinstance(part, str) else (found.group(part) or "") if part <= groups else ""
        for part in _template(template)
    )


@dataclass(frozen=True, slots=True)
class RequestTarget:
    """The parts of the request a Location is composed from (after earlier filters)."""

    scheme: str  # "http" or "https", as the client spoke to the listener
    host: str  # the Host as the filters leave it, without port
    path: str
    query: str  # raw, without "?"; "" when absent


def redirect_location(
    redirect: RequestRedirect,
    request: RequestTarget,
    *,
    listener_port: int,
    matched_prefix: str = "/",
) -> str:
    """The Location a RequestRedirect answers with.

    Spec 003 "Filters": "scheme, hostname, port and path replace their parts of the request URL
    and the rest is kept. An explicit scheme with no port sends the client to the scheme's
    well-known port; neither scheme nor port sends it back to the Gateway listener's port,
    whatever port the request's Host header carried; and a port that is the well-known one for
    the scheme is omitted."
    """
    scheme = redirect.scheme or request.scheme
    host = redirect.hostname or request.host
    if redirect.port:
        port = redirect.port
    elif redirect.scheme:
        port = WELL_KNOWN_PORTS.get(scheme, 0)
    else:
        port = listener_port
    path = request.path
    if redirect.path is not None:
        path = rewrite_path(request.path, redirect.path, matched_prefix)
    authority = f"[{host}]" if ":" in host and not host.startswith("[") else host
    if port and port != WELL_KNOWN_PORTS.get(scheme):
        authority = f"{authority}:{port}"
    query = f"?{request.query}" if request.query else ""
    return f"{scheme}://{authority}{path}{query}"
