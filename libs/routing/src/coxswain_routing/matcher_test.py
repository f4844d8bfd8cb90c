"""The matcher's precedence, host tiers and predicates, each case citing spec 003.

Covers `compile_router(...).match(...)`: host tiers (exact, wildcards nearest first, hostless;
Ingress one-label wildcards), path kinds and their order, method / header / query precedence,
the age tie-break, the method fill rule and its host-tier limit, predicate semantics (whole
values, presence, case), path normalisation at match time, and the 404 / 500 outcomes.
Leaves out why-lost explanations (explain_test.py) and filters (filters_test.py).
"""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from coxswain_routing import (
    Backend,
    HostRoutes,
    Match,
    Miss,
    PathMatch,
    PathType,
    RouteId,
    Router,
    Rule,
    ValueMatch,
    ValueMatchType,
    WildcardScope,
    compile_router,
)

PORT = 8080
OK = Backend(endpoints="endpoints/default/svc/80")


def rule(
    name: str,
    path: str = "/",
    kind: PathType = PathType.PATH_PREFIX,
    *,
    method: str = "",
    headers: Mapping[str, str] | None = None,
    query: Mapping[str, str] | None = None,
    created: int = 100,
    namespace: str = "default",
    backends: tuple[Backend, ...] = (OK,),
) -> Rule:
    match = Match(
        path=PathMatch(kind, path),
        method=method,
        headers=tuple(ValueMatch(k, v) for k, v in (headers or {}).items()),
        query=tuple(ValueMatch(k, v) for k, v in (query or {}).items()),
    )
    return Rule(id=RouteId(created, namespace, name), matches=(match,), backends=backends)


def router(
    tables: Mapping[str, list[Rule]], *, scope: WildcardScope = WildcardScope.ANY_LABELS
) -> Router:
    return compile_router(
        HostRoutes("gateway/default/gw", PORT, host, tuple(rules), wildcard_scope=scope)
        for host, rules in tables.items()
    )


def winner(
    r: Router,
    path: str,
    *,
    host: str = "example.com",
    method: str = "GET",
    headers: Mapping[str, str] | None = None,
    query: str = "",
) -> str:
    outcome = r.match(PORT, host, method, path, headers or {}, query)
    return "404" if isinstance(outcome, Miss) else outcome.rule.id.name


# ----------------------------------------------------------------------------- host tiers


def test_exact_host_before_wildcard_before_hostless() -> None:
    # Spec 003: "the exact hostname, then wildcards covering it ..., then hostless routes".
    r = router(
        {"a.example.com": [rule("exact")], "*.example.com": [rule("wild")], "": [rule("any")]}
    )
    assert winner(r, "/", host="a.example.com") == "exact"
    assert winner(r, "/", host="b.example.com") == "wild"
    assert winner(r, "/", host="other.org") == "any"


def test_wildcards_tried_from_the_nearest_label_boundary_outward() -> None:
    r = router({"*.example.com": [rule("outer")], "*.b.example.com": [rule("inner")]})
    assert winner(r, "/", host="a.b.example.com") == "inner"
    assert winner(r, "/", host="c.example.com") == "outer"


def test_gateway_wildcard_spans_labels_but_not_the_suffix() -> None:
    # Spec 003: "*.example.com answers shop.example.com and deep.shop.example.com, but not
    # example.com".
    r = router({"*.example.com": [rule("wild")]})
    assert winner(r, "/", host="deep.shop.example.com") == "wild"
    assert winner(r, "/", host="example.com") == "404"


def test_ingress_wildcard_covers_exactly_one_label() -> None:
    r = router({"*.foo.com": [rule("wild")]}, scope=WildcardScope.ONE_LABEL)
    assert winner(r, "/", host="bar.foo.com") == "wild"
    assert winner(r, "/", host="baz.bar.foo.com") == "404"


def test_host_is_case_insensitive_and_its_port_ignored() -> None:
    r = router({"example.com": [rule("a")]})
    assert winner(r, "/", host="EXAMPLE.com:8080") == "a"


