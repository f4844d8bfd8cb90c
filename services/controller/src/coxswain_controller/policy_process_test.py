"""CoxswainPolicy through the running controller: watched, translated, published.

The goldens hold what a policy compiles to; this holds that the controller process feeds the
kind to translation at all (it reads only the kinds `translate.inputs.KINDS` lists): a policy on
a Gateway reaches the shared pool's published rules, and an edit to it is published again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from coxswain_controller.api.conftest import controller as running_controller
from coxswain_controller.api.conftest import until
from coxswain_controller.kube import api as kube
from coxswain_controller.translate.scopes import SHARED_POOL
from coxswain_devkit import crds
from coxswain_devkit.apiserver import ThreadedApiServer
from coxswain_routing import HostRoutes

GROUP = "gateway.networking.k8s.io/v1"
POLICY_PATH = "/apis/coxswain-labs.dev/v1alpha1/namespaces/shop/coxswainpolicies/limits"
MANIFESTS: list[dict[str, Any]] = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}},
    {
        "apiVersion": GROUP,
        "kind": "GatewayClass",
        "metadata": {"name": "coxswain"},
        "spec": {"controllerName": "coxswain-labs.dev/gateway-controller"},
    },
    {
        "apiVersion": GROUP,
        "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "shop"},
        "spec": {
            "gatewayClassName": "coxswain",
            "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
        },
    },
    {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"ports": [{"name": "http", "port": 80}]},
    },
    {
        "apiVersion": GROUP,
        "kind": "HTTPRoute",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "parentRefs": [{"name": "gw"}],
            "hostnames": ["shop.example.com"],
            "rules": [{"backendRefs": [{"name": "web", "port": 80}]}],
        },
    },
    {
        "apiVersion": "coxswain-labs.dev/v1alpha1",
        "kind": "CoxswainPolicy",
        "metadata": {"name": "limits", "namespace": "shop"},
        "spec": {
            "targetRefs": [{"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": "gw"}],
            "maxBodyBytes": 1024,
        },
    },
]


@pytest.fixture
def apiserver() -> Iterator[ThreadedApiServer]:
    with ThreadedApiServer() as server:
        server.call(lambda s: s.apply(crds.standard() + crds.coxswain()))
        server.call(lambda s: s.apply(MANIFESTS))
        yield server


def _body_limits(rt: Any) -> set[int]:
    result = rt.publisher.result
    if result is None:
        return set()
    return {
        rule.policy.max_body_bytes
        for resource in result.snapshots.get(SHARED_POOL, ())
        if isinstance(resource, HostRoutes)
        for rule in resource.rules
        if rule.policy is not None
    }


async def test_a_gateways_policy_is_published_and_its_edit_too(
    apiserver: ThreadedApiServer, tmp_path: Path
) -> None:
    async with running_controller(apiserver, tmp_path, []) as running:
        await until(lambda: _body_limits(running.runtime) == {1024})
        client = running.runtime.client
        body = {"spec": {"maxBodyBytes": 2048}}
        await asyncio.to_thread(
            kube.request,
            client,
            "PATCH",
            POLICY_PATH,
            body=body,
            content_type=kube.MERGE_PATCH,
        )
        await until(lambda: _body_limits(running.runtime) == {2048})
