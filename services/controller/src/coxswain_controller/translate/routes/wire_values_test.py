"""The checks on values a filter puts on the wire, one table per kind of value.

Covers each rule `wire_values` enforces (RFC 9110 tokens and field values, the Gateway API's
PreciseHostname, RFC 3986 absolute paths, the redirect scheme/port/status enums, CORS origins
and lists) and how `filter_problems` names the field. What a refused filter does to a route
(not served, UnsupportedValue, a Warning Event) is the golden case filters-malformed-values.
"""

from __future__ import annotations

from typing import Any

import pytest

from coxswain_controller.translate.routes import wire_values

ok = None


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        pytest.param("X-Ok", ok, id="letters-and-hyphen-are-tchars"),
        pytest.param("!#$%&'*+-.^_`|~09az", ok, id="every-punctuation-tchar"),
        pytest.param("*", ok, id="a-lone-star-is-a-token"),
        pytest.param("", "must not be empty", id="token-is-1*tchar-so-not-empty"),
        pytest.param("X Bad", "contains ' '", id="space-is-not-a-tchar"),
        pytest.param("X:Bad", "contains ':'", id="colon-is-not-a-tchar"),
        pytest.param("a,b", "contains ','", id="comma-is-not-a-tchar"),
        pytest.param("X\r\nY", "contains '\\r'", id="cr-is-not-a-tchar"),
        pytest.param("Ünicode", "contains 'Ü'", id="non-ascii-is-not-a-tchar"),
        pytest.param(None, "is required", id="absent-name-is-required"),
        pytest.param(5, "5 is not a string", id="a-number-is-not-a-name"),
    ],
)
def test_token(value: Any, problem: str | None) -> None:
    _expect(wire_values.token_problem(value), problem)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        pytest.param("X-Ok", ok, id="an-ordinary-name"),
        pytest.param("Content-Length", "only the proxy writes it", id="framing-content-length"),
        pytest.param("transfer-encoding", "only the proxy", id="framing-any-case"),
        pytest.param("Connection", "only the proxy", id="hop-by-hop-connection"),
        pytest.param("Keep-Alive", "only the proxy", id="hop-by-hop-keep-alive"),
        pytest.param("Upgrade", "only the proxy", id="hop-by-hop-upgrade"),
        pytest.param("X Bad", "contains ' '", id="still-a-token"),
    ],
)
def test_header_name(value: Any, problem: str | None) -> None:
    _expect(wire_values.header_name_problem(value), problem)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        pytest.param("prod", ok, id="visible-ascii"),
        pytest.param("a b\tc", ok, id="inner-space-and-htab-allowed"),
        pytest.param("", ok, id="empty-field-value-is-allowed"),
        pytest.param("caf\xe9", ok, id="obs-text-up-to-ff"),
        pytest.param("a\r\nX-Injected: yes", "contains CR, LF or NUL", id="crlf-injection"),
        pytest.param("a\nb", "contains CR, LF or NUL", id="bare-lf"),
        pytest.param("a\rb", "contains CR, LF or NUL", id="bare-cr"),
        pytest.param("a\x00b", "contains CR, LF or NUL", id="nul"),
        pytest.param("a\x01b", "control character '\\x01'", id="other-ctl"),
        pytest.param("a\x7fb", "control character '\\x7f'", id="del-is-a-ctl"),
        pytest.param("a\u20acb", "beyond U+00FF", id="more-than-one-octet"),
        pytest.param(" a", "leading or trailing whitespace", id="leading-space"),
        pytest.param("a\t", "leading or trailing whitespace", id="trailing-htab"),
        pytest.param(None, "is required", id="absent-value-is-required"),
        pytest.param(["a"], "is not a string", id="a-list-is-not-a-value"),
    ],
)
def test_header_value(value: Any, problem: str | None) -> None:
    _expect(wire_values.header_value_problem(value), problem)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        pytest.param("api.internal", ok, id="dns-name"),
        pytest.param("a-1.b2.example.com", ok, id="digits-and-inner-hyphens"),
        pytest.param("localhost", ok, id="single-label"),
        pytest.param("10.0.0.1", ok, id="ipv4-literal-matches-the-api-pattern"),
        pytest.param("999.1.1.1", "neither a host name nor an IPv4", id="dotted-decimal-not-ipv4"),
        pytest.param("Api.Internal", "not a lower-case RFC 1123", id="upper-case"),
        pytest.param("*.example.com", "not a lower-case RFC 1123", id="wildcard"),
        pytest.param("a_b.example.com", "not a lower-case RFC 1123", id="underscore"),
        pytest.param("-a.example.com", "not a lower-case RFC 1123", id="label-starts-with-hyphen"),
        pytest.param("a-.example.com", "not a lower-case RFC 1123", id="label-ends-with-hyphen"),
        pytest.param("a..b", "not a lower-case RFC 1123", id="empty-label"),
        pytest.param("example.com.", "not a lower-case RFC 1123", id="trailing-dot"),
        pytest.param("host:8080", "not a lower-case RFC 1123", id="port-is-not-a-hostname"),
        pytest.param("a\r\nb", "not a lower-case RFC 1123", id="crlf"),
        pytest.param("::1", "not a lower-case RFC 1123", id="ipv6-is-not-a-precise-hostname"),
        pytest.param("a" * 64 + ".com", "not a lower-case RFC 1123", id="label-over-63"),
        pytest.param(".".join(["a" * 63] * 4) + ".a", "longer than 253", id="name-over-253"),
        pytest.param("", "must not be empty", id="empty"),
    ],
)
def test_precise_hostname(value: Any, problem: str | None) -> None:
    _expect(wire_values.precise_hostname_problem(value), problem)


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        pytest.param("/", ok, id="root"),
        pytest.param("/v2/orders", ok, id="segments"),
        pytest.param("/a/", ok, id="trailing-slash"),
        pytest.param("/a//b", ok, id="empty-inner-segment"),
        pytest.param("/caf%C3%A9", ok, id="percent-encoded"),
        pytest.param("/a:b@c!$&'()*+,;=-._~", ok, id="every-pchar"),
        pytest.param("v2", "must start with '/'", id="relative"),
        pytest.param("//evil.example/x", "must not start with '//'", id="network-path"),
        pytest.param("/a\r\nX: y", "contains CR, LF or NUL", id="crlf"),
        pytest.param("/a\x00", "contains CR, LF or NUL", id="nul"),
        pytest.param("/a b", "contains ' ', a space or control", id="space"),
        pytest.param("/a\tb", "contains '\\t', a space or control", id="htab"),
        pytest.param("/a\x7f", "contains '\\x7f', a space or control", id="del"),
        pytest.param("/a?x=1", "contains '?'", id="query-is-not-path"),
        pytest.param("/a#top", "contains '#'", id="fragment-is-not-path"),
        pytest.param("/caf\xe9", "contains '\xe9'", id="non-ascii-must-be-encoded"),
        pytest.param("/a%zz", "'%' not followed by two hex digits", id="bad-percent-encoding"),
        pytest.param("/a%4", "'%' not followed by two hex digits", id="truncated-percent"),
        pytest.param("", "must start with '/'", id="empty-when-not-allowed"),
    ],
)
def test_path(value: Any, problem: str | None) -> None:
    _expect(wire_values.path_problem(value), problem)


