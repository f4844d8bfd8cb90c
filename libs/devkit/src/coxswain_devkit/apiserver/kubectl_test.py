"""The real kubectl (the machine's and PyPI's 1.37) against the emulator: apply, get, watch, patch,
wait, delete.

Covers client-side `apply -f` of built-in kinds, CRDs and custom resources (create, then
"configured" through kubectl's three-way strategic merge patch, "unchanged" when nothing
changed), `get` in table and `-o yaml` form, `get -w`, `patch` (strategic, merge, and on the
status subresource), `wait --for=condition=...` satisfied by another client's status write,
`wait --for=condition=Established` on CRDs, `delete` (which waits for the object to go), and a
kind becoming unknown once its CRD is deleted; every apply with kubectl's own validation on.
`kubectl create`, server-side apply and the rollout verbs are in kubectl_verbs_test.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from coxswain_devkit.apiserver.conftest import Kubectl
from coxswain_devkit.crds import STANDARD

CRDS = Path(__file__).parent.parent / "crds" / STANDARD

MANIFESTS = """
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, labels: {app: web}}
data: {mode: "a"}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: web:1
        ports: [{containerPort: 8080}]
        env: [{name: MODE, value: "a"}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw}
spec:
  gatewayClassName: coxswain
  listeners: [{name: http, port: 80, protocol: HTTP}]
"""


@pytest.fixture
def applied(kubectl: Kubectl, tmp_path: Path) -> Path:
    kubectl("apply", "-f", str(CRDS))
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=30s")
    path = tmp_path / "app.yaml"
    path.write_text(MANIFESTS)
    out = kubectl("apply", "-f", str(path))
    assert "configmap/settings created" in out
    assert "gateway.gateway.networking.k8s.io/gw created" in out
    return path


def test_get_as_table_and_yaml(kubectl: Kubectl, applied: Path) -> None:
    table = kubectl("get", "configmaps,deployments,gateways")
    assert "configmap/settings" in table
    assert "deployment.apps/web" in table
    assert "gateway.gateway.networking.k8s.io/gw" in table
    doc = yaml.safe_load(kubectl("get", "gateway", "gw", "-o", "yaml"))
    assert doc["spec"]["listeners"][0]["port"] == 80
    assert doc["metadata"]["generation"] == 1
    assert "kubectl.kubernetes.io/last-applied-configuration" in doc["metadata"]["annotations"]


def test_reapply_patches_with_three_way_merge(kubectl: Kubectl, applied: Path, apps: Any) -> None:
    assert "unchanged" in kubectl("apply", "-f", str(applied))
    applied.write_text(MANIFESTS.replace("web:1", "web:2").replace('mode: "a"', 'other: "b"'))
    out = kubectl("apply", "-f", str(applied))
    assert "deployment.apps/web configured" in out
    deployment = apps.read_namespaced_deployment("web", "default")
    container = deployment.spec.template.spec.containers[0]
    assert (container.image, container.ports[0].container_port) == ("web:2", 8080)
    assert deployment.metadata.generation == 2
    settings = yaml.safe_load(kubectl("get", "cm", "settings", "-o", "yaml"))
    assert settings["data"] == {"other": "b"}, "kubectl's patch deletes what the manifest dropped"


def test_patch_strategic_merge_and_status(
    kubectl: Kubectl, applied: Path, apps: Any, custom: Any
) -> None:
    kubectl(
        "patch",
        "deployment",
        "web",
        "-p",
        '{"spec":{"template":{"spec":{"containers":[{"name":"app","env":[{"name":"EXTRA","value":"1"}]}]}}}}',
    )
    container = apps.read_namespaced_deployment("web", "default").spec.template.spec.containers[0]
    assert [e.name for e in container.env] == ["MODE", "EXTRA"]
    kubectl(
        "patch", "gateway", "gw", "--type", "merge", "-p", '{"spec":{"gatewayClassName":"other"}}'
    )
    kubectl(
        "patch",
        "gateway",
        "gw",
        "--subresource",
        "status",
        "--type",
        "merge",
        "-p",
        '{"status":{"addresses":[{"value":"10.0.0.1"}]}}',
    )
    gateway = custom.get_namespaced_custom_object(
        "gateway.networking.k8s.io", "v1", "default", "gateways", "gw"
    )
    assert gateway["spec"]["gatewayClassName"] == "other"
    assert gateway["status"]["addresses"] == [{"value": "10.0.0.1"}]
    assert gateway["metadata"]["generation"] == 2


def test_wait_for_a_condition_another_client_sets(
    kubectl: Kubectl, applied: Path, custom: Any
) -> None:
    argv = kubectl.argv("wait", "--for=condition=Programmed", "gateway/gw", "--timeout=60s")
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as waiting:
        status = {
            "conditions": [
                {
                    "type": "Programmed",
                    "status": "True",
                    "reason": "Programmed",
                    "message": "",
                    "lastTransitionTime": "2025-01-01T00:00:00Z",
                }
            ]
        }
        custom.patch_namespaced_custom_object_status(
            "gateway.networking.k8s.io", "v1", "default", "gateways", "gw", {"status": status}
        )
        out, _ = waiting.communicate(timeout=60)
    assert waiting.returncode == 0, out
    assert "condition met" in out


@pytest.fixture
def watching(kubectl: Kubectl) -> Iterator[subprocess.Popen[str]]:
    argv = kubectl.argv("get", "configmaps", "-w", "-o", "name", "--request-timeout=60s")
    with subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        try:
            yield proc
        finally:
            proc.kill()


def test_get_watch_prints_new_objects(
    kubectl: Kubectl, watching: subprocess.Popen[str], core: Any
) -> None:
    core.create_namespaced_config_map("default", {"metadata": {"name": "first"}})
    assert watching.stdout is not None
    assert watching.stdout.readline().strip() == "configmap/first"
    core.create_namespaced_config_map("default", {"metadata": {"name": "second"}})
    assert watching.stdout.readline().strip() == "configmap/second"


def test_delete_and_a_kind_gone_with_its_crd(kubectl: Kubectl, applied: Path, core: Any) -> None:
    assert 'configmap "settings" deleted' in kubectl("delete", "configmap", "settings")
    assert [c.metadata.name for c in core.list_namespaced_config_map("default").items] == []
    kubectl("delete", "crd", "gateways.gateway.networking.k8s.io")
    out = kubectl("get", "gateways", ok=False)
    # kubectl's cached discovery still knows the kind for a while; the server no longer does.
    assert "could not find the requested resource" in out or "doesn't have a resource type" in out
