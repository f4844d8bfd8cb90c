"""End to end through real sockets: routing, filters, framing, limits, failures.

Each test runs a data plane on loopback with a snapshot built in the test, in front of the
devkit echo backend (or a purpose-built misbehaving one), and asserts on the bytes a client gets.
Leaves out TLS (dataplane/tls_test.py), snapshot swaps under load (dataplane/swap_test.py)
and workers; the phases each request goes through (phases_test.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from coxswain_devkit.echo import EchoServer
from coxswain_proxy.dataplane import testing as t
from coxswain_proxy.dataplane.http.http11 import HttpConnection
from coxswain_proxy.dataplane.runtime import Config
from coxswain_routing import (
    Backend,
    Cors,
    HeaderModifier,
    Match,
    PathMatch,
    PathModifier,
    PathModifierType,
    PathType,
    RequestHeaderModifier,
    RequestMirror,
    RequestRedirect,
    ResponseHeaderModifier,
    Retry,
    Timeouts,
    URLRewrite,
    ValueMatch,
)


@contextlib.asynccontextmanager
async def echo_plane(
    *rules: t.Rule, config: Config | None = None, extra: tuple[Any, ...] = ()
) -> AsyncIterator[tuple[int, EchoServer]]:
    async with EchoServer() as echo:
        resources: list[t.Resource] = [
            t.HTTP_LISTENER,
            t.endpoints("echo", echo.port),
            t.routes("example.com", *rules),
            *extra,
        ]
        async with t.running(resources, config) as plane:
            yield t.actual(plane), echo


def seen(response: t.Response) -> dict[str, Any]:
    """The echo's description of the request, header names lower-cased."""
    body: dict[str, Any] = json.loads(response.body)
    body["headers"] = {k.lower(): v for k, v in body["headers"].items()}
    return body


async def test_keep_alive_serves_many_requests_on_one_connection() -> None:
    async with echo_plane(t.rule("r", t.backend("echo"))) as (port, _), t.client(port) as c:
        for i in range(20):
            r = await c.request(f"/n/{i}")
            assert r.status == 200 and seen(r)["path"] == f"/n/{i}"


async def test_pipelined_requests_are_answered_in_order() -> None:
    async with echo_plane(t.rule("r", t.backend("echo"))) as (port, _), t.client(port) as c:
        c.send(
            b"".join(f"GET /p/{i} HTTP/1.1\r\nHost: example.com\r\n\r\n".encode() for i in range(5))
        )
        got = await c.responses(5)
        assert [seen(r)["path"] for r in got] == [f"/p/{i}" for i in range(5)]


async def test_pipelined_requests_are_each_routed_by_their_own_host() -> None:
    # A request waiting its turn keeps its Host: requests parsed after it must not lend theirs.
    async with echo_plane(t.rule("r", t.backend("echo"))) as (port, _), t.client(port) as c:
        hosts = ["example.com", "unknown.example.net", "example.com"]
        c.send(b"".join(f"GET /p HTTP/1.1\r\nHost: {h}\r\n\r\n".encode() for h in hosts))
        got = await c.responses(3)
        assert [r.status for r in got] == [200, 404, 200]


@pytest.mark.parametrize(
    ("request_line", "fields", "keeps_open"),
    [
        pytest.param("HTTP/1.1", "", "", id="http-1.1-needs-no-word"),
        pytest.param("HTTP/1.0", "Connection: keep-alive\r\n", "keep-alive", id="http-1.0-asks"),
        pytest.param(
            "HTTP/1.0", "Proxy-Connection: keep-alive\r\n", "keep-alive", id="http-1.0-old-spelling"
        ),
        pytest.param("HTTP/1.1", "Proxy-Connection: keep-alive\r\n", "", id="http-1.1-either-way"),
    ],
)
async def test_a_kept_connection_is_announced_only_to_http_1_0(
    request_line: str, fields: str, keeps_open: str
) -> None:
    # RFC 9112 §9.3: HTTP/1.1 is persistent by default; an HTTP/1.0 client keeps a connection
    # only when told so: the answer says "keep-alive" to it, and to no one else.
    async with echo_plane(t.rule("r", t.backend("echo"))) as (port, _), t.client(port) as c:
        for _ in range(2):
            c.send(f"GET / {request_line}\r\nHost: example.com\r\n{fields}\r\n".encode())
            response = await c.response()
            assert response.status == 200
            assert (response.header("connection") or "") == keeps_open


