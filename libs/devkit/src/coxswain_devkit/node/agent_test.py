"""The node agent against the emulator, running real processes (the echo backend's image).

Covers: a Deployment's replicas Running and Ready with distinct pod IPs, each answering on its
own address, as `kubectl rollout status` and `kubectl get pods -o wide` show; `kubectl scale`
down stopping a pod's process; a crashing container restarted with a growing restartCount and
its last exit in `lastState`; a template change rolling the pods without the ready count
dropping below `replicas`; an image the node cannot run staying Pending with `ErrImagePull`
naming it; a Deployment's status. `kubectl logs` and EndpointSlices are in their own modules,
a Coxswain image's pod in tests/devkit/proxy_pod_test.py.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import urllib.request
from typing import Any

import pytest

from coxswain_devkit import kube as k
from coxswain_devkit.node import NodeAgent
from coxswain_devkit.node.conftest import (
    DEPLOYMENTS,
    Kubectl,
    alive,
    app_pods,
    container_pid,
    echo_deployment,
    ready,
    ready_pods,
)
from coxswain_devkit.waiting import eventually

Obj = dict[str, Any]


def _get(url: str) -> Obj:
    with urllib.request.urlopen(url, timeout=10) as response:
        answer: Obj = json.loads(response.read())
        return answer


async def _deployment(kube: k.Kube, name: str) -> Obj:
    found = await kube.get(f"{DEPLOYMENTS}/{name}")
    assert found is not None
    return found


async def test_replicas_run_ready_on_their_own_addresses(
    kube: k.Kube, agent: NodeAgent, kubectl: Kubectl
) -> None:
    await kube.create(DEPLOYMENTS, echo_deployment("web", replicas=2))
    pods = await ready_pods(kube, "web", 2)
    ips = {p["status"]["podIP"] for p in pods}
    assert len(ips) == 2
    assert all(ipaddress.ip_address(ip) in ipaddress.ip_network("127.0.201.0/24") for ip in ips)
    for pod in pods:
        answer = _get(f"http://{pod['status']['podIP']}:8080/hello")
        assert (answer["pod"], answer["namespace"]) == (pod["metadata"]["name"], "default")
        assert pod["metadata"]["labels"]["pod-template-hash"] in pod["metadata"]["name"]
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "Deployment"

    async def available() -> Obj | None:
        status = (await _deployment(kube, "web")).get("status") or {}
        return status if status.get("readyReplicas") == 2 else None

    status = await eventually(available, what="the Deployment's status")
    assert status["updatedReplicas"] == status["replicas"] == 2
    assert 'deployment "web" successfully rolled out' in await kubectl(
        "rollout", "status", "deploy/web"
    )
    table = await kubectl("get", "pods", "-o", "wide")
    for pod in pods:
        row = next(line.split() for line in table.splitlines() if pod["metadata"]["name"] in line)
        assert row[1:4] == ["1/1", "Running", "0"]
        assert row[5:7] == [pod["status"]["podIP"], "devkit-node"]


async def test_scaling_down_stops_a_pod_process(
    kube: k.Kube, agent: NodeAgent, kubectl: Kubectl
) -> None:
    await kube.create(DEPLOYMENTS, echo_deployment("web", replicas=2))
    pods = await ready_pods(kube, "web", 2)
    pids = {p["metadata"]["name"]: container_pid(p) for p in pods}
    assert "scaled" in await kubectl("scale", "deploy/web", "--replicas=1")
    (kept,) = await ready_pods(kube, "web", 1)
    gone = next(name for name in pids if name != kept["metadata"]["name"])
    await eventually(functools.partial(_gone, pids[gone]), what="the removed pod's process to exit")
    assert alive(pids[kept["metadata"]["name"]])


async def _gone(pid: int) -> bool:
    return not alive(pid)


async def test_a_crashing_container_is_restarted(kube: k.Kube, agent: NodeAgent) -> None:
    await kube.create(DEPLOYMENTS, echo_deployment("crash", replicas=1, args=("--no-such-flag",)))

    async def restarted() -> Obj | None:
        pods = await app_pods(kube, "crash")
        statuses = [s for p in pods for s in (p.get("status") or {}).get("containerStatuses", [])]
        return statuses[0] if statuses and statuses[0]["restartCount"] >= 2 else None

    status = await eventually(restarted, what="restartCount to reach 2")
    assert status["lastState"]["terminated"]["exitCode"] == 2  # argparse's usage error
    assert status["ready"] is False
    (pod,) = await app_pods(kube, "crash")
    assert not ready(pod)


async def test_a_template_change_rolls_the_pods(kube: k.Kube, agent: NodeAgent) -> None:
    await kube.create(DEPLOYMENTS, echo_deployment("web", replicas=2))
    before = await ready_pods(kube, "web", 2)
    container = echo_deployment("web")["spec"]["template"]["spec"]["containers"][0]
    container["env"] = [{"name": "ROLLED", "value": "yes"}]
    patch = {"spec": {"template": {"spec": {"containers": [container]}}}}
    await kube.merge_patch(f"{DEPLOYMENTS}/web", patch)
    old = {p["metadata"]["name"] for p in before}
    lowest = 2

    async def rolled() -> list[Obj] | None:
        nonlocal lowest
        pods = await app_pods(kube, "web")
        serving = [p for p in pods if ready(p) and not p["metadata"].get("deletionTimestamp")]
        lowest = min(lowest, len(serving))
        names = {p["metadata"]["name"] for p in pods}
        return pods if len(serving) == 2 and not names & old and len(pods) == 2 else None

    after = await eventually(rolled, what="the pods to be replaced")
    assert lowest == 2, "a ready pod was removed before its replacement was ready"
    hashes = {p["metadata"]["labels"]["pod-template-hash"] for p in after}
    assert len(hashes) == 1
    assert hashes != {p["metadata"]["labels"]["pod-template-hash"] for p in before}
    for pid in map(container_pid, before):
        await eventually(functools.partial(_gone, pid), what="the old pods' processes to exit")


@pytest.mark.parametrize("image", ["nginx:1.27", "registry.example/coxswain-proxy-debug:1"])
async def test_an_image_it_cannot_run_stays_pending(
    kube: k.Kube, agent: NodeAgent, kubectl: Kubectl, image: str
) -> None:
    await kube.create(DEPLOYMENTS, echo_deployment("other", replicas=1, image=image))

    async def waiting() -> Obj | None:
        pods = await app_pods(kube, "other")
        statuses = [s for p in pods for s in (p.get("status") or {}).get("containerStatuses", [])]
        state = statuses[0]["state"] if statuses else {}
        return state["waiting"] if state.get("waiting", {}).get("message") else None

    reason = await eventually(waiting, what="the container's waiting reason")
    assert reason["reason"] == "ErrImagePull"
    assert f'image "{image}"' in reason["message"]
    (pod,) = await app_pods(kube, "other")
    assert pod["status"]["phase"] == "Pending"
    assert not ready(pod)
    status = (await _deployment(kube, "other")).get("status") or {}
    assert status.get("availableReplicas", 0) == 0
    assert "0/1     ErrImagePull" in await kubectl("get", "pods")
