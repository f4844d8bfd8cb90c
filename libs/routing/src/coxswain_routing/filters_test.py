"""Filter semantics: header folding across filters, path rewrites, redirect Locations.

Covers `fold_header_modifiers` / `apply_header_plan`, `rewrite_path` (ReplaceFullPath and
ReplacePrefixMatch on segment boundaries) and `redirect_location` (scheme, hostname, port and
path composition with well-known-port omission and the listener's port). Leaves out which
filter combinations the controller refuses (a translation concern) and CORS (cors_test.py).
"""

from __future__ import annotations

import pytest

from coxswain_routing import (
    HeaderModifier,
    HeaderOp,
    PathModifier,
    PathModifierType,
    RequestHeaderModifier,
    RequestRedirect,
    RequestTarget,
    apply_header_plan,
    fold_header_modifiers,
    redirect_location,
    rewrite_path,
)


def mod(
    set_: dict[str, str] | None = None,
    add: dict[str, str] | None = None,
    remove: tuple[str, ...] = (),
) -> HeaderModifier:
    return RequestHeaderModifier(
        set=tuple((set_ or {}).items()), add=tuple((add or {}).items()), remove=remove
    )


@pytest.mark.parametrize(
    ("modifiers", "expected"),
    [
        pytest.param(
            [mod(set_={"X-A": "1"}), mod(add={"x-a": "2"})],
            (HeaderOp.SET, "1,2"),
            id="set-then-add-sets-joined",
        ),
        pytest.param(
            [mod(remove=("x-a",)), mod(add={"X-A": "2"})],
            (HeaderOp.SET, "2"),
            id="add-after-remove-is-a-set",
        ),
        pytest.param(
            [mod(set_={"x-a": "1"}), mod(remove=("X-A",))],
            (HeaderOp.REMOVE, ""),
            id="remove-after-set-removes",
        ),
        pytest.param(
            [mod(add={"x-a": "1"}), mod(add={"x-a": "2"})],
            (HeaderOp.ADD, "1,2"),
            id="add-then-add-adds-both",
        ),
        pytest.param(
            [mod(add={"x-a": "1"}), mod(set_={"x-a": "2"})],
            (HeaderOp.SET, "2"),
            id="set-after-add-sets",
        ),
    ],
)
def test_modifications_fold_into_one_operation_per_header(
    modifiers: list[HeaderModifier], expected: tuple[HeaderOp, str]
) -> None:
    # Spec 003: "Across filters, modifications fold into one operation per header in the order
    # they apply, the rule's filters before a backendRef's".
    op, _, value = fold_header_modifiers(modifiers)["x-a"]
    assert (op, value) == expected


def test_header_names_are_case_insensitive_in_a_plan() -> None:
    plan = fold_header_modifiers([mod(set_={"X-Trace": "on"}, remove=("Accept",))])
    headers = [("x-trace", "off"), ("accept", "*/*"), ("ACCEPT", "text/html"), ("keep", "1")]
    assert apply_header_plan(plan, headers) == [("keep", "1"), ("X-Trace", "on")]


def test_add_keeps_existing_values() -> None:
    plan = fold_header_modifiers([mod(add={"Via": "coxswain"})])
    assert apply_header_plan(plan, [("via", "1.1 edge")]) == [
        ("via", "1.1 edge"),
        ("Via", "coxswain"),
    ]


def test_a_header_named_twice_in_one_modifier_is_a_problem() -> None:
    # Spec 003: "Within one header modifier a header may be named once, across set, add and
    # remove and whatever its case".
    problems = mod(set_={"Authorization": "x"}, remove=("authorization",)).validate("filters[0]")
    assert [p.field for p in problems] == ["filters[0]"]
    assert "Authorization" in problems[0].message or "authorization" in problems[0].message


PREFIX = PathModifier(PathModifierType.REPLACE_PREFIX_MATCH, "/v2")


