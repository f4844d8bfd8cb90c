"""Sources against the emulated API server, through the real `kubernetes` client.

Covers: list then watch into the cache, paged lists, 410 recovery by relisting (server restart),
reconnect after a closed watch, backoff through failing requests, bookmarks, the Secret type
filter, Ingress-only mode entered and left as the Gateway API CRDs come and go, each Gateway API
kind watched at its preferred version (moving when a CRD upgrade changes it),
reconnecting a silent stream, and what a status write to a route means to the cache. Leaves out
the debounce, which is the publisher's.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import kubernetes

from coxswain_controller.kube import api as kube
from coxswain_controller.sources import kinds, supervisor
from coxswain_controller.sources.conftest import (
    FAST,
    bounded,
    names,
    restarts,
    service,
    until,
)
from coxswain_devkit import crds
from coxswain_devkit.apiserver import ApiServer


def core(client: Any) -> Any:
    return kubernetes.client.CoreV1Api(client)


async def test_initial_list_then_watch_updates_reach_the_cache(
    api: ApiServer, client: Any, sources: supervisor.Sources
) -> None:
    api.apply([service("a"), service("b"), service("c")])  # three: more than one list page
    await bounded(sources.cache.synced.wait())
    assert names(sources.cache.snapshot(), "Service") >= {"a", "b", "c"}

    await asyncio.to_thread(core(client).create_namespaced_service, "default", service("d"))
    await asyncio.to_thread(core(client).delete_namespaced_service, "a", "default")
    await until(
        sources, lambda s: {"b", "c", "d"} <= names(s, "Service") and "a" not in names(s, "Service")
    )
    stored = sources.cache.snapshot().of("Service")[("default", "b")]
    assert stored["apiVersion"] == "v1" and stored["kind"] == "Service"  # listed items typed too
    assert stored["spec"]["ports"][0]["port"] == 80  # camelCase JSON as served


async def test_synced_only_after_every_kind_listed(
    api: ApiServer, sources: supervisor.Sources
) -> None:
    await bounded(sources.cache.synced.wait())
    snapshot = sources.cache.snapshot()
    watched = {k.name for k in (kinds.CRD, *kinds.CORE)}
    assert snapshot.served == watched
    assert all(sources.cache.resource_version(name) for name in watched)


async def test_restart_expires_the_watch_and_a_relist_loses_no_update(
    api: ApiServer, client: Any, sources: supervisor.Sources
) -> None:
    await bounded(sources.cache.synced.wait())
    before = restarts("Service", "expired")
    await api.restart()  # same objects, history gone: resuming the watch gets 410
    api.apply([service("made-during-the-gap")])
    await until(sources, lambda s: "made-during-the-gap" in names(s, "Service"))
    await until(sources, lambda _: restarts("Service", "expired") > before)


async def test_a_watch_older_than_the_window_relists(
    api: ApiServer, client: Any, sources: supervisor.Sources
) -> None:
    await bounded(sources.cache.synced.wait())
    before = restarts("ConfigMap", "expired")
    api.faults.pause()  # the ConfigMap watch falls behind while the window moves on
    for i in range(30):
        api.apply([service(f"s{i}")])
    api.faults.close_watches()
    api.faults.resume()
    await until(sources, lambda _: restarts("ConfigMap", "expired") > before)
    await until(sources, lambda s: {f"s{i}" for i in range(30)} <= names(s, "Service"))


async def test_a_closed_watch_reconnects_without_relisting(
    api: ApiServer, client: Any, sources: supervisor.Sources
) -> None:
    await all_watching(api, sources)
    closed, expired = restarts("Service", "closed"), restarts("Service", "expired")
    api.faults.close_watches()
    await until(sources, lambda _: restarts("Service", "closed") > closed)
    await asyncio.to_thread(core(client).create_namespaced_service, "default", service("after"))
    await until(sources, lambda s: "after" in names(s, "Service"))
    assert restarts("Service", "expired") == expired


async def test_a_silent_watch_is_reopened(api: ApiServer, client: Any) -> None:
    # Real time is unavoidable here (a socket read timeout): keep it short.
    settings = dataclasses.replace(FAST, silence_seconds=0.3)
    running = supervisor.Sources(client, settings=settings)
    running.start()
    try:
        await all_watching(api, running)
        before = restarts("Service", "silence")
        api.faults.pause()  # open streams stay open but carry nothing, not even BOOKMARKs
        # Every reflector gave up on its silent stream and is asking for a new one.
        await bounded(api.faults.wait_held(len(running.reflectors)))
        assert restarts("Service", "silence") > before
        api.faults.resume()
        api.apply([service("after-silence")])
        await until(running, lambda s: "after-silence" in names(s, "Service"))
    finally:
        await running.stop()


async def test_failing_requests_back_off_and_recover(api: ApiServer, client: Any) -> None:
    api.faults.fail_next(5)  # the probe fails first: it retries too
    running = supervisor.Sources(client, settings=FAST)
    running.start()
    try:
        await bounded(running.cache.synced.wait())
        before = sum(restarts(k.name, "error") for k in kinds.CORE)
        api.faults.fail_next(20)  # more than one failure for some reflector's reconnect
        api.faults.close_watches()
        await until(running, lambda _: sum(restarts(k.name, "error") for k in kinds.CORE) > before)
        api.apply([service("after-errors")])
        await until(running, lambda s: "after-errors" in names(s, "Service"))
    finally:
        await running.stop()


async def test_bookmarks_advance_the_resource_version(
    api: ApiServer, sources: supervisor.Sources
) -> None:
    await bounded(sources.cache.synced.wait())
    (made,) = api.apply([service("elsewhere", "kube-system")])
    target = int(made["metadata"]["resourceVersion"])
    # No IngressClass changed: only a BOOKMARK can carry its watch past the Service's version.
    await until(sources, lambda _: int(sources.cache.resource_version("IngressClass")) >= target)


async def test_only_tls_secrets_are_cached(api: ApiServer, sources: supervisor.Sources) -> None:
    def secret(name: str, kind: str) -> dict[str, Any]:
        meta = {"name": name, "namespace": "default"}
        return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": kind, "data": {}}

    api.apply([secret("opaque", "Opaque"), secret("cert", kinds.TLS_SECRET_TYPE)])
    await until(sources, lambda s: "cert" in names(s, "Secret"))
    assert names(sources.cache.snapshot(), "Secret") == {"cert"}


async def test_ingress_only_until_the_gateway_api_is_installed_then_back(
    api: ApiServer, client: Any, sources: supervisor.Sources
) -> None:
    await bounded(sources.cache.synced.wait())
    assert not sources.gateway_api_served
    assert not kinds.GATEWAY_NAMES & sources.cache.snapshot().served

    for crd in crds.experimental():
        await asyncio.to_thread(kube.request, client, "POST", kinds.CRD.path, body=crd)
    # Gateway API v1.6's experimental channel serves every kind at v1 and older versions
    # beside it (v1beta1, v1alpha3, v1alpha2): v1 is the preferred version of each. (A probe
    # that ran while the CRDs were arriving may have chosen another; the next one corrects it.)
    await until(sources, lambda s: s.served >= kinds.GATEWAY_NAMES and _versions(sources) == ALL_V1)
    api.apply([_route("r1")])
    await until(sources, lambda s: "r1" in names(s, "HTTPRoute"))

    for crd in crds.experimental():
        path = f"{kinds.CRD.path}/{crd['metadata']['name']}"
        await asyncio.to_thread(kube.request, client, "DELETE", path)
    await until(sources, lambda s: not kinds.GATEWAY_NAMES & s.served)
    assert not sources.gateway_api_served
    assert not sources.cache.snapshot().of("HTTPRoute")
    assert not kinds.GATEWAY_NAMES & sources.reflectors.keys()


ALL_V1 = dict.fromkeys(kinds.GATEWAY_NAMES, "v1")


def _versions(sources: supervisor.Sources) -> dict[str, str]:
    """The version each Gateway API kind is watched at."""
    return {k: r.kind.version for k, r in sources.reflectors.items() if k in kinds.GATEWAY_NAMES}


def _tcproute_crd(versions: list[tuple[str, bool]]) -> dict[str, Any]:
    """The TCPRoute CRD with its versions as (name, served); the first one stores."""
    (crd,) = [c for c in crds.standard() if c["spec"]["names"]["kind"] == "TCPRoute"]
    crd["spec"]["versions"] = [
        {**crd["spec"]["versions"][0], "name": name, "served": served, "storage": i == 0}
        for i, (name, served) in enumerate(versions)
    ]
    return crd


async def test_a_kind_moves_to_the_version_a_crd_upgrade_prefers(
    api: ApiServer, client: Any, sources: supervisor.Sources
) -> None:
    # Gateway API v1.5's experimental channel: TCPRoute at v1alpha2 alone.
    before = _tcproute_crd([("v1alpha2", True)])
    await asyncio.to_thread(kube.request, client, "POST", kinds.CRD.path, body=before)
    route = {
        "apiVersion": f"{kinds.GATEWAY_GROUP}/v1alpha2",
        "kind": "TCPRoute",
        "metadata": {"name": "db", "namespace": "default"},
        "spec": {"parentRefs": [{"name": "gw"}], "rules": [{"backendRefs": [{"name": "db"}]}]},
    }
    api.apply([route])
    await until(sources, lambda s: "db" in names(s, "TCPRoute"))
    assert _versions(sources) == {"TCPRoute": "v1alpha2"}

    # Upgraded in place to v1.6's standard channel: v1 served and stored, v1alpha2 unserved.
    path = f"{kinds.CRD.path}/{before['metadata']['name']}"
    live = await asyncio.to_thread(kube.request, client, "GET", path)
    live["spec"]["versions"] = _tcproute_crd([("v1", True), ("v1alpha2", False)])["spec"][
        "versions"
    ]
    await asyncio.to_thread(kube.request, client, "PUT", path, body=live)
    # The kept object comes back from the new watch's list, at v1.
    v1 = f"{kinds.GATEWAY_GROUP}/v1"
    await until(sources, lambda s: [o["apiVersion"] for o in s.of("TCPRoute").values()] == [v1])
    assert _versions(sources) == {"TCPRoute": "v1"}


async def test_gateway_api_present_at_start_is_watched(api: ApiServer, client: Any) -> None:
    api.apply([*crds.standard(), _route("r1")])
    running = supervisor.Sources(client, settings=FAST)
    running.start()
    try:
        await bounded(running.cache.synced.wait())
        snapshot = running.cache.snapshot()
        assert "r1" in names(snapshot, "HTTPRoute")
        # Gateway API v1.6's standard channel serves the stream routes at v1 alone.
        assert snapshot.served >= kinds.GATEWAY_NAMES
        assert (
            running.reflectors["TCPRoute"].kind.path == f"/apis/{kinds.GATEWAY_GROUP}/v1/tcproutes"
        )
    finally:
        await running.stop()


async def test_route_status_writes_do_not_matter(
    api: ApiServer, client: Any, sources: supervisor.Sources
) -> None:
    await bounded(sources.cache.synced.wait())
    *_, route = api.apply([*crds.standard(), _route("r1")])
    await until(sources, lambda s: "r1" in names(s, "HTTPRoute"))
    # Every other kind has seen the CRDs and the route go by: nothing else is in flight.
    settled = int(route["metadata"]["resourceVersion"])
    await until(sources, lambda s: all(_seen(sources, k, settled) for k in s.served))
    sources.cache.changed.clear()
    before = sources.cache.snapshot().of("HTTPRoute")[("default", "r1")]
    path = "/apis/gateway.networking.k8s.io/v1/namespaces/default/httproutes/r1/status"
    body = {"status": {"parents": [{"controllerName": "coxswain-labs.dev/controller"}]}}
    written = await asyncio.to_thread(
        kube.request, client, "PATCH", path, body=body, content_type=kube.MERGE_PATCH
    )
    version = int(written["metadata"]["resourceVersion"])
    await until(sources, lambda _: int(sources.cache.resource_version("HTTPRoute")) >= version)
    assert not sources.cache.changed.is_set()
    # The write came back, and the cache kept the object it had: no status, one copy.
    kept = sources.cache.snapshot().of("HTTPRoute")[("default", "r1")]
    assert kept is before and "status" not in kept


async def all_watching(api: ApiServer, sources: supervisor.Sources) -> None:
    """Wait until every kind is listed and its watch open: each carried a change past a marker."""
    await bounded(sources.cache.synced.wait())
    (marker,) = api.apply([service("marker", "kube-public")])
    version = int(marker["metadata"]["resourceVersion"])
    await until(sources, lambda s: all(_seen(sources, k, version) for k in s.served))


def _seen(sources: supervisor.Sources, kind: str, version: int) -> bool:
    return int(sources.cache.resource_version(kind) or 0) >= version


def _route(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"parentRefs": [{"name": "gw"}]},
    }


async def test_ingress_class_parameters_are_watched_once_their_crd_is_installed(
    api: ApiServer, client: Any, sources: supervisor.Sources
) -> None:
    await bounded(sources.cache.synced.wait())
    assert "CoxswainIngressClassParameters" not in sources.cache.snapshot().served
    for crd in crds.coxswain():
        await asyncio.to_thread(kube.request, client, "POST", kinds.CRD.path, body=crd)
    await until(sources, lambda s: "CoxswainIngressClassParameters" in s.served)
    assert not sources.gateway_api_served  # our own group does not make the Gateway API served
    parameters = {
        "apiVersion": "coxswain-labs.dev/v1alpha1",
        "kind": "CoxswainIngressClassParameters",
        "metadata": {"name": "shop"},
        "spec": {"accessLog": {"enabled": False}},
    }
    api.apply([parameters])
    await until(sources, lambda s: "shop" in names(s, "CoxswainIngressClassParameters"))