def test_path_unclaimed_on_a_host_moves_to_the_next_tier() -> None:
    # Spec 003 (shared-port deviation): "a request for shop.example.com whose path no route on
    # the shop.example.com listener claims may be answered by a route attached to a
    # *.example.com listener on the same port".
    r = router({"shop.example.com": [rule("exact", "/cart")], "*.example.com": [rule("wild", "/")]})
    assert winner(r, "/cart", host="shop.example.com") == "exact"
    assert winner(r, "/other", host="shop.example.com") == "wild"


@pytest.mark.parametrize(
    ("port", "host", "status", "reason"),
    [
        pytest.param(
            9999, "example.com", 404, "no routes are served on this port", id="unknown-port"
        ),
        pytest.param(PORT, "other.org", 404, "no route serves this host", id="unknown-host"),
    ],
)
def test_misses_say_why(port: int, host: str, status: int, reason: str) -> None:
    outcome = router({"example.com": [rule("a")]}).match(port, host, "GET", "/")
    assert isinstance(outcome, Miss)
    assert (outcome.status, outcome.reason) == (status, reason)


# ----------------------------------------------------------------------------- paths


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        pytest.param("/foo", "prefix", id="prefix-matches-itself"),
        pytest.param("/foo/bar", "prefix", id="prefix-matches-child"),
        pytest.param("/foobar", "404", id="prefix-never-inside-a-segment"),
    ],
)
def test_path_prefix_matches_whole_segments(path: str, expected: str) -> None:
    # Spec 003: "/foo matches /foo and /foo/bar but never /foobar".
    assert winner(router({"example.com": [rule("prefix", "/foo")]}), path) == expected


def test_trailing_slash_on_a_prefix_means_nothing() -> None:
    # Spec 003: "a trailing slash means nothing".
    r = router({"example.com": [rule("slash", "/foo/")]})
    assert winner(r, "/foo") == "slash"
    assert winner(r, "/foo/x") == "slash"


def test_exact_before_longest_prefix_before_regex() -> None:
    # Spec 003: "then by path, exact before longest prefix before regular expression".
    r = router(
        {
            "example.com": [
                rule("regex", "/a/.*", PathType.REGULAR_EXPRESSION, created=1),
                rule("short", "/a", created=2),
                rule("long", "/a/b", created=3),
                rule("exact", "/a/b/c", PathType.EXACT, created=4),
            ]
        }
    )
    assert winner(r, "/a/b/c") == "exact"
    assert winner(r, "/a/b/d") == "long"
    assert winner(r, "/a/x") == "short"


def test_exact_outranks_prefix_on_the_same_path_whatever_their_ages() -> None:
    # Spec 003: "An Exact match outranks a PathPrefix on the same path ... whatever their ages".
    r = router(
        {
            "example.com": [
                rule("old-prefix", "/p", created=1),
                rule("new-exact", "/p", PathType.EXACT, created=9),
            ]
        }
    )
    assert winner(r, "/p") == "new-exact"
    assert winner(r, "/p/q") == "old-prefix"


def test_exact_path_does_not_match_children_or_trailing_slash() -> None:
    r = router({"example.com": [rule("exact", "/p", PathType.EXACT)]})
    assert winner(r, "/p/") == "404"
    assert winner(r, "/p/q") == "404"


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        pytest.param("/v1/items/42", "regex", id="whole-path-matches"),
        pytest.param("/v1/items/42/x", "404", id="anchored-at-the-end"),
        pytest.param("/x/v1/items/42", "404", id="anchored-at-the-start"),
    ],
)
def test_regular_expression_path_is_anchored_to_the_full_path(path: str, expected: str) -> None:
    r = router({"example.com": [rule("regex", r"/v1/items/[0-9]+", PathType.REGULAR_EXPRESSION)]})
    assert winner(r, path) == expected


