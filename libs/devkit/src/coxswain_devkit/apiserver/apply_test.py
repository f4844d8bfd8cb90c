"""Server-side apply and managedFields over HTTP, with the real client for the other managers.

Covers: an apply creating the object (201... as 200 with the object), its managedFields entry
(manager, Apply, apiVersion, fieldsV1 with associative list keys); re-applying without a field
removes it, and not when another manager also owns it; co-owning by applying the same value;
a conflict's 409 with one FieldManagerConflict cause per field and the API server's message;
`force=true` moving the field; an update taking the fields it changes from an applier; apply
to the status subresource owning only status; a custom resource's list merged by the
`x-kubernetes-list-map-keys` of its CRD schema; the refusals (no fieldManager, no kind, a name
that is not the URL's); dryRun=All storing nothing. Leaves out kubectl (kubectl_verbs_test).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from coxswain_devkit.apiserver import ThreadedApiServer
from coxswain_devkit.apiserver.conftest import http

APPLY = "application/apply-patch+yaml"
DEPLOYMENTS = "/apis/apps/v1/namespaces/default/deployments"
Obj = dict[str, Any]


def apply(
    api: ThreadedApiServer, path: str, doc: Obj, manager: str | None, **query: str
) -> tuple[int, Obj]:
    params = {**({"fieldManager": manager} if manager else {}), **query}
    qs = "&".join(f"{k}={v}" for k, v in params.items())
    status, _, raw = http(
        api, "PATCH", f"{path}?{qs}", yaml.safe_dump(doc), headers={"Content-Type": APPLY}
    )
    return status, json.loads(raw)


def deployment(
    replicas: int = 2, *, env: list[Obj] | None = None, labels: Obj | None = None
) -> Obj:
    container: Obj = {"name": "app", "image": "web:1", "ports": [{"containerPort": 8080}]}
    if env is not None:
        container["env"] = env
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "labels": labels or {"app": "web"}},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [container]},
            },
        },
    }


def entries(obj: Obj) -> dict[tuple[str, str, str], Obj]:
    return {
        (e["manager"], e["operation"], e.get("subresource", "")): e
        for e in obj["metadata"].get("managedFields", [])
    }


def test_apply_creates_and_records_the_appliers_fields(api: ThreadedApiServer) -> None:
    status, obj = apply(api, f"{DEPLOYMENTS}/web", deployment(), "ci")
    assert status == 200
    assert obj["spec"]["replicas"] == 2
    entry = entries(obj)[("ci", "Apply", "")]
    assert (entry["apiVersion"], entry["fieldsType"]) == ("apps/v1", "FieldsV1")
    containers = entry["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]
    assert containers == {
        'k:{"name":"app"}': {
            ".": {},
            "f:image": {},
            "f:name": {},
            "f:ports": {
                'k:{"containerPort":8080,"protocol":"TCP"}': {".": {}, "f:containerPort": {}}
            },
        }
    }
    assert entry["fieldsV1"]["f:spec"]["f:selector"] == {}, "a label selector is owned whole"


def test_reapply_removes_what_only_the_applier_owned(api: ThreadedApiServer, apps: Any) -> None:
    env = [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    labels = {"app": "web", "x": "1", "y": "2"}
    apply(api, f"{DEPLOYMENTS}/web", deployment(env=env, labels=labels), "ci")
    # Another manager co-owns label y by writing it.
    apps.patch_namespaced_deployment("web", "default", {"metadata": {"labels": {"y": "3"}}})
    fewer = deployment(env=env[:1], labels={"app": "web"})
    status, obj = apply(api, f"{DEPLOYMENTS}/web", fewer, "ci")
    assert status == 200, obj
    assert obj["metadata"]["labels"] == {"app": "web", "y": "3"}, "x removed, y kept"
    assert obj["spec"]["template"]["spec"]["containers"][0]["env"] == [{"name": "A", "value": "1"}]


def test_conflict_409_and_force(api: ThreadedApiServer, apps: Any) -> None:
    apply(api, f"{DEPLOYMENTS}/web", deployment(2), "ci")
    apps.patch_namespaced_deployment("web", "default", {"spec": {"replicas": 5}})
    status, answer = apply(api, f"{DEPLOYMENTS}/web", deployment(3, labels={"app": "other"}), "ci")
    assert status == 409
    assert answer["reason"] == "Conflict"
    assert answer["message"] == (
        'Apply failed with 1 conflict: conflict with "OpenAPI-Generator" using apps/v1: '
        ".spec.replicas"
    )
    assert answer["details"]["causes"] == [
        {
            "reason": "FieldManagerConflict",
            "message": 'conflict with "OpenAPI-Generator" using apps/v1',
            "field": ".spec.replicas",
        }
    ]
    assert apps.read_namespaced_deployment("web", "default").spec.replicas == 5
    status, obj = apply(api, f"{DEPLOYMENTS}/web", deployment(3), "ci", force="true")
    assert (status, obj["spec"]["replicas"]) == (200, 3)
    assert ("OpenAPI-Generator", "Update", "") not in entries(obj), "its only field was taken"


def test_the_same_value_is_shared_not_a_conflict(api: ThreadedApiServer, apps: Any) -> None:
    apps.create_namespaced_deployment("default", deployment(4))
    status, obj = apply(api, f"{DEPLOYMENTS}/web", deployment(4), "ci")
    assert status == 200
    assert ("OpenAPI-Generator", "Update", "") in entries(obj)


def test_an_update_takes_the_fields_it_changes(api: ThreadedApiServer, apps: Any) -> None:
    apply(api, f"{DEPLOYMENTS}/web", deployment(2), "ci")
    apps.patch_namespaced_deployment("web", "default", {"spec": {"replicas": 5}})
    obj = apps.api_client.sanitize_for_serialization(
        apps.read_namespaced_deployment("web", "default")
    )
    owned = entries(obj)
    assert "f:replicas" not in owned[("ci", "Apply", "")]["fieldsV1"]["f:spec"]
    assert owned[("OpenAPI-Generator", "Update", "")]["fieldsV1"] == {"f:spec": {"f:replicas": {}}}


def test_apply_to_status_owns_only_status(api: ThreadedApiServer) -> None:
    apply(api, f"{DEPLOYMENTS}/web", deployment(), "ci")
    doc = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
           "spec": {"replicas": 9}, "status": {"replicas": 2, "readyReplicas": 1}}  # fmt: skip
    status, obj = apply(api, f"{DEPLOYMENTS}/web/status", doc, "node")
    assert status == 200
    assert (obj["spec"]["replicas"], obj["status"]["readyReplicas"]) == (2, 1)
    entry = entries(obj)[("node", "Apply", "status")]
    assert entry["fieldsV1"] == {"f:status": {"f:readyReplicas": {}, "f:replicas": {}}}


WIDGETS_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.dev"},
    "spec": {
        "group": "example.dev",
        "scope": "Namespaced",
        "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
        "versions": [{"name": "v1", "served": True, "storage": True, "schema": {"openAPIV3Schema": {
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "ports": {"type": "array", "x-kubernetes-list-type": "map",
                          "x-kubernetes-list-map-keys": ["name"],
                          "items": {"type": "object", "properties": {
                              "name": {"type": "string"}, "port": {"type": "integer"}}}},
                "tags": {"type": "array", "items": {"type": "string"}}}}}}}}],
    },
}  # fmt: skip
WIDGETS = "/apis/example.dev/v1/namespaces/default/widgets"


def widget(**spec: Any) -> Obj:
    return {"apiVersion": "example.dev/v1", "kind": "Widget", "metadata": {"name": "w"},
            "spec": spec}  # fmt: skip


def test_custom_resource_lists_merge_by_their_schema_keys(api: ThreadedApiServer) -> None:
    api.call(lambda s: s.apply([WIDGETS_CRD]))
    apply(api, f"{WIDGETS}/w", widget(ports=[{"name": "a", "port": 1}], tags=["x"]), "one")
    status, obj = apply(api, f"{WIDGETS}/w", widget(ports=[{"name": "b", "port": 2}]), "two")
    assert status == 200
    assert obj["spec"]["ports"] == [{"name": "a", "port": 1}, {"name": "b", "port": 2}]
    assert obj["spec"]["tags"] == ["x"]
    status, answer = apply(api, f"{WIDGETS}/w", widget(tags=["x", "y"]), "two")
    assert status == 409, "an atomic list is owned whole: another manager's"
    assert answer["details"]["causes"][0]["field"] == ".spec.tags"


@pytest.mark.parametrize(
    ("manager", "doc", "message"),
    [
        pytest.param(None, deployment(), "fieldManager is required", id="no-field-manager"),
        pytest.param(
            "ci",
            {k: v for k, v in deployment().items() if k != "kind"},
            "kind must be set",
            id="no-kind",
        ),
        pytest.param(
            "ci",
            {**deployment(), "metadata": {"name": "other"}},
            "does not match the name on the URL",
            id="name-not-the-urls",
        ),
    ],
)
def test_refusals(api: ThreadedApiServer, manager: str | None, doc: Obj, message: str) -> None:
    status, answer = apply(api, f"{DEPLOYMENTS}/web", doc, manager)
    assert status == 400
    assert message in answer["message"]


def test_dry_run_stores_nothing(api: ThreadedApiServer, apps: Any) -> None:
    status, obj = apply(api, f"{DEPLOYMENTS}/web", deployment(), "ci", dryRun="All")
    assert (status, obj["spec"]["replicas"]) == (200, 2)
    assert apps.list_namespaced_deployment("default").items == []
