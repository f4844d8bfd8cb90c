"""Fixtures for the emulator's tests: a server on its own thread and a real client bound to it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest
from kubernetes import watch

from coxswain_devkit.apiserver import ThreadedApiServer

# Small enough that a test can push a resourceVersion out of the watch window quickly.
TEST_WINDOW = 50
# Frequent enough that a test sees a BOOKMARK at once.
TEST_BOOKMARK_INTERVAL = 0.05


class FakeClock:
    """A clock a test moves by hand (token expiry)."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def new_watch() -> Any:
    """A `kubernetes.watch.Watch` (the package has no type hints)."""
    return watch.Watch()  # type: ignore[no-untyped-call]


def dynamic_client(client: Any) -> Any:
    return kubernetes.dynamic.DynamicClient(client)  # type: ignore[no-untyped-call]


@pytest.fixture
def apps(client: Any) -> Any:
    return kubernetes.client.AppsV1Api(client)


@pytest.fixture
def networking(client: Any) -> Any:
    return kubernetes.client.NetworkingV1Api(client)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def api(clock: FakeClock) -> Iterator[ThreadedApiServer]:
    with ThreadedApiServer(
        window=TEST_WINDOW, bookmark_interval=TEST_BOOKMARK_INTERVAL, clock=clock
    ) as server:
        yield server


@pytest.fixture
def client(api: ThreadedApiServer) -> Iterator[Any]:
    with kubernetes.client.ApiClient(kubernetes.client.Configuration(host=api.url)) as api_client:
        yield api_client


@pytest.fixture
def core(client: Any) -> Any:
    return kubernetes.client.CoreV1Api(client)


@pytest.fixture
def custom(client: Any) -> Any:
    return kubernetes.client.CustomObjectsApi(client)
