"""CORS answers: preflights and the headers added to ordinary responses.

Covers each HTTPCORSFilter field on a preflight and on an ordinary response: origin matching
(exact, "*", "https://*.example.com" over any number of labels, default ports, case), the
allowed origin always answered as asked, the "*" of methods and headers answered with what the
request asked (always so with credentials), credentials, max age, expose headers (on both
answers), Vary: Origin on every answer, and the Vary-only answer to a disallowed origin. The
cases the Gateway API's HTTPRouteCORS conformance scenario sends are here by name. Leaves out
how the proxy writes them, and the credentialed "*" of exposeHeaders, which the proxy fills in
from the response (the proxy's tests).
"""

from __future__ import annotations

import pytest

from coxswain_routing import (
    Cors,
    exposes_response_fields,
    is_preflight,
    origin_allowed,
    preflight_headers,
    response_headers,
)

CORS = Cors(
    allow_origins=("https://app.example.com", "https://*.example.org"),
    allow_methods=("GET", "PUT"),
    allow_headers=("x-token",),
    expose_headers=("x-request-id",),
    max_age_seconds=600,
)

# The HTTPRouteCORS conformance scenario's first route (cors-multiple-origins-methods-headers).
CONFORMANCE = Cors(
    allow_origins=("https://www.foo.com", "https://*.bar.com"),
    allow_methods=("GET", "OPTIONS"),
    allow_headers=("x-header-1", "x-header-2"),
    expose_headers=("x-header-3", "x-header-4"),
    allow_credentials=True,
    max_age_seconds=3600,
)


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        pytest.param("https://app.example.com", True, id="exact-origin"),
        pytest.param("https://a.example.org", True, id="wildcard-one-label"),
        pytest.param("https://a.b.example.org", True, id="wildcard-any-number-of-labels"),
        pytest.param("http://a.example.org", False, id="wildcard-keeps-the-scheme"),
        pytest.param("https://example.org", False, id="wildcard-needs-a-label"),
        pytest.param("https://a.example.org:8443", False, id="wildcard-keeps-the-port"),
        pytest.param("https://a.example.org:443", True, id="wildcard-default-port-is-none"),
        pytest.param("https://app.example.com:443", True, id="exact-default-port-is-none"),
        pytest.param("https://APP.example.com", True, id="host-case-insensitive"),
        pytest.param("https://app.example.com:8443", False, id="exact-other-port"),
        pytest.param("https://evil.com", False, id="other-origin"),
        pytest.param("https://app.example.com.evil.com", False, id="no-suffix-tricks"),
        pytest.param("null", False, id="opaque-origin"),
    ],
)
def test_origin_allowed(origin: str, allowed: bool) -> None:
    assert origin_allowed(CORS, origin) is allowed


def test_a_star_origin_allows_any_origin_port_included() -> None:
    star = Cors(allow_origins=("*",))
    assert origin_allowed(star, "https://foobar.com:12345")
    assert origin_allowed(star, "null")


def test_a_wildcard_host_alone_matches_every_host_of_the_scheme() -> None:
    any_https = Cors(allow_origins=("https://*",))
    assert origin_allowed(any_https, "https://a.b.c")
    assert not origin_allowed(any_https, "http://a.b.c")


def test_is_preflight_needs_options_origin_and_requested_method() -> None:
    assert is_preflight("OPTIONS", {"origin": "x", "access-control-request-method": "PUT"})
    assert not is_preflight("OPTIONS", {"origin": "x"})
    assert not is_preflight("GET", {"origin": "x", "access-control-request-method": "PUT"})


def test_preflight_for_an_allowed_origin_lists_every_field() -> None:
    request = {"origin": "https://app.example.com", "access-control-request-method": "PUT"}
    assert dict(preflight_headers(CORS, request)) == {
        "Vary": "Origin",
        "Access-Control-Allow-Origin": "https://app.example.com",
        "Access-Control-Allow-Methods": "GET, PUT",
        "Access-Control-Allow-Headers": "x-token",
        "Access-Control-Expose-Headers": "x-request-id",
        "Access-Control-Max-Age": "600",
    }


@pytest.mark.parametrize(
    "origin",
    [
        pytest.param("https://www.foo.com", id="exact-matching-origin"),
        pytest.param("https://www.bar.com", id="wildcard-matching-origin"),
        pytest.param("https://xpto.www.bar.com", id="wildcard-matching-more-labels"),
    ],
)
def test_conformance_preflight_with_credentials(origin: str) -> None:
    request = {
        "origin": origin,
        "access-control-request-method": "GET",
        "access-control-request-headers": "x-header-1, x-header-2",
    }
    assert dict(preflight_headers(CONFORMANCE, request)) == {
        "Vary": "Origin",
        "Access-Control-Allow-Origin": origin,
        "Access-Control-Allow-Credentials": "true",
        "Access-Control-Allow-Methods": "GET, OPTIONS",
        "Access-Control-Allow-Headers": "x-header-1, x-header-2",
        "Access-Control-Expose-Headers": "x-header-3, x-header-4",
        "Access-Control-Max-Age": "3600",
    }


