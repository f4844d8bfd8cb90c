"""RBAC through the real kubectl, against the emulator with `rbac=True`.

kubectl sends a bearer token only over TLS (client-go's clientcmd drops credentials for an
`http://` server), and the emulator serves plain HTTP, so kubectl acts as other identities the
way an admin does on a real cluster: impersonation (`--as`, `--as-group`). Covers: roles and
bindings applied with `kubectl apply` and made with `kubectl create role|rolebinding|
clusterrole|clusterrolebinding` (protobuf bodies); `kubectl auth can-i` yes and no (exit 0 and
1) for verbs, subresources (`--subresource`), resource names and cluster-scoped resources,
before and after a grant, and for an aggregated ClusterRole; `kubectl auth can-i --list`;
`kubectl auth whoami` for the admin and for an impersonated ServiceAccount; and kubectl printing
the API server's Forbidden message for a refused `get` and `delete`. Tokens with the `kubernetes`
client are in access_test.py.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from coxswain_devkit import crds
from coxswain_devkit.apiserver import ThreadedApiServer
from coxswain_devkit.apiserver.conftest import FakeClock, Kubectl

APP = "system:serviceaccount:shop:app"
MANIFESTS = """
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: app, namespace: shop}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: config-reader, namespace: shop}
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [secrets]
  resourceNames: [ca]
  verbs: [get]
- apiGroups: [apps]
  resources: [deployments/status]
  verbs: [update, patch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: app-config-reader, namespace: shop}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: config-reader}
subjects:
- {kind: ServiceAccount, name: app, namespace: shop}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: route-viewer}
aggregationRule:
  clusterRoleSelectors:
  - matchLabels: {example.com/aggregate-to-route-viewer: "true"}
rules: []
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: httproutes-read
  labels: {example.com/aggregate-to-route-viewer: "true"}
rules:
- apiGroups: [gateway.networking.k8s.io]
  resources: [httproutes]
  verbs: [get, list]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: app-route-viewer}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: route-viewer}
subjects:
- {kind: ServiceAccount, name: app, namespace: shop}
"""


@pytest.fixture
def api(clock: FakeClock) -> Any:
    with ThreadedApiServer(clock=clock, rbac=True) as server:
        yield server


@pytest.fixture
def applied(api: ThreadedApiServer, kubectl: Kubectl, tmp_path: Path) -> None:
    api.call(lambda s: s.apply(crds.standard()))  # for kubectl to know httproutes
    path = tmp_path / "rbac.yaml"
    path.write_text(MANIFESTS)
    out = kubectl("apply", "-f", str(path))
    assert "rolebinding.rbac.authorization.k8s.io/app-config-reader created" in out
    assert "clusterrole.rbac.authorization.k8s.io/route-viewer created" in out


def _can(kubectl: Kubectl, *args: str) -> str:
    """kubectl auth can-i as the ServiceAccount shop/app: "yes" or "no", held to the exit code."""
    where = () if "-n" in args else ("-n", "shop")
    argv = kubectl.argv("auth", "can-i", *args, f"--as={APP}", *where)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    answer = done.stdout.strip()
    assert (answer, done.returncode) in (("yes", 0), ("no", 1)), (done.stdout, done.stderr)
    return answer


@pytest.mark.parametrize(
    ("args", "answer"),
    [
        pytest.param(("list", "configmaps"), "yes", id="granted-verb"),
        pytest.param(("watch", "configmaps"), "yes", id="watch"),
        pytest.param(("delete", "configmaps"), "no", id="other-verb"),
        pytest.param(("list", "configmaps", "-n", "default"), "no", id="other-namespace"),
        pytest.param(("get", "secrets/ca"), "yes", id="resource-name"),
        pytest.param(("get", "secrets/tls"), "no", id="other-resource-name"),
        pytest.param(("list", "secrets"), "no", id="resource-names-never-list"),
        pytest.param(
            ("patch", "deployments.apps", "--subresource=status"), "yes", id="subresource"
        ),
        pytest.param(("patch", "deployments.apps"), "no", id="not-the-resource-itself"),
        pytest.param(("list", "httproutes.gateway.networking.k8s.io"), "yes", id="aggregated"),
        pytest.param(("list", "namespaces"), "no", id="cluster-scoped"),
        pytest.param(("create", "serviceaccounts", "--subresource=token"), "no", id="token"),
    ],
)
def test_can_i(kubectl: Kubectl, applied: None, args: tuple[str, ...], answer: str) -> None:
    assert _can(kubectl, *args) == answer


def test_a_grant_made_with_kubectl_create_counts_at_once(kubectl: Kubectl, applied: None) -> None:
    assert _can(kubectl, "create", "serviceaccounts", "--subresource=token") == "no"
    kubectl(
        "create",
        "role",
        "tokens",
        "-n",
        "shop",
        "--verb=create",
        "--resource=serviceaccounts/token",
    )
    kubectl(
        "create",
        "rolebinding",
        "tokens",
        "-n",
        "shop",
        "--role=tokens",
        "--serviceaccount=shop:app",
    )
    assert _can(kubectl, "create", "serviceaccounts", "--subresource=token") == "yes"
    assert _can(kubectl, "get", "nodes") == "no"
    kubectl("create", "clusterrole", "nodes", "--verb=get,list", "--resource=nodes")
    kubectl(
        "create", "clusterrolebinding", "nodes", "--clusterrole=nodes", "--serviceaccount=shop:app"
    )
    assert _can(kubectl, "get", "nodes") == "yes"
    assert "Role/tokens" in kubectl("get", "rolebindings", "-n", "shop")


def test_can_i_list(kubectl: Kubectl, applied: None) -> None:
    out = kubectl("auth", "can-i", "--list", f"--as={APP}", "-n", "shop")
    rows = [line.split() for line in out.splitlines()]
    assert ["configmaps", "[]", "[]", "[get", "list", "watch]"] in rows
    assert ["secrets", "[]", "[ca]", "[get]"] in rows
    assert ["selfsubjectaccessreviews.authorization.k8s.io", "[]", "[]", "[create]"] in rows


def test_whoami(kubectl: Kubectl) -> None:
    admin = kubectl("auth", "whoami")
    assert "system:admin" in admin and "system:masters" in admin
    app = kubectl("auth", "whoami", f"--as={APP}")
    assert APP in app
    assert "[system:serviceaccounts system:serviceaccounts:shop system:authenticated]" in app
    grouped = kubectl("auth", "whoami", "--as=alice", "--as-group=platform")
    assert "alice" in grouped and "[platform system:authenticated]" in grouped


def test_forbidden_is_printed_as_the_api_server_says(kubectl: Kubectl, applied: None) -> None:
    out = kubectl("get", "secrets", f"--as={APP}", "-n", "shop", ok=False)
    assert (
        f'Error from server (Forbidden): secrets is forbidden: User "{APP}" cannot list resource '
        '"secrets" in API group "" in the namespace "shop"'
    ) in out
    kubectl(
        "create",
        "-n",
        "shop",
        "-f",
        "-",
        stdin="apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
    )
    assert "configmap/c" in kubectl(
        "get", "configmaps", "c", f"--as={APP}", "-n", "shop", "-o", "name"
    )
    out = kubectl("delete", "configmap", "c", f"--as={APP}", "-n", "shop", ok=False)
    assert 'configmaps "c" is forbidden: User "system:serviceaccount:shop:app" cannot delete' in out
