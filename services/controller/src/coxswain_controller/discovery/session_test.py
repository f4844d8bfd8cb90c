"""A stream's bookkeeping without a network: full first, deltas, one in flight, Nack rules.

Covers `StreamSession.next_snapshot`, `on_ack`, `on_nack`. The same rules over real gRPC are in
server_test.py.
"""

from __future__ import annotations

import itertools

from coxswain_controller.discovery.registry import Published, SnapshotRegistry
from coxswain_controller.discovery.session import StreamSession
from coxswain_controller.translate.scopes import SHARED_POOL
from coxswain_proto import discovery as pb
from coxswain_routing import Endpoint, EndpointSet


def publish(registry: SnapshotRegistry, *services: str) -> Published:
    registry.publish(
        {SHARED_POOL: [EndpointSet("ns", s, 80, (Endpoint("10.0.0.1", 80),)) for s in services]}
    )
    published = registry.current(SHARED_POOL)
    assert published is not None
    return published


def session() -> StreamSession:
    counter = itertools.count()
    return StreamSession(nonce=lambda: f"n{next(counter)}")


def ack(snapshot: pb.Snapshot) -> pb.Ack:
    return pb.Ack(version=snapshot.version, nonce=snapshot.nonce)


def test_nothing_to_send_before_anything_is_published() -> None:
    assert session().next_snapshot(None) is None


def test_one_snapshot_in_flight_until_its_ack() -> None:
    registry, s = SnapshotRegistry(), session()
    first = s.next_snapshot(publish(registry, "a"))
    assert first is not None and first.full
    assert s.next_snapshot(publish(registry, "a", "b")) is None
    assert s.on_ack(ack(first))
    delta = s.next_snapshot(registry.current(SHARED_POOL))
    assert delta is not None and not delta.full
    assert [r.key for r in delta.resources] == ["endpoints/ns/b/80"]


def test_nothing_sent_when_the_proxy_already_holds_the_version() -> None:
    registry, s = SnapshotRegistry(), session()
    published = publish(registry, "a")
    first = s.next_snapshot(published)
    assert first is not None and s.on_ack(ack(first))
    assert s.next_snapshot(published) is None


def test_an_ack_must_echo_the_nonce_and_version_in_flight() -> None:
    registry, s = SnapshotRegistry(), session()
    first = s.next_snapshot(publish(registry, "a"))
    assert first is not None
    assert not s.on_ack(pb.Ack(version=first.version, nonce="other"))
    assert not s.on_ack(pb.Ack(version="other", nonce=first.nonce))
    assert s.in_flight is not None


def test_a_nacked_delta_is_followed_at_once_by_a_full() -> None:
    registry, s = SnapshotRegistry(), session()
    first = s.next_snapshot(publish(registry, "a"))
    assert first is not None and s.on_ack(ack(first))
    delta = s.next_snapshot(publish(registry, "a", "b"))
    assert delta is not None and s.on_nack(pb.Nack(version=delta.version, nonce=delta.nonce))
    full = s.next_snapshot(registry.current(SHARED_POOL))
    assert full is not None and full.full and full.version == delta.version


def test_a_nacked_full_waits_for_the_content_to_change() -> None:
    registry, s = SnapshotRegistry(), session()
    published = publish(registry, "a")
    first = s.next_snapshot(published)
    assert first is not None and s.on_nack(pb.Nack(version=first.version, nonce=first.nonce))
    assert s.next_snapshot(published) is None
    again = s.next_snapshot(publish(registry, "b"))
    assert again is not None and again.full


def test_publishing_identical_content_does_not_bump_the_sequence() -> None:
    registry = SnapshotRegistry()
    publish(registry, "a")
    seq = registry.seq
    publish(registry, "a")
    assert registry.seq == seq
    publish(registry, "b")
    assert registry.seq == seq + 1