def test_conformance_non_matching_origin_gets_no_cors_fields() -> None:
    request = {"origin": "https://foobar.com", "access-control-request-method": "GET"}
    assert preflight_headers(CONFORMANCE, request) == [("Vary", "Origin")]
    assert response_headers(CONFORMANCE, {"origin": "https://foobar.com"}) == [("Vary", "Origin")]


def test_a_method_outside_the_list_is_left_to_the_client() -> None:
    # The answer lists what is allowed; the browser refuses DELETE itself.
    request = {"origin": "https://app.example.com", "access-control-request-method": "DELETE"}
    assert dict(preflight_headers(CORS, request))["Access-Control-Allow-Methods"] == "GET, PUT"


def test_wildcards_without_credentials() -> None:
    cors = Cors(allow_origins=("*",), allow_methods=("*",), allow_headers=("*",))
    request = {
        "origin": "https://x.test",
        "access-control-request-method": "PATCH",
        "access-control-request-headers": "a, b",
    }
    headers = dict(preflight_headers(cors, request))
    assert headers["Access-Control-Allow-Origin"] == "https://x.test"  # the origin, always
    assert headers["Access-Control-Allow-Methods"] == "PATCH"
    assert headers["Access-Control-Allow-Headers"] == "a, b"
    assert "Access-Control-Allow-Credentials" not in headers
    bare = dict(preflight_headers(cors, {"origin": "https://x.test", **_method("GET")}))
    assert bare["Access-Control-Allow-Headers"] == "*"  # nothing asked: the wildcard stands


def _method(name: str) -> dict[str, str]:
    return {"access-control-request-method": name}


def test_credentials_answer_each_wildcard_with_what_was_asked() -> None:
    # HTTPCORSFilter: with allowCredentials, "*" of origins, methods and headers "must" be the
    # request's Origin, Access-Control-Request-Method and Access-Control-Request-Headers.
    cors = Cors(
        allow_origins=("*",), allow_methods=("*",), allow_headers=("*",), allow_credentials=True
    )
    request = {
        "origin": "https://other.foo.com",
        "access-control-request-method": "PUT",
        "access-control-request-headers": "x-header-1, x-header-2",
    }
    headers = dict(preflight_headers(cors, request))
    assert headers["Access-Control-Allow-Origin"] == "https://other.foo.com"
    assert headers["Access-Control-Allow-Methods"] == "PUT"
    assert headers["Access-Control-Allow-Headers"] == "x-header-1, x-header-2"
    assert headers["Access-Control-Allow-Credentials"] == "true"
    bare = dict(preflight_headers(cors, {"origin": "https://other.foo.com", **_method("PUT")}))
    assert "Access-Control-Allow-Headers" not in bare  # omitted rather than "*"


def test_no_methods_or_headers_listed_means_no_such_field() -> None:
    cors = Cors(allow_origins=("https://a.test",))
    headers = dict(preflight_headers(cors, {"origin": "https://a.test", **_method("GET")}))
    assert "Access-Control-Allow-Methods" not in headers
    assert "Access-Control-Allow-Headers" not in headers
    assert headers["Access-Control-Max-Age"] == "5"


def test_credentials_forbid_the_star_origin_on_responses() -> None:
    cors = Cors(allow_origins=("*",), allow_credentials=True, allow_methods=("GET",))
    headers = dict(response_headers(cors, {"origin": "https://x.test"}))
    assert headers["Access-Control-Allow-Origin"] == "https://x.test"
    assert headers["Access-Control-Allow-Credentials"] == "true"


def test_ordinary_response_headers() -> None:
    assert dict(response_headers(CORS, {"origin": "https://app.example.com"})) == {
        "Vary": "Origin",
        "Access-Control-Allow-Origin": "https://app.example.com",
        "Access-Control-Expose-Headers": "x-request-id",
    }
    assert response_headers(CORS, {}) == [("Vary", "Origin")]
    assert response_headers(CORS, {"origin": "https://evil.com"}) == [("Vary", "Origin")]


def test_the_star_origin_without_credentials_answers_the_origin() -> None:
    # HTTPRouteCORS: a simple request on a "*" route without credentials takes only the
    # origin; "*" would do for others, the origin does for all.
    cors = Cors(allow_origins=("*",))
    headers = dict(response_headers(cors, {"origin": "https://foobar.com:12345"}))
    assert headers["Access-Control-Allow-Origin"] == "https://foobar.com:12345"
    assert "Access-Control-Allow-Credentials" not in headers


def test_expose_star_with_credentials_is_left_to_the_response() -> None:
    cors = Cors(allow_origins=("*",), allow_credentials=True, expose_headers=("*",))
    assert exposes_response_fields(cors)
    assert "Access-Control-Expose-Headers" not in dict(response_headers(cors, {"origin": "o"}))
    plain = Cors(allow_origins=("*",), expose_headers=("*",))
    assert not exposes_response_fields(plain)
    assert dict(response_headers(plain, {"origin": "o"}))["Access-Control-Expose-Headers"] == "*"
