"""A compiled (rule, match) pair: the unit the matcher orders and tests on every request.

Each candidate precomputes everything a request needs from it — its predicates in their fast
form, its outcome status (500 when no backend slot resolves), and the weighted picker its rule
shares on this host — so a match allocates nothing and returns the candidate itself.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from coxswain_routing._model import (
    Backend,
    HostRoutes,
    Match,
    PathType,
    RequestRedirect,
    Rule,
    ValueMatch,
    ValueMatchType,
)
from coxswain_routing._paths import strip_trailing_slash
from coxswain_routing._precedence import PrecedenceKey, precedence_key
from coxswain_routing._weighted import WeightedRoundRobin

__all__ = ["Candidate", "ValueTest", "compile_candidates"]

# (name, exact value or None, compiled pattern or None)
ValueTest = tuple[str, str | None, re.Pattern[str] | None]


def _value_tests(conditions: tuple[ValueMatch, ...], *, fold_case: bool) -> tuple[ValueTest, ...]:
    # Spec 003: "A match naming one header or query parameter twice uses the first condition,
    # whatever the case."
    tests: list[ValueTest] = []
    seen: set[str] = set()
    for cond in conditions:
        name = cond.name.lower() if fold_case else cond.name
        if name in seen:
            continue
        seen.add(name)
        if cond.type is ValueMatchType.EXACT:
            tests.append((name, cond.value, None))
        else:
            tests.append((name, None, re.compile(cond.value)))
    return tuple(tests)


def _first_failing(tests: tuple[ValueTest, ...], values: Mapping[str, str]) -> str | None:
    """The name of the first condition `values` fails, or None when every one holds.

    Spec 003: "A header or query value is compared whole, and a RegularExpression one must match
    the whole value. The field must be present to match at all".
    """
    for name, exact, pattern in tests:
        value = values.get(name)
        if value is None:
            return name
        if pattern is None:
            if value != exact:
                return name
        elif pattern.fullmatch(value) is None:
            return name
    return None


@dataclass(slots=True, eq=False)
class Candidate:
    """One match of one rule, served for one host pattern on one port."""

    rule: Rule
    match: Match
    match_index: int
    routes: HostRoutes  # the host pattern and table it is served for
    path: str  # the Exact path, the prefix without trailing slash, or the pattern
    path_pattern: re.Pattern[str] | None
    method: str
    headers: tuple[ValueTest, ...]
    query: tuple[ValueTest, ...]
    status: int  # 200: serve the rule; 500: no backend slot resolves
    reason: str
    backends: WeightedRoundRobin[Backend]

    def failing_header(self, headers: Mapping[str, str]) -> str | None:
        return _first_failing(self.headers, headers) if self.headers else None

    def failing_query(self, query: Mapping[str, str]) -> str | None:
        return _first_failing(self.query, query) if self.query else None

    @property
    def order(self) -> PrecedenceKey:
        """Where precedence puts this candidate among those meeting on its path (computed on
        demand: keeping the key on every candidate would only weigh on the cache)."""
        return precedence_key(self.rule.id, self.match, self.match_index)

    @property
    def listener_port(self) -> int:
        return self.routes.listener_port or self.routes.bind_port


def _status(rule: Rule) -> tuple[int, str]:
    if any(isinstance(f, RequestRedirect) for f in rule.filters):
        return 200, "redirect"
    resolved = [b for b in rule.backends if b.resolved and b.weight > 0]
    if resolved:
        return 200, "matched"
    # Spec 003 "Backend references": "A rule with no usable reference answers 500 outright."
    reasons = sorted({b.unresolved_reason for b in rule.backends if b.unresolved_reason})
    return 500, "no usable backendRef" + (": " + "; ".join(reasons) if reasons else "")


def _path_key(match: Match) -> tuple[str, re.Pattern[str] | None]:
    if match.path.type is PathType.REGULAR_EXPRESSION:
        return match.path.value, re.compile(match.path.value)
    if match.path.type is PathType.EXACT:
        return match.path.value, None
    return strip_trailing_slash(match.path.value), None


def compile_candidates(routes: HostRoutes) -> list[Candidate]:
    candidates = []
    for rule in routes.rules:
        status, reason = _status(rule)
        picker = WeightedRoundRobin(rule.backends, [b.weight for b in rule.backends])
        for index, match in enumerate(rule.matches):
            path, pattern = _path_key(match)
            candidates.append(
                Candidate(
                    rule=rule,
                    match=match,
                    match_index=index,
                    routes=routes,
                    path=path,
                    path_pattern=pattern,
                    method=match.method.upper(),
                    headers=_value_tests(match.headers, fold_case=True),
                    query=_value_tests(match.query, fold_case=False),
                    status=status,
                    reason=reason,
                    backends=picker,
                )
            )
    return candidates
