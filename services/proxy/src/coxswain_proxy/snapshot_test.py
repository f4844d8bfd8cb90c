"""Staging snapshots into routing states, pure: no network, no event loop.

Covers: a full snapshot applied, a delta reaching the version of the same content sent full,
unchanged resources reused as held, and each refusal by its named error (delta without base,
version mismatch, undecodable body, key not matching the body, a rule failing validation,
duplicate keys, `removed` on a full snapshot), with the held state untouched by any of them.
Leaves out sending Ack/Nack and the swap (client_test.py).
"""

from __future__ import annotations

import pytest

from coxswain_proto import discovery as pb
from coxswain_proxy import errors
from coxswain_proxy.snapshot import RoutingState, stage
from coxswain_proxy.testkit import answers, delta, full, routes
from coxswain_routing import (
    Backend,
    HostRoutes,
    Match,
    PathMatch,
    PathType,
    Retry,
    RouteId,
    Rule,
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
    with pytest.raises(errors.VersionMismatch):
        stage(before, delta([A], changed=[C]))
    assert (set(before.resources), before.version) == (keys, version)
    assert answers(before, "b.example.com")


def test_a_delta_carrying_a_route_that_cannot_be_built_is_refused_whole() -> None:
    before = held()
    match = Match(PathMatch(PathType.REGULAR_EXPRESSION, "/(unclosed"))
    rule = Rule(RouteId(1, "default", "a"), matches=(match,), backends=(Backend(),))
    broken = HostRoutes(A.table, A.bind_port, A.host, (rule,))
    with pytest.raises(errors.InvalidResource, match="regular expression"):
        stage(before, delta([broken, B, C], changed=[C, broken]))
    assert answers(before, "a.example.com") and not answers(before, "c.example.com")


def test_a_states_resources_cannot_be_modified() -> None:
    with pytest.raises(TypeError):
        held().resources[C.key] = C  # type: ignore[index]


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
        pytest.param(bodyless(), errors.UndecodableResource, "routes/unknown", id="unknown-body"),
        pytest.param(mislabelled(), errors.UndecodableResource, "does not match", id="key-body"),
        pytest.param(invalid_rule(), errors.InvalidResource, "retry.attempts", id="validation"),
        pytest.param(bad_regex(), errors.InvalidResource, "regular expression", id="bad-regex"),
        pytest.param(duplicated(), errors.MalformedSnapshot, "appears twice", id="duplicate-key"),
        pytest.param(full_with_removed(), errors.MalformedSnapshot, "removed", id="full-removed"),
        pytest.param(
            delta([A, B], changed=[B], nonce="x"),
            errors.DeltaWithoutBase,
            "delta",
            id="delta-without-base",
        ),
        pytest.param(
            full([A], nonce="x").__class__(version="v", full=True),
            errors.VersionMismatch,
            "hash to",
            id="version-mismatch",
        ),
    ],
)
def test_refusals_are_named(
    snapshot: pb.Snapshot, error: type[errors.SnapshotRejected], detail: str
) -> None:
    with pytest.raises(error, match=detail):
        stage(None, snapshot)


def test_every_refusal_is_a_snapshot_rejection() -> None:
    for error in (
        errors.UndecodableResource,
        errors.InvalidResource,
        errors.MalformedSnapshot,
        errors.DeltaWithoutBase,
        errors.VersionMismatch,
    ):
        assert issubclass(error, errors.SnapshotRejected)
