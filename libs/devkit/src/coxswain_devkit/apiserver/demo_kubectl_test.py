"""`kubectl apply --server-side` of the demo's manifests (deploy/examples/demo), as on a cluster.

Covers, with each kubectl: the Gateway API and Coxswain CRDs applied server-side and
Established; every demo object server-side applied; the same apply again writing nothing (the
resourceVersion stays); a status another manager writes (as the controller does) surviving a
re-apply without a conflict; and an edited copy of the manifests re-applied: a changed field
changes, a field the manifest dropped is gone, the objects left alone stay as they were. Leaves
out the chart's manifests (tests/helm applies them client-side) and what the demo's services do
with the objects (tests/e2e).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from coxswain_devkit import crds
from coxswain_devkit.apiserver import ThreadedApiServer, manifests
from coxswain_devkit.apiserver.conftest import Kubectl

DEMO = Path(__file__).resolve().parents[5] / "deploy" / "examples" / "demo"
ROUTES = ("gateway.networking.k8s.io", "v1", "demo", "httproutes")


@pytest.fixture
def served(kubectl: Kubectl, tmp_path: Path) -> None:
    path = tmp_path / "crds.yaml"
    path.write_text(yaml.safe_dump_all([*crds.standard(), *crds.coxswain()]))
    kubectl("apply", "--server-side", "-f", str(path))
    kubectl("wait", "--for=condition=Established", "crd", "--all", "--timeout=30s")


def _revision(api: ThreadedApiServer) -> int:
    return api.call(lambda s: s.store.resource_version)


def test_server_side_apply_of_the_demo_then_reapply(
    kubectl: Kubectl, served: None, api: ThreadedApiServer, custom: Any
) -> None:
    out = kubectl("apply", "--server-side", "-f", str(DEMO))
    assert out.count("serverside-applied") == len(manifests.read_documents(DEMO)), out
    revision = _revision(api)
    kubectl("apply", "--server-side", "-f", str(DEMO))
    assert _revision(api) == revision, "an apply that changes nothing writes nothing"

    status = {"parents": [{"parentRef": {"name": "demo"}, "controllerName": "coxswain-labs.dev/x",
                           "conditions": []}]}  # fmt: skip
    custom.patch_namespaced_custom_object_status(*ROUTES, "split", {"status": status})
    kubectl("apply", "--server-side", "-f", str(DEMO))
    split = custom.get_namespaced_custom_object(*ROUTES, "split")
    assert split["status"] == status, "another manager's status is not the applier's"


def test_reapply_after_an_edit(kubectl: Kubectl, served: None, custom: Any, tmp_path: Path) -> None:
    kubectl("apply", "--server-side", "-f", str(DEMO))
    before = {
        r["metadata"]["name"]: r for r in custom.list_namespaced_custom_object(*ROUTES)["items"]
    }
    edited = tmp_path / "demo"
    shutil.copytree(DEMO, edited)
    routes = edited / "20-routes.yaml"
    text = routes.read_text()
    assert "weight: 80" in text and "hostnames: [old.demo.example]" in text
    routes.write_text(text.replace("weight: 80", "weight: 70").replace(
        "  hostnames: [old.demo.example]\n", ""))  # fmt: skip
    out = kubectl("apply", "--server-side", "-f", str(edited))
    assert "httproute.gateway.networking.k8s.io/split serverside-applied" in out
    after = {
        r["metadata"]["name"]: r for r in custom.list_namespaced_custom_object(*ROUTES)["items"]
    }
    weights = [b["weight"] for b in after["split"]["spec"]["rules"][0]["backendRefs"]]
    assert weights == [70, 20]
    assert "hostnames" not in after["moved"]["spec"], "a field the manifest dropped is gone"
    assert after["moved"]["metadata"]["generation"] == before["moved"]["metadata"]["generation"] + 1
    unchanged = [n for n in before if n not in ("split", "moved")]
    assert all(
        after[n]["metadata"]["resourceVersion"] == before[n]["metadata"]["resourceVersion"]
        for n in unchanged
    ), json.dumps({n: after[n]["metadata"] for n in unchanged})
