"""Listener isolation in the matcher: a port's listener hostnames end the walk through its host
tiers, and `explain` names the listener that claimed the request.

Covers the Gateway API's GatewayHTTPListenerIsolation rule on the upstream conformance case's
four listeners (no hostname, `*.example.com`, `*.foo.example.com`, `abc.foo.example.com` on one
port), `claiming_hostname` as the one rule both sides use, a listener with no routes still
claiming its hosts, HTTPS listeners claiming as HTTP ones do, stream listeners claiming
nothing, ports without listeners (Ingress) walking every tier as before, and the explanation of
an isolated candidate. Leaves out how the controller fills the tables (the translate goldens
named `listener-isolation-*`, and `translate/listener_isolation_requests_test.py`).
"""

from __future__ import annotations

import pytest

from coxswain_routing import (
    Backend,
    GatewayListeners,
    HostRoutes,
    Listener,
    ListenerProtocol,
    Match,
    Miss,
    PathMatch,
    PathType,
    Resource,
    RouteId,
    Router,
    Rule,
    claiming_hostname,
    compile_router,
    explain,
)

PORT = 20080

# The upstream case's listeners, by hostname ("" for the one naming none).
LISTENERS = {
    "": "empty-hostname",
    "*.example.com": "wildcard-example-com",
    "*.foo.example.com": "wildcard-foo-example-com",
    "abc.foo.example.com": "abc-foo-example-com",
}


def rule(name: str, prefix: str) -> Rule:
    match = Match(PathMatch(PathType.PATH_PREFIX, prefix))
    backend = Backend(endpoints=f"endpoints/default/{name}/80")
    return Rule(RouteId(100, "default", name), (match,), backends=(backend,))


def listeners(
    hostnames: dict[str, str], protocol: ListenerProtocol = ListenerProtocol.HTTP
) -> GatewayListeners:
    built = tuple(
        Listener(name, 80, PORT, protocol, hostname) for hostname, name in hostnames.items()
    )
    return GatewayListeners("default", "gw", 1, built)


def hosts(tables: dict[str, list[Rule]]) -> list[Resource]:
    return [HostRoutes("gateway/default/gw", PORT, h, tuple(r)) for h, r in tables.items()]


def served(router: Router, host: str, path: str) -> str:
    outcome = router.match(PORT, host, "GET", path)
    return f"{outcome.status}" if isinstance(outcome, Miss) else outcome.rule.id.name


# Each listener's route serves its own path prefix, for the listener's own hostname.
OWN = {
    "": [rule("attaches-to-empty-hostname", "/empty-hostname")],
    "*.example.com": [rule("attaches-to-wildcard-example-com", "/wildcard-example-com")],
    "*.foo.example.com": [
        rule("attaches-to-wildcard-foo-example-com", "/wildcard-foo-example-com")
    ],
    "abc.foo.example.com": [rule("attaches-to-abc-foo-example-com", "/abc-foo-example-com")],
}

# The upstream test's requests: each host reaches only its listener's path.
REQUESTS = [
    (host, path, expected)
    for host, own in (
        ("bar.com", "/empty-hostname"),
        ("bar.example.com", "/wildcard-example-com"),
        ("bar.foo.example.com", "/wildcard-foo-example-com"),
        ("abc.foo.example.com", "/abc-foo-example-com"),
    )
    for path, expected in (
        (p, "ok" if p == own else "404")
        for p in (
            "/empty-hostname",
            "/wildcard-example-com",
            "/wildcard-foo-example-com",
            "/abc-foo-example-com",
        )
    )
]


@pytest.mark.parametrize(("host", "path", "expected"), REQUESTS)
def test_each_host_reaches_only_the_routes_of_the_listener_claiming_it(
    host: str, path: str, expected: str
) -> None:
    router = compile_router([*hosts(OWN), listeners(LISTENERS)])
    got = served(router, host, path)
    assert (got != "404") == (expected == "ok"), got
    if expected == "ok":
        assert got.endswith(path.strip("/"))


def test_without_listeners_every_tier_is_walked() -> None:
    # An Ingress port (no GatewayListeners): a path the exact host misses falls through.
    router = compile_router(hosts(OWN))
    assert served(router, "abc.foo.example.com", "/empty-hostname") == (
        "attaches-to-empty-hostname"
    )


