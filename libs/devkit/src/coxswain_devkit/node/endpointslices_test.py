"""EndpointSlices the node agent writes for Services that select its pods.

Covers: a Service with a named targetPort gets one slice listing each ready pod's IP with the
port resolved through the pod's containerPort name, owned by the Service and labelled with its
name; the slice follows scaling; a Service whose selector matches nothing gets an empty slice;
slices written by someone else (no managed-by label) are left alone; deleting the Service
garbage-collects its slices. Terminating endpoints are covered by `desired` below, on fixed pods.
"""

from __future__ import annotations

from typing import Any

from coxswain_devkit import kube as k
from coxswain_devkit.node import NodeAgent, endpointslices
from coxswain_devkit.node.conftest import DEPLOYMENTS, echo_deployment, ready_pods
from coxswain_devkit.waiting import eventually

Obj = dict[str, Any]
SLICES = k.path("endpointslices", "default", group="discovery.k8s.io")
SERVICES = k.path("services", "default")


def _service(name: str, app: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name},
        "spec": {
            "selector": {"app": app},
            "ports": [{"name": "web", "port": 80, "targetPort": "http"}],
        },
    }


async def _slices(kube: k.Kube, service: str) -> list[Obj]:
    """The slices the agent manages for `service`."""
    managed = f"{endpointslices.MANAGED_BY_LABEL}={endpointslices.MANAGED_BY}"
    selector = f"kubernetes.io/service-name={service},{managed}"
    return await kube.items(SLICES, label_selector=selector)


async def _endpoints(kube: k.Kube, service: str, count: int) -> Obj:
    async def check() -> Obj | None:
        slices = await _slices(kube, service)
        ready = [e for s in slices for e in s["endpoints"] if e["conditions"]["ready"]]
        return slices[0] if len(slices) == 1 and len(ready) == count else None

    return await eventually(check, what=f"{count} ready endpoints of {service}")


async def test_slices_follow_the_selected_pods(kube: k.Kube, agent: NodeAgent) -> None:
    foreign = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": "web-manual", "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4",
        "endpoints": [],
    }
    await kube.create(SLICES, foreign)
    await kube.create(DEPLOYMENTS, echo_deployment("web", replicas=2))
    service = await kube.create(SERVICES, _service("web", "web"))
    await kube.create(SERVICES, _service("nothing", "absent"))
    pods = await ready_pods(kube, "web", 2)
    slice_ = await _endpoints(kube, "web", 2)
    assert {e["addresses"][0] for e in slice_["endpoints"]} == {p["status"]["podIP"] for p in pods}
    assert slice_["ports"] == [{"name": "web", "port": 8080, "protocol": "TCP"}]
    assert slice_["addressType"] == "IPv4"
    owner = slice_["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"]) == ("Service", service["metadata"]["uid"])
    assert await kube.get(f"{SLICES}/web-manual") is not None, "a slice it did not write stays"
    (empty,) = await _slices(kube, "nothing")
    assert empty["endpoints"] == []

    await kube.merge_patch(f"{DEPLOYMENTS}/web", {"spec": {"replicas": 1}})
    (pod,) = await ready_pods(kube, "web", 1)
    slice_ = await _endpoints(kube, "web", 1)
    (serving,) = [e for e in slice_["endpoints"] if e["conditions"]["ready"]]
    assert serving["targetRef"]["name"] == pod["metadata"]["name"]

    await kube.delete(f"{SERVICES}/web")

    async def collected() -> bool:
        return not await _slices(kube, "web")

    await eventually(collected, what="the Service's slices to be garbage-collected")


def _pod(name: str, *, ready: bool, deleting: bool = False) -> Obj:
    meta: Obj = {"name": name, "namespace": "default", "uid": name, "labels": {"app": "a"}}
    if deleting:
        meta["deletionTimestamp"] = "2030-01-01T00:00:00Z"
    return {
        "metadata": meta,
        "spec": {"containers": [{"name": "c", "ports": [{"name": "http", "containerPort": 9}]}]},
        "status": {
            "phase": "Running",
            "podIP": f"127.0.201.{len(name)}",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def test_terminating_and_unready_pods_are_listed_not_ready() -> None:
    service = {**_service("s", "a"), "metadata": {"name": "s", "namespace": "default", "uid": "u"}}
    pods = [_pod("a", ready=True), _pod("bb", ready=False), _pod("ccc", ready=True, deleting=True)]
    (slice_,) = endpointslices.desired(service, pods)
    conditions = {e["targetRef"]["name"]: e["conditions"] for e in slice_["endpoints"]}
    assert conditions == {
        "a": {"ready": True, "serving": True, "terminating": False},
        "bb": {"ready": False, "serving": False, "terminating": False},
        "ccc": {"ready": False, "serving": True, "terminating": True},
    }
    assert slice_["ports"] == [{"name": "web", "port": 9, "protocol": "TCP"}]
