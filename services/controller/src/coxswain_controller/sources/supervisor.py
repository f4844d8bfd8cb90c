"""`Sources`: the reflectors, the one consumer that feeds the cache, and Gateway API probing.

Flow: probe the Gateway API group (retrying until the API server answers), then start one
reflector per built-in kind, one for CRDs, and one per Gateway API kind the server serves. Every
reflector emits into one queue; one consumer applies each event to the cache, in order. A CRD
event for the Gateway API group wakes the supervisor, which probes again and starts or stops
Gateway API reflectors to match: spec 002's Ingress-only mode is simply "no Gateway API kinds
served", entered and left at run time. A stopped kind's objects leave the cache with it.

Beside the kinds, one watch per Secret that basic auth names (`secrets`): the consumer's cache
follows each event with `SecretWatches.follow`, which starts and stops them as Ingresses and
CoxswainPolicies come to name Secrets and stop naming them.

Reflectors block in the `kubernetes` client, one thread per open watch, so they get their own
thread pool (sized for every kind at once) rather than starving the default one.
"""

from __future__ import annotations

import asyncio
import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from prometheus_client import Gauge

from coxswain_controller.kube import api as kube
from coxswain_controller.sources import backoff, cache, kinds, probe, reflector, secrets
from coxswain_controller.sources.reflector import WatchSettings
from coxswain_controller.translate.inputs import Options
from coxswain_service import tasks

log = logging.getLogger(__name__)

GATEWAY_API_SERVED = Gauge(
    "coxswain_controller_gateway_api_served",
    "1 when the API server serves the Gateway API group, 0 in Ingress-only mode.",
)

# One thread per open watch, plus a few for lists, discovery and closing streams.
_THREADS = len(kinds.CORE) + len(kinds.GATEWAY) + 1 + 8


