"""Fixtures for the emulator's tests: a server on its own thread, a real client bound to it, and
the real kubectl pointed at it."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from kubernetes import watch

from coxswain_devkit.apiserver import ThreadedApiServer

KUBECTL = "/usr/bin/kubectl"

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


class Kubectl:
    def __init__(self, kubeconfig: Path, cache: Path) -> None:
        self._base = [KUBECTL, "--kubeconfig", str(kubeconfig), "--cache-dir", str(cache)]

    def argv(self, *args: str) -> list[str]:
        return [*self._base, *args]

    def __call__(self, *args: str, stdin: str | None = None, ok: bool = True) -> str:
        done = subprocess.run(
            self.argv(*args), input=stdin, capture_output=True, text=True, timeout=60, check=False
        )
        if ok:
            assert done.returncode == 0, done.stderr
        return done.stdout + done.stderr


@pytest.fixture
def kubectl(api: ThreadedApiServer, tmp_path: Path) -> Kubectl:
    kubeconfig = api.call(lambda s: s.write_kubeconfig(tmp_path / "kubeconfig"))
    return Kubectl(kubeconfig, tmp_path / "cache")
