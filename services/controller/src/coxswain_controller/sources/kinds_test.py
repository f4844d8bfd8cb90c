"""Which Gateway API kinds are watched, and at which version, from what discovery says the API
server serves.

Covers the one rule for every kind (the highest served version in Kubernetes' version order
among those the controller reads the kind at), Gateway API v1.6's channels (every kind at v1),
older releases (ReferenceGrant at v1beta1, BackendTLSPolicy at v1alpha3, the stream routes of
the experimental channel at v1alpha2, TLSRoute at v1alpha3), GRPCRoute (spec 003 "GRPCRoute":
"The controller watches GRPCRoutes only in a cluster whose Gateway API serves the kind"),
ListenerSet (at v1 only, where served), and versions the controller does not read. The probe's
HTTP requests and the supervisor starting and stopping watches are supervisor_test's.
"""

from __future__ import annotations

import pytest

from coxswain_controller.sources import kinds


def _watched(served: dict[str, frozenset[str]]) -> dict[str, str]:
    return {k.name: k.version for k in kinds.gateway_kinds(served)}


def test_grpcroute_is_watched_at_v1_where_the_standard_channel_serves_it() -> None:
    served = {"v1": frozenset({"gateways", "httproutes", "grpcroutes"})}
    assert _watched(served) == {"Gateway": "v1", "HTTPRoute": "v1", "GRPCRoute": "v1"}
    (grpc,) = [k for k in kinds.gateway_kinds(served) if k.name == "GRPCRoute"]
    assert grpc.path == "/apis/gateway.networking.k8s.io/v1/grpcroutes"
    assert not grpc.status_matters  # only this controller writes a route's status


@pytest.mark.parametrize(
    "served",
    [
        pytest.param({"v1": frozenset({"gateways", "httproutes"})}, id="crd-not-installed"),
        # Gateway API releases before v1.1 served GRPCRoute at v1alpha2 alone; status is written
        # at v1, so such a cluster's GRPCRoutes are left to a controller that speaks it.
        pytest.param({"v1alpha2": frozenset({"grpcroutes"})}, id="only-the-old-alpha-version"),
        pytest.param({}, id="gateway-api-absent"),
    ],
)
def test_grpcroute_is_not_watched_where_v1_does_not_serve_it(
    served: dict[str, frozenset[str]],
) -> None:
    assert "GRPCRoute" not in _watched(served)


STREAM = ("TCPRoute", "TLSRoute", "UDPRoute")


def test_stream_routes_are_watched_where_the_experimental_channel_serves_them() -> None:
    # Spec 003: "The controller watches the three kinds only in a cluster whose experimental
    # Gateway API channel serves them (gateway.networking.k8s.io/v1alpha2)".
    served = {
        "v1": frozenset({"gateways", "httproutes"}),
        "v1alpha2": frozenset({"tcproutes", "tlsroutes", "udproutes"}),
    }
    watched = _watched(served)
    assert {k: watched[k] for k in STREAM} == dict.fromkeys(STREAM, "v1alpha2")
    (udp,) = [k for k in kinds.gateway_kinds(served) if k.name == "UDPRoute"]
    assert udp.path == "/apis/gateway.networking.k8s.io/v1alpha2/udproutes"
    assert not udp.status_matters


@pytest.mark.parametrize(
    ("versions", "expected"),
    [
        pytest.param(("v1alpha2", "v1alpha3"), "v1alpha3", id="v1alpha3-over-v1alpha2"),
        pytest.param(("v1alpha2", "v1alpha3", "v1"), "v1", id="v1-where-served"),
        pytest.param(("v1",), "v1", id="standard-channel-v1.5"),
    ],
)
def test_tlsroute_is_watched_at_the_newest_version_served(
    versions: tuple[str, ...], expected: str
) -> None:
    served = {v: frozenset({"tlsroutes"}) for v in versions}
    assert _watched(served) == {"TLSRoute": expected}


def test_stream_routes_are_not_watched_by_the_standard_channel_before_v1_5() -> None:
    served = {"v1": frozenset({"gateways", "httproutes", "grpcroutes"})}
    assert not set(STREAM) & set(_watched(served))


