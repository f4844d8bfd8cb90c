"""The data plane's own compile-time refusal of values that would break the framing of a head.

Covers `compile_tables` raising `framing.UnsafeField`, naming the resource and the rule, for
each piece a snapshot can put into a head (request and response header plans at rule and
backendRef level, redirect status, scheme, hostname, port and path, rewrite hostname and path,
CORS lists, origins and max age), with the model's own validation never consulted: the routes
are built as model values directly, which check nothing. Over real sockets, a data plane asked
to apply such a snapshot keeps serving the one it had, and nothing injected reaches the
backend. Leaves out the model's rules (coxswain_routing.values_test) and the Nack
(discovery/snapshot_test.py, discovery/client_test.py).
"""

from __future__ import annotations

import json

import pytest

from coxswain_devkit.echo import EchoServer
from coxswain_proxy.dataplane import framing, tables
from coxswain_proxy.dataplane import testing as t
from coxswain_routing import (
    Cors,
    Filter,
    PathModifier,
    PathModifierType,
    RequestHeaderModifier,
    RequestRedirect,
    ResponseHeaderModifier,
    URLRewrite,
)

INJECTION = "a\r\nX-Injected: yes"
FULL = PathModifierType.REPLACE_FULL_PATH


def compiled(*filters: Filter, backend_filters: tuple[Filter, ...] = ()) -> tables.Tables:
    rule = t.rule("web", t.backend("echo", filters=backend_filters), filters=filters)
    return tables.compile_tables([t.routes("example.com", rule)], ingress={})


@pytest.mark.parametrize(
    ("flt", "detail"),
    [
        pytest.param(
            RequestHeaderModifier(set=(("x-env", INJECTION),)),
            "control character",
            id="crlf-in-a-request-header-value",
        ),
        pytest.param(
            RequestHeaderModifier(add=(("x-env", "a\x00"),)), "control", id="nul-in-an-added-value"
        ),
        pytest.param(
            ResponseHeaderModifier(set=(("x-env", "a\nb"),)), "control", id="lf-in-a-response-value"
        ),
        pytest.param(
            RequestHeaderModifier(set=(("x-env", "€"),)), "latin-1", id="value-beyond-one-octet"
        ),
        pytest.param(
            RequestHeaderModifier(set=(("x env", "1"),)), "not a token", id="name-not-a-token"
        ),
        pytest.param(
            RequestHeaderModifier(set=(("x\r\ny", "1"),)), "not a token", id="name-with-crlf"
        ),
        pytest.param(
            RequestHeaderModifier(set=(("Content-Length", "0"),)),
            "frames",
            id="content-length-set",
        ),
        pytest.param(
            RequestHeaderModifier(remove=("Transfer-Encoding",)),
            "frames",
            id="transfer-encoding-removed",
        ),
        pytest.param(RequestRedirect(status_code=100), "not a redirection", id="redirect-status"),
        pytest.param(RequestRedirect(scheme="ht\r\ntp"), "scheme", id="redirect-scheme"),
        pytest.param(
            RequestRedirect(hostname="a.example\r\nx: y"), "redirect hostname", id="redirect-host"
        ),
        pytest.param(RequestRedirect(port=70000), "redirect port", id="redirect-port"),
        pytest.param(
            RequestRedirect(path=PathModifier(FULL, "/a b")), "redirect path", id="redirect-path"
        ),
        pytest.param(URLRewrite(hostname="in ternal"), "rewrite hostname", id="rewrite-host"),
        pytest.param(
            URLRewrite(path=PathModifier(FULL, "/v2 HTTP/1.1\r\nx: y")),
            "rewrite path",
            id="rewrite-path-splits-the-request-line",
        ),
        pytest.param(
            URLRewrite(path=PathModifier(FULL, "v2")), "not absolute", id="rewrite-path-relative"
        ),
        pytest.param(
            Cors(allow_origins=("*",), expose_headers=("x-id\r\nx-injected",)),
            "CORS exposed header",
            id="cors-expose-header",
        ),
        pytest.param(Cors(allow_methods=("GET, PUT",)), "CORS method", id="cors-method-list"),
        pytest.param(Cors(allow_origins=("https://a\r\n",)), "CORS origin", id="cors-origin"),
        pytest.param(Cors(max_age_seconds=-1), "max age", id="cors-max-age"),
    ],
)
def test_a_value_that_would_break_a_head_is_refused_at_compile(flt: Filter, detail: str) -> None:
    with pytest.raises(framing.UnsafeField, match=detail) as refused:
        compiled(flt)
    assert "resource 'routes/gateway/default/gw/18080/example.com'" in str(refused.value)
    assert "HTTPRoute default/web rule 0" in str(refused.value)


def test_a_backend_refs_filter_is_checked_too() -> None:
    bad = RequestHeaderModifier(set=(("x-env", INJECTION),))
    with pytest.raises(framing.UnsafeField, match="control character"):
        compiled(backend_filters=(bad,))


def test_values_a_head_may_carry_compile() -> None:
    filters: tuple[Filter, ...] = (
        RequestHeaderModifier(set=(("Host", "internal"), ("x-a", "café\tb")), remove=("x-b",)),
        ResponseHeaderModifier(add=(("x-c", ""),)),
        URLRewrite(hostname="[::1]", path=PathModifier(FULL, "/v2/%20")),
        Cors(allow_origins=("https://*.example.org",), allow_methods=("*",), max_age_seconds=0),
    )
    assert compiled(*filters).plans


async def test_a_refused_snapshot_leaves_the_served_one_and_injects_nothing() -> None:
    good = RequestHeaderModifier(set=(("x-env", "prod"),))
    bad = RequestHeaderModifier(set=(("x-env", INJECTION),))
    async with EchoServer() as echo:
        base: list[t.Resource] = [t.HTTP_LISTENER, t.endpoints("echo", echo.port)]
        served = [*base, t.routes("example.com", t.rule("web", t.backend("echo"), filters=(good,)))]
        async with t.running(served) as plane:
            assert plane.rt is not None
            before = plane.rt.tables
            refused = t.routes("example.com", t.rule("web", t.backend("echo"), filters=(bad,)))
            with pytest.raises(framing.UnsafeField, match=r"example\.com"):
                await plane.apply([*base, refused])
            assert plane.rt.tables is before
            async with t.client(t.actual(plane)) as c:
                for _ in range(2):  # the second on the pooled upstream connection
                    response = await c.request()
                    headers = {
                        k.lower(): v for k, v in json.loads(response.body)["headers"].items()
                    }
                    assert response.status == 200
                    assert headers["x-env"] == ["prod"] and "x-injected" not in headers
