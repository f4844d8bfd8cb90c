"""The request line, Host and request-target at the HTTP/1.1 front door (RFC 9112 §2-§3).

Each test feeds a client's bytes to a data plane whose one hostless route leads to a strict
recording backend (`recording`), then asserts on the bytes the client gets back and on what
the backend received (which that backend checks is well-formed and unambiguously framed). Each
case names the section it holds the proxy to. Covers Host, the request-target's forms
(absolute, asterisk, authority for CONNECT), methods never forwarded, the target and field
limits, and the HTTP-version. Framing and persistence are in rfc9112_framing_test.py; what the
proxy adds to messages, and answers, in rfc9110_test.py; smuggling shapes and the fuzz in
malformed_test.py.
"""

from __future__ import annotations

import pytest

from coxswain_proxy.dataplane import testing as t
from coxswain_proxy.dataplane.http import recording
from coxswain_proxy.dataplane.http.recording import GET2, H, kept, until_closed
from coxswain_proxy.dataplane.runtime import Config
from coxswain_routing import RequestHeaderModifier

# ------------------------------------------------------------------------------ Host


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param(b"", id="no-host-in-http-1.1"),
        pytest.param(H + H, id="two-host-lines"),
        pytest.param(b"Host: u@example.com\r\n", id="userinfo"),
        pytest.param(b"Host: a.example, b.example\r\n", id="comma-list"),
        pytest.param(b"Host: example.com/x\r\n", id="slash"),
        pytest.param(b"Host: exa mple.com\r\n", id="whitespace-inside"),
        pytest.param(b"Host: example.com:0\r\n", id="port-zero"),
        pytest.param(b"Host: example.com:65536\r\n", id="port-out-of-range"),
        pytest.param(b"Host: example.com:123456\r\n", id="port-six-digits"),
        pytest.param(b"Host: example.com:8a\r\n", id="port-not-digits"),
        pytest.param(b"Host: example.com:\r\n", id="port-empty"),
        pytest.param(b"Host: [::1\r\n", id="ip-literal-unclosed"),
        pytest.param(b"Host: [::g]\r\n", id="ip-literal-not-ipv6"),
    ],
)
async def test_a_missing_repeated_or_invalid_host_is_400(fields: bytes) -> None:
    # RFC 9112 §3.2: "A server MUST respond with a 400 (Bad Request) status code to any
    # HTTP/1.1 request message that lacks a Host header field and to any request message that
    # contains more than one Host header field line or a Host header field with an invalid
    # field value." RFC 9110 §7.2: Host = uri-host [ ":" port ].
    answered, rec = await until_closed(b"GET / HTTP/1.1\r\n" + fields + b"\r\n")
    assert [r.status for r in answered] == [400]
    assert rec.requests == []


@pytest.mark.parametrize(
    ("line", "host"),
    [
        pytest.param(b"Host: [::1]:8080\r\n", b"[::1]:8080", id="ipv6-literal-and-port"),
        pytest.param(b"Host: 127.0.0.1:65535\r\n", b"127.0.0.1:65535", id="ipv4-highest-port"),
        pytest.param(b"Host: Example.COM:80\r\n", b"Example.COM:80", id="name-and-port"),
        pytest.param(b"Host: example.com \t\r\n", b"example.com", id="trailing-whitespace"),
        pytest.param(b"Host: xn--bcher-kva.example\r\n", b"xn--bcher-kva.example", id="a-label"),
    ],
)
async def test_a_valid_host_is_served_and_passed_on(line: bytes, host: bytes) -> None:
    answered, rec = await kept(b"GET / HTTP/1.1\r\n" + line + b"\r\n", 1)
    assert answered[0].status == 200
    assert rec.requests[0].value(b"host") == host


async def test_an_http_1_0_request_needs_no_host() -> None:
    answered, rec = await until_closed(b"GET /old HTTP/1.0\r\n\r\n")
    assert [r.status for r in answered] == [200]
    assert rec.requests[0].target == b"/old"


# ------------------------------------------------------------------------------ request-target


