"""The provisioner against the devkit API emulator, through the real `kubernetes` client.

Each test translates what the emulator holds (as the publisher does with the cache), hands the
result's `provision` to the provisioner and reads back what the API server then holds: a shared
Gateway gets its VIP Service (its ports to the bind ports, the shared proxies' selector) and its
inert ServiceAccount, owner-referenced to it; a second pass with nothing changed makes no request;
a write racing another change (409) reads again and keeps the other change; switching to
dedicated mode and back creates the new objects before deleting the old; deleting the Gateway
garbage-collects everything; a failed write and someone else's object of the same name are
Warning Events on the Gateway; the shared proxies' endpoints are mirrored next to the VIP
Service and follow when they change. Leaves out what is rendered (the translate goldens) and how
desired and live compare (plan_test).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from coxswain_controller.kube import api as kube
from coxswain_controller.provisioner.provisioner import Actual, Provisioner, Report
from coxswain_controller.status.events import EventRecorder
from coxswain_controller.translate import Inputs, Options, translate
from coxswain_controller.translate.provision.model import ObjectKey
from coxswain_devkit import crds
from coxswain_devkit.apiserver import ThreadedApiServer

GROUP, VERSION = "gateway.networking.k8s.io", "v1"
CONTROLLER = "coxswain-labs.dev/gateway-controller"
OPTIONS = Options(vip_service_type="LoadBalancer")
WAIT = 15.0

MANIFESTS: list[dict[str, Any]] = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}},
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "coxswain-system"}},
    {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "coxswain-discovery-trust", "namespace": "coxswain-system"},
        "data": {"ca.crt": "-----BEGIN CERTIFICATE-----\n...\n"},
    },
    {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "GatewayClass",
        "metadata": {"name": "coxswain"},
        "spec": {"controllerName": CONTROLLER},
    },
    {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "shop"},
        "spec": {
            "gatewayClassName": "coxswain",
            "infrastructure": {"annotations": {"example.com/lb": "internal"}},
            "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
        },
    },
    {
        "apiVersion": "coxswain-labs.dev/v1alpha1",
        "kind": "CoxswainGatewayParameters",
        "metadata": {"name": "own", "namespace": "shop"},
        "spec": {"replicas": 2},
    },
]
VIP = ObjectKey("Service", "shop", "gw-coxswain")
SHARED_SA = ObjectKey("ServiceAccount", "shop", "gw-coxswain-infra")
DEDICATED = {
    ObjectKey("ServiceAccount", "shop", "gw-coxswain"),
    ObjectKey("ConfigMap", "shop", "gw-coxswain-trust"),
    ObjectKey("Deployment", "shop", "gw-coxswain"),
}
# kind -> the cluster-wide collection it is listed from
COLLECTIONS = {
    "GatewayClass": f"/apis/{GROUP}/{VERSION}/gatewayclasses",
    "Gateway": f"/apis/{GROUP}/{VERSION}/gateways",
    "CoxswainGatewayParameters": "/apis/coxswain-labs.dev/v1alpha1/coxswaingatewayparameters",
    "Service": "/api/v1/services",
    "ConfigMap": "/api/v1/configmaps",
    "ServiceAccount": "/api/v1/serviceaccounts",
    "Deployment": "/apis/apps/v1/deployments",
    "EndpointSlice": "/apis/discovery.k8s.io/v1/endpointslices",
}


@pytest.fixture
def api() -> Iterator[ThreadedApiServer]:
    with ThreadedApiServer() as server:
        server.call(lambda s: s.apply(crds.standard() + crds.coxswain()))
        server.call(lambda s: s.apply(MANIFESTS))
        yield server


def _listed(client: Any) -> dict[str, dict[tuple[str, str], dict[str, Any]]]:
    tables: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
    for kind, path in COLLECTIONS.items():
        items = kube.request(client, "GET", path).get("items") or []
        tables[kind] = {
            (i["metadata"].get("namespace", ""), i["metadata"]["name"]): {**i, "kind": kind}
            for i in items
        }
    return tables


class Cluster:
    """Stands in for the sources: the objects as last listed, and a pass over them."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.tables: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}

    def actual(self) -> Actual:
        return self.tables

    async def relist(self) -> None:
        self.tables = await asyncio.to_thread(_listed, self.client)

    async def provision(self, provisioner: Provisioner, options: Options = OPTIONS) -> Report:
        """Translate what the API server holds, then reconcile it."""
        await self.relist()
        result = translate(Inputs(self.tables), options)
        return await provisioner.reconcile(result.provision)

    async def get(self, key: ObjectKey) -> dict[str, Any] | None:
        return self.tables.get(key.kind, {}).get((key.namespace, key.name))

    async def patch_gateway(self, body: dict[str, Any]) -> None:
        path = f"/apis/{GROUP}/{VERSION}/namespaces/shop/gateways/gw"
        await asyncio.to_thread(
            kube.request, self.client, "PATCH", path, body=body, content_type=kube.MERGE_PATCH
        )


