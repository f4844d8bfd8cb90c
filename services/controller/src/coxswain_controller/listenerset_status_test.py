"""ListenerSet status, a route's ListenerSet parent and the Gateway's attachedListenerSets reach
the API server.

Through the real `kubernetes` client against the devkit API emulator serving the standard
Gateway API v1.6 CRDs, with the real publisher, status writer and Event recorder: a ListenerSet
the Gateway admits gets Accepted and Programmed and one entry per listener (a conflicted one
`Accepted: False, Programmed: False, Conflicted: True` with HostnameConflict, the others counting
their routes), one from a namespace the Gateway does not admit `NotAllowed` with no entries, the
Gateway `attachedListenerSets: 1` and only its own listeners; an HTTPRoute naming the ListenerSet
gets a parents entry for it (kind ListenerSet), and the conflict a Warning Event on the set.
Then the Gateway stops admitting ListenerSets: the next pass writes both sets NotAllowed, the
count 0, and the route's ListenerSet parent NoMatchingParent. Leaves out the watches
(sources/kinds_test.py decides ListenerSet is watched where v1 serves it) and Programmed gating
(publish_test).
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
KINDS = (
    ("GatewayClass", "gatewayclasses"),
    ("Gateway", "gateways"),
    ("ListenerSet", "listenersets"),
    ("HTTPRoute", "httproutes"),
)


def _object(kind: str, name: str, spec: dict[str, Any], namespace: str = "shop") -> Any:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def _http(name: str, hostname: str) -> dict[str, Any]:
    return {"name": name, "port": 80, "protocol": "HTTP", "hostname": hostname}


def _gateway(admits: str) -> dict[str, Any]:
    return _object(
        "Gateway",
        "gw",
        {
            "gatewayClassName": "coxswain",
            "allowedListeners": {"namespaces": {"from": admits}},
            "listeners": [_http("web", "www.example.com")],
        },
    )


def _listener_set(name: str, namespace: str, *listeners: dict[str, Any]) -> Any:
    spec = {"parentRef": {"name": "gw", "namespace": "shop"}, "listeners": list(listeners)}
    return _object("ListenerSet", name, spec, namespace)


MANIFESTS: list[dict[str, Any]] = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}},
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}},
    {
        "apiVersion": f"{GROUP}/v1",
        "kind": "GatewayClass",
        "metadata": {"name": "coxswain"},
        "spec": {"controllerName": Options().gateway_controller},
    },
    _gateway("Same"),
    # The Gateway's own www.example.com comes first: the set's listener repeating it conflicts.
    _listener_set("apps", "shop", _http("api", "api.example.com"), _http("www", "www.example.com")),
    _listener_set("elsewhere", "team", _http("team", "team.example.com")),
    {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "api", "namespace": "shop"},
        "spec": {"ports": [{"name": "http", "port": 80}]},
    },
    _object(
        "HTTPRoute",
        "api",
        {
            "parentRefs": [{"group": GROUP, "kind": "ListenerSet", "name": "apps"}],
            "rules": [{"backendRefs": [{"name": "api", "port": 80}]}],
        },
    ),
]


@pytest.fixture
def api() -> Iterator[ThreadedApiServer]:
    with ThreadedApiServer() as server:
        server.call(lambda s: s.apply(crds.standard()))
        server.call(lambda s: s.apply(MANIFESTS))
        yield server


def _list(client: Any) -> Inputs:
    custom = kubernetes.client.CustomObjectsApi(client)
    core = kubernetes.client.CoreV1Api(client)
    objects: list[Any] = []
    for kind, plural in KINDS:
        listed: Any = custom.list_cluster_custom_object(GROUP, "v1", plural)
        objects += [{**item, "kind": kind} for item in listed["items"]]
    for kind, items in (
        ("Service", core.list_service_for_all_namespaces().items),
        ("Namespace", core.list_namespace().items),
    ):
        objects += [{**client.sanitize_for_serialization(i), "kind": kind} for i in items]
    return Inputs.from_objects(objects)


def _get(client: Any, plural: str, name: str, namespace: str = "shop") -> dict[str, Any]:
    api: Any = kubernetes.client.CustomObjectsApi(client)
    return dict(api.get_namespaced_custom_object(GROUP, "v1", namespace, plural, name))


def _conditions(conditions: list[dict[str, Any]]) -> dict[str, tuple[str, str]]:
    return {c["type"]: (c["status"], c["reason"]) for c in conditions}


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


async def test_listenersets_get_their_status_and_the_gateway_counts_them(
    controller: Controller, client: Any, api: ThreadedApiServer
) -> None:
    await _publish(controller, client)

    apps = await asyncio.to_thread(_get, client, "listenersets", "apps")
    assert _conditions(apps["status"]["conditions"]) == {
        "Accepted": ("True", "ListenersNotValid"),
        "Programmed": ("True", "Programmed"),
    }
    generation = apps["metadata"]["generation"]
    assert {c["observedGeneration"] for c in apps["status"]["conditions"]} == {generation}
    entries = {x["name"]: x for x in apps["status"]["listeners"]}
    assert _conditions(entries["www"]["conditions"]) == {
        "Accepted": ("False", "HostnameConflict"),
        "Programmed": ("False", "HostnameConflict"),
        "ResolvedRefs": ("True", "ResolvedRefs"),
        "Conflicted": ("True", "HostnameConflict"),
    }
    assert _conditions(entries["api"]["conditions"])["Programmed"] == ("True", "Programmed")
    assert {n: x["attachedRoutes"] for n, x in entries.items()} == {"api": 1, "www": 0}
    assert [k["kind"] for k in entries["api"]["supportedKinds"]] == ["HTTPRoute", "GRPCRoute"]

    elsewhere = await asyncio.to_thread(_get, client, "listenersets", "elsewhere", "team")
    assert _conditions(elsewhere["status"]["conditions"]) == {
        "Accepted": ("False", "NotAllowed"),
        "Programmed": ("False", "NotAllowed"),
    }
    assert not elsewhere["status"].get("listeners")

    gateway = await asyncio.to_thread(_get, client, "gateways", "gw")
    assert gateway["status"]["attachedListenerSets"] == 1
    assert [x["name"] for x in gateway["status"]["listeners"]] == ["web"]

    route = await asyncio.to_thread(_get, client, "httproutes", "api")
    (parent,) = route["status"]["parents"]
    assert parent["parentRef"]["kind"] == "ListenerSet" and parent["parentRef"]["name"] == "apps"
    assert _conditions(parent["conditions"])["Accepted"] == ("True", "Accepted")

    core = kubernetes.client.CoreV1Api(client)
    listed = await asyncio.to_thread(core.list_namespaced_event, "shop")
    (event,) = [e for e in listed.items if e.involved_object.kind == "ListenerSet"]
    assert (event.type, event.reason, event.involved_object.name) == (
        "Warning",
        "Rejected",
        "apps",
    )
    assert event.involved_object.api_version == f"{GROUP}/v1"
    assert "listener www: another listener on port 80 already serves" in str(event.message)

    # The Gateway stops admitting ListenerSets: both are refused, nothing is counted.
    api.call(lambda s: s.apply([_gateway("None")]))
    await _publish(controller, client)
    apps = await asyncio.to_thread(_get, client, "listenersets", "apps")
    assert _conditions(apps["status"]["conditions"])["Accepted"] == ("False", "NotAllowed")
    assert not apps["status"].get("listeners")
    gateway = await asyncio.to_thread(_get, client, "gateways", "gw")
    assert gateway["status"]["attachedListenerSets"] == 0
    route = await asyncio.to_thread(_get, client, "httproutes", "api")
    (parent,) = route["status"]["parents"]
    assert _conditions(parent["conditions"])["Accepted"] == ("False", "NoMatchingParent")