@pytest.mark.parametrize(
    ("target", "host", "sent"),
    [
        pytest.param(b"http://example.com/x?y=1", b"example.com", b"/x?y=1", id="path-and-query"),
        pytest.param(b"http://example.com", b"example.com", b"/", id="empty-path-is-slash"),
        pytest.param(b"http://example.com?q", b"example.com", b"/?q", id="query-only"),
        pytest.param(b"HTTP://Example.com:8080/a", b"Example.com:8080", b"/a", id="scheme-case"),
        pytest.param(b"https://[::1]/a", b"[::1]", b"/a", id="https-ip-literal"),
    ],
)
async def test_an_absolute_form_target_is_routed_by_its_authority(
    target: bytes, host: bytes, sent: bytes
) -> None:
    # RFC 9112 §3.2.2: "When an origin server receives a request with an absolute-form of
    # request-target, the origin server MUST ignore the received Host header field (if any) and
    # instead use the host information of the request-target." The origin server gets
    # origin-form with that Host.
    request = b"GET " + target + b" HTTP/1.1\r\nHost: other.example\r\n\r\n"
    answered, rec = await kept(request, 1)
    assert answered[0].status == 200
    (got,) = rec.requests
    assert (got.target, got.value(b"host"), got.value(b"x-forwarded-host")) == (sent, host, host)


@pytest.mark.parametrize(
    "target",
    [
        pytest.param(b"http://user:pw@example.com/", id="userinfo"),
        pytest.param(b"http://user@example.com/", id="userinfo-no-password"),
        pytest.param(b"http:///x", id="empty-host"),
        pytest.param(b"http://:80/x", id="port-without-host"),
        pytest.param(b"http://exa,mple.com/x", id="authority-not-uri-host"),
        pytest.param(b"ftp://example.com/x", id="not-http"),
        pytest.param(b"/x#fragment", id="fragment"),
    ],
)
async def test_a_target_that_names_no_usable_origin_is_400(target: bytes) -> None:
    # RFC 9110 §4.2.4: a recipient "SHOULD parse for userinfo and treat its presence as an
    # error"; §4.2.1: a URI with an empty host "MUST" be rejected as invalid; RFC 9112 §3.2.
    answered, rec = await until_closed(b"GET " + target + b" HTTP/1.1\r\n" + H + b"\r\n")
    assert [r.status for r in answered] == [400]
    assert rec.requests == []


@pytest.mark.parametrize(
    "request_line",
    [
        pytest.param(b"CONNECT example.com:443 HTTP/1.1", id="connect-authority-form"),
        pytest.param(b"CONNECT /x HTTP/1.1", id="connect-origin-form"),
        pytest.param(b"GET * HTTP/1.1", id="asterisk-form-not-options"),
        pytest.param(b"TRACE / HTTP/1.1", id="trace"),
    ],
)
async def test_connect_trace_and_asterisk_form_are_answered_here_and_keep_step(
    request_line: bytes,
) -> None:
    # RFC 9110 §9.3.6 (CONNECT asks for a tunnel this gateway does not offer), §9.3.8 (TRACE
    # reflects credentials back), RFC 9112 §3.2.4 (the asterisk-form is for OPTIONS only):
    # answered 405 with Allow (RFC 9110 §15.5.6), never forwarded, and the connection goes on
    # with the request pipelined behind.
    answered, rec = await kept(request_line + b"\r\n" + H + b"\r\n" + GET2, 2)
    assert [r.status for r in answered] == [405, 200]
    assert answered[0].header("allow") == "GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH"
    assert [r.target for r in rec.requests] == [b"/second"]


async def test_a_connect_with_content_is_refused_and_closed() -> None:
    # RFC 9110 §9.3.6: "A CONNECT request message does not have content"; llhttp would read
    # what follows as a tunnel's bytes, so there is no telling where the next request starts.
    data = b"CONNECT example.com:443 HTTP/1.1\r\n" + H + b"Content-Length: 4\r\n\r\nGET /"
    answered, rec = await until_closed(data)
    assert [r.status for r in answered] == [400]
    assert rec.requests == []