async def _always() -> bool:
    return True


def _provisioner(client: Any, cluster: Cluster, **kw: Any) -> Provisioner:
    kw.setdefault("confirm_leader", _always)
    return Provisioner(client, actual=cluster.actual, controller_name=CONTROLLER, **kw)


async def test_a_shared_gateway_gets_its_vip_service_and_identity_once(client: Any) -> None:
    cluster = Cluster(client)
    provisioner = _provisioner(client, cluster)
    first = await cluster.provision(provisioner)
    assert first.created == [SHARED_SA, VIP]
    await cluster.relist()
    service = await cluster.get(VIP)
    assert service is not None
    gateway = cluster.tables["Gateway"][("shop", "gw")]
    assert service["spec"]["type"] == "LoadBalancer"
    assert service["spec"]["selector"] == {"app.kubernetes.io/name": "coxswain-proxy"}
    (port,) = service["spec"]["ports"]
    assert (port["port"], port["protocol"]) == (80, "TCP")
    assert 20000 <= port["targetPort"] < 30000  # the Gateway's bind port on the shared pool
    assert service["metadata"]["annotations"]["example.com/lb"] == "internal"
    for key in (VIP, SHARED_SA):
        obj = await cluster.get(key)
        assert obj is not None
        (owner,) = obj["metadata"]["ownerReferences"]
        assert owner["uid"] == gateway["metadata"]["uid"]
        assert owner["controller"] is True and owner["blockOwnerDeletion"] is True
    versions = {k: (await cluster.get(k) or {})["metadata"]["resourceVersion"] for k in (VIP,)}
    # Nothing changed: no write, and no request at all (the cache says it is in sync).
    second = await cluster.provision(provisioner)
    assert (second.writes, second.requests) == (0, 0)
    await cluster.relist()
    assert {k: (await cluster.get(k) or {})["metadata"]["resourceVersion"] for k in versions} == (
        versions
    )


async def test_a_new_provisioner_trusts_what_an_earlier_one_wrote(client: Any) -> None:
    cluster = Cluster(client)
    await cluster.provision(_provisioner(client, cluster))
    # A new leader (nothing remembered) finds everything in sync from the objects alone.
    again = await cluster.provision(_provisioner(client, cluster))
    assert (again.writes, again.requests) == (0, 0)


async def test_a_write_racing_another_change_reads_again_and_keeps_it(client: Any) -> None:
    cluster = Cluster(client)
    await cluster.provision(_provisioner(client, cluster))
    raced = 0

    async def confirm_and_race() -> bool:
        # Between the provisioner's read of the Service and its write (the second write of the
        # pass, after the ServiceAccount's), someone labels the Service: the write carries a
        # stale resourceVersion, gets 409, and must read again.
        nonlocal raced
        if raced == 1:
            body = {"metadata": {"labels": {"touched": "yes"}}}
            await asyncio.to_thread(
                kube.request, client, "PATCH", "/api/v1/namespaces/shop/services/gw-coxswain",
                body=body, content_type=kube.MERGE_PATCH,
            )  # fmt: skip
        raced += 1
        return True

    annotations = {"a": "b", "example.com/lb": None}  # one added, one taken away
    await cluster.patch_gateway({"spec": {"infrastructure": {"annotations": annotations}}})
    report = await cluster.provision(_provisioner(client, cluster, confirm_leader=confirm_and_race))
    assert VIP in report.updated and not report.failed
    assert raced == 3  # SA written, Service raced (409), Service read and written again
    await cluster.relist()
    service = await cluster.get(VIP)
    assert service is not None
    assert service["metadata"]["labels"]["touched"] == "yes"  # the other writer's change kept
    assert service["metadata"]["annotations"]["a"] == "b"
    assert "example.com/lb" not in service["metadata"]["annotations"]  # no longer asked for


