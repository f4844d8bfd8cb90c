"""The cache's bookkeeping on its own: what matters (and which object is kept when nothing
did), what is kept of a route (no status, its strings shared), when it is synced, what a
snapshot sees, a table fed by several watches (the TLS Secrets and a Secret watched by name), a
held watch holding back changes until its first list (or its release), and `follow`'s events.

Plain events in, verdicts out; the reflectors that produce these events are covered against
the emulated API server in supervisor_test.py.
"""

from __future__ import annotations

import random
from typing import Any

import pytest

from coxswain_controller.sources import backoff, cache, kinds

SERVICE = kinds.CORE[0]
ROUTE = kinds.gateway_kinds({"v1": frozenset({"httproutes"})})[0]


def obj(name: str, rv: str = "1", **fields: Any) -> dict[str, Any]:
    meta = {"name": name, "namespace": "default", "resourceVersion": rv}
    return {"metadata": meta, "spec": {"x": 1}, **fields}


def listed(*events: cache.Event) -> cache.Cache:
    store = cache.Cache()
    for event in events:
        store.handle(event)
    return store


def test_synced_waits_for_every_started_kind() -> None:
    store = listed(cache.Started(SERVICE), cache.Started(ROUTE))
    store.handle(cache.Listed(SERVICE, (), "5"))
    assert not store.synced.is_set()
    store.handle(cache.Listed(ROUTE, (), "6"))
    assert store.synced.is_set()


@pytest.mark.parametrize(
    ("kind", "before", "after", "matters"),
    [
        pytest.param(
            ROUTE, obj("r"), obj("r", "2", status={"a": 1}), False, id="route-status-only"
        ),
        pytest.param(SERVICE, obj("s"), obj("s", "2", status={"a": 1}), True, id="service-status"),
        pytest.param(SERVICE, obj("s"), obj("s", "2"), False, id="resource-version-only"),
        pytest.param(ROUTE, obj("r"), obj("r", "2", spec={"x": 2}), True, id="spec-change"),
    ],
)
def test_what_matters(kind: kinds.Kind, before: Any, after: Any, matters: bool) -> None:
    store = listed(cache.Started(kind), cache.Listed(kind, (before,), "1"))
    key = ("default", after["metadata"]["name"])
    first = store.snapshot().of(kind.name)[key]
    assert store.handle(cache.Changed(kind, "MODIFIED", after, "2")) is matters
    held = store.snapshot().of(kind.name)[key]
    if matters:
        assert held["spec"] == after["spec"] and held["metadata"]["resourceVersion"] == "2"
    else:
        assert held is first  # one object in memory: the one the last pass read


def test_the_strings_of_objects_kept_are_shared() -> None:
    # Each watch event is parsed on its own: equal keys and short values become one string.
    one, two = obj("a"), obj("b")
    two["kind"], one["kind"] = "".join(["HTTP", "Route"]), "".join(["HTTP", "Ro", "ute"])
    store = listed(cache.Started(ROUTE), cache.Listed(ROUTE, (one, two), "1"))
    kept = store.snapshot().of(ROUTE.name)
    a, b = kept[("default", "a")], kept[("default", "b")]
    assert a["kind"] is b["kind"]
    assert next(k for k in a["metadata"] if k == "namespace") is next(
        k for k in b["metadata"] if k == "namespace"
    )


