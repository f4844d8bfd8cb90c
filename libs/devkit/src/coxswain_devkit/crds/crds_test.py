"""The bundled Gateway API CRDs: the kinds, scopes and versions each one serves.

Covers that every CRD the controller watches is present with its served versions, scope and
status subresource, as the emulator's registry reads them. Serving them over HTTP is covered in
apiserver/discovery_test.py.
"""

from __future__ import annotations

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
