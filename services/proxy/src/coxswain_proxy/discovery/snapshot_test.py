"""Staging snapshots into routing states, pure: no network, no event loop.

Covers: a full snapshot applied, a delta reaching the version of the same content sent full,
unchanged resources reused as held, and each refusal by its named error (delta without base,
version mismatch, undecodable body, key not matching the body, a rule failing validation,
duplicate keys, `removed` on a full snapshot), with the held state untouched by any of them; a
hand-made snapshot (wire messages built directly, no controller, no model) holding a value that
would break an HTTP head refused naming the resource and the field, and refused still when the
routing model's own checks are switched off (the data plane's check stands alone). Leaves out
sending Ack/Nack and the swap (client_test.py).
"""

from __future__ import annotations

import hashlib
from typing import cast

import pytest

from coxswain_proto import discovery as pb
from coxswain_proxy.discovery import failures
from coxswain_proxy.discovery.snapshot import RoutingState, stage
from coxswain_proxy.testkit import answers, delta, full, routes
from coxswain_routing import (
    Backend,
    HostRoutes,
    Match,
    PathMatch,
    PathType,
    Resource,
    Retry,
    RouteId,
    Rule,
    snapshot_version,
    to_wire,
)

A, B, C = routes("a.example.com", "a"), routes("b.example.com", "b"), routes("c.example.com", "c")


def held() -> RoutingState:
    return stage(None, full([A, B], seq=3))


def test_a_full_snapshot_becomes_a_state_with_its_version_and_routing() -> None:
    snapshot = full([A, B], seq=3)
    state = stage(None, snapshot)
    assert state.version == snapshot.version
    assert state.publish_seq == 3
    assert set(state.resources) == {A.key, B.key}
    assert answers(state, "a.example.com")
    assert not answers(state, "c.example.com")


def test_a_delta_reaches_the_version_of_the_same_content_sent_full() -> None:
    before = held()
    after = stage(before, delta([A, C], changed=[C], removed=[B.key], seq=4))
    assert after.version == stage(None, full([A, C])).version
    assert set(after.resources) == {A.key, C.key}
    assert after.publish_seq == 4
    assert answers(after, "c.example.com")
    assert not answers(after, "b.example.com")


def test_a_delta_reuses_the_resources_it_does_not_carry() -> None:
    before = held()
    after = stage(before, delta([A, B, C], changed=[C]))
    assert after.resources[A.key] is before.resources[A.key]


def test_a_full_snapshot_replaces_everything_held() -> None:
    after = stage(held(), full([C]))
    assert set(after.resources) == {C.key}


def test_staging_never_changes_the_held_state() -> None:
    before = held()
    keys, version = set(before.resources), before.version
    stage(before, delta([A, C], changed=[C], removed=[B.key]))
    with pytest.raises(failures.VersionMismatch):
        stage(before, delta([A], changed=[C]))
    assert (set(before.resources), before.version) == (keys, version)
    assert answers(before, "b.example.com")


def test_a_delta_carrying_a_route_that_cannot_be_built_is_refused_whole() -> None:
    before = held()
    match = Match(PathMatch(PathType.REGULAR_EXPRESSION, "/(unclosed"))
    rule = Rule(RouteId(1, "default", "a"), matches=(match,), backends=(Backend(),))
    broken = HostRoutes(A.table, A.bind_port, A.host, (rule,))
    with pytest.raises(failures.InvalidResource, match="regular expression"):
        stage(before, delta([broken, B, C], changed=[C, broken]))
    assert answers(before, "a.example.com") and not answers(before, "c.example.com")


def test_a_states_resources_cannot_be_modified() -> None:
    with pytest.raises(TypeError):
        # What a caller ignoring the type would do: the view refuses it all the same.
        cast(dict[str, Resource], held().resources)[C.key] = C


def bodyless() -> pb.Snapshot:
    snapshot = full([A])
    snapshot.resources.append(pb.Resource(key="routes/unknown"))
    return snapshot


def mislabelled() -> pb.Snapshot:
    snapshot = full([A])
    snapshot.resources[0].key = "routes/gateway/default/gw/8080/other.example.com"
    return snapshot


def invalid_rule() -> pb.Snapshot:
    rule = Rule(RouteId(1, "default", "x"), backends=(Backend(),), retry=Retry(attempts=99))
    return full([HostRoutes("ingress", 80, "x.example.com", (rule,))])


def bad_regex() -> pb.Snapshot:
    match = Match(PathMatch(PathType.REGULAR_EXPRESSION, "/(unclosed"))
    rule = Rule(RouteId(1, "default", "x"), matches=(match,), backends=(Backend(),))
    return full([HostRoutes("ingress", 80, "x.example.com", (rule,))])


