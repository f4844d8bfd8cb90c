"""`validate()` on the model: each problem names the field at fault.

Covers the checks the model itself can make (regular expressions, paths, header names, header
modifier repeats, redirect statuses, mirror fractions, timeouts, retry bounds). Leaves out
checks that need other objects (references, grants), which translation makes.
"""

from __future__ import annotations

import pytest

from coxswain_routing import (
    Backend,
    Match,
    PathMatch,
    PathType,
    Problem,
    RequestHeaderModifier,
    RequestMirror,
    Retry,
    RouteId,
    Rule,
    Timeouts,
    ValueMatch,
    ValueMatchType,
)

ID = RouteId(1, "default", "web")


@pytest.mark.parametrize(
    ("rule", "fields"),
    [
        pytest.param(Rule(ID), [], id="defaults-are-valid"),
        pytest.param(
            Rule(ID, (Match(PathMatch(PathType.REGULAR_EXPRESSION, "/(")),)),
            ["matches[0].path.value"],
            id="bad-path-regex",
        ),
        pytest.param(
            Rule(ID, (Match(PathMatch(PathType.EXACT, "api")),)),
            ["matches[0].path.value"],
            id="relative-path",
        ),
        pytest.param(
            Rule(ID, (Match(headers=(ValueMatch("x", "[", ValueMatchType.REGULAR_EXPRESSION),)),)),
            ["matches[0].headers[0].value"],
            id="bad-header-regex",
        ),
        pytest.param(
            Rule(ID, (Match(headers=(ValueMatch("X-Up", "1"),)),)),
            ["matches[0].headers[0].name"],
            id="header-name-not-lower-cased",
        ),
        pytest.param(
            Rule(ID, filters=(RequestHeaderModifier(set=(("A", "1"),), remove=("a",)),)),
            ["filters[0]"],
            id="header-named-twice-in-one-modifier",
        ),
        pytest.param(
            Rule(ID, filters=(RequestMirror(Backend(endpoints="e"), numerator=0),)),
            ["filters[0]"],
            id="mirror-copying-nothing",
        ),
        pytest.param(
            Rule(ID, timeouts=Timeouts(request_ms=1000, backend_request_ms=2000)),
            ["timeouts.backendRequest"],
            id="backend-request-exceeds-request",
        ),
        pytest.param(
            Rule(ID, retry=Retry(attempts=11)), ["retry.attempts"], id="more-than-ten-attempts"
        ),
        pytest.param(
            Rule(
                ID,
                backends=(Backend(filters=(RequestHeaderModifier(add=(("a", "1"), ("A", "2"))),)),),
            ),
            ["backendRefs[0].filters[0]"],
            id="backend-filter-problems-named",
        ),
    ],
)
def test_validate_names_the_field(rule: Rule, fields: list[str]) -> None:
    problems = rule.validate()
    assert [p.field for p in problems] == fields
    assert all(isinstance(p, Problem) and p.message for p in problems)
