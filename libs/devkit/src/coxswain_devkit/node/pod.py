"""One pod on the devkit node: its IP, directory, volumes and containers, and the status they make.

The agent makes a `PodRuntime` for each Pod bound to its node and drops it when the Pod goes.
The runtime first sets up the volumes (retrying while a ConfigMap or ServiceAccount is missing,
with the pod `Pending` and the containers `ContainerCreating`), then starts every container and
keeps the volumes (and the API token of a service that talks to the API, `api_access`) fresh.
Each container's launch is prepared with what a pod would find around it: that token, and a
relay on this machine for each Service it dials by name (`service_relays`).
`status()` is the Pod's `status` as the kubelet would write it: phase, podIP, conditions (Ready
once every container's readiness probe passes) and containerStatuses; transition times move only
when a condition's value does, so rewriting an unchanged status is a no-op for the API server
and for every watcher.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import aiohttp

from coxswain_devkit import kube as k
from coxswain_devkit.apiserver.meta import timestamp
from coxswain_devkit.node import env, launch
from coxswain_devkit.node.api_access import ApiAccess
from coxswain_devkit.node.container import Container, Settings
from coxswain_devkit.node.env import CannotRun
from coxswain_devkit.node.logs import LogBuffer
from coxswain_devkit.node.service_relays import Reference, ServiceRelays
from coxswain_devkit.node.volumes import MOUNT_WAIT, Volumes
from coxswain_service import tasks

__all__ = ["PodRuntime"]

log = logging.getLogger("coxswain_devkit.node")

Obj = dict[str, Any]
VOLUME_SYNC_SECONDS = 10.0  # how often ConfigMaps, Secrets and tokens are read again
DEFAULT_GRACE = 30.0  # terminationGracePeriodSeconds when the pod sets none


class PodRuntime:
    def __init__(
        self,
        pod: Obj,
        *,
        ip: str,
        root: Path,
        kube: k.Kube,
        relays: ServiceRelays,
        launcher: Mapping[str, Sequence[str]],
        base_env: Mapping[str, str],
        settings: Settings,
        on_change: Callable[[], None],
    ) -> None:
        meta = pod["metadata"]
        self.pod = pod
        self.key = (str(meta["namespace"]), str(meta["name"]))
        self.uid = str(meta["uid"])
        self.ip = ip
        self.root = root
        self._kube = kube
        self._launcher = launcher
        self._base_env = base_env
        self._settings = settings
        self._on_change = on_change
        self._relays = relays
        self._volumes = Volumes(pod, root, read=self._read, issue=self._issue)
        self._api = ApiAccess(pod, root, api_url=kube.url, read=self._read, issue=self._issue)
        self._containers: list[Container] = []
        self._waiting: Obj = {"reason": MOUNT_WAIT}
        self._started = timestamp(time.time)
        self._transitions: dict[str, tuple[str, str]] = {}  # type -> (status, time)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = tasks.spawn(self._run(), name=f"pod {'/'.join(self.key)}", may_end=True)

    async def stop(self) -> None:
        """Stop every container (SIGTERM, the grace period, SIGKILL), then the volume refresh."""
        if self._task is not None:
            await tasks.cancel(self._task)
        grace = float(
            (self.pod.get("spec") or {}).get("terminationGracePeriodSeconds", DEFAULT_GRACE)
        )
        await asyncio.gather(*(c.stop(grace) for c in self._containers))

    def logs(self, container: str, previous: bool) -> LogBuffer | str:
        """The container's output, or the message the kubelet gives when there is none."""
        pod = self.key[1]
        found = next((c for c in self._containers if c.name == container), None)
        if found is not None and previous:
            missing = f'previous terminated container "{container}" in pod "{pod}" not found'
            return found.previous or missing
        if found is not None and found.instances:
            return found.logs
        if found is None and container not in [str(c.get("name")) for c in self._specs()]:
            return f"container {container} is not valid for pod {pod}"
        waiting = found.state.get("waiting", {}) if found is not None else self._waiting
        reason = waiting.get("reason", MOUNT_WAIT)
        return f'container "{container}" in pod "{pod}" is waiting to start: {reason}'

    def pids(self) -> list[int]:
        return [c.pid for c in self._containers if c.pid is not None]

    def _specs(self) -> list[Obj]:
        return list((self.pod.get("spec") or {}).get("containers") or [])

    async def _read(self, plural: str, namespace: str, name: str) -> Obj | None:
        return await self._kube.get(k.path(plural, namespace, name))

    async def _issue(self, namespace: str, account: str, body: Obj) -> Obj | None:
        try:
            return await self._kube.create(
                k.path("serviceaccounts", namespace, account, "token"), body
            )
        except k.ApiError as err:
            if err.code == 404:
                return None
            raise

    async def _run(self) -> None:
        while True:
            if await self._sync_volumes():
                break
            await asyncio.sleep(self._settings.backoff_base)
        for spec in self._specs():
            container = Container(
                spec,
                prepare=functools.partial(self._prepare, spec),
                settings=self._settings,
                on_change=self._on_change,
            )
            self._containers.append(container)
            container.start()
        self._on_change()
        while True:
            await asyncio.sleep(VOLUME_SYNC_SECONDS)
            await self._sync_volumes()

    async def _sync_volumes(self) -> bool:
        try:
            await self._volumes.sync()
            await self._api.refresh()
        except CannotRun as err:
            if self._waiting.get("message") != err.message:
                log.info(
                    "pod volumes not ready", extra={"fields": {"pod": self.key, "why": err.message}}
                )
            self._waiting = {"reason": err.reason, "message": err.message}
            self._on_change()
            return False
        except (k.ApiError, OSError) as err:
            log.warning(
                "pod volume sync failed", extra={"fields": {"pod": self.key, "error": str(err)}}
            )
            return False
        return True

    async def _prepare(self, spec: Obj) -> launch.Launch:
        role = launch.runnable(spec, self._launcher)
        variables = await env.resolve(self._read, self.pod, spec, self.ip)
        kubeconfig = await self._api.kubeconfig() if role.api_server else None
        relayed = await self._relayed(launch.dialled(spec, role, variables))
        return launch.plan(
            self.pod,
            spec,
            env=variables,
            base_env=self._base_env,
            mounts=self._volumes.mounts(spec),
            pod_ip=self.ip,
            kubeconfig=str(kubeconfig) if kubeconfig is not None else None,
            relayed=relayed,
            launcher=self._launcher,
        )

    async def _relayed(self, refs: list[Reference]) -> dict[Reference, str]:
        """Where each Service dialled by name is reached here (names no Service has left out)."""
        relayed = {}
        for ref in refs:
            try:
                address = await self._relays.address(ref)
            except (k.ApiError, aiohttp.ClientError, OSError) as err:
                raise CannotRun(
                    "CreateContainerConfigError",
                    f"service {ref.namespace}/{ref.service}:{ref.port} not relayed: {err}",
                ) from err
            if address is not None:
                relayed[ref] = address
        return relayed

    def _container_statuses(self) -> list[Obj]:
        if self._containers:
            return [c.status() for c in self._containers]
        return [
            {
                "name": spec.get("name", ""),
                "image": spec.get("image", ""),
                "imageID": "",
                "ready": False,
                "started": False,
                "restartCount": 0,
                "state": {"waiting": self._waiting},
                "lastState": {},
            }
            for spec in self._specs()
        ]

    def _condition(self, kind: str, value: bool) -> Obj:
        status = "True" if value else "False"
        held = self._transitions.get(kind)
        if held is None or held[0] != status:
            held = (status, timestamp(time.time))
            self._transitions[kind] = held
        return {
            "type": kind,
            "status": status,
            "lastProbeTime": None,
            "lastTransitionTime": held[1],
        }

    def status(self) -> Obj:
        containers = self._container_statuses()
        ready = bool(containers) and all(c["ready"] for c in containers)
        running = any("running" in c["state"] for c in containers)
        return {
            "phase": "Running" if running else "Pending",
            "conditions": [
                self._condition("PodReadyToStartContainers", bool(self._containers)),
                self._condition("Initialized", True),
                self._condition("Ready", ready),
                self._condition("ContainersReady", ready),
                self._condition("PodScheduled", True),
            ],
            "hostIP": "127.0.0.1",
            "hostIPs": [{"ip": "127.0.0.1"}],
            "podIP": self.ip,
            "podIPs": [{"ip": self.ip}],
            "startTime": self._started,
            "containerStatuses": containers,
            "qosClass": "BestEffort",
        }
