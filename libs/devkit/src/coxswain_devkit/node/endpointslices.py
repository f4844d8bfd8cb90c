"""The EndpointSlice controller's part of kube-controller-manager, as the devkit node plays it.

The controller routes to backends by EndpointSlices, and the load balancer relays by them too,
so every Service with a selector gets slices listing the Pods it selects: one endpoint per Pod
with an IP, `ready` when the Pod is Ready and not terminating, `serving` when Ready, and
`terminating` while it is being deleted (`publishNotReadyAddresses` makes every one ready). A
slice's ports are the Service's ports with their targetPorts resolved against each Pod (a named
targetPort looks up the Pod's containerPort of that name), so Pods that resolve differently go
to different slices, as the real controller groups them. Slices carry the
`kubernetes.io/service-name` label and the Service as their controlling owner, and the
`endpointslice.kubernetes.io/managed-by` label: only slices with it are ever changed or deleted
here, so slices someone else wrote (a test's, the stack's) are left alone.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from coxswain_devkit import kube as k
from coxswain_devkit.node.deployments import deleting, is_ready

__all__ = ["MANAGED_BY", "MANAGED_BY_LABEL", "SERVICE_LABEL", "desired", "reconcile"]

Obj = dict[str, Any]
SERVICE_LABEL = "kubernetes.io/service-name"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
MANAGED_BY = "endpointslice-controller.devkit.coxswain"
SLICES = k.path("endpointslices", group="discovery.k8s.io", version="v1")
_COMPARED = ("addressType", "endpoints", "ports")


def _selects(service: Obj, pod: Obj) -> bool:
    selector = (service.get("spec") or {}).get("selector") or {}
    labels = pod["metadata"].get("labels") or {}
    return bool(selector) and all(labels.get(key) == value for key, value in selector.items())


def _target(port: Obj, pod: Obj) -> int | None:
    target: Any = port.get("targetPort", port.get("port"))
    if isinstance(target, int) or str(target).isdigit():
        return int(target)
    for container in (pod.get("spec") or {}).get("containers") or []:
        for declared in container.get("ports") or []:
            if declared.get("name") == target:
                return int(declared["containerPort"])
    return None


def _ports(service: Obj, pod: Obj) -> list[Obj]:
    ports = []
    for port in (service.get("spec") or {}).get("ports") or []:
        number = _target(port, pod)
        if number is None:
            continue
        entry = {
            "name": port.get("name", ""),
            "port": number,
            "protocol": port.get("protocol", "TCP"),
        }
        if port.get("appProtocol"):
            entry["appProtocol"] = port["appProtocol"]
        ports.append(entry)
    return ports


def _endpoint(service: Obj, pod: Obj) -> Obj:
    meta = pod["metadata"]
    serving = is_ready(pod) or bool((service.get("spec") or {}).get("publishNotReadyAddresses"))
    return {
        "addresses": [pod["status"]["podIP"]],
        "conditions": {
            "ready": serving and not deleting(pod),
            "serving": serving,
            "terminating": deleting(pod),
        },
        "nodeName": (pod.get("spec") or {}).get("nodeName", ""),
        "targetRef": {
            "kind": "Pod",
            "namespace": meta["namespace"],
            "name": meta["name"],
            "uid": meta["uid"],
        },
    }


def _slice(service: Obj, ports: list[Obj], endpoints: list[Obj]) -> Obj:
    meta = service["metadata"]
    digest = hashlib.sha256(json.dumps(ports, sort_keys=True).encode()).hexdigest()[:5]
    owner = {
        "apiVersion": "v1",
        "kind": "Service",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{meta['name']}-{digest}",
            "namespace": meta["namespace"],
            "labels": {SERVICE_LABEL: meta["name"], MANAGED_BY_LABEL: MANAGED_BY},
            "ownerReferences": [owner],
        },
        "addressType": "IPv4",
        "ports": ports,
        "endpoints": sorted(endpoints, key=lambda e: e["targetRef"]["name"]),
    }


def desired(service: Obj, pods: list[Obj]) -> list[Obj]:
    """The slices a Service with a selector should have (one, empty, when it selects nothing)."""
    groups: dict[str, tuple[list[Obj], list[Obj]]] = {}
    namespace = service["metadata"]["namespace"]
    for pod in pods:
        phase = (pod.get("status") or {}).get("phase")
        ip = (pod.get("status") or {}).get("podIP")
        if pod["metadata"]["namespace"] != namespace or not ip or phase in ("Succeeded", "Failed"):
            continue
        if not _selects(service, pod):
            continue
        ports = _ports(service, pod)
        group = groups.setdefault(json.dumps(ports, sort_keys=True), (ports, []))
        group[1].append(_endpoint(service, pod))
    if not groups:
        groups[""] = (_ports(service, {}), [])
    return [_slice(service, ports, endpoints) for ports, endpoints in groups.values()]


def _wanted(service: Obj) -> bool:
    spec = service.get("spec") or {}
    return bool(spec.get("selector")) and spec.get("type") != "ExternalName"


async def reconcile(kube: k.Kube, services: list[Obj], pods: list[Obj]) -> None:
    """Create, update and delete the slices this controller manages to match the Services."""
    existing = {
        (s["metadata"]["namespace"], s["metadata"]["name"]): s
        for s in await kube.items(SLICES, label_selector=f"{MANAGED_BY_LABEL}={MANAGED_BY}")
    }
    wanted = [s for service in services if _wanted(service) for s in desired(service, pods)]
    for slice_ in wanted:
        key = (slice_["metadata"]["namespace"], slice_["metadata"]["name"])
        where = k.path("endpointslices", key[0], group="discovery.k8s.io")
        held = existing.pop(key, None)
        if held is None:
            await kube.create(where, slice_)
        elif any(held.get(f) != slice_.get(f) for f in _COMPARED):
            await kube.put(f"{where}/{key[1]}", slice_)
    for namespace, name in existing:
        await kube.delete(k.path("endpointslices", namespace, name, group="discovery.k8s.io"))
