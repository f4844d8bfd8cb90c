"""The bundled CRDs: the kinds, scopes and versions each channel serves.

Covers that each channel holds the CRDs the current Gateway API release (`crds.RELEASE`) ships in
it, every kind with the versions it serves there (and those it keeps unserved), its scope, its
status subresource and its deprecation warnings, as the emulator's registry reads them; that
every bundled schema is structural; and that Coxswain's own CRDs are the deploy/crds/ files
themselves, with the fields the controller reads. Serving them over HTTP is covered in
apiserver/discovery_test.py, and upstream-shaped manifests applied with kubectl in
apiserver/gateway_api_kubectl_test.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from coxswain_devkit import crds
from coxswain_devkit.apiserver.registry import crd_kinds

G = "gateway.networking.k8s.io"
X = "gateway.networking.x-k8s.io"
CLUSTER, NAMESPACED = False, True

# kind -> (group, namespaced, status subresource, served by the standard channel, served by
# the experimental channel only). Gateway API v1.6: every standard kind is served at v1; the
# alpha versions a kind had are served by the experimental channel alone (deprecated).
UPSTREAM: dict[str, tuple[str, bool, bool, set[str], set[str]]] = {
    "GatewayClass": (G, CLUSTER, True, {"v1", "v1beta1"}, set()),
    "Gateway": (G, NAMESPACED, True, {"v1", "v1beta1"}, set()),
    "HTTPRoute": (G, NAMESPACED, True, {"v1", "v1beta1"}, set()),
    "GRPCRoute": (G, NAMESPACED, True, {"v1"}, set()),
    "ReferenceGrant": (G, NAMESPACED, False, {"v1", "v1beta1"}, set()),
    "BackendTLSPolicy": (G, NAMESPACED, True, {"v1"}, {"v1alpha3"}),
    "ListenerSet": (G, NAMESPACED, True, {"v1"}, set()),
    "TLSRoute": (G, NAMESPACED, True, {"v1"}, {"v1alpha2", "v1alpha3"}),
    "TCPRoute": (G, NAMESPACED, True, {"v1"}, {"v1alpha2"}),
    "UDPRoute": (G, NAMESPACED, True, {"v1"}, {"v1alpha2"}),
}
EXPERIMENTAL_ONLY: dict[str, tuple[str, bool, bool, set[str], set[str]]] = {
    "XBackend": (X, NAMESPACED, True, set(), {"v1alpha1"}),
    "XBackendTrafficPolicy": (X, NAMESPACED, True, set(), {"v1alpha1"}),
    "XMesh": (X, CLUSTER, True, set(), {"v1alpha1"}),
}


def _served(bundle: list[dict[str, Any]], kind: str) -> list[Any]:
    return [k for crd in bundle for k in crd_kinds(crd) if k.kind == kind]


@pytest.mark.parametrize("kind", list(UPSTREAM), ids=str.lower)
def test_the_standard_channel_serves_each_kind_as_upstream(kind: str) -> None:
    group, namespaced, status, versions, _ = UPSTREAM[kind]
    served = _served(crds.standard(), kind)
    assert {k.version for k in served} == versions
    assert {(k.group, k.namespaced, k.status, k.deprecation) for k in served} == {
        (group, namespaced, status, "")
    }


@pytest.mark.parametrize("kind", list(UPSTREAM | EXPERIMENTAL_ONLY), ids=str.lower)
def test_the_experimental_channel_serves_each_kind_as_upstream(kind: str) -> None:
    group, namespaced, status, standard, alpha = (UPSTREAM | EXPERIMENTAL_ONLY)[kind]
    served = {k.version: k for k in _served(crds.experimental(), kind)}
    assert set(served) == standard | alpha
    assert {(k.group, k.namespaced, k.status) for k in served.values()} == {
        (group, namespaced, status)
    }
    for version in alpha - {"v1alpha1"}:
        assert served[version].deprecation == (
            f"The {version} version of {kind} has been deprecated and will be removed in a "
            "future release of the API. Please upgrade to v1."
        )


def test_the_standard_channel_keeps_the_alpha_versions_unserved() -> None:
    # An upgrade from the experimental channel must find every version it stored objects at.
    for crd in crds.standard():
        kind = crd["spec"]["names"]["kind"]
        listed = {v["name"]: v["served"] for v in crd["spec"]["versions"]}
        assert {v for v, served in listed.items() if not served} == UPSTREAM[kind][4], kind
        assert sum(v["storage"] for v in crd["spec"]["versions"]) == 1, kind


def test_both_channels_are_of_one_release_and_name_their_channel() -> None:
    for channel, bundle in (("standard", crds.standard()), ("experimental", crds.experimental())):
        for crd in bundle:
            annotations = crd["metadata"]["annotations"]
            assert annotations["gateway.networking.k8s.io/bundle-version"] == crds.RELEASE
            assert annotations["gateway.networking.k8s.io/channel"] == channel
    standard = {c["metadata"]["name"] for c in crds.standard()}
    experimental = {c["metadata"]["name"] for c in crds.experimental()}
    assert len(standard) == 10
    assert experimental - standard == {
        "xbackends.gateway.networking.x-k8s.io",
        "xbackendtrafficpolicies.gateway.networking.x-k8s.io",
        "xmeshes.gateway.networking.x-k8s.io",
    }


# The repository root, from libs/devkit/src/coxswain_devkit/crds/.
DEPLOY_CRDS = Path(__file__).resolve().parents[5] / "deploy" / "crds"


def test_coxswain_crds_are_the_deployed_files() -> None:
    # The emulator must serve exactly what a cluster installs from deploy/crds/: every file
    # there, as it is (packaged with the devkit by Pants, or read from the checkout).
    shipped = sorted(path.name for path in DEPLOY_CRDS.glob("*.yaml"))
    assert sorted(crds.DEPLOYED) == shipped
    for name in shipped:
        assert crds.deployed_text(name) == (DEPLOY_CRDS / name).read_text(), name


def test_coxswain_kinds_are_served_as_the_controller_expects() -> None:
    served = {k.kind: k for crd in crds.coxswain() for k in crd_kinds(crd)}
    parameters = served["CoxswainGatewayParameters"]
    assert (parameters.group, parameters.version, parameters.namespaced) == (
        "coxswain-labs.dev",
        "v1alpha1",
        True,
    )
    assert served["CoxswainIngressClassParameters"].namespaced is False
    assert served["CoxswainPolicy"].namespaced is True
    assert len(crds.coxswain()) == 3


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


def test_the_ingress_class_parameters_schema_has_the_fields_the_controller_reads() -> None:
    (crd,) = [
        c for c in crds.coxswain() if c["spec"]["names"]["kind"] == "CoxswainIngressClassParameters"
    ]
    (version,) = crd["spec"]["versions"]
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert set(spec) == {"defaultAnnotations", "accessLog"}
    assert spec["defaultAnnotations"]["additionalProperties"]["type"] == "string"
    assert spec["accessLog"]["properties"]["enabled"]["type"] == "boolean"


@pytest.mark.parametrize(
    "bundle", [crds.standard, crds.experimental, crds.coxswain], ids=lambda b: b.__name__
)
def test_every_bundled_schema_is_structural(bundle: Any) -> None:
    for crd in bundle():
        for version in crd["spec"]["versions"]:
            schema = version["schema"]["openAPIV3Schema"]
            where = f"{crd['metadata']['name']}/{version['name']}"
            assert _structural_problems(schema, "") == [], where
