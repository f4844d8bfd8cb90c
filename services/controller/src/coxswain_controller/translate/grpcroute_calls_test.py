"""GRPCRoute golden cases, answered as the proxy answers them: each call reaches the backend the
Gateway API conformance test expects.

A golden file shows what a GRPCRoute compiles to; this module sends the conformance tests' calls
(a POST to /{service}/{method}, with their metadata and authority) through the routing model's
own matcher, compiled from the translated snapshot, and asserts the backend each reaches, or
that none does (the conformance suite's Unimplemented, a 404 before HTTP/2 maps it). It leaves
out the wire (HTTP/2 framing, trailers, gRPC status mapping), which the proxy's tests cover.
"""

from __future__ import annotations

from collections import Counter

import pytest
import yaml

from coxswain_controller.translate import Inputs, translate
from coxswain_controller.translate.goldens import TESTDATA
from coxswain_controller.translate.scopes import SHARED_POOL
from coxswain_routing import GatewayListeners, Miss, Router, compile_router

SVC = "gateway_api_conformance.echo_basic.grpcecho.GrpcEcho"
NOT_ROUTED = "no route"


def _served(case: str) -> tuple[Router, dict[int, int]]:
    """The shared pool's router for a golden case, and each listener port's bind port."""
    with (TESTDATA / case / "input.yaml").open() as handle:
        objects = [d for d in yaml.safe_load_all(handle) if isinstance(d, dict)]
    resources = translate(Inputs.from_objects(objects)).snapshots[SHARED_POOL]
    ports = {
        x.port: x.bind_port
        for r in resources
        if isinstance(r, GatewayListeners)
        for x in r.listeners
    }
    return compile_router(resources), ports


def _call(
    case: str,
    path: str,
    *,
    host: str = "gw.example.com",
    port: int = 80,
    metadata: dict[str, str] | None = None,
) -> str:
    """The Service a gRPC call reaches (every call is a POST), or NOT_ROUTED."""
    router, ports = _served(case)
    headers = {k.lower(): v for k, v in (metadata or {}).items()}
    outcome = router.match(ports[port], host, "POST", path, headers)
    if isinstance(outcome, Miss):
        return NOT_ROUTED
    backend = outcome.backends.pick()
    return backend.endpoints.split("/")[2] if backend.endpoints else backend.unresolved_reason


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        pytest.param("Echo", "grpc-infra-backend-v1", id="service-and-method-exact"),
        pytest.param("EchoTwo", "grpc-infra-backend-v2", id="another-method-its-own-rule"),
        pytest.param("EchoThree", NOT_ROUTED, id="a-method-no-rule-names-is-not-routed"),
    ],
)
def test_exact_method_matching(method: str, expected: str) -> None:
    assert _call("conformance-grpcroute-exact-method-matching", f"/{SVC}/{method}") == expected


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        pytest.param({"Version": "one"}, "grpc-infra-backend-v1", id="one-header"),
        pytest.param({"Version": "two"}, "grpc-infra-backend-v2", id="another-value"),
        pytest.param(
            {"Version": "two", "Color": "orange"},
            "grpc-infra-backend-v1",
            id="two-headers-outrank-one",
        ),
        pytest.param(
            {"Version": "two", "Color": "blue"},
            "grpc-infra-backend-v2",
            id="equal-counts-earlier-rule-wins",
        ),
        pytest.param({"Color": "orange"}, NOT_ROUTED, id="half-of-an-and-is-no-match"),
        pytest.param({"Some-Other-Header": "one"}, NOT_ROUTED, id="unnamed-header-no-match"),
        pytest.param({"Color": "blue"}, "grpc-infra-backend-v1", id="first-alternative"),
        pytest.param({"Color": "green"}, "grpc-infra-backend-v1", id="second-alternative"),
        pytest.param({"Color": "red"}, "grpc-infra-backend-v2", id="other-rule-first"),
        pytest.param({"Color": "yellow"}, "grpc-infra-backend-v2", id="other-rule-second"),
        pytest.param({"Color": "purple"}, NOT_ROUTED, id="no-alternative-matches"),
    ],
)
def test_header_matching(metadata: dict[str, str], expected: str) -> None:
    case = "conformance-grpcroute-header-matching"
    assert _call(case, f"/{SVC}/Echo", metadata=metadata) == expected


@pytest.mark.parametrize(
    ("host", "expected"),
    [
        pytest.param("bar.com", "grpc-infra-backend-v1", id="precise-listener"),
        pytest.param("foo.bar.com", "grpc-infra-backend-v2", id="precise-before-wildcard"),
        pytest.param("baz.bar.com", "grpc-infra-backend-v3", id="wildcard-listener"),
        pytest.param("multiple.prefixes.bar.com", "grpc-infra-backend-v3", id="wildcard-depth"),
        pytest.param("multiple.prefixes.foo.com", "grpc-infra-backend-v3", id="second-parent"),
        pytest.param("foo.com", NOT_ROUTED, id="wildcard-does-not-cover-its-base"),
        pytest.param("no.matching.host", NOT_ROUTED, id="no-listener-host"),
    ],
)
def test_listener_hostname_matching(host: str, expected: str) -> None:
    case = "conformance-grpcroute-listener-hostname-matching"
    assert _call(case, f"/{SVC}/Echo", host=host) == expected


def test_weighted_backends_apportion_calls_exactly() -> None:
    router, ports = _served("conformance-grpcroute-weight")
    outcome = router.match(ports[80], "gw.example.com", "POST", f"/{SVC}/Echo", {})
    assert not isinstance(outcome, Miss)
    counts = Counter(outcome.backends.pick().endpoints.split("/")[2] for _ in range(100))
    assert counts == {"grpc-infra-backend-v1": 70, "grpc-infra-backend-v2": 30}


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        pytest.param(f"/{SVC}/Echo", 0, id="service-and-method-is-exact"),
        pytest.param(f"/{SVC}/Other", 1, id="service-alone-is-a-prefix"),
        pytest.param(f"/{SVC}Other/EchoX", 3, id="service-prefix-is-segment-aware"),
        pytest.param("/other.Service/EchoTwo", 2, id="method-alone-under-any-service"),
        pytest.param("/other.GrpcEcho/Anything", 4, id="regex-service-any-method"),
        pytest.param("/a.B/EchoThree", 5, id="regex-method-any-service"),
        pytest.param("/a.B/Z", 6, id="no-method-match-is-every-call-and-ranks-last"),
        pytest.param("/not-a-grpc-path", None, id="not-two-segments-is-no-call"),
    ],
)
def test_method_match_lowering(path: str, rule: int | None) -> None:
    router, ports = _served("grpcroute-method-matches")
    outcome = router.match(ports[80], "lowering.example.com", "POST", path, {})
    assert (None if isinstance(outcome, Miss) else outcome.rule.id.rule_index) == rule


@pytest.mark.parametrize(
    ("port", "host", "expected"),
    [
        pytest.param(80, "a.example.com", "web", id="older-httproute-keeps-its-host"),
        pytest.param(80, "b.example.org", "grpc", id="disjoint-grpcroute-served-beside"),
        pytest.param(80, "c.example.net", "grpc", id="a-refused-route-holds-nothing"),
        pytest.param(8080, "shop.example.com", "grpc", id="older-grpcroute-keeps-listener"),
        pytest.param(8080, "x.example.com", "web", id="newer-route-kept-where-no-rival"),
    ],
)
def test_route_conflict_serves_the_older_route(port: int, host: str, expected: str) -> None:
    case = "grpcroute-httproute-route-conflict"
    assert _call(case, f"/{SVC}/Echo", host=host, port=port) == expected
