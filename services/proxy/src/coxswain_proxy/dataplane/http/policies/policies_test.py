"""A rule's policies through real sockets: each answer a client gets, and what reaches the backend.

Covers a CIDR deny told apart by the client's own address (clients bound to 127.0.0.2 and
127.0.0.3), an allow list, 413 for a declared length and for a chunked body counted as it
streams, 429 with Retry-After from a per-client and a per-route bucket (and the bucket kept
across a snapshot that changes the host), the limit on requests in flight per client, basic
auth with {SHA}, apr1 and bcrypt hashes (401 with WWW-Authenticate, the credential
remembered), external auth against a real auth server on 127.0.0.1 (2xx with a copied header,
401 and 403 passed on, 401 to a sign-in redirect with rd=, an auth server that is down), the
affinity cookie pinning an endpoint, and the canary cookie's always and never. The model's
checks are coxswain_routing's policy_test; the hash schemes' own vectors are htpasswd_test.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import ctypes
import json
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest

from coxswain_proxy.dataplane import testing as t
from coxswain_proxy.dataplane.http import recording
from coxswain_proxy.dataplane.http.policies import accesslog, htpasswd
from coxswain_proxy.dataplane.http.recording import Received, Recorder
from coxswain_routing import (
    Backend,
    BasicAuth,
    CookieSplit,
    EndpointSet,
    ExternalAuth,
    Policy,
    RateKey,
    RateLimit,
    Resource,
    Rule,
    SessionAffinity,
    SourceRanges,
)

HOST = "example.com"


def _rule(policy: Policy, *backends: Backend) -> Rule:
    return replace(t.rule("r", *(backends or (t.backend("rec"),))), policy=policy)


@contextlib.asynccontextmanager
async def plane(
    policy: Policy, *extra: Resource, respond: recording.Respond = recording.ok
) -> AsyncIterator[tuple[int, Recorder]]:
    async with recording.backend(respond) as (port, recorder):
        resources: list[Resource] = [
            t.HTTP_LISTENER,
            t.endpoints("rec", port),
            *extra,
            t.routes(HOST, _rule(policy)),
        ]
        async with t.running(resources) as running:
            yield t.actual(running), recorder
    assert recorder.problems == []


async def _from(address: str, port: int, request: bytes) -> t.Response:
    """One request from a client bound to `address` (any of 127/8 is this host)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(address, 0))
    client = t.Client(reader, writer)
    try:
        client.send(request)
        return await client.response()
    finally:
        await client.close()


GET = f"GET / HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode()


# ------------------------------------------------------------------ source ranges


async def test_a_denied_range_is_refused_and_its_neighbour_served() -> None:
    policy = Policy(source_ranges=SourceRanges(deny=("127.0.0.2/32",)))
    async with plane(policy) as (port, rec):
        denied = await _from("127.0.0.2", port, GET)
        served = await _from("127.0.0.3", port, GET)
    assert denied.status == 403
    assert served.status == 200
    assert len(rec.requests) == 1


async def test_an_allow_list_serves_only_its_ranges_and_deny_wins_inside_it() -> None:
    ranges = SourceRanges(allow=("127.0.0.0/29",), deny=("127.0.0.3",))
    async with plane(Policy(source_ranges=ranges)) as (port, _):
        inside = await _from("127.0.0.2", port, GET)
        denied = await _from("127.0.0.3", port, GET)
        outside = await _from("127.0.0.9", port, GET)
    assert (inside.status, denied.status, outside.status) == (200, 403, 403)


# ------------------------------------------------------------------ body size


async def test_a_declared_length_past_the_limit_is_413_before_the_backend_hears() -> None:
    body = b"x" * 11
    request = f"POST / HTTP/1.1\r\nHost: {HOST}\r\ncontent-length: 11\r\n\r\n".encode() + body
    async with plane(Policy(max_body_bytes=10)) as (port, rec):
        response = await _from("127.0.0.1", port, request)
        fits = await _from("127.0.0.1", port, request.replace(b"11", b"10")[:-1])
    assert response.status == 413
    assert fits.status == 200
    assert [r.body for r in rec.requests] == [b"x" * 10]


