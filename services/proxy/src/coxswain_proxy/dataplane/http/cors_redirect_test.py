"""A backendRef's RequestRedirect and a rule's CORS filter, through real sockets.

Covers the redirect a backend slot carries (the Gateway API's HTTPRouteBackendRequestRedirect:
ReplaceFullPath and ReplacePrefixMatch answered without asking the backend, per weighted slot,
with the rule's request modifiers before it and both levels' response modifiers on the answer,
even with no ready endpoint), and CORS as the client sees it: the preflight answered 200 here
with every field (Expose-Headers included), a disallowed origin's answers without
Access-Control-* fields, the upstream's Access-Control-* fields replaced by the policy's, Vary
beside the upstream's own, and a credentialed `exposeHeaders: ["*"]` listing the response's
field names. The header values themselves are `coxswain_routing`'s (its cors_test); how the
controller lowers the filters is the controller's tests.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from coxswain_proxy.dataplane import testing as t
from coxswain_proxy.dataplane.http import recording
from coxswain_proxy.dataplane.http.recording import Received, Recorder
from coxswain_routing import (
    Backend,
    Cors,
    Filter,
    PathModifier,
    PathModifierType,
    RequestHeaderModifier,
    RequestRedirect,
    ResponseHeaderModifier,
    Rule,
)

FULL = PathModifier(PathModifierType.REPLACE_FULL_PATH, "/redirected-full")
PREFIX = PathModifier(PathModifierType.REPLACE_PREFIX_MATCH, "/redirected-prefix")


@contextlib.asynccontextmanager
async def plane(
    *rules: Rule, ready: bool = True, respond: recording.Respond = recording.ok
) -> AsyncIterator[tuple[int, Recorder]]:
    """A data plane serving `rules` for example.com in front of a recording backend "rec"."""
    async with recording.backend(respond) as (port, recorder):
        resources: list[t.Resource] = [
            t.HTTP_LISTENER,
            t.endpoints("rec", port, ready=ready),
            t.routes("example.com", *rules),
        ]
        async with t.running(resources) as running:
            yield t.actual(running), recorder
    assert recorder.problems == []


def redirecting(*filters: Filter, weight: int = 1) -> Backend:
    return t.backend("rec", weight=weight, filters=filters)


# ------------------------------------------------------------------ a backendRef's redirect


async def test_a_backend_slot_redirect_replaces_the_full_path_without_asking_the_backend() -> None:
    rule = t.rule("r", redirecting(RequestRedirect(path=FULL)), path="/full")
    async with plane(rule) as (port, rec):
        response = await t.get(port, "/full/original?q=1")
    assert response.status == 302
    assert response.header("location") == f"http://example.com:{t.PORT}/redirected-full?q=1"
    assert rec.requests == []


async def test_a_backend_slot_redirect_replaces_the_matched_prefix() -> None:
    rule = t.rule("r", redirecting(RequestRedirect(path=PREFIX)), path="/prefix")
    async with plane(rule) as (port, rec):
        response = await t.get(port, "/prefix/original")
    assert response.status == 302
    assert response.header("location") == f"http://example.com:{t.PORT}/redirected-prefix/original"
    assert rec.requests == []


async def test_each_weighted_slot_answers_its_own_redirect() -> None:
    one = RequestRedirect(scheme="https", hostname="redirect-example.com", port=443)
    two = RequestRedirect(scheme="http", hostname="redirect-example.com", status_code=301)
    rule = t.rule("r", redirecting(one), redirecting(two))
    async with plane(rule) as (port, rec), t.client(port) as c:
        answers = [await c.request("/x") for _ in range(4)]
    got = sorted((r.status, r.header("location")) for r in answers)
    assert got == [
        (301, "http://redirect-example.com/x"),
        (301, "http://redirect-example.com/x"),
        (302, "https://redirect-example.com/x"),
        (302, "https://redirect-example.com/x"),
    ]
    assert rec.requests == []


async def test_a_redirecting_slot_beside_a_forwarding_one() -> None:
    rule = t.rule("r", redirecting(RequestRedirect(hostname="elsewhere.example")), t.backend("rec"))
    async with plane(rule) as (port, rec), t.client(port) as c:
        statuses = sorted([(await c.request("/y")).status for _ in range(4)])
    assert statuses == [200, 200, 302, 302]
    assert [r.target for r in rec.requests] == [b"/y", b"/y"]


async def test_the_rules_modifiers_compose_with_the_slots_redirect() -> None:
    # Spec 003 "Filters": the rule's filters apply first, then the backendRef's; a Host set
    # ahead of the redirect is the Location's hostname; response modifiers of both levels
    # apply to the redirection.
    rule_filters: tuple[Filter, ...] = (
        RequestHeaderModifier(set=(("Host", "rule.example"),)),
        ResponseHeaderModifier(add=(("X-Rule", "r"),)),
    )
    slot = redirecting(
        ResponseHeaderModifier(set=(("X-Slot", "s"),)),
        RequestRedirect(status_code=308),
    )
    async with plane(t.rule("r", slot, filters=rule_filters)) as (port, rec):
        response = await t.get(port, "/z")
    assert response.status == 308
    assert response.header("location") == f"http://rule.example:{t.PORT}/z"
    assert response.header("x-rule") == "r" and response.header("x-slot") == "s"
    assert rec.requests == []


async def test_a_slot_modifier_ahead_of_its_redirect_sets_the_host() -> None:
    slot = redirecting(
        RequestHeaderModifier(set=(("Host", "slot.example"),)),
        RequestRedirect(scheme="https"),
    )
    async with plane(t.rule("r", slot)) as (port, _):
        response = await t.get(port, "/a")
    assert response.header("location") == "https://slot.example/a"


async def test_a_slot_redirect_needs_no_ready_endpoint() -> None:
    rule = t.rule("r", redirecting(RequestRedirect(path=FULL)))
    async with plane(rule, ready=False) as (port, _):
        response = await t.get(port, "/b")
    assert response.status == 302


# ------------------------------------------------------------------------------ CORS

POLICY = Cors(
    allow_origins=("https://www.foo.com", "https://*.bar.com"),
    allow_methods=("GET", "OPTIONS"),
    allow_headers=("x-header-1", "x-header-2"),
    expose_headers=("x-header-3", "x-header-4"),
    allow_credentials=True,
    max_age_seconds=3600,
)
PREFLIGHT = (
    b"OPTIONS /cors HTTP/1.1\r\nHost: example.com\r\nOrigin: %s\r\n"
    b"Access-Control-Request-Method: GET\r\n"
    b"Access-Control-Request-Headers: x-header-1, x-header-2\r\n\r\n"
)


def with_upstream_cors(request: Received) -> bytes:
    """A backend with a CORS policy of its own, and a Vary."""
    return (
        b"HTTP/1.1 200 OK\r\naccess-control-allow-origin: *\r\n"
        b"Access-Control-Max-Age: 9\r\nvary: accept-encoding\r\nx-app: 1\r\n"
        b"content-length: 2\r\n\r\nok"
    )


def cors_fields(response: t.Response) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for name, value in response.headers:
        if name.lower().startswith("access-control-") or name.lower() == "vary":
            found.setdefault(name.lower(), []).append(value)
    return found


async def test_a_preflight_is_answered_200_with_every_field_and_not_forwarded() -> None:
    rule = t.rule("r", t.backend("rec"), filters=(POLICY,))
    async with plane(rule) as (port, rec), t.client(port) as c:
        c.send(PREFLIGHT % b"https://xpto.www.bar.com")
        response = await c.response()
    assert response.status == 200 and response.body == b""
    assert response.header("content-length") == "0"
    assert cors_fields(response) == {
        "vary": ["Origin"],
        "access-control-allow-origin": ["https://xpto.www.bar.com"],
        "access-control-allow-credentials": ["true"],
        "access-control-allow-methods": ["GET, OPTIONS"],
        "access-control-allow-headers": ["x-header-1, x-header-2"],
        "access-control-expose-headers": ["x-header-3, x-header-4"],
        "access-control-max-age": ["3600"],
    }
    assert rec.requests == []


async def test_a_disallowed_origin_gets_no_cors_fields_on_either_answer() -> None:
    rule = t.rule("r", t.backend("rec"), filters=(POLICY,))
    async with plane(rule, respond=with_upstream_cors) as (port, rec), t.client(port) as c:
        c.send(PREFLIGHT % b"https://foobar.com")
        preflight = await c.response()
        actual = await c.request("/cors", extra="Origin: https://foobar.com\r\n")
    assert preflight.status == 200 and cors_fields(preflight) == {"vary": ["Origin"]}
    assert actual.status == 200
    # The backend's own "*" would let the refused origin through: the policy's answer stands.
    assert cors_fields(actual) == {"vary": ["accept-encoding", "Origin"]}
    assert len(rec.requests) == 1


async def test_an_allowed_origin_gets_the_policys_fields_in_place_of_the_upstreams() -> None:
    rule = t.rule("r", t.backend("rec"), filters=(POLICY,))
    async with plane(rule, respond=with_upstream_cors) as (port, _):
        response = await t.get(port, "/cors", extra="Origin: https://www.foo.com\r\n")
    assert response.status == 200 and response.body == b"ok"
    assert response.header("x-app") == "1"
    assert cors_fields(response) == {
        "vary": ["accept-encoding", "Origin"],
        "access-control-allow-origin": ["https://www.foo.com"],
        "access-control-allow-credentials": ["true"],
        "access-control-expose-headers": ["x-header-3, x-header-4"],
    }


async def test_a_request_without_origin_still_varies_by_origin() -> None:
    rule = t.rule("r", t.backend("rec"), filters=(POLICY,))
    async with plane(rule) as (port, _):
        response = await t.get(port, "/cors")
    assert cors_fields(response) == {"vary": ["Origin"]}


async def test_a_credentialed_expose_star_lists_the_responses_field_names() -> None:
    cors = Cors(allow_origins=("*",), allow_credentials=True, expose_headers=("*",))
    rule = t.rule("r", t.backend("rec"), filters=(cors,))
    async with plane(rule, respond=with_upstream_cors) as (port, _):
        response = await t.get(port, "/", extra="Origin: https://a.example\r\n")
    fields = cors_fields(response)
    assert fields["access-control-allow-origin"] == ["https://a.example"]
    assert fields["access-control-expose-headers"] == ["vary, x-app, content-length"]


async def test_the_rules_cors_fields_are_on_a_slot_redirect() -> None:
    cors = Cors(allow_origins=("https://www.foo.com",))
    rule = t.rule("r", redirecting(RequestRedirect(path=FULL)), filters=(cors,))
    async with plane(rule) as (port, _):
        response = await t.get(port, "/", extra="Origin: https://www.foo.com\r\n")
    assert response.status == 302
    assert response.header("access-control-allow-origin") == "https://www.foo.com"