def test_a_listener_without_routes_still_claims_its_hosts() -> None:
    # abc.foo.example.com has a listener but no route: its requests answer 404 rather than
    # falling through to the wildcard listeners' routes.
    tables = {h: r for h, r in OWN.items() if h != "abc.foo.example.com"}
    router = compile_router([*hosts(tables), listeners(LISTENERS)])
    outcome = router.match(PORT, "abc.foo.example.com", "GET", "/wildcard-foo-example-com")
    assert isinstance(outcome, Miss) and outcome.status == 404
    assert outcome.reason == "no route of the listener claiming this host matches the request"
    assert served(router, "x.foo.example.com", "/wildcard-foo-example-com") == (
        "attaches-to-wildcard-foo-example-com"
    )


def test_routes_of_one_listener_still_fall_through_its_own_tiers() -> None:
    # A route on *.example.com naming shop.example.com, another naming none: both are the
    # wildcard listener's, so a path the exact host misses reaches the wildcard's own table.
    tables = {
        "shop.example.com": [rule("shop", "/shop")],
        "*.example.com": [rule("any", "/")],
    }
    router = compile_router([*hosts(tables), listeners({"*.example.com": "wild"})])
    assert served(router, "shop.example.com", "/shop") == "shop"
    assert served(router, "shop.example.com", "/other") == "any"


def test_https_listeners_claim_and_stream_listeners_do_not() -> None:
    https = listeners({"abc.foo.example.com": "abc", "": "any"}, ListenerProtocol.HTTPS)
    tables = {"": [rule("fallback", "/")]}
    router = compile_router([*hosts(tables), https])
    assert served(router, "abc.foo.example.com", "/") == "404"
    assert served(router, "other.com", "/") == "fallback"
    tls = listeners({"abc.foo.example.com": "abc", "": "any"}, ListenerProtocol.TLS)
    assert served(compile_router([*hosts(tables), tls]), "abc.foo.example.com", "/") == "fallback"


def test_a_port_with_listeners_and_no_routes_answers_as_before() -> None:
    outcome = compile_router([listeners(LISTENERS)]).match(PORT, "bar.com", "GET", "/")
    assert isinstance(outcome, Miss) and outcome.reason == "no routes are served on this port"


@pytest.mark.parametrize(
    ("pattern", "claimed"),
    [
        pytest.param("abc.foo.example.com", "abc.foo.example.com", id="exact-first"),
        pytest.param("x.foo.example.com", "*.foo.example.com", id="nearest-wildcard"),
        pytest.param("a.b.foo.example.com", "*.foo.example.com", id="wildcard-any-depth"),
        pytest.param("bar.example.com", "*.example.com", id="outer-wildcard"),
        pytest.param("foo.example.com", "*.example.com", id="wildcard-not-its-own-suffix"),
        pytest.param("*.foo.example.com", "*.foo.example.com", id="wildcard-pattern-itself"),
        pytest.param("*.x.foo.example.com", "*.foo.example.com", id="narrower-wildcard"),
        pytest.param("bar.com", "", id="hostless-last"),
        pytest.param("", "", id="catch-all"),
    ],
)
def test_claiming_hostname(pattern: str, claimed: str) -> None:
    assert claiming_hostname(pattern, LISTENERS) == claimed


def test_claiming_hostname_none_without_a_covering_listener() -> None:
    assert claiming_hostname("bar.com", {"*.example.com", "foo.example.com"}) is None
    assert claiming_hostname("", {"*.example.com"}) is None


def test_explain_names_the_claiming_listener_and_why_others_lost() -> None:
    # The path is the *.foo.example.com listener's: without isolation its route would answer.
    router = compile_router([*hosts(OWN), listeners(LISTENERS)])
    result = explain(router, PORT, "abc.foo.example.com", "GET", "/wildcard-foo-example-com")
    assert result.outcome == router.match(
        PORT, "abc.foo.example.com", "GET", "/wildcard-foo-example-com"
    )
    assert (result.listener, result.listener_hostname) == (
        "abc-foo-example-com",
        "abc.foo.example.com",
    )
    got = {v.route.name: v.verdict for v in result.candidates}
    assert got["attaches-to-abc-foo-example-com"].startswith("path: ")
    assert got["attaches-to-wildcard-foo-example-com"] == (
        "isolation: listener 'abc-foo-example-com' (abc.foo.example.com) claims the request; "
        "this host belongs to listener 'wildcard-foo-example-com'"
    )
    assert got["attaches-to-empty-hostname"].endswith("listener 'empty-hostname'")


def test_explain_without_listeners_names_none() -> None:
    result = explain(compile_router(hosts(OWN)), PORT, "bar.com", "GET", "/empty-hostname")
    assert (result.listener, result.listener_hostname) == ("", None)
    assert [v.verdict for v in result.candidates] == ["selected"]
