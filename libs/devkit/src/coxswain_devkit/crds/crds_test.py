"""The bundled CRDs: the kinds, scopes and versions each one serves.

Covers that every CRD the controller watches is present with its served versions, scope and
status subresource, as the emulator's registry reads them, and that Coxswain's
CoxswainGatewayParameters is the deploy/crds/ file itself, with a structural schema. Serving them
over HTTP is covered in apiserver/discovery_test.py.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from coxswain_devkit import crds
from coxswain_devkit.apiserver.registry import crd_kinds

G = "gateway.networking.k8s.io"


@pytest.mark.parametrize(
    ("kind", "group", "versions", "namespaced"),
    [
        pytest.param("GatewayClass", G, {"v1", "v1beta1"}, False, id="gatewayclass"),
        pytest.param("Gateway", G, {"v1", "v1beta1"}, True, id="gateway"),
        pytest.param("HTTPRoute", G, {"v1", "v1beta1"}, True, id="httproute"),
        pytest.param("GRPCRoute", G, {"v1"}, True, id="grpcroute"),
        pytest.param("ReferenceGrant", G, {"v1", "v1beta1"}, True, id="referencegrant"),
        pytest.param("BackendTLSPolicy", G, {"v1"}, True, id="backendtlspolicy"),
        pytest.param("TLSRoute", G, {"v1alpha2"}, True, id="tlsroute"),
        pytest.param("TCPRoute", G, {"v1alpha2"}, True, id="tcproute"),
        pytest.param("UDPRoute", G, {"v1alpha2"}, True, id="udproute"),
        pytest.param(
            "ListenerSet", "gateway.networking.x-k8s.io", {"v1alpha1"}, True, id="listenerset"
        ),
    ],
)
def test_each_kind_is_served_as_upstream(
    kind: str, group: str, versions: set[str], namespaced: bool
) -> None:
    served = [k for crd in crds.experimental() for k in crd_kinds(crd) if k.kind == kind]
    assert {k.version for k in served} == versions
    assert {(k.group, k.namespaced, k.status) for k in served} == {(group, namespaced, True)}


def test_standard_is_a_subset_of_experimental() -> None:
    names = [c["metadata"]["name"] for c in crds.standard()]
    assert len(names) == 6
    assert set(names) < {c["metadata"]["name"] for c in crds.experimental()}


# The repository root, from libs/devkit/src/coxswain_devkit/crds/.
DEPLOY_CRDS = Path(__file__).resolve().parents[5] / "deploy" / "crds"


def test_the_gateway_parameters_crd_is_the_one_deployed() -> None:
    # The emulator must serve exactly what a cluster installs from deploy/crds/.
    shipped = (DEPLOY_CRDS / crds.GATEWAY_PARAMETERS).read_bytes()
    served = resources.files(crds).joinpath(crds.GATEWAY_PARAMETERS).read_bytes()
    assert served == shipped


def test_coxswain_kinds_are_served_as_the_controller_expects() -> None:
    served = {k.kind: k for crd in crds.coxswain() for k in crd_kinds(crd)}
    parameters = served["CoxswainGatewayParameters"]
    assert (parameters.group, parameters.version, parameters.namespaced) == (
        "coxswain-labs.dev",
        "v1alpha1",
        True,
    )
    assert served["CoxswainIngressClassParameters"].namespaced is False


def _structural_problems(schema: dict[str, Any], where: str) -> list[str]:
    """apiextensions.k8s.io "Specifying a structural schema": every node has a type (or
    x-kubernetes-int-or-string, or x-kubernetes-preserve-unknown-fields), and metadata names
    no properties of its own."""
    problems = []
    typed = (
        "type" in schema
        or schema.get("x-kubernetes-int-or-string")
        or schema.get("x-kubernetes-preserve-unknown-fields")
    )
    if not typed:
        problems.append(f"{where}: no type")
    for name, sub in (schema.get("properties") or {}).items():
        if where == "" and name == "metadata" and sub.get("properties"):
            problems.append("metadata: properties other than name and generateName")
        problems += _structural_problems(sub, f"{where}.{name}")
    extra = schema.get("additionalProperties")
    if isinstance(extra, dict):
        problems += _structural_problems(extra, f"{where}[*]")
    return problems


def test_the_gateway_parameters_schema_is_structural() -> None:
    (crd,) = [
        c for c in crds.coxswain() if c["spec"]["names"]["kind"] == "CoxswainGatewayParameters"
    ]
    (version,) = crd["spec"]["versions"]
    schema = version["schema"]["openAPIV3Schema"]
    assert _structural_problems(schema, "") == []
    assert set(schema["properties"]["spec"]["properties"]) == {
        "replicas",
        "image",
        "resources",
        "service",
        "labels",
        "podTemplate",
    }