class Sources:
    def __init__(
        self,
        client: Any,
        *,
        settings: WatchSettings | None = None,
        ingress_controller: str = Options.ingress_controller,
        on_access: reflector.AccessReport | None = None,
    ) -> None:
        self._client = client
        self._settings = settings or WatchSettings()
        self._on_access = on_access  # each kind's 403s (and their end), for readiness
        self._queue: asyncio.Queue[cache.Event] = asyncio.Queue()
        # The Secrets basic auth names: the Ingresses of `ingress_controller`'s classes, and
        # every CoxswainPolicy.
        self.secrets = secrets.SecretWatches(
            client,
            emit=self._queue.put_nowait,
            settings=self._settings,
            ingress_controller=ingress_controller,
        )
        self.cache = cache.Cache(follow=self.secrets.follow)
        self._executor = ThreadPoolExecutor(_THREADS, thread_name_prefix="coxswain-watch")
        self._reflectors: dict[str, tuple[reflector.Reflector, asyncio.Task[None]]] = {}
        self._reprobe = asyncio.Event()
        self._tasks: list[asyncio.Task[Any]] = []
        self._stopped: set[asyncio.Task[None]] = set()  # cancelled reflectors, still unwinding
        self.gateway_api_served = False
        self._probed = False

    @property
    def reflectors(self) -> dict[str, reflector.Reflector]:
        """The running reflectors by kind name."""
        return {name: entry[0] for name, entry in self._reflectors.items()}

    def start(self) -> None:
        """Start watching; returns at once. `cache.synced` tells when every kind is listed."""
        self._tasks = [
            tasks.spawn(self._consume(), name="sources-consumer"),
            tasks.spawn(self._supervise(), name="sources-supervisor"),
        ]

    async def stop(self) -> None:
        await tasks.cancel(*self._tasks)
        await tasks.cancel(*(task for _, task in self._reflectors.values()), *self._stopped)
        self._reflectors.clear()
        await self.secrets.stop()
        # Not cancel_futures: the queued work is the cancelled reflectors closing their streams.
        await asyncio.to_thread(self._executor.shutdown, wait=True)

    async def _consume(self) -> None:
        while True:
            event = await self._queue.get()
            self.cache.handle(event)
            if event.kind.name == kinds.CRD.name and _concerns_gateway_api(event):
                self._reprobe.set()

    async def _supervise(self) -> None:
        self._start_reflectors((kinds.CRD, *kinds.CORE, *await self._probe()))
        while True:
            await self._reprobe.wait()
            self._reprobe.clear()
            self._reconcile(await self._probe())

    async def _probe(self) -> tuple[kinds.Kind, ...]:
        """The Gateway API kinds served, asking until the API server answers."""
        retry = backoff.Backoff(self._settings.backoff)
        while True:
            try:
                served = await asyncio.get_running_loop().run_in_executor(
                    self._executor, self._probe_blocking
                )
                break
            except kube.KubeError as exc:
                log.warning("gateway api probe failed", extra={"fields": {"error": str(exc)}})
                await asyncio.sleep(retry.next())
        gateway, coxswain = served
        found = kinds.gateway_kinds(gateway)
        self._served(bool(found))
        return found + kinds.coxswain_kinds(coxswain)

    def _probe_blocking(self) -> tuple[dict[str, frozenset[str]], dict[str, frozenset[str]]]:
        timeout = self._settings.request_timeout
        return (
            probe.served(self._client, timeout=timeout),
            probe.served(self._client, timeout=timeout, group_name=kinds.COXSWAIN_GROUP),
        )

    def _served(self, served: bool) -> None:
        if served != self.gateway_api_served or not self._probed:
            mode = "gateway api and ingress" if served else "ingress only"
            log.info("watching", extra={"fields": {"mode": mode}})
        self.gateway_api_served, self._probed = served, True
        GATEWAY_API_SERVED.set(1 if served else 0)

    def _reconcile(self, wanted: tuple[kinds.Kind, ...]) -> None:
        by_name = {kind.name: kind for kind in wanted}
        for name in kinds.OPTIONAL_NAMES & self._reflectors.keys():
            if by_name.get(name) != self._reflectors[name][0].kind:
                self._stop_reflector(name)
        self._start_reflectors(tuple(k for k in wanted if k.name not in self._reflectors))

    def _start_reflectors(self, wanted: tuple[kinds.Kind, ...]) -> None:
        # Every Started is queued before any reflector runs, so `synced` waits for them all.
        for kind in wanted:
            self._queue.put_nowait(cache.Started(kind))
        for kind in wanted:
            watcher = reflector.Reflector(
                self._client,
                kind,
                self._queue.put_nowait,
                executor=self._executor,
                settings=self._settings,
                on_access=self._on_access,
            )
            task = tasks.spawn(watcher.run(), name=f"reflector-{kind.name}")
            self._reflectors[kind.name] = (watcher, task)
            log.info(
                "watch started", extra={"fields": {"kind": kind.name, "version": kind.version}}
            )

    def _stop_reflector(self, name: str) -> None:
        watcher, task = self._reflectors.pop(name)
        if watcher.refused and self._on_access is not None:
            self._on_access(watcher.kind, None)  # not watched any more: no longer awaited
        # Cancelled before its next step, the reflector emits nothing more: Stopped comes last.
        task.cancel()
        self._stopped.add(task)
        task.add_done_callback(self._stopped.discard)
        self._queue.put_nowait(cache.Stopped(watcher.kind))
        log.info("watch stopped", extra={"fields": {"kind": name}})


def _concerns_gateway_api(event: cache.Event) -> bool:
    if isinstance(event, cache.Listed):
        return any(_is_gateway_crd(obj) for obj in event.items)
    return isinstance(event, cache.Changed) and _is_gateway_crd(event.obj)


def _is_gateway_crd(obj: kube.JSON) -> bool:
    """A CRD of a group whose kinds are watched only while served (the Gateway API's, ours)."""
    return obj.get("spec", {}).get("group") in (kinds.GATEWAY_GROUP, kinds.COXSWAIN_GROUP)
