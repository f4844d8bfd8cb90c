"""The emulated API server in the test's loop, a real client bound to it, and running Sources.

The client blocks, so tests call it through `asyncio.to_thread`, as the code under test does;
the server answers on the test's own loop meanwhile. Timings are shortened (backoff, bookmark
interval), never waited out: tests wait on the cache with `Cache.wait_until` and a timeout.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import kubernetes
import pytest
from prometheus_client import REGISTRY

from coxswain_controller.sources import backoff, cache, supervisor
from coxswain_controller.sources.reflector import WatchSettings
from coxswain_devkit.apiserver import ApiServer

# Small enough that a test can push a resourceVersion out of the watch window quickly.
WINDOW = 20
BOOKMARK_INTERVAL = 0.05
# Generous: a wait that times out is a failure, never the expected path.
WAIT = 20.0

FAST = WatchSettings(
    timeout_seconds=60,
    silence_seconds=30.0,
    request_timeout=10.0,
    page_size=2,  # so a list of a few objects is already paged
    backoff=backoff.Policy(initial=0.01, ceiling=0.1),
)


@pytest.fixture
async def api() -> AsyncIterator[ApiServer]:
    async with ApiServer(window=WINDOW, bookmark_interval=BOOKMARK_INTERVAL) as server:
        yield server


@pytest.fixture
def client(api: ApiServer) -> Any:
    configuration = kubernetes.client.Configuration(host=api.url)
    configuration.connection_pool_maxsize = 32  # one connection per open watch
    with kubernetes.client.ApiClient(configuration) as api_client:
        yield api_client


@pytest.fixture
async def sources(client: Any) -> AsyncIterator[supervisor.Sources]:
    running = supervisor.Sources(client, settings=FAST)
    running.start()
    yield running
    await running.stop()


async def until(sources: supervisor.Sources, predicate: Callable[[cache.Snapshot], bool]) -> None:
    """Wait (bounded) until the cache's snapshot satisfies `predicate`."""
    async with asyncio.timeout(WAIT):
        await sources.cache.wait_until(lambda: predicate(sources.cache.snapshot()))


async def bounded(awaitable: Awaitable[Any]) -> Any:
    async with asyncio.timeout(WAIT):
        return await awaitable


def restarts(kind: str, reason: str) -> float:
    labels = {"kind": kind, "reason": reason}
    return REGISTRY.get_sample_value("coxswain_controller_watch_restarts_total", labels) or 0.0


def service(name: str, namespace: str = "default", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"ports": [{"port": 80}]},
    }


def names(snapshot: cache.Snapshot, kind: str) -> set[str]:
    return {name for _, name in snapshot.of(kind)}
