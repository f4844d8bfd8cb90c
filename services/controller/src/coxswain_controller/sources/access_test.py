"""A kind the controller's role may not watch, against the emulator enforcing RBAC.

Covers: a 403 on a watch is reported (`on_access`) naming the verb, the resource and the
server's refusal (which names the ServiceAccount), the reflector keeps retrying rather than
ending, and the report is withdrawn once the role grants the verb again; the other kinds sync
meanwhile. How the running controller shows it (/readyz) is the install e2e's
(tests/e2e/install_test.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import kubernetes
import pytest

from coxswain_controller.sources import kinds, supervisor
from coxswain_controller.sources.conftest import FAST, bounded
from coxswain_devkit.apiserver import ApiServer

NS = "coxswain-system"
RBAC = "rbac.authorization.k8s.io"


def _role(watchable: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": f"{RBAC}/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "controller"},
        "rules": [
            {"apiGroups": ["*"], "resources": ["*"], "verbs": ["get", "list"]},
            {"apiGroups": ["*"], "resources": watchable, "verbs": ["watch"]},
        ],
    }


ALL = sorted({k.plural for k in (kinds.CRD, *kinds.CORE)})


@pytest.fixture
async def rbac_api() -> AsyncIterator[ApiServer]:
    async with ApiServer(rbac=True, bookmark_interval=0.05) as server:
        server.apply(
            [
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}},
                {"apiVersion": "v1", "kind": "ServiceAccount",
                 "metadata": {"name": "controller", "namespace": NS}},
                _role([p for p in ALL if p != "services"]),
                {"apiVersion": f"{RBAC}/v1", "kind": "ClusterRoleBinding",
                 "metadata": {"name": "controller"},
                 "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "controller"},
                 "subjects": [{"kind": "ServiceAccount", "name": "controller", "namespace": NS}]},
            ]
        )  # fmt: skip
        yield server


def _client(url: str, token: str = "") -> kubernetes.client.ApiClient:
    configuration = kubernetes.client.Configuration(host=url)
    configuration.connection_pool_maxsize = 32
    if token:
        configuration.api_key = {"authorization": f"Bearer {token}"}
    return kubernetes.client.ApiClient(configuration)


async def test_a_forbidden_watch_is_reported_naming_verb_and_resource_until_granted(
    rbac_api: ApiServer,
) -> None:
    with _client(rbac_api.url) as admin:
        core: Any = kubernetes.client.CoreV1Api(admin)
        requested = await asyncio.to_thread(
            core.create_namespaced_service_account_token, "controller", NS, {"spec": {}}
        )
        rbac: Any = kubernetes.client.RbacAuthorizationV1Api(admin)
        reports: list[tuple[str, str | None]] = []
        changed = asyncio.Event()

        def report(kind: kinds.Kind, refused: str | None) -> None:
            reports.append((kind.name, refused))
            changed.set()

        with _client(rbac_api.url, requested.status.token) as client:
            sources = supervisor.Sources(client, settings=FAST, on_access=report)
            sources.start()
            try:
                await bounded(changed.wait())
                ((kind, refused),) = reports
                assert kind == "Service"
                assert refused is not None
                assert refused.startswith("forbidden to watch services: ")
                assert 'cannot watch resource "services"' in refused
                assert f'"system:serviceaccount:{NS}:controller"' in refused
                assert sources.reflectors["Service"].refused  # still running, still trying
                changed.clear()
                await asyncio.to_thread(rbac.replace_cluster_role, "controller", _role(ALL))
                await bounded(changed.wait())
                assert reports[-1] == ("Service", None)
            finally:
                await sources.stop()