def test_a_route_is_kept_without_the_status_only_this_controller_writes() -> None:
    route = obj("r", status={"parents": [{"conditions": []}]})
    service = obj("s", status={"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}})
    store = listed(
        cache.Started(ROUTE),
        cache.Listed(ROUTE, (route,), "1"),
        cache.Started(SERVICE),
        cache.Listed(SERVICE, (service,), "1"),
    )
    snapshot = store.snapshot()
    assert "status" not in snapshot.of(ROUTE.name)[("default", "r")]
    assert snapshot.of(ROUTE.name)[("default", "r")]["spec"] == route["spec"]
    assert snapshot.of(SERVICE.name)[("default", "s")]["status"] == service["status"]


def test_a_relist_that_changes_nothing_does_not_matter() -> None:
    store = listed(cache.Started(SERVICE), cache.Listed(SERVICE, (obj("a"),), "1"))
    first = store.snapshot().of("Service")[("default", "a")]
    assert not store.handle(cache.Listed(SERVICE, (obj("a", "9"),), "9"))
    assert store.snapshot().of("Service")[("default", "a")] is first  # kept, not copied
    assert store.handle(cache.Listed(SERVICE, (obj("a", "10", spec={"x": 2}),), "10"))
    assert store.snapshot().of("Service")[("default", "a")]["spec"] == {"x": 2}
    assert store.handle(cache.Listed(SERVICE, (), "11"))


def test_a_snapshot_does_not_see_later_events() -> None:
    store = listed(cache.Started(SERVICE), cache.Listed(SERVICE, (obj("a"),), "1"))
    before = store.snapshot()
    store.handle(cache.Changed(SERVICE, "ADDED", obj("b"), "2"))
    store.handle(cache.Changed(SERVICE, "DELETED", obj("a"), "3"))
    assert set(before.of("Service")) == {("default", "a")}
    assert set(store.snapshot().of("Service")) == {("default", "b")}


def test_stopping_a_kind_clears_it() -> None:
    store = listed(cache.Started(ROUTE), cache.Listed(ROUTE, (obj("r"),), "1"))
    assert store.handle(cache.Stopped(ROUTE))
    assert "HTTPRoute" not in store.snapshot().served
    assert not store.snapshot().of("HTTPRoute")


def test_backoff_grows_to_its_ceiling_with_jitter_and_resets() -> None:
    delays = backoff.Backoff(backoff.Policy(initial=1.0, ceiling=8.0), rng=random.Random(7))
    waits = [delays.next() for _ in range(6)]
    assert 0.5 <= waits[0] <= 1.0
    assert all(4.0 <= w <= 8.0 for w in waits[3:])
    delays.reset()
    assert delays.next() <= 1.0


def test_reference_grant_prefers_v1_and_stream_routes_reached_v1() -> None:
    served = {"v1beta1": frozenset({"referencegrants"}), "v1": frozenset({"referencegrants"})}
    (grant,) = kinds.gateway_kinds(served)
    assert grant.version == "v1"
    # TLSRoute reached v1 in Gateway API v1.5's standard channel, TCPRoute and UDPRoute in v1.6's.
    routes = kinds.gateway_kinds({"v1": frozenset({"tcproutes", "udproutes", "tlsroutes"})})
    assert {k.name: k.version for k in routes} == dict.fromkeys(
        ("TLSRoute", "TCPRoute", "UDPRoute"), "v1"
    )


def test_a_kind_keeps_its_view_until_one_of_its_objects_changes() -> None:
    # Translation's memo relies on this: the same table object means nothing of that kind changed.
    store = listed(
        cache.Started(SERVICE), cache.Listed(SERVICE, (obj("a"),), "1"),
        cache.Started(ROUTE), cache.Listed(ROUTE, (obj("r"),), "1"),
    )  # fmt: skip
    first = store.snapshot()
    store.handle(cache.Changed(ROUTE, "MODIFIED", obj("r", rv="2", spec={"x": 2}), "2"))
    second = store.snapshot()
    assert second.of("Service") is first.of("Service")
    assert second.of("HTTPRoute") is not first.of("HTTPRoute")
    assert store.snapshot().of("HTTPRoute") is second.of("HTTPRoute")


TLS = kinds.CORE[1]
NAMED = kinds.referenced_secret("default", "htpasswd")


def secret(name: str, rv: str = "1", kind: str = "Opaque") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "resourceVersion": rv},
            "type": kind, "data": {"auth": rv}}  # fmt: skip


