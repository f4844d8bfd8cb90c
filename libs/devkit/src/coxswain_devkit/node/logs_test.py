"""`kubectl logs` through the emulator's `pods/log`, proxied to the node agent's log endpoint.

Covers the real kubectl against a pod the agent runs: the process's output (its stderr JSON
lines), `--tail`, `-f` following until the container ends, `--previous` for a crashed instance,
`deploy/<name>` resolving to a pod, a container waiting to start answered with its reason, and
the emulator's own checks on the container name. Seeded text (`ApiServer.set_pod_log`) for pods
on no node is covered in apiserver/.
"""

from __future__ import annotations

import asyncio

from coxswain_devkit import kube as k
from coxswain_devkit.node import NodeAgent
from coxswain_devkit.node.conftest import (
    DEPLOYMENTS,
    Kubectl,
    app_pods,
    echo_deployment,
    ready_pods,
)
from coxswain_devkit.waiting import eventually


async def test_kubectl_logs_shows_the_process_output(
    kube: k.Kube, agent: NodeAgent, kubectl: Kubectl
) -> None:
    await kube.create(DEPLOYMENTS, echo_deployment("web", replicas=1))
    (pod,) = await ready_pods(kube, "web", 1)
    name = pod["metadata"]["name"]
    out = await kubectl("logs", name)
    assert '"msg": "echo listening"' in out
    assert f'"address": "{pod["status"]["podIP"]}"' in out
    assert out.strip().splitlines()[-1] == (await kubectl("logs", name, "--tail=1")).strip()
    assert '"msg": "echo listening"' in await kubectl("logs", "deploy/web")
    assert "echo listening" in await kubectl("logs", name, "-c", "echo", "--timestamps")


async def test_kubectl_logs_follow_ends_with_the_container(
    kube: k.Kube, agent: NodeAgent, kubectl: Kubectl
) -> None:
    await kube.create(DEPLOYMENTS, echo_deployment("web", replicas=1))
    (pod,) = await ready_pods(kube, "web", 1)
    follow = await asyncio.create_subprocess_exec(
        *kubectl.base, "logs", "-f", pod["metadata"]["name"], stdout=asyncio.subprocess.PIPE
    )
    assert follow.stdout is not None
    async with asyncio.timeout(60):
        first = await follow.stdout.readline()
    assert b"echo listening" in first
    await kube.merge_patch(f"{DEPLOYMENTS}/web", {"spec": {"replicas": 0}})
    async with asyncio.timeout(60):
        rest, _ = await follow.communicate()
    assert follow.returncode == 0
    assert b'"msg": "stopped"' in rest, "the follow streamed the process's last lines, then ended"


async def test_kubectl_logs_previous_and_waiting(
    kube: k.Kube, agent: NodeAgent, kubectl: Kubectl
) -> None:
    await kube.create(DEPLOYMENTS, echo_deployment("crash", replicas=1, args=("--no-such-flag",)))
    await kube.create(DEPLOYMENTS, echo_deployment("other", replicas=1, image="nginx:1.27"))

    async def crashed_once() -> str | None:
        pods = await app_pods(kube, "crash")
        statuses = [s for p in pods for s in (p.get("status") or {}).get("containerStatuses", [])]
        restarted = statuses and statuses[0]["restartCount"] >= 1
        return pods[0]["metadata"]["name"] if restarted else None

    crash = await eventually(crashed_once, what="a restart")
    assert "unrecognized arguments: --no-such-flag" in await kubectl("logs", crash, "--previous")

    async def waiting() -> str | None:
        pods = await app_pods(kube, "other")
        return pods[0]["metadata"]["name"] if pods and pods[0].get("status") else None

    other = await eventually(waiting, what="the nginx pod's status")
    out = await kubectl("logs", other, ok=False)
    assert f'container "echo" in pod "{other}" is waiting to start: ErrImagePull' in out
    out = await kubectl("logs", other, "-c", "sidecar", ok=False)
    assert f"container sidecar is not valid for pod {other}" in out
