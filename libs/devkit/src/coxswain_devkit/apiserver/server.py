"""`ApiServer`: the emulator's parts put together on one aiohttp site, with its lifecycle.

Start it inside a test's event loop (`async with ApiServer() as api:` gives `api.url`), or in a
thread of its own (`threaded.ThreadedApiServer`) for code that uses the blocking `kubernetes`
client. The objects live in the `ApiServer`, not in the HTTP site, so `restart()` can drop every
connection and bring the same port back with the same objects, as a restarted API server does
(watch history is lost across it: resuming from any resourceVersion seen before gets 410).
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import TracebackType
from typing import Any

import yaml
from aiohttp import web

from coxswain_devkit.apiserver import manifests, rbac, watch
from coxswain_devkit.apiserver.access import Access
from coxswain_devkit.apiserver.auth import Tokens
from coxswain_devkit.apiserver.faults import Faults
from coxswain_devkit.apiserver.gc import Collector
from coxswain_devkit.apiserver.handlers import Api
from coxswain_devkit.apiserver.machinery import Machinery
from coxswain_devkit.apiserver.meta import Clock, system_clock
from coxswain_devkit.apiserver.registry import Registry
from coxswain_devkit.apiserver.store import Obj, Store

log = logging.getLogger("coxswain_devkit.apiserver")

# How long in-flight requests get when the server stops or restarts.
SHUTDOWN_GRACE_SECONDS = 1.0


class ApiServer:
    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        window: int = 1000,
        bookmark_interval: float = 60.0,
        clock: Clock = system_clock,
        rbac: bool = False,
    ) -> None:
        self.host = host
        self.port = port
        self.store = Store(window=window)
        self.registry = Registry()
        self.machinery = Machinery(self.store, self.registry, clock=clock)
        self.collector = Collector(self.machinery)
        self.tokens = Tokens(self.machinery, clock=clock)
        # RBAC enforced for every identity but the admin (a request without credentials).
        self.access = Access(self.tokens, self.store, enforce=rbac)
        self.faults = Faults(self.store)
        self._watch = watch.Context(
            self.store, self.registry, self.faults, bookmark_interval, clock
        )
        self._runner: web.AppRunner | None = None
        self.machinery.bootstrap()
        if rbac:
            self._bootstrap_policy()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> ApiServer:
        app = Api(self.machinery, self.tokens, self._watch, access=self.access).application()
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=SHUTDOWN_GRACE_SECONDS)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, reuse_address=True)
        await site.start()
        self._runner = runner
        self.port = runner.addresses[0][1]
        log.info("apiserver listening", extra={"fields": {"address": self.host, "port": self.port}})
        return self

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            self.faults.close_watches()
            self.faults.resume()
            await runner.cleanup()

    async def restart(self) -> None:
        """Stop serving, then serve again on the same port with the same objects, no history."""
        await self.stop()
        self.store.compact()
        await self.start()

    def _bootstrap_policy(self) -> None:
        """The default ClusterRoles and bindings a cluster starts with (`rbac.bootstrap_policy`)."""
        for obj in rbac.bootstrap_policy():
            kind = self.registry.by_kind(obj["apiVersion"], obj["kind"])
            assert kind is not None
            if self.store.get(self.machinery.key(kind, "", obj["metadata"]["name"])) is None:
                self.machinery.create(kind, "", obj)

    def apply(self, objects: list[Obj]) -> list[Obj]:
        """Create (or replace) objects directly, keeping their status; see `manifests`."""
        return manifests.load(self.machinery, objects)

    def apply_manifests(self, path: Path) -> list[Obj]:
        return self.apply(manifests.read_documents(path))

    def set_pod_log(self, namespace: str, name: str, text: str) -> None:
        """What `GET .../pods/<name>/log` answers for this Pod."""
        self.store.pod_logs[(namespace, name)] = text

    def kubeconfig(self, *, namespace: str = "default", token: str = "") -> dict[str, Any]:
        """A kubeconfig for this server: the admin's (no credentials), or a bearer `token`'s
        (the `kubernetes` client sends it over plain HTTP; kubectl only over TLS, so kubectl
        acts as others with `--as`)."""
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "devkit", "cluster": {"server": self.url}}],
            "users": [{"name": "devkit", "user": {"token": token} if token else {}}],
            "contexts": [
                {
                    "name": "devkit",
                    "context": {"cluster": "devkit", "user": "devkit", "namespace": namespace},
                }
            ],
            "current-context": "devkit",
        }

    def write_kubeconfig(self, path: Path, *, token: str = "") -> Path:
        path.write_text(yaml.safe_dump(self.kubeconfig(token=token)))
        return path

    async def __aenter__(self) -> ApiServer:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
