"""`/api/v1/migration/ingresses` over HTTP against a running controller and the API emulator.

Covers: every Ingress of the cluster reported, ours and another controller's (read as if
ours), each annotation's fate with why, the HTTPRoutes and the CoxswainPolicy; the same
verdicts as the CLI's report over the same manifests; an Ingress of another class whose
htpasswd Secret is fetched for the report (and not watched) while no Secret data reaches the
answer; `gateway=`, one Ingress by name, the YAML and manifests formats, bad parameters, and
who may read it. What each annotation becomes is report_test's and the goldens'.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from coxswain_controller.api.conftest import MANIFESTS, Running
from coxswain_controller.translate import Options
from coxswain_controller.translate.ingress.report import migration_report
from coxswain_devkit import crds
from coxswain_devkit.apiserver import ThreadedApiServer

P = "nginx.ingress.kubernetes.io/"
# {SHA} of "secret": the htpasswd line whose data must never reach an answer.
HTPASSWD = "alice:{SHA}5en6G6MezRroT3XKqkdPOmY/BfQ=\n"
ENCODED = base64.b64encode(HTPASSWD.encode()).decode()


def _secret(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": {"name": name, "namespace": "shop"},
        "data": {"auth": ENCODED},
    }


def _class(name: str, controller: str) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "IngressClass",
        "metadata": {"name": name},
        "spec": {"controller": controller},
    }


def _ingress(name: str, ingress_class: str, annotations: dict[str, str]) -> dict[str, Any]:
    backend = {"service": {"name": "web", "port": {"number": 80}}}
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name, "namespace": "shop", "annotations": annotations},
        "spec": {
            "ingressClassName": ingress_class,
            "rules": [
                {
                    "host": f"{name}.example.com",
                    "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": backend}]},
                }
            ],
        },
    }


INGRESSES: list[dict[str, Any]] = [
    _class("coxswain", "coxswain-labs.dev/ingress-controller"),
    _class("nginx", "k8s.io/ingress-nginx"),
    _secret("ours-users"),
    _secret("legacy-users"),
    _ingress(
        "ours",
        "coxswain",
        {P + "auth-type": "basic", P + "auth-secret": "ours-users", P + "proxy-body-size": "1m"},
    ),
    _ingress(
        "legacy",
        "nginx",
        {
            P + "auth-type": "basic",
            P + "auth-secret": "legacy-users",
            P + "proxy-buffering": "on",
            P + "limit-rps": "10",
        },
    ),
    _ingress("snippet", "nginx", {P + "configuration-snippet": "more_set_headers 'X: y';"}),
]


@pytest.fixture
def apiserver() -> Iterator[ThreadedApiServer]:
    with ThreadedApiServer() as server:
        server.call(lambda s: s.apply(crds.standard() + crds.coxswain()))
        server.call(lambda s: s.apply(MANIFESTS + INGRESSES))
        yield server


async def _text(running: Running, path: str, token: str) -> tuple[int, str]:
    headers = {"Authorization": f"Bearer {token}"}
    async with running.http.get(running.url + path, headers=headers) as response:
        return response.status, await response.text()


def _fates(entry: dict[str, Any]) -> dict[str, str]:
    return {a["key"].removeprefix(P): a["fate"] for a in entry["annotations"]}


async def test_every_ingress_is_reported_with_its_fates_routes_and_policy(
    running: Running,
) -> None:
    token = running.token("ops", "viewer")
    status, text = await _text(running, "/api/v1/migration/ingresses", token)
    assert status == 200
    assert ENCODED not in text and "5en6G6MezRroT3XKqkdPOmY" not in text  # no Secret data
    report = {e["ingress"]: e for e in yaml.safe_load(text)["ingresses"]}
    assert set(report) == {"shop/ours", "shop/legacy", "shop/snippet"}

    legacy = report["shop/legacy"]
    assert legacy["ingressClass"].startswith("nginx (not Coxswain's")
    assert legacy["served"] is True  # its Secret was read for the report
    fates = _fates(legacy)
    assert fates == {"auth-secret": "honoured", "auth-type": "honoured",
                     "limit-rps": "honoured", "proxy-buffering": "ignored"}  # fmt: skip
    [route] = legacy["httpRoutes"]
    assert route["spec"]["parentRefs"] == [{"name": "gateway"}]
    assert route["spec"]["hostnames"] == ["legacy.example.com"]
    [policy] = legacy["coxswainPolicies"]
    assert policy["kind"] == "CoxswainPolicy"
    assert policy["spec"]["targetRefs"] == [
        {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "name": "legacy"}
    ]
    assert policy["spec"]["basicAuth"]["secretRef"] == {"name": "legacy-users"}
    assert policy["spec"]["rateLimits"] == [
        {"requests": 10, "per": "Second", "burst": 50, "key": "ClientAddress"}
    ]

    snippet = report["shop/snippet"]
    assert snippet["served"] is False and "httpRoutes" not in snippet
    [refused] = snippet["annotations"]
    assert refused["fate"] == "refused" and "snippet" in refused["note"]

    # Read for the report, never watched: the cache holds only the Secret Coxswain serves.
    assert running.runtime.sources is not None
    cached = running.runtime.sources.cache.snapshot().of("Secret")
    assert ("shop", "ours-users") in cached and ("shop", "legacy-users") not in cached


async def test_the_verdicts_are_the_clis_over_the_same_manifests(running: Running) -> None:
    token = running.token("ops", "viewer")
    _, body = await running.get("/api/v1/migration/ingresses", token)
    offline = migration_report(copy.deepcopy(MANIFESTS + INGRESSES), Options())
    assert [(e["ingress"], e["served"], e["annotations"]) for e in body["ingresses"]] == [
        (e["ingress"], e["served"], e["annotations"]) for e in offline
    ]
    assert [e.get("coxswainPolicies") for e in body["ingresses"]] == [
        e.get("coxswainPolicies") for e in offline
    ]


async def test_one_ingress_a_gateway_and_the_yaml_shapes(running: Running) -> None:
    token = running.token("ops", "viewer")
    status, entry = await running.get(
        "/api/v1/migration/ingresses/shop/ours", token, {"gateway": "infra/public"}
    )
    assert status == 200 and entry["ingress"] == "shop/ours"
    [route] = entry["httpRoutes"]
    assert route["spec"]["parentRefs"] == [{"name": "public", "namespace": "infra"}]
    assert entry["coxswainPolicies"][0]["spec"]["maxBodyBytes"] == 1024 * 1024

    status, text = await _text(running, "/api/v1/migration/ingresses?format=manifests", token)
    assert status == 200
    kinds = [(m["kind"], m["metadata"]["name"]) for m in yaml.safe_load_all(text)]
    assert kinds == [("HTTPRoute", "legacy"), ("CoxswainPolicy", "legacy"),
                     ("HTTPRoute", "ours"), ("CoxswainPolicy", "ours")]  # fmt: skip
    status, text = await _text(
        running, "/api/v1/migration/ingresses/shop/snippet?format=yaml", token
    )
    assert status == 200
    [document] = yaml.safe_load_all(text)
    assert document["ingress"] == "shop/snippet" and document["served"] is False


async def test_bad_parameters_an_unknown_ingress_and_access(running: Running) -> None:
    viewer = running.token("ops", "viewer")
    path = "/api/v1/migration/ingresses"
    assert (await running.get(path, viewer, {"gateway": "a/b/c"}))[0] == 400
    assert (await running.get(path, viewer, {"format": "xml"}))[0] == 400
    status, body = await running.get(f"{path}/shop/nope", viewer)
    assert status == 404 and "shop/nope" in body["error"]["message"]
    assert (await running.get(path))[0] == 401
    assert (await running.get(path, running.token("shop", "stranger")))[0] == 403