def test_an_empty_path_may_be_allowed() -> None:
    assert wire_values.path_problem("", may_be_empty=True) is None


@pytest.mark.parametrize(
    ("check", "value", "problem"),
    [
        pytest.param(wire_values.scheme_problem, "https", ok, id="scheme-https"),
        pytest.param(wire_values.scheme_problem, "http", ok, id="scheme-http"),
        pytest.param(wire_values.scheme_problem, "ftp", "not one of http", id="scheme-enum"),
        pytest.param(wire_values.scheme_problem, "HTTPS", "not one of http", id="scheme-case"),
        pytest.param(wire_values.port_problem, 1, ok, id="port-lowest"),
        pytest.param(wire_values.port_problem, 65535, ok, id="port-highest"),
        pytest.param(wire_values.port_problem, 0, "not a port number", id="port-zero"),
        pytest.param(wire_values.port_problem, 65536, "not a port number", id="port-too-high"),
        pytest.param(wire_values.port_problem, -1, "not a port number", id="port-negative"),
        pytest.param(wire_values.port_problem, "80", "not a port number", id="port-string"),
        pytest.param(wire_values.port_problem, True, "not a port number", id="port-bool"),
        pytest.param(wire_values.status_problem, 301, ok, id="status-301"),
        pytest.param(wire_values.status_problem, 308, ok, id="status-308"),
        pytest.param(wire_values.status_problem, 404, "not one of 301", id="status-enum"),
        pytest.param(wire_values.status_problem, "301", "not one of 301", id="status-string"),
        pytest.param(wire_values.origin_problem, "*", ok, id="origin-any"),
        pytest.param(wire_values.origin_problem, "https://app.example.com", ok, id="origin"),
        pytest.param(wire_values.origin_problem, "http://a.example:8080", ok, id="origin-port"),
        pytest.param(wire_values.origin_problem, "https://*.example.com", ok, id="origin-wild"),
        pytest.param(wire_values.origin_problem, "http://[::1]:3000", ok, id="origin-ipv6"),
        pytest.param(wire_values.origin_problem, "http://[1::2::3]", "is not '*'", id="o-bad-ipv6"),
        pytest.param(wire_values.origin_problem, "ftp://a.example", "is not '*'", id="o-scheme"),
        pytest.param(wire_values.origin_problem, "https://a.example/", "is not '*'", id="o-path"),
        pytest.param(wire_values.origin_problem, "a.example", "is not '*'", id="o-no-scheme"),
        pytest.param(wire_values.origin_problem, "https://a b", "is not '*'", id="o-space"),
        pytest.param(wire_values.origin_problem, "https://a:0", "port outside", id="o-port-0"),
        pytest.param(wire_values.origin_problem, "https://a:99999", "port outside", id="o-port"),
    ],
)
def test_enums_and_numbers(check: Any, value: Any, problem: str | None) -> None:
    _expect(check(value), problem)


