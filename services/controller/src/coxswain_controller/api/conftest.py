"""A real controller (`runtime.Runtime`) against the devkit API emulator, its admin server with
the operator API on 127.0.0.1, a test proxy over real mTLS, and real bearer tokens.

`running` sets access to `allowlist` mode: the ServiceAccount `ops/viewer` is in the allowed
group; `shop/stranger` authenticates but is not. sar_test.py runs `controller` in the default
`sar` mode against an emulator enforcing RBAC.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import kubernetes
import pytest

from coxswain_controller import cli, runtime
from coxswain_controller.conftest import Controller
from coxswain_devkit import crds
from coxswain_devkit.apiserver import ThreadedApiServer
from coxswain_devkit.pki import CertificateAuthority
from coxswain_service.readiness import Readiness

WAIT = 15.0
GROUP, VERSION = "gateway.networking.k8s.io", "v1"


def _ns(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def _sa(ns: str, name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": ns},
    }


def _route(name: str, rule: dict[str, Any], hostnames: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"parentRefs": [{"name": "gw"}], "hostnames": hostnames, "rules": [rule]},
    }


MANIFESTS: list[dict[str, Any]] = [
    _ns("shop"),
    _ns("ops"),
    _sa("ops", "viewer"),
    _sa("shop", "stranger"),
    {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "GatewayClass",
        "metadata": {"name": "coxswain"},
        "spec": {"controllerName": "coxswain-labs.dev/gateway-controller"},
    },
    {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "shop"},
        "spec": {
            "gatewayClassName": "coxswain",
            "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
        },
    },
    _route(
        "web",
        {"backendRefs": [{"name": "web", "port": 80, "weight": 3}]},
        ["shop.example.com"],
    ),
    _route(
        "api",
        {
            "matches": [{"path": {"type": "PathPrefix", "value": "/api"}, "method": "POST"}],
            "backendRefs": [{"name": "web", "port": 80}],
        },
        ["shop.example.com"],
    ),
    _route("broken", {"backendRefs": [{"name": "missing", "port": 80}]}, ["broken.example.com"]),
    {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
    },
    {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "web-1",
            "namespace": "shop",
            "labels": {"kubernetes.io/service-name": "web"},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080}],
        "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": True}}],
    },
    {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {
            "name": "cert",
            "namespace": "shop",
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": '{"data": 1}'},
        },
        "data": {"tls.crt": "Y2VydA==", "tls.key": "a2V5"},
    },
]


@dataclass
class Running:
    url: str  # the admin server
    runtime: runtime.Runtime
    discovery: Controller  # a handle to open proxy streams with
    core: Any  # CoreV1Api against the emulator
    http: aiohttp.ClientSession

    def token(self, namespace: str, name: str) -> str:
        spec: dict[str, Any] = {"spec": {}}
        return str(
            self.core.create_namespaced_service_account_token(name, namespace, spec).status.token
        )

    async def get(
        self, path: str, token: str | None = None, params: dict[str, str] | None = None
    ) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with self.http.get(self.url + path, headers=headers, params=params or {}) as response:
            return response.status, await response.json()


@pytest.fixture
def apiserver() -> Iterator[ThreadedApiServer]:
    with ThreadedApiServer() as server:
        server.call(lambda s: s.apply(crds.standard()))
        server.call(lambda s: s.apply(MANIFESTS))
        yield server


@pytest.fixture
async def running(apiserver: ThreadedApiServer, tmp_path: Path) -> AsyncIterator[Running]:
    allowlist = ["--api-authorization=allowlist", "--api-allowed-groups=system:serviceaccounts:ops"]
    async with controller(apiserver, tmp_path, allowlist) as started:
        yield started


@contextlib.asynccontextmanager
async def controller(
    apiserver: ThreadedApiServer, tmp_path: Path, access: list[str]
) -> AsyncIterator[Running]:
    """The controller against `apiserver`, its operator API's access set by `access` flags."""
    ca = CertificateAuthority.create()
    (tmp_path / "ca.crt").write_bytes(ca.certificate_pem)
    (tmp_path / "ca.key").write_bytes(ca.key_pem)
    args = cli.parse(
        [
            "serve",
            f"--api-server={apiserver.url}",
            "--no-leader-election",
            f"--ca-cert-file={tmp_path / 'ca.crt'}",
            f"--ca-key-file={tmp_path / 'ca.key'}",
            "--discovery-address=127.0.0.1",
            "--discovery-port=0",
            *access,
        ]
    )
    rt = runtime.Runtime(args, Readiness())
    server = cli.admin_server(args, rt)
    (address, port), *_ = await server.start("127.0.0.1", 0)
    await rt.start()
    api_client = kubernetes.client.ApiClient(kubernetes.client.Configuration(host=apiserver.url))
    http = aiohttp.ClientSession()
    try:
        await until(lambda: rt.discovery_port is not None and rt.readiness.ready)
        assert rt.discovery_port is not None
        handle = Controller(ca, rt.discovery_port, rt.registry, rt.nodes, rt.leadership)
        yield Running(
            f"http://{address}:{port}", rt, handle, kubernetes.client.CoreV1Api(api_client), http
        )
        for channel in handle.channels:
            await channel.close()
    finally:
        await http.close()
        await rt.stop()
        await server.stop()
        await asyncio.to_thread(api_client.close)


async def until(predicate: Callable[[], bool]) -> None:
    """Wait (on the loop, not a clock bound) for `predicate()`; fail after WAIT seconds."""
    async with asyncio.timeout(WAIT):
        while not predicate():  # noqa: ASYNC110 (nodes change inside gRPC streams; no event)
            await asyncio.sleep(0.02)
