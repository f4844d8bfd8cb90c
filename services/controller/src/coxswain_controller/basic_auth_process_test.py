"""Basic auth from an Opaque htpasswd Secret, through the running controller.

The controller lists and watches only kubernetes.io/tls Secrets across the cluster; the Secret
an Ingress's `auth-secret` or a CoxswainPolicy's `basicAuth.secretRef` names is watched alone,
by name (sources/secrets.py). This holds it end to end against the devkit API emulator, through
the real `kubernetes` client: the Opaque Secret's users reach the published snapshot, an edit
to the Secret is published again, and deleting it leaves the Ingress's paths unserved with a
Warning Event naming the Secret (a CoxswainPolicy: Accepted False naming it). An Opaque Secret
nothing names never reaches the controller's cache. The request path's 401 and 200 are the
proxy's own tests; how each annotation translates is the goldens'.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coxswain_controller.api.conftest import controller as running_controller
from coxswain_controller.api.conftest import until
from coxswain_controller.kube import api as kube
from coxswain_controller.sources import supervisor
from coxswain_controller.translate.scopes import SHARED_POOL
from coxswain_devkit import crds
from coxswain_devkit.apiserver import ThreadedApiServer
from coxswain_routing import HostRoutes

GATEWAY_API = "gateway.networking.k8s.io/v1"
SECRETS = "/api/v1/namespaces/shop/secrets"
PREFIX = "nginx.ingress.kubernetes.io/"


def _sha(password: str) -> str:
    digest = hashlib.sha1(password.encode(), usedforsecurity=False).digest()
    return "{SHA}" + base64.b64encode(digest).decode()


def _htpasswd(name: str, *users: str) -> dict[str, Any]:
    lines = "".join(f"{user}:{_sha(user + '-pw')}\n" for user in users)
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": name, "namespace": "shop"},
        "data": {"auth": base64.b64encode(lines.encode()).decode()},
    }


def _backend() -> list[dict[str, Any]]:
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}},
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"ports": [{"name": "http", "port": 80}]},
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "IngressClass",
            "metadata": {"name": "coxswain"},
            "spec": {"controller": "coxswain-labs.dev/ingress-controller"},
        },
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "IngressClass",
            "metadata": {"name": "nginx"},
            "spec": {"controller": "k8s.io/ingress-nginx"},
        },
    ]


def _ingress(name: str, secret: str, ingress_class: str = "coxswain") -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "annotations": {
                PREFIX + "auth-type": "basic",
                PREFIX + "auth-secret": secret,
                PREFIX + "auth-realm": "Shop staff",
            },
        },
        "spec": {
            "ingressClassName": ingress_class,
            "rules": [
                {
                    "host": f"{name}.example.com",
                    "http": {
                        "paths": [
                            {
                                "path": "/",
                                "pathType": "Prefix",
                                "backend": {"service": {"name": "web", "port": {"number": 80}}},
                            }
                        ]
                    },
                }
            ],
        },
    }


def _gateway_and_policy() -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": GATEWAY_API,
            "kind": "GatewayClass",
            "metadata": {"name": "coxswain"},
            "spec": {"controllerName": "coxswain-labs.dev/gateway-controller"},
        },
        {
            "apiVersion": GATEWAY_API,
            "kind": "Gateway",
            "metadata": {"name": "gw", "namespace": "shop"},
            "spec": {
                "gatewayClassName": "coxswain",
                "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
            },
        },
        {
            "apiVersion": GATEWAY_API,
            "kind": "HTTPRoute",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {
                "parentRefs": [{"name": "gw"}],
                "hostnames": ["route.example.com"],
                "rules": [{"backendRefs": [{"name": "web", "port": 80}]}],
            },
        },
        {
            "apiVersion": "coxswain-labs.dev/v1alpha1",
            "kind": "CoxswainPolicy",
            "metadata": {"name": "staff", "namespace": "shop"},
            "spec": {
                "targetRefs": [
                    {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "web"}
                ],
                "basicAuth": {"secretRef": {"name": "route-users"}},
            },
        },
    ]


@pytest.fixture
def apiserver() -> Iterator[ThreadedApiServer]:
    with ThreadedApiServer() as server:
        server.call(lambda s: s.apply(crds.standard() + crds.coxswain()))
        server.call(lambda s: s.apply(_backend()))
        yield server


def _users(rt: Any, kind: str) -> dict[str, tuple[str, ...]]:
    """Each served rule's host -> the basic-auth users it asks for (none: no basic auth)."""
    result = rt.publisher.result
    if result is None:
        return {}
    found: dict[str, tuple[str, ...]] = {}
    for resource in result.snapshots.get(SHARED_POOL, ()):
        if not isinstance(resource, HostRoutes):
            continue
        for rule in resource.rules:
            if rule.id.kind == kind:
                basic = rule.policy.basic_auth if rule.policy is not None else None
                found[resource.host] = tuple(u for u, _ in basic.users) if basic else ()
    return found


def _sources(rt: Any) -> supervisor.Sources:
    assert rt.sources is not None
    sources: supervisor.Sources = rt.sources
    return sources