async def test_a_chunked_body_is_counted_as_it_streams_and_cut_off_past_the_limit() -> None:
    head = f"POST / HTTP/1.1\r\nHost: {HOST}\r\ntransfer-encoding: chunked\r\n\r\n".encode()
    async with plane(Policy(max_body_bytes=10)) as (port, rec):
        async with t.client(port) as client:
            client.send(head + b"6\r\nabcdef\r\n")
            await asyncio.sleep(0)
            client.send(b"6\r\nghijkl\r\n")
            response = await client.response()
            rest = await client.closed()
        small = await _from("127.0.0.1", port, head + b"4\r\nabcd\r\n0\r\n\r\n")
    assert response.status == 413
    assert rest == b""  # and the connection closes: the rest of the body is not read
    assert small.status == 200
    assert [r.body for r in rec.requests] == [b"abcd"]  # the cut-off body was never whole


# ------------------------------------------------------------------ rate and in-flight limits


async def test_past_the_burst_a_client_gets_429_with_retry_after_and_another_is_served() -> None:
    policy = Policy(rate_limits=(RateLimit(1, 60, burst=2),))
    async with plane(policy) as (port, _):
        first = [(await _from("127.0.0.2", port, GET)).status for _ in range(2)]
        limited = await _from("127.0.0.2", port, GET)
        other = await _from("127.0.0.3", port, GET)
    assert first == [200, 200]
    assert limited.status == 429
    assert limited.header("retry-after") is not None
    assert 1 <= int(limited.header("retry-after") or 0) <= 60
    assert other.status == 200


async def test_a_per_route_bucket_is_shared_by_every_client_and_an_exempt_one_passes() -> None:
    limit = RateLimit(1, 60, key=RateKey.ROUTE, exempt=("127.0.0.4",))
    async with plane(Policy(rate_limits=(limit,))) as (port, _):
        first = await _from("127.0.0.2", port, GET)
        second = await _from("127.0.0.3", port, GET)
        exempt = await _from("127.0.0.4", port, GET)
    assert (first.status, second.status, exempt.status) == (200, 429, 200)


async def test_the_bucket_outlives_a_snapshot_that_changes_the_host() -> None:
    policy = Policy(rate_limits=(RateLimit(1, 60, burst=1),))
    async with recording.backend() as (port, _):
        base: list[Resource] = [t.HTTP_LISTENER, t.endpoints("rec", port)]
        async with t.running([*base, t.routes(HOST, _rule(policy))]) as running:
            bound = t.actual(running)
            assert (await t.get(bound)).status == 200
            other = t.rule("other", t.backend("rec"), path="/other")
            await running.apply([*base, t.routes(HOST, _rule(policy), other)])
            assert (await t.get(bound, "/other")).status == 200  # the new snapshot serves
            assert (await t.get(bound)).status == 429


async def test_requests_in_flight_per_client_are_bounded() -> None:
    release, arrived = asyncio.Event(), asyncio.Event()

    async def slow(port: int) -> int:
        return (await t.get(port)).status

    async with _slow_backend(release, arrived) as backend_port:
        resources: list[Resource] = [
            t.HTTP_LISTENER,
            t.endpoints("rec", backend_port),
            t.routes(HOST, _rule(Policy(connections_per_client=1))),
        ]
        async with t.running(resources) as running:
            port = t.actual(running)
            first = asyncio.create_task(slow(port))
            await arrived.wait()
            second = await t.get(port)
            release.set()
            assert await first == 200
            third = await t.get(port)
    assert second.status == 429
    assert third.status == 200  # the first one's end freed its place


