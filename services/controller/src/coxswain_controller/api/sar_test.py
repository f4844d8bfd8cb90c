"""The operator API's default access mode: TokenReview, then a SubjectAccessReview per area.

Against the devkit emulator with RBAC enforced (`ThreadedApiServer(rbac=True)`): a ClusterRole
grants `get` on the virtual resource `controller-api/fleet` (group coxswain-labs.dev) to one
ServiceAccount, which then reads the fleet but not manifests; another ServiceAccount with no
binding reads neither; a token that is not valid is 401. The controller itself holds no
credentials here, which the emulator takes as its admin (it may create the reviews).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from coxswain_controller.api.conftest import MANIFESTS, Running, controller
from coxswain_devkit import crds
from coxswain_devkit.apiserver import ThreadedApiServer

RBAC = "rbac.authorization.k8s.io/v1"
GRANT: list[dict[str, Any]] = [
    {
        "apiVersion": RBAC,
        "kind": "ClusterRole",
        "metadata": {"name": "coxswain-fleet-reader"},
        "rules": [
            {
                "apiGroups": ["coxswain-labs.dev"],
                "resources": ["controller-api/fleet"],
                "verbs": ["get"],
            }
        ],
    },
    {
        "apiVersion": RBAC,
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "ops-viewer-fleet"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "coxswain-fleet-reader",
        },
        "subjects": [{"kind": "ServiceAccount", "namespace": "ops", "name": "viewer"}],
    },
]


@pytest.fixture
def rbac_apiserver() -> Iterator[ThreadedApiServer]:
    with ThreadedApiServer(rbac=True) as server:
        server.call(lambda s: s.apply(crds.standard()))
        server.call(lambda s: s.apply(MANIFESTS + GRANT))
        yield server


@pytest.fixture
async def reviewed(rbac_apiserver: ThreadedApiServer, tmp_path: Path) -> AsyncIterator[Running]:
    async with controller(rbac_apiserver, tmp_path, ["--api-authorization=sar"]) as started:
        yield started


async def test_a_role_on_the_virtual_resource_opens_exactly_its_area(reviewed: Running) -> None:
    viewer = reviewed.token("ops", "viewer")
    status, body = await reviewed.get("/api/v1/fleet", viewer)
    assert status == 200, body
    status, body = await reviewed.get("/api/v1/manifests/HTTPRoute/shop/web", viewer)
    assert status == 403, body
    assert "controller-api/manifests" in str(body)


async def test_no_binding_is_forbidden_and_a_bad_token_unauthenticated(reviewed: Running) -> None:
    stranger = reviewed.token("shop", "stranger")
    status, _ = await reviewed.get("/api/v1/fleet", stranger)
    assert status == 403
    status, _ = await reviewed.get("/api/v1/fleet", "not-a-token")
    assert status == 401
    status, _ = await reviewed.get("/api/v1/health")  # open, as /healthz is
    assert status == 200
