"""`NodeAgent`: the devkit's one node — its kubelet, and the controllers that make Pods run.

    async with NodeAgent(api.url, workdir=tmp) as agent:   # or coxswain-devkit node --api-server
        ...                                                 # apply a Deployment; its Pods run

It registers a Node whose `kubeletEndpoint` is its log server (the emulator proxies
`pods/<name>/log` there), then runs one level-triggered reconcile loop, woken by watches on
Deployments, Pods and Services and every few seconds regardless. Each pass reads them afresh and:
1. plays the Deployment controller (`deployments`): creates and deletes Pods, bound to this
   node at creation, and writes each Deployment's status;
2. binds Pods created unbound by anyone else to this node (the scheduler's part);
3. plays the kubelet for the Pods bound here: a `PodRuntime` per Pod (its own loopback IP from
   127.0.201.0/24), started when it appears, stopped in the background when it is deleted
   (each Pod carries the agent's finalizer, so it stays Terminating until its processes have
   exited), and its status written back when it changed;
4. plays the EndpointSlice controller (`endpointslices`) for every Service with a selector;
5. plays cluster DNS and kube-proxy for the Services its pods dial by name: a relay on
   127.0.0.1 per Service port named (`service_relays`), following the slices' ready endpoints.
`stop()` SIGTERMs every pod process and waits for each, then deletes the Pods and the Node it
ran (their processes are gone), so nothing outlives the agent.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import aiohttp

from coxswain_devkit import kube as k
from coxswain_devkit.addresses import POD_NETWORK, AddressPool, PoolExhausted
from coxswain_devkit.apiserver.meta import timestamp
from coxswain_devkit.node import deployments, endpointslices
from coxswain_devkit.node.container import Settings
from coxswain_devkit.node.logs import KubeletServer, LogBuffer
from coxswain_devkit.node.pod import PodRuntime
from coxswain_devkit.node.service_relays import ServiceRelays
from coxswain_service import tasks

__all__ = ["NodeAgent", "Settings", "default_launcher"]

log = logging.getLogger("coxswain_devkit.node")

Obj = dict[str, Any]
Key = tuple[str, str]
DEPLOYMENTS = k.path("deployments", group="apps")
PODS = k.path("pods")
SERVICES = k.path("services")
SLICES = k.path("endpointslices", group="discovery.k8s.io")
RESYNC_SECONDS = 5.0
ROLES = ("proxy", "controller", "identity", "ui", "devkit")


def default_launcher() -> dict[str, Sequence[str]]:
    """Each role as `python -m coxswain_<role>` with this interpreter."""
    return {role: (sys.executable, "-m", f"coxswain_{role}") for role in ROLES}


def _key(obj: Obj) -> Key:
    return (str(obj["metadata"].get("namespace", "")), str(obj["metadata"]["name"]))


class NodeAgent:
    def __init__(
        self,
        api_url: str,
        *,
        name: str = "devkit-node",
        workdir: Path | None = None,
        launcher: Mapping[str, Sequence[str]] | None = None,
        pod_network: str = POD_NETWORK,
        settings: Settings | None = None,
        base_env: Mapping[str, str] | None = None,
        endpoint_slices: bool = True,
        resync: float = RESYNC_SECONDS,
    ) -> None:
        self.name = name
        self._kube = k.Kube(api_url)
        self._own_workdir = workdir is None
        self.workdir = workdir or Path(tempfile.mkdtemp(prefix="coxswain-node-"))
        self._launcher = dict(launcher or default_launcher())
        self._pool = AddressPool(pod_network)
        self._settings = settings or Settings()
        self._base_env = dict(os.environ if base_env is None else base_env)
        self._slices = endpoint_slices
        self._resync = resync
        self._kubelet = KubeletServer(self._logs)
        self._changes = k.Changes(self._kube, (DEPLOYMENTS, PODS, SERVICES))
        self._relays = ServiceRelays(self._kube)
        self._pods: dict[Key, PodRuntime] = {}
        self._retiring: dict[Key, asyncio.Task[None]] = {}
        self._stopping: dict[Key, PodRuntime] = {}  # the runtimes the retiring tasks stop
        self._loop: asyncio.Task[None] | None = None

    @property
    def log_port(self) -> int:
        return self._kubelet.port

    def runtime(self, namespace: str, name: str) -> PodRuntime | None:
        """The running pod (tests look at its processes)."""
        return self._pods.get((namespace, name))

    def pids(self) -> list[int]:
        """The process of every container of every pod here, running or being stopped."""
        runtimes = [*self._pods.values(), *self._stopping.values()]
        return [pid for runtime in runtimes for pid in runtime.pids()]

    async def start(self) -> NodeAgent:
        await self._kube.__aenter__()
        await self._kubelet.start()
        await self._register()
        self._changes.start()
        self._loop = tasks.spawn(self._reconcile_forever(), name=f"node {self.name}")
        log.info(
            "node agent started",
            extra={
                "fields": {
                    "node": self.name,
                    "log_port": self.log_port,
                    "workdir": str(self.workdir),
                }
            },
        )
        return self

    async def stop(self) -> None:
        if self._loop is not None:
            await tasks.cancel(self._loop)
            self._loop = None
        await self._changes.stop()
        await asyncio.gather(*self._retiring.values(), return_exceptions=True)
        runtimes, self._pods = list(self._pods.values()), {}
        await asyncio.gather(*(rt.stop() for rt in runtimes))
        await self._relays.close()
        try:
            await self._forget(runtimes)
        except (aiohttp.ClientError, k.ApiError, OSError) as err:
            log.warning("could not delete the node's pods", extra={"fields": {"error": str(err)}})
        self._pool.release_all()
        await self._kubelet.stop()
        await self._kube.close()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
        log.info("node agent stopped", extra={"fields": {"node": self.name}})

    async def __aenter__(self) -> NodeAgent:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    # ------------------------------------------------------------------ the loop

    async def _reconcile_forever(self) -> None:
        while True:
            await self._changes.wait(self._resync)
            try:
                await self._reconcile()
            except (aiohttp.ClientError, k.ApiError, OSError, TimeoutError) as err:
                log.warning("node reconcile failed", extra={"fields": {"error": str(err)}})
            except Exception:  # a bug here must not stop the node: log it, try again
                log.exception("node reconcile crashed")

    async def _reconcile(self) -> None:
        pods = await self._kube.items(PODS)
        for deployment in await self._kube.items(DEPLOYMENTS):
            await self._deployment(deployment, deployments.owned(deployment, pods))
        await self._schedule(pods)
        await self._kubelet_pass(pods)
        services = await self._kube.items(SERVICES)
        if self._slices:
            await endpointslices.reconcile(self._kube, services, pods)
        if self._relays:  # after the slices are written: a relay follows them in the same pass
            await self._relays.refresh(services, await self._kube.items(SLICES))

    async def _deployment(self, deployment: Obj, pods: list[Obj]) -> None:
        namespace = deployment["metadata"]["namespace"]
        plan = deployments.plan(deployment, pods)
        for _ in range(plan.create):
            await self._kube.create(
                k.path("pods", namespace), deployments.new_pod(deployment, self.name)
            )
        for pod in plan.delete:
            await self._kube.delete(k.path("pods", namespace, pod["metadata"]["name"]))
        status = deployments.status(deployment, pods, now=timestamp(time.time))
        if deployment.get("status") != status:
            where = k.path(
                "deployments", namespace, deployment["metadata"]["name"], "status", group="apps"
            )
            await self._put_status(where, deployment, status)

    async def _schedule(self, pods: list[Obj]) -> None:
        for pod in pods:
            spec = pod.get("spec") or {}
            if spec.get("nodeName") or pod.get("status") or deployments.deleting(pod):
                continue
            if spec.get("schedulerName", "default-scheduler") != "default-scheduler":
                continue
            namespace, name = _key(pod)
            await self._kube.merge_patch(
                k.path("pods", namespace, name), {"spec": {"nodeName": self.name}}
            )

    async def _kubelet_pass(self, pods: list[Obj]) -> None:
        bound = {_key(p): p for p in pods if (p.get("spec") or {}).get("nodeName") == self.name}
        for key, runtime in list(self._pods.items()):
            pod = bound.get(key)
            if pod is None or pod["metadata"]["uid"] != runtime.uid or deployments.deleting(pod):
                self._retire(key, runtime, pod)
        for key, pod in bound.items():
            if key in self._retiring:
                continue
            if deployments.deleting(pod):
                self._retire(key, None, pod)  # never ran here (or before a restart): let it go
                continue
            running = self._pods.get(key) or self._run(pod)
            if running is not None and pod.get("status") != (status := running.status()):
                await self._put_status(k.path("pods", key[0], key[1], "status"), pod, status)

    def _run(self, pod: Obj) -> PodRuntime | None:
        key = _key(pod)
        try:
            ip = self._pool.allocate()
        except PoolExhausted as err:
            log.warning("no pod IP left", extra={"fields": {"pod": key, "error": str(err)}})
            return None
        runtime = PodRuntime(
            pod,
            ip=ip,
            root=self.workdir / f"{key[0]}_{key[1]}_{pod['metadata']['uid'][:8]}",
            kube=self._kube,
            relays=self._relays,
            launcher=self._launcher,
            base_env=self._base_env,
            settings=self._settings,
            on_change=self._changes.poke,
        )
        self._pods[key] = runtime
        runtime.start()
        log.info("pod started", extra={"fields": {"pod": "/".join(key), "ip": ip}})
        return runtime

    def _retire(self, key: Key, runtime: PodRuntime | None, pod: Obj | None) -> None:
        """Stop a pod's processes in the background, then let its deletion finish."""
        self._pods.pop(key, None)
        if runtime is not None:
            self._stopping[key] = runtime

        async def retire() -> None:
            if runtime is not None:
                await runtime.stop()
                self._pool.release(runtime.ip)
                await asyncio.to_thread(shutil.rmtree, runtime.root, ignore_errors=True)
                log.info("pod stopped", extra={"fields": {"pod": "/".join(key)}})
            if pod is not None and (runtime is None or pod["metadata"]["uid"] == runtime.uid):
                await self._release(pod)

        task = tasks.spawn(retire(), name=f"retire {'/'.join(key)}", may_end=True)
        self._retiring[key] = task
        task.add_done_callback(lambda _: self._retired(key))

    def _retired(self, key: Key) -> None:
        self._retiring.pop(key, None)
        self._stopping.pop(key, None)
        self._changes.poke()

    async def _release(self, pod: Obj) -> None:
        """Remove the agent's finalizer, which lets a deleted Pod go."""
        finalizers = pod["metadata"].get("finalizers") or []
        if deployments.FINALIZER not in finalizers:
            return
        kept = [f for f in finalizers if f != deployments.FINALIZER]
        namespace, name = _key(pod)
        try:
            await self._kube.merge_patch(
                k.path("pods", namespace, name), {"metadata": {"finalizers": kept or None}}
            )
        except k.ApiError as err:
            if err.code != 404:
                raise

    async def _put_status(self, where: str, obj: Obj, status: Obj) -> None:
        try:
            await self._kube.put(where, {**obj, "status": status})
        except k.ApiError as err:
            if err.code not in (404, 409):
                raise
            self._changes.poke()  # changed or gone since it was read: look again

    # ------------------------------------------------------------------ the node itself

    async def _register(self) -> None:
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": {"kubernetes.io/hostname": self.name, "kubernetes.io/os": "linux"},
            },
        }
        nodes = k.path("nodes")
        current = await self._kube.get(f"{nodes}/{self.name}") or await self._kube.create(
            nodes, node
        )
        status = {
            "addresses": [
                {"type": "InternalIP", "address": "127.0.0.1"},
                {"type": "Hostname", "address": self.name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.log_port}},
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "the devkit node agent is running",
                    "lastTransitionTime": timestamp(time.time),
                }
            ],
        }
        await self._kube.put(f"{nodes}/{self.name}/status", {**current, "status": status})

    async def _forget(self, runtimes: list[PodRuntime]) -> None:
        for runtime in runtimes:
            pod = await self._kube.get(k.path("pods", *runtime.key))
            if pod is not None and pod["metadata"]["uid"] == runtime.uid:
                await self._kube.delete(k.path("pods", *runtime.key))
                await self._release(pod)
        await self._kube.delete(f"{k.path('nodes')}/{self.name}")

    def _logs(self, namespace: str, pod: str, container: str, previous: bool) -> LogBuffer | str:
        runtime = self._pods.get((namespace, pod))
        if runtime is None:
            return f'pod "{pod}" is not running on node "{self.name}"'
        return runtime.logs(container, previous)