@contextlib.asynccontextmanager
async def _slow_backend(release: asyncio.Event, arrived: asyncio.Event) -> AsyncIterator[int]:
    """A backend that sets `arrived` for each request and answers once `release` is set."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while await reader.readuntil(b"\r\n\r\n"):
                arrived.set()
                await release.wait()
                writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


# ------------------------------------------------------------------ basic auth


def _bcrypt(password: bytes) -> str:
    function = htpasswd._crypt_rn
    assert function is not None, "libcrypt with bcrypt is part of the images"
    data = ctypes.create_string_buffer(32768)
    hashed = function(password, b"$2y$05$abcdefghijklmnopqrstuu", data, 32768)
    assert hashed is not None
    return bytes(hashed).decode()


USERS = (
    ("alice", "{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ="),  # "secret"
    ("bob", "$apr1$saltsalt$LrttParrLPdxvgutaSXWJ0"),  # "secret"
)


def _basic(user: str, password: str) -> str:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return f"Authorization: Basic {token}\r\n"


async def test_basic_auth_asks_for_credentials_and_takes_sha_and_apr1() -> None:
    auth = BasicAuth("Staff only", USERS)
    async with plane(Policy(basic_auth=auth)) as (port, rec):
        none = await t.get(port)
        alice = await t.get(port, extra=_basic("alice", "secret"))
        bob = await t.get(port, extra=_basic("bob", "secret"))
        again = await t.get(port, extra=_basic("bob", "secret"))
        wrong = await t.get(port, extra=_basic("bob", "guess"))
        nobody = await t.get(port, extra=_basic("eve", "secret"))
    assert none.status == 401
    assert none.header("www-authenticate") == 'Basic realm="Staff only"'
    assert (alice.status, bob.status, again.status) == (200, 200, 200)
    assert (wrong.status, nobody.status) == (401, 401)
    assert len(rec.requests) == 3
    assert rec.requests[0].value(b"authorization") is not None  # passed on, as nginx does


async def test_basic_auth_verifies_bcrypt_off_the_event_loop() -> None:
    auth = BasicAuth("r", (("carol", _bcrypt(b"hunter2")),))
    async with plane(Policy(basic_auth=auth)) as (port, _):
        good = await t.get(port, extra=_basic("carol", "hunter2"))
        bad = await t.get(port, extra=_basic("carol", "hunter3"))
        cached = await t.get(port, extra=_basic("carol", "hunter2"))
    assert (good.status, bad.status, cached.status) == (200, 401, 200)


# ------------------------------------------------------------------ external auth


@contextlib.asynccontextmanager
async def auth_server(verdicts: dict[str, bytes]) -> AsyncIterator[tuple[int, list[Received]]]:
    """A real auth service: its answer chosen by the request's X-Token field."""

    def respond(request: Received) -> bytes:
        token = (request.value(b"x-token") or b"").decode()
        return verdicts.get(token, b"HTTP/1.1 500 Oops\r\ncontent-length: 0\r\n\r\n")

    async with recording.backend(respond) as (port, recorder):
        yield port, recorder.requests


@contextlib.asynccontextmanager
async def ext_plane(policy: Policy) -> AsyncIterator[tuple[int, Recorder, list[Received]]]:
    """A data plane in front of "rec", with a real auth service as "auth"."""
    async with contextlib.AsyncExitStack() as stack:
        auth_port, asked = await stack.enter_async_context(auth_server(VERDICTS))
        port, rec = await stack.enter_async_context(plane(policy, _auth_endpoints(auth_port)))
        yield port, rec, asked


def _auth_endpoints(port: int) -> EndpointSet:
    return t.endpoints("auth", port)


VERDICTS = {
    "good": b"HTTP/1.1 200 OK\r\nx-auth-user: alice\r\nx-other: no\r\ncontent-length: 0\r\n\r\n",
    "nobody": b'HTTP/1.1 401 No\r\nwww-authenticate: Bearer realm="x"\r\ncontent-length: 0\r\n\r\n',
    "forbidden": b"HTTP/1.1 403 No\r\ncontent-length: 4\r\n\r\nnope",
}


