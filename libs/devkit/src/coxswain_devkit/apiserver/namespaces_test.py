"""Every Namespace carries `kubernetes.io/metadata.name: <name>`, as the API server's does.

Kubernetes 1.22 made it GA: "The Kubernetes control plane sets an immutable label
kubernetes.io/metadata.name on all namespaces. The value of the label is the namespace name."
The namespace strategy sets it on create and on every update, so a write that removes or changes
it ends with it set to the name again (and a write that changes nothing else stores nothing).
Covers the namespaces the emulator starts with, manifests it is seeded from, and writes through
the real kubectl (`apply`, `label`, `label --overwrite`, `get -l`) and through the `kubernetes`
client (create, replace, merge and JSON patch, status replace). Leaves out server-side apply,
which the emulator does not serve.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from coxswain_devkit.apiserver import ThreadedApiServer
from coxswain_devkit.apiserver.conftest import Kubectl
from coxswain_devkit.apiserver.machinery import INITIAL_NAMESPACES

LABEL = "kubernetes.io/metadata.name"


def _labels(core: Any, name: str) -> dict[str, str]:
    return dict(core.read_namespace(name).metadata.labels or {})


def test_the_namespaces_the_server_starts_with_are_labelled(core: Any) -> None:
    found = {ns.metadata.name: ns.metadata.labels for ns in core.list_namespace().items}
    assert found == {name: {LABEL: name} for name in INITIAL_NAMESPACES}
    selected = core.list_namespace(label_selector=f"{LABEL}=kube-system").items
    assert [ns.metadata.name for ns in selected] == ["kube-system"]


def test_a_seeded_namespace_is_labelled_over_what_its_manifest_says(
    api: ThreadedApiServer, core: Any
) -> None:
    manifest = {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": "seeded", "labels": {LABEL: "something-else", "team": "a"}},
    }
    api.call(lambda s: s.apply([manifest]))
    assert _labels(core, "seeded") == {LABEL: "seeded", "team": "a"}


def test_the_client_cannot_remove_or_change_the_label(core: Any) -> None:
    created = core.create_namespace({"metadata": {"name": "apps"}})
    assert created.metadata.labels == {LABEL: "apps"}
    version = created.metadata.resource_version

    removed = core.patch_namespace("apps", {"metadata": {"labels": {LABEL: None}}})
    assert removed.metadata.labels == {LABEL: "apps"}
    assert removed.metadata.resource_version == version, "a write that changes nothing is none"

    body = core.read_namespace("apps")
    body.metadata.labels = {LABEL: "other", "team": "b"}
    replaced = core.replace_namespace("apps", body)
    assert replaced.metadata.labels == {LABEL: "apps", "team": "b"}

    core.patch_namespace("apps", [{"op": "remove", "path": "/metadata/labels"}])
    assert _labels(core, "apps") == {LABEL: "apps"}

    status = core.read_namespace("apps")
    status.metadata.labels = {}
    core.replace_namespace_status("apps", status)
    assert _labels(core, "apps") == {LABEL: "apps"}


def test_a_label_selector_finds_namespaces_by_name(core: Any) -> None:
    for name in ("team-a", "team-b"):
        core.create_namespace({"metadata": {"name": name, "labels": {"tier": "apps"}}})
    selected = core.list_namespace(label_selector=f"{LABEL} in (team-a,default)").items
    assert sorted(ns.metadata.name for ns in selected) == ["default", "team-a"]


@pytest.fixture
def namespace_file(tmp_path: Path) -> Path:
    path = tmp_path / "namespace.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": "shop", "labels": {"team": "a"}},
            }
        )
    )
    return path


def _kubectl_labels(kubectl: Kubectl, name: str) -> dict[str, str]:
    return dict(
        yaml.safe_load(kubectl("get", "namespace", name, "-o", "yaml"))["metadata"]["labels"]
    )


def test_kubectl_writes_keep_the_label(kubectl: Kubectl, namespace_file: Path) -> None:
    assert "namespace/shop created" in kubectl(
        "apply", "--validate=false", "-f", str(namespace_file)
    )
    assert _kubectl_labels(kubectl, "shop") == {LABEL: "shop", "team": "a"}

    kubectl("label", "namespace", "shop", f"{LABEL}-")
    assert _kubectl_labels(kubectl, "shop") == {LABEL: "shop", "team": "a"}
    kubectl("label", "namespace", "shop", f"{LABEL}=elsewhere", "--overwrite")
    assert _kubectl_labels(kubectl, "shop") == {LABEL: "shop", "team": "a"}

    # A manifest that names the label with another value: applied, and the name label stays.
    document = yaml.safe_load(namespace_file.read_text())
    document["metadata"]["labels"] = {LABEL: "elsewhere", "team": "b"}
    namespace_file.write_text(yaml.safe_dump(document))
    assert "namespace/shop configured" in kubectl(
        "apply", "--validate=false", "-f", str(namespace_file)
    )
    assert _kubectl_labels(kubectl, "shop") == {LABEL: "shop", "team": "b"}

    names = kubectl("get", "namespaces", "-l", f"{LABEL}=shop", "-o", "name")
    assert names.split() == ["namespace/shop"]


def test_kubectl_sees_the_label_on_a_namespace_the_client_made(kubectl: Kubectl, core: Any) -> None:
    core.create_namespace({"metadata": {"name": "made"}})
    shown = kubectl("get", "namespace", "made", "--show-labels")
    assert f"{LABEL}=made" in shown