@pytest.mark.parametrize(
    ("served", "watched"),
    [
        pytest.param({"v1": frozenset({"gateways", "listenersets"})}, True, id="v1-5-and-later"),
        pytest.param({"v1": frozenset({"gateways"})}, False, id="crd-not-installed"),
        # Before v1.5 the experimental channel served XListenerSet, of another group: the
        # gateway.networking.k8s.io group serves no listenersets, so none is watched.
        pytest.param({"v1alpha1": frozenset({"listenersets"})}, False, id="alpha-not-read"),
    ],
)
def test_listenerset_is_watched_only_where_v1_serves_it(
    served: dict[str, frozenset[str]], watched: bool
) -> None:
    assert (_watched(served).get("ListenerSet") == "v1") is watched
    for listener_set in [k for k in kinds.gateway_kinds(served) if k.name == "ListenerSet"]:
        assert listener_set.path == "/apis/gateway.networking.k8s.io/v1/listenersets"
        assert not listener_set.status_matters  # only this controller writes its status


ALL = frozenset(kind.plural for kind in kinds.GATEWAY)
# Gateway API v1.6 (crds.RELEASE in the devkit): what each channel serves at each version.
STANDARD_V1_6 = {
    "v1": ALL,
    "v1beta1": frozenset({"gatewayclasses", "gateways", "httproutes", "referencegrants"}),
}
EXPERIMENTAL_V1_6 = {
    **STANDARD_V1_6,
    "v1alpha3": frozenset({"tlsroutes", "backendtlspolicies"}),
    "v1alpha2": frozenset({"tlsroutes", "tcproutes", "udproutes"}),
}


@pytest.mark.parametrize(
    "served",
    [
        pytest.param(STANDARD_V1_6, id="standard-channel"),
        pytest.param(EXPERIMENTAL_V1_6, id="experimental-channel"),
        # Discovery lists the preferred version first; a map in another order picks the same.
        pytest.param(dict(reversed(EXPERIMENTAL_V1_6.items())), id="any-order"),
    ],
)
def test_gateway_api_v1_6_is_watched_at_v1_throughout(served: dict[str, frozenset[str]]) -> None:
    assert _watched(served) == {kind.name: "v1" for kind in kinds.GATEWAY}


@pytest.mark.parametrize(
    ("kind", "versions", "expected"),
    [
        pytest.param("ReferenceGrant", ("v1beta1",), "v1beta1", id="referencegrant-before-v1-5"),
        pytest.param("BackendTLSPolicy", ("v1alpha3",), "v1alpha3", id="backendtlspolicy-v1-3"),
        pytest.param("HTTPRoute", ("v1beta1",), "v1beta1", id="httproute-before-v1-0"),
        pytest.param("TCPRoute", ("v1alpha2",), "v1alpha2", id="tcproute-before-v1-6"),
        pytest.param("UDPRoute", ("v1alpha2", "v1"), "v1", id="udproute-v1-6-experimental"),
        pytest.param("TLSRoute", ("v1alpha3", "v1alpha2"), "v1alpha3", id="tlsroute-v1-4"),
        # A version the controller does not read is never chosen, served or not.
        pytest.param("Gateway", ("v1alpha2",), None, id="gateway-alpha-not-read"),
        pytest.param("TCPRoute", ("v2alpha1",), None, id="unknown-version-not-read"),
        pytest.param("GRPCRoute", ("v1alpha2",), None, id="grpcroute-alpha-not-read"),
    ],
)
def test_each_kind_is_watched_by_the_same_rule(
    kind: str, versions: tuple[str, ...], expected: str | None
) -> None:
    (wanted,) = [k for k in kinds.GATEWAY if k.name == kind]
    served = {v: frozenset({wanted.plural}) for v in versions}
    assert kinds.preferred(wanted, served) == expected
    assert _watched(served).get(kind) == expected


def test_each_kinds_versions_are_listed_most_preferred_first() -> None:
    # The status writer asks for a route at these versions in this order.
    for kind in (*kinds.GATEWAY, *kinds.COXSWAIN):
        assert list(kind.versions) == sorted(kind.versions, key=kinds.priority, reverse=True)


@pytest.mark.parametrize(
    ("versions", "expected"),
    [
        pytest.param(["v1alpha1", "v1", "v1beta1"], ["v1", "v1beta1", "v1alpha1"], id="stages"),
        pytest.param(
            ["v1beta1", "v2beta1", "v1beta2"], ["v2beta1", "v1beta2", "v1beta1"], id="nums"
        ),
        pytest.param(["v2", "v1", "v10"], ["v10", "v2", "v1"], id="ga-majors"),
        pytest.param(["foo", "v1alpha1"], ["v1alpha1", "foo"], id="non-kube-versions-last"),
    ],
)
def test_kubernetes_version_priority(versions: list[str], expected: list[str]) -> None:
    assert sorted(versions, key=kinds.priority, reverse=True) == expected