def _external(**changes: Any) -> Policy:
    auth = ExternalAuth(
        "endpoints/default/auth/80", "auth.example", "/check?x=1",
        response_headers=("x-auth-user",),
    )  # fmt: skip
    return Policy(external_auth=replace(auth, **changes))


async def test_external_auth_lets_a_2xx_through_with_the_listed_headers() -> None:
    async with ext_plane(_external()) as (port, rec, asked):
        good = await t.get(port, "/app?q=1", extra="X-Token: good\r\nx-auth-user: forged\r\n")
    assert good.status == 200
    assert len(asked) == 1
    check = asked[0]
    assert (check.method, check.target) == (b"GET", b"/check?x=1")
    assert check.value(b"host") == b"auth.example"
    assert check.value(b"x-original-url") == f"http://{HOST}/app?q=1".encode()
    assert check.value(b"x-original-method") == b"GET"
    assert rec.requests[0].values(b"x-auth-user") == [b"alice"]  # the auth's, not the client's
    assert rec.requests[0].value(b"x-other") is None


async def test_external_auth_passes_on_401_and_403_and_answers_500_for_the_rest() -> None:
    async with ext_plane(_external()) as (port, rec, _):
        nobody = await t.get(port, extra="X-Token: nobody\r\n")
        forbidden = await t.get(port, extra="X-Token: forbidden\r\n")
        broken = await t.get(port, extra="X-Token: other\r\n")
    assert nobody.status == 401
    assert nobody.header("www-authenticate") == 'Bearer realm="x"'
    assert forbidden.status == 403
    assert broken.status == 500
    assert rec.requests == []


async def test_a_401_with_a_signin_url_redirects_there_with_the_original_url() -> None:
    policy = _external(signin="https://$host/oauth2/start")
    async with ext_plane(policy) as (port, _, _):
        response = await t.get(port, "/app?q=1", extra="X-Token: nobody\r\n")
    assert response.status == 302
    expected = "https://example.com/oauth2/start?rd=http%3A%2F%2Fexample.com%2Fapp%3Fq%3D1"
    assert response.header("location") == expected


async def test_an_auth_service_that_is_down_answers_500() -> None:
    async with auth_server(VERDICTS) as (auth_port, _):
        pass  # closed: nothing listens there now
    async with plane(_external(), _auth_endpoints(auth_port)) as (port, rec):
        response = await t.get(port, extra="X-Token: good\r\n")
    assert response.status == 500
    assert rec.requests == []


# ------------------------------------------------------------------ affinity and canary cookie


def _named(name: str) -> recording.Respond:
    def respond(request: Received) -> bytes:
        return b"HTTP/1.1 200 OK\r\ncontent-length: %d\r\n\r\n%b" % (len(name), name.encode())

    return respond


async def test_the_affinity_cookie_keeps_a_client_on_its_endpoint() -> None:
    policy = Policy(affinity=SessionAffinity("route", "/", max_age_seconds=60))
    async with (
        recording.backend(_named("one")) as (one, _),
        recording.backend(_named("two")) as (
            two,
            _,
        ),
    ):
        resources: list[Resource] = [
            t.HTTP_LISTENER,
            t.endpoints("rec", one, two),
            t.routes(HOST, _rule(policy)),
        ]
        async with t.running(resources) as running:
            port = t.actual(running)
            first = await t.get(port)
            cookie = first.header("set-cookie") or ""
            pinned = [await t.get(port, extra=f"Cookie: a=b; {cookie.split(';')[0]}\r\n")
                      for _ in range(4)]  # fmt: skip
            unpinned = [(await t.get(port)).body for _ in range(2)]
    assert cookie.startswith("route=") and "Max-Age=60" in cookie and "HttpOnly" in cookie
    assert {r.body for r in pinned} == {first.body}
    assert all(r.header("set-cookie") is None for r in pinned)
    assert set(unpinned) == {b"one", b"two"}  # without it, round robin


