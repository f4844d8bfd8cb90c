"""Which Gateway API kinds are watched, from what discovery says the API server serves.

Covers `kinds.gateway_kinds` for GRPCRoute (spec 003 "GRPCRoute": "The controller watches
GRPCRoutes only in a cluster whose Gateway API serves the kind") and for the stream routes (the
experimental channel's, TLSRoute at its newest served version). The probe's HTTP requests and
the supervisor starting and stopping watches are supervisor_test's.
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
