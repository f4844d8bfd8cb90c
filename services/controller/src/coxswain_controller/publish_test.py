"""Publishing end to end inside the controller: translate → publish → status, gated on a proxy.

Through the real `kubernetes` client against the devkit API emulator, with a real discovery
server over mTLS and a test proxy speaking the protocol: a Gateway and HTTPRoute reach Accepted
and ResolvedRefs; the Gateway stays Programmed Pending (naming what it waits for) until the
proxy has acked the snapshot and reported its binds, then turns Programmed True; an edit moves
observedGeneration; nothing is written when nothing changed; a standby writes nothing.
Leaves out the watch machinery (sources/) and leader election (leader/).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import kubernetes
import pytest

from coxswain_controller.conftest import Controller, subscribe
from coxswain_controller.publish import Publisher
from coxswain_controller.status.writer import StatusWriter
from coxswain_controller.translate import Inputs, Options
from coxswain_devkit import crds
from coxswain_devkit.apiserver import ThreadedApiServer
from coxswain_proto import discovery as pb

WAIT = 15.0
GROUP, VERSION = "gateway.networking.k8s.io", "v1"

MANIFESTS: list[dict[str, Any]] = [
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}},
    {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "GatewayClass",
        "metadata": {"name": "coxswain"},
        "spec": {"controllerName": "coxswain-labs.dev/gateway-controller"},
    },
    {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "Gateway",
        "metadata": {"name": "gw", "namespace": "shop"},
        "spec": {
            "gatewayClassName": "coxswain",
            "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
        },
    },
    {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "HTTPRoute",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {
            "parentRefs": [{"name": "gw"}],
            "rules": [{"backendRefs": [{"name": "web", "port": 80}]}],
        },
    },
    {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
    },
    {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "web-1",
            "namespace": "shop",
            "labels": {"kubernetes.io/service-name": "web"},
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080}],
        "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": True}}],
    },
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
    discovery = kubernetes.client.DiscoveryV1Api(client)
    networking = kubernetes.client.NetworkingV1Api(client)
    objects: list[Any] = []
    for kind, plural in (
        ("GatewayClass", "gatewayclasses"),
        ("Gateway", "gateways"),
        ("HTTPRoute", "httproutes"),
    ):
        listed: Any = custom.list_cluster_custom_object(GROUP, VERSION, plural)
        for item in listed["items"]:
            objects.append({**item, "kind": kind})
    for kind, items in (
        ("Service", core.list_service_for_all_namespaces().items),
        ("Namespace", core.list_namespace().items),
        ("EndpointSlice", discovery.list_endpoint_slice_for_all_namespaces().items),
        ("Ingress", networking.list_ingress_for_all_namespaces().items),
        ("IngressClass", networking.list_ingress_class().items),
    ):
        objects += [{**client.sanitize_for_serialization(i), "kind": kind} for i in items]
    return Inputs.from_objects(objects)


def _get(client: Any, plural: str, name: str) -> dict[str, Any]:
    api: Any = kubernetes.client.CustomObjectsApi(client)
    return dict(api.get_namespaced_custom_object(GROUP, VERSION, "shop", plural, name))


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == kind)


class _Cache:
    """Stands in for the sources: the objects as last listed from the API server."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self.inputs = Inputs({})

    async def relist(self) -> None:
        self.inputs = await asyncio.to_thread(_list, self._client)


async def _publisher(
    controller: Controller, client: Any, options: Options | None = None
) -> tuple[Publisher, StatusWriter, _Cache, asyncio.Task[None]]:
    async def leader() -> bool:
        return controller.leadership.is_leader

    writer = StatusWriter(
        client, controller_name=Options().gateway_controller, confirm_leader=leader
    )
    cache = _Cache(client)
    await cache.relist()
    publisher = Publisher(
        inputs=lambda: cache.inputs,
        registry=controller.registry,
        nodes=controller.nodes,
        leadership=controller.leadership,
        options=options or Options(),
        writer=writer,
    )
    return publisher, writer, cache, asyncio.create_task(writer.run())


async def _until_programmed(client: Any) -> None:
    """Poll the API server (it offers this test no event to wait on), within a generous bound."""
    async with asyncio.timeout(WAIT):
        while True:
            gateway = await asyncio.to_thread(_get, client, "gateways", "gw")
            if _condition(gateway, "Programmed")["status"] == "True":
                return
            await asyncio.sleep(0.05)


async def _settled(writer: StatusWriter) -> None:
    await asyncio.sleep(0)
    await asyncio.wait_for(writer.idle.wait(), WAIT)


async def test_gateway_programmed_only_after_the_proxy_acks_and_binds(
    controller: Controller, client: Any
) -> None:
    publisher, writer, _, task = await _publisher(controller, client)
    try:
        await publisher.rebuild()
        await _settled(writer)
        gateway = await asyncio.to_thread(_get, client, "gateways", "gw")
        assert _condition(gateway, "Accepted")["status"] == "True"
        pending = _condition(gateway, "Programmed")
        assert (pending["status"], pending["reason"]) == ("False", "Pending")
        assert "waiting for a proxy serving SharedPool to connect" in pending["message"]
        route = await asyncio.to_thread(_get, client, "httproutes", "web")
        parent = route["status"]["parents"][0]
        assert parent["controllerName"] == "coxswain-labs.dev/gateway-controller"
        assert {c["type"]: c["status"] for c in parent["conditions"]} == {
            "Accepted": "True",
            "ResolvedRefs": "True",
        }

        call = controller.open()
        await call.write(subscribe("proxy-1"))
        message = await asyncio.wait_for(call.read(), WAIT)
        snapshot = message.snapshot
        listeners = next(r.gateway_listeners for r in snapshot.resources if r.gateway_listeners)
        await call.write(
            pb.ProxyMessage(ack=pb.Ack(version=snapshot.version, nonce=snapshot.nonce))
        )
        await _settled(writer)
        gateway = await asyncio.to_thread(_get, client, "gateways", "gw")
        assert "waiting for proxy-1 to bind" in _condition(gateway, "Programmed")["message"]

        bound = [pb.BoundPort(port=x.bind_port, protocol=x.protocol) for x in listeners.listeners]
        await call.write(pb.ProxyMessage(node_status=pb.NodeStatus(bound=bound)))
        await _until_programmed(client)
        programmed = _condition(
            await asyncio.to_thread(_get, client, "gateways", "gw"), "Programmed"
        )
        assert programmed["observedGeneration"] == gateway["metadata"]["generation"]
    finally:
        task.cancel()


