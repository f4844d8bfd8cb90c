"""HTTP/2 from clients (RFC 9113): h2c by prior knowledge, h2 by ALPN, streams as requests.

Covers: a prior-knowledge connection and an HTTPS one negotiating h2 each route by :authority
to an HTTP/1.1 backend; HTTP/1.1 on the same cleartext port still works; request bodies larger
than the initial window arrive whole; several streams in flight on one connection; a malformed
request (RFC 9113 §8.1.1, §8.2-8.3) resets only its own stream with PROTOCOL_ERROR; the
concurrent-streams limit is advertised; a Host outside the certificate's listener gets 421
(§9.1.1); a listener removed sends GOAWAY and the connection closes once idle.
"""

from __future__ import annotations

import json
import ssl

import pytest

from coxswain_devkit.echo import EchoServer
from coxswain_devkit.pki import CertificateAuthority
from coxswain_proxy.dataplane import testing as t
from coxswain_proxy.dataplane.http2 import limits
from coxswain_proxy.dataplane.http2.h2client import connected
from coxswain_routing import ListenerProtocol, TlsCertificate, TlsStore

CA = CertificateAuthority.create()


def _snapshot(port: int) -> list[t.Resource]:
    return [t.HTTP_LISTENER, t.endpoints("a", port), t.routes("", t.rule("r", t.backend("a")))]


async def test_prior_knowledge_routes_by_authority_to_an_http11_backend() -> None:
    async with (
        EchoServer(pod="a-0") as echo,
        t.running(_snapshot(echo.port)) as plane,
        connected(t.actual(plane)) as client,
    ):
        answer = await client.get("/hello?x=1", "app.example.com")
        assert (await t.get(t.actual(plane), "/again")).status == 200  # HTTP/1.1 still
    assert answer.status == 200
    seen = json.loads(answer.body)
    assert (seen["path"], seen["host"], seen["pod"]) == ("/hello?x=1", "app.example.com", "a-0")
    assert seen["headers"]["X-Forwarded-Proto"] == ["http"]


async def test_streams_run_side_by_side_and_bodies_pass_the_initial_window() -> None:
    body = b"x" * 300_000
    async with (
        EchoServer(pod="a-0") as echo,
        t.running(_snapshot(echo.port)) as plane,
        connected(t.actual(plane)) as client,
    ):
        ids = [client.request(f"/{i}") for i in range(5)]
        posted = client.request("/post", method="POST", body=body)
        answers = [await client.answer(i) for i in ids]
        upload = await client.answer(posted)
    assert [json.loads(a.body)["path"] for a in answers] == [f"/{i}" for i in range(5)]
    assert upload.status == 200
    assert json.loads(upload.body)["headers"]["Transfer-Encoding"] == ["chunked"]


@pytest.mark.parametrize(
    "block",
    [
        pytest.param([(b":method", b"GET"), (b":path", b"/")], id="no-scheme"),
        pytest.param(
            [(b":method", b"GET"), (b":scheme", b"http"), (b":path", b"/"), (b":path", b"/")],
            id="path-twice",
        ),
        pytest.param(
            [(b":method", b"GET"), (b"x", b"1"), (b":scheme", b"http"), (b":path", b"/")],
            id="pseudo-after-regular",
        ),
        pytest.param(
            [(b":method", b"GET"), (b":scheme", b"http"), (b":path", b"/"), (b"X-Up", b"1")],
            id="uppercase-name",
        ),
        pytest.param(
            [
                (b":method", b"GET"),
                (b":scheme", b"http"),
                (b":path", b"/"),
                (b"connection", b"keep-alive"),
            ],
            id="connection-specific",
        ),
        pytest.param(
            [(b":method", b"GET"), (b":scheme", b"http"), (b":path", b"/"), (b"te", b"gzip")],
            id="te-not-trailers",
        ),
        pytest.param(
            [
                (b":method", b"GET"),
                (b":scheme", b"http"),
                (b":path", b"/"),
                (b":authority", b"a.example.com"),
                (b"host", b"b.example.com"),
            ],
            id="host-differs-from-authority",
        ),
    ],
)
async def test_a_malformed_request_resets_only_its_stream(block: list[tuple[bytes, bytes]]) -> None:
    async with (
        EchoServer(pod="a-0") as echo,
        t.running(_snapshot(echo.port)) as plane,
        connected(t.actual(plane)) as client,
    ):
        bad = await client.answer(client.request(block=block))
        good = await client.get("/after")
    assert bad.reset == limits.PROTOCOL_ERROR
    assert good.status == 200


async def test_the_concurrent_streams_limit_is_advertised() -> None:
    async with (
        EchoServer(pod="a-0") as echo,
        t.running(_snapshot(echo.port)) as plane,
        connected(t.actual(plane)) as client,
    ):
        await client.get("/")
        advertised = client.h2.remote_settings.max_concurrent_streams
    assert advertised == limits.H2Limits().max_concurrent_streams


async def test_removing_the_listener_sends_goaway_and_closes() -> None:
    async with (
        EchoServer(pod="a-0") as echo,
        t.running(_snapshot(echo.port)) as plane,
        connected(t.actual(plane)) as client,
    ):
        await client.get("/")
        await plane.apply([t.endpoints("a", echo.port)])
        await client.until(lambda: client.closed)
    assert client.goaway is not None and client.goaway.error_code == limits.NO_ERROR


def _tls_resources(echo_port: int) -> list[t.Resource]:
    issued = CA.issue(dns=["shop.example.com"])
    store = TlsStore(
        t.TLS_PORT,
        (TlsCertificate(("shop.example.com",), issued.chain_pem, issued.key_pem, "ns/shop"),),
    )
    return [
        t.listeners((t.TLS_PORT, ListenerProtocol.HTTPS, "shop.example.com")),
        t.endpoints("a", echo_port),
        t.routes("shop.example.com", t.rule("shop", t.backend("a")), port=t.TLS_PORT),
        t.routes("blog.example.com", t.rule("blog", t.backend("a")), port=t.TLS_PORT),
        store,
    ]


async def test_alpn_h2_over_tls_and_421_for_an_authority_the_certificate_does_not_cover() -> None:
    context = ssl.create_default_context(cadata=CA.certificate_pem.decode())
    context.set_alpn_protocols(["h2", "http/1.1"])
    async with EchoServer(pod="a-0") as echo, t.running(_tls_resources(echo.port)) as plane:
        port = t.actual(plane, t.TLS_PORT)
        async with connected(port, context, "shop.example.com") as client:
            ssl_object = client.writer.get_extra_info("ssl_object")
            good = await client.get("/", "shop.example.com")
            other = await client.get("/", "blog.example.com")
    assert ssl_object.selected_alpn_protocol() == "h2"
    assert good.status == 200
    assert json.loads(good.body)["headers"]["X-Forwarded-Proto"] == ["https"]
    assert other.status == 421
