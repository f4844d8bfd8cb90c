"""Values that reach an HTTP head: which ones `validate()` refuses, and the field it names.

Covers every filter field the proxy writes into a head or a Location (header modifiers for
requests and responses, redirects, URL rewrites, CORS, a mirror's backend's filters, at rule
and at backendRef level) against the rules of `_values`: RFC 9110 tokens and field values,
fields that frame a message, RFC 1123 host names and IP literals, RFC 3986 absolute paths,
schemes, ports, redirect statuses, CORS origins, lists and max age; and that the values those
rules allow pass. Leaves out `from_wire`'s refusal of the same values (wire_test.py) and the
proxy's own compile-time check (coxswain_proxy.dataplane.framing_test).
"""

from __future__ import annotations

import pytest

from coxswain_routing import (
    Backend,
    Cors,
    Filter,
    PathModifier,
    PathModifierType,
    RequestHeaderModifier,
    RequestMirror,
    RequestRedirect,
    ResponseHeaderModifier,
    RouteId,
    Rule,
    URLRewrite,
)

ID = RouteId(1, "team", "web")
FULL, PREFIX = PathModifierType.REPLACE_FULL_PATH, PathModifierType.REPLACE_PREFIX_MATCH


def request_set(name: str, value: str = "1") -> RequestHeaderModifier:
    return RequestHeaderModifier(set=((name, value),))


def fields(flt: Filter) -> list[str]:
    return [p.field for p in Rule(ID, filters=(flt,)).validate()]