@pytest.mark.parametrize(
    ("kind", "entry", "problems"),
    [
        pytest.param(
            "RequestHeaderModifier",
            {"requestHeaderModifier": {"set": [{"name": "X-Ok", "value": "a\r\nX-Injected: yes"}]}},
            ["requestHeaderModifier.set[0].value: contains CR, LF or NUL"],
            id="request-set-value",
        ),
        pytest.param(
            "ResponseHeaderModifier",
            {"responseHeaderModifier": {"add": [{"name": "X Bad", "value": "v"}]}},
            ["responseHeaderModifier.add[0].name: contains ' '"],
            id="response-add-name",
        ),
        pytest.param(
            "RequestHeaderModifier",
            {"requestHeaderModifier": {"remove": ["ok", "Content-Length"]}},
            ["requestHeaderModifier.remove[1]: Content-Length frames"],
            id="remove-names-are-checked-too",
        ),
        pytest.param(
            "URLRewrite",
            {"urlRewrite": {"hostname": "Api", "path": {"type": "ReplaceFullPath"}}},
            ["urlRewrite.hostname: 'Api' is not a lower-case"],
            id="rewrite-hostname",
        ),
        pytest.param(
            "URLRewrite",
            {"urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/a b"}}},
            ["urlRewrite.path.replacePrefixMatch: contains ' '"],
            id="rewrite-prefix",
        ),
        pytest.param(
            "URLRewrite",
            {"urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": ""}}},
            [],
            id="an-empty-prefix-replacement-is-root",
        ),
        pytest.param(
            "URLRewrite",
            {"urlRewrite": {"path": {"type": "ReplaceRegex", "replaceFullPath": "/"}}},
            ["urlRewrite.path.type: 'ReplaceRegex' is not one of"],
            id="unknown-path-modifier-type",
        ),
        pytest.param(
            "RequestRedirect",
            {
                "requestRedirect": {
                    "scheme": "ftp",
                    "hostname": "*.example.com",
                    "port": 70000,
                    "statusCode": 404,
                    "path": {"type": "ReplaceFullPath", "replaceFullPath": "/x?y"},
                }
            },
            [
                "requestRedirect.scheme: 'ftp' is not one of",
                "requestRedirect.hostname: '*.example.com' is not",
                "requestRedirect.port: 70000 is not a port",
                "requestRedirect.statusCode: 404 is not one of",
                "requestRedirect.path.replaceFullPath: contains '?'",
            ],
            id="every-redirect-field-reported",
        ),
        pytest.param(
            "RequestRedirect",
            {"requestRedirect": {"scheme": "https", "port": 8443, "statusCode": 301}},
            [],
            id="a-good-redirect",
        ),
        pytest.param(
            "CORS",
            {
                "cors": {
                    "allowOrigins": ["https://ok.example", "ftp://x"],
                    "allowMethods": ["GET", "*", "GET POST"],
                    "allowHeaders": ["*", "X Bad"],
                    "exposeHeaders": ["a,b"],
                    "allowCredentials": "false",
                    "maxAge": -1,
                }
            },
            [
                "cors.allowOrigins[1]: 'ftp://x' is not",
                "cors.allowMethods[2]: contains ' '",
                "cors.allowHeaders[1]: contains ' '",
                "cors.exposeHeaders[0]: contains ','",
                "cors.allowCredentials: 'false' is not true or false",
                "cors.maxAge: -1 is not a whole number",
            ],
            id="every-cors-field-reported",
        ),
        pytest.param(
            "RequestMirror",
            {"requestMirror": {"backendRef": {"name": "x\r\n", "port": 80}}},
            [],
            id="a-mirror-writes-nothing-of-its-own",
        ),
        pytest.param("ExtensionRef", {"extensionRef": {"name": "x"}}, [], id="unknown-type"),
    ],
)
def test_filter_problems_name_the_field(
    kind: str, entry: dict[str, Any], problems: list[str]
) -> None:
    found = wire_values.filter_problems(kind, entry)
    assert len(found) == len(problems), found
    for got, want in zip(found, problems, strict=True):
        assert got.startswith(want), (got, want)


@pytest.mark.parametrize(
    "entry",
    [
        pytest.param({"requestHeaderModifier": {"set": "X-Env"}}, id="set-given-as-a-string"),
        pytest.param({"requestHeaderModifier": {"remove": {"a": 1}}}, id="remove-as-an-object"),
        pytest.param({"requestHeaderModifier": {"set": ["X-Env"]}}, id="set-entry-not-an-object"),
        pytest.param({"requestHeaderModifier": "x"}, id="modifier-not-an-object"),
    ],
)
def test_a_wrong_shape_is_unreadable_not_a_value_problem(entry: dict[str, Any]) -> None:
    # guard.MALFORMED turns these into "could not be read" for the whole route.
    with pytest.raises((TypeError, AttributeError)):
        wire_values.filter_problems("RequestHeaderModifier", entry)


def _expect(found: str | None, problem: str | None) -> None:
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found, found