def duplicated() -> pb.Snapshot:
    snapshot = full([A])
    snapshot.resources.append(to_wire(A))
    return snapshot


def full_with_removed() -> pb.Snapshot:
    snapshot = full([A])
    snapshot.removed = [B.key]
    return snapshot


@pytest.mark.parametrize(
    ("snapshot", "error", "detail"),
    [
        pytest.param(bodyless(), failures.UndecodableResource, "routes/unknown", id="unknown-body"),
        pytest.param(mislabelled(), failures.UndecodableResource, "does not match", id="key-body"),
        pytest.param(invalid_rule(), failures.InvalidResource, "retry.attempts", id="validation"),
        pytest.param(bad_regex(), failures.InvalidResource, "regular expression", id="bad-regex"),
        pytest.param(duplicated(), failures.MalformedSnapshot, "appears twice", id="duplicate-key"),
        pytest.param(full_with_removed(), failures.MalformedSnapshot, "removed", id="full-removed"),
        pytest.param(
            delta([A, B], changed=[B], nonce="x"),
            failures.DeltaWithoutBase,
            "delta",
            id="delta-without-base",
        ),
        pytest.param(
            full([A], nonce="x").__class__(version="v", full=True),
            failures.VersionMismatch,
            "hash to",
            id="version-mismatch",
        ),
    ],
)
def test_refusals_are_named(
    snapshot: pb.Snapshot, error: type[failures.SnapshotRejected], detail: str
) -> None:
    with pytest.raises(error, match=detail):
        stage(None, snapshot)


def test_every_refusal_is_a_snapshot_rejection() -> None:
    for error in (
        failures.UndecodableResource,
        failures.InvalidResource,
        failures.MalformedSnapshot,
        failures.DeltaWithoutBase,
        failures.VersionMismatch,
    ):
        assert issubclass(error, failures.SnapshotRejected)


# ------------------------------------------------------------- hand-made unsafe snapshots

HAND_MADE_KEY = "routes/ingress/80/x.example.com"


def hand_made(modifier: pb.HeaderModifier) -> pb.Snapshot:
    """A full snapshot built message by message, as no controller would: one route whose rule
    sets request headers with `modifier`, and a version that is right for its bytes."""
    rule = pb.Rule(
        id=pb.RouteId(kind="HTTPRoute", namespace="team", name="web"),
        filters=[pb.Filter(request_header_modifier=modifier)],
        backends=[pb.Backend(weight=1, endpoints="endpoints/team/web/80")],
    )
    routes = pb.HostRoutes(table="ingress", bind_port=80, host="x.example.com", rules=[rule])
    resource = pb.Resource(key=HAND_MADE_KEY, host_routes=routes)
    version = snapshot_version({HAND_MADE_KEY: hashlib.sha256(bytes(resource)).hexdigest()})
    return pb.Snapshot(version=version, nonce="hand", full=True, resources=[resource])


INJECTED = pb.HeaderModifier(set=[pb.Header(name="x-env", value="a\r\nX-Injected: yes")])


def test_a_hand_made_snapshot_with_an_unsafe_value_is_refused_naming_it() -> None:
    before = held()
    with pytest.raises(failures.InvalidResource) as refused:
        stage(before, hand_made(INJECTED))
    detail = str(refused.value)
    assert f"resource {HAND_MADE_KEY!r}" in detail and "HTTPRoute team/web rule 0" in detail
    assert "filters[0].set[0].value" in detail and "RFC 9110 §5.5" in detail
    assert answers(before, "a.example.com")


@pytest.mark.parametrize(
    ("modifier", "detail"),
    [
        pytest.param(INJECTED, "control character", id="crlf-in-a-value"),
        pytest.param(
            pb.HeaderModifier(set=[pb.Header(name="x env", value="1")]),
            "not a token",
            id="name-not-a-token",
        ),
        pytest.param(
            pb.HeaderModifier(remove=["content-length"]), "frames", id="framing-field-removed"
        ),
    ],
)
def test_the_data_planes_check_refuses_what_the_models_let_through(
    monkeypatch: pytest.MonkeyPatch, modifier: pb.HeaderModifier, detail: str
) -> None:
    # A bug in coxswain_routing, simulated: neither from_wire nor validate() finds anything.
    monkeypatch.setattr(Rule, "value_problems", lambda self: [])
    monkeypatch.setattr(Rule, "validate", lambda self: [])
    with pytest.raises(failures.InvalidResource, match=detail) as refused:
        stage(held(), hand_made(modifier))
    assert f"resource {HAND_MADE_KEY!r}, HTTPRoute team/web rule 0" in str(refused.value)