@pytest.mark.parametrize(
    ("flt", "field"),
    [
        # RFC 9110 §5.1, §5.6.2: a field name is a token.
        pytest.param(request_set("x a"), "filters[0].set[0].name", id="name-with-space"),
        pytest.param(request_set("x:a"), "filters[0].set[0].name", id="name-with-colon"),
        pytest.param(request_set(""), "filters[0].set[0].name", id="name-empty"),
        pytest.param(request_set("x\r\ny"), "filters[0].set[0].name", id="name-with-crlf"),
        pytest.param(request_set("é"), "filters[0].set[0].name", id="name-not-ascii"),
        pytest.param(
            RequestHeaderModifier(add=(("x(y)", "1"),)),
            "filters[0].add[0].name",
            id="added-name-with-separators",
        ),
        pytest.param(
            RequestHeaderModifier(remove=("x y",)), "filters[0].remove[0]", id="removed-name"
        ),
        # RFC 9112 §6, RFC 9110 §7.6.1: fields that frame the message or its connection.
        pytest.param(
            request_set("Content-Length", "0"), "filters[0].set[0].name", id="content-length"
        ),
        pytest.param(
            RequestHeaderModifier(add=(("Transfer-Encoding", "chunked"),)),
            "filters[0].add[0].name",
            id="transfer-encoding",
        ),
        pytest.param(
            RequestHeaderModifier(remove=("content-length",)),
            "filters[0].remove[0]",
            id="content-length-removed",
        ),
        pytest.param(
            ResponseHeaderModifier(set=(("Connection", "close"),)),
            "filters[0].set[0].name",
            id="connection-on-responses",
        ),
        pytest.param(request_set("Upgrade", "h2c"), "filters[0].set[0].name", id="upgrade"),
        # RFC 9110 §5.5: field-vchar, SP and HTAB only; no surrounding whitespace.
        pytest.param(
            request_set("x-a", "a\r\nX-Injected: yes"), "filters[0].set[0].value", id="value-crlf"
        ),
        pytest.param(request_set("x-a", "a\nb"), "filters[0].set[0].value", id="value-bare-lf"),
        pytest.param(request_set("x-a", "a\rb"), "filters[0].set[0].value", id="value-bare-cr"),
        pytest.param(request_set("x-a", "a\x00b"), "filters[0].set[0].value", id="value-nul"),
        pytest.param(request_set("x-a", "a\x1bb"), "filters[0].set[0].value", id="value-ctl"),
        pytest.param(request_set("x-a", "a\x7fb"), "filters[0].set[0].value", id="value-del"),
        pytest.param(request_set("x-a", " a"), "filters[0].set[0].value", id="value-leading-sp"),
        pytest.param(request_set("x-a", "a\t"), "filters[0].set[0].value", id="value-trailing-tab"),
        pytest.param(
            request_set("x-a", "€"), "filters[0].set[0].value", id="value-beyond-one-octet"
        ),
        pytest.param(
            ResponseHeaderModifier(add=(("x-a", "1\r\n\r\n<html>"),)),
            "filters[0].add[0].value",
            id="response-value-splits-the-head",
        ),
        # RFC 1123 §2.1 names, RFC 3986 §3.2.2 IP literals.
        pytest.param(
            RequestRedirect(hostname="a.example\r\nx: y"),
            "filters[0].hostname",
            id="host-with-crlf",
        ),
        pytest.param(
            RequestRedirect(hostname="a.example/x"), "filters[0].hostname", id="host-slash"
        ),
        pytest.param(
            RequestRedirect(hostname="a.example:80"), "filters[0].hostname", id="host-port"
        ),
        pytest.param(
            RequestRedirect(hostname="-a.example"), "filters[0].hostname", id="host-hyphen"
        ),
        pytest.param(
            RequestRedirect(hostname="a..example"), "filters[0].hostname", id="host-empty"
        ),
        pytest.param(
            RequestRedirect(hostname="a_b.example"), "filters[0].hostname", id="host-under"
        ),
        pytest.param(
            RequestRedirect(hostname="a" * 64), "filters[0].hostname", id="label-too-long"
        ),
        pytest.param(RequestRedirect(hostname="::1"), "filters[0].hostname", id="ipv6-unbracketed"),
        pytest.param(
            URLRewrite(hostname="in ternal"), "filters[0].hostname", id="rewrite-host-with-space"
        ),
        # Redirect pieces: scheme, port, status.
        pytest.param(RequestRedirect(scheme="ftp"), "filters[0].scheme", id="scheme-not-http"),
        pytest.param(RequestRedirect(port=65536), "filters[0].port", id="port-above-65535"),
        pytest.param(RequestRedirect(port=-1), "filters[0].port", id="port-negative"),
        pytest.param(RequestRedirect(status_code=200), "filters[0].statusCode", id="status-200"),
        pytest.param(RequestRedirect(status_code=304), "filters[0].statusCode", id="status-304"),
        # RFC 9112 §3.2.1 absolute paths, RFC 3986 §3.3 characters.
        pytest.param(
            RequestRedirect(path=PathModifier(FULL, "new")),
            "filters[0].path.replaceFullPath",
            id="path-relative",
        ),
        pytest.param(
            URLRewrite(path=PathModifier(FULL, "/a b")),
            "filters[0].path.replaceFullPath",
            id="path-with-space",
        ),
        pytest.param(
            URLRewrite(path=PathModifier(PREFIX, "/v2\r\nx: y")),
            "filters[0].path.replacePrefixMatch",
            id="path-with-crlf",
        ),
        pytest.param(
            URLRewrite(path=PathModifier(FULL, "/a\x00")),
            "filters[0].path.replaceFullPath",
            id="path-with-nul",
        ),
        pytest.param(
            URLRewrite(path=PathModifier(FULL, "/a?b=1")),
            "filters[0].path.replaceFullPath",
            id="path-with-query",
        ),
        pytest.param(
            URLRewrite(path=PathModifier(FULL, "/a#b")),
            "filters[0].path.replaceFullPath",
            id="path-with-fragment",
        ),
        pytest.param(
            URLRewrite(path=PathModifier(FULL, "/é")),
            "filters[0].path.replaceFullPath",
            id="path-not-ascii",
        ),
        pytest.param(
            URLRewrite(path=PathModifier(FULL, "/%zz")),
            "filters[0].path.replaceFullPath",
            id="path-bad-percent",
        ),
        # CORS: origins (RFC 6454 §7.1), methods and field names (tokens), max age.
        pytest.param(
            Cors(allow_origins=("https://a.example\r\n",)),
            "filters[0].allowOrigins[0]",
            id="origin-with-crlf",
        ),
        pytest.param(
            Cors(allow_origins=("https://a.example/app",)),
            "filters[0].allowOrigins[0]",
            id="origin-with-path",
        ),
        pytest.param(
            Cors(allow_origins=("a.example",)), "filters[0].allowOrigins[0]", id="origin-no-scheme"
        ),
        pytest.param(
            Cors(allow_origins=("https://a.example:0",)),
            "filters[0].allowOrigins[0]",
            id="origin-port-zero",
        ),
        pytest.param(Cors(allow_origins=("null",)), "filters[0].allowOrigins[0]", id="origin-null"),
        pytest.param(
            Cors(allow_methods=("GET\r\n",)), "filters[0].allowMethods[0]", id="method-crlf"
        ),
        pytest.param(Cors(allow_methods=("GE T",)), "filters[0].allowMethods[0]", id="method-sp"),
        pytest.param(
            Cors(allow_headers=("x y",)), "filters[0].allowHeaders[0]", id="allow-header-space"
        ),
        pytest.param(
            Cors(expose_headers=("x-id\r\nx-injected",)),
            "filters[0].exposeHeaders[0]",
            id="expose-header-crlf",
        ),
        pytest.param(Cors(max_age_seconds=-1), "filters[0].maxAge", id="max-age-negative"),
        # A mirror's backend carries filters too.
        pytest.param(
            RequestMirror(Backend(endpoints="e", filters=(request_set("x", "\x00"),))),
            "filters[0].backendRef.filters[0].set[0].value",
            id="mirror-backend-filter",
        ),
    ],
)
def test_a_value_that_could_break_a_head_is_named(flt: Filter, field: str) -> None:
    assert fields(flt) == [field]


