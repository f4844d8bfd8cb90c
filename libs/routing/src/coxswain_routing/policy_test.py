"""The policy model: its checks, its merge, and its wire form.

Covers `Policy.validate()` (named problems for bad CIDRs, limits, htpasswd hashes, cookie
attributes, sign-in variables, cookie-split slots, the ext_authz style's own rules),
`Policy.over` (the more specific policy wins part by part), round trips of generated policies
through `to_wire`/`from_wire` and their bytes, an empty policy costing no bytes, and
`UnsafeValue` for a hand-made message whose realm would split a head. What the proxy does with
a policy is covered by its own tests.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coxswain_proto.gen.coxswain.discovery import v1 as pb
from coxswain_routing import (
    AuthStyle,
    Backend,
    BasicAuth,
    ClientCertificate,
    CookieSplit,
    ExternalAuth,
    HostRoutes,
    Policy,
    RateKey,
    RateLimit,
    RouteId,
    Rule,
    SameSite,
    SessionAffinity,
    SourceRanges,
    UnsafeValue,
    from_wire,
    to_wire,
)

ID = RouteId(0, "ns", "web")
BACKENDS = (Backend(1, "endpoints/ns/main/80"), Backend(0, "endpoints/ns/canary/80"))


def _routes(policy: Policy | None) -> HostRoutes:
    return HostRoutes("ingress", 80, "example.com", (Rule(ID, backends=BACKENDS, policy=policy),))


def _problems(policy: Policy) -> list[str]:
    return [p.field for p in Rule(ID, backends=BACKENDS, policy=policy).validate()]


def _ext_authz(**changes: Any) -> ExternalAuth:
    return replace(ExternalAuth("e", "", "", style=AuthStyle.EXT_AUTHZ), **changes)


@pytest.mark.parametrize(
    ("policy", "field"),
    [
        pytest.param(
            Policy(source_ranges=SourceRanges(allow=("10.0.0.300/8",))),
            "policy.sourceRanges.allow[0]",
            id="a CIDR that is no address",
        ),
        pytest.param(
            Policy(source_ranges=SourceRanges()), "policy.sourceRanges", id="ranges naming none"
        ),
        pytest.param(
            Policy(rate_limits=(RateLimit(0),)), "policy.rateLimits[0].requests", id="zero rate"
        ),
        pytest.param(
            Policy(rate_limits=(RateLimit(5, 30),)),
            "policy.rateLimits[0].period",
            id="a period neither a second nor a minute",
        ),
        pytest.param(
            Policy(basic_auth=BasicAuth("r", (("u", "plain"),))),
            "policy.basicAuth.users[0]",
            id="a hash of no scheme served (crypt, plain)",
        ),
        pytest.param(
            Policy(basic_auth=BasicAuth('say "hi"', (("u", "{SHA}x"),))),
            "policy.basicAuth.realm",
            id="a realm breaking its quoted-string",
        ),
        pytest.param(Policy(basic_auth=BasicAuth("r", ())), "policy.basicAuth.users", id="no user"),
        pytest.param(
            Policy(affinity=SessionAffinity(cookie="a b")),
            "policy.affinity.cookie",
            id="a cookie name that is no token",
        ),
        pytest.param(
            Policy(affinity=SessionAffinity(path="/a;b")),
            "policy.affinity.path",
            id="a cookie path with ';'",
        ),
        pytest.param(
            Policy(external_auth=ExternalAuth("e", "auth.ns.svc", "/x", signin="/in?$uri")),
            "policy.externalAuth.signin",
            id="a sign-in variable not served",
        ),
        pytest.param(
            Policy(external_auth=ExternalAuth("e", "auth.ns.svc", "/x", response_headers=("X",))),
            "policy.externalAuth.responseHeaders[0]",
            id="a response header not lower-cased",
        ),
        pytest.param(
            Policy(external_auth=ExternalAuth("e", "auth", "/x", style=AuthStyle.EXT_AUTHZ)),
            "policy.externalAuth.host",
            id="ext_authz sends the client's Host: no Host of its own",
        ),
        pytest.param(
            Policy(external_auth=ExternalAuth("e", "", "/x?y=1", style=AuthStyle.EXT_AUTHZ)),
            "policy.externalAuth.path",
            id="ext_authz's path is a prefix: no query",
        ),
        pytest.param(
            Policy(external_auth=_ext_authz(request_headers=("x-a b",))),
            "policy.externalAuth.requestHeaders[0]",
            id="a request header that is no token",
        ),
        pytest.param(
            Policy(external_auth=_ext_authz(signin="/in")),
            "policy.externalAuth.signin",
            id="a sign-in URL is auth_request's only",
        ),
        pytest.param(
            Policy(cookie_split=CookieSplit("c", 2, 0)),
            "policy.cookieSplit.always",
            id="a split to a slot the rule lacks",
        ),
        pytest.param(
            Policy(client_certificate=ClientCertificate("tls/443")),
            "policy.clientCertificate.store",
            id="a client certificate checked under no ClientCaStore",
        ),
        pytest.param(
            Policy(client_certificate=ClientCertificate("client-ca/443/a", subject="CN=(")),
            "policy.clientCertificate.subject",
            id="a subject that is no regex",
        ),
        pytest.param(
            Policy(client_certificate=ClientCertificate("client-ca/443/a", error_page="/e\r\nX")),
            "policy.clientCertificate.errorPage",
            id="an error page that splits a head",
        ),
    ],
)
def test_validate_names_the_field(policy: Policy, field: str) -> None:
    assert field in _problems(policy)


def test_a_sound_policy_has_no_problems() -> None:
    policy = Policy(
        source_ranges=SourceRanges(allow=("10.0.0.0/8", "::1"), deny=("10.1.0.0/16",)),
        max_body_bytes=1 << 20,
        rate_limits=(RateLimit(5, 1, 25), RateLimit(100, 60, key=RateKey.ROUTE)),
        connections_per_client=4,
        basic_auth=BasicAuth("Private", (("alice", "$apr1$x$y"), ("bob", "$2y$05$z"))),
        external_auth=ExternalAuth(
            "endpoints/auth/oauth/80",
            "oauth.auth.svc.cluster.local",
            "/oauth2/auth?x=1",
            response_headers=("x-auth-request-user",),
            signin="https://$host/oauth2/start?rd=$escaped_request_uri",
        ),
        affinity=SessionAffinity(same_site=SameSite.LAX, max_age_seconds=3600),
        cookie_split=CookieSplit("canary", 1, 0),
    )
    assert _problems(policy) == []


def test_a_sound_ext_authz_has_no_problems() -> None:
    auth = ExternalAuth(
        "endpoints/auth/ext/9002", "", "/check", response_headers=("x-user-id",),
        style=AuthStyle.EXT_AUTHZ, request_headers=("x-test-header", "cookie"),
    )  # fmt: skip
    assert _problems(Policy(external_auth=auth)) == []
    assert _problems(Policy(external_auth=replace(auth, path=""))) == []


def test_over_lets_the_more_specific_part_win() -> None:
    gateway = Policy(max_body_bytes=10, rate_limits=(RateLimit(1),), connections_per_client=3)
    route = Policy(max_body_bytes=20, basic_auth=BasicAuth("r", (("u", "{SHA}x"),)))
    merged = route.over(gateway)
    assert merged.max_body_bytes == 20
    assert merged.rate_limits == (RateLimit(1),)
    assert merged.connections_per_client == 3
    assert merged.basic_auth == route.basic_auth


def test_an_empty_policy_costs_no_bytes() -> None:
    assert bytes(to_wire(_routes(Policy()))) == bytes(to_wire(_routes(None)))
    assert from_wire(to_wire(_routes(Policy()))) == _routes(None)


_CIDRS = st.sampled_from(("10.0.0.0/8", "192.168.1.7", "2001:db8::/32", "127.0.0.2/32"))
_NAMES = st.text("abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=8)


def _policies() -> st.SearchStrategy[Policy]:
    ranges = (
        st.builds(SourceRanges, st.tuples(_CIDRS), st.lists(_CIDRS, max_size=2).map(tuple))
        | st.none()
    )
    rates = st.lists(
        st.builds(
            RateLimit,
            st.integers(1, 1000),
            st.sampled_from((1, 60)),
            st.integers(0, 5000),
            st.sampled_from(tuple(RateKey)),
            st.lists(_CIDRS, max_size=2).map(tuple),
        ),
        max_size=2,
    ).map(tuple)
    users = st.dictionaries(_NAMES, st.sampled_from(("{SHA}abc=", "$apr1$s$h", "$2y$05$x")))
    basic = (
        st.builds(BasicAuth, _NAMES, users.map(lambda d: tuple(sorted(d.items()))), _NAMES)
        | st.none()
    )
    external = (
        st.builds(
            ExternalAuth,
            _NAMES,
            st.sampled_from(("auth.ns.svc", "oauth.auth.svc.cluster.local:4180")),
            st.just("/auth"),
            st.sampled_from(("GET", "POST")),
            st.lists(_NAMES, max_size=2).map(tuple),
            st.sampled_from(("", "https://$host/start")),
            st.sampled_from(("rd", "next")),
            st.integers(1, 60_000),
        )
        | st.builds(
            ExternalAuth,
            _NAMES,
            st.just(""),
            st.sampled_from(("", "/auth")),
            response_headers=st.lists(_NAMES, max_size=2).map(tuple),
            style=st.just(AuthStyle.EXT_AUTHZ),
            request_headers=st.lists(_NAMES, max_size=2).map(tuple),
        )
        | st.none()
    )
    affinity = (
        st.builds(
            SessionAffinity,
            _NAMES,
            st.just("/"),
            st.integers(0, 86400),
            st.integers(0, 86400),
            st.sampled_from(tuple(SameSite)),
            st.booleans(),
            st.booleans(),
        )
        | st.none()
    )
    split = st.builds(CookieSplit, _NAMES, st.integers(0, 1), st.integers(0, 1)) | st.none()
    client = (
        st.builds(
            ClientCertificate,
            _NAMES.map(lambda n: f"client-ca/443/{n}"),
            st.booleans(),
            st.integers(0, 10),
            st.sampled_from(("", "CN=(a|b)")),
            st.booleans(),
            st.sampled_from(("", "https://example.com/cert-error")),
        )
        | st.none()
    )
    return st.builds(
        Policy,
        ranges,
        st.integers(0, 2**40),
        rates,
        st.integers(0, 100),
        basic,
        external,
        affinity,
        split,
        st.booleans(),
        client,
    )


@given(_policies())
def test_round_trip(policy: Policy) -> None:
    routes = _routes(policy)
    message = to_wire(routes)
    expected = _routes(None if policy.empty else policy)
    assert from_wire(message) == expected
    again = pb.Resource.parse(bytes(message))
    assert from_wire(again) == expected
    assert bytes(to_wire(from_wire(again))) == bytes(message)


def test_from_wire_refuses_a_realm_that_splits_a_head() -> None:
    message = to_wire(_routes(Policy(basic_auth=BasicAuth("r", (("u", "{SHA}x"),)))))
    assert message.host_routes is not None
    policy = message.host_routes.rules[0].policy
    assert policy is not None and policy.basic_auth is not None
    policy.basic_auth.realm = "r\r\nx-injected: 1"
    with pytest.raises(UnsafeValue, match="realm"):
        from_wire(message)
