"""TCPRoute, TLSRoute and UDPRoute status and Events reach the API server as an HTTPRoute's do.

Through the real `kubernetes` client against the devkit API emulator serving the experimental
Gateway API CRDs (the stream routes at v1alpha2 only), with the real publisher, status writer and
Event recorder: each route gets its parents entry (Accepted, ResolvedRefs, observedGeneration),
written at the version the API serves (the writer asks for TLSRoute at v1 first); a TCPRoute
naming a listener an older one carries is written Accepted: False, RouteConflict, with a Warning
Event; the Gateway's listeners list their protocol's kind and count the routes served. Leaves
out the watches (sources/, whose probe decides the stream kinds are watched) and Programmed
gating (publish_test).
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
GROUP = "gateway.networking.k8s.io"
STREAM_VERSION = "v1alpha2"  # what the experimental channel serves the stream routes at


def _object(kind: str, name: str, spec: dict[str, Any], version: str = "v1") -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{version}",
        "kind": kind,
        "metadata": {"name": name, "namespace": "shop"},
        "spec": spec,
    }


def _stream(kind: str, name: str, section: str, backend: str, port: int, **spec: Any) -> Any:
    return _object(
        kind,
        name,
        {
            "parentRefs": [{"name": "gw", "sectionName": section}],
            "rules": [{"backendRefs": [{"name": backend, "port": port}]}],
            **spec,
        },
        STREAM_VERSION,
    )


def _service(name: str, port: int, protocol: str = "TCP") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"ports": [{"name": "main", "port": port, "protocol": protocol}]},
    }


MANIFESTS: list[dict[str, Any]] = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}},
    {
        "apiVersion": f"{GROUP}/v1",
        "kind": "GatewayClass",
        "metadata": {"name": "coxswain"},
        "spec": {"controllerName": Options().gateway_controller},
    },
    _object(
        "Gateway",
        "gw",
        {
            "gatewayClassName": "coxswain",
            "listeners": [
                {"name": "db", "port": 5432, "protocol": "TCP"},
                {"name": "dns", "port": 53, "protocol": "UDP"},
                {"name": "tls", "port": 443, "protocol": "TLS", "tls": {"mode": "Passthrough"}},
            ],
        },
    ),
    _service("db", 5432),
    _service("dns", 53, "UDP"),
    _service("shop", 443),
    # Created within one second of each other: "{namespace}/{name}" decides, and "db" comes first.
    _stream("TCPRoute", "db", "db", "db", 5432),
    _stream("TCPRoute", "db-too", "db", "db", 5432),
    _stream("UDPRoute", "dns", "dns", "dns", 53),
    _stream("TLSRoute", "shop", "tls", "shop", 443, hostnames=["shop.example.com"]),
]
STREAM_KINDS = (("TCPRoute", "tcproutes"), ("TLSRoute", "tlsroutes"), ("UDPRoute", "udproutes"))


@pytest.fixture
def api() -> Iterator[ThreadedApiServer]:
    with ThreadedApiServer() as server:
        server.call(lambda s: s.apply(crds.experimental()))
        server.call(lambda s: s.apply(MANIFESTS))
        yield server


def _list(client: Any) -> Inputs:
    custom = kubernetes.client.CustomObjectsApi(client)
    core = kubernetes.client.CoreV1Api(client)
    objects: list[Any] = []
    listed: Any
    for kind, plural in (("GatewayClass", "gatewayclasses"), ("Gateway", "gateways")):
        listed = custom.list_cluster_custom_object(GROUP, "v1", plural)
        objects += [{**item, "kind": kind} for item in listed["items"]]
    for kind, plural in STREAM_KINDS:
        listed = custom.list_cluster_custom_object(GROUP, STREAM_VERSION, plural)
        objects += [{**item, "kind": kind} for item in listed["items"]]
    for kind, items in (
        ("Service", core.list_service_for_all_namespaces().items),
        ("Namespace", core.list_namespace().items),
    ):
        objects += [{**client.sanitize_for_serialization(i), "kind": kind} for i in items]
    return Inputs.from_objects(objects)


def _get(client: Any, plural: str, name: str, version: str = STREAM_VERSION) -> dict[str, Any]:
    api: Any = kubernetes.client.CustomObjectsApi(client)
    return dict(api.get_namespaced_custom_object(GROUP, version, "shop", plural, name))


def _conditions(obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    (parent,) = obj["status"]["parents"]
    return {c["type"]: (c["status"], c["reason"]) for c in parent["conditions"]}


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


async def test_stream_routes_get_their_status_and_a_conflict_its_event(
    controller: Controller, client: Any
) -> None:
    await _publish(controller, client)

    served = {"Accepted": ("True", "Accepted"), "ResolvedRefs": ("True", "ResolvedRefs")}
    for plural, name in (("tcproutes", "db"), ("udproutes", "dns"), ("tlsroutes", "shop")):
        route = await asyncio.to_thread(_get, client, plural, name)
        assert _conditions(route) == served, plural
        (parent,) = route["status"]["parents"]
        assert parent["controllerName"] == Options().gateway_controller
        assert parent["parentRef"]["name"] == "gw"
        generation = route["metadata"]["generation"]
        assert {c["observedGeneration"] for c in parent["conditions"]} == {generation}

    loser = await asyncio.to_thread(_get, client, "tcproutes", "db-too")
    assert _conditions(loser)["Accepted"] == ("False", "RouteConflict")

    core = kubernetes.client.CoreV1Api(client)
    listed = await asyncio.to_thread(core.list_namespaced_event, "shop")
    (event,) = [e for e in listed.items if e.involved_object.kind == "TCPRoute"]
    assert (event.type, event.reason, event.involved_object.name) == (
        "Warning",
        "Rejected",
        "db-too",
    )
    # Named at the current release's version (status/events.py): found by uid and name
    # whichever version the cluster serves.
    assert event.involved_object.api_version == f"{GROUP}/v1"
    assert "listener db carries TCPRoute shop/db" in str(event.message)

    gateway = await asyncio.to_thread(_get, client, "gateways", "gw", "v1")
    listeners = {x["name"]: x for x in gateway["status"]["listeners"]}
    assert {n: [k["kind"] for k in x["supportedKinds"]] for n, x in listeners.items()} == {
        "db": ["TCPRoute"],
        "dns": ["UDPRoute"],
        "tls": ["TLSRoute"],
    }
    # The conflicted TCPRoute is not served, so it is not counted.
    assert {n: x["attachedRoutes"] for n, x in listeners.items()} == {"db": 1, "dns": 1, "tls": 1}
