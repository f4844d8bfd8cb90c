"""Discovery and CRD-driven kinds, with the emulator in the test's own event loop.

Covers `/version`, `/api`, `/apis`, `/api/v1` (with the pods/log, serviceaccounts/token and
status subresources), `/apis/<group>/<version>`; the Gateway API group appearing when its CRDs
are applied (Established, every served version of each channel, preferred v1) and disappearing
with its objects when they are deleted; the `Warning: 299` header at a deprecated version; a
watch on a custom kind ending when its CRD goes; 422 for a CRD whose name is not
`<plural>.<group>`. Raw HTTP here; the real client's discovery (DynamicClient) too.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import kubernetes
import pytest

from coxswain_devkit import crds
from coxswain_devkit.apiserver import ApiServer
from coxswain_devkit.apiserver.conftest import dynamic_client

GATEWAY_GROUP = "gateway.networking.k8s.io"


@pytest.fixture
async def api() -> AsyncIterator[ApiServer]:
    async with ApiServer() as server:
        yield server


@pytest.fixture
async def http(api: ApiServer) -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(base_url=api.url) as session:
        yield session


async def _get(http: aiohttp.ClientSession, path: str) -> tuple[int, Any]:
    async with http.get(path) as response:
        return response.status, await response.json()


async def _send(
    http: aiohttp.ClientSession, method: str, path: str, body: Any = None
) -> tuple[int, Any]:
    async with http.request(method, path, json=body) as response:
        return response.status, await response.json()


def _resources(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r for r in doc["resources"]}


def _plurals(doc: dict[str, Any]) -> set[str]:
    """The resources of a discovery document, without their subresources."""
    return {name for name in _resources(doc) if "/" not in name}


async def test_version_and_core_discovery(http: aiohttp.ClientSession) -> None:
    assert (await _get(http, "/version"))[1]["major"] == "1"
    assert (await _get(http, "/api"))[1]["versions"] == ["v1"]
    status, core = await _get(http, "/api/v1")
    resources = _resources(core)
    assert status == 200
    assert {
        "namespaces",
        "services",
        "secrets",
        "configmaps",
        "serviceaccounts",
        "pods",
        "events",
    } <= set(resources)
    assert resources["serviceaccounts/token"]["kind"] == "TokenRequest"
    assert resources["pods/log"]["verbs"] == ["get"]
    assert resources["services/status"]["verbs"] == ["get", "patch", "update"]
    assert resources["namespaces"]["namespaced"] is False
    assert resources["configmaps"]["shortNames"] == ["cm"]


@pytest.mark.parametrize(
    ("group_version", "resource", "kind"),
    [
        pytest.param("apps/v1", "deployments", "Deployment", id="apps"),
        pytest.param("networking.k8s.io/v1", "ingresses", "Ingress", id="ingress"),
        pytest.param("networking.k8s.io/v1", "ingressclasses", "IngressClass", id="ingressclass"),
        pytest.param("discovery.k8s.io/v1", "endpointslices", "EndpointSlice", id="endpointslice"),
        pytest.param("coordination.k8s.io/v1", "leases", "Lease", id="lease"),
        pytest.param(
            "policy/v1", "poddisruptionbudgets", "PodDisruptionBudget", id="poddisruptionbudget"
        ),
        pytest.param("events.k8s.io/v1", "events", "Event", id="events"),
        pytest.param("authentication.k8s.io/v1", "tokenreviews", "TokenReview", id="tokenreview"),
        pytest.param(
            "apiextensions.k8s.io/v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            id="crd",
        ),
    ],
)
async def test_group_discovery(
    http: aiohttp.ClientSession, group_version: str, resource: str, kind: str
) -> None:
    _, groups = await _get(http, "/apis")
    assert group_version in {v["groupVersion"] for g in groups["groups"] for v in g["versions"]}
    status, doc = await _get(http, f"/apis/{group_version}")
    assert status == 200
    assert _resources(doc)[resource]["kind"] == kind


async def _apply_crds(http: aiohttp.ClientSession, docs: list[dict[str, Any]]) -> None:
    for crd in docs:
        status, _ = await _send(
            http, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd
        )
        assert status == 201


async def test_gateway_api_appears_with_its_crds_and_goes_with_them(
    http: aiohttp.ClientSession,
) -> None:
    assert (await _get(http, f"/apis/{GATEWAY_GROUP}/v1"))[0] == 404
    await _apply_crds(http, crds.experimental())
    _, groups = await _get(http, "/apis")
    gateway = next(g for g in groups["groups"] if g["name"] == GATEWAY_GROUP)
    assert gateway["preferredVersion"]["version"] == "v1"
    # Kubernetes' version order: GA, then beta, then alpha, higher numbers first.
    assert [v["version"] for v in gateway["versions"]] == ["v1", "v1beta1", "v1alpha3", "v1alpha2"]
    _, v1 = await _get(http, f"/apis/{GATEWAY_GROUP}/v1")
    assert _plurals(v1) == {
        "gatewayclasses",
        "gateways",
        "httproutes",
        "grpcroutes",
        "referencegrants",
        "backendtlspolicies",
        "listenersets",
        "tlsroutes",
        "tcproutes",
        "udproutes",
    }
    assert _plurals((await _get(http, f"/apis/{GATEWAY_GROUP}/v1alpha2"))[1]) == {
        "tlsroutes",
        "tcproutes",
        "udproutes",
    }
    assert _plurals((await _get(http, f"/apis/{GATEWAY_GROUP}/v1alpha3"))[1]) == {
        "tlsroutes",
        "backendtlspolicies",
    }
    assert _plurals((await _get(http, "/apis/gateway.networking.x-k8s.io/v1alpha1"))[1]) == {
        "xbackends",
        "xbackendtrafficpolicies",
        "xmeshes",
    }

    route = {
        "apiVersion": f"{GATEWAY_GROUP}/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "r"},
        "spec": {},
    }
    assert (
        await _send(http, "POST", f"/apis/{GATEWAY_GROUP}/v1/namespaces/default/httproutes", route)
    )[0] == 201
    status, old = await _get(http, f"/apis/{GATEWAY_GROUP}/v1beta1/namespaces/default/httproutes/r")
    assert (status, old["apiVersion"]) == (200, f"{GATEWAY_GROUP}/v1beta1"), (
        "every served version sees one object"
    )

    crd_path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/httproutes.{GATEWAY_GROUP}"
    assert (await _send(http, "DELETE", crd_path))[0] == 200
    assert (await _get(http, f"/apis/{GATEWAY_GROUP}/v1/namespaces/default/httproutes/r"))[0] == 404
    assert "httproutes" not in _resources((await _get(http, f"/apis/{GATEWAY_GROUP}/v1"))[1])
    await _apply_crds(
        http, [c for c in crds.standard() if c["spec"]["names"]["plural"] == "httproutes"]
    )
    assert (await _get(http, f"/apis/{GATEWAY_GROUP}/v1/namespaces/default/httproutes"))[1][
        "items"
    ] == [], "objects do not survive their CRD"


async def test_the_standard_channel_serves_every_kind_at_v1_and_no_alpha_version(
    http: aiohttp.ClientSession,
) -> None:
    await _apply_crds(http, crds.standard())
    _, group = await _get(http, f"/apis/{GATEWAY_GROUP}")
    assert [v["version"] for v in group["versions"]] == ["v1", "v1beta1"]
    assert {"tlsroutes", "tcproutes", "udproutes", "listenersets"} <= _plurals(
        (await _get(http, f"/apis/{GATEWAY_GROUP}/v1"))[1]
    )
    assert _plurals((await _get(http, f"/apis/{GATEWAY_GROUP}/v1beta1"))[1]) == {
        "gatewayclasses",
        "gateways",
        "httproutes",
        "referencegrants",
    }
    # The alpha versions are in the CRDs, unserved: a v1alpha2 TCPRoute is refused.
    assert (await _get(http, f"/apis/{GATEWAY_GROUP}/v1alpha2/tcproutes"))[0] == 404


async def test_a_deprecated_version_answers_with_its_warning(http: aiohttp.ClientSession) -> None:
    await _apply_crds(http, crds.experimental())
    route = {
        "apiVersion": f"{GATEWAY_GROUP}/v1alpha2",
        "kind": "TCPRoute",
        "metadata": {"name": "t"},
    }
    path = f"/apis/{GATEWAY_GROUP}/v1alpha2/namespaces/default/tcproutes"
    async with http.post(path, json=route) as created:
        assert created.status == 201
        assert created.headers["Warning"] == (
            '299 - "The v1alpha2 version of TCPRoute has been deprecated and will be removed in a '
            'future release of the API. Please upgrade to v1."'
        )
    async with http.get(f"/apis/{GATEWAY_GROUP}/v1/namespaces/default/tcproutes/t") as current:
        assert current.status == 200
        assert "Warning" not in current.headers
        assert (await current.json())["apiVersion"] == f"{GATEWAY_GROUP}/v1"
    async with http.get(f"{path}?watch=true&timeoutSeconds=1") as stream:
        assert stream.headers["Warning"].startswith('299 - "The v1alpha2 version of TCPRoute')


async def test_applied_crds_are_established(http: aiohttp.ClientSession) -> None:
    await _apply_crds(http, crds.standard()[:1])
    _, crd = await _get(
        http,
        f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gatewayclasses.{GATEWAY_GROUP}",
    )
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}


async def test_a_crd_name_must_be_plural_dot_group(http: aiohttp.ClientSession) -> None:
    crd = crds.standard()[0]
    crd["metadata"]["name"] = "wrong.example.com"
    status, body = await _send(
        http, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd
    )
    assert (status, body["reason"]) == (422, "Invalid")


async def test_a_watch_on_a_custom_kind_ends_when_its_crd_is_deleted(
    http: aiohttp.ClientSession,
) -> None:
    await _apply_crds(http, crds.standard())
    async with http.get(
        f"/apis/{GATEWAY_GROUP}/v1/gateways?watch=true&timeoutSeconds=60"
    ) as stream:
        crd_path = (
            f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gateways.{GATEWAY_GROUP}"
        )
        await _send(http, "DELETE", crd_path)
        assert await asyncio.wait_for(stream.read(), 10) == b""


async def test_the_dynamic_client_discovers_custom_kinds(api: ApiServer) -> None:
    api.apply(crds.standard())

    def discover() -> str:
        with kubernetes.client.ApiClient(kubernetes.client.Configuration(host=api.url)) as client:
            dynamic = dynamic_client(client)
            return str(
                dynamic.resources.get(api_version=f"{GATEWAY_GROUP}/v1", kind="HTTPRoute").name
            )

    assert await asyncio.to_thread(discover) == "httproutes"
