"""`kubectl rollout status` against the emulator while the devkit node agent rolls a Deployment.

Covers, with each kubectl (conftest's `kubectl_binary`): a Deployment of the echo image applied
with kubectl, its rollout followed to "successfully rolled out" as the node agent starts the
pods and writes the Deployment's status; a template change (`kubectl set env`) rolled out the
same way, the new pods replacing the old. Everything shares the test's event loop (the emulator,
the agent, kubectl as an asyncio subprocess). Leaves out the rollout rules themselves
(node/deployments_test) and `rollout undo` (the emulator keeps no ReplicaSet history).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from coxswain_devkit.apiserver import ApiServer
from coxswain_devkit.node import NodeAgent, Settings

ECHO = "ghcr.io/coxswain/coxswain-devkit-echo:dev"
FAST = Settings(probe_interval=0.05, backoff_base=0.05, backoff_cap=0.4, stop_grace=5.0)
MANIFEST = f"""\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec:
      containers:
      - name: echo
        image: {ECHO}
        args: [--port, "8080"]
        ports: [{{name: http, containerPort: 8080}}]
"""


class AsyncKubectl:
    def __init__(self, binary: str, kubeconfig: Path, cache: Path) -> None:
        self.base = [binary, "--kubeconfig", str(kubeconfig), "--cache-dir", str(cache)]

    async def __call__(self, *args: str) -> str:
        process = await asyncio.create_subprocess_exec(
            *self.base, *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        async with asyncio.timeout(120):
            out, _ = await process.communicate()
        assert process.returncode == 0, out.decode()
        return out.decode()


@pytest.fixture
async def api() -> AsyncIterator[ApiServer]:
    async with ApiServer() as server:
        yield server


@pytest.fixture
async def agent(api: ApiServer, tmp_path: Path) -> AsyncIterator[NodeAgent]:
    node = await NodeAgent(api.url, workdir=tmp_path / "node", settings=FAST, resync=1.0).start()
    try:
        yield node
    finally:
        await node.stop()


@pytest.fixture
def kubectl(api: ApiServer, tmp_path: Path, kubectl_binary: str) -> AsyncKubectl:
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig")
    return AsyncKubectl(kubectl_binary, kubeconfig, tmp_path / "cache")


async def test_rollout_status_follows_the_node_agent(
    agent: NodeAgent, kubectl: AsyncKubectl, tmp_path: Path
) -> None:
    manifest = tmp_path / "web.yaml"
    manifest.write_text(MANIFEST)
    assert "deployment.apps/web created" in await kubectl("apply", "-f", str(manifest))
    out = await kubectl("rollout", "status", "deployment/web", "--timeout=90s")
    assert 'deployment "web" successfully rolled out' in out
    ready = await kubectl("get", "deployment", "web", "-o", "jsonpath={.status.readyReplicas}")
    assert ready == "2"

    await kubectl("set", "env", "deployment/web", "MODE=b")
    out = await kubectl("rollout", "status", "deployment/web", "--timeout=90s")
    assert 'deployment "web" successfully rolled out' in out
    envs = await kubectl(
        "get", "pods", "-l", "app=web", "-o", "jsonpath={.items[*].spec.containers[0].env}"
    )
    assert envs.count('"MODE"') == 2, "both pods are of the new template"
