"""The Opaque Secrets an Ingress's TLS annotations name, through the running controller.

`auth-tls-secret` and `proxy-ssl-secret` usually name an Opaque Secret holding a ca.crt
(`kubectl create secret generic --from-file=ca.crt`), which the cluster-wide kubernetes.io/tls
watch never sees: each is watched alone, by name, as basic auth's is (sources/secrets.py). This
holds it end to end against the devkit API emulator through the real `kubernetes` client: the
CA reaches the published snapshot (the host's ClientCaStore; the backend's UpstreamTLS), a new
ca.crt is published again, and a deleted Secret leaves the Ingress unserved with a Warning
Event naming it. What each annotation translates to is the goldens' and client_tls_test's.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coxswain_controller.api.conftest import controller as running_controller
from coxswain_controller.api.conftest import until
from coxswain_controller.basic_auth_process_test import _backend, _put, _warnings
from coxswain_controller.kube import api as kube
from coxswain_controller.translate.scopes import SHARED_POOL
from coxswain_devkit import crds
from coxswain_devkit.apiserver import ThreadedApiServer
from coxswain_devkit.pki import CertificateAuthority
from coxswain_routing import ClientCaStore, HostRoutes

SECRETS = "/api/v1/namespaces/shop/secrets"
PREFIX = "nginx.ingress.kubernetes.io/"


def _ca_secret(name: str, authority: CertificateAuthority) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": name, "namespace": "shop"},
        "data": {"ca.crt": base64.b64encode(authority.certificate_pem).decode()},
    }


def _ingress(name: str, annotations: dict[str, str]) -> dict[str, Any]:
    path = {
        "path": "/",
        "pathType": "Prefix",
        "backend": {"service": {"name": "web", "port": {"number": 80}}},
    }
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "annotations": {PREFIX + k: v for k, v in annotations.items()},
        },
        "spec": {
            "ingressClassName": "coxswain",
            "rules": [{"host": f"{name}.example.com", "http": {"paths": [path]}}],
        },
    }


@pytest.fixture
def apiserver() -> Iterator[ThreadedApiServer]:
    with ThreadedApiServer() as server:
        server.call(lambda s: s.apply(crds.standard() + crds.coxswain()))
        server.call(lambda s: s.apply(_backend()))
        yield server


def _resources(rt: Any) -> tuple[Any, ...]:
    result = rt.publisher.result
    return () if result is None else tuple(result.snapshots.get(SHARED_POOL, ()))


def _client_cas(rt: Any) -> dict[str, bytes]:
    return {r.key: r.ca_bundle_pem for r in _resources(rt) if isinstance(r, ClientCaStore)}


def _backend_cas(rt: Any) -> dict[str, bytes]:
    """Each served host -> the CA its backend is verified with (b"": dialled in cleartext)."""
    found = {}
    for resource in _resources(rt):
        if isinstance(resource, HostRoutes) and resource.bind_port == 443:
            for rule in resource.rules:
                for backend in rule.backends:
                    tls = backend.tls
                    found[resource.host] = tls.ca_bundle_pem if tls is not None else b""
    return found


async def test_an_auth_tls_secret_is_read_its_new_ca_published_and_its_loss_refuses(
    apiserver: ThreadedApiServer, tmp_path: Path
) -> None:
    first, second = CertificateAuthority.create("first"), CertificateAuthority.create("second")
    apiserver.call(
        lambda s: s.apply(
            [_ca_secret("client-ca", first), _ingress("mtls", {"auth-tls-secret": "client-ca"})]
        )
    )
    key = "client-ca/443/mtls.example.com"
    async with running_controller(apiserver, tmp_path, []) as running:
        rt, client = running.runtime, running.runtime.client
        await until(lambda: _client_cas(rt) == {key: first.certificate_pem})

        await _put(client, _ca_secret("client-ca", second))
        await until(lambda: _client_cas(rt) == {key: second.certificate_pem})

        await asyncio.to_thread(kube.request, client, "DELETE", f"{SECRETS}/client-ca")
        await until(lambda: _client_cas(rt) == {} and "mtls.example.com" not in _backend_cas(rt))
        warning = "auth-tls-secret shop/client-ca not found; the Ingress's paths are not served"
        await _until_warned(client, "mtls", warning)


async def test_a_proxy_ssl_secret_is_read_and_its_new_ca_published(
    apiserver: ThreadedApiServer, tmp_path: Path
) -> None:
    first, second = CertificateAuthority.create("first"), CertificateAuthority.create("second")
    annotations = {
        "backend-protocol": "HTTPS",
        "proxy-ssl-secret": "backend-ca",
        "proxy-ssl-verify": "on",
        "proxy-ssl-name": "web.shop.internal",
    }
    apiserver.call(
        lambda s: s.apply([_ca_secret("backend-ca", first), _ingress("upstream", annotations)])
    )
    async with running_controller(apiserver, tmp_path, []) as running:
        rt, client = running.runtime, running.runtime.client
        await until(lambda: _backend_cas(rt) == {"upstream.example.com": first.certificate_pem})
        await _put(client, _ca_secret("backend-ca", second))
        await until(lambda: _backend_cas(rt) == {"upstream.example.com": second.certificate_pem})


async def _until_warned(client: Any, name: str, message: str) -> None:
    """`until` for the API server's Events (bounded the same way)."""
    async with asyncio.timeout(15.0):
        while not any(message in m for m in await _warnings(client, name)):  # noqa: ASYNC110
            await asyncio.sleep(0.05)