def test_implementation_specific_is_served_as_a_segment_prefix() -> None:
    r = router({"example.com": [rule("impl", "/docs", PathType.IMPLEMENTATION_SPECIFIC)]})
    assert (winner(r, "/docs/x"), winner(r, "/docsx")) == ("impl", "404")


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        pytest.param("/%61pi/x", "api", id="unreserved-decoded-before-matching"),
        pytest.param("/api/../admin", "admin", id="dot-segments-removed-before-matching"),
        pytest.param("/x%2F..%2Fadmin", "404", id="encoded-slash-neither-separates-nor-climbs"),
    ],
)
def test_paths_are_normalised_before_matching(path: str, expected: str) -> None:
    r = router({"example.com": [rule("api", "/api"), rule("admin", "/admin")]})
    assert winner(r, path) == expected


# ----------------------------------------------------------------------------- precedence


def test_a_match_naming_a_method_outranks_one_that_does_not_whatever_their_ages() -> None:
    # Spec 003: "a match naming a method outranks one that does not, whatever their ages".
    r = router(
        {
            "example.com": [
                rule("old-any", "/p", created=1),
                rule("new-get", "/p", method="GET", created=9),
            ]
        }
    )
    assert winner(r, "/p", method="GET") == "new-get"
    assert winner(r, "/p", method="DELETE") == "old-any"


def test_more_header_matches_win_then_more_query_matches() -> None:
    # Spec 003: "then more header matches, then more query parameter matches".
    r = router(
        {
            "example.com": [
                rule("one-header", "/p", headers={"a": "1"}, created=1),
                rule("two-headers", "/p", headers={"a": "1", "b": "2"}, created=5),
                rule("one-header-one-query", "/p", headers={"a": "1"}, query={"q": "1"}, created=9),
            ]
        }
    )
    assert winner(r, "/p", headers={"a": "1", "b": "2"}, query="q=1") == "two-headers"
    assert winner(r, "/p", headers={"a": "1"}, query="q=1") == "one-header-one-query"
    assert winner(r, "/p", headers={"a": "1"}) == "one-header"


def test_the_older_route_wins_and_ties_break_on_namespace_then_name() -> None:
    # Spec 003: "the older route keeps it (ties on creation time break on namespace then name)".
    assert (
        winner(router({"example.com": [rule("new", created=2), rule("old", created=1)]}), "/")
        == "old"
    )
    same_time = [
        rule("b", created=1, namespace="ns1"),
        rule("a", created=1, namespace="ns2"),
        rule("a", created=1, namespace="ns1"),
    ]
    outcome = router({"example.com": same_time}).match(PORT, "example.com", "GET", "/")
    assert not isinstance(outcome, Miss)
    assert (outcome.rule.id.namespace, outcome.rule.id.name) == ("ns1", "a")


def test_method_fill_reaches_the_covering_match_on_the_same_host() -> None:
    # Spec 003: "a POST to a path that only names GET still reaches the prefix behind it".
    r = router(
        {
            "example.com": [
                rule("get-only", "/p", PathType.EXACT, method="GET"),
                rule("covering", "/"),
            ]
        }
    )
    assert winner(r, "/p", method="GET") == "get-only"
    assert winner(r, "/p", method="POST") == "covering"


def test_method_fill_answers_404_without_a_covering_match() -> None:
    r = router({"example.com": [rule("get-only", "/p", method="GET")]})
    outcome = r.match(PORT, "example.com", "POST", "/p")
    assert isinstance(outcome, Miss)
    assert outcome.status == 404
    assert "not the method" in outcome.reason


def test_method_fill_does_not_cross_into_a_less_specific_host_tier() -> None:
    # Spec 003: "That fill does not cross into a less specific host tier."
    r = router(
        {
            "shop.example.com": [rule("get-only", "/p", method="GET")],
            "*.example.com": [rule("wild", "/")],
        }
    )
    assert winner(r, "/p", host="shop.example.com", method="POST") == "404"
    assert winner(r, "/q", host="shop.example.com", method="POST") == "wild"


