"""The OpenAPI documents kubectl reads before it writes, and field validation behind them.

Covers: /openapi/v3 lists every served group version with a hashed URL that answers its
document; each kind's PATCH operation carries `x-kubernetes-group-version-kind` and the
`fieldValidation` query parameter (what kubectl checks to leave validation to the server) and
no strategic merge body; built-in kinds' schemas (from the protobuf schema, inline structs
merged) and custom resources' (their CRD's) under components, with the GVK extension; a CRD
applied later shows up at once; /openapi/v2 as JSON, 406 to a protobuf-only client; unknown
fields of a custom resource refused with Strict, pruned with a Warning under Warn (the
default) and silently under Ignore, while built-in kinds are not checked. Leaves out kubectl
(kubectl_test applies with its validation on).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from coxswain_devkit import crds
from coxswain_devkit.apiserver import ThreadedApiServer
from coxswain_devkit.apiserver.conftest import http

Obj = dict[str, Any]


def _get(api: ThreadedApiServer, path: str, accept: str = "application/json") -> tuple[int, Any]:
    status, _, raw = http(api, "GET", path, headers={"Accept": accept})
    return status, json.loads(raw) if status == 200 else raw


def _patch_op(doc: Obj, kind: str) -> Obj:
    for ops in doc["paths"].values():
        op = ops.get("patch")
        if (
            op
            and op["x-kubernetes-group-version-kind"]["kind"] == kind
            and "/status" not in str(op)
        ):
            return dict(op)
    raise AssertionError(f"no PATCH operation for {kind}")


def test_v3_lists_group_versions_with_documents(api: ThreadedApiServer) -> None:
    api.call(lambda s: s.apply(crds.standard()))
    status, root = _get(api, "/openapi/v3")
    assert status == 200
    paths = root["paths"]
    assert {"api/v1", "apis/apps/v1", "apis/gateway.networking.k8s.io/v1"} <= set(paths)
    url = paths["apis/apps/v1"]["serverRelativeURL"]
    assert "?hash=" in url
    status, doc = _get(api, url)
    assert (status, doc["openapi"]) == (200, "3.0.0")
    op = _patch_op(doc, "Deployment")
    assert op["x-kubernetes-group-version-kind"] == {
        "group": "apps", "version": "v1", "kind": "Deployment"}  # fmt: skip
    assert "fieldValidation" in {p["name"] for p in op["parameters"] if p["in"] == "query"}
    assert "application/strategic-merge-patch+json" not in op["requestBody"]["content"]
    assert "application/apply-patch+yaml" in op["requestBody"]["content"]


def test_schemas_for_builtin_and_custom_kinds(api: ThreadedApiServer) -> None:
    api.call(lambda s: s.apply(crds.coxswain()))
    _, core = _get(api, "/openapi/v3/api/v1")
    pod = core["components"]["schemas"]["io.k8s.api.core.v1.Pod"]
    assert pod["x-kubernetes-group-version-kind"] == [{"group": "", "version": "v1", "kind": "Pod"}]
    probe = core["components"]["schemas"]["io.k8s.api.core.v1.Probe"]["properties"]
    assert {"httpGet", "periodSeconds"} <= set(probe), "the inline ProbeHandler is merged"
    _, custom = _get(api, "/openapi/v3/apis/coxswain-labs.dev/v1alpha1")
    name = "dev.coxswain-labs.v1alpha1.CoxswainGatewayParameters"
    schema = custom["components"]["schemas"][name]
    assert "replicas" in schema["properties"]["spec"]["properties"]
    assert schema["properties"]["metadata"] == {
        "$ref": "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}  # fmt: skip


def test_v2_is_json_only(api: ThreadedApiServer) -> None:
    status, doc = _get(api, "/openapi/v2")
    assert (status, doc["swagger"]) == (200, "2.0")
    assert "io.k8s.api.apps.v1.Deployment" in doc["definitions"]
    status, _ = _get(
        api, "/openapi/v2", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
    )
    assert status == 406


PARAMETERS = "/apis/coxswain-labs.dev/v1alpha1/namespaces/default/coxswaingatewayparameters"
BODY = {"apiVersion": "coxswain-labs.dev/v1alpha1", "kind": "CoxswainGatewayParameters",
        "metadata": {"name": "p", "bogus": 1}, "spec": {"replicas": 2, "typo": True}}  # fmt: skip


@pytest.mark.parametrize(
    ("directive", "code", "warnings"),
    [
        pytest.param("Strict", 400, [], id="strict-refuses"),
        pytest.param(
            "Warn",
            201,
            ['unknown field "metadata.bogus"', 'unknown field "spec.typo"'],
            id="warn-prunes-and-warns",
        ),
        pytest.param("Ignore", 201, [], id="ignore-prunes"),
    ],
)
def test_field_validation_of_custom_resources(
    api: ThreadedApiServer, directive: str, code: int, warnings: list[str]
) -> None:
    api.call(lambda s: s.apply(crds.coxswain()))
    status, headers, raw = http(
        api, "POST", f"{PARAMETERS}?fieldValidation={directive}", json.dumps(BODY),
        headers={"Content-Type": "application/json"},
    )  # fmt: skip
    answer = json.loads(raw)
    assert status == code, answer
    if code == 400:
        assert answer["message"] == (
            'CoxswainGatewayParameters in version "v1alpha1" cannot be handled as a '
            'CoxswainGatewayParameters: strict decoding error: unknown field "metadata.bogus", '
            'unknown field "spec.typo"'
        )
        return
    assert answer["spec"] == {"replicas": 2}
    assert "bogus" not in answer["metadata"]
    escaped = [w.replace('"', '\\"') for w in warnings]
    assert (headers.get_all("Warning") or []) == [f'299 - "{w}"' for w in escaped]


def test_builtin_kinds_are_not_held_to_a_schema(api: ThreadedApiServer, core: Any) -> None:
    doc = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "extra": 1}
    status, _, _ = http(
        api, "POST", "/api/v1/namespaces/default/configmaps?fieldValidation=Strict",
        yaml.safe_dump(doc), headers={"Content-Type": "application/yaml"},
    )  # fmt: skip
    assert status == 201