async def _edit_route(client: Any, backend: str) -> None:
    custom = kubernetes.client.CustomObjectsApi(client)
    patch = {"spec": {"rules": [{"backendRefs": [{"name": backend, "port": 80}]}]}}
    await asyncio.to_thread(
        custom.patch_namespaced_custom_object, GROUP, VERSION, "shop", "httproutes", "web", patch
    )


async def test_edits_move_observed_generation_and_unchanged_passes_write_nothing(
    controller: Controller, client: Any
) -> None:
    publisher, writer, cache, task = await _publisher(controller, client)
    try:
        await publisher.rebuild()
        await _settled(writer)
        before = await asyncio.to_thread(_get, client, "httproutes", "web")
        await publisher.rebuild()
        await _settled(writer)
        again = await asyncio.to_thread(_get, client, "httproutes", "web")
        assert again["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]

        await _edit_route(client, "missing")
        await cache.relist()
        await publisher.rebuild()
        await _settled(writer)
        edited = await asyncio.to_thread(_get, client, "httproutes", "web")
        conditions = {c["type"]: c for c in edited["status"]["parents"][0]["conditions"]}
        assert edited["metadata"]["generation"] == before["metadata"]["generation"] + 1
        assert conditions["ResolvedRefs"]["observedGeneration"] == edited["metadata"]["generation"]
        assert (conditions["ResolvedRefs"]["status"], conditions["ResolvedRefs"]["reason"]) == (
            "False",
            "BackendNotFound",
        )
    finally:
        task.cancel()


async def test_a_standby_publishes_but_writes_no_status(
    controller: Controller, client: Any
) -> None:
    controller.leadership.set(False)
    publisher, writer, _, task = await _publisher(controller, client)
    try:
        await publisher.rebuild()
        await _settled(writer)
        assert controller.registry.seq == 1
        route = await asyncio.to_thread(_get, client, "httproutes", "web")
        assert "status" not in route or not route["status"].get("parents")
    finally:
        task.cancel()


def _publish_service(client: Any) -> None:
    core: Any = kubernetes.client.CoreV1Api(client)
    networking: Any = kubernetes.client.NetworkingV1Api(client)
    core.create_namespace({"metadata": {"name": "coxswain-system"}})
    service = core.create_namespaced_service(
        "coxswain-system",
        {"metadata": {"name": "coxswain-proxy"}, "spec": {"ports": [{"port": 80}]}},
    )
    service.status = {"loadBalancer": {"ingress": [{"ip": "203.0.113.10"}]}}
    core.replace_namespaced_service_status("coxswain-proxy", "coxswain-system", service)
    networking.create_ingress_class(
        {"metadata": {"name": "coxswain"}, "spec": {"controller": Options().ingress_controller}}
    )
    networking.create_namespaced_ingress(
        "shop",
        {
            "metadata": {"name": "site"},
            "spec": {
                "ingressClassName": "coxswain",
                "defaultBackend": {"service": {"name": "web", "port": {"number": 80}}},
            },
        },
    )


async def test_the_published_services_address_reaches_gateway_and_ingress_status(
    controller: Controller, client: Any
) -> None:
    await asyncio.to_thread(_publish_service, client)
    options = Options(published_service="coxswain-system/coxswain-proxy")
    publisher, writer, _, task = await _publisher(controller, client, options)
    try:
        await publisher.rebuild()
        await _settled(writer)
        gateway = await asyncio.to_thread(_get, client, "gateways", "gw")
        networking: Any = kubernetes.client.NetworkingV1Api(client)
        ingress = await asyncio.to_thread(networking.read_namespaced_ingress, "site", "shop")
    finally:
        task.cancel()
    assert gateway["status"]["addresses"] == [{"type": "IPAddress", "value": "203.0.113.10"}]
    assert [i.ip for i in ingress.status.load_balancer.ingress] == ["203.0.113.10"]


async def test_a_failed_pass_keeps_what_is_published_and_the_next_one_recovers(
    controller: Controller, client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from coxswain_controller import publish

    publisher, _, cache, task = await _publisher(controller, client)
    try:
        await publisher.rebuild()
        seq = controller.registry.seq
        assert publisher.result is not None
        served = controller.registry.current(next(iter(publisher.result.snapshots)))

        def broken(*_: Any) -> Any:
            raise RuntimeError("a bug in translation")

        real = publish.translate_pass
        monkeypatch.setattr(publish, "translate_pass", broken)
        await _edit_route(client, "missing")
        await cache.relist()
        await publisher.rebuild()  # logged and counted, not raised
        assert controller.registry.seq == seq
        assert publisher.result is not None
        assert controller.registry.current(next(iter(publisher.result.snapshots))) is served

        monkeypatch.setattr(publish, "translate_pass", real)
        await publisher.rebuild()
        assert controller.registry.seq == seq + 1  # the edit made while failing is published
    finally:
        task.cancel()
