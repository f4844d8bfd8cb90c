"""A pod's API credential (`api_access`) against the emulator with RBAC enforced.

Covers: the kubeconfig the agent writes, loaded by the real `kubernetes` client, authenticates
as `system:serviceaccount:<ns>:<sa>` and is refused (403) what no binding grants and allowed what
one does; the token is bound to the Pod (deleted, the same file is 401); automount follows the
pod's field, else the ServiceAccount's, else true; a missing ServiceAccount keeps the container
waiting. Running a service with it is the install e2e's (tests/e2e/install_test.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from coxswain_devkit import kube as k
from coxswain_devkit.apiserver import ApiServer
from coxswain_devkit.node.api_access import ApiAccess
from coxswain_devkit.node.env import CannotRun

Obj = dict[str, Any]
NS = "shop"
RBAC = "rbac.authorization.k8s.io"


@pytest.fixture
async def rbac_api() -> AsyncIterator[ApiServer]:
    async with ApiServer(rbac=True) as server:
        yield server


@pytest.fixture
async def admin(rbac_api: ApiServer) -> AsyncIterator[k.Kube]:
    async with k.Kube(rbac_api.url) as client:  # no credentials: the emulator's admin
        await client.create(k.path("namespaces"), {"metadata": {"name": NS}})
        yield client


def _access(kube: k.Kube, pod: Obj, root: Path) -> ApiAccess:
    async def read(plural: str, namespace: str, name: str) -> Obj | None:
        return await kube.get(k.path(plural, namespace, name))

    async def issue(namespace: str, account: str, body: Obj) -> Obj | None:
        where = k.path("serviceaccounts", namespace, account, "token")
        try:
            return await kube.create(where, body)
        except k.ApiError as err:
            if err.code == 404:
                return None
            raise

    return ApiAccess(pod, root, api_url=kube.url, read=read, issue=issue)


async def _pod(kube: k.Kube, name: str, **spec: Any) -> Obj:
    body = {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "coxswain-controller"}], **spec},
    }
    return await kube.create(k.path("pods", NS), body)


async def _account(kube: k.Kube, name: str, **fields: Any) -> None:
    await kube.create(k.path("serviceaccounts", NS), {"metadata": {"name": name}, **fields})


def _status(call: Any) -> int:
    try:
        call()
    except kubernetes.client.ApiException as err:
        return int(err.status)
    return 200


def _as_pod(kubeconfig: Path) -> tuple[str, int, int]:
    """(username, status of listing Pods, status of reading its ConfigMap) through the client."""
    config: Any = kubernetes.config  # untyped
    with config.new_client_from_config(config_file=str(kubeconfig)) as client:
        auth: Any = kubernetes.client.AuthenticationV1Api(client)
        review = auth.create_self_subject_review({})
        core = kubernetes.client.CoreV1Api(client)
        pods = _status(lambda: core.list_namespaced_pod(NS))
        settings = _status(lambda: core.read_namespaced_config_map("settings", NS))
    return str(review.status.user_info.username), pods, settings


async def test_the_kubeconfig_acts_as_the_pods_service_account_under_rbac(
    admin: k.Kube, tmp_path: Path
) -> None:
    await _account(admin, "ctl")
    await admin.create(k.path("configmaps", NS), {"metadata": {"name": "settings"}})
    role = {
        "metadata": {"name": "read-settings"},
        "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}],
    }
    await admin.create(k.path("roles", NS, group=RBAC), role)
    binding = {
        "metadata": {"name": "ctl"},
        "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": "read-settings"},
        "subjects": [{"kind": "ServiceAccount", "name": "ctl", "namespace": NS}],
    }
    await admin.create(k.path("rolebindings", NS, group=RBAC), binding)
    pod = await _pod(admin, "ctl-0", serviceAccountName="ctl")
    kubeconfig = await _access(admin, pod, tmp_path).kubeconfig()
    assert kubeconfig is not None
    assert await asyncio.to_thread(_as_pod, kubeconfig) == (
        f"system:serviceaccount:{NS}:ctl",
        403,  # nothing grants it the Pods
        200,  # its Role grants it the ConfigMap
    )
    await admin.delete(k.path("pods", NS, "ctl-0"))
    with pytest.raises(kubernetes.client.ApiException) as refused:
        await asyncio.to_thread(_as_pod, kubeconfig)
    assert refused.value.status == 401  # the token was bound to the Pod


@pytest.mark.parametrize(
    ("pod_field", "account_field", "mounted"),
    [
        pytest.param(None, None, True, id="default-mounts"),
        pytest.param(False, None, False, id="pod-opts-out"),
        pytest.param(None, False, False, id="service-account-opts-out"),
        pytest.param(True, False, True, id="pod-overrides-its-service-account"),
    ],
)
async def test_automount_follows_the_pod_then_its_service_account(
    admin: k.Kube,
    tmp_path: Path,
    pod_field: bool | None,
    account_field: bool | None,
    mounted: bool,
) -> None:
    extra = {} if account_field is None else {"automountServiceAccountToken": account_field}
    await _account(admin, "sa", **extra)
    spec = {} if pod_field is None else {"automountServiceAccountToken": pod_field}
    pod = await _pod(admin, "p", serviceAccountName="sa", **spec)
    kubeconfig = await _access(admin, pod, tmp_path).kubeconfig()
    assert (kubeconfig is not None) is mounted
    assert (tmp_path / "serviceaccount" / "token").exists() is mounted


async def test_a_missing_service_account_keeps_the_container_waiting(
    admin: k.Kube, tmp_path: Path
) -> None:
    pod = await _pod(admin, "p", serviceAccountName="absent")
    with pytest.raises(CannotRun) as waiting:
        await _access(admin, pod, tmp_path).kubeconfig()
    assert waiting.value.reason == "ContainerCreating"
    assert 'serviceaccount "absent" not found' in waiting.value.message