def _cached_secrets(rt: Any) -> set[str]:
    return {name for _, name in _sources(rt).cache.snapshot().of("Secret")}


async def _put(client: Any, secret: dict[str, Any]) -> None:
    path = f"{SECRETS}/{secret['metadata']['name']}"
    await asyncio.to_thread(kube.request, client, "PUT", path, body=secret)


async def _warnings(client: Any, name: str) -> list[str]:
    listed = await asyncio.to_thread(kube.request, client, "GET", "/api/v1/namespaces/shop/events")
    return [
        e.get("message", "")
        for e in listed.get("items") or ()
        if e.get("involvedObject", {}).get("name") == name and e.get("type") == "Warning"
    ]


async def test_an_opaque_htpasswd_secret_named_by_an_ingress_is_read_edited_and_deleted(
    apiserver: ThreadedApiServer, tmp_path: Path
) -> None:
    apiserver.call(
        lambda s: s.apply(
            [
                _htpasswd("staff", "alice"),
                _htpasswd("unnamed", "mallory"),  # named by nothing: never read
                _htpasswd("theirs", "eve"),  # named only by another controller's Ingress
                _ingress("shop", "staff"),
                _ingress("legacy", "theirs", ingress_class="nginx"),
            ]
        )
    )
    async with running_controller(apiserver, tmp_path, []) as running:
        rt, client = running.runtime, running.runtime.client
        await until(lambda: _users(rt, "Ingress") == {"shop.example.com": ("alice",)})
        assert _cached_secrets(rt) == {"staff"}
        assert set(_sources(rt).secrets.watched) == {("shop", "staff")}

        await _put(client, _htpasswd("staff", "bob", "carol"))
        await until(lambda: _users(rt, "Ingress") == {"shop.example.com": ("bob", "carol")})

        await asyncio.to_thread(kube.request, client, "DELETE", f"{SECRETS}/staff")
        await until(lambda: _users(rt, "Ingress") == {})  # not served rather than served open
        warning = "auth-secret shop/staff not found; the Ingress's paths are not served"
        await until_async(lambda: _has(client, "shop", warning))

        again = _htpasswd("staff", "dave")  # created again: served again
        await asyncio.to_thread(kube.request, client, "POST", SECRETS, body=again)
        await until(lambda: _users(rt, "Ingress") == {"shop.example.com": ("dave",)})


async def test_a_secret_no_longer_named_leaves_the_cache(
    apiserver: ThreadedApiServer, tmp_path: Path
) -> None:
    apiserver.call(lambda s: s.apply([_htpasswd("staff", "alice"), _ingress("shop", "staff")]))
    async with running_controller(apiserver, tmp_path, []) as running:
        rt, client = running.runtime, running.runtime.client
        await until(lambda: _cached_secrets(rt) == {"staff"})
        path = "/apis/networking.k8s.io/v1/namespaces/shop/ingresses/shop"
        patch = {"metadata": {"annotations": {PREFIX + "auth-type": None}}}
        await asyncio.to_thread(
            kube.request, client, "PATCH", path, body=patch, content_type=kube.MERGE_PATCH
        )
        await until(lambda: _users(rt, "Ingress") == {"shop.example.com": ()})
        await until(lambda: _cached_secrets(rt) == set() and not _sources(rt).secrets.watched)


async def test_a_coxswain_policys_opaque_secret_is_read_and_its_loss_is_a_condition(
    apiserver: ThreadedApiServer, tmp_path: Path
) -> None:
    apiserver.call(lambda s: s.apply([_htpasswd("route-users", "erin"), *_gateway_and_policy()]))
    async with running_controller(apiserver, tmp_path, []) as running:
        rt, client = running.runtime, running.runtime.client
        await until(lambda: _users(rt, "HTTPRoute") == {"route.example.com": ("erin",)})
        await asyncio.to_thread(kube.request, client, "DELETE", f"{SECRETS}/route-users")
        await until(lambda: _users(rt, "HTTPRoute") == {"route.example.com": ()})
        path = "/apis/coxswain-labs.dev/v1alpha1/namespaces/shop/coxswainpolicies/staff"
        said = "basicAuth: Secret shop/route-users not found"
        await until_async(lambda: _condition_says(client, path, said))


async def _has(client: Any, name: str, message: str) -> bool:
    return any(message in m for m in await _warnings(client, name))


async def _condition_says(client: Any, path: str, message: str) -> bool:
    policy = await asyncio.to_thread(kube.request, client, "GET", path)
    ancestors = (policy.get("status") or {}).get("ancestors") or ()
    return any(
        c.get("status") == "False" and message in c.get("message", "")
        for a in ancestors
        for c in a.get("conditions") or ()
    )


async def until_async(predicate: Any) -> None:
    """`until` for a predicate that asks the API server (bounded the same way)."""
    async with asyncio.timeout(15.0):
        while not await predicate():  # noqa: ASYNC110 (the API server's state; no event here)
            await asyncio.sleep(0.05)