@pytest.mark.parametrize(
    "request_line",
    [
        pytest.param(b"OPTIONS * HTTP/1.1", id="asterisk-form"),
        pytest.param(b"OPTIONS http://example.com HTTP/1.1", id="absolute-form-empty-path"),
    ],
)
async def test_options_for_the_server_as_a_whole_is_answered_here(request_line: bytes) -> None:
    # RFC 9112 §3.2.4: "The asterisk-form of request-target is only used for a server-wide
    # OPTIONS request", and an absolute-form one with an empty path means the same.
    answered, rec = await kept(request_line + b"\r\n" + H + b"\r\n", 1)
    assert answered[0].status == 200 and answered[0].header("content-length") == "0"
    assert "OPTIONS" in (answered[0].header("allow") or "")
    assert rec.requests == []


async def test_a_target_over_the_limit_is_414() -> None:
    # RFC 9112 §3: "A server that receives a request-target longer than any URI it wishes to
    # parse MUST respond with a 414 (URI Too Long) status code".
    config = Config(max_target_bytes=1024)
    data = b"GET /" + b"a" * 1100 + b" HTTP/1.1\r\n" + H + b"\r\n"
    answered, _ = await until_closed(data, config=config)
    assert [r.status for r in answered] == [414]
    fits = b"GET /" + b"a" * 1000 + b" HTTP/1.1\r\n" + H + b"Connection: close\r\n\r\n"
    assert [r.status for r in (await until_closed(fits, config=config))[0]] == [200]


async def test_fields_over_the_limit_are_431() -> None:
    # RFC 6585 §5: 431 "indicates that the server is unwilling to process the request because
    # its header fields are too large".
    data = (
        b"GET / HTTP/1.1\r\n" + H + b"".join(b"X-%d: %s\r\n" % (i, b"v" * 100) for i in range(20))
    )
    answered, rec = await until_closed(data + b"\r\n", config=Config(max_header_bytes=1024))
    assert [r.status for r in answered] == [431]
    assert rec.requests == []


# ------------------------------------------------------------------------------ version


@pytest.mark.parametrize(
    ("version", "statuses"),
    [
        pytest.param(b"HTTP/2.0", (505,), id="http-2.0"),
        pytest.param(b"HTTP/0.9", (505,), id="http-0.9"),
        pytest.param(b"HTTP/1.2", (400, 505), id="http-1.2"),
        pytest.param(b"HTTP/3.0", (400, 505), id="http-3.0"),
    ],
)
async def test_a_version_other_than_1_0_or_1_1_is_never_forwarded(
    version: bytes, statuses: tuple[int, ...]
) -> None:
    # RFC 9110 §15.6.6: 505 "indicates that the server does not support, or refuses to support,
    # the major version of HTTP that was used in the request message"; RFC 9112 §2.3.
    answered, rec = await until_closed(b"GET / " + version + b"\r\n" + H + b"\r\n")
    assert len(answered) == 1 and answered[0].status in statuses
    assert rec.requests == []


async def test_a_route_that_sets_host_sends_exactly_one_host() -> None:
    # RFC 9112 §3.2: a request carries exactly one Host field; spec 003 lets a
    # RequestHeaderModifier set it, so the one the backend gets is the modifier's.
    set_host = RequestHeaderModifier(set=(("Host", "internal.example"),), add=(("x-a", "1"),))
    async with recording.backend() as (port, rec):
        resources: list[t.Resource] = [
            t.HTTP_LISTENER,
            t.endpoints("rec", port),
            t.routes("", t.rule("r", t.backend("rec"), filters=(set_host,))),
        ]
        async with t.running(resources) as running, t.client(t.actual(running)) as c:
            c.send(b"GET / HTTP/1.1\r\n" + H + b"\r\n")
            (answered,) = await c.responses(1)
    assert answered.status == 200
    assert rec.problems == []
    (received,) = rec.requests
    assert received.values(b"host") == [b"internal.example"]
    assert received.value(b"x-a") == b"1"
