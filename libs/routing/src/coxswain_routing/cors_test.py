"""CORS answers: preflights and the headers added to ordinary responses.

Covers origin matching (exact, "*", "https://*.example.com"), method and header allowance,
credentials (which forbid the "*" origin), max age, expose headers, and the no-headers answer
to a disallowed origin. Leaves out how the proxy writes them (the proxy's tests).
"""

from __future__ import annotations

import pytest

from coxswain_routing import Cors, is_preflight, origin_allowed, preflight_headers, response_headers

CORS = Cors(
    allow_origins=("https://app.example.com", "https://*.example.org"),
    allow_methods=("GET", "PUT"),
    allow_headers=("x-token",),
    expose_headers=("x-request-id",),
    max_age_seconds=600,
)


@pytest.mark.parametrize(
    ("origin", "allowed"),
    [
        pytest.param("https://app.example.com", True, id="exact-origin"),
        pytest.param("https://a.b.example.org", True, id="wildcard-origin-host"),
        pytest.param("http://a.example.org", False, id="wildcard-keeps-the-scheme"),
        pytest.param("https://example.org", False, id="wildcard-needs-a-label"),
        pytest.param("https://evil.com", False, id="other-origin"),
    ],
)
def test_origin_allowed(origin: str, allowed: bool) -> None:
    assert origin_allowed(CORS, origin) is allowed


def test_is_preflight_needs_options_origin_and_requested_method() -> None:
    assert is_preflight("OPTIONS", {"origin": "x", "access-control-request-method": "PUT"})
    assert not is_preflight("OPTIONS", {"origin": "x"})
    assert not is_preflight("GET", {"origin": "x", "access-control-request-method": "PUT"})


def test_preflight_for_an_allowed_origin_and_method() -> None:
    request = {"origin": "https://app.example.com", "access-control-request-method": "PUT"}
    assert dict(preflight_headers(CORS, request)) == {
        "Access-Control-Allow-Origin": "https://app.example.com",
        "Vary": "Origin",
        "Access-Control-Allow-Methods": "GET, PUT",
        "Access-Control-Allow-Headers": "x-token",
        "Access-Control-Max-Age": "600",
    }


@pytest.mark.parametrize(
    "request_headers",
    [
        pytest.param(
            {"origin": "https://evil.com", "access-control-request-method": "GET"},
            id="origin-not-allowed",
        ),
        pytest.param(
            {"origin": "https://app.example.com", "access-control-request-method": "DELETE"},
            id="method-not-allowed",
        ),
    ],
)
def test_preflight_refused_gets_no_cors_headers(request_headers: dict[str, str]) -> None:
    assert preflight_headers(CORS, request_headers) == []


def test_wildcards_echo_what_was_asked() -> None:
    cors = Cors(allow_origins=("*",), allow_methods=("*",), allow_headers=("*",))
    request = {
        "origin": "https://x.test",
        "access-control-request-method": "PATCH",
        "access-control-request-headers": "a, b",
    }
    headers = dict(preflight_headers(cors, request))
    assert headers["Access-Control-Allow-Origin"] == "*"
    assert headers["Access-Control-Allow-Methods"] == "PATCH"
    assert headers["Access-Control-Allow-Headers"] == "a, b"


def test_credentials_forbid_the_star_origin() -> None:
    cors = Cors(allow_origins=("*",), allow_credentials=True, allow_methods=("GET",))
    headers = dict(response_headers(cors, {"origin": "https://x.test"}))
    assert headers["Access-Control-Allow-Origin"] == "https://x.test"
    assert headers["Access-Control-Allow-Credentials"] == "true"


def test_ordinary_response_headers() -> None:
    assert dict(response_headers(CORS, {"origin": "https://app.example.com"})) == {
        "Access-Control-Allow-Origin": "https://app.example.com",
        "Vary": "Origin",
        "Access-Control-Expose-Headers": "x-request-id",
    }
    assert response_headers(CORS, {}) == []
    assert response_headers(CORS, {"origin": "https://evil.com"}) == []