def test_a_secret_watched_by_name_shares_the_secret_table_with_the_tls_watch() -> None:
    store = listed(
        cache.Started(TLS), cache.Listed(TLS, (secret("cert", kind="kubernetes.io/tls"),), "1"),
        cache.Started(NAMED), cache.Listed(NAMED, (secret("htpasswd"),), "2"),
    )  # fmt: skip
    assert set(store.snapshot().of("Secret")) == {("default", "cert"), ("default", "htpasswd")}
    # A relist of the TLS Secrets replaces only what that watch delivered.
    assert store.handle(cache.Listed(TLS, (), "3"))
    assert set(store.snapshot().of("Secret")) == {("default", "htpasswd")}
    assert not store.handle(cache.Listed(NAMED, (secret("htpasswd"),), "4"))
    assert store.handle(cache.Listed(NAMED, (secret("htpasswd", "5"),), "5"))  # data changed
    # Stopping the named watch takes its Secret out; the table stays, the TLS watch's.
    assert store.handle(cache.Stopped(NAMED))
    assert not store.snapshot().of("Secret")
    assert "Secret" in store.snapshot().served


def test_a_deleted_named_secret_leaves_and_a_straggler_of_a_stopped_watch_is_ignored() -> None:
    store = listed(cache.Started(TLS), cache.Listed(TLS, (), "1"), cache.Started(NAMED),
                   cache.Listed(NAMED, (secret("htpasswd"),), "2"))  # fmt: skip
    assert store.handle(cache.Changed(NAMED, "DELETED", secret("htpasswd"), "3"))
    assert not store.handle(cache.Changed(TLS, "DELETED", secret("htpasswd"), "4"))  # not its
    store.handle(cache.Stopped(NAMED))
    assert not store.handle(cache.Changed(NAMED, "ADDED", secret("htpasswd", "5"), "5"))
    assert not store.snapshot().of("Secret")


def test_a_held_watch_holds_changes_until_its_first_list() -> None:
    store = listed(cache.Started(SERVICE), cache.Listed(SERVICE, (), "1"))
    store.changed.clear()
    store.handle(cache.Started(NAMED, hold=True))
    assert store.handle(cache.Changed(SERVICE, "ADDED", obj("a"), "2"))  # it mattered...
    assert not store.changed.is_set()  # ...but the pass waits for the Secret
    store.handle(cache.Listed(NAMED, (secret("htpasswd"),), "3"))
    assert store.changed.is_set()


def test_a_late_first_list_is_released_for_changes_and_for_synced() -> None:
    store = listed(cache.Started(SERVICE), cache.Started(NAMED, hold=True))
    store.handle(cache.Listed(SERVICE, (obj("a"),), "1"))
    assert not store.changed.is_set() and not store.synced.is_set()
    store.handle(cache.Released(NAMED))
    assert store.changed.is_set() and store.synced.is_set()
    store.handle(cache.Listed(NAMED, (secret("htpasswd"),), "2"))  # it still lands after
    assert ("default", "htpasswd") in store.snapshot().of("Secret")


def test_follow_answers_in_the_same_step() -> None:
    # The events `follow` answers with are applied before `changed` and `synced` are decided.
    def follow(event: cache.Event, tables: Any) -> list[cache.Event]:
        if isinstance(event, cache.Listed) and event.kind == SERVICE:
            assert ("default", "a") in tables("Service")  # it sees the event applied
            return [cache.Started(NAMED, hold=True)]
        return []

    store = cache.Cache(follow=follow)
    store.handle(cache.Started(SERVICE))
    store.handle(cache.Listed(SERVICE, (obj("a"),), "1"))
    assert not store.synced.is_set() and not store.changed.is_set()
    store.handle(cache.Listed(NAMED, (), "2"))
    assert store.synced.is_set() and store.changed.is_set()
