"""Fixtures for the node agent's tests: the emulator, a client, a fast agent, kubectl, manifests.

Everything runs on the test's event loop: the emulator (`ApiServer`), the agent, and kubectl as
an asyncio subprocess, so nothing blocks the loop the other parts need. The agent fixture checks,
after `stop()`, that every process any pod ran has exited.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from coxswain_devkit import kube as k
from coxswain_devkit.apiserver import ApiServer
from coxswain_devkit.node import NodeAgent, Settings
from coxswain_devkit.waiting import eventually

KUBECTL = "/usr/bin/kubectl"
ECHO = "ghcr.io/coxswain/coxswain-devkit-echo:dev"
FAST = Settings(probe_interval=0.05, backoff_base=0.05, backoff_cap=0.4, stop_grace=5.0)
Obj = dict[str, Any]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def container_pid(pod: Obj) -> int:
    status = pod["status"]["containerStatuses"][0]
    return int(status["containerID"].removeprefix("devkit://"))


def echo_deployment(
    name: str, *, replicas: int = 2, args: tuple[str, ...] = ("--port", "8080"), image: str = ECHO
) -> Obj:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "echo",
                            "image": image,
                            "args": list(args),
                            "ports": [{"name": "http", "containerPort": 8080}],
                        }
                    ]
                },
            },
        },
    }


DEPLOYMENTS = k.path("deployments", "default", group="apps")


async def app_pods(kube: k.Kube, app: str) -> list[Obj]:
    return await kube.items(k.path("pods", "default"), label_selector=f"app={app}")


def ready(pod: Obj) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


async def ready_pods(kube: k.Kube, app: str, count: int) -> list[Obj]:
    """Exactly `count` pods of `app`, every one Running and Ready (and none terminating)."""

    async def check() -> list[Obj] | None:
        pods = await app_pods(kube, app)
        done = len(pods) == count and all(
            ready(p) and p["status"]["phase"] == "Running" for p in pods
        )
        return pods if done else None

    return await eventually(check, what=f"{count} ready pods of {app}")


@pytest.fixture
async def api() -> AsyncIterator[ApiServer]:
    async with ApiServer() as server:
        yield server


@pytest.fixture
async def kube(api: ApiServer) -> AsyncIterator[k.Kube]:
    async with k.Kube(api.url) as client:
        yield client


@pytest.fixture
async def agent(api: ApiServer, tmp_path: Path) -> AsyncIterator[NodeAgent]:
    node = await NodeAgent(api.url, workdir=tmp_path / "node", settings=FAST, resync=1.0).start()
    try:
        yield node
    finally:
        pids = node.pids()
        await node.stop()
        assert not [pid for pid in pids if alive(pid)], "every pod process stopped with the agent"


class Kubectl:
    def __init__(self, kubeconfig: Path, cache: Path) -> None:
        self.base = [KUBECTL, "--kubeconfig", str(kubeconfig), "--cache-dir", str(cache)]

    async def __call__(self, *args: str, ok: bool = True) -> str:
        process = await asyncio.create_subprocess_exec(
            *self.base,
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        async with asyncio.timeout(60):
            out, _ = await process.communicate()
        if ok:
            assert process.returncode == 0, out.decode()
        return out.decode()


@pytest.fixture
def kubectl(api: ApiServer, tmp_path: Path) -> Kubectl:
    return Kubectl(api.write_kubeconfig(tmp_path / "kubeconfig"), tmp_path / "cache")