@pytest.mark.parametrize(
    ("path", "prefix", "replacement", "rewritten"),
    [
        pytest.param("/api", "/api", "/v2", "/v2", id="prefix-itself"),
        pytest.param("/api/", "/api", "/v2", "/v2/", id="prefix-with-trailing-slash"),
        pytest.param("/api/orders", "/api", "/v2", "/v2/orders", id="prefix-with-child"),
        pytest.param(
            "/api/orders", "/api/", "/v2", "/v2/orders", id="declared-prefix-trailing-slash"
        ),
        pytest.param("/api/orders", "/api", "/v2/", "/v2/orders", id="replacement-trailing-slash"),
        pytest.param("/api", "/api", "", "/", id="empty-replacement-of-whole-path-is-root"),
        pytest.param("/api/orders", "/api", "", "/orders", id="empty-replacement-strips-prefix"),
        pytest.param("/api/orders", "/api", "/", "/orders", id="root-replacement-strips-prefix"),
        pytest.param("/orders", "/", "/v2", "/v2/orders", id="root-prefix-prepends"),
    ],
)
def test_replace_prefix_match_on_segment_boundaries(
    path: str, prefix: str, replacement: str, rewritten: str
) -> None:
    # Spec 003: "/api becomes /v2, /api/ becomes /v2/ and /api/orders becomes /v2/orders; an
    # empty replacement is /."
    modifier = PathModifier(PathModifierType.REPLACE_PREFIX_MATCH, replacement)
    assert rewrite_path(path, modifier, prefix) == rewritten


def test_replace_full_path() -> None:
    assert (
        rewrite_path("/a/b", PathModifier(PathModifierType.REPLACE_FULL_PATH, "/new"), "/a")
        == "/new"
    )


REQUEST = RequestTarget(scheme="http", host="example.com", path="/a", query="x=1")


@pytest.mark.parametrize(
    ("redirect", "listener_port", "location"),
    [
        pytest.param(
            RequestRedirect(),
            80,
            "http://example.com/a?x=1",
            id="nothing-replaced-well-known-listener-port-omitted",
        ),
        pytest.param(
            RequestRedirect(),
            8080,
            "http://example.com:8080/a?x=1",
            id="listener-port-when-neither-scheme-nor-port",
        ),
        pytest.param(
            RequestRedirect(scheme="https"),
            8080,
            "https://example.com/a?x=1",
            id="explicit-scheme-goes-to-its-well-known-port",
        ),
        pytest.param(
            RequestRedirect(scheme="https", port=8443),
            80,
            "https://example.com:8443/a?x=1",
            id="explicit-scheme-and-port",
        ),
        pytest.param(
            RequestRedirect(port=443, scheme="https"),
            80,
            "https://example.com/a?x=1",
            id="well-known-port-for-scheme-omitted",
        ),
        pytest.param(
            RequestRedirect(port=80),
            8080,
            "http://example.com/a?x=1",
            id="explicit-well-known-port-omitted",
        ),
        pytest.param(
            RequestRedirect(hostname="new.example"),
            80,
            "http://new.example/a?x=1",
            id="hostname-replaced",
        ),
        pytest.param(
            RequestRedirect(path=PathModifier(PathModifierType.REPLACE_FULL_PATH, "/b")),
            80,
            "http://example.com/b?x=1",
            id="path-replaced-query-kept",
        ),
    ],
)
def test_redirect_location(redirect: RequestRedirect, listener_port: int, location: str) -> None:
    # Spec 003: "An explicit scheme with no port sends the client to the scheme's well-known
    # port; neither scheme nor port sends it back to the Gateway listener's port, whatever port
    # the request's Host header carried; and a port that is the well-known one for the scheme
    # is omitted."
    assert redirect_location(redirect, REQUEST, listener_port=listener_port) == location


def test_redirect_prefix_rewrite_uses_the_matched_prefix() -> None:
    redirect = RequestRedirect(path=PathModifier(PathModifierType.REPLACE_PREFIX_MATCH, "/new"))
    target = RequestTarget("https", "example.com", "/old/page", "")
    assert (
        redirect_location(redirect, target, listener_port=443, matched_prefix="/old")
        == "https://example.com/new/page"
    )


def test_redirect_brackets_an_ipv6_host() -> None:
    target = RequestTarget("http", "::1", "/", "")
    assert redirect_location(RequestRedirect(), target, listener_port=8080) == "http://[::1]:8080/"


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_redirect_statuses_the_api_allows_are_valid(status: int) -> None:
    assert RequestRedirect(status_code=status).validate("f") == []


def test_other_redirect_statuses_are_problems() -> None:
    assert [p.field for p in RequestRedirect(status_code=200).validate("filters[1]")] == [
        "filters[1].statusCode"
    ]