def test_a_backend_refs_filter_is_named_under_its_backend() -> None:
    backend = Backend(endpoints="e", filters=(ResponseHeaderModifier(set=(("x", "\n"),)),))
    problems = Rule(ID, backends=(backend,)).validate()
    assert [p.field for p in problems] == ["backendRefs[0].filters[0].set[0].value"]
    assert "RFC 9110 §5.5" in problems[0].message


def test_value_problems_are_what_validate_adds_for_values_only() -> None:
    flt = RequestHeaderModifier(set=(("A", "\r"),), remove=("a",))  # also named twice
    rule = Rule(ID, filters=(flt,))
    assert [p.field for p in rule.validate()] == ["filters[0]", "filters[0].set[0].value"]
    assert [p.field for p in rule.value_problems()] == ["filters[0].set[0].value"]


@pytest.mark.parametrize(
    "flt",
    [
        pytest.param(request_set("X-Env", "prod"), id="plain-header"),
        pytest.param(request_set("x!#$%&'*+-.^_`|~9", ""), id="every-tchar-and-empty-value"),
        pytest.param(request_set("x-a", "a b\tc"), id="inner-space-and-tab"),
        pytest.param(request_set("x-a", "café"), id="obs-text"),
        pytest.param(request_set("Host", "internal"), id="host-may-be-set"),
        pytest.param(
            RequestRedirect(
                scheme="https",
                hostname="New-Host.example.com",
                port=8443,
                path=PathModifier(FULL, "/a/b%20c;v=1:@!$&'()*+,=~"),
                status_code=308,
            ),
            id="every-redirect-piece",
        ),
        pytest.param(RequestRedirect(hostname="10.0.0.1", port=0), id="ipv4-and-unset-port"),
        pytest.param(RequestRedirect(hostname="[::1]", port=65535), id="bracketed-ipv6"),
        pytest.param(RequestRedirect(hostname="a" * 63 + ".example"), id="label-of-63"),
        pytest.param(URLRewrite(path=PathModifier(PREFIX, "")), id="empty-prefix-is-root"),
        pytest.param(URLRewrite(hostname="internal.svc", path=PathModifier(FULL, "/")), id="root"),
        pytest.param(
            Cors(
                allow_origins=(
                    "*",
                    "https://*.example.org",
                    "http://localhost:8080",
                    "https://[::1]",
                ),
                allow_methods=("GET", "*"),
                allow_headers=("x-token", "*"),
                expose_headers=("x-request-id",),
                max_age_seconds=0,
            ),
            id="cors",
        ),
    ],
)
def test_servable_values_pass(flt: Filter) -> None:
    assert fields(flt) == []
