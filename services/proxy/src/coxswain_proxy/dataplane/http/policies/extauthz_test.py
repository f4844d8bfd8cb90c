"""The Gateway API's ExternalAuth filter on the request path, through real sockets.

A real auth service on 127.0.0.1 allows or denies by the path it is asked for, in front of a
recording backend: what the auth request carries (the client's method, Host and target after
the `http.path` prefix, Authorization and the allowed fields only, Content-Length 0), what a
200 copies onto the request (the listed fields, or every field but the answer's own when none
is listed), a denial passed on whole (status, fields, body; a redirect; a 401's challenge),
a body held while the auth service decides and then sent on, an HTTP/2 client asked about
and answered alike, and the failures that fail closed with 500 (the auth service down, no
endpoint, a denial too long to pass on). The auth_request style of the same policy is
`policies_test`'s; the translation of the filter is the controller's golden
`filters-external-auth`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

from coxswain_proxy.dataplane import testing as t
from coxswain_proxy.dataplane.http import recording
from coxswain_proxy.dataplane.http.policies import extauthz
from coxswain_proxy.dataplane.http.recording import Received, Recorder
from coxswain_proxy.dataplane.http2 import h2client
from coxswain_routing import AuthStyle, EndpointSet, ExternalAuth, Policy, Resource

HOST = "example.com"
AUTH = ExternalAuth(
    "endpoints/default/auth/80", "", "/check", style=AuthStyle.EXT_AUTHZ,
    response_headers=("x-user-id",), request_headers=("x-test-header",),
)  # fmt: skip
_LONG = b"x" * (extauthz.MAX_DENIAL_BODY + 1)
# The auth service's answer, by the path it is asked for (the prefix, then the client's).
ANSWERS = {
    b"/check/allowed": b"HTTP/1.1 200 OK\r\nx-user-id: 42\r\nx-other: 1\r\n"
    b"content-type: text/plain\r\ncontent-length: 2\r\n\r\nok",
    b"/check/denied": b"HTTP/1.1 403 Forbidden\r\nx-auth-error: access-denied\r\n"
    b"content-type: text/plain\r\ncontent-length: 37\r\n\r\n"
    b"Access denied by external auth server",
    b"/check/sign-in": b"HTTP/1.1 302 Found\r\nlocation: https://login.example/start\r\n"
    b"content-length: 0\r\n\r\n",
    b"/check/nobody": b'HTTP/1.1 401 Unauthorized\r\nwww-authenticate: Bearer realm="x"\r\n'
    b"content-length: 0\r\n\r\n",
    b"/check/accepted": b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n",
    b"/check/long": b"HTTP/1.1 403 Forbidden\r\ncontent-length: %d\r\n\r\n%b" % (len(_LONG), _LONG),
}


def _answer(request: Received) -> bytes:
    path = request.target.split(b"?", 1)[0]
    return ANSWERS.get(path, b"HTTP/1.1 500 Oops\r\ncontent-length: 0\r\n\r\n")


@contextlib.asynccontextmanager
async def plane(
    auth: ExternalAuth, auth_endpoints: EndpointSet | None = None
) -> AsyncIterator[tuple[int, Recorder, list[Received]]]:
    """A data plane serving one rule with `auth` in front of "rec"; a real auth service as
    "auth" (or `auth_endpoints` instead)."""
    rule = replace(t.rule("r", t.backend("rec")), policy=Policy(external_auth=auth))
    async with contextlib.AsyncExitStack() as stack:
        auth_port, auth_rec = await stack.enter_async_context(recording.backend(_answer))
        port, rec = await stack.enter_async_context(recording.backend())
        resources: list[Resource] = [
            t.HTTP_LISTENER,
            t.endpoints("rec", port),
            auth_endpoints or t.endpoints("auth", auth_port),
            t.routes(HOST, rule),
        ]
        running = await stack.enter_async_context(t.running(resources))
        yield t.actual(running), rec, auth_rec.requests
        assert rec.problems == [] and auth_rec.problems == []


def _ext(**changes: Any) -> ExternalAuth:
    return replace(AUTH, **changes)


async def test_a_200_lets_the_request_through_with_the_listed_fields_only() -> None:
    extra = (
        "Authorization: Bearer t\r\nX-Test-Header: hello\r\nCookie: c=1\r\nX-User-Id: forged\r\n"
    )
    async with plane(AUTH) as (port, rec, asked):
        response = await t.get(port, "/allowed?q=1", host="example.com:8080", extra=extra)
    assert response.status == 200
    [check] = asked
    assert (check.method, check.target) == (b"GET", b"/check/allowed?q=1")
    assert check.value(b"host") == b"example.com:8080"  # the client's
    assert check.value(b"authorization") == b"Bearer t"
    assert check.value(b"x-test-header") == b"hello"
    assert check.value(b"cookie") is None  # not among allowedHeaders
    assert check.value(b"content-length") == b"0"
    [sent] = rec.requests
    assert sent.values(b"x-user-id") == [b"42"]  # the auth service's, not the client's
    assert sent.value(b"x-other") is None
    assert sent.value(b"cookie") == b"c=1"  # the request itself is untouched


async def test_with_no_fields_listed_a_200_copies_every_field_but_the_answers_own() -> None:
    async with plane(_ext(response_headers=())) as (port, rec, _):
        response = await t.get(port, "/allowed")
    assert response.status == 200
    [sent] = rec.requests
    assert sent.value(b"x-user-id") == b"42"
    assert sent.value(b"x-other") == b"1"
    assert sent.value(b"content-type") is None  # it describes the answer's body
    assert sent.value(b"content-length") is None  # a GET without a body


async def test_a_denial_reaches_the_client_as_the_auth_service_gave_it() -> None:
    async with plane(AUTH) as (port, rec, _):
        denied = await t.get(port, "/denied")
        redirected = await t.get(port, "/sign-in")
        nobody = await t.get(port, "/nobody")
        accepted = await t.get(port, "/accepted")
    assert denied.status == 403
    assert denied.header("x-auth-error") == "access-denied"
    assert denied.body == b"Access denied by external auth server"
    assert (redirected.status, redirected.header("location")) == (
        302,
        "https://login.example/start",
    )
    assert (nobody.status, nobody.header("www-authenticate")) == (401, 'Bearer realm="x"')
    # Gateway API: "each backend must respond with a `200` status code ... on a successful
    # authorization. Any other code is considered an authorization failure."
    assert accepted.status == 202
    assert rec.requests == []


async def test_a_body_waits_for_the_verdict_and_only_the_backend_gets_it() -> None:
    body = b"0123456789"
    request = (
        f"POST /allowed HTTP/1.1\r\nHost: {HOST}\r\ncontent-length: 10\r\n\r\n".encode() + body
    )
    async with plane(AUTH) as (port, rec, asked), t.client(port) as client:
        client.send(request)
        response = await client.response()
    assert response.status == 200
    [check] = asked
    assert (check.method, check.body, check.value(b"content-length")) == (b"POST", b"", b"0")
    assert [(r.method, r.body) for r in rec.requests] == [(b"POST", body)]


async def test_without_a_prefix_the_client_target_is_asked_as_it_is() -> None:
    async with plane(_ext(path="")) as (port, rec, asked):
        response = await t.get(port, "/check/allowed")
    assert response.status == 200
    assert asked[0].target == b"/check/allowed"
    assert len(rec.requests) == 1


async def test_an_http2_client_is_asked_about_and_answered_alike() -> None:
    async with plane(AUTH) as (port, rec, asked), h2client.connected(port) as client:
        allowed = await client.get("/allowed", authority="example.com")
        denied = await client.get("/denied", authority="example.com")
    assert allowed.status == 200
    assert [(c.target, c.value(b"host")) for c in asked] == [
        (b"/check/allowed", b"example.com"),
        (b"/check/denied", b"example.com"),
    ]
    assert rec.requests[0].value(b"x-user-id") == b"42"
    assert (denied.status, denied.header(b"x-auth-error")) == (403, b"access-denied")
    assert denied.body == b"Access denied by external auth server"


async def test_the_filter_fails_closed() -> None:
    async with recording.backend() as (gone, _):
        pass  # closed: nothing listens there now
    async with plane(AUTH, t.endpoints("auth", gone)) as (port, rec, _):
        down = await t.get(port, "/allowed")
    async with plane(_ext(endpoints="")) as (port, _, asked):
        unresolved = await t.get(port, "/allowed")
    async with plane(AUTH) as (port, _, _):
        long = await t.get(port, "/long")
    assert (down.status, unresolved.status, long.status) == (500, 500, 500)
    assert rec.requests == [] and asked == []
