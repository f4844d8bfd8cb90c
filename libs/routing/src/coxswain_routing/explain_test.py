"""`explain()`: the same outcome as `match()`, and why every other candidate lost.

Covers one verdict per losing reason: path, method, header (absent and mismatched), query,
host tier not reached, and each precedence rule (exact path, method, headers, age). Leaves out
the matching rules themselves (matcher_test.py).
"""

from __future__ import annotations

from coxswain_routing import (
    Backend,
    HostRoutes,
    Match,
    PathMatch,
    PathType,
    RouteId,
    Rule,
    ValueMatch,
    compile_router,
    explain,
)

OK = (Backend(endpoints="endpoints/d/s/80"),)


def rule(name: str, match: Match, created: int = 10) -> Rule:
    return Rule(RouteId(created, "default", name), (match,), backends=OK)


def verdicts(
    routes: list[HostRoutes], *, headers: dict[str, str] | None = None, query: str = ""
) -> dict[str, str]:
    """Explain GET shop.example.com/a; the outcome must be exactly what match() answers."""
    router = compile_router(routes)
    result = explain(router, 80, "shop.example.com", "GET", "/a", headers or {}, query)
    assert result.outcome == router.match(80, "shop.example.com", "GET", "/a", headers or {}, query)
    return {v.route.name: v.verdict for v in result.candidates}


def table(host: str, *rules: Rule) -> HostRoutes:
    return HostRoutes("gateway/default/gw", 80, host, rules)


def test_each_loser_says_which_predicate_failed() -> None:
    routes = [
        table(
            "shop.example.com",
            rule("winner", Match(PathMatch(PathType.PATH_PREFIX, "/a"))),
            rule("path", Match(PathMatch(PathType.EXACT, "/b"))),
            rule("method", Match(PathMatch(PathType.EXACT, "/a"), method="POST")),
            rule(
                "header", Match(PathMatch(PathType.EXACT, "/a"), headers=(ValueMatch("x-a", "1"),))
            ),
            rule("query", Match(PathMatch(PathType.EXACT, "/a"), query=(ValueMatch("q", "1"),))),
        )
    ]
    got = verdicts(routes, headers={"x-a": "2"}, query="q=2")
    assert got == {
        "winner": "selected",
        "path": "path: Exact '/b' does not match '/a'",
        "method": "method: matches POST, the request is GET",
        "header": "header x-a: '2' does not match",
        "query": "query q: '2' does not match",
    }


def test_an_absent_header_is_named_as_absent() -> None:
    routes = [table("shop.example.com", rule("header", Match(headers=(ValueMatch("x-a", "1"),))))]
    assert verdicts(routes)["header"] == "header x-a: absent"


def test_equally_matching_losers_name_the_precedence_rule() -> None:
    routes = [
        table(
            "shop.example.com",
            rule("exact", Match(PathMatch(PathType.EXACT, "/a")), created=50),
            rule("prefix", Match(PathMatch(PathType.PATH_PREFIX, "/a")), created=1),
        )
    ]
    assert verdicts(routes)["prefix"] == "precedence: the winner has an Exact path"
    by_method = [
        table("shop.example.com", rule("get", Match(method="GET"), 50), rule("any", Match(), 1))
    ]
    assert verdicts(by_method)["any"] == "precedence: the winner names a method"
    by_headers = [
        table(
            "shop.example.com",
            rule("two", Match(headers=(ValueMatch("a", "1"), ValueMatch("b", "1"))), 50),
            rule("one", Match(headers=(ValueMatch("a", "1"),)), 1),
        )
    ]
    assert (
        verdicts(by_headers, headers={"a": "1", "b": "1"})["one"]
        == "precedence: the winner has more header matches"
    )
    by_age = [table("shop.example.com", rule("old", Match(), 1), rule("new", Match(), 2))]
    assert verdicts(by_age)["new"] == "precedence: age: the winner's route is older"


def test_candidates_in_a_less_specific_host_tier_were_never_reached() -> None:
    routes = [
        table("shop.example.com", rule("exact-host", Match())),
        table("*.example.com", rule("wildcard", Match())),
    ]
    assert verdicts(routes) == {
        "exact-host": "selected",
        "wildcard": "host: a more specific host tier decided the request first",
    }


def test_a_miss_still_lists_every_candidate_with_its_reason() -> None:
    routes = [table("shop.example.com", rule("only", Match(PathMatch(PathType.EXACT, "/x"))))]
    router = compile_router(routes)
    result = explain(router, 80, "shop.example.com", "GET", "/a")
    assert result.outcome.status == 404
    assert [v.verdict for v in result.candidates] == ["path: Exact '/x' does not match '/a'"]