async def test_forwarded_headers_set_and_hop_by_hop_removed() -> None:
    async with echo_plane(t.rule("r", t.backend("echo"))) as (port, _):
        extra = (
            "X-Forwarded-For: 10.1.1.1\r\nConnection: keep-alive, X-Secret\r\n"
            "X-Secret: s\r\nTE: trailers\r\n"
        )
        headers = seen(await t.get(port, extra=extra))["headers"]
        assert headers["x-forwarded-for"] == ["10.1.1.1, 127.0.0.1"]
        assert headers["x-forwarded-proto"] == ["http"]
        assert headers["x-forwarded-host"] == ["example.com"]
        assert "x-secret" not in headers and "te" not in headers


@pytest.mark.parametrize(
    "body",
    [
        pytest.param("Content-Length: 11\r\n\r\nhello world", id="content-length-body-streams"),
        pytest.param(
            "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n",
            id="chunked-body-streams",
        ),
    ],
)
async def test_request_bodies_reach_the_backend(body: str) -> None:
    received: list[bytes] = []

    async def backend(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        if b"chunked" in head:
            received.append(await reader.readuntil(b"0\r\n\r\n"))
        else:
            received.append(await reader.readexactly(11))
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()

    async with raw_backend(backend) as bport, plane_to(bport) as port, t.client(port) as c:
        c.send(f"POST / HTTP/1.1\r\nHost: example.com\r\n{body}".encode())
        assert (await c.response()).body == b"ok"
    assert b"hello" in received[0] and b"world" in received[0]


async def test_expect_100_continue_passes_the_interim_response_on() -> None:
    async with echo_plane(t.rule("r", t.backend("echo"))) as (port, _), t.client(port) as c:
        c.send(
            b"POST / HTTP/1.1\r\nHost: example.com\r\nContent-Length: 3\r\n"
            b"Expect: 100-continue\r\n\r\n"
        )
        interim = await c.reader.readuntil(b"\r\n\r\n")
        assert interim.startswith(b"HTTP/1.1 100")
        c.send(b"abc")
        assert (await c.response()).status == 200


@pytest.mark.parametrize(
    ("path", "host", "status"),
    [
        pytest.param("/api/x", "example.com", 200, id="prefix-matches-segments"),
        pytest.param("/apix", "example.com", 404, id="prefix-never-matches-part-of-a-segment"),
        pytest.param("/api", "other.com", 404, id="unknown-host-404"),
        pytest.param("/exact", "example.com", 200, id="exact-path"),
        pytest.param("/exactly", "example.com", 404, id="exact-is-not-prefix"),
    ],
)
async def test_routing_outcomes(path: str, host: str, status: int) -> None:
    exact = t.rule("exact", t.backend("echo"), path="/exact", path_type="Exact")
    prefix = t.rule("prefix", t.backend("echo"), path="/api")
    async with EchoServer() as echo:
        resources: list[t.Resource] = [
            t.HTTP_LISTENER,
            t.endpoints("echo", echo.port),
            t.routes("example.com", exact, prefix),
        ]
        async with t.running(resources) as plane:
            assert (await t.get(t.actual(plane), path, host)).status == status


async def test_header_match_selects_the_rule() -> None:
    canary = t.rule(
        "canary",
        t.backend("echo"),
        match=Match(headers=(ValueMatch("x-canary", "yes"),)),
        filters=(RequestHeaderModifier(set=(("x-rule", "canary"),)),),
    )
    stable = t.rule(
        "stable", t.backend("echo"), filters=(RequestHeaderModifier(set=(("x-rule", "stable"),)),)
    )
    async with echo_plane(canary, stable) as (port, _):
        assert seen(await t.get(port, extra="X-Canary: yes\r\n"))["headers"]["x-rule"] == ["canary"]
        assert seen(await t.get(port))["headers"]["x-rule"] == ["stable"]


async def test_a_request_repeated_is_routed_as_the_first_time() -> None:
    # The data plane remembers routing answers per (port, Host, method, target): each of these
    # differs from the others in one of them and must keep its own answer when repeated.
    def tagged(name: str, **match: Any) -> t.Rule:
        modifier = RequestHeaderModifier(set=(("x-rule", name),))
        return t.rule(name, t.backend("echo"), match=Match(**match), filters=(modifier,))

    rules = (
        tagged("query", query=(ValueMatch("v", "1"),)),
        tagged("post", method="POST"),
        tagged("other", path=PathMatch(PathType.PATH_PREFIX, "/other")),
        tagged("default"),
    )
    cases = [
        ("GET", "/x?v=1", "example.com", "query"),
        ("GET", "/x?v=2", "example.com", "default"),
        ("POST", "/x?v=2", "example.com", "post"),
        ("GET", "/other/x", "example.com", "other"),
        ("GET", "/x?v=1", "unknown.example.net", "404"),
    ]
    async with echo_plane(*rules) as (port, _), t.client(port) as c:
        for _ in range(2):
            for method, target, host, want in cases:
                length = "Content-Length: 0\r\n" if method == "POST" else ""
                c.send(f"{method} {target} HTTP/1.1\r\nHost: {host}\r\n{length}\r\n".encode())
                r = await c.response()
                got = str(r.status) if r.status != 200 else seen(r)["headers"]["x-rule"][0]
                assert got == want, (method, target, host)


async def test_request_and_response_header_modifiers_fold_rule_then_backend() -> None:
    b = t.backend(
        "echo",
        filters=(
            RequestHeaderModifier(add=(("x-add", "b"),)),
            ResponseHeaderModifier(set=(("x-resp", "backend"),)),
        ),
    )
    r = t.rule(
        "r",
        b,
        filters=(
            RequestHeaderModifier(set=(("x-add", "a"),), remove=("x-drop",)),
            ResponseHeaderModifier(remove=("content-type",)),
        ),
    )
    async with echo_plane(r) as (port, _):
        response = await t.get(port, extra="X-Drop: 1\r\n")
        headers = seen(response)["headers"]
        assert headers["x-add"] == ["a,b"] and "x-drop" not in headers
        assert response.header("x-resp") == "backend" and response.header("content-type") is None


async def test_url_rewrite_replaces_prefix_and_host() -> None:
    rewrite = URLRewrite(
        hostname="internal.svc", path=PathModifier(PathModifierType.REPLACE_PREFIX_MATCH, "/v2")
    )
    async with echo_plane(t.rule("r", t.backend("echo"), path="/api", filters=(rewrite,))) as (
        port,
        _,
    ):
        body = seen(await t.get(port, "/api/orders?x=1"))
        assert body["path"] == "/v2/orders?x=1" and body["host"] == "internal.svc"


@pytest.mark.parametrize(
    ("redirect", "location"),
    [
        pytest.param(
            RequestRedirect(scheme="https"),
            "https://example.com/old?q=1",
            id="scheme-uses-well-known-port",
        ),
        pytest.param(
            RequestRedirect(hostname="new.example.com", status_code=301),
            f"http://new.example.com:{t.PORT}/old?q=1",
            id="listener-port-kept",
        ),
        pytest.param(
            RequestRedirect(path=PathModifier(PathModifierType.REPLACE_FULL_PATH, "/new")),
            f"http://example.com:{t.PORT}/new?q=1",
            id="full-path",
        ),
    ],
)
async def test_redirects(redirect: RequestRedirect, location: str) -> None:
    async with echo_plane(t.rule("r", filters=(redirect,))) as (port, _):
        response = await t.get(port, "/old?q=1")
        assert response.status == redirect.status_code and response.header("location") == location


async def test_cors_preflight_answered_and_responses_decorated() -> None:
    cors = Cors(allow_origins=("https://app.example",), allow_methods=("GET", "POST"))
    async with (
        echo_plane(t.rule("r", t.backend("echo"), filters=(cors,))) as (port, _),
        t.client(port) as c,
    ):
        c.send(
            b"OPTIONS / HTTP/1.1\r\nHost: example.com\r\nOrigin: https://app.example\r\n"
            b"Access-Control-Request-Method: POST\r\n\r\n"
        )
        pre = await c.response()
        assert pre.status == 200 and pre.header("access-control-allow-methods") == "GET, POST"
        plain = await c.request(extra="Origin: https://app.example\r\n")
        assert plain.header("access-control-allow-origin") == "https://app.example"
        other = await c.request(extra="Origin: https://evil.example\r\n")
        assert other.header("access-control-allow-origin") is None


async def test_weighted_backends_split_exactly() -> None:
    async with EchoServer(pod="a") as a, EchoServer(pod="b") as b:
        r = t.rule("r", t.backend("a", weight=3), t.backend("b", weight=1))
        resources: list[t.Resource] = [
            t.HTTP_LISTENER,
            t.endpoints("a", a.port),
            t.endpoints("b", b.port),
            t.routes("example.com", r),
        ]
        async with t.running(resources) as plane, t.client(t.actual(plane)) as c:
            pods = [seen(await c.request())["pod"] for _ in range(8)]
    assert pods.count("a") == 6 and pods.count("b") == 2


@pytest.mark.parametrize(
    ("backends", "status"),
    [
        pytest.param(
            (Backend(unresolved_reason="Service default/gone not found"),),
            500,
            id="unresolved-backend-500",
        ),
        pytest.param((t.backend("none"),), 503, id="no-endpoint-set-503"),
        pytest.param((t.backend("notready"),), 503, id="no-ready-endpoints-503"),
    ],
)
async def test_backend_failures(backends: tuple[Backend, ...], status: int) -> None:
    async with echo_plane(
        t.rule("r", *backends), extra=(t.endpoints("notready", 1, ready=False),)
    ) as (port, _):
        assert (await t.get(port)).status == status


async def test_mirror_copies_without_delaying_the_response() -> None:
    mirrored: asyncio.Queue[bytes] = asyncio.Queue()

    async def sink(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await mirrored.put(await reader.readuntil(b"\r\n\r\n"))
        writer.write(b"HTTP/1.1 500 No\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        writer.close()

    async with raw_backend(sink) as sink_port:
        m = RequestMirror(backend=t.backend("sink"))
        async with echo_plane(
            t.rule("r", t.backend("echo"), filters=(m,)), extra=(t.endpoints("sink", sink_port),)
        ) as (port, _):
            assert (await t.get(port, "/copy")).status == 200
            async with asyncio.timeout(10):
                assert (await mirrored.get()).startswith(b"GET /copy HTTP/1.1")


async def test_oversized_request_headers_get_431() -> None:
    async with (
        echo_plane(t.rule("r", t.backend("echo")), config=Config(max_header_bytes=1024)) as (
            port,
            _,
        ),
        t.client(port) as c,
    ):
        c.send(b"GET / HTTP/1.1\r\nHost: example.com\r\nX-Big: " + b"a" * 2000 + b"\r\n\r\n")
        assert (await c.closed()).startswith(b"HTTP/1.1 431")


def _post_all_then_read(port: int, body_size: int) -> bytes:
    """A client that sends its whole request body before it reads, as most do."""
    head = f"POST / HTTP/1.1\r\nHost: nobody.example\r\nContent-Length: {body_size}\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(head.encode() + b"x" * body_size)
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        return answer


async def test_an_answer_before_the_body_is_read_reaches_a_client_still_sending_it() -> None:
    # RFC 9112 §9.6's lingering close: the proxy answers (here 404) at the head, half-closes
    # and drops the 4 MiB that follow, so the client reads the answer instead of a reset, and
    # the connection ends when the client's does.
    async with echo_plane(t.rule("r", t.backend("echo"), path="/only")) as (port, _):
        answer = await asyncio.to_thread(_post_all_then_read, port, 4 * 1024 * 1024)
    assert answer.startswith(b"HTTP/1.1 404"), answer[:80]
    assert b"connection: close" in answer.lower()


async def test_the_data_plane_closing_ends_a_lingering_close() -> None:
    # A connection lingering (answered, its body still owed) when the data plane closes is
    # closed with the rest after the grace, not left open with its transport.
    async with EchoServer() as echo:
        rule = t.rule("r", t.backend("echo"), path="/only")
        resources: list[t.Resource] = [
            t.HTTP_LISTENER,
            t.endpoints("echo", echo.port),
            t.routes("example.com", rule),
        ]
        async with t.running(resources) as plane, t.client(t.actual(plane)) as c:
            c.send(b"POST /elsewhere HTTP/1.1\r\nHost: example.com\r\nContent-Length: 9000\r\n\r\n")
            c.send(b"x" * 1000)
            head = await c.reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 404")
            rt = plane.rt
            assert rt is not None
            lingering = [c for c in rt.connections if isinstance(c, HttpConnection) and c.lingering]
            assert lingering, "the 404 came before the body: the connection lingers"
            await plane.close(grace=0.1)
            assert not rt.connections
            assert all(conn.transport is None or conn.transport.is_closing() for conn in lingering)


@pytest.mark.parametrize(
    "request_bytes",
    [
        pytest.param(b"GARBAGE\r\n\r\n", id="not-http"),
        pytest.param(
            b"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: x\r\n\r\n", id="bad-content-length"
        ),
        pytest.param(b"GET / HTTP/1.1\r\n\r\n", id="no-host-header"),
        pytest.param(b"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", id="two-host-headers"),
    ],
)
async def test_malformed_requests_get_400_and_close(request_bytes: bytes) -> None:
    async with echo_plane(t.rule("r", t.backend("echo"))) as (port, _), t.client(port) as c:
        c.send(request_bytes)
        data = (
            await c.closed()
            if b"Host: a\r\nHost" not in request_bytes and b"HTTP/1.1\r\n\r\n" not in request_bytes
            else await c.reader.readuntil(b"\r\n\r\n")
        )
        assert data.startswith(b"HTTP/1.1 400")


async def test_oversized_upstream_headers_get_502() -> None:
    async def big(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 200 OK\r\nX-Big: " + b"b" * 5000 + b"\r\nContent-Length: 0\r\n\r\n")
        await writer.drain()
        await reader.read()
        writer.close()

    async with (
        raw_backend(big) as bport,
        plane_to(bport, config=Config(max_upstream_header_bytes=1024)) as port,
    ):
        assert (await t.get(port)).status == 502


async def test_upstream_reset_mid_response_closes_the_client_and_others_carry_on() -> None:
    async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        if b"/reset" in head:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
            await writer.drain()
            writer.transport.abort()
            return
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()

    async with raw_backend(reset) as bport, plane_to(bport) as port:
        async with t.client(port) as c:
            c.send(b"GET /reset HTTP/1.1\r\nHost: example.com\r\n\r\n")
            data = await c.closed()
            assert data.startswith(b"HTTP/1.1 200") and data.endswith(b"partial")
        assert (await t.get(port, "/fine")).body == b"ok"


@pytest.mark.parametrize(
    "timeouts",
    [
        pytest.param(Timeouts(request_ms=200), id="request-timeout-504"),
        pytest.param(Timeouts(backend_request_ms=200), id="backend-request-timeout-504"),
    ],
)
async def test_a_backend_that_never_answers_hits_the_timeout(timeouts: Timeouts) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read()
        writer.close()

    async with raw_backend(silent) as bport, plane_to(bport, timeouts=timeouts) as port:
        assert (await t.get(port)).status == 504


async def test_retry_on_listed_code_reaches_a_good_answer() -> None:
    calls = 0

    async def flaky(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal calls
        while await _read_head(reader):
            calls += 1
            status = b"503 Unavailable" if calls == 1 else b"200 OK"
            writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Length: 2\r\n\r\nok")
            await writer.drain()
        writer.close()

    async with (
        raw_backend(flaky) as bport,
        plane_to(bport, retry=Retry(attempts=2, codes=(503,))) as port,
    ):
        assert (await t.get(port)).status == 200
    assert calls == 2


async def test_retry_after_connect_failure_uses_another_endpoint() -> None:
    async with EchoServer() as echo:
        dead = await _dead_port()
        r = t.rule("r", t.backend("echo"), retry=Retry(attempts=1))
        resources: list[t.Resource] = [
            t.HTTP_LISTENER,
            t.endpoints("echo", dead, echo.port),
            t.routes("example.com", r),
        ]
        async with t.running(resources) as plane:
            statuses = [(await t.get(t.actual(plane))).status for _ in range(4)]
    assert statuses == [200] * 4


async def test_slow_clients_do_not_starve_others_and_are_timed_out() -> None:
    async with echo_plane(t.rule("r", t.backend("echo")), config=Config(header_timeout=1.0)) as (
        port,
        _,
    ):
        slow = [await t.Client.open(port) for _ in range(20)]
        try:
            for s in slow:
                s.send(b"GET / HTTP/1.1\r\nHost: exa")
            assert (await t.get(port)).status == 200
            assert (await slow[0].closed()).startswith(b"HTTP/1.1 408")
        finally:
            for s in slow:
                await s.close()


async def test_websocket_upgrade_is_tunneled() -> None:
    import aiohttp

    async with (
        echo_plane(t.rule("r", t.backend("echo"))) as (port, _),
        aiohttp.ClientSession() as session,
        session.ws_connect(f"http://127.0.0.1:{port}/ws", headers={"Host": "example.com"}) as ws,
    ):
        await ws.send_str("hello")
        assert (await ws.receive(timeout=10)).data == "hello"


# ------------------------------------------------------------------------------ helpers

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@contextlib.asynccontextmanager
async def raw_backend(handler: Handler) -> AsyncIterator[int]:
    tasks: set[asyncio.Task[None]] = set()

    async def guarded(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        tasks.add(task)
        try:
            await handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(guarded, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()


@contextlib.asynccontextmanager
async def plane_to(
    backend_port: int,
    *,
    config: Config | None = None,
    timeouts: Timeouts = t.NO_TIMEOUTS,
    retry: Retry = t.NO_RETRY,
) -> AsyncIterator[int]:
    r = t.rule("r", t.backend("raw"), timeouts=timeouts, retry=retry)
    resources: list[t.Resource] = [
        t.HTTP_LISTENER,
        t.endpoints("raw", backend_port),
        t.routes("example.com", r),
    ]
    async with t.running(resources, config) as plane:
        yield t.actual(plane)


async def _read_head(reader: asyncio.StreamReader) -> bytes:
    try:
        return await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return b""


async def _dead_port() -> int:
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port: int = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    return port


_ = (HeaderModifier, PathMatch, PathType)
