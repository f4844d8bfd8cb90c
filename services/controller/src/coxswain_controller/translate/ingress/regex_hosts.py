"""Hosts whose paths are regular expressions, and each path's pattern there.

ingress-nginx: "if the rewrite-target annotation is used on any Ingress for a given host, then
the case insensitive regular expression location modifier will be enforced on ALL paths for a
given host regardless of what Ingress they are defined on", and likewise use-regex. Each path
`P` of such a host becomes nginx's `location ~* "^P"` (whatever its pathType), and nginx takes
the first that matches in the order ingress-nginx writes them: longest path first, then the
greater path string.

Coxswain's matcher tries exact paths, then prefixes, then regular expressions in age order
(the Gateway API's precedence), so to keep nginx's order every path of such a host is compiled
into one pattern that also refuses what an earlier path takes: `(?i)(?!E)(?:P).*`, with `E`
the earlier paths' own patterns, fully matched against the request path as the matcher does.
Rules sharing a path share its pattern (the main rule, canary rules, the HTTPS redirect).
The groups of the earlier paths come first in the combined pattern, so a rewrite target's
`$N` is renumbered past them (`offset`, written `$(N)`).

A path that is not a regular expression Python can read, or that refers back to one of its own
groups (which the renumbering would break), refuses its Ingress, with a reason; ingress-nginx
would have failed its whole configuration.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from coxswain_controller.translate.ingress.plans import IngressPlan, PathPlan

__all__ = ["Pattern", "enforced_hosts", "patterns"]

# A backreference (\1, (?P=name)) would name the wrong group once earlier paths lead the
# pattern.
_BACKREFERENCE = re.compile(r"\\[1-9]|\(\?P=")
# ingress-nginx locations are case-insensitive already: a leading (?i) says nothing more.
_LEADING_FLAG = "(?i)"


@dataclass(frozen=True, slots=True)
class Pattern:
    value: str  # the RegularExpression the path's rules match
    offset: int  # groups of earlier paths before the path's own


def needs_regex(plan: IngressPlan, path: PathPlan) -> bool:
    """ingress-nginx's `enforceRegexModifier` for one location: use-regex, or a rewrite-target
    other than the path itself."""
    policy = plan.policy
    return policy.use_regex or (bool(policy.rewrite_target) and policy.rewrite_target != path.value)


def enforced_hosts(plans: Iterable[IngressPlan]) -> set[str]:
    """The hosts some served path of which asks for regexes."""
    return {
        path.host
        for plan in plans
        if plan.served and not plan.canary
        for path in plan.paths
        if needs_regex(plan, path)
    }


def patterns(plans: Sequence[IngressPlan], hosts: set[str]) -> dict[tuple[str, str], Pattern]:
    """(host, path) -> its pattern, for every served path on `hosts`; a path no pattern can be
    made of refuses its Ingress (`IngressPlan.refusals`)."""
    found: dict[tuple[str, str], Pattern] = {}
    for host in sorted(hosts):
        on_host = [
            (plan, path)
            for plan in plans
            if plan.served and not plan.canary
            for path in plan.paths
            if path.host == host
        ]
        for plan, path in on_host:
            problem = _problem(path.value)
            if problem is not None:
                plan.refusals.append(f"path {path.value!r} on a regex host {problem}")
        found.update(((host, v), pattern) for v, pattern in _host(on_host).items())
    return found


def _host(on_host: list[tuple[IngressPlan, PathPlan]]) -> dict[str, Pattern]:
    """The patterns of one host's served paths. Two paths whose groups share a name cannot be
    combined: the later one's Ingress is refused and the rest combined again."""
    while True:
        composed, clash = _compose(path.value for plan, path in on_host if plan.served)
        if clash is None:
            return composed
        for plan, path in on_host:
            if path.value == clash and plan.served:
                plan.refusals.append(
                    f"path {clash!r} names a group another path of its host names too"
                )


def _own(path: str) -> str:
    return path[len(_LEADING_FLAG) :] if path.startswith(_LEADING_FLAG) else path


def _problem(path: str) -> str | None:
    own = _own(path)
    if _BACKREFERENCE.search(own):
        return "refers back to its own groups, which Coxswain cannot keep"
    try:
        re.compile(f"(?i)(?:{own})")
    except re.error as exc:
        return f"is not a regular expression Coxswain can read ({exc})"
    return None


def nginx_order(paths: Iterable[str]) -> list[str]:
    """ingress-nginx's location order: by path descending, then (stably) longest first."""
    ordered = sorted(set(paths), reverse=True)
    return sorted(ordered, key=len, reverse=True)


def _compose(paths: Iterable[str]) -> tuple[dict[str, Pattern], str | None]:
    """Each path's pattern, guarded by the earlier ones; or the first path that cannot be."""
    composed: dict[str, Pattern] = {}
    earlier: list[str] = []
    offset = 0
    for path in nginx_order(paths):
        own = f"(?:{_own(path)})"
        guard = f"(?!{'|'.join(earlier)})" if earlier else ""
        value = f"(?i){guard}{own}.*"
        try:
            re.compile(value)
        except re.error:
            return composed, path
        composed[path] = Pattern(value, offset)
        earlier.append(own)
        offset += re.compile(own).groups
    return composed, None


def renumber(target: str, offset: int) -> str:
    """A rewrite target's $1..$9 as $(N + offset), for a pattern `offset` groups in."""
    if not offset:
        return target
    return re.sub(r"\$([1-9])", lambda m: f"$({int(m.group(1)) + offset})", target)