async def test_switching_modes_provisions_the_new_before_pruning_the_old(client: Any) -> None:
    cluster = Cluster(client)
    provisioner = _provisioner(client, cluster)
    await cluster.provision(provisioner)
    ref = {"group": "coxswain-labs.dev", "kind": "CoxswainGatewayParameters", "name": "own"}
    await cluster.patch_gateway({"spec": {"infrastructure": {"parametersRef": ref}}})
    to_dedicated = await cluster.provision(provisioner)
    assert set(to_dedicated.created) == DEDICATED
    # Until a dedicated proxy is available the Service keeps selecting the shared pool, and
    # the shared objects stay (translate/handover.py): no request finds nobody serving.
    assert to_dedicated.updated == []
    assert to_dedicated.deleted == []
    await cluster.relist()
    service = await cluster.get(VIP)
    assert service is not None
    assert service["spec"]["selector"] == {"app.kubernetes.io/name": "coxswain-proxy"}
    assert (await cluster.provision(provisioner)).writes == 0  # still waiting

    await asyncio.to_thread(_available, client, "shop", "gw-coxswain")
    switched = await cluster.provision(provisioner)
    assert switched.updated == [VIP]  # the same Service: the Gateway keeps its address
    assert switched.deleted == [SHARED_SA]  # "pruned explicitly"
    assert switched.writes_in_order[-1] == ("delete", SHARED_SA)
    await cluster.relist()
    service = await cluster.get(VIP)
    assert service is not None
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "dedicated-proxy"
    assert service["spec"]["ports"][0]["targetPort"] == 80  # the dedicated proxy's own port
    deployment = await cluster.get(ObjectKey("Deployment", "shop", "gw-coxswain"))
    assert deployment is not None and deployment["spec"]["replicas"] == 2
    assert await cluster.get(SHARED_SA) is None

    await cluster.patch_gateway({"spec": {"infrastructure": {"parametersRef": None}}})
    to_shared = await cluster.provision(provisioner)
    assert to_shared.created == [SHARED_SA]
    assert set(to_shared.deleted) == DEDICATED
    verbs = [verb for verb, _ in to_shared.writes_in_order]
    assert verbs == ["create", "update", "delete", "delete", "delete"]


async def test_deleting_the_gateway_garbage_collects_what_it_owned(client: Any) -> None:
    cluster = Cluster(client)
    await cluster.provision(_provisioner(client, cluster))
    path = f"/apis/{GROUP}/{VERSION}/namespaces/shop/gateways/gw"
    await asyncio.to_thread(kube.request, client, "DELETE", path)

    async def gone() -> None:
        while True:
            await cluster.relist()
            if await cluster.get(VIP) is None and await cluster.get(SHARED_SA) is None:
                return
            await asyncio.sleep(0.05)

    await asyncio.wait_for(gone(), WAIT)


def _available(client: Any, namespace: str, name: str) -> None:
    """What the Deployment controller writes once a replica of the current template is Ready."""
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}"
    generation = kube.request(client, "GET", path)["metadata"]["generation"]
    status = {"observedGeneration": generation, "replicas": 1, "availableReplicas": 1}
    body = {"status": status}
    kube.request(client, "PATCH", f"{path}/status", body=body, content_type=kube.MERGE_PATCH)


def _events(client: Any) -> list[dict[str, Any]]:
    items = kube.request(client, "GET", "/api/v1/namespaces/shop/events").get("items") or []
    return [e for e in items if e.get("reason") == "ProvisioningFailed"]


