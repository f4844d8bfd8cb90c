"""A GRPCRoute's status and Events reach the API server, exactly as an HTTPRoute's do.

Through the real `kubernetes` client against the devkit API emulator serving the standard
Gateway API CRDs (GRPCRoute at v1), with the real publisher, status writer and Event recorder:
a GRPCRoute gets its parents entry (Accepted, ResolvedRefs, observedGeneration); one that
contends with an older HTTPRoute for a listener's hostname is written Accepted: False,
RouteConflict, with a Warning Event on it, while the HTTPRoute keeps Accepted: True; and the
Gateway's listener lists both kinds in supportedKinds. Leaves out the watches (sources/, whose
probe decides GRPCRoute is watched) and Programmed gating (publish_test).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest

from coxswain_controller.conftest import Controller
from coxswain_controller.publish import Publisher
from coxswain_controller.status.events import EventRecorder
from coxswain_controller.status.writer import StatusWriter
from coxswain_controller.translate import Inputs, Options
from coxswain_devkit import crds
from coxswain_devkit.apiserver import ThreadedApiServer

WAIT = 15.0
GROUP, VERSION = "gateway.networking.k8s.io", "v1"
SVC = "grpc.health.v1.Health"


def _gateway_api(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": kind,
        "metadata": {"name": name, "namespace": "shop"},
        "spec": spec,
    }


def _route(hostname: str, backend: str) -> dict[str, Any]:
    return {
        "parentRefs": [{"name": "gw"}],
        "hostnames": [hostname],
        "rules": [{"backendRefs": [{"name": backend, "port": 50051}]}],
    }


MANIFESTS: list[dict[str, Any]] = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}},
    {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "GatewayClass",
        "metadata": {"name": "coxswain"},
        "spec": {"controllerName": Options().gateway_controller},
    },
    _gateway_api(
        "Gateway",
        "gw",
        {
            "gatewayClassName": "coxswain",
            "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
        },
    ),
    {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "grpc", "namespace": "shop"},
        "spec": {"ports": [{"name": "grpc", "port": 50051, "targetPort": 50051}]},
    },
    _gateway_api("HTTPRoute", "web", _route("web.example.com", "grpc")),
]
# Created after the HTTPRoute. Creation times have whole seconds, so within one second the
# Gateway API's next criterion decides: "{namespace}/{name}" in order, and "web" < "wildcard".
GRPC_ROUTES = [
    _gateway_api(
        "GRPCRoute",
        "health",
        {
            **_route("grpc.example.com", "grpc"),
            "rules": [
                {
                    "matches": [{"method": {"service": SVC, "method": "Check"}}],
                    "backendRefs": [{"name": "grpc", "port": 50051}],
                }
            ],
        },
    ),
    _gateway_api("GRPCRoute", "wildcard", _route("*.example.com", "grpc")),
]


@pytest.fixture
def api() -> Iterator[ThreadedApiServer]:
    with ThreadedApiServer() as server:
        server.call(lambda s: s.apply(crds.standard()))
        server.call(lambda s: s.apply(MANIFESTS))
        server.call(lambda s: s.apply(GRPC_ROUTES))
        yield server


def _list(client: Any) -> Inputs:
    custom = kubernetes.client.CustomObjectsApi(client)
    core = kubernetes.client.CoreV1Api(client)
    objects: list[Any] = []
    for kind, plural in (
        ("GatewayClass", "gatewayclasses"),
        ("Gateway", "gateways"),
        ("HTTPRoute", "httproutes"),
        ("GRPCRoute", "grpcroutes"),
    ):
        listed: Any = custom.list_cluster_custom_object(GROUP, VERSION, plural)
        objects += [{**item, "kind": kind} for item in listed["items"]]
    for kind, items in (
        ("Service", core.list_service_for_all_namespaces().items),
        ("Namespace", core.list_namespace().items),
    ):
        objects += [{**client.sanitize_for_serialization(i), "kind": kind} for i in items]
    return Inputs.from_objects(objects)


def _get(client: Any, plural: str, name: str) -> dict[str, Any]:
    api: Any = kubernetes.client.CustomObjectsApi(client)
    return dict(api.get_namespaced_custom_object(GROUP, VERSION, "shop", plural, name))


def _parent(obj: dict[str, Any]) -> dict[str, Any]:
    (parent,) = obj["status"]["parents"]
    return parent


def _conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in _parent(obj)["conditions"]}


async def _publish(controller: Controller, client: Any) -> None:
    async def leader() -> bool:
        return True

    writer = StatusWriter(
        client, controller_name=Options().gateway_controller, confirm_leader=leader
    )
    inputs = await asyncio.to_thread(_list, client)
    publisher = Publisher(
        inputs=lambda: inputs,
        registry=controller.registry,
        nodes=controller.nodes,
        leadership=controller.leadership,
        options=Options(),
        writer=writer,
        events=EventRecorder(client, confirm_leader=leader),
    )
    task = asyncio.create_task(writer.run())
    try:
        await publisher.rebuild()
        await asyncio.sleep(0)
        await asyncio.wait_for(writer.idle.wait(), WAIT)
    finally:
        task.cancel()


async def test_a_grpcroute_gets_its_status_and_a_conflict_its_event(
    controller: Controller, client: Any
) -> None:
    await _publish(controller, client)

    health = await asyncio.to_thread(_get, client, "grpcroutes", "health")
    parent = _parent(health)
    assert parent["controllerName"] == Options().gateway_controller
    assert parent["parentRef"] == {"group": GROUP, "kind": "Gateway", "name": "gw"}
    assert _conditions(health) == {
        "Accepted": ("True", "Accepted"),
        "ResolvedRefs": ("True", "ResolvedRefs"),
    }
    generation = health["metadata"]["generation"]
    assert {c["observedGeneration"] for c in parent["conditions"]} == {generation}

    wildcard = await asyncio.to_thread(_get, client, "grpcroutes", "wildcard")
    assert _conditions(wildcard)["Accepted"] == ("False", "RouteConflict")
    web = await asyncio.to_thread(_get, client, "httproutes", "web")
    assert _conditions(web)["Accepted"] == ("True", "Accepted")

    core = kubernetes.client.CoreV1Api(client)
    listed = await asyncio.to_thread(core.list_namespaced_event, "shop")
    (event,) = [e for e in listed.items if e.involved_object.kind == "GRPCRoute"]
    assert (event.type, event.reason, event.involved_object.name) == (
        "Warning",
        "Rejected",
        "wildcard",
    )
    assert event.involved_object.api_version == f"{GROUP}/{VERSION}"
    assert "the older HTTPRoute shop/web" in str(event.message)

    gateway = await asyncio.to_thread(_get, client, "gateways", "gw")
    (listener,) = gateway["status"]["listeners"]
    assert [k["kind"] for k in listener["supportedKinds"]] == ["HTTPRoute", "GRPCRoute"]
    assert listener["attachedRoutes"] == 2  # the HTTPRoute and the served GRPCRoute