async def test_the_canary_cookie_sends_always_to_the_canary_and_never_to_the_main() -> None:
    split = Policy(cookie_split=CookieSplit("canary", always=1, never=0))
    async with (
        recording.backend(_named("main")) as (main, _),
        recording.backend(_named("canary")) as (canary, _),
    ):
        rule = _rule(split, t.backend("main"), t.backend("canary", weight=0))
        resources: list[Resource] = [
            t.HTTP_LISTENER,
            t.endpoints("main", main),
            t.endpoints("canary", canary),
            t.routes(HOST, rule),
        ]
        async with t.running(resources) as running:
            port = t.actual(running)
            always = await t.get(port, extra="Cookie: canary=always\r\n")
            never = await t.get(port, extra="Cookie: canary=never\r\n")
            other = await t.get(port, extra="Cookie: canary=maybe\r\n")
    assert (always.body, never.body, other.body) == (b"canary", b"main", b"main")


async def test_the_affinity_cookie_keeps_a_client_on_the_weighted_slot_it_was_sent_to() -> None:
    policy = Policy(affinity=SessionAffinity("route"))
    async with contextlib.AsyncExitStack() as stack:
        main, _ = await stack.enter_async_context(recording.backend(_named("main")))
        canary, _ = await stack.enter_async_context(recording.backend(_named("canary")))
        rule = _rule(policy, t.backend("main"), t.backend("canary"))
        resources: list[Resource] = [
            t.HTTP_LISTENER,
            t.endpoints("main", main),
            t.endpoints("canary", canary),
            t.routes(HOST, rule),
        ]
        running = await stack.enter_async_context(t.running(resources))
        port = t.actual(running)
        bodies = set()
        for _ in range(2):  # the weighted pick alternates: one client lands on each slot
            first = await t.get(port)
            cookie = (first.header("set-cookie") or "").split(";")[0]
            again = [(await t.get(port, extra=f"Cookie: {cookie}\r\n")).body for _ in range(3)]
            assert set(again) == {first.body}
            bodies.add(first.body)
    assert bodies == {b"main", b"canary"}


# ------------------------------------------------------------------ access log


async def test_a_rule_with_an_access_log_writes_a_bounded_json_line_per_request(
    capsys: pytest.CaptureFixture[str],
) -> None:
    policy = Policy(access_log=True, source_ranges=SourceRanges(deny=("127.0.0.3",)))
    long = "/" + "x" * 5000
    async with plane(policy) as (port, _):
        await _from("127.0.0.2", port, f"GET /a?b=1 HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
        await _from("127.0.0.3", port, GET)
        await _from("127.0.0.2", port, f"GET {long} HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
        accesslog.flush()
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(x["client"], x["status"], x["outcome"]) for x in lines] == [
        ("127.0.0.2", 200, "answered"),
        ("127.0.0.3", 403, "answered"),
        ("127.0.0.2", 200, "answered"),
    ]
    first = lines[0]
    assert (first["method"], first["host"], first["path"]) == ("GET", HOST, "/a?b=1")
    assert first["route"] == "HTTPRoute/default/r" and first["upstream"].startswith("127.0.0.1:")
    assert first["http"] == "1.1" and first["duration_ms"] >= 0
    assert len(lines[2]["path"]) == accesslog.MAX_PATH + 3  # cut, and said so with "..."


async def test_without_an_access_log_nothing_is_written(capsys: pytest.CaptureFixture[str]) -> None:
    async with plane(Policy(max_body_bytes=10)) as (port, _):
        await t.get(port)
        accesslog.flush()
    assert capsys.readouterr().out == ""