# ----------------------------------------------------------------------------- predicates


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        pytest.param({"x-env": "prod"}, "match", id="exact-value"),
        pytest.param({"x-env": "production"}, "404", id="value-compared-whole"),
        pytest.param({}, "404", id="absent-header-fails"),
    ],
)
def test_header_exact_value_compared_whole(headers: dict[str, str], expected: str) -> None:
    r = router({"example.com": [rule("match", headers={"X-Env": "prod"})]})
    assert winner(r, "/", headers=headers) == expected


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        pytest.param({"x-v": ""}, "match", id="present-and-empty-matches-dot-star"),
        pytest.param({}, "404", id="absent-never-matches-even-dot-star"),
    ],
)
def test_a_pattern_the_empty_string_satisfies_needs_the_field_present(
    headers: dict[str, str], expected: str
) -> None:
    # Spec 003: "a pattern the empty string satisfies, such as .*, matches a field that is
    # present and empty but not one that is absent".
    regex = Match(headers=(ValueMatch("x-v", ".*", ValueMatchType.REGULAR_EXPRESSION),))
    r = compile_router(
        [
            HostRoutes(
                "t",
                PORT,
                "example.com",
                (Rule(RouteId(1, "d", "match"), (regex,), backends=(OK,)),),
            )
        ]
    )
    assert winner(r, "/", headers=headers) == expected


def test_regular_expression_header_must_match_the_whole_value() -> None:
    regex = Match(headers=(ValueMatch("x-v", "v[0-9]", ValueMatchType.REGULAR_EXPRESSION),))
    r = compile_router(
        [
            HostRoutes(
                "t",
                PORT,
                "example.com",
                (Rule(RouteId(1, "d", "match"), (regex,), backends=(OK,)),),
            )
        ]
    )
    assert winner(r, "/", headers={"x-v": "v1"}) == "match"
    assert winner(r, "/", headers={"x-v": "v12"}) == "404"


def test_a_header_named_twice_uses_the_first_condition_whatever_the_case() -> None:
    # Spec 003: "A match naming one header or query parameter twice uses the first condition,
    # whatever the case."
    twice = Match(headers=(ValueMatch("x-a", "1"), ValueMatch("X-A", "2")))
    r = compile_router(
        [
            HostRoutes(
                "t",
                PORT,
                "example.com",
                (Rule(RouteId(1, "d", "match"), (twice,), backends=(OK,)),),
            )
        ]
    )
    assert winner(r, "/", headers={"x-a": "1"}) == "match"
    assert winner(r, "/", headers={"x-a": "2"}) == "404"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        pytest.param("tier=gold", "match", id="exact"),
        pytest.param("Tier=gold", "404", id="query-names-are-case-sensitive"),
        pytest.param("tier=gold&tier=silver", "match", id="repeated-parameter-first-value"),
        pytest.param("tier=silver&tier=gold", "404", id="repeated-parameter-first-value-decides"),
        pytest.param("tier=gold%20plus", "404", id="value-compared-whole-after-decoding"),
        pytest.param("", "404", id="absent"),
    ],
)
def test_query_parameter_matches(query: str, expected: str) -> None:
    r = router({"example.com": [rule("match", query={"tier": "gold"})]})
    assert winner(r, "/", query=query) == expected


# ----------------------------------------------------------------------------- outcomes


def test_a_rule_with_no_usable_backend_answers_500_with_the_reason() -> None:
    # Spec 003: "A rule with no usable reference answers 500 outright."
    broken = Backend(unresolved_reason="Service default/missing not found")
    r = router({"example.com": [rule("broken", backends=(broken,))]})
    outcome = r.match(PORT, "example.com", "GET", "/")
    assert not isinstance(outcome, Miss)
    assert (outcome.status, outcome.reason) == (
        500,
        "no usable backendRef: Service default/missing not found",
    )


def test_a_rule_with_some_usable_backends_is_served() -> None:
    r = router({"example.com": [rule("partial", backends=(Backend(unresolved_reason="x"), OK))]})
    outcome = r.match(PORT, "example.com", "GET", "/")
    assert outcome.status == 200