async def test_a_failed_write_is_a_warning_event_on_the_gateway(
    client: Any, api: ThreadedApiServer
) -> None:
    cluster = Cluster(client)
    provisioner = _provisioner(
        client, cluster, events=EventRecorder(client, confirm_leader=_always)
    )
    await cluster.relist()
    api.call(lambda s: s.faults.fail_next(1))  # the first request: reading the ServiceAccount
    report = await provisioner.reconcile(translate(Inputs(cluster.tables), OPTIONS).provision)
    assert report.failed == [SHARED_SA]
    (event,) = await asyncio.to_thread(_events, client)
    assert event["type"] == "Warning"
    assert (event["involvedObject"]["kind"], event["involvedObject"]["name"]) == ("Gateway", "gw")
    assert "ServiceAccount shop/gw-coxswain-infra not written: 500" in event["message"]
    # The Service was still provisioned; the old shared identity is not pruned while its
    # Gateway's objects are incomplete, and the next pass heals it.
    assert report.created == [VIP]
    healed = await cluster.provision(provisioner)
    assert healed.created == [SHARED_SA] and not healed.failed


async def test_an_object_of_the_same_name_that_is_not_ours_is_left_alone(client: Any) -> None:
    theirs = {"metadata": {"name": "gw-coxswain"}, "spec": {"ports": [{"port": 5432}]}}
    await asyncio.to_thread(
        kube.request, client, "POST", "/api/v1/namespaces/shop/services", body=theirs
    )
    cluster = Cluster(client)
    provisioner = _provisioner(
        client, cluster, events=EventRecorder(client, confirm_leader=_always)
    )
    report = await cluster.provision(provisioner)
    assert report.failed == [VIP]
    (event,) = await asyncio.to_thread(_events, client)
    assert "Service shop/gw-coxswain not replaced: exists and is not managed" in event["message"]
    await cluster.relist()
    service = await cluster.get(VIP)
    assert service is not None and service["spec"]["ports"][0]["port"] == 5432


async def test_a_standby_writes_nothing(client: Any) -> None:
    async def never() -> bool:
        return False

    cluster = Cluster(client)
    report = await cluster.provision(_provisioner(client, cluster, confirm_leader=never))
    assert report.stopped and report.writes == 0
    await cluster.relist()
    assert await cluster.get(VIP) is None


async def test_the_loop_reconciles_the_latest_submission_and_retries_a_failure(
    client: Any, api: ThreadedApiServer
) -> None:
    cluster = Cluster(client)
    await cluster.relist()
    provisioner = _provisioner(client, cluster, retry_seconds=(0.0,))
    task = asyncio.create_task(provisioner.run())
    try:
        api.call(lambda s: s.faults.fail_next(1))  # the first pass fails once, the retry heals
        provisioner.submit(translate(Inputs(cluster.tables), OPTIONS).provision)
        await asyncio.wait_for(provisioner.idle.wait(), WAIT)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    await cluster.relist()
    assert await cluster.get(VIP) is not None and await cluster.get(SHARED_SA) is not None


async def test_the_shared_proxies_endpoints_follow_into_the_gateways_namespace(
    client: Any, api: ThreadedApiServer
) -> None:
    options = Options(vip_service_type="LoadBalancer", shared_proxy_service="coxswain-system/p")
    source: dict[str, Any] = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "p-1",
            "namespace": "coxswain-system",
            "labels": {"kubernetes.io/service-name": "p"},
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.1.0.5"], "conditions": {"ready": True}}],
    }
    api.call(lambda s: s.apply([source]))
    cluster = Cluster(client)
    provisioner = _provisioner(client, cluster)
    mirrored = ObjectKey("EndpointSlice", "shop", "gw-coxswain-ipv4")
    assert mirrored in (await cluster.provision(provisioner, options)).created
    source["endpoints"].append({"addresses": ["10.1.0.6"], "conditions": {"ready": True}})
    api.call(lambda s: s.apply([source]))
    assert (await cluster.provision(provisioner, options)).updated == [mirrored]
    await cluster.relist()
    found = await cluster.get(mirrored)
    assert found is not None
    assert [e["addresses"] for e in found["endpoints"]] == [["10.1.0.5"], ["10.1.0.6"]]
    assert found["metadata"]["labels"]["kubernetes.io/service-name"] == "gw-coxswain"
    (port,) = found["ports"]
    service = await cluster.get(VIP)
    assert service is not None
    assert (port["name"], port["port"]) == ("tcp-80", service["spec"]["ports"][0]["targetPort"])
    assert (await cluster.provision(provisioner, options)).writes == 0
